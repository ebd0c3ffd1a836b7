//! [`UsbInterface`] over a claimed `nusb::Interface` (feature `nusb`): the same driver on a real
//! device through Linux usbfs, macOS IOKit or WinUSB.
//!
//! [`NusbInterface::open`] finds a device by vendor and product id, opens it and claims an
//! interface (detaching a kernel driver if one is bound). `sleep` is a wall-clock timer (a
//! helper thread per sleep) and [`block_on`] a minimal executor, so a driver needs no async
//! runtime; any executor (`pollster`, `futures::executor`, tokio) runs the driver's futures too.
//!
//! A transfer whose future is dropped (the driver gave up waiting) does not lose the endpoint:
//! an IN transfer stays submitted and the next read on that endpoint takes its completion, so a
//! packet that arrives between two reads is not lost; an OUT transfer is cancelled and the next
//! write waits for the cancellation before submitting. One transfer at a time per endpoint.
//!
//! ```no_run
//! use calametra_usb::nusb::{block_on, NusbInterface};
//! use calametra_usb::{ControlIn, ControlType, Recipient, UsbInterface};
//! use std::time::Duration;
//!
//! let iface = NusbInterface::open(0x1209, 0x0001, 0)?;
//! let req = ControlIn { control_type: ControlType::Class, recipient: Recipient::Interface,
//!                       request: 3, value: 0, index: 0, length: 6 };
//! let status = block_on(iface.control_in(req, Duration::from_millis(500)));
//! println!("{status:?}");
//! # Ok::<(), String>(())
//! ```

#![allow(
    clippy::disallowed_methods,
    reason = "a real bus: sleeps are wall-clock timers on their own threads (never simulated)"
)]

use crate::{ControlIn, ControlOut, ControlType, Recipient, TransferError, UsbInterface};
use ::nusb::transfer::{self as nt, Buffer, Bulk, In, Interrupt, Out};
use ::nusb::MaybeFuture;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::{Future, IntoFuture};
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

type Slot<T, D> = RefCell<BTreeMap<u8, ::nusb::Endpoint<T, D>>>;

struct Inner {
    device: ::nusb::Device,
    iface: ::nusb::Interface,
    bulk_out: Slot<Bulk, Out>,
    bulk_in: Slot<Bulk, In>,
    intr_in: Slot<Interrupt, In>,
}

/// A claimed interface of a real device. Clones share the interface and its endpoints.
#[derive(Clone)]
pub struct NusbInterface {
    inner: Rc<Inner>,
    time_scale: u32,
}

impl NusbInterface {
    /// Wraps an interface already claimed from `device`.
    pub fn new(device: ::nusb::Device, iface: ::nusb::Interface) -> Self {
        NusbInterface {
            inner: Rc::new(Inner {
                device,
                iface,
                bulk_out: RefCell::new(BTreeMap::new()),
                bulk_in: RefCell::new(BTreeMap::new()),
                intr_in: RefCell::new(BTreeMap::new()),
            }),
            time_scale: 1,
        }
    }

    /// Opens the first device with `vid:pid` and claims `interface` (detaching a kernel driver).
    pub fn open(vid: u16, pid: u16, interface: u8) -> Result<Self, String> {
        let info = ::nusb::list_devices()
            .wait()
            .map_err(|e| format!("listing USB devices: {e}"))?
            .find(|d| d.vendor_id() == vid && d.product_id() == pid)
            .ok_or_else(|| format!("no device {vid:04x}:{pid:04x} is connected"))?;
        let device = info
            .open()
            .wait()
            .map_err(|e| format!("opening {vid:04x}:{pid:04x}: {e}"))?;
        let iface = device
            .detach_and_claim_interface(interface)
            .wait()
            .map_err(|e| format!("claiming interface {interface}: {e}"))?;
        Ok(NusbInterface::new(device, iface))
    }

    /// The device, for what [`UsbInterface`] does not cover (descriptors, configurations).
    pub fn device(&self) -> &::nusb::Device {
        &self.inner.device
    }

    /// The claimed interface.
    pub fn interface(&self) -> &::nusb::Interface {
        &self.inner.iface
    }

