//! The driver-facing USB types of Calametra: the [`UsbInterface`] trait a production driver is
//! generic over, and the types its signature uses ([`ControlIn`], [`ControlOut`],
//! [`ControlType`], [`Recipient`], [`Setup`], [`TransferError`]); queued endpoints in nusb's
//! shape (`queue`: [`Endpoint`], [`Buffer`], [`Completion`]), cached descriptors
//! (`descriptors`) and the host side of discovery (`host`: [`UsbHost`]).
//!
//! A driver written against [`UsbInterface`] runs unchanged on hardware and under Calametra's
//! simulator (`calametra_core::interface::Interface`, in the crate's tests). This crate is what the
//! driver depends on at run time: it has no dependency by default, and the feature `nusb` adds
//! [`nusb::NusbInterface`], the trait over a claimed `nusb::Interface`. The feature `record`
//! (no dependency either) adds `record::Recorder`, which wraps any interface and writes every
//! transfer made through it to a usbmon pcapng file (`usbmon`, `pcapng`), on hardware or in a
//! simulation.
//!
//! ```toml
//! [dependencies]
//! calametra-usb = { version = "0.1", features = ["nusb"] }   # or without nusb: bring your own
//! ```
//!
//! ```
//! use calametra_usb::{ControlIn, ControlType, Recipient, TransferError, UsbInterface};
//! use std::time::Duration;
//!
//! /// Reads a device's 4-byte status; generic, so it runs on hardware and in a simulation.
//! async fn status(iface: &impl UsbInterface) -> Result<Vec<u8>, TransferError> {
//!     let req = ControlIn { control_type: ControlType::Vendor, recipient: Recipient::Device,
//!                           request: 0x87, value: 0, index: 0, length: 4 };
//!     iface.control_in(req, Duration::from_millis(500)).await
//! }
//! ```

#![warn(missing_docs)]

use std::future::Future;
use std::task::{Context, Poll};
use std::time::Duration;

mod descriptors;
mod host;
mod queue;

pub use descriptors::{Descriptors, EndpointInfo, EndpointKind};
pub use host::{DeviceId, DeviceInfo, HotplugEvent, HotplugWatch, UsbHost};
pub use queue::{Buffer, Completion, Endpoint, NextComplete, Timeout, TransferType};

#[cfg(feature = "nusb")]
pub mod nusb;
#[cfg(feature = "record")]
pub mod pcapng;
#[cfg(feature = "record")]
pub mod record;
#[cfg(feature = "record")]
pub mod usbmon;

/// The crate's README, compiled as a doctest so it cannot drift from the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

/// Direction bit of `bmRequestType` and of endpoint addresses.
pub const DIR_IN: u8 = 0x80;

/// The request type field of a setup packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ControlType {
    /// Standard (chapter 9) requests.
    Standard,
    /// Class requests.
    Class,
    /// Vendor requests.
    Vendor,
}

/// The recipient field of a setup packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Recipient {
    /// The device.
    Device,
    /// An interface (`wIndex` = interface number).
    Interface,
    /// An endpoint (`wIndex` = endpoint address).
    Endpoint,
    /// Other.
    Other,
}

/// A SETUP packet, the 8 bytes that start every control transfer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Setup {
    /// `bmRequestType`.
    pub request_type: u8,
    /// `bRequest`.
    pub request: u8,
    /// `wValue`.
    pub value: u16,
    /// `wIndex`.
    pub index: u16,
    /// `wLength`.
    pub length: u16,
}

impl Setup {
    /// Builds `bmRequestType` from its fields.
    pub fn request_type(dir_in: bool, ty: ControlType, recipient: Recipient) -> u8 {
        let t = match ty {
            ControlType::Standard => 0,
            ControlType::Class => 1,
            ControlType::Vendor => 2,
        };
        let r = match recipient {
            Recipient::Device => 0,
            Recipient::Interface => 1,
            Recipient::Endpoint => 2,
            Recipient::Other => 3,
        };
        (if dir_in { DIR_IN } else { 0 }) | (t << 5) | r
    }

    /// Whether the data stage is device-to-host.
    pub fn is_in(&self) -> bool {
        self.request_type & DIR_IN != 0
    }

    /// The type field.
    pub fn control_type(&self) -> Option<ControlType> {
        match (self.request_type >> 5) & 3 {
            0 => Some(ControlType::Standard),
            1 => Some(ControlType::Class),
            2 => Some(ControlType::Vendor),
            _ => None,
        }
    }

