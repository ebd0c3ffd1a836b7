//! The lockstep server, sans-I/O: answers QEMU's requests from a [`DeviceHost`] frame by frame,
//! moving the model's clock to the guest's before each answer, firing the externals placed on
//! the guest clock, checking the invariants after every frame and writing every frame as a
//! deterministic `emulator` record. Nothing here reads a socket or the wall clock.
//!
//! Its public path is also [`crate::lockstep::server`] (and its items [`crate::lockstep`]'s).
//! It builds on the framing ([`crate::lockstep_frame`]) only: the run ([`crate::lockstep`])
//! and the snapshot ([`crate::snapshot`]) both serve through it, so neither may be imported
//! here.

use crate::descriptors::{self, Configuration, DeviceInfo};
use crate::lockstep_frame::{
    action, encode_reply, FrameError, Kind, Reply, Request, Status, VERSION,
};
use calametra_core::choices::{self, Event, Source, StreamName};
use calametra_core::clock::Nanos;
use calametra_core::host::DeviceHost;
use calametra_core::usb::{Setup, TransferError};
use calametra_core::Failure;
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;

/// What an external event does.
#[derive(Clone)]
pub enum ExternalAction {
    /// The device is unplugged: the model loses power (`on_disconnect`), the guest sees it
    /// leave the bus, and it stays gone.
    Unplug,
    /// The cable is pulled and pushed back: a power cycle. The model loses power
    /// (`on_disconnect`) and is plugged back in (`on_reset`); the guest sees the device leave
    /// and a device arrive `reattach_gap_ns` later, and enumerates it afresh.
    Replug,
    /// Anything else done to the model (plugging a monitor into a dock), through its host.
    Model(Rc<dyn Fn(&mut DeviceHost)>),
}

impl std::fmt::Debug for ExternalAction {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            ExternalAction::Unplug => "Unplug",
            ExternalAction::Replug => "Replug",
            ExternalAction::Model(_) => "Model(..)",
        })
    }
}

/// An external event a seeded run places on the guest clock.
#[derive(Clone, Debug)]
pub struct External {
    /// Its name (as in `Event::GuestExternal`).
    pub name: String,
    /// What it does.
    pub action: ExternalAction,
}

impl External {
    /// An external named `name`.
    pub fn new(name: &str, action: ExternalAction) -> External {
        External {
            name: name.into(),
            action,
        }
    }
}

/// An invariant over the device host, checked after every frame.
pub type Invariant = Rc<dyn Fn(&DeviceHost) -> Result<(), String>>;

/// Where externals land: a seeded run draws each one's guest clock time uniformly in
/// `[from_ns, to_ns)` from the seed's `schedule` stream (derived apart from the model's, so
/// placing externals does not perturb the model's choices). A replay takes the times from its
/// events (`Event::GuestExternal`, at the guest clock in ns; an in-process `Event::External`
/// names a scheduling point and is not placed here); the baseline places none.
pub fn place_externals(
    source: &Source,
    place: bool,
    externals: &[External],
    window: (Nanos, Nanos),
) -> Vec<(Nanos, usize)> {
    let mut out = Vec::new();
    match source {
        Source::Default => {}
        Source::Seeded(_) if !place => {}
        Source::Seeded(seed) => {
            let derived = choices::derive_seed(*seed, "calametra.lockstep.externals", 0);
            let mut rng = choices::stream(derived, StreamName::Schedule);
            let span = window.1.saturating_sub(window.0).max(1);
            for i in 0..externals.len() {
                out.push((window.0 + choices::below(&mut rng, span), i));
            }
        }
        Source::Replay(events) => {
            for e in events {
                if let Event::GuestExternal { name, at_ns } = e {
                    if let Some(i) = externals.iter().position(|x| &x.name == name) {
                        out.push((*at_ns, i));
                    }
                }
            }
        }
    }
    out.sort();
    out
}

