//! The USB layer: setup packets, transfer types, the [`Device`] trait models implement, the
//! [`DevCtx`] a device acts through, and the driver-facing [`Interface`].
//!
//! The driver side has the shape of `nusb`'s `Interface` (control in/out with a setup and a
//! timeout, bulk in/out, interrupt in), behind the [`UsbInterface`] trait so that one driver
//! runs on the simulator and on hardware. The device side is synchronous and event-shaped
//! (a SETUP with its data stage, an OUT payload, an IN poll, a reset, a timer) so the same
//! trait can host a hand-written model, real `usb-device` firmware, or be served to a QEMU
//! guest. Nothing here reads the wall clock; transfers take modelled time on the virtual clock.

use crate::clock::Nanos;
use crate::world::{self, Core};
use std::any::Any;
use std::future::Future;
use std::time::Duration;

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

impl ControlIn {
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

impl ControlOut<'_> {
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

/// A device's answer to one bus event.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Reply {
    /// OUT accepted (or a zero-length IN status).
    Ack,
    /// IN data.
    Data(Vec<u8>),
    /// STALL handshake.
    Stall,
    /// Not ready yet (IN only): the host polls again later.
    Nak,
}

/// A USB device on the simulated bus: a model, firmware, or anything that answers packets.
///
/// Calls arrive one at a time on the simulator's thread, in the order the bus delivers them.
/// A device changes state only inside these calls, and announces every change of state through
/// [`DevCtx::transition`] so that faults can match at it and the trace shows it.
pub trait Device: Any {
    /// The device's name in trace records (`actor`).
    fn name(&self) -> &str {
        "device"
    }

    /// A control transfer: the SETUP and, for OUT, its data stage. Return `Data` (at most
    /// `setup.length` bytes) for IN, `Ack` for OUT, or `Stall`.
    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply;

    /// A bulk or interrupt OUT payload on endpoint `ep`.
    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        let _ = (ep, data);
        cx.model_gap(&format!("out ep {ep:#04x}"), "no OUT endpoint");
        Reply::Stall
    }

    /// An IN token on bulk or interrupt endpoint `ep` (`0x81`...). `Nak` when nothing is ready:
    /// the bus asks again after the device's next state change.
    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        let _ = (cx, ep, max_len);
        Reply::Nak
    }

    /// A timer the device asked for with [`DevCtx::wake_after`] is due.
    fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
        let _ = (cx, token);
    }

    /// USB bus reset (also sent when a device is re-attached).
    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        let _ = cx;
    }

    /// The device was unplugged.
    fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
        let _ = cx;
    }

    /// The name of a request for fault sites (`get_status` gives `ctrl.get_status#3`). The bus
    /// names standard requests itself; others default to `ctrl.<type>_<request>` in hex.
    fn request_name(&self, setup: &Setup) -> Option<&str> {
        let _ = setup;
        None
    }

    /// The model's state for people, as (name, value) pairs in a fixed order: what a state
    /// dump (`calametra replay FILE --at STEP`, [`crate::state`]) shows of it. Empty by
    /// default (then a [`crate::describe_model!`] registration is used, if any).
    fn describe(&self) -> Vec<(String, String)> {
        Vec::new()
    }
}

/// What a device acts through during a call: the clock, the trace, transitions (fault sites),
/// coverage marks, model gaps, timers and the device's data stream.
pub struct DevCtx<'a> {
    pub(crate) core: &'a mut Core,
    pub(crate) dev: usize,
    pub(crate) name: &'a str,
    pub(crate) effects: world::Effects,
}

impl<'a> DevCtx<'a> {
    /// Virtual time now.
    pub fn now(&self) -> Nanos {
        self.core.now
    }

    /// Announces a change of state of `machine` from `from` to `to`. The site
    /// `<machine>.<from>-><to>#<n>` is a fault site: returns `false` when a `stall` fault there
    /// refuses the transition (the device must then not change state, and should stall the
    /// request in progress). `disconnect` and `delay` faults take effect after the call.
    pub fn transition(&mut self, machine: &str, from: &str, to: &str) -> bool {
        world::transition(self, machine, from, to)
    }

    /// Records that a run reached a named semantic event (a coverage mark).
    pub fn mark(&mut self, name: &str) {
        world::mark(self.core, self.name, name);
    }