    /// The recipient field.
    pub fn recipient(&self) -> Recipient {
        match self.request_type & 0x1f {
            0 => Recipient::Device,
            1 => Recipient::Interface,
            2 => Recipient::Endpoint,
            _ => Recipient::Other,
        }
    }

    /// The 8 wire bytes (little-endian words).
    pub fn to_bytes(&self) -> [u8; 8] {
        let v = self.value.to_le_bytes();
        let i = self.index.to_le_bytes();
        let l = self.length.to_le_bytes();
        [
            self.request_type,
            self.request,
            v[0],
            v[1],
            i[0],
            i[1],
            l[0],
            l[1],
        ]
    }

    /// Parses the 8 wire bytes; anything else is an error, never a panic.
    pub fn from_bytes(b: &[u8]) -> Result<Setup, String> {
        let b: &[u8; 8] = b
            .try_into()
            .map_err(|_| format!("a setup packet is 8 bytes, found {}", b.len()))?;
        Ok(Setup {
            request_type: b[0],
            request: b[1],
            value: u16::from_le_bytes([b[2], b[3]]),
            index: u16::from_le_bytes([b[4], b[5]]),
            length: u16::from_le_bytes([b[6], b[7]]),
        })
    }

    /// The standard request's name, when this is one (`get_descriptor`, `set_configuration`).
    pub fn standard_name(&self) -> Option<&'static str> {
        if self.control_type() != Some(ControlType::Standard) {
            return None;
        }
        Some(match self.request {
            0 => "std_get_status",
            1 => "clear_feature",
            3 => "set_feature",
            5 => "set_address",
            6 => "get_descriptor",
            7 => "set_descriptor",
            8 => "get_configuration",
            9 => "set_configuration",
            10 => "get_interface",
            11 => "set_interface",
            12 => "synch_frame",
            0x30 => "set_sel",
            0x31 => "set_isoch_delay",
            _ => return None,
        })
    }
}

/// Control IN request, as `nusb::transfer::ControlIn`.
#[derive(Clone, Copy, Debug)]
pub struct ControlIn {
    /// Request type.
    pub control_type: ControlType,
    /// Recipient.
    pub recipient: Recipient,
    /// `bRequest`.
    pub request: u8,
    /// `wValue`.
    pub value: u16,
    /// `wIndex`.
    pub index: u16,
    /// `wLength`: bytes requested.
    pub length: u16,
}

/// Splits a raw `bmRequestType` into direction, type and recipient; the reserved type (3)
/// is an error naming the byte.
fn split_request_type(request_type: u8) -> Result<(bool, ControlType, Recipient), String> {
    let s = Setup {
        request_type,
        request: 0,
        value: 0,
        index: 0,
        length: 0,
    };
    let ty = s.control_type().ok_or_else(|| {
        format!("bmRequestType {request_type:#04x}: type bits 6..5 are 3 (reserved), expected 0, 1 or 2")
    })?;
    if request_type & 0x1c != 0 {
        return Err(format!(
            "bmRequestType {request_type:#04x}: recipient bits 4..0 above 3 are reserved"
        ));
    }
    Ok((s.is_in(), ty, s.recipient()))
}

impl ControlIn {
    /// A control IN request from a raw `bmRequestType` (as C and Python USB libraries pass
    /// it); an error names the byte when it is an OUT request or has reserved bits.
    pub fn from_request_type(
        request_type: u8,
        request: u8,
        value: u16,
        index: u16,
        length: u16,
    ) -> Result<ControlIn, String> {
        let (is_in, control_type, recipient) = split_request_type(request_type)?;
        if !is_in {
            return Err(format!(
                "bmRequestType {request_type:#04x} is host-to-device: a control IN needs bit 7 set"
            ));
        }
        Ok(ControlIn {
            control_type,
            recipient,
            request,
            value,
            index,
            length,
        })
    }

    /// The setup packet.
    pub fn setup(&self) -> Setup {
        Setup {
            request_type: Setup::request_type(true, self.control_type, self.recipient),
            request: self.request,
            value: self.value,
            index: self.index,
            length: self.length,
        }
    }
}

/// Control OUT request, as `nusb::transfer::ControlOut`.
#[derive(Clone, Copy, Debug)]
pub struct ControlOut<'a> {
    /// Request type.
    pub control_type: ControlType,
    /// Recipient.
    pub recipient: Recipient,
    /// `bRequest`.
    pub request: u8,
    /// `wValue`.
    pub value: u16,
    /// `wIndex`.
    pub index: u16,
    /// The data stage.
    pub data: &'a [u8],
}