/// How the server presents the device and moves its clock.
#[derive(Clone, Debug)]
pub struct LockstepOptions {
    /// The speed (QEMU's numbering, as `proto::speed`); `None` derives it from the device
    /// descriptor as the usbredir bridge does.
    pub speed: Option<u8>,
    /// Guest time between the detach and the attach of a re-enumeration.
    pub reattach_gap_ns: Nanos,
    /// Guest time after a transfer at which NAKed INs are asked again.
    pub repoll_ns: Nanos,
    /// Coverage marks that mean "the model re-enumerated by itself" (a DFU device with
    /// bitWillDetach switching modes): the device is detached and attached for the guest.
    pub reenumerate_marks: Vec<String>,
    /// A transfer the model completes more than this after the guest asked (a delay fault,
    /// a slow model) completes on the guest clock when the model did (`complete_ns`), so the
    /// guest sees the delay and the model never runs ahead of what the guest has seen; faster
    /// ones complete at once.
    pub defer_over_ns: Nanos,
}

impl LockstepOptions {
    /// Takes what a registered model says a guest run needs
    /// ([`calametra_core::registry::QemuHints`]): its re-enumeration marks, added. (A lockstep
    /// run needs no warp: the guest's clock drives the model's.)
    pub fn apply(&mut self, hints: &calametra_core::registry::QemuHints) {
        self.reenumerate_marks
            .extend(hints.reenumerate_marks.iter().map(|m| m.to_string()));
    }
}

impl Default for LockstepOptions {
    fn default() -> Self {
        LockstepOptions {
            speed: None,
            reattach_gap_ns: 20_000_000,
            repoll_ns: 1_000_000,
            reenumerate_marks: Vec::new(),
            defer_over_ns: 500_000,
        }
    }
}

/// Why the server cannot serve the device.
#[derive(Debug)]
pub enum LockstepError {
    /// The model's device descriptor could not be read.
    Descriptor(String),
    /// The stream from QEMU is lost.
    Frame(FrameError),
}

impl std::fmt::Display for LockstepError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LockstepError::Descriptor(m) => write!(f, "reading the model's device descriptor: {m}"),
            LockstepError::Frame(e) => write!(f, "the lockstep stream from QEMU is lost: {e}"),
        }
    }
}

impl std::error::Error for LockstepError {}

/// What serving a request came to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Served {
    /// Send these bytes.
    Reply(Vec<u8>),
    /// An invariant broke: answer nothing; the run ends here, with QEMU waiting on this frame.
    Stop,
}

/// The lockstep server: answers QEMU's requests from a device host, frame by frame. Sans-I/O.
pub struct Server {
    host: DeviceHost,
    opts: LockstepOptions,
    externals: Vec<External>,
    placed: Vec<(Nanos, usize)>,
    fired: usize,
    invariants: Vec<(String, Invariant)>,
    device: Vec<u8>,
    speed: u8,
    next_seq: u32,
    guest_attached: bool,
    /// Whether the guest configured the device since it was last attached (resets before
    /// that are the guest's enumeration of the attach).
    configured_since_attach: bool,
    replug: bool,
    marks_seen: u64,
    swallowed: BTreeSet<u8>,
    nak_in: BTreeSet<u8>,
    configs: BTreeMap<u8, Configuration>,
    config: u8,
    alts: BTreeMap<u8, u8>,
    failure: Option<Failure>,
    frames: u64,
    last_clock: Nanos,
}

fn get_device_descriptor() -> Setup {
    Setup {
        request_type: 0x80,
        request: 6,
        value: 0x0100,
        index: 0,
        length: 18,
    }
}

impl Server {
    /// Reads the model's device descriptor through `host` (a traced transfer, retried a few
    /// times should a seeded fault hit it) and prepares to serve it, with `externals` placed
    /// at `placed` (guest clock, index) and `invariants` checked after every frame.
    pub fn new(
        mut host: DeviceHost,
        opts: LockstepOptions,
        externals: Vec<External>,
        placed: Vec<(Nanos, usize)>,
        invariants: Vec<(String, Invariant)>,
    ) -> Result<Server, LockstepError> {
        let mut last = String::new();
        let mut device = None;
        for _ in 0..8 {
            match host.control(get_device_descriptor(), &[]) {
                Ok(d) => match descriptors::parse_device(&d) {
                    Ok(d) => {
                        device = Some(d);
                        break;
                    }
                    Err(e) => last = e,
                },
                Err(e) => last = format!("GET_DESCRIPTOR(device) failed: {e}"),
            }
        }
        let device = device.ok_or(LockstepError::Descriptor(last))?;
        let info = DeviceInfo {
            device: device.clone(),
            configs: Vec::new(),
        };
        let speed = opts.speed.unwrap_or_else(|| info.default_speed());
        let d = device.clone();
        host.record("emulator", "lockstep", true, |r| {
            r.str("event", "descriptor")
                .hex("device", &d)
                .u64("speed", speed as u64);
        });
        let mut s = Server {
            host,
            opts,
            externals,
            placed,
            fired: 0,
            invariants,
            device,
            speed,
            next_seq: 0,
            guest_attached: true,
            configured_since_attach: false,
            replug: false,
            marks_seen: 0,
            swallowed: BTreeSet::new(),
            nak_in: BTreeSet::new(),
            configs: BTreeMap::new(),
            config: 0,
            alts: BTreeMap::new(),
            failure: None,
            frames: 0,
            last_clock: 0,
        };
        s.marks_seen = s.reenumerate_count();
        Ok(s)
    }

