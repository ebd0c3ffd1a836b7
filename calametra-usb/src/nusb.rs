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
//! write waits for the cancellation before submitting. The one-shot calls (`bulk_in`, ...)
//! make one transfer at a time per endpoint; an endpoint opened for queued transfers
//! ([`UsbInterface::endpoint`]) is a `nusb::Endpoint` of its own, several transfers in flight
//! (`submit`, `poll_next_complete`, `cancel_all`; dropped, it cancels what is in flight), and
//! the one-shot calls cannot use it meanwhile (nusb: busy).
//!
//! The rest maps one to one: `clear_halt` is `Endpoint::clear_halt` (usbfs
//! `USBDEVFS_CLEAR_HALT`), `set_alt_setting` is `Interface::set_alt_setting`, `descriptors`
//! reads `Device::device_descriptor` and `Device::configurations` (and the strings
//! `DeviceInfo` had, when opened through [`NusbInterface::open`] or [`NusbHost`]).
//! [`NusbHost`] is [`crate::UsbHost`] over `nusb::list_devices`, `DeviceInfo::open` and
//! `nusb::watch_devices`.
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

use crate::{
    Completion, ControlIn, ControlOut, ControlType, Descriptors, DeviceId, DeviceInfo,
    HotplugEvent, HotplugWatch, Recipient, TransferError, TransferType, UsbHost, UsbInterface,
};
use ::nusb::transfer::{self as nt, Buffer, Bulk, In, Interrupt, Out};
use ::nusb::MaybeFuture;
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::future::{poll_fn, Future, IntoFuture};
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
    intr_out: Slot<Interrupt, Out>,
    /// Endpoints opened for queued transfers, with each pending IN transfer's requested length.
    queues: RefCell<BTreeMap<u8, (AnyEndpoint, VecDeque<usize>)>>,
    /// The device's strings as `DeviceInfo` gave them (index, text).
    strings: Vec<(u8, String)>,
}

/// A `nusb::Endpoint` of any type and direction, for queued transfers.
enum AnyEndpoint {
    BulkIn(::nusb::Endpoint<Bulk, In>),
    BulkOut(::nusb::Endpoint<Bulk, Out>),
    IntrIn(::nusb::Endpoint<Interrupt, In>),
    IntrOut(::nusb::Endpoint<Interrupt, Out>),
}

