//! The same driver on a real dock: [`NusbInterface`] implements [`UsbInterface`] over
//! `nusb::Interface` (feature `hardware`), with a minimal executor ([`block_on`]) and timer, so
//! `hardware::run(open_dock()?)` drives a JCD543 through Linux usbfs, macOS or WinUSB.
//!
//! Only this module touches the wall clock and threads (a timer thread per sleep); it is never
//! compiled into a simulation. No dock is in CI: the in-process tests never compile it, and
//! `calametra-qemu/tests/trigger6.rs` runs it (as the static `t6-drive` binary) over usbfs in
//! the Linux guest against the model: `cargo build -p calametra-example-trigger6 --features
//! hardware --bin t6-drive`.
//!
//! A transfer whose future is dropped (the driver's `with_timeout` gave up) does not lose the
//! endpoint: an IN transfer stays submitted and the next read on that endpoint takes its
//! completion, so an interrupt packet that arrives between two reads is not lost; an OUT
//! transfer is cancelled and the next write waits for the cancellation before submitting.

#![allow(
    clippy::disallowed_methods,
    reason = "a real bus: sleeps are wall-clock timers on their own threads (never simulated)"
)]

use crate::driver::{Driver, DriverError, Summary};
use calametra_usb::{ControlIn, ControlOut, ControlType, Recipient, TransferError, UsbInterface};
use nusb::transfer::{self as nt, Buffer, Bulk, In, Interrupt, Out};
use nusb::MaybeFuture;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::{pin, Pin};
use std::rc::Rc;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};
use std::time::{Duration, Instant};

/// USB vendor id of MCT.
pub const VENDOR_ID: u16 = 0x0711;
/// Product ids of Trigger 6 display functions (MCT's udev rule matches 0x5600-0x561f).
pub const PRODUCT_IDS: std::ops::RangeInclusive<u16> = 0x5600..=0x561f;

struct Inner {
    iface: nusb::Interface,
    bulk_out: RefCell<BTreeMap<u8, nusb::Endpoint<Bulk, Out>>>,
    bulk_in: RefCell<BTreeMap<u8, nusb::Endpoint<Bulk, In>>>,
    intr_in: RefCell<BTreeMap<u8, nusb::Endpoint<Interrupt, In>>>,
}

/// A claimed Trigger 6 interface on a real dock. Clones share the interface.
///
/// One transfer at a time per endpoint (the driver never has two on one endpoint); a second
/// concurrent transfer on the same endpoint fails with `Fault`.
#[derive(Clone)]
pub struct NusbInterface {
    inner: Rc<Inner>,
    time_scale: u32,
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

/// Finds the first Trigger 6 display function, opens it and claims interface 0 (detaching a
/// kernel driver if one is bound).
pub fn open_dock() -> Result<NusbInterface, String> {
    let info = nusb::list_devices()
        .wait()
        .map_err(|e| format!("listing USB devices: {e}"))?
        .find(|d| d.vendor_id() == VENDOR_ID && PRODUCT_IDS.contains(&d.product_id()))
        .ok_or("no MCT Trigger 6 (0711:5600-561f) is connected")?;
    let dev = info.open().wait().map_err(|e| {
        format!(
            "opening {:04x}:{:04x}: {e}",
            info.vendor_id(),
            info.product_id()
        )
    })?;
    let iface = dev
        .detach_and_claim_interface(0)
        .wait()
        .map_err(|e| format!("claiming interface 0: {e}"))?;
    Ok(NusbInterface::new(iface))
}

impl NusbInterface {
    /// Wraps an already claimed interface.
    pub fn new(iface: nusb::Interface) -> Self {
        NusbInterface {
            inner: Rc::new(Inner {
                iface,
                bulk_out: RefCell::new(BTreeMap::new()),
                bulk_in: RefCell::new(BTreeMap::new()),
                intr_in: RefCell::new(BTreeMap::new()),
            }),
            time_scale: 1,
        }
    }

    /// Multiplies every timeout and sleep the driver asks for by `factor` (at least 1): for a
    /// bus slower than a dock's. Behind QEMU's usbredir the guest's clock counts instructions
    /// (`-icount`) and jumps to its next timer whenever the vCPU idles, so while the host is
    /// still answering a 3 MB bulk transfer, a dock's 1 s timeout can pass in guest time.
    pub fn with_time_scale(mut self, factor: u32) -> Self {
        self.time_scale = factor.max(1);
        self
    }

    fn scaled(&self, d: Duration) -> Duration {
        d.saturating_mul(self.time_scale)
    }
}

type Slot<T, D> = RefCell<BTreeMap<u8, nusb::Endpoint<T, D>>>;

/// An endpoint lent out of its slot for one transfer; dropping it (the transfer done, or its
/// future dropped half-way) puts it back, cancelling what is still in flight first when
/// `cancel_on_drop` (OUT) and leaving it submitted otherwise (IN).
struct Lent<'a, T: nt::EndpointType, D: nt::EndpointDirection> {
    slot: &'a Slot<T, D>,
    ep: u8,
    endpoint: Option<nusb::Endpoint<T, D>>,
    cancel_on_drop: bool,
}

impl<T: nt::EndpointType, D: nt::EndpointDirection> Lent<'_, T, D> {
    fn get(&mut self) -> &mut nusb::Endpoint<T, D> {
        self.endpoint.as_mut().expect("lent until dropped")
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

/// Lends the endpoint out of its slot (opening it the first time) for one transfer.
fn lend<'a, T: nt::EndpointType, D: nt::EndpointDirection>(
    iface: &nusb::Interface,
    slot: &'a Slot<T, D>,
    ep: u8,
    cancel_on_drop: bool,
) -> Result<Lent<'a, T, D>, TransferError> {
    let endpoint = match slot.borrow_mut().remove(&ep) {
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

/// One IN transfer of up to `len` bytes, or the completion of the one a dropped read left
/// submitted.
async fn read_in<T: nt::BulkOrInterrupt>(
    iface: &nusb::Interface,
    slot: &Slot<T, In>,
    ep: u8,
    len: usize,
) -> Result<Vec<u8>, TransferError> {
    let mut lent = lend(iface, slot, ep, false)?;
    let e = lent.get();
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

/// Rounds an IN length up to whole packets, as nusb requires.
fn in_len(len: usize, mps: usize) -> usize {
    let mps = mps.max(1);
    len.max(1).div_ceil(mps) * mps
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
            .await
            .map_err(map_control_err)
    }

    async fn bulk_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        let mut lent = lend(&self.inner.iface, &self.inner.bulk_out, ep, true)?;
        let e = lent.get();
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

/// Runs a future to completion on this thread.
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

/// Runs the driver on a dock: the main sequence and the interrupt listener together, until
/// the main sequence ends.
pub fn run(iface: NusbInterface) -> Result<Summary, DriverError> {
    run_driver(Driver::new(iface))
}

/// [`run`] for a driver made by the caller, who keeps its [`Driver::beliefs`] to report what
/// the driver did.
pub fn run_driver(driver: Driver<NusbInterface>) -> Result<Summary, DriverError> {
    let irq = driver.clone().irq_loop();
    let main = driver.run();
    block_on(async move {
        let mut irq = pin!(irq);
        let mut main = pin!(main);
        let mut irq_done = false;
        std::future::poll_fn(|cx| {
            if !irq_done {
                // The listener ends only when the dock goes away; its result is not the run's.
                irq_done = irq.as_mut().poll(cx).is_ready();
            }
            main.as_mut().poll(cx)
        })
        .await
    })
}