    /// The device host (the model, its trace and hash).
    pub fn host(&self) -> &DeviceHost {
        &self.host
    }

    /// The device host, mutably.
    pub fn host_mut(&mut self) -> &mut DeviceHost {
        &mut self.host
    }

    /// Gives the device host back.
    pub fn into_host(self) -> DeviceHost {
        self.host
    }

    /// The device descriptor read from the model.
    pub fn device_descriptor(&self) -> &[u8] {
        &self.device
    }

    /// The invariant that broke, if one did.
    pub fn failure(&self) -> Option<&Failure> {
        self.failure.as_ref()
    }

    /// Frames served.
    pub fn frames(&self) -> u64 {
        self.frames
    }

    /// The guest clock of the last request.
    pub fn last_clock(&self) -> Nanos {
        self.last_clock
    }

    fn reenumerate_count(&mut self) -> u64 {
        if self.opts.reenumerate_marks.is_empty() {
            return 0;
        }
        let marks = self.host.world().marks();
        self.opts
            .reenumerate_marks
            .iter()
            .map(|m| marks.get(m).copied().unwrap_or(0))
            .sum()
    }

    /// Fires the externals due at or before `clock`, then moves the model's clock there.
    fn advance(&mut self, clock: Nanos) -> bool {
        let mut fired = false;
        while let Some(&(at, i)) = self.placed.get(self.fired) {
            if at > clock {
                break;
            }
            self.fired += 1;
            fired = true;
            self.host.advance_to(at);
            let ext = self.externals[i].clone();
            self.host.record("external", &ext.name, true, |d| {
                d.str("external", &ext.name)
                    .u64("at_ns", at)
                    .str("action", &format!("{:?}", ext.action));
            });
            match &ext.action {
                ExternalAction::Unplug => self.host.disconnect(),
                ExternalAction::Replug => {
                    self.host.disconnect();
                    self.host.reconnect();
                    self.replug = true;
                }
                ExternalAction::Model(f) => f(&mut self.host),
            }
        }
        self.host.advance_to(clock);
        fired
    }

    /// The actions the model's attachment asks for since the last frame.
    fn attachment(&mut self) -> u32 {
        let n = self.reenumerate_count();
        let reenumerated = n != self.marks_seen;
        self.marks_seen = n;
        if !self.guest_attached {
            return 0;
        }
        if !self.host.is_attached() {
            self.guest_attached = false;
            self.forget_configuration();
            self.host.record("emulator", "lockstep", true, |r| {
                r.str("event", "detach");
            });
            return action::DETACH;
        }
        if reenumerated || std::mem::take(&mut self.replug) {
            self.forget_configuration();
            let why = if reenumerated {
                "the model re-enumerated"
            } else {
                "replug"
            };
            self.host.record("emulator", "lockstep", true, |r| {
                r.str("event", "reenumerate").str("why", why);
            });
            return action::DETACH | action::ATTACH;
        }
        0
    }

    fn forget_configuration(&mut self) {
        self.configured_since_attach = false;
        self.config = 0;
        self.alts.clear();
        self.swallowed.clear();
        self.nak_in.clear();
    }

