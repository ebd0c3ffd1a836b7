//! The device side of the bus: the [`Device`] trait models implement, the [`Reply`] a device
//! gives, the [`DevCtx`] it acts through during a call (clock, trace, transitions as fault
//! sites, marks, model gaps, timers, its data stream), the effects a call asks for, and the
//! [`Loopback`] test device. A device is called by the world ([`crate::world`]) and reaches the
//! bus (`bus::Core`) only through its context; it never calls back into the world.
//! Nothing here reads the wall clock.

use crate::bus::Core;
use crate::clock::Nanos;
use crate::fault::SiteKind;
use calametra_usb::{ControlIn, ControlOut, ControlType, Recipient, Setup};
use std::any::Any;

/// Side effects a device asked for during one call, applied after it returns.
#[derive(Default)]
pub(crate) struct Effects {
    pub(crate) disconnect: bool,
    pub(crate) stall: bool,
    pub(crate) delay: Nanos,
}

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

    /// The device's descriptors (device, configurations, strings), as a host caches them at
    /// enumeration: what [`calametra_usb::UsbInterface::descriptors`] gives a driver and the
    /// simulated host lists ([`crate::discovery::SimHost`]). Read without a context: no
    /// trace record, no fault site. `None` by default.
    fn descriptors(&self) -> Option<calametra_usb::Descriptors> {
        None
    }

    /// The model's state for people, as (name, value) pairs in a fixed order: what a state
    /// dump (`calametra replay FILE --at STEP`, [`crate::state`]) shows of it. Empty by
    /// default (then a [`crate::describe_model!`] registration is used, if any).
    fn describe(&self) -> Vec<(String, String)> {
        Vec::new()
    }

    /// The names of the pictures the device shows now (a display's scanout, one per output
    /// showing a frame), in a fixed order. A new frame shown gets a new name. Called at every
    /// scheduling point of a run that watches pictures ([`crate::picture`]), so it must be
    /// cheap: names, no pixels. None by default.
    fn pictures(&self) -> Vec<String> {
        Vec::new()
    }

    /// Renders the picture `name` (one [`Device::pictures`] gave) as a PNG; `None` for a name
    /// it does not show. Called once per name, when it first appears.
    fn picture(&self, name: &str) -> Option<crate::picture::Picture> {
        let _ = name;
        None
    }
}

/// What a device acts through during a call: the clock, the trace, transitions (fault sites),
/// coverage marks, model gaps, timers and the device's data stream.
pub struct DevCtx<'a> {
    pub(crate) core: &'a mut Core,
    pub(crate) dev: usize,
    pub(crate) name: &'a str,
    pub(crate) effects: Effects,
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
        transition(self, machine, from, to)
    }

    /// Records that a run reached a named semantic event (a coverage mark).
    pub fn mark(&mut self, name: &str) {
        crate::bus::mark(self.core, self.name, name);
    }

    /// Records a request the device has no evidence for: the device should answer as safely as
    /// the bus allows (a stall). The run ends as a model gap, apart from driver failures.
    pub fn model_gap(&mut self, request: &str, state: &str) {
        crate::bus::model_gap(self.core, self.name, request, state);
    }

    /// Asks for [`Device::on_timer`] with `token` after `ns` of virtual time.
    pub fn wake_after(&mut self, ns: Nanos, token: u64) {
        crate::bus::device_timer(self.core, self.dev, ns, token);
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

    /// Completes the transfer in progress `ns` of virtual time later than the bus alone would
    /// (a device that takes time to answer: a learned model's latency). Calls add up; outside
    /// a transfer (a timer) it does nothing.
    pub fn delay_reply(&mut self, ns: Nanos) {
        self.effects.delay = self.effects.delay.saturating_add(ns);
    }

    /// Disconnects this device from the bus after the current call returns.
    pub fn disconnect(&mut self) {
        self.effects.disconnect = true;
    }
}

/// `DevCtx::transition`.
pub(crate) fn transition(cx: &mut DevCtx<'_>, machine: &str, from: &str, to: &str) -> bool {
    // The base is put together in the site table's buffer: no allocation a transition, and
    // the name `<base>#<n>` is written to the record by its parts.
    let site = cx.core.site(
        |base| {
            for part in [machine, ".", from, "->", to] {
                base.push_str(part);
            }
        },
        &SiteKind::Transition,
    );
    let now = cx.core.now;
    let base = cx.core.site_table.base(site.base);
    cx.core.trace.emit(now, "transition", cx.name, true, |d| {
        d.str("machine", machine)
            .str("from", from)
            .str("to", to)
            .site("site", base, u64::from(site.n));
    });
    cx.core.cover_transition(cx.name, machine, from, to);
    let (fault, _) = cx.core.fault_at(site, &SiteKind::Transition, false);
    let Some(fault) = fault else {
        return true;
    };
    let at = fault.at_transition();
    cx.effects.stall |= at.refused;
    cx.effects.disconnect |= at.disconnect;
    cx.effects.delay = cx.effects.delay.saturating_add(at.delay);
    !at.refused
}

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

    /// Request 0x01, a vendor control OUT to the device: stores `data`.
    pub fn store(data: &[u8]) -> ControlOut<'_> {
        ControlOut {
            control_type: ControlType::Vendor,
            recipient: Recipient::Device,
            request: 0x01,
            value: 0,
            index: 0,
            data,
        }
    }

    /// Request 0x02, a vendor control IN from the device: the stored bytes, up to `length`.
    pub fn load(length: u16) -> ControlIn {
        ControlIn {
            control_type: ControlType::Vendor,
            recipient: Recipient::Device,
            request: 0x02,
            value: 0,
            index: 0,
            length,
        }
    }
}

impl Device for Loopback {
    fn name(&self) -> &str {
        "loopback"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            (0x40, 0x01) => {
                // The state changes exactly when emptiness does (no string comparison).
                if self.stored.is_empty() != data.is_empty()
                    && !cx.transition("echo", state(&self.stored), state(data))
                {
                    return Reply::Stall;
                }
                // The stored copy's buffer is reused: no allocation a store.
                self.stored.clear();
                self.stored.extend_from_slice(data);
                Reply::Ack
            }
            (0xc0, 0x02) => {
                let mut d = self.stored[..self.stored.len().min(setup.length as usize)].to_vec();
                if self.sabotage_flip && !d.is_empty() {
                    d[0] ^= 0xff;
                }
                Reply::Data(d)
            }
            // CLEAR_FEATURE(ENDPOINT_HALT) on its endpoints, and its one alternate setting.
            (0x02, 1) if setup.value == 0 && matches!(setup.index, 0x01 | 0x81 | 0x82) => {
                Reply::Ack
            }
            (0x01, 11) if setup.value == 0 && setup.index == 0 => Reply::Ack,
            (0x01, 11) if setup.index == 0 => Reply::Stall,
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
        match (setup.control_type(), setup.request) {
            (Some(ControlType::Vendor), 0x01) => Some("store"),
            (Some(ControlType::Vendor), 0x02) => Some("load"),
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
