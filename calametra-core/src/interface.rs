//! The driver's [`Interface`]: the `nusb`-shaped API a driver receives for a simulated device
//! ([`crate::world::DeviceHandle::interface`]), implementing [`calametra_usb::UsbInterface`].
//! Each call submits a transfer to the world and awaits its completion on the virtual clock; a
//! future dropped before completion cancels its transfer. Nothing here reads the wall clock.

use crate::bus::{out_len, XKind};
use crate::clock::{nanos, Nanos};
use crate::context::current;
use crate::device::Device;
use crate::world::{DeviceHandle, World};
use calametra_usb::{ControlIn, ControlOut, Setup, TransferError, UsbInterface};
use std::cell::RefCell;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};
use std::time::Duration;

impl<D: Device> DeviceHandle<D> {
    /// The driver-facing interface of this device (interface 0 claimed), valid until the
    /// device is disconnected. Call it while building a scenario or from a task.
    pub fn interface(&self) -> Interface {
        let world = current();
        let generation = world.borrow().devices[self.id].generation;
        Interface {
            world,
            dev: self.id,
            generation,
        }
    }
}

/// The simulator's interface to a device: the `nusb`-shaped API a driver receives.
#[derive(Clone)]
pub struct Interface {
    world: Rc<RefCell<World>>,
    dev: usize,
    generation: u32,
}

/// A transfer's future: submits the transfer at its first poll (and notes its waker then, in
/// one borrow of the world: [`World::submit_polled`]), then polls it until it completes. Dropped
/// before completion, it cancels the transfer (the host gives up on it).
struct Transfer<'a> {
    iface: &'a Interface,
    /// The transfer, until it is submitted.
    kind: Option<XKind>,
    timeout: Option<Duration>,
    /// The submitted transfer's id and deadline.
    submitted: Option<(u64, Option<Nanos>)>,
    done: bool,
}

impl Future for Transfer<'_> {
    type Output = Result<Vec<u8>, TransferError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        let mut w = this.iface.world.borrow_mut();
        let r = match this.submitted {
            Some((xid, deadline)) => w.poll_xfer(xid, deadline, cx.waker()),
            None => {
                let Some(kind) = this.kind.take() else {
                    return Poll::Ready(Err(TransferError::Cancelled));
                };
                let deadline = this.timeout.map(|d| w.core.now.saturating_add(nanos(d)));
                let (xid, r) = w.submit_polled(
                    this.iface.dev,
                    this.iface.generation,
                    kind,
                    deadline,
                    cx.waker(),
                );
                this.submitted = Some((xid, deadline));
                r
            }
        };
        this.done = r.is_ready();
        r
    }
}

impl Drop for Transfer<'_> {
    fn drop(&mut self) {
        if let (Some((xid, _)), false) = (self.submitted, self.done) {
            if let Ok(mut w) = self.iface.world.try_borrow_mut() {
                w.cancel(xid);
            }
        }
    }
}

impl Interface {
    /// An OUT payload's buffer: a spare one of the world's transfer table when the world is
    /// free to lend one (no allocation a control OUT once it has spares), or a new one.
    fn out_data(&self, data: &[u8]) -> Vec<u8> {
        if data.is_empty() {
            return Vec::new();
        }
        match self.world.try_borrow_mut() {
            Ok(mut w) => w.core.transfers.spare_bytes(data),
            Err(_) => data.to_vec(),
        }
    }

    fn transfer(&self, kind: XKind, timeout: Option<Duration>) -> Transfer<'_> {
        Transfer {
            iface: self,
            kind: Some(kind),
            timeout,
            submitted: None,
            done: false,
        }
    }

    /// A control IN transfer.
    pub async fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransferError> {
        self.transfer(
            XKind::Control {
                setup: req.setup(),
                data: Vec::new(),
            },
            Some(timeout),
        )
        .await
    }

    /// A control OUT transfer.
    pub async fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> Result<(), TransferError> {
        self.transfer(
            XKind::Control {
                setup: req.setup(),
                data: self.out_data(req.data),
            },
            Some(timeout),
        )
        .await
        .map(|_| ())
    }

    /// A control transfer from raw setup bytes (bridges and replays).
    pub async fn control_raw(
        &self,
        setup: Setup,
        data: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransferError> {
        self.transfer(XKind::Control { setup, data }, Some(timeout))
            .await
    }

    /// A bulk OUT transfer; returns the bytes accepted.
    pub async fn bulk_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        self.transfer(XKind::Out { ep, data }, None)
            .await
            .map(|v| out_len(&v))
    }

    /// A bulk IN transfer of up to `len` bytes.
    pub async fn bulk_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        self.transfer(
            XKind::In {
                ep,
                len,
                intr: false,
            },
            None,
        )
        .await
    }

    /// An interrupt IN transfer of up to `len` bytes.
    pub async fn interrupt_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        self.transfer(
            XKind::In {
                ep,
                len,
                intr: true,
            },
            None,
        )
        .await
    }

    /// Resets the device (a USB bus reset, as `nusb::Device::reset`); this interface stays
    /// valid. Takes the bus's control-transfer time.
    pub async fn reset(&self) -> Result<(), TransferError> {
        let at = {
            let w = self.world.borrow();
            if !w.devices[self.dev].attached || w.devices[self.dev].generation != self.generation {
                return Err(TransferError::Disconnected);
            }
            w.core.now.saturating_add(w.core.timing.control_ns)
        };
        crate::exec::sleep_until(at).await;
        let mut w = self.world.borrow_mut();
        if w.devices[self.dev].generation != self.generation {
            return Err(TransferError::Disconnected);
        }
        w.reset_index(self.dev);
        Ok(())
    }
}

impl UsbInterface for Interface {
    fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        Interface::control_in(self, req, timeout)
    }
    fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), TransferError>> {
        let data = self.out_data(req.data);
        let setup = req.setup();
        async move {
            self.transfer(XKind::Control { setup, data }, Some(timeout))
                .await
                .map(|_| ())
        }
    }
    fn bulk_out(
        &self,
        ep: u8,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<usize, TransferError>> {
        Interface::bulk_out(self, ep, data)
    }
    fn bulk_in(&self, ep: u8, len: usize) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        Interface::bulk_in(self, ep, len)
    }
    fn interrupt_in(
        &self,
        ep: u8,
        len: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        Interface::interrupt_in(self, ep, len)
    }
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        crate::exec::sleep(d)
    }
    fn reset(&self) -> impl Future<Output = Result<(), TransferError>> {
        Interface::reset(self)
    }
}