    /// The transfer type of endpoint `ep` in the current configuration (bulk when unknown).
    fn is_interrupt(&self, ep: u8) -> bool {
        let Some(cfg) = self.configs.get(&self.config) else {
            return false;
        };
        cfg.alts
            .iter()
            .filter(|a| a.alt == self.alts.get(&a.number).copied().unwrap_or(0))
            .flat_map(|a| a.endpoints.iter())
            .any(|e| e.address == ep && e.transfer == 3)
    }

    fn control(&mut self, req: &Request) -> Result<Reply, FrameError> {
        let (setup, data) = req.control()?;
        if self.swallowed.contains(&0) {
            return Ok(Reply::status(Status::Nak));
        }
        match self.host.control(setup, data) {
            Ok(v) => {
                match (setup.request_type, setup.request) {
                    (0x80, 6) if setup.value >> 8 == 2 => {
                        if let Ok(c) = descriptors::parse_config(&v) {
                            if c.raw.len() >= 4
                                && u16::from_le_bytes([c.raw[2], c.raw[3]]) as usize == c.raw.len()
                            {
                                self.configs.insert(c.value, c);
                            }
                        }
                    }
                    (0x00, 9) => {
                        self.config = setup.value as u8;
                        self.configured_since_attach |= self.config != 0;
                        self.alts.clear();
                    }
                    (0x01, 11) => {
                        self.alts.insert(setup.index as u8, setup.value as u8);
                    }
                    (0x02, 1) if setup.value == 0 => {
                        self.swallowed.remove(&(setup.index as u8));
                    }
                    _ => {}
                }
                let mut r = Reply::status(Status::Ok);
                if setup.is_in() {
                    r.data = v;
                }
                Ok(r)
            }
            Err(TransferError::Timeout) => {
                self.swallowed.insert(0);
                Ok(Reply::status(Status::Nak))
            }
            Err(e) => Ok(Reply::status(Status::of(e))),
        }
    }

    fn out(&mut self, req: &Request) -> Reply {
        if self.swallowed.contains(&req.ep) {
            return Reply::status(Status::Nak);
        }
        match self.host.out(req.ep, &req.payload) {
            // A short OUT (the model took fewer bytes): the count, so the guest sees it short.
            Ok(n) if n < req.payload.len() => Reply {
                data: (n as u32).to_le_bytes().to_vec(),
                ..Reply::status(Status::Ok)
            },
            Ok(_) => Reply::status(Status::Ok),
            Err(TransferError::Timeout) => {
                self.swallowed.insert(req.ep);
                Reply::status(Status::Nak)
            }
            Err(e) => Reply::status(Status::of(e)),
        }
    }

    fn poll_in(&mut self, req: &Request) -> Result<Reply, FrameError> {
        let max = req.word()? as usize;
        let intr = self.is_interrupt(req.ep);
        let r = match self.host.poll_in(req.ep, max, intr) {
            None => {
                self.nak_in.insert(req.ep);
                return Ok(Reply::status(Status::Nak));
            }
            Some(Ok(d)) => Reply {
                data: d,
                ..Reply::status(Status::Ok)
            },
            Some(Err(e)) => Reply::status(Status::of(e)),
        };
        self.nak_in.remove(&req.ep);
        Ok(r)
    }

    fn hello(&mut self, req: &Request) -> Result<Reply, FrameError> {
        let v = req.word()?;
        if v != VERSION {
            return Err(FrameError::Version(v));
        }
        let mut data = Vec::with_capacity(34);
        data.extend_from_slice(&VERSION.to_le_bytes());
        data.push(self.speed);
        data.push(1); // plugged in at power-on
        data.extend_from_slice(&[0, 0]);
        data.extend_from_slice(&self.opts.reattach_gap_ns.to_le_bytes());
        data.extend_from_slice(&self.device);
        Ok(Reply {
            data,
            ..Reply::status(Status::Ok)
        })
    }

