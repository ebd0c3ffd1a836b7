//! Several transfers in flight on one endpoint, in nusb 0.2's shape: an [`Endpoint`] opened
//! from any [`UsbInterface`] ([`UsbInterface::endpoint`]) takes [`Buffer`]s with
//! [`Endpoint::submit`], gives each transfer's [`Completion`] (data, length and status, the data
//! kept when the status is an error) in submission order with [`Endpoint::next_complete`],
//! cancels with [`Endpoint::cancel_all`], and cancels what is still in flight when dropped.
//! Also the [`Timeout`] future behind [`UsbInterface::timeout`].
//!
//! The queue itself lives in the implementation (the simulator's bus, nusb's endpoint): this
//! file only counts what is pending and forwards to the trait's `queue_*` hooks. Nothing here
//! blocks or reads a clock.

use crate::{TransferError, UsbInterface};
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// How a queued endpoint moves data (nusb's `Bulk` and `Interrupt` endpoint types).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransferType {
    /// A bulk endpoint.
    Bulk,
    /// An interrupt endpoint.
    Interrupt,
}

/// A transfer's buffer, as `nusb::transfer::Buffer`: for an IN endpoint the number of bytes
/// requested ([`Buffer::new`]), for an OUT endpoint the bytes to send (`Buffer::from(vec)`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Buffer {
    data: Vec<u8>,
    requested_len: usize,
}

impl Buffer {
    /// A buffer for an IN transfer of up to `len` bytes.
    pub fn new(len: usize) -> Buffer {
        Buffer {
            data: Vec::new(),
            requested_len: len,
        }
    }

    /// The bytes an IN transfer asks for (an OUT buffer: its length).
    pub fn requested_len(&self) -> usize {
        self.requested_len
    }

    /// The bytes the buffer holds (an OUT buffer's payload).
    pub fn as_slice(&self) -> &[u8] {
        &self.data
    }

    /// The payload, taken.
    pub fn into_vec(self) -> Vec<u8> {
        self.data
    }
}

impl From<Vec<u8>> for Buffer {
    fn from(data: Vec<u8>) -> Buffer {
        Buffer {
            requested_len: data.len(),
            data,
        }
    }
}

/// A queued transfer's outcome, as `nusb::transfer::Completion`: its bytes (IN: what arrived;
/// OUT: empty), how many bytes crossed, and its status. On an error `buffer` and `actual_len`
/// keep what crossed before it (nothing received is dropped for the error's sake).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Completion {
    /// IN: the bytes received (`actual_len` of them). OUT: empty.
    pub buffer: Vec<u8>,
    /// The bytes transferred.
    pub actual_len: usize,
    /// `Ok` or why the transfer ended.
    pub status: Result<(), TransferError>,
}

impl Completion {
    /// A completion that carried nothing, with `status`.
    pub fn failed(status: TransferError) -> Completion {
        Completion {
            buffer: Vec::new(),
            actual_len: 0,
            status: Err(status),
        }
    }

    /// The bytes on success, the error otherwise (partial data dropped), as nusb's
    /// `Completion::into_result`.
    pub fn into_result(self) -> Result<Vec<u8>, TransferError> {
        self.status.map(|()| self.buffer)
    }
}

/// An endpoint with a queue of transfers, opened with [`UsbInterface::endpoint`]: nusb's
/// `Endpoint<Bulk|Interrupt, In|Out>`, the direction given by the address's bit 7. Completions
/// come in submission order; dropping the endpoint cancels what is still in flight (their
/// completions are discarded).
pub struct Endpoint<'a, I: UsbInterface + ?Sized> {
    iface: &'a I,
    address: u8,
    ty: TransferType,
    pending: usize,
}

impl<'a, I: UsbInterface + ?Sized> Endpoint<'a, I> {
    /// An endpoint over `iface` (the implementation has accepted it: `queue_open`).
    pub(crate) fn new(iface: &'a I, address: u8, ty: TransferType) -> Self {
        Endpoint {
            iface,
            address,
            ty,
            pending: 0,
        }
    }

    /// The endpoint's address (`0x81`: IN endpoint 1).
    pub fn endpoint_address(&self) -> u8 {
        self.address
    }

    /// Bulk or interrupt.
    pub fn transfer_type(&self) -> TransferType {
        self.ty
    }

    /// Transfers submitted whose completion was not yet taken.
    pub fn pending(&self) -> usize {
        self.pending
    }

    /// Submits a transfer; it is in flight at once, behind those already submitted. Its
    /// outcome (errors included) comes from [`Endpoint::next_complete`].
    pub fn submit(&mut self, buf: Buffer) {
        self.pending += 1;
        self.iface.queue_submit(self.address, self.ty, buf);
    }

    /// The oldest pending transfer's completion, once it completes. With nothing pending it
    /// gives at once a completion failed `Fault` (nusb panics there).
    pub fn next_complete(&mut self) -> NextComplete<'_, 'a, I> {
        NextComplete { ep: self }
    }

    /// Cancels every pending transfer: each still completes, in order, most with status
    /// `Cancelled` (one already done keeps its outcome); take them with
    /// [`Endpoint::next_complete`].
    pub fn cancel_all(&mut self) {
        if self.pending > 0 {
            self.iface.queue_cancel_all(self.address);
        }
    }

    /// Clears the endpoint's halt ([`UsbInterface::clear_halt`]): call it with nothing
    /// pending, after a transfer failed `Stall`.
    pub fn clear_halt(&mut self) -> impl Future<Output = Result<(), TransferError>> + '_ {
        self.iface.clear_halt(self.address)
    }
}

impl<I: UsbInterface + ?Sized> Drop for Endpoint<'_, I> {
    fn drop(&mut self) {
        self.iface.queue_close(self.address);
    }
}

/// The future of [`Endpoint::next_complete`].
pub struct NextComplete<'e, 'a, I: UsbInterface + ?Sized> {
    ep: &'e mut Endpoint<'a, I>,
}

impl<I: UsbInterface + ?Sized> Future for NextComplete<'_, '_, I> {
    type Output = Completion;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Completion> {
        let ep = &mut *self.ep;
        if ep.pending == 0 {
            return Poll::Ready(Completion::failed(TransferError::Fault));
        }
        let r = ep.iface.queue_poll(ep.address, cx);
        if r.is_ready() {
            ep.pending -= 1;
        }
        r
    }
}

/// The future of [`UsbInterface::timeout`]: the wrapped future's output, or `Timeout` once the
/// platform's sleep ends first (the wrapped future is then dropped, which cancels a transfer).
pub struct Timeout<F, S> {
    fut: Pin<Box<F>>,
    sleep: Pin<Box<S>>,
}

impl<F: Future, S: Future<Output = ()>> Timeout<F, S> {
    pub(crate) fn new(fut: F, sleep: S) -> Self {
        Timeout {
            fut: Box::pin(fut),
            sleep: Box::pin(sleep),
        }
    }
}

impl<F: Future, S: Future<Output = ()>> Future for Timeout<F, S> {
    type Output = Result<F::Output, TransferError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        if let Poll::Ready(v) = self.fut.as_mut().poll(cx) {
            return Poll::Ready(Ok(v));
        }
        match self.sleep.as_mut().poll(cx) {
            Poll::Ready(()) => Poll::Ready(Err(TransferError::Timeout)),
            Poll::Pending => Poll::Pending,
        }
    }
}
