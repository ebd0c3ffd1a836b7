//! The driver's [`Interface`]: the `nusb`-shaped API a driver receives for a simulated device
//! ([`crate::world::DeviceHandle::interface`]), implementing [`calametra_usb::UsbInterface`].
//! Each call returns a transfer's future, which submits the transfer to the world at its first
//! poll and completes on the virtual clock; a future dropped before completion cancels its
//! transfer. Queued transfers ([`calametra_usb::Endpoint`]) are submitted when the driver
//! submits them, several in flight on one endpoint, their ids kept per endpoint in the
//! interface ([`Queues`]). `clear_halt` and `set_alt_setting` are the standard control requests
//! they are on the wire (sites `ctrl.clear_feature#n`, `ctrl.set_interface#n`), answered by the
//! model; the bus keeps the halt (`world::DeviceSlot::halted`). Nothing here reads the wall
//! clock.

use crate::bus::{out_len, XKind};
use crate::clock::{nanos, Nanos};
use crate::context::current;
use crate::device::Device;
use crate::world::{DeviceHandle, World};
use calametra_usb::{
    Buffer, Completion, ControlIn, ControlOut, Descriptors, Setup, TransferError, TransferType,
    UsbInterface,
};
use std::cell::RefCell;
use std::collections::VecDeque;
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
        Interface::new(world, self.id, generation)
    }
}

/// The simulator's interface to a device: the `nusb`-shaped API a driver receives. A clone
/// shares the device, not the endpoints opened for queued transfers (as nusb, where an
/// endpoint is opened once).
pub struct Interface {
    world: Rc<RefCell<World>>,
    dev: usize,
    generation: u32,
    queues: Queues,
}

impl Clone for Interface {
    fn clone(&self) -> Self {
        Interface::new(self.world.clone(), self.dev, self.generation)
    }
}

/// The endpoints opened for queued transfers: each endpoint's address and its transfers' ids
/// in submission order. Empty (no allocation) until an endpoint is opened.
#[derive(Default)]
struct Queues(RefCell<Vec<(u8, VecDeque<u64>)>>);

impl Queues {
    fn with<R>(&self, ep: u8, f: impl FnOnce(&mut VecDeque<u64>) -> R) -> Option<R> {
        let mut q = self.0.borrow_mut();
        q.iter_mut().find(|(e, _)| *e == ep).map(|(_, ids)| f(ids))
    }
}