    /// Serves one request: moves the model to the request's guest clock (firing the externals
    /// and model timers due), answers it, records the frame, checks the invariants.
    pub fn serve(&mut self, req: &Request) -> Result<Served, FrameError> {
        if req.seq != self.next_seq {
            return Err(FrameError::Sequence {
                expected: self.next_seq,
                found: req.seq,
            });
        }
        self.next_seq = self.next_seq.wrapping_add(1);
        self.frames += 1;
        self.last_clock = req.clock_ns;
        let external = self.advance(req.clock_ns);
        let mut reply = match req.kind {
            Kind::Hello => self.hello(req)?,
            Kind::Control => self.control(req)?,
            Kind::Out => self.out(req),
            Kind::In => self.poll_in(req)?,
            Kind::Reset => {
                if self.configured_since_attach {
                    self.host.reset();
                    self.forget_configuration();
                } else {
                    // The firmware and Linux reset the port while they enumerate a device
                    // that was just attached; attaching covers those resets, so the model
                    // does not see them (a DFU device would leave DFU mode on them). Resets
                    // of a configured device (a driver's, dfu-util's) reach it.
                    self.config = 0;
                    self.alts.clear();
                    self.host.record("emulator", "lockstep", true, |r| {
                        r.str("event", "attach_reset");
                    });
                }
                Reply::status(Status::Ok)
            }
            Kind::Tick => Reply::status(Status::Ok),
            Kind::EpStopped => {
                self.swallowed.remove(&req.ep);
                self.nak_in.remove(&req.ep);
                Reply::status(Status::Ok)
            }
        };
        // A transfer the model took longer over completes on the guest clock when it did.
        if matches!(req.kind, Kind::Control | Kind::Out | Kind::In)
            && reply.status != Status::Nak
            && self.host.now() > req.clock_ns.saturating_add(self.opts.defer_over_ns)
        {
            reply.complete_ns = self.host.now();
        }
        reply.actions |= self.attachment();
        // A tick, an external or a transfer may have given a NAKed IN its data.
        let changed = external
            || match req.kind {
                Kind::Tick => {
                    if !self.nak_in.is_empty() {
                        reply.actions |= action::WAKE;
                    }
                    false
                }
                Kind::In => reply.status != Status::Nak,
                Kind::Control | Kind::Out | Kind::Reset => true,
                Kind::Hello | Kind::EpStopped => false,
            };
        let mut wake = self.host.next_event_time();
        if let Some(&(at, _)) = self.placed.get(self.fired) {
            wake = Some(wake.map_or(at, |w| w.min(at)));
        }
        if changed && !self.nak_in.is_empty() {
            let t = req.clock_ns + self.opts.repoll_ns;
            wake = Some(wake.map_or(t, |w| w.min(t)));
        }
        reply.wake_ns = wake.map_or(0, |w| w.max(req.clock_ns + 1));
        self.record(req, &reply);
        if let Some(f) = self.check() {
            self.failure = Some(f);
            return Ok(Served::Stop);
        }
        Ok(Served::Reply(encode_reply(req, self.host.now(), &reply)))
    }

    /// The frame as a deterministic `emulator` record.
    fn record(&mut self, req: &Request, reply: &Reply) {
        self.host.record("emulator", "lockstep", true, |d| {
            d.u64("seq", req.seq as u64)
                .str("frame", req.kind.name())
                .u64("clock_ns", req.clock_ns);
            if req.ep != 0 {
                d.hex("ep", &[req.ep]);
            }
            match req.kind {
                Kind::Control => {
                    d.hex("setup", &req.payload[..8.min(req.payload.len())]);
                    if req.payload.len() > 8 {
                        d.payload("data", &req.payload[8..]);
                    }
                }
                Kind::Out => {
                    d.payload("data", &req.payload);
                }
                Kind::In | Kind::Hello => {
                    d.u64("word", req.word().unwrap_or(0) as u64);
                }
                _ => {}
            }
            d.str("status", reply.status.name());
            if !reply.data.is_empty() {
                d.payload("reply", &reply.data);
            }
            if reply.actions != 0 {
                d.u64("actions", reply.actions as u64);
            }
            if reply.wake_ns != 0 {
                d.u64("wake_ns", reply.wake_ns);
            }
            if reply.complete_ns != 0 {
                d.u64("complete_ns", reply.complete_ns);
            }
        });
    }

    fn check(&mut self) -> Option<Failure> {
        for (name, inv) in &self.invariants {
            if let Err(message) = inv(&self.host) {
                let (n, m) = (name.clone(), message.clone());
                self.host.record("invariant", &n, true, |d| {
                    d.str("invariant", &n)
                        .bool("holds", false)
                        .str("message", &m);
                });
                return Some(Failure::Invariant {
                    name: name.clone(),
                    message,
                });
            }
        }
        None
    }
}
