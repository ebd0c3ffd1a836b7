//! [`UsbInterface`] over a claimed `nusb::Interface`, so the updater that Calametra tests is
//! the one that runs against a real device (feature `hardware`).
//!
//! `sleep` uses a helper thread per call: this module never runs inside a simulation.

use calametra_core::usb::{
    ControlIn, ControlOut, ControlType, Recipient, TransferError, UsbInterface,
};
use nusb::transfer::{Bulk, In, Interrupt, Out};
use nusb::MaybeFuture;
use std::future::{Future, IntoFuture};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A claimed interface of a real device.
pub struct NusbInterface {
    device: nusb::Device,
    iface: nusb::Interface,
}

impl NusbInterface {
    /// Wraps an interface already claimed from `device`.
    pub fn new(device: nusb::Device, iface: nusb::Interface) -> Self {
        NusbInterface { device, iface }
    }

    /// Opens the first device with `vid:pid` and claims `interface` (detaching a kernel driver).
    pub fn open(vid: u16, pid: u16, interface: u8) -> Result<Self, String> {
        let info = nusb::list_devices()
            .wait()
            .map_err(|e| format!("listing USB devices: {e}"))?
            .find(|d| d.vendor_id() == vid && d.product_id() == pid)
            .ok_or_else(|| format!("no device {vid:04x}:{pid:04x}"))?;
        let device = info
            .open()
            .wait()
            .map_err(|e| format!("opening {vid:04x}:{pid:04x}: {e}"))?;
        let iface = device
            .detach_and_claim_interface(interface)
            .wait()
            .map_err(|e| format!("claiming interface {interface}: {e}"))?;
        Ok(NusbInterface { device, iface })
    }

    /// The device, for what `UsbInterface` cannot do (a USB reset: `device().reset()`; the
    /// interface must then be opened again).
    pub fn device(&self) -> &nusb::Device {
        &self.device
    }
}

fn control_type(t: ControlType) -> nusb::transfer::ControlType {
    match t {
        ControlType::Standard => nusb::transfer::ControlType::Standard,
        ControlType::Class => nusb::transfer::ControlType::Class,
        ControlType::Vendor => nusb::transfer::ControlType::Vendor,
    }
}

fn recipient(r: Recipient) -> nusb::transfer::Recipient {
    match r {
        Recipient::Device => nusb::transfer::Recipient::Device,
        Recipient::Interface => nusb::transfer::Recipient::Interface,
        Recipient::Endpoint => nusb::transfer::Recipient::Endpoint,
        Recipient::Other => nusb::transfer::Recipient::Other,
    }
}

/// nusb reports a control transfer's timeout as `Cancelled`; the updater never cancels one.
fn error(e: nusb::transfer::TransferError) -> TransferError {
    use nusb::transfer::TransferError as N;
    match e {
        N::Cancelled => TransferError::Timeout,
        N::Stall => TransferError::Stall,
        N::Disconnected => TransferError::Disconnected,
        _ => TransferError::Fault,
    }
}

impl UsbInterface for NusbInterface {
    fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        let fut = self
            .iface
            .control_in(
                nusb::transfer::ControlIn {
                    control_type: control_type(req.control_type),
                    recipient: recipient(req.recipient),
                    request: req.request,
                    value: req.value,
                    index: req.index,
                    length: req.length,
                },
                timeout,
            )
            .into_future();
        async move { fut.await.map_err(error) }
    }

    fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), TransferError>> {
        let fut = self
            .iface
            .control_out(
                nusb::transfer::ControlOut {
                    control_type: control_type(req.control_type),
                    recipient: recipient(req.recipient),
                    request: req.request,
                    value: req.value,
                    index: req.index,
                    data: req.data,
                },
                timeout,
            )
            .into_future();
        async move { fut.await.map_err(error) }
    }

    async fn bulk_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        {
            let mut ep = self
                .iface
                .endpoint::<Bulk, Out>(ep)
                .map_err(|_| TransferError::Fault)?;
            let mut buf = ep.allocate(data.len());
            buf.extend_from_slice(&data);
            ep.submit(buf);
            let c = ep.next_complete().await;
            c.status.map_err(error)?;
            Ok(c.actual_len)
        }
    }

    async fn bulk_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        {
            let mut ep = self
                .iface
                .endpoint::<Bulk, In>(ep)
                .map_err(|_| TransferError::Fault)?;
            let mps = ep.max_packet_size().max(1);
            ep.submit(ep.allocate(len.div_ceil(mps) * mps));
            let c = ep.next_complete().await;
            c.status.map_err(error)?;
            let mut v = c.buffer.into_vec();
            v.truncate(len.min(c.actual_len));
            Ok(v)
        }
    }

    async fn interrupt_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        {
            let mut ep = self
                .iface
                .endpoint::<Interrupt, In>(ep)
                .map_err(|_| TransferError::Fault)?;
            let mps = ep.max_packet_size().max(1);
            ep.submit(ep.allocate(len.div_ceil(mps) * mps));
            let c = ep.next_complete().await;
            c.status.map_err(error)?;
            let mut v = c.buffer.into_vec();
            v.truncate(len.min(c.actual_len));
            Ok(v)
        }
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        ThreadSleep { d, shared: None }
    }
}

/// Whether the sleep is over, and who to wake when it is.
type Shared = Arc<Mutex<(bool, Option<Waker>)>>;

/// A real-time sleep: a helper thread wakes the task after `d`.
struct ThreadSleep {
    d: Duration,
    shared: Option<Shared>,
}

impl Future for ThreadSleep {
    type Output = ();
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let d = self.d;
        let shared = self.shared.get_or_insert_with(|| {
            let s: Shared = Arc::new(Mutex::new((false, None)));
            let t = s.clone();
            std::thread::spawn(move || {
                std::thread::sleep(d);
                if let Ok(mut g) = t.lock() {
                    g.0 = true;
                    if let Some(w) = g.1.take() {
                        w.wake();
                    }
                }
            });
            s
        });
        match shared.lock() {
            Ok(g) if g.0 => Poll::Ready(()),
            Ok(mut g) => {
                g.1 = Some(cx.waker().clone());
                Poll::Pending
            }
            Err(_) => Poll::Ready(()),
        }
    }
}