/// Linux's timeout for the control requests usbfs sends itself (`USB_CTRL_SET_TIMEOUT`,
/// `CLEAR_FEATURE` and `SET_INTERFACE`): 5 s.
const USBFS_CONTROL_TIMEOUT: Duration = Duration::from_secs(5);

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
    pub(crate) fn new(world: Rc<RefCell<World>>, dev: usize, generation: u32) -> Interface {
        Interface {
            world,
            dev,
            generation,
            queues: Queues::default(),
        }
    }

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
        self.transfer(
            XKind::Out {
                ep,
                data,
                intr: false,
            },
            None,
        )
    }

    /// An interrupt OUT transfer; returns the bytes accepted (site `intr.out#n`).
    pub fn interrupt_out(
        &self,
        ep: u8,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<usize, TransferError>> + '_ {
        self.transfer(
            XKind::Out {
                ep,
                data,
                intr: true,
            },
            None,
        )
    }

    /// A standard request with no data stage, sent as usbfs sends its own (5 s timeout).
    fn standard_request(
        &self,
        request_type: u8,
        request: u8,
        value: u16,
        index: u16,
    ) -> impl Future<Output = Result<(), TransferError>> + '_ {
        let setup = Setup {
            request_type,
            request,
            value,
            index,
            length: 0,
        };
        Transfer::<()> {
            iface: self,
            kind: Some(XKind::Control {
                setup,
                data: Vec::new(),
            }),
            timeout: Some(USBFS_CONTROL_TIMEOUT),
            submitted: None,
            done: false,
            outcome: PhantomData,
        }
    }

    /// Clears endpoint `ep`'s halt: `CLEAR_FEATURE(ENDPOINT_HALT)` to the endpoint (site
    /// `ctrl.clear_feature#n`); once the model acknowledges it the bus stops stalling the
    /// endpoint.
    pub fn clear_halt(&self, ep: u8) -> impl Future<Output = Result<(), TransferError>> + '_ {
        self.standard_request(0x02, 1, 0, u16::from(ep))
    }

    /// Selects alternate setting `alt` of interface 0: `SET_INTERFACE` (site
    /// `ctrl.set_interface#n`), which the model accepts or stalls; accepted, it clears every
    /// halt.
    pub fn set_alt_setting(&self, alt: u8) -> impl Future<Output = Result<(), TransferError>> + '_ {
        self.standard_request(0x01, 11, u16::from(alt), 0)
    }

    /// The model's descriptors ([`Device::descriptors`]); `Disconnected` once the device is
    /// gone, `Fault` when the model has none.
    pub fn descriptors(&self) -> Result<Descriptors, TransferError> {
        let w = self.world.borrow();
        let slot = &w.devices[self.dev];
        if !slot.attached || slot.generation != self.generation {
            return Err(TransferError::Disconnected);
        }
        slot.dev.descriptors().ok_or(TransferError::Fault)
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
    fn interrupt_out(
        &self,
        ep: u8,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<usize, TransferError>> {
        Interface::interrupt_out(self, ep, data)
    }
    fn clear_halt(&self, ep: u8) -> impl Future<Output = Result<(), TransferError>> {
        Interface::clear_halt(self, ep)
    }
    fn set_alt_setting(&self, alt: u8) -> impl Future<Output = Result<(), TransferError>> {
        Interface::set_alt_setting(self, alt)
    }
    fn descriptors(&self) -> Result<Descriptors, TransferError> {
        Interface::descriptors(self)
    }

    /// Opens `ep` for queued transfers; `Fault` if it is open already (nusb: busy).
    fn queue_open(&self, ep: u8, _ty: TransferType) -> Result<(), TransferError> {
        let mut q = self.queues.0.borrow_mut();
        if q.iter().any(|(e, _)| *e == ep) {
            return Err(TransferError::Fault);
        }
        q.push((ep, VecDeque::new()));
        Ok(())
    }

    /// Submits the transfer now (its arrival queued on the bus, its site crossed).
    fn queue_submit(&self, ep: u8, ty: TransferType, buf: Buffer) {
        let intr = ty == TransferType::Interrupt;
        let kind = if ep & calametra_usb::DIR_IN != 0 {
            XKind::In {
                ep,
                len: buf.requested_len(),
                intr,
            }
        } else {
            XKind::Out {
                ep,
                data: buf.into_vec(),
                intr,
            }
        };
        let xid = self
            .world
            .borrow_mut()
            .submit_queued(self.dev, self.generation, kind);
        self.queues.with(ep, |ids| ids.push_back(xid));
    }

    fn queue_poll(&self, ep: u8, cx: &mut Context<'_>) -> Poll<Completion> {
        let Some(Some(xid)) = self.queues.with(ep, |ids| ids.front().copied()) else {
            return Poll::Ready(Completion::failed(TransferError::Fault));
        };
        let r = self.world.borrow_mut().poll_xfer(xid, None, cx.waker());
        let Poll::Ready(r) = r else {
            return Poll::Pending;
        };
        self.queues.with(ep, |ids| ids.pop_front());
        Poll::Ready(match r {
            Ok(v) if ep & calametra_usb::DIR_IN != 0 => Completion {
                actual_len: v.len(),
                buffer: v,
                status: Ok(()),
            },
            Ok(v) => Completion {
                actual_len: out_len(&v),
                buffer: Vec::new(),
                status: Ok(()),
            },
            Err(e) => Completion::failed(e),
        })
    }

    /// Each transfer not yet done completes `Cancelled` (a trace record each), in order.
    fn queue_cancel_all(&self, ep: u8) {
        let ids: Vec<u64> = self
            .queues
            .with(ep, |ids| ids.iter().copied().collect())
            .unwrap_or_default();
        if let Ok(mut w) = self.world.try_borrow_mut() {
            for xid in ids {
                w.cancel_keep(xid);
            }
        }
    }

    /// Cancels what is in flight and forgets the endpoint.
    fn queue_close(&self, ep: u8) {
        let ids = {
            let mut q = self.queues.0.borrow_mut();
            match q.iter().position(|(e, _)| *e == ep) {
                Some(i) => q.remove(i).1,
                None => return,
            }
        };
        if let Ok(mut w) = self.world.try_borrow_mut() {
            for xid in ids {
                w.cancel(xid);
            }
        }
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

    /// A run's transfer records, as `site status` pairs (`bulk.in#2 stall`).
    fn transfers(lines: &[String]) -> Vec<String> {
        lines
            .iter()
            .filter(|l| l.contains("\"kind\":\"transfer\""))
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).expect("a json record");
                format!(
                    "{} {}",
                    v["data"]["site"].as_str().unwrap_or("?"),
                    v["data"]["status"].as_str().unwrap_or("?")
                )
            })
            .collect()
    }

    /// A stall halts a bulk endpoint: the next transfer on it stalls without reaching the
    /// device, until `clear_halt` (which can itself stall: a fault site), after which the
    /// endpoint works again; the interrupt OUT and the alternate settings go through the model
    /// (setting 1 refused).
    #[test]
    fn a_stalled_endpoint_stays_halted_until_its_halt_is_cleared() {
        use crate::fault::Fault;
        use calametra_usb::UsbInterface;
        let seen = Rc::new(RefCell::new(Vec::new()));
        let seen2 = seen.clone();
        let mut faults = FaultPlan::single("bulk.in#1", Fault::Stall);
        faults
            .faults
            .insert("ctrl.clear_feature#1".into(), Fault::Stall);
        let r = run(
            RunConfig {
                keep_trace: true,
                faults,
                ..RunConfig::default()
            },
            &move |sim| {
                let dev = sim.attach(Loopback::default());
                let iface = dev.interface();
                let seen = seen2.clone();
                sim.spawn("driver", async move {
                    let log = |s: String| seen.borrow_mut().push(s);
                    log(format!("{:?}", iface.bulk_out(0x01, vec![1, 2]).await));
                    log(format!("{:?}", iface.bulk_in(0x81, 8).await));
                    log(format!("{:?}", iface.bulk_in(0x81, 8).await));
                    log(format!("{:?}", iface.clear_halt(0x81).await));
                    log(format!("{:?}", iface.bulk_in(0x81, 8).await));
                    log(format!(
                        "{:?}",
                        UsbInterface::clear_halt(&iface, 0x81).await
                    ));
                    log(format!("{:?}", iface.bulk_in(0x81, 8).await));
                    log(format!("{:?}", iface.interrupt_out(0x01, vec![3]).await));
                    log(format!("{:?}", iface.set_alt_setting(1).await));
                    log(format!("{:?}", iface.set_alt_setting(0).await));
                    log(format!("{:?}", iface.descriptors()));
                });
            },
        );
        assert!(r.failure.is_none(), "{:?}", r.failure);
        assert_eq!(
            *seen.borrow(),
            [
                "Ok(2)",
                "Err(Stall)",
                "Err(Stall)",
                "Err(Stall)",
                "Err(Stall)",
                "Ok(())",
                "Ok([1, 2])",
                "Ok(1)",
                "Err(Stall)",
                "Ok(())",
                "Err(Fault)",
            ]
        );
        assert_eq!(
            transfers(&r.lines),
            [
                "bulk.out#1 ok",
                "bulk.in#1 stall",
                "bulk.in#2 stall",
                "ctrl.clear_feature#1 stall",
                "bulk.in#3 stall",
                "ctrl.clear_feature#2 ok",
                "bulk.in#4 ok",
                "intr.out#1 ok",
                "ctrl.set_interface#1 stall",
                "ctrl.set_interface#2 ok",
            ]
        );
    }

    /// Four bulk IN transfers in flight on one endpoint complete in submission order, each
    /// with its data, even when the schedule lets a younger one arrive first; `cancel_all`
    /// completes the rest `Cancelled` (still taken in order), and dropping the endpoint
    /// cancels what it left in flight.
    #[test]
    fn queued_transfers_complete_in_order_and_cancel() {
        use calametra_usb::{Buffer, TransferType, UsbInterface};
        for seed in 0..8u64 {
            let seen = Rc::new(RefCell::new(Vec::new()));
            let seen2 = seen.clone();
            let r = run(
                RunConfig {
                    keep_trace: true,
                    source: crate::choices::Source::Seeded(seed),
                    ..RunConfig::default()
                },
                &move |sim| {
                    let dev = sim.attach(Loopback::default());
                    let iface = dev.interface();
                    let seen = seen2.clone();
                    sim.spawn("driver", async move {
                        let mut ep = iface.endpoint(0x81, TransferType::Bulk).expect("opens");
                        assert!(iface.endpoint(0x81, TransferType::Bulk).is_err(), "busy");
                        for _ in 0..4 {
                            ep.submit(Buffer::new(4));
                        }
                        for b in 0..3u8 {
                            iface.bulk_out(0x01, vec![b; 2]).await.expect("sent");
                        }
                        for _ in 0..3 {
                            let c = ep.next_complete().await;
                            seen.borrow_mut()
                                .push(format!("{:?} {:?}", c.status, c.buffer));
                        }
                        ep.cancel_all();
                        let c = ep.next_complete().await;
                        seen.borrow_mut()
                            .push(format!("{:?} {}", c.status, ep.pending()));
                        ep.submit(Buffer::new(4));
                        drop(ep);
                        iface.sleep(Duration::from_millis(1)).await;
                    });
                },
            );
            assert!(r.failure.is_none(), "{:?}", r.failure);
            assert_eq!(
                *seen.borrow(),
                [
                    "Ok(()) [0, 0]",
                    "Ok(()) [1, 1]",
                    "Ok(()) [2, 2]",
                    "Err(Cancelled) 0",
                ],
                "seed {seed}"
            );
            let t = transfers(&r.lines);
            assert_eq!(
                t.iter().filter(|l| l.ends_with("cancelled")).count(),
                2,
                "{t:?}"
            );
        }
    }
}