    /// Records a request the device has no evidence for: the device should answer as safely as
    /// the bus allows (a stall). The run ends as a model gap, apart from driver failures.
    pub fn model_gap(&mut self, request: &str, state: &str) {
        world::model_gap(self.core, self.name, request, state);
    }

    /// Asks for [`Device::on_timer`] with `token` after `ns` of virtual time.
    pub fn wake_after(&mut self, ns: Nanos, token: u64) {
        world::device_timer(self.core, self.dev, ns, token);
    }

    /// A draw in `0..n` from this device's data stream (`data/<device name>`, so the draws of
    /// other actors do not move it): in the baseline trial, seed 0's draws (not 0); on replay,
    /// the recorded values; 0 only for the default source.
    pub fn data_below(&mut self, n: u64) -> u64 {
        self.core.decide.data(self.name, n)
    }

    /// A draw in `0..n` from the scenario's own stream `user/<stream>` (see
    /// [`crate::exec::draw_below`]).
    pub fn draw_below(&mut self, stream: &str, n: u64) -> u64 {
        self.core.decide.user(stream, n)
    }

    /// Writes a model-specific record of `kind` (deterministic) to the trace.
    pub fn record(&mut self, kind: &str, fill: impl FnOnce(&mut crate::trace::Data<'_>)) {
        let now = self.core.now;
        self.core.trace.emit(now, kind, self.name, true, fill);
    }

    /// Disconnects this device from the bus after the current call returns.
    pub fn disconnect(&mut self) {
        self.effects.disconnect = true;
    }
}

/// A driver's view of a claimed USB interface: the shape it has on hardware.
///
/// Implemented by the simulator's [`Interface`] and, in the examples, by a thin wrapper over
/// `nusb`. `sleep` is the platform's timer: virtual time in the simulator, real time on hardware.
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
}

pub use crate::world::Interface;

/// A loopback test device: vendor request 0x01 OUT stores its data, 0x02 IN returns it,
/// bulk OUT on 0x01 queues payloads that bulk IN on 0x81 returns, interrupt IN on 0x82 yields
/// a counter every time a payload is queued. Its one state machine is `echo.empty->full`.
#[derive(Default)]
pub struct Loopback {
    stored: Vec<u8>,
    queue: std::collections::VecDeque<Vec<u8>>,
    interrupts: u32,
    /// A test-only lie: when set, IN replies come back with the first byte flipped.
    pub sabotage_flip: bool,
}

impl Loopback {
    /// The bytes last stored by request 0x01.
    pub fn stored(&self) -> &[u8] {
        &self.stored
    }
}

impl Device for Loopback {
    fn name(&self) -> &str {
        "loopback"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            (0x40, 0x01) => {
                let (from, to) = (state(&self.stored), state(data));
                if from != to && !cx.transition("echo", from, to) {
                    return Reply::Stall;
                }
                self.stored = data.to_vec();
                Reply::Ack
            }
            (0xc0, 0x02) => {
                let mut d = self.stored.clone();
                d.truncate(setup.length as usize);
                if self.sabotage_flip && !d.is_empty() {
                    d[0] ^= 0xff;
                }
                Reply::Data(d)
            }
            _ => {
                cx.model_gap(
                    &format!("control {:02x}/{:02x}", setup.request_type, setup.request),
                    "loopback",
                );
                Reply::Stall
            }
        }
    }

    fn out(&mut self, _cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        if ep != 0x01 {
            return Reply::Stall;
        }
        self.queue.push_back(data.to_vec());
        self.interrupts += 1;
        Reply::Ack
    }

    fn poll_in(&mut self, _cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        match ep {
            0x81 => match self.queue.pop_front() {
                Some(mut d) => {
                    d.truncate(max_len);
                    Reply::Data(d)
                }
                None => Reply::Nak,
            },
            0x82 if self.interrupts > 0 => {
                self.interrupts -= 1;
                Reply::Data(vec![self.interrupts as u8])
            }
            0x82 => Reply::Nak,
            _ => Reply::Stall,
        }
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        match setup.request {
            0x01 => Some("store"),
            0x02 => Some("load"),
            _ => None,
        }
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("echo".into(), state(&self.stored).into()),
            ("stored".into(), crate::hex::encode(&self.stored)),
            ("bulk queue".into(), self.queue.len().to_string()),
            ("interrupts pending".into(), self.interrupts.to_string()),
        ]
    }
}

fn state(d: &[u8]) -> &'static str {
    if d.is_empty() {
        "empty"
    } else {
        "full"
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
}
