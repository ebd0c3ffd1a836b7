//! [`FirmwareDevice`]: unmodified `usb-device` firmware (its `UsbDevice`, its classes and its
//! poll loop) answering on the simulator's bus as a [`Device`].
//!
//! Each bus event becomes the packets a device controller would see, fed to the [`SimBus`] one at
//! a time, each followed by the firmware's poll loop until it settles (a poll that changes
//! nothing on the bus):
//!
//! - a control transfer is a SETUP packet, then for OUT its data stage cut into packets of
//!   endpoint 0's max packet size and the status stage (the host takes the firmware's
//!   zero-length IN packet), or for IN the data packets the firmware writes, taken until a short
//!   packet or `wLength`, and the status stage (a zero-length OUT);
//! - a bulk or interrupt OUT transfer is its packets; an IN poll takes packets until a short one;
//! - a USB reset is reset signalling; unplugging is a suspend (a self-powered device losing VBUS).
//!
//! One order is a real choice: the status stage of a control OUT transfer ends when the host
//! takes the zero-length IN packet, and the firmware hears of it (IN-complete) at its next poll,
//! which may come before or together with the next SETUP (usb-device then ignores the
//! IN-complete). The default is "before"; a draw from the `data` stream may keep it pending
//! until the next event instead, and the trace says so.
//!
//! Observation: after every event the device reports the firmware's state machines that changed
//! through `DevCtx::transition`: usb-device's own state (`usb.default->configured`), states the
//! firmware told the host in a reply ([`Firmware::reply_state`]) and states read by
//! side-effect-free probe requests ([`StateProbe`]), sent through the same control pipe but not
//! traced as transfers. A `stall` fault at such a transition site refuses it: firmware cannot be
//! told not to change state, so the device rebuilds the firmware and replays every packet it saw
//! before the event (the firmware is a function of its input), leaving it exactly as if the
//! request had never arrived, and the request stalls.
//!
//! Lifetimes: usb-device borrows one `UsbBusAllocator` for the whole life of the `UsbDevice`,
//! its classes and their endpoints. Each firmware instance gets a leaked `Box` holding the
//! allocator. The allocator is a small shell (the `SimBus` inside is one `Arc`; the endpoint
//! buffers behind it are freed with the device), so an exploration of thousands of runs leaks a
//! few hundred kilobytes, and no unsafe code can hand out a dangling `&'static` (a
//! self-referential device would have to promise that no class ever keeps its allocator
//! reference beyond the device, which the compiler cannot check for arbitrary firmware).
//!
//! Nothing here reads the wall clock: firmware time is the simulator's, and the firmware runs
//! only inside the device's calls.

use super::bus::{BusHost, Handshake, SimBus};
use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use usb_device::bus::UsbBusAllocator;
use usb_device::device::UsbDeviceState;

/// The allocator firmware is built on.
pub type Allocator = UsbBusAllocator<SimBus>;

/// Polls after which a firmware that still changes the bus every time is taken as settled (a
/// firmware that writes on every pass of its main loop).
const MAX_POLLS: usize = 256;

/// In a seeded run, one in this many control OUT transfers leaves its status-stage IN-complete
/// pending so that it meets the next SETUP in the same poll.
const COALESCE_ODDS: u64 = 8;

/// A firmware image: the `UsbDevice`, its classes and what the main loop does around them.
pub trait Firmware: 'static {
    /// One pass of the firmware's main loop: `usb_dev.poll(&mut [&mut class, ...])` and
    /// whatever else it does each time.
    fn poll(&mut self);

    /// usb-device's state (`UsbDevice::state`), reported as the machine `usb`.
    fn usb_state(&self) -> UsbDeviceState;

    /// The device's name in trace records.
    fn name(&self) -> &str {
        "firmware"
    }

    /// The fault-site name of a class or vendor request (`dnload` gives `ctrl.dnload#3`).
    fn request_name(&self, setup: &Setup) -> Option<&'static str> {
        let _ = setup;
        None
    }

    /// Requests that read a state without changing anything, sent after every event.
    fn probes(&self) -> &[StateProbe] {
        &[]
    }

    /// A state the firmware announced to the host in the reply to `setup` (a DFU_GETSTATUS
    /// answer's `bState`), as `(machine, state)`.
    fn reply_state(&self, setup: &Setup, data: &[u8]) -> Option<(&'static str, &'static str)> {
        let _ = (setup, data);
        None
    }
}

