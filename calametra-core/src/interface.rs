//! The driver's [`Interface`]: the `nusb`-shaped API a driver receives for a simulated device
//! ([`crate::world::DeviceHandle::interface`]), implementing [`calametra_usb::UsbInterface`].
//! Each call returns a transfer's future, which submits the transfer to the world at its first
//! poll and completes on the virtual clock; a future dropped before completion cancels its
//! transfer. Nothing here reads the wall clock.

use crate::bus::{out_len, XKind};
use crate::clock::{nanos, Nanos};
use crate::context::current;
use crate::device::Device;
use crate::world::{DeviceHandle, World};
use calametra_usb::{ControlIn, ControlOut, Setup, TransferError, UsbInterface};
use std::cell::RefCell;
use std::future::Future;
use std::marker::PhantomData;
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

/// What a transfer's future gives for the bytes of a transfer that succeeded: the bytes (an
/// IN transfer, a raw control transfer), nothing (a control OUT) or the count accepted (a bulk
/// OUT, [`out_len`]). The future of each [`Interface`] call is a [`Transfer`] of its outcome,
/// returned as it is (no `async fn` wrapped around it: one state machine a poll fewer).
trait Outcome {
    fn from_bytes(v: Vec<u8>) -> Self;
}

impl Outcome for Vec<u8> {
    #[inline(always)]
    fn from_bytes(v: Vec<u8>) -> Self {
        v
    }
}

impl Outcome for () {
    #[inline(always)]
    fn from_bytes(_: Vec<u8>) -> Self {}
}

impl Outcome for usize {
    #[inline(always)]
    fn from_bytes(v: Vec<u8>) -> Self {
        out_len(&v)
    }
}

/// A transfer's future: submits the transfer at its first poll (and notes its waker then, in
/// one borrow of the world: [`World::submit_polled`]), then polls it until it completes, and
/// gives its [`Outcome`] `O`. Dropped before completion, it cancels the transfer (the host
/// gives up on it).
struct Transfer<'a, O> {
    iface: &'a Interface,
    /// The transfer, until it is submitted.
    kind: Option<XKind>,
    timeout: Option<Duration>,
    /// The submitted transfer's id and deadline.
    submitted: Option<(u64, Option<Nanos>)>,
    done: bool,
    outcome: PhantomData<fn() -> O>,
}

impl<O> Transfer<'_, O> {
    /// [`Future::poll`] but for the outcome: the transfer's result bytes (one function for
    /// every outcome).
    fn poll_bytes(&mut self, cx: &mut Context<'_>) -> Poll<Result<Vec<u8>, TransferError>> {
        let mut w = self.iface.world.borrow_mut();
        let r = match self.submitted {
            Some((xid, deadline)) => w.poll_xfer(xid, deadline, cx.waker()),
            None => {
                let Some(kind) = self.kind.take() else {
                    return Poll::Ready(Err(TransferError::Cancelled));
                };
                let deadline = self.timeout.map(|d| w.core.now.saturating_add(nanos(d)));
                let (xid, r) = w.submit_polled(
                    self.iface.dev,
                    self.iface.generation,
                    kind,
                    deadline,
                    cx.waker(),
                );
                self.submitted = Some((xid, deadline));
                r
            }
        };
        self.done = r.is_ready();
        r
    }
}

impl<O: Outcome> Future for Transfer<'_, O> {
    type Output = Result<O, TransferError>;

    #[inline]
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        self.poll_bytes(cx).map(|r| r.map(O::from_bytes))
    }
}

impl<O> Drop for Transfer<'_, O> {
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

    fn transfer<O>(&self, kind: XKind, timeout: Option<Duration>) -> Transfer<'_, O> {
        Transfer {
            iface: self,
            kind: Some(kind),
            timeout,
            submitted: None,
            done: false,
            outcome: PhantomData,
        }
    }

    // The calls below build their transfer when called (the request's setup, an OUT payload
    // copied into a spare buffer) and return its future; nothing is submitted until it is
    // first polled.

    /// A control IN transfer.
    pub fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> + '_ {
        self.transfer(
            XKind::Control {
                setup: req.setup(),
                data: Vec::new(),
            },
            Some(timeout),
        )
    }

    /// A control OUT transfer.
    pub fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), TransferError>> + '_ {
        self.transfer(
            XKind::Control {
                setup: req.setup(),
                data: self.out_data(req.data),
            },
            Some(timeout),
        )
    }

    /// A control transfer from raw setup bytes (bridges and replays).
    pub fn control_raw(
        &self,
        setup: Setup,
        data: Vec<u8>,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> + '_ {
        self.transfer(XKind::Control { setup, data }, Some(timeout))
    }

    /// A bulk OUT transfer; returns the bytes accepted.
    pub fn bulk_out(
        &self,
        ep: u8,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<usize, TransferError>> + '_ {
        self.transfer(XKind::Out { ep, data }, None)
    }

    /// A bulk IN transfer of up to `len` bytes.
    pub fn bulk_in(
        &self,
        ep: u8,
        len: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> + '_ {
        self.transfer(
            XKind::In {
                ep,
                len,
                intr: false,
            },
            None,
        )
    }

    /// An interrupt IN transfer of up to `len` bytes.
    pub fn interrupt_in(
        &self,
        ep: u8,
        len: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> + '_ {
        self.transfer(
            XKind::In {
                ep,
                len,
                intr: true,
            },
            None,
        )
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
        Interface::control_out(self, req, timeout)
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

#[cfg(test)]
mod tests {
    use crate::device::Loopback;
    use crate::fault::FaultPlan;
    use crate::{run, RunConfig};
    use std::cell::RefCell;
    use std::rc::Rc;
    use std::time::Duration;

    const T: Duration = Duration::from_millis(10);

    /// A call builds its transfer's future and nothing more: one dropped unpolled submits
    /// nothing (no record, nothing stored), one polled gives the call's outcome (nothing for
    /// a control OUT, the bytes for a control IN, the count accepted for a bulk OUT).
    #[test]
    fn a_transfer_is_submitted_at_its_first_poll_and_gives_its_calls_outcome() {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let seen2 = seen.clone();
        let r = run(
            RunConfig {
                keep_trace: true,
                faults: FaultPlan::default(),
                ..RunConfig::default()
            },
            &move |sim| {
                let dev = sim.attach(Loopback::default());
                let iface = dev.interface();
                let seen = seen2.clone();
                sim.spawn("driver", async move {
                    let (store, load) = (Loopback::store, Loopback::load(8));
                    drop(iface.control_out(store(&[9, 9]), T));
                    let stored = iface.control_in(load, T).await;
                    seen.borrow_mut().push(format!("{stored:?}"));
                    let unit: Result<(), _> = iface.control_out(store(&[1, 2, 3]), T).await;
                    seen.borrow_mut().push(format!("{unit:?}"));
                    let stored = iface.control_in(load, T).await;
                    seen.borrow_mut().push(format!("{stored:?}"));
                    let n: Result<usize, _> = iface.bulk_out(0x01, vec![7; 5]).await;
                    seen.borrow_mut().push(format!("{n:?}"));
                });
            },
        );
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(
            *seen.borrow(),
            ["Ok([])", "Ok(())", "Ok([1, 2, 3])", "Ok(5)"],
        );
        let transfers = r
            .lines
            .iter()
            .filter(|l| l.contains("\"kind\":\"transfer\""))
            .count();
        assert_eq!(transfers, 4, "the dropped future submitted nothing");
    }
}
