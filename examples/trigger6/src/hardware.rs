//! The same driver on a real dock: [`NusbInterface`] implements [`UsbInterface`] over
//! `nusb::Interface` (feature `hardware`), with a minimal executor ([`block_on`]) and timer, so
//! `hardware::run(open_dock()?)` drives a JCD543 through Linux usbfs, macOS or WinUSB.
//!
//! Only this module touches the wall clock and threads (a timer thread per sleep); it is never
//! compiled into a simulation. Nothing here is exercised by the tests (no dock in CI); it must
//! build: `cargo build -p calametra-example-trigger6 --features hardware`.

use crate::driver::{Driver, DriverError, Summary};
use calametra_core::usb::{
    ControlIn, ControlOut, ControlType, Recipient, TransferError, UsbInterface,
};
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
        }
    }
}

/// Takes the endpoint out of its slot (opening it the first time) for one transfer.
fn take<T: nt::EndpointType, D: nt::EndpointDirection>(
    iface: &nusb::Interface,
    slot: &RefCell<BTreeMap<u8, nusb::Endpoint<T, D>>>,
    ep: u8,
) -> Result<nusb::Endpoint<T, D>, TransferError> {
    if let Some(e) = slot.borrow_mut().remove(&ep) {
        return Ok(e);
    }
    iface.endpoint::<T, D>(ep).map_err(|_| TransferError::Fault)
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
            .control_in(r, timeout)
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
            .control_out(r, timeout)
            .await
            .map_err(map_control_err)
    }

    async fn bulk_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        let mut e = take(&self.inner.iface, &self.inner.bulk_out, ep)?;
        e.submit(Buffer::from(data));
        let c = e.next_complete().await;
        self.inner.bulk_out.borrow_mut().insert(ep, e);
        c.status.map_err(map_err)?;
        Ok(c.actual_len)
    }

    async fn bulk_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        let mut e = take(&self.inner.iface, &self.inner.bulk_in, ep)?;
        e.submit(Buffer::new(in_len(len, e.max_packet_size())));
        let c = e.next_complete().await;
        self.inner.bulk_in.borrow_mut().insert(ep, e);
        c.status.map_err(map_err)?;
        let mut v = c.buffer.into_vec();
        v.truncate(c.actual_len.min(len));
        Ok(v)
    }

    async fn interrupt_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        let mut e = take(&self.inner.iface, &self.inner.intr_in, ep)?;
        e.submit(Buffer::new(in_len(len, e.max_packet_size())));
        let c = e.next_complete().await;
        self.inner.intr_in.borrow_mut().insert(ep, e);
        c.status.map_err(map_err)?;
        let mut v = c.buffer.into_vec();
        v.truncate(c.actual_len.min(len));
        Ok(v)
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        Sleep {
            deadline: Instant::now() + d,
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
    let driver = Driver::new(iface);
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