    /// Multiplies every timeout and sleep the driver asks for by `factor` (at least 1): for a
    /// bus slower than the device's own (an emulator, a USB/IP link).
    pub fn with_time_scale(mut self, factor: u32) -> Self {
        self.time_scale = factor.max(1);
        self
    }

    fn scaled(&self, d: Duration) -> Duration {
        d.saturating_mul(self.time_scale)
    }
}

fn map_err(e: nt::TransferError) -> TransferError {
    match e {
        nt::TransferError::Cancelled => TransferError::Cancelled,
        nt::TransferError::Stall => TransferError::Stall,
        nt::TransferError::Disconnected => TransferError::Disconnected,
        _ => TransferError::Fault,
    }
}

/// nusb reports a control transfer whose timeout passed as cancelled.
fn map_control_err(e: nt::TransferError) -> TransferError {
    match e {
        nt::TransferError::Cancelled => TransferError::Timeout,
        other => map_err(other),
    }
}

fn control_type(t: ControlType) -> nt::ControlType {
    match t {
        ControlType::Standard => nt::ControlType::Standard,
        ControlType::Class => nt::ControlType::Class,
        ControlType::Vendor => nt::ControlType::Vendor,
    }
}

fn recipient(r: Recipient) -> nt::Recipient {
    match r {
        Recipient::Device => nt::Recipient::Device,
        Recipient::Interface => nt::Recipient::Interface,
        Recipient::Endpoint => nt::Recipient::Endpoint,
        Recipient::Other => nt::Recipient::Other,
    }
}

/// An endpoint lent out of its slot for one transfer; dropping it (the transfer done, or its
/// future dropped half-way) puts it back, cancelling what is still in flight first when
/// `cancel_on_drop` (OUT) and leaving it submitted otherwise (IN).
struct Lent<'a, T: nt::EndpointType, D: nt::EndpointDirection> {
    slot: &'a Slot<T, D>,
    ep: u8,
    endpoint: Option<::nusb::Endpoint<T, D>>,
    cancel_on_drop: bool,
}

impl<T: nt::EndpointType, D: nt::EndpointDirection> Lent<'_, T, D> {
    fn get(&mut self) -> Result<&mut ::nusb::Endpoint<T, D>, TransferError> {
        self.endpoint.as_mut().ok_or(TransferError::Fault)
    }
}

impl<T: nt::EndpointType, D: nt::EndpointDirection> Drop for Lent<'_, T, D> {
    fn drop(&mut self) {
        if let Some(mut e) = self.endpoint.take() {
            if self.cancel_on_drop && e.pending() > 0 {
                e.cancel_all();
            }
            self.slot.borrow_mut().insert(self.ep, e);
        }
    }
}

/// Lends the endpoint out of its slot (opening it the first time) for one transfer; a second
/// transfer on an endpoint already lent fails `Fault`.
fn lend<'a, T: nt::EndpointType, D: nt::EndpointDirection>(
    iface: &::nusb::Interface,
    slot: &'a Slot<T, D>,
    ep: u8,
    cancel_on_drop: bool,
) -> Result<Lent<'a, T, D>, TransferError> {
    let taken = slot.borrow_mut().remove(&ep);
    let endpoint = match taken {
        Some(e) => e,
        None => iface
            .endpoint::<T, D>(ep)
            .map_err(|_| TransferError::Fault)?,
    };
    Ok(Lent {
        slot,
        ep,
        endpoint: Some(endpoint),
        cancel_on_drop,
    })
}

/// Rounds an IN length up to whole packets, as nusb requires.
fn in_len(len: usize, mps: usize) -> usize {
    let mps = mps.max(1);
    len.max(1).div_ceil(mps) * mps
}

/// One IN transfer of up to `len` bytes, or the completion of the one a dropped read left
/// submitted.
async fn read_in<T: nt::BulkOrInterrupt>(
    iface: &::nusb::Interface,
    slot: &Slot<T, In>,
    ep: u8,
    len: usize,
) -> Result<Vec<u8>, TransferError> {
    let mut lent = lend(iface, slot, ep, false)?;
    let e = lent.get()?;
    if e.pending() == 0 {
        e.submit(Buffer::new(in_len(len, e.max_packet_size())));
    }
    let c = e.next_complete().await;
    drop(lent);
    c.status.map_err(map_err)?;
    let mut v = c.buffer.into_vec();
    v.truncate(c.actual_len.min(len));
    Ok(v)
}