/// A control IN request that reads one state machine's state and changes nothing (for a DFU
/// class, DFU_GETSTATE).
#[derive(Clone, Copy, Debug)]
pub struct StateProbe {
    /// The machine's name in transition sites (`dfu`).
    pub machine: &'static str,
    /// The request.
    pub setup: Setup,
    /// The state's name from the reply; `None` when the reply makes no sense.
    pub decode: fn(&[u8]) -> Option<&'static str>,
}

/// What the device fed the firmware, in order: replaying it rebuilds the firmware's state.
#[derive(Clone, Debug)]
enum Op {
    Setup([u8; 8]),
    Out(u8, Vec<u8>),
    TakeIn(u8),
    Reset,
    Suspend,
    Resume,
    Settle,
}

/// A control transfer the firmware has not finished answering (it NAKed), resumed when the
/// bus offers the same transfer again.
#[derive(Clone, Debug, PartialEq, Eq)]
struct PendingControl {
    setup: Setup,
    data: Vec<u8>,
    stage: Stage,
}

#[derive(Clone, Debug, PartialEq, Eq)]
enum Stage {
    /// IN data collected so far.
    InData(Vec<u8>),
    /// OUT data bytes sent so far.
    OutData(usize),
    /// Waiting for the status stage's zero-length IN packet.
    Status,
}

/// How a control transfer ended on the bus.
enum Ctrl {
    Data(Vec<u8>),
    Ack,
    Stall,
    Nak(Stage),
}

/// What is restored when a refused transition rolls an event back.
#[derive(Clone)]
struct Mark {
    journal: usize,
    states: Vec<(&'static str, &'static str)>,
    pending_status: bool,
    pending_control: Option<PendingControl>,
    pending_out: Vec<(u8, Vec<u8>, usize)>,
    pending_in: Vec<(u8, Vec<u8>)>,
}