impl<'a> ControlOut<'a> {
    /// A control OUT request from a raw `bmRequestType`; an error names the byte when it is an
    /// IN request or has reserved bits.
    pub fn from_request_type(
        request_type: u8,
        request: u8,
        value: u16,
        index: u16,
        data: &'a [u8],
    ) -> Result<ControlOut<'a>, String> {
        let (is_in, control_type, recipient) = split_request_type(request_type)?;
        if is_in {
            return Err(format!(
                "bmRequestType {request_type:#04x} is device-to-host: a control OUT needs bit 7 clear"
            ));
        }
        Ok(ControlOut {
            control_type,
            recipient,
            request,
            value,
            index,
            data,
        })
    }

    /// The setup packet (`wLength` = data length).
    pub fn setup(&self) -> Setup {
        Setup {
            request_type: Setup::request_type(false, self.control_type, self.recipient),
            request: self.request,
            value: self.value,
            index: self.index,
            length: self.data.len().min(u16::MAX as usize) as u16,
        }
    }
}

/// Why a transfer failed, as the host sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum TransferError {
    /// The endpoint stalled.
    Stall,
    /// The device is gone.
    Disconnected,
    /// The transfer was cancelled (dropped) before it completed.
    Cancelled,
    /// The control transfer's timeout passed.
    Timeout,
    /// A bus or host controller error.
    Fault,
}

impl TransferError {
    /// The status word used in traces.
    pub fn as_str(self) -> &'static str {
        match self {
            TransferError::Stall => "stall",
            TransferError::Disconnected => "disconnected",
            TransferError::Cancelled => "cancelled",
            TransferError::Timeout => "timeout",
            TransferError::Fault => "fault",
        }
    }
}

impl std::fmt::Display for TransferError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

impl std::error::Error for TransferError {}