impl UsbInterface for NusbInterface {
    async fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransferError> {
        let r = nt::ControlIn {
            control_type: control_type(req.control_type),
            recipient: recipient(req.recipient),
            request: req.request,
            value: req.value,
            index: req.index,
            length: req.length,
        };
        self.inner
            .iface
            .control_in(r, self.scaled(timeout))
            .into_future()
            .await
            .map_err(map_control_err)
    }

    async fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> Result<(), TransferError> {
        let r = nt::ControlOut {
            control_type: control_type(req.control_type),
            recipient: recipient(req.recipient),
            request: req.request,
            value: req.value,
            index: req.index,
            data: req.data,
        };
        self.inner
            .iface
            .control_out(r, self.scaled(timeout))
            .into_future()
            .await
            .map_err(map_control_err)
    }

    async fn bulk_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        let mut lent = lend(&self.inner.iface, &self.inner.bulk_out, ep, true)?;
        let e = lent.get()?;
        // A write whose caller gave up was cancelled: let the cancellation land first.
        while e.pending() > 0 {
            let _ = e.next_complete().await;
        }
        e.submit(Buffer::from(data));
        let c = e.next_complete().await;
        drop(lent);
        c.status.map_err(map_err)?;
        Ok(c.actual_len)
    }

    async fn bulk_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        read_in(&self.inner.iface, &self.inner.bulk_in, ep, len).await
    }

    async fn interrupt_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        read_in(&self.inner.iface, &self.inner.intr_in, ep, len).await
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        Sleep {
            deadline: Instant::now() + self.scaled(d),
            armed: None,
        }
    }

    /// A USB bus reset of the device (`nusb::Device::reset`). The device re-enumerates: open
    /// it and claim the interface again afterwards.
    async fn reset(&self) -> Result<(), TransferError> {
        self.inner
            .device
            .reset()
            .into_future()
            .await
            .map_err(|_| TransferError::Fault)
    }
}

/// A wall-clock sleep: a timer thread wakes the task at the deadline.
struct Sleep {
    deadline: Instant,
    armed: Option<Arc<Mutex<Option<Waker>>>>,
}

impl Future for Sleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.deadline {
            return Poll::Ready(());
        }
        match &self.armed {
            Some(slot) => {
                if let Ok(mut w) = slot.lock() {
                    *w = Some(cx.waker().clone());
                }
            }
            None => {
                let slot = Arc::new(Mutex::new(Some(cx.waker().clone())));
                let (s2, deadline) = (slot.clone(), self.deadline);
                std::thread::spawn(move || {
                    std::thread::sleep(deadline.saturating_duration_since(Instant::now()));
                    if let Some(w) = s2.lock().ok().and_then(|mut w| w.take()) {
                        w.wake();
                    }
                });
                self.armed = Some(slot);
            }
        }
        Poll::Pending
    }
}

struct ThreadWaker(std::thread::Thread);

impl Wake for ThreadWaker {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
    fn wake_by_ref(self: &Arc<Self>) {
        self.0.unpark();
    }
}

/// Runs a future to completion on this thread (a minimal executor for a driver on hardware).
pub fn block_on<F: Future>(fut: F) -> F::Output {
    let mut fut = pin!(fut);
    let waker = Waker::from(Arc::new(ThreadWaker(std::thread::current())));
    let mut cx = Context::from_waker(&waker);
    loop {
        if let Poll::Ready(v) = fut.as_mut().poll(&mut cx) {
            return v;
        }
        std::thread::park();
    }
}

#[cfg(test)]
mod tests {
    use super::in_len;

    #[test]
    fn in_lengths_round_up_to_whole_packets() {
        assert_eq!(in_len(0, 64), 64);
        assert_eq!(in_len(64, 64), 64);
        assert_eq!(in_len(65, 64), 128);
        assert_eq!(in_len(10, 0), 10);
    }
}