/// Calls `$f` on the endpoint inside an [`AnyEndpoint`], whatever its type.
macro_rules! on_endpoint {
    ($e:expr, $x:ident => $f:expr) => {
        match $e {
            AnyEndpoint::BulkIn($x) => $f,
            AnyEndpoint::BulkOut($x) => $f,
            AnyEndpoint::IntrIn($x) => $f,
            AnyEndpoint::IntrOut($x) => $f,
        }
    };
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
        Self::with_strings(device, iface, Vec::new())
    }

    /// [`NusbInterface::new`] with the device's strings (index, text) for
    /// [`UsbInterface::descriptors`].
    pub fn with_strings(
        device: ::nusb::Device,
        iface: ::nusb::Interface,
        strings: Vec<(u8, String)>,
    ) -> Self {
        NusbInterface {
            inner: Rc::new(Inner {
                device,
                iface,
                bulk_out: RefCell::new(BTreeMap::new()),
                bulk_in: RefCell::new(BTreeMap::new()),
                intr_in: RefCell::new(BTreeMap::new()),
                intr_out: RefCell::new(BTreeMap::new()),
                queues: RefCell::new(BTreeMap::new()),
                strings,
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
        let strings = info_strings(&device, &info);
        Ok(NusbInterface::with_strings(device, iface, strings))
    }

    /// The transfer type of endpoint `ep` in the interface's current alternate setting.
    fn endpoint_type(&self, ep: u8) -> Option<::nusb::descriptors::TransferType> {
        self.inner
            .iface
            .descriptor()?
            .endpoints()
            .find(|e| e.address() == ep)
            .map(|e| e.transfer_type())
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

/// The strings `DeviceInfo` read (manufacturer, product, serial) at their descriptor indices.
fn info_strings(device: &::nusb::Device, info: &::nusb::DeviceInfo) -> Vec<(u8, String)> {
    let d = device.device_descriptor();
    [
        (d.manufacturer_string_index(), info.manufacturer_string()),
        (d.product_string_index(), info.product_string()),
        (d.serial_number_string_index(), info.serial_number()),
    ]
    .into_iter()
    .filter_map(|(i, s)| Some((i?.get(), s?.to_string())))
    .collect()
}

/// A nusb error of an operation that is not a transfer (`clear_halt`, `set_alt_setting`,
/// `open`): a refusal (`EPIPE`, a setting not found) is a stall.
fn map_os_err(e: ::nusb::Error) -> TransferError {
    match e.kind() {
        ::nusb::ErrorKind::Disconnected => TransferError::Disconnected,
        ::nusb::ErrorKind::NotFound => TransferError::Stall,
        _ if e.os_error() == Some(32) => TransferError::Stall,
        _ => TransferError::Fault,
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

/// One OUT transfer on an endpoint lent from `slot`.
async fn write_out<T: nt::BulkOrInterrupt>(
    iface: &::nusb::Interface,
    slot: &Slot<T, Out>,
    ep: u8,
    data: Vec<u8>,
) -> Result<usize, TransferError> {
    let mut lent = lend(iface, slot, ep, true)?;
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
        write_out(&self.inner.iface, &self.inner.bulk_out, ep, data).await
    }

    async fn interrupt_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        write_out(&self.inner.iface, &self.inner.intr_out, ep, data).await
    }

    /// `Endpoint::clear_halt` on `ep` (the queued endpoint when one is open, else the
    /// endpoint opened for the one-shot calls, by its type in the descriptors).
    async fn clear_halt(&self, ep: u8) -> Result<(), TransferError> {
        use ::nusb::descriptors::TransferType as T;
        let inner = &self.inner;
        // A queued endpoint is taken out of its map for the call (no borrow held across it).
        let queued = inner.queues.borrow_mut().remove(&ep);
        if let Some((mut e, lens)) = queued {
            let r = match &mut e {
                AnyEndpoint::BulkIn(x) => x.clear_halt().into_future().await,
                AnyEndpoint::BulkOut(x) => x.clear_halt().into_future().await,
                AnyEndpoint::IntrIn(x) => x.clear_halt().into_future().await,
                AnyEndpoint::IntrOut(x) => x.clear_halt().into_future().await,
            };
            inner.queues.borrow_mut().insert(ep, (e, lens));
            return r.map_err(map_os_err);
        }
        let is_in = ep & crate::DIR_IN != 0;
        let r = match (self.endpoint_type(ep), is_in) {
            (Some(T::Interrupt), true) => {
                let mut l = lend(&inner.iface, &inner.intr_in, ep, false)?;
                l.get()?.clear_halt().into_future().await
            }
            (Some(T::Interrupt), false) => {
                let mut l = lend(&inner.iface, &inner.intr_out, ep, false)?;
                l.get()?.clear_halt().into_future().await
            }
            (_, true) => {
                let mut l = lend(&inner.iface, &inner.bulk_in, ep, false)?;
                l.get()?.clear_halt().into_future().await
            }
            (_, false) => {
                let mut l = lend(&inner.iface, &inner.bulk_out, ep, false)?;
                l.get()?.clear_halt().into_future().await
            }
        };
        r.map_err(map_os_err)
    }

    /// `Interface::set_alt_setting`.
    async fn set_alt_setting(&self, alt: u8) -> Result<(), TransferError> {
        self.inner
            .iface
            .set_alt_setting(alt)
            .into_future()
            .await
            .map_err(map_os_err)
    }

    /// `Device::device_descriptor` and `Device::configurations` (cached by nusb at open), and
    /// the strings `DeviceInfo` had.
    fn descriptors(&self) -> Result<Descriptors, TransferError> {
        let d = &self.inner.device;
        Ok(Descriptors {
            device: d.device_descriptor().as_bytes().to_vec(),
            configurations: d.configurations().map(|c| c.as_bytes().to_vec()).collect(),
            strings: self.inner.strings.clone(),
        })
    }

    /// `Interface::endpoint::<Bulk|Interrupt, In|Out>(ep)`: fails `Fault` when the endpoint is
    /// not in the current alternate setting or is in use.
    fn queue_open(&self, ep: u8, ty: TransferType) -> Result<(), TransferError> {
        let i = &self.inner.iface;
        let is_in = ep & crate::DIR_IN != 0;
        // An endpoint the one-shot calls opened is closed first (nusb opens one once; dropped,
        // it cancels what a given-up read left in flight).
        match (ty, is_in) {
            (TransferType::Bulk, true) => drop(self.inner.bulk_in.borrow_mut().remove(&ep)),
            (TransferType::Bulk, false) => drop(self.inner.bulk_out.borrow_mut().remove(&ep)),
            (TransferType::Interrupt, true) => drop(self.inner.intr_in.borrow_mut().remove(&ep)),
            (TransferType::Interrupt, false) => drop(self.inner.intr_out.borrow_mut().remove(&ep)),
        }
        let e = match (ty, is_in) {
            (TransferType::Bulk, true) => i.endpoint::<Bulk, In>(ep).map(AnyEndpoint::BulkIn),
            (TransferType::Bulk, false) => i.endpoint::<Bulk, Out>(ep).map(AnyEndpoint::BulkOut),
            (TransferType::Interrupt, true) => {
                i.endpoint::<Interrupt, In>(ep).map(AnyEndpoint::IntrIn)
            }
            (TransferType::Interrupt, false) => {
                i.endpoint::<Interrupt, Out>(ep).map(AnyEndpoint::IntrOut)
            }
        }
        .map_err(|_| TransferError::Fault)?;
        self.inner
            .queues
            .borrow_mut()
            .insert(ep, (e, VecDeque::new()));
        Ok(())
    }

    /// `Endpoint::submit`: an IN buffer rounded up to whole packets (nusb requires it; the
    /// completion is cut back to the length asked for), an OUT buffer as given.
    fn queue_submit(&self, ep: u8, _ty: TransferType, buf: crate::Buffer) {
        let mut q = self.inner.queues.borrow_mut();
        let Some((e, lens)) = q.get_mut(&ep) else {
            return;
        };
        let len = buf.requested_len();
        lens.push_back(len);
        match e {
            AnyEndpoint::BulkIn(x) => x.submit(Buffer::new(in_len(len, x.max_packet_size()))),
            AnyEndpoint::IntrIn(x) => x.submit(Buffer::new(in_len(len, x.max_packet_size()))),
            AnyEndpoint::BulkOut(x) => x.submit(Buffer::from(buf.into_vec())),
            AnyEndpoint::IntrOut(x) => x.submit(Buffer::from(buf.into_vec())),
        }
    }

    /// `Endpoint::poll_next_complete`; the bytes that crossed are kept whatever the status.
    fn queue_poll(&self, ep: u8, cx: &mut Context<'_>) -> Poll<Completion> {
        let mut q = self.inner.queues.borrow_mut();
        let Some((e, lens)) = q.get_mut(&ep) else {
            return Poll::Ready(Completion::failed(TransferError::Fault));
        };
        let is_in = ep & crate::DIR_IN != 0;
        let c = match on_endpoint!(e, x => x.poll_next_complete(cx)) {
            Poll::Ready(c) => c,
            Poll::Pending => return Poll::Pending,
        };
        let asked = lens.pop_front().unwrap_or(usize::MAX);
        let buffer = if is_in {
            let mut v = c.buffer.into_vec();
            v.truncate(c.actual_len.min(asked));
            v
        } else {
            Vec::new()
        };
        Poll::Ready(Completion {
            actual_len: if is_in { buffer.len() } else { c.actual_len },
            buffer,
            status: c.status.map_err(map_err),
        })
    }

    /// `Endpoint::cancel_all`.
    fn queue_cancel_all(&self, ep: u8) {
        if let Some((e, _)) = self.inner.queues.borrow_mut().get_mut(&ep) {
            on_endpoint!(e, x => x.cancel_all());
        }
    }

    /// Drops the `nusb::Endpoint` (which cancels what is in flight).
    fn queue_close(&self, ep: u8) {
        let e = self.inner.queues.borrow_mut().remove(&ep);
        drop(e);
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

/// [`UsbHost`] over the system's USB devices: `nusb::list_devices`, `DeviceInfo::open` (then
/// `detach_and_claim_interface`) and `nusb::watch_devices`. A device's [`DeviceId`] is a
/// number this host gives each `nusb::DeviceId` it meets (shared with its watches).
#[derive(Clone, Default)]
pub struct NusbHost {
    ids: Rc<RefCell<Vec<::nusb::DeviceId>>>,
}

impl NusbHost {
    /// A host over the system's bus.
    pub fn new() -> Self {
        NusbHost::default()
    }
}

/// Our id for a nusb device id (given the first time it is met).
fn key(ids: &RefCell<Vec<::nusb::DeviceId>>, id: ::nusb::DeviceId) -> DeviceId {
    let mut ids = ids.borrow_mut();
    let i = match ids.iter().position(|x| *x == id) {
        Some(i) => i,
        None => {
            ids.push(id);
            ids.len() - 1
        }
    };
    DeviceId(i as u64)
}

fn info(ids: &RefCell<Vec<::nusb::DeviceId>>, d: &::nusb::DeviceInfo) -> DeviceInfo {
    DeviceInfo {
        id: key(ids, d.id()),
        vendor_id: d.vendor_id(),
        product_id: d.product_id(),
        serial_number: d.serial_number().map(str::to_string),
        product_string: d.product_string().map(str::to_string),
    }
}

/// A hotplug watch: `nusb::hotplug::HotplugWatch`.
pub struct NusbWatch {
    watch: ::nusb::hotplug::HotplugWatch,
    ids: Rc<RefCell<Vec<::nusb::DeviceId>>>,
}

impl HotplugWatch for NusbWatch {
    fn next_event(&mut self) -> impl Future<Output = HotplugEvent> {
        use futures_core::Stream;
        poll_fn(|cx| loop {
            match Pin::new(&mut self.watch).poll_next(cx) {
                Poll::Ready(Some(::nusb::hotplug::HotplugEvent::Connected(d))) => {
                    return Poll::Ready(HotplugEvent::Connected(info(&self.ids, &d)));
                }
                Poll::Ready(Some(::nusb::hotplug::HotplugEvent::Disconnected(id))) => {
                    return Poll::Ready(HotplugEvent::Disconnected(key(&self.ids, id)));
                }
                // The stream never ends (nusb's always gives `Some`): keep polling.
                Poll::Ready(None) => continue,
                Poll::Pending => return Poll::Pending,
            }
        })
    }
}

impl UsbHost for NusbHost {
    type Interface = NusbInterface;
    type Watch = NusbWatch;

    async fn list_devices(&self) -> Result<Vec<DeviceInfo>, TransferError> {
        let list = ::nusb::list_devices()
            .into_future()
            .await
            .map_err(map_os_err)?;
        Ok(list.map(|d| info(&self.ids, &d)).collect())
    }

    async fn open(&self, id: DeviceId, interface: u8) -> Result<NusbInterface, TransferError> {
        let want = self
            .ids
            .borrow()
            .get(id.0 as usize)
            .copied()
            .ok_or(TransferError::Disconnected)?;
        let found = ::nusb::list_devices()
            .into_future()
            .await
            .map_err(map_os_err)?
            .find(|d| d.id() == want)
            .ok_or(TransferError::Disconnected)?;
        let device = found.open().into_future().await.map_err(map_os_err)?;
        let iface = device
            .detach_and_claim_interface(interface)
            .into_future()
            .await
            .map_err(map_os_err)?;
        let strings = info_strings(&device, &found);
        Ok(NusbInterface::with_strings(device, iface, strings))
    }

    fn watch_devices(&self) -> Result<NusbWatch, TransferError> {
        let watch = ::nusb::watch_devices().map_err(map_os_err)?;
        Ok(NusbWatch {
            watch,
            ids: self.ids.clone(),
        })
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