/// A driver's view of a claimed USB interface: the shape it has on hardware.
///
/// Implemented by the simulator's interface (`calametra_core::interface::Interface`) and, with the
/// feature `nusb`, by [`nusb::NusbInterface`] over a real device. `sleep` is the platform's
/// timer: virtual time in the simulator, real time on hardware.
pub trait UsbInterface {
    /// A control IN transfer of up to `req.length` bytes; fails `Timeout` after `timeout`.
    fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>>;
    /// A control OUT transfer; fails `Timeout` after `timeout`.
    fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), TransferError>>;
    /// A bulk OUT transfer on endpoint `ep`; returns the bytes the device took.
    fn bulk_out(&self, ep: u8, data: Vec<u8>)
        -> impl Future<Output = Result<usize, TransferError>>;
    /// A bulk IN transfer of up to `len` bytes on endpoint `ep`.
    fn bulk_in(&self, ep: u8, len: usize) -> impl Future<Output = Result<Vec<u8>, TransferError>>;
    /// An interrupt IN transfer of up to `len` bytes on endpoint `ep`.
    fn interrupt_in(
        &self,
        ep: u8,
        len: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>>;
    /// Waits `d` on the platform's clock.
    fn sleep(&self, d: Duration) -> impl Future<Output = ()>;
    /// Resets the device (a USB bus reset). The default reports `Fault` (not supported).
    fn reset(&self) -> impl Future<Output = Result<(), TransferError>> {
        async { Err(TransferError::Fault) }
    }

    // Below: operations with defaults, so an implementation written before them still
    // compiles. A default that cannot do the operation reports `Fault` (not supported).

    /// A control OUT transfer that gives the bytes of its data stage sent. The default sends
    /// it with [`UsbInterface::control_out`] and counts the whole data stage.
    fn control_out_len(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> impl Future<Output = Result<usize, TransferError>> {
        let n = req.data.len();
        let f = self.control_out(req, timeout);
        async move { f.await.map(|()| n) }
    }

    /// An interrupt OUT transfer on endpoint `ep`; returns the bytes the device took.
    fn interrupt_out(
        &self,
        ep: u8,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<usize, TransferError>> {
        let _ = (ep, data);
        async { Err(TransferError::Fault) }
    }

    /// Clears endpoint `ep`'s halt (`CLEAR_FEATURE(ENDPOINT_HALT)`, nusb's
    /// `Endpoint::clear_halt`): after a `Stall` on a bulk or interrupt endpoint every transfer
    /// on it stalls until this is done.
    fn clear_halt(&self, ep: u8) -> impl Future<Output = Result<(), TransferError>> {
        let _ = ep;
        async { Err(TransferError::Fault) }
    }

    /// Selects alternate setting `alt` of the claimed interface (`SET_INTERFACE`, nusb's
    /// `Interface::set_alt_setting`); a setting the device refuses fails `Stall`.
    fn set_alt_setting(&self, alt: u8) -> impl Future<Output = Result<(), TransferError>> {
        let _ = alt;
        async { Err(TransferError::Fault) }
    }

    /// The device's cached descriptors (device, configurations, strings).
    fn descriptors(&self) -> Result<Descriptors, TransferError> {
        Err(TransferError::Fault)
    }

    /// `fut`'s output, or `Timeout` if `d` passes first on the platform's clock (then `fut` is
    /// dropped: a transfer is cancelled). Any transfer gets a timeout this way.
    fn timeout<F: Future>(&self, d: Duration, fut: F) -> Timeout<F, impl Future<Output = ()>> {
        Timeout::new(fut, self.sleep(d))
    }

    /// Opens endpoint `ep` (its address: bit 7 for IN) for several transfers in flight, as
    /// nusb's `Interface::endpoint`. Fails when the implementation cannot queue on it.
    fn endpoint(&self, ep: u8, ty: TransferType) -> Result<Endpoint<'_, Self>, TransferError>
    where
        Self: Sized,
    {
        self.queue_open(ep, ty)?;
        Ok(Endpoint::new(self, ep, ty))
    }

    // The queue's hooks, called by [`Endpoint`] (drivers call the endpoint, not these).
    // The defaults queue nothing: `queue_open` fails `Fault`.

    /// Prepares endpoint `ep` for queued transfers (nothing is in flight on it).
    fn queue_open(&self, ep: u8, ty: TransferType) -> Result<(), TransferError> {
        let _ = (ep, ty);
        Err(TransferError::Fault)
    }

    /// Submits a transfer on `ep` behind those in flight there.
    fn queue_submit(&self, ep: u8, ty: TransferType, buf: Buffer) {
        let _ = (ep, ty, buf);
    }

    /// Polls the oldest transfer submitted on `ep` (called only while one is pending).
    fn queue_poll(&self, ep: u8, cx: &mut Context<'_>) -> Poll<Completion> {
        let _ = (ep, cx);
        Poll::Ready(Completion::failed(TransferError::Fault))
    }

    /// Cancels every transfer in flight on `ep`; their completions stay to be polled.
    fn queue_cancel_all(&self, ep: u8) {
        let _ = ep;
    }

    /// The endpoint is dropped: cancels what is in flight on `ep` and forgets its completions.
    fn queue_close(&self, ep: u8) {
        let _ = ep;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn setup_round_trips() {
        let s = ControlIn {
            control_type: ControlType::Vendor,
            recipient: Recipient::Device,
            request: 0x87,
            value: 1,
            index: 0x200,
            length: 4,
        }
        .setup();
        assert_eq!(s.to_bytes(), [0xc0, 0x87, 1, 0, 0, 2, 4, 0]);
        assert_eq!(Setup::from_bytes(&s.to_bytes()).unwrap(), s);
        assert!(Setup::from_bytes(&[1, 2, 3]).is_err());
        assert!(s.is_in());
        assert_eq!(s.control_type(), Some(ControlType::Vendor));
        let g = Setup::from_bytes(&[0x80, 6, 0, 1, 0, 0, 18, 0]).unwrap();
        assert_eq!(g.standard_name(), Some("get_descriptor"));
    }

    /// A raw `bmRequestType` splits into the request's fields and builds the same setup
    /// packet; a wrong direction or a reserved type is an error naming the byte.
    #[test]
    fn a_raw_request_type_builds_the_request() {
        let r = ControlIn::from_request_type(0xa1, 3, 0, 2, 6).unwrap();
        assert_eq!(
            (r.control_type, r.recipient),
            (ControlType::Class, Recipient::Interface)
        );
        assert_eq!(r.setup().request_type, 0xa1);
        let o = ControlOut::from_request_type(0x41, 1, 5, 0, &[1, 2]).unwrap();
        assert_eq!(o.setup().to_bytes(), [0x41, 1, 5, 0, 0, 0, 2, 0]);
        let e = ControlIn::from_request_type(0x21, 3, 0, 0, 6).unwrap_err();
        assert!(e.contains("0x21") && e.contains("bit 7"), "{e}");
        let e = ControlOut::from_request_type(0x60, 3, 0, 0, &[]).unwrap_err();
        assert!(e.contains("0x60") && e.contains("reserved"), "{e}");
        assert!(ControlOut::from_request_type(0xc0, 3, 0, 0, &[]).is_err());
        assert!(ControlIn::from_request_type(0x85, 3, 0, 0, 1).is_err());
    }
}