/// Builds a firmware image on an allocator.
type Build<F> = Box<dyn Fn(&'static Allocator) -> F>;

/// Unmodified usb-device firmware as a simulated device.
pub struct FirmwareDevice<F: Firmware> {
    build: Build<F>,
    fw: F,
    host: BusHost,
    name: String,
    journal: Vec<Op>,
    /// The last observed state of each machine, in first-seen order.
    states: Vec<(&'static str, &'static str)>,
    /// The host took a status-stage IN packet the firmware has not polled yet.
    pending_status: bool,
    pending_control: Option<PendingControl>,
    pending_out: Vec<(u8, Vec<u8>, usize)>,
    pending_in: Vec<(u8, Vec<u8>)>,
    /// Packets of the current event, for its trace record.
    packets: Vec<String>,
    quiet: bool,
    polls: u64,
    rebuilds: u32,
}

impl<F: Firmware> FirmwareDevice<F> {
    /// Boots firmware built by `build` (called once now, and again for every rollback): the
    /// firmware is plugged in and sees the bus reset of its attachment.
    pub fn new(build: impl Fn(&'static Allocator) -> F + 'static) -> Self {
        let (fw, host) = Self::instantiate(&build);
        let name = fw.name().to_string();
        let mut d = FirmwareDevice {
            build: Box::new(build),
            fw,
            host,
            name,
            journal: Vec::new(),
            states: Vec::new(),
            pending_status: false,
            pending_control: None,
            pending_out: Vec::new(),
            pending_in: Vec::new(),
            packets: Vec::new(),
            quiet: false,
            polls: 0,
            rebuilds: 0,
        };
        d.step(Op::Reset);
        d.step(Op::Settle);
        let seen = d.look(None);
        d.states = seen;
        d.packets.clear();
        d
    }

    fn instantiate(build: &dyn Fn(&'static Allocator) -> F) -> (F, BusHost) {
        let (bus, host) = SimBus::new();
        // Leaked on purpose: see the module docs.
        let alloc: &'static Allocator = Box::leak(Box::new(UsbBusAllocator::new(bus)));
        (build(alloc), host)
    }

    /// The firmware image, to read its ground truth.
    pub fn firmware(&self) -> &F {
        &self.fw
    }

    /// The last observed state of `machine`.
    pub fn state(&self, machine: &str) -> Option<&'static str> {
        self.states
            .iter()
            .find(|(m, _)| *m == machine)
            .map(|(_, s)| *s)
    }

    /// The USB address the firmware set (0 until a SET_ADDRESS completed).
    pub fn address(&self) -> u8 {
        self.host.address()
    }

    /// How often the firmware was rebuilt to roll back a refused transition.
    pub fn rebuilds(&self) -> u32 {
        self.rebuilds
    }

    /// Passes of the firmware's main loop so far (rollbacks included).
    pub fn polls(&self) -> u64 {
        self.polls
    }

    /// Suspends the bus (an external event): the firmware sees `PollResult::Suspend`.
    pub fn suspend(&mut self, cx: &mut DevCtx<'_>) {
        self.event(cx, |d| {
            d.step(Op::Suspend);
            d.step(Op::Settle);
        });
    }

    /// Resume signalling after a suspend.
    pub fn resume(&mut self, cx: &mut DevCtx<'_>) {
        self.event(cx, |d| {
            d.step(Op::Resume);
            d.step(Op::Settle);
        });
    }

    /// Runs the firmware's main loop until it settles (a firmware with work of its own).
    pub fn tick(&mut self, cx: &mut DevCtx<'_>) {
        self.event(cx, |d| {
            d.step(Op::Settle);
        });
    }

    // ---- feeding the firmware ------------------------------------------------------------

    /// Applies one op (and journals it); returns the handshake of a packet op.
    fn op(&mut self, op: Op) -> Result<Vec<u8>, Handshake> {
        let r = self.apply(&op);
        if !self.quiet {
            let tok = match (&op, &r) {
                (Op::Setup(_), _) => Some("SETUP".to_string()),
                (Op::Out(ep, d), Ok(_)) => Some(format!("OUT{}:{}", ep & 0x0f, d.len())),
                (Op::TakeIn(ep), Ok(d)) => Some(format!("IN{}:{}", ep & 0x0f, d.len())),
                (Op::Out(ep, _), Err(h)) | (Op::TakeIn(ep), Err(h)) => {
                    let dir = if matches!(op, Op::Out(..)) {
                        "OUT"
                    } else {
                        "IN"
                    };
                    Some(format!("{dir}{}:{}", ep & 0x0f, hs(*h)))
                }
                (Op::Reset, _) => Some("RESET".into()),
                (Op::Suspend, _) => Some("SUSPEND".into()),
                (Op::Resume, _) => Some("RESUME".into()),
                (Op::Settle, _) => None,
            };
            if let Some(t) = tok {
                self.packets.push(t);
            }
        }
        self.journal.push(op);
        r
    }

    /// [`Self::op`] for ops whose handshake does not matter.
    fn step(&mut self, op: Op) {
        let _ = self.op(op);
    }

    fn apply(&mut self, op: &Op) -> Result<Vec<u8>, Handshake> {
        match op {
            Op::Setup(b) => {
                self.host.setup(b);
                Ok(Vec::new())
            }
            Op::Out(ep, d) => self.host.out((ep & 0x0f) as usize, d).map(|()| Vec::new()),
            Op::TakeIn(ep) => self.host.take_in((ep & 0x0f) as usize),
            Op::Reset => {
                self.host.reset();
                Ok(Vec::new())
            }
            Op::Suspend => {
                self.host.suspend();
                Ok(Vec::new())
            }
            Op::Resume => {
                self.host.resume();
                Ok(Vec::new())
            }
            Op::Settle => {
                self.settle();
                Ok(Vec::new())
            }
        }
    }

    /// Runs the firmware's main loop until a pass changes nothing on the bus.
    fn settle(&mut self) {
        for _ in 0..MAX_POLLS {
            let before = self.host.changes();
            self.fw.poll();
            self.polls += 1;
            if self.host.changes() == before {
                return;
            }
        }
    }

    fn ep0_packet(&self) -> usize {
        self.host.max_packet(0).unwrap_or(8).max(1) as usize
    }

    /// The IN packets of a data stage, until a short one or `length` bytes.
    fn in_data(
        &mut self,
        ep: u8,
        length: usize,
        mut got: Vec<u8>,
        mps: usize,
    ) -> Result<Vec<u8>, (Handshake, Vec<u8>)> {
        loop {
            match self.op(Op::TakeIn(ep)) {
                Ok(p) => {
                    let short = p.len() < mps;
                    got.extend_from_slice(&p);
                    self.step(Op::Settle);
                    if short || got.len() >= length {
                        return Ok(got);
                    }
                }
                Err(h) => return Err((h, got)),
            }
        }
    }

    /// A control transfer from `stage` on (a fresh one starts at its SETUP).
    fn control_from(&mut self, setup: &Setup, data: &[u8], stage: Option<Stage>) -> Ctrl {
        let mps = self.ep0_packet();
        let stage = match stage {
            Some(s) => s,
            None => {
                self.step(Op::Setup(setup.to_bytes()));
                self.step(Op::Settle);
                if setup.is_in() {
                    Stage::InData(Vec::new())
                } else {
                    Stage::OutData(0)
                }
            }
        };
        match stage {
            Stage::InData(got) => {
                let got = match self.in_data(0, setup.length as usize, got, mps) {
                    Ok(g) => g,
                    Err((Handshake::Stall, _)) => return Ctrl::Stall,
                    Err((Handshake::Nak, g)) => return Ctrl::Nak(Stage::InData(g)),
                };
                // Status stage: a zero-length OUT. A halt there fails the transfer.
                if let Err(Handshake::Stall) = self.op(Op::Out(0, Vec::new())) {
                    return Ctrl::Stall;
                }
                self.step(Op::Settle);
                let mut got = got;
                got.truncate(setup.length as usize);
                Ctrl::Data(got)
            }
            Stage::OutData(mut sent) => {
                while sent < data.len() {
                    let end = (sent + mps).min(data.len());
                    match self.op(Op::Out(0, data[sent..end].to_vec())) {
                        Ok(_) => {
                            sent = end;
                            self.step(Op::Settle);
                        }
                        Err(Handshake::Stall) => return Ctrl::Stall,
                        Err(Handshake::Nak) => return Ctrl::Nak(Stage::OutData(sent)),
                    }
                }
                self.status_in()
            }
            Stage::Status => self.status_in(),
        }
    }

    /// The status stage of a control OUT transfer: the firmware's zero-length IN packet.
    fn status_in(&mut self) -> Ctrl {
        match self.op(Op::TakeIn(0)) {
            Ok(_) => Ctrl::Ack,
            Err(Handshake::Stall) => Ctrl::Stall,
            Err(Handshake::Nak) => Ctrl::Nak(Stage::Status),
        }
    }

    /// Lets the firmware hear of a status-stage IN-complete it has not polled yet.
    fn flush_status(&mut self) {
        if self.pending_status {
            self.pending_status = false;
            self.step(Op::Settle);
        }
    }

    // ---- observing it --------------------------------------------------------------------

    /// A probe request, sent quietly (journaled, not traced).
    fn probe(&mut self, p: &StateProbe) -> Option<&'static str> {
        let quiet = std::mem::replace(&mut self.quiet, true);
        let r = self.control_from(&p.setup, &[], None);
        self.quiet = quiet;
        match r {
            Ctrl::Data(d) => (p.decode)(&d),
            _ => None,
        }
    }

    /// The states as seen now: `reply` first (what the firmware told the host), then the
    /// probes, then usb-device's own state.
    fn look(
        &mut self,
        reply: Option<(&'static str, &'static str)>,
    ) -> Vec<(&'static str, &'static str)> {
        let mut seen: Vec<(&'static str, &'static str)> = Vec::new();
        if let Some(r) = reply {
            seen.push(r);
        }
        // A probe would meet a pending IN-complete in one poll, or wake a suspended device:
        // look again after the next event.
        if !self.host.in_complete_pending() && self.fw.usb_state() != UsbDeviceState::Suspend {
            let probes: Vec<StateProbe> = self.fw.probes().to_vec();
            for p in &probes {
                if let Some(s) = self.probe(p) {
                    seen.push((p.machine, s));
                }
            }
        }
        seen.push(("usb", usb_state_name(self.fw.usb_state())));
        seen
    }

    fn mark(&self) -> Mark {
        Mark {
            journal: self.journal.len(),
            states: self.states.clone(),
            pending_status: self.pending_status,
            pending_control: self.pending_control.clone(),
            pending_out: self.pending_out.clone(),
            pending_in: self.pending_in.clone(),
        }
    }

    /// Rebuilds the firmware and replays what it saw before `m`.
    fn rollback(&mut self, m: Mark) {
        let (fw, host) = Self::instantiate(&*self.build);
        self.fw = fw;
        self.host = host;
        let journal = std::mem::take(&mut self.journal);
        for op in &journal[..m.journal] {
            let _ = self.apply(op);
        }
        self.journal = journal;
        self.journal.truncate(m.journal);
        self.states = m.states;
        self.pending_status = m.pending_status;
        self.pending_control = m.pending_control;
        self.pending_out = m.pending_out;
        self.pending_in = m.pending_in;
        self.rebuilds += 1;
    }

    /// Reports the changes between the last observed states and `seen` as transitions; on a
    /// refused one, rolls back to `m` and returns `false`.
    fn report(
        &mut self,
        cx: &mut DevCtx<'_>,
        seen: Vec<(&'static str, &'static str)>,
        m: Mark,
    ) -> bool {
        for (machine, to) in seen {
            let from = match self.states.iter_mut().find(|(mm, _)| *mm == machine) {
                Some((_, s)) => s,
                None => {
                    self.states.push((machine, to));
                    continue;
                }
            };
            if *from == to {
                continue;
            }
            let f = *from;
            if !cx.transition(machine, f, to) {
                cx.record("firmware", |d| {
                    d.str("event", "rollback")
                        .str("refused", &format!("{machine}.{f}->{to}"))
                        .u64("replayed", m.journal as u64);
                });
                self.rollback(m);
                return false;
            }
            if let Some((_, s)) = self.states.iter_mut().find(|(mm, _)| *mm == machine) {
                *s = to;
            }
        }
        true
    }

    /// Writes the packets of the event that just ended as one trace record.
    fn flush_packets(&mut self, cx: &mut DevCtx<'_>, order: Option<&str>) {
        if self.packets.is_empty() && order.is_none() {
            return;
        }
        let packets = std::mem::take(&mut self.packets).join(" ");
        let polls = self.polls;
        cx.record("firmware", |d| {
            d.str("packets", &packets);
            if let Some(o) = order {
                d.str("order", o);
            }
            d.u64("polls", polls);
        });
    }

    /// Runs a non-transfer event (reset, suspend, a tick) and reports what changed.
    fn event(&mut self, cx: &mut DevCtx<'_>, f: impl FnOnce(&mut Self)) {
        let m = self.mark();
        self.flush_status();
        f(self);
        self.flush_packets(cx, None);
        let seen = self.look(None);
        self.report(cx, seen, m);
    }
}

fn hs(h: Handshake) -> &'static str {
    match h {
        Handshake::Stall => "STALL",
        Handshake::Nak => "NAK",
    }
}

/// The name of a usb-device state in transition sites.
pub fn usb_state_name(s: UsbDeviceState) -> &'static str {
    match s {
        UsbDeviceState::Default => "default",
        UsbDeviceState::Addressed => "addressed",
        UsbDeviceState::Configured => "configured",
        UsbDeviceState::Suspend => "suspend",
    }
}

impl<F: Firmware> Device for FirmwareDevice<F> {
    fn name(&self) -> &str {
        &self.name
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        let m = self.mark();
        let resume = match self.pending_control.take() {
            Some(p) if p.setup == *setup && p.data == data => Some(p.stage),
            _ => None,
        };
        let mut order = None;
        if resume.is_none() && self.pending_status {
            self.pending_status = false;
            if cx.data_below(COALESCE_ODDS) == COALESCE_ODDS - 1 {
                order = Some("in_complete+setup");
            } else {
                self.step(Op::Settle);
            }
        }
        let r = self.control_from(setup, data, resume);
        let (reply, announced) = match r {
            Ctrl::Data(d) => {
                let a = self.fw.reply_state(setup, &d);
                (Reply::Data(d), a)
            }
            Ctrl::Ack => {
                // The status stage is over for the host; the firmware hears of it now or, in a
                // drawn order, together with the next event.
                if order.is_none() && cx.data_below(COALESCE_ODDS) == COALESCE_ODDS - 1 {
                    self.pending_status = true;
                    order = Some("in_complete_pending");
                } else {
                    self.step(Op::Settle);
                }
                (Reply::Ack, None)
            }
            Ctrl::Stall => (Reply::Stall, None),
            Ctrl::Nak(stage) => {
                self.pending_control = Some(PendingControl {
                    setup: *setup,
                    data: data.to_vec(),
                    stage,
                });
                (Reply::Nak, None)
            }
        };
        self.flush_packets(cx, order);
        let seen = self.look(announced);
        if !self.report(cx, seen, m) {
            return Reply::Stall;
        }
        reply
    }

    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        let m = self.mark();
        self.flush_status();
        let ep = ep & 0x0f;
        let Some(mps) = self.host.max_packet(ep) else {
            self.flush_packets(cx, None);
            return Reply::Stall;
        };
        let mps = mps.max(1) as usize;
        let mut sent = match self
            .pending_out
            .iter()
            .position(|(e, d, _)| *e == ep && d == data)
        {
            Some(i) => self.pending_out.remove(i).2,
            None => 0,
        };
        let mut reply = Reply::Ack;
        loop {
            let end = (sent + mps).min(data.len());
            match self.op(Op::Out(ep, data[sent..end].to_vec())) {
                Ok(_) => {
                    self.step(Op::Settle);
                    sent = end;
                    if sent >= data.len() {
                        break;
                    }
                }
                Err(Handshake::Stall) => {
                    reply = Reply::Stall;
                    break;
                }
                Err(Handshake::Nak) => {
                    self.pending_out.push((ep, data.to_vec(), sent));
                    reply = Reply::Nak;
                    break;
                }
            }
        }
        self.flush_packets(cx, None);
        let seen = self.look(None);
        if !self.report(cx, seen, m) {
            return Reply::Stall;
        }
        reply
    }

    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        let m = self.mark();
        self.flush_status();
        let num = ep & 0x0f;
        let Some(mps) = self.host.max_packet(0x80 | num) else {
            self.flush_packets(cx, None);
            return Reply::Stall;
        };
        let got = match self.pending_in.iter().position(|(e, _)| *e == num) {
            Some(i) => self.pending_in.remove(i).1,
            None => Vec::new(),
        };
        let reply = match self.in_data(num, max_len, got, mps.max(1) as usize) {
            Ok(mut d) => {
                d.truncate(max_len);
                Reply::Data(d)
            }
            Err((Handshake::Stall, _)) => Reply::Stall,
            Err((Handshake::Nak, g)) => {
                if !g.is_empty() {
                    self.pending_in.push((num, g));
                }
                Reply::Nak
            }
        };
        // A NAK with nothing taken is no news: the bus asks again after the next change.
        if reply == Reply::Nak && self.packets.iter().all(|p| p.ends_with("NAK")) {
            self.packets.clear();
            return reply;
        }
        self.flush_packets(cx, None);
        let seen = self.look(None);
        if !self.report(cx, seen, m) {
            return Reply::Stall;
        }
        reply
    }

    fn on_timer(&mut self, cx: &mut DevCtx<'_>, _token: u64) {
        self.tick(cx);
    }

    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        self.pending_control = None;
        self.pending_out.clear();
        self.pending_in.clear();
        self.event(cx, |d| {
            d.step(Op::Reset);
            d.step(Op::Settle);
        });
    }

    fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
        self.pending_control = None;
        self.pending_out.clear();
        self.pending_in.clear();
        self.suspend(cx);
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        self.fw.request_name(setup)
    }
}
