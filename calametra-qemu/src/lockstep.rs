//! Lockstep: a Linux guest run as repeatable as an in-process one.
//!
//! With usb-redir, a reply reaches the guest wherever its vCPU happens to be, so two runs of one
//! scenario differ. Here the guest's USB device is `usb-calametra`, a QEMU device Calametra
//! builds into QEMU 10.0.2 (`calametra-qemu/qemu/build.sh`, `patches/`): it turns every USB
//! packet into a request frame on a unix socket and the vCPU waits for the reply inside the
//! host controller's call. Each frame carries the guest's virtual clock (`QEMU_CLOCK_VIRTUAL`
//! under `-icount`), and the model's clock is driven by it (`DeviceHost::advance_to` before
//! every answer), so the model's timers, injected faults and external events (an unplug, a
//! replug) land at the same guest instruction count on every run. The guest's console is then
//! deterministic too and is hashed as `guest` records.
//!
//! A run restores the guest from a snapshot saved after boot ([`Start::Snapshot`], the default
//! of [`LockstepConfig::find`]; see [`crate::snapshot`]) or boots it ([`Start::ColdBoot`]).
//!
//! # The framing (version 2)
//!
//! Little-endian. A frame is a 24-byte [`Header`] (`magic` `CLM1`, `type`, `ep`, `flags`,
//! `seq`, `len`, `clock_ns`) and `len` payload bytes. QEMU sends requests ([`Kind`]: `hello`,
//! `control`, `out`, `in`, `reset`, `tick`, `ep_stopped`); every request gets one reply
//! (`type | 0x80`, the same `seq`) whose payload starts with `status` (u32, [`Status`]),
//! `actions` (u32, [`action`]) and `wake_ns` (u64: the guest clock at which QEMU sends a
//! `tick`; 0 for none), then the data. The hello's reply carries the framing version, the
//! speed, whether the device is plugged in at power-on, the re-enumeration gap and the device
//! descriptor. `calametra-qemu/qemu/FRAMING.md` has every field; this module is its only
//! implementation on the Rust side.
//!
//! # A guest scenario
//!
//! ```no_run
//! use calametra_core::explore::Probe as Trial;
//! use calametra_core::usb::Device;
//! use calametra_core::RunConfig;
//! use calametra_qemu::lockstep::{Extras, LockstepConfig, Scenario};
//! use calametra_qemu::Probe;
//! use std::rc::Rc;
//!
//! fn twice<D: Device>(model: impl Fn() -> D + 'static) -> Result<(), Box<dyn std::error::Error>> {
//!     // calametra-qemu/qemu/build.sh and guest/build.sh built these under target/.
//!     let lock = LockstepConfig::find(std::path::Path::new("target"))?;
//!     let s = Scenario {
//!         name: "mine::lsusb".into(),
//!         model: Rc::new(model),
//!         probe: Probe::Lsusb,
//!         base: RunConfig::default(),
//!         extras: Extras::default(),
//!         lock,
//!     };
//!     let (a, b) = (s.run(&Trial::Baseline)?, s.run(&Trial::Baseline)?);
//!     assert_eq!(a.hash, b.hash, "every frame and the console, the same twice");
//!     Ok(())
//! }
//! ```
//!
//! # Files of this module
//!
//! The codec ([`Header`], [`Request`], [`Reply`], [`FrameReader`], [`encode_reply`]) is
//! sans-I/O; [`Server`] answers requests from a [`DeviceHost`] and writes every frame as a
//! deterministic `emulator` record; [`run_with_host`] and [`Scenario`] boot the guest and move
//! the bytes. Only the launcher half reads the wall clock (the watchdog, the timings); nothing
//! the server decides depends on it.

use crate::descriptors::{self, Configuration, DeviceInfo};
use crate::guest::{self, marker, GuestImage, Probe};
use crate::launcher::{
    accept_qemu, io, start_qemu, Guard, Outcome, QemuConfig, QemuError, Started, Timings,
};
use crate::snapshot;
use crate::watchdog::{self, GuestWatch};
use calametra_core::choices::{self, Event, Source, StreamName};
use calametra_core::clock::Nanos;
use calametra_core::explore;
use calametra_core::fault::Fault;
use calametra_core::host::DeviceHost;
use calametra_core::regress::{self, Regression};
use calametra_core::trace::{parse_kept, Record, TraceHash};
use calametra_core::usb::{Device, Setup, TransferError};
use calametra_core::world::ModelGap;
use calametra_core::{Failure, RunConfig};
use std::collections::{BTreeMap, BTreeSet};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::rc::Rc;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// The framing version this build speaks (the hello's).
pub const VERSION: u32 = 2;
/// `CLM1` read as a little-endian u32.
pub const MAGIC: u32 = 0x314d_4c43;
/// Bytes in a header.
pub const HEADER_LEN: usize = 24;
/// Bytes every reply payload starts with (`status`, `actions`, `wake_ns`, `complete_ns`).
pub const PREFIX_LEN: usize = 24;
/// The largest payload either side accepts.
pub const MAX_PAYLOAD: u32 = 1 << 20;
/// Set in a reply's `type`.
pub const REPLY: u16 = 0x80;

/// Reply actions (bits of `actions`).
pub mod action {
    /// Detach the device from its port.
    pub const DETACH: u32 = 1;
    /// Attach it (after `reattach_gap_ns` when `DETACH` is set too: a re-enumeration).
    pub const ATTACH: u32 = 2;
    /// Retry every IN endpoint whose last answer was a NAK.
    pub const WAKE: u32 = 4;
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Once, at realize: the framing version.
    Hello,
    /// A control transfer: the setup packet and the OUT data stage.
    Control,
    /// A bulk or interrupt OUT packet.
    Out,
    /// A bulk or interrupt IN packet (or its retry after a NAK): the most bytes it takes.
    In,
    /// A USB port reset.
    Reset,
    /// The `wake_ns` timer fired.
    Tick,
    /// The host controller stopped an endpoint.
    EpStopped,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 7] = [
        Kind::Hello,
        Kind::Control,
        Kind::Out,
        Kind::In,
        Kind::Reset,
        Kind::Tick,
        Kind::EpStopped,
    ];

    /// The wire code.
    pub fn code(self) -> u16 {
        match self {
            Kind::Hello => 1,
            Kind::Control => 2,
            Kind::Out => 3,
            Kind::In => 4,
            Kind::Reset => 5,
            Kind::Tick => 6,
            Kind::EpStopped => 7,
        }
    }

    /// The kind of a wire code.
    pub fn from_code(code: u16) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The name in trace records.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hello => "hello",
            Kind::Control => "control",
            Kind::Out => "out",
            Kind::In => "in",
            Kind::Reset => "reset",
            Kind::Tick => "tick",
            Kind::EpStopped => "ep_stopped",
        }
    }
}

/// A reply's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done.
    Ok,
    /// A STALL handshake.
    Stall,
    /// Nothing yet (an IN with no data, a request the model never completes).
    Nak,
    /// A transaction error.
    IoError,
    /// More data than the host asked for.
    Babble,
    /// The device is gone.
    NoDev,
}

impl Status {
    /// The wire code.
    pub fn code(self) -> u32 {
        match self {
            Status::Ok => 0,
            Status::Stall => 1,
            Status::Nak => 2,
            Status::IoError => 3,
            Status::Babble => 4,
            Status::NoDev => 5,
        }
    }

    /// The status of a wire code (unknown codes read as an I/O error, as QEMU reads them).
    pub fn from_code(code: u32) -> Status {
        match code {
            0 => Status::Ok,
            1 => Status::Stall,
            2 => Status::Nak,
            4 => Status::Babble,
            5 => Status::NoDev,
            _ => Status::IoError,
        }
    }

    /// The name in trace records.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Stall => "stall",
            Status::Nak => "nak",
            Status::IoError => "ioerror",
            Status::Babble => "babble",
            Status::NoDev => "nodev",
        }
    }

    fn of(e: TransferError) -> Status {
        match e {
            TransferError::Stall => Status::Stall,
            TransferError::Timeout => Status::Nak,
            TransferError::Disconnected => Status::NoDev,
            TransferError::Cancelled | TransferError::Fault => Status::IoError,
        }
    }
}

/// Why a byte stream is not lockstep frames, or a frame not what its type says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The first four bytes are not `CLM1`.
    Magic(u32),
    /// A request type this version does not know.
    Type(u16),
    /// A payload longer than [`MAX_PAYLOAD`].
    TooLong(u32),
    /// A request out of sequence.
    Sequence {
        /// The number expected.
        expected: u32,
        /// The number found.
        found: u32,
    },
    /// The hello's framing version is not [`VERSION`].
    Version(u32),
    /// A payload too short for its request.
    Payload {
        /// The request.
        kind: Kind,
        /// What was expected.
        expected: String,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Magic(m) => write!(f, "bad magic {m:#010x}, expected {MAGIC:#010x} (CLM1)"),
            FrameError::Type(t) => write!(f, "unknown request type {t}"),
            FrameError::TooLong(n) => write!(f, "payload of {n} bytes, at most {MAX_PAYLOAD}"),
            FrameError::Sequence { expected, found } => {
                write!(f, "request {found} out of sequence, expected {expected}")
            }
            FrameError::Version(v) => write!(
                f,
                "QEMU's usb-calametra speaks framing version {v}, this build {VERSION}: rebuild with calametra-qemu/qemu/build.sh"
            ),
            FrameError::Payload { kind, expected } => {
                write!(f, "{} request: expected {expected}", kind.name())
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The type code (`| REPLY` in a reply).
    pub ty: u16,
    /// The endpoint address.
    pub ep: u8,
    /// Reserved, 0.
    pub flags: u8,
    /// The request number.
    pub seq: u32,
    /// Payload bytes.
    pub len: u32,
    /// The clock: the guest's for a request, the model's for a reply.
    pub clock_ns: u64,
}

impl Header {
    /// The 24 wire bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&self.ty.to_le_bytes());
        b[6] = self.ep;
        b[7] = self.flags;
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.clock_ns.to_le_bytes());
        b
    }

    /// Parses 24 wire bytes (the magic and the length are checked, not the type).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, FrameError> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(FrameError::Magic(magic));
        }
        let len = u32_at(12);
        if len > MAX_PAYLOAD + PREFIX_LEN as u32 {
            return Err(FrameError::TooLong(len));
        }
        let mut clock = [0u8; 8];
        clock.copy_from_slice(&b[16..24]);
        Ok(Header {
            ty: u16::from_le_bytes([b[4], b[5]]),
            ep: b[6],
            flags: b[7],
            seq: u32_at(8),
            len,
            clock_ns: u64::from_le_bytes(clock),
        })
    }
}

/// One request from QEMU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// What it asks.
    pub kind: Kind,
    /// The endpoint address.
    pub ep: u8,
    /// Its number.
    pub seq: u32,
    /// The guest's virtual clock when it was made.
    pub clock_ns: Nanos,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Request {
    /// The wire bytes (what QEMU sends; for tests and tools).
    pub fn encode(&self) -> Vec<u8> {
        let h = Header {
            ty: self.kind.code(),
            ep: self.ep,
            flags: 0,
            seq: self.seq,
            len: self.payload.len() as u32,
            clock_ns: self.clock_ns,
        };
        let mut out = h.encode().to_vec();
        out.extend_from_slice(&self.payload);
        out
    }

    /// The setup packet and OUT data of a `control` request.
    pub fn control(&self) -> Result<(Setup, &[u8]), FrameError> {
        let short = || FrameError::Payload {
            kind: self.kind,
            expected: format!(
                "an 8-byte setup packet and its data, found {} bytes",
                self.payload.len()
            ),
        };
        let setup =
            Setup::from_bytes(self.payload.get(..8).ok_or_else(short)?).map_err(|_| short())?;
        Ok((setup, &self.payload[8..]))
    }

    /// The first payload word (`in`: the most bytes; `hello`: the version).
    pub fn word(&self) -> Result<u32, FrameError> {
        let b = self.payload.get(..4).ok_or_else(|| FrameError::Payload {
            kind: self.kind,
            expected: format!("a 4-byte word, found {} bytes", self.payload.len()),
        })?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// One reply to QEMU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// How the request went.
    pub status: Status,
    /// [`action`] bits.
    pub actions: u32,
    /// When QEMU should send a `tick` (guest clock), or 0.
    pub wake_ns: Nanos,
    /// When the packet completes on the guest clock (the model took longer: a delay), or 0
    /// for at once. QEMU holds it async until then.
    pub complete_ns: Nanos,
    /// The data (an IN's, the hello's).
    pub data: Vec<u8>,
}

impl Reply {
    fn status(status: Status) -> Reply {
        Reply {
            status,
            actions: 0,
            wake_ns: 0,
            complete_ns: 0,
            data: Vec::new(),
        }
    }
}

/// The wire bytes of `reply` to `req`, stamped with the model's clock.
pub fn encode_reply(req: &Request, clock_ns: Nanos, reply: &Reply) -> Vec<u8> {
    let h = Header {
        ty: req.kind.code() | REPLY,
        ep: req.ep,
        flags: 0,
        seq: req.seq,
        len: (PREFIX_LEN + reply.data.len()) as u32,
        clock_ns,
    };
    let mut out = Vec::with_capacity(HEADER_LEN + PREFIX_LEN + reply.data.len());
    out.extend_from_slice(&h.encode());
    out.extend_from_slice(&reply.status.code().to_le_bytes());
    out.extend_from_slice(&reply.actions.to_le_bytes());
    out.extend_from_slice(&reply.wake_ns.to_le_bytes());
    out.extend_from_slice(&reply.complete_ns.to_le_bytes());
    out.extend_from_slice(&reply.data);
    out
}

/// Cuts a byte stream into requests.
#[derive(Default)]
pub struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// An empty reader.
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Appends bytes read from the socket.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole request, if one is buffered. An error means the stream is lost.
    pub fn next_request(&mut self) -> Option<Result<Request, FrameError>> {
        if self.buf.len() < HEADER_LEN {
            return None;
        }
        let mut hb = [0u8; HEADER_LEN];
        hb.copy_from_slice(&self.buf[..HEADER_LEN]);
        let h = match Header::decode(&hb) {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        if h.len > MAX_PAYLOAD {
            return Some(Err(FrameError::TooLong(h.len)));
        }
        let end = HEADER_LEN + h.len as usize;
        if self.buf.len() < end {
            return None;
        }
        let payload = self.buf[HEADER_LEN..end].to_vec();
        self.buf.drain(..end);
        let Some(kind) = Kind::from_code(h.ty) else {
            return Some(Err(FrameError::Type(h.ty)));
        };
        Some(Ok(Request {
            kind,
            ep: h.ep,
            seq: h.seq,
            clock_ns: h.clock_ns,
            payload,
        }))
    }
}

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
    /// Its name (as in `Event::External`).
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
/// events (`Event::External`'s `point` is the guest clock in ns); the baseline places none.
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
                if let Event::External { name, point } = e {
                    if let Some(i) = externals.iter().position(|x| &x.name == name) {
                        out.push((*point, i));
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

/// The events of a run read back from its trace (with the core's parser), in order: the faults
/// injected (`fault` records) and the externals fired (`external` records, `point` = guest
/// clock in ns). What a replay needs; schedule picks among simultaneous model events and data
/// draws are not in the trace, and a replay that needed them shows a different hash, never a
/// silent pass.
pub fn events_of(lines: &[String]) -> Vec<Event> {
    let text = |r: &Record, k: &str| r.data.get(k).and_then(|v| v.as_str()).map(str::to_owned);
    let mut out = Vec::new();
    for r in parse_kept(lines) {
        match r.kind.as_str() {
            "fault" => {
                if let (Some(site), Some(f)) = (text(&r, "site"), text(&r, "fault")) {
                    if let Ok(fault) = Fault::parse(&f) {
                        out.push(Event::Fault { site, fault });
                    }
                }
            }
            "external" => {
                let at = r.data.get("at_ns").and_then(|v| v.as_u64());
                if let (Some(name), Some(point)) = (text(&r, "external"), at) {
                    out.push(Event::External { name, point });
                }
            }
            _ => {}
        }
    }
    out
}

/// The events of a run: the model's (faults, schedule picks, data draws, as its decider took
/// them) and then the externals the server fired on the guest clock.
fn run_events(host: &DeviceHost, trace: &[String]) -> Vec<Event> {
    let mut events = host.events();
    events.extend(
        events_of(trace)
            .into_iter()
            .filter(|e| matches!(e, Event::External { .. })),
    );
    events
}

/// The first model gap of a trace.
fn model_gap(lines: &[String]) -> Option<ModelGap> {
    let r = parse_kept(lines)
        .into_iter()
        .find(|r| r.kind == "model_gap")?;
    let text = |k: &str| {
        r.data
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    Some(ModelGap {
        device: r.actor.clone(),
        request: text("request"),
        state: text("state"),
    })
}

/// Where the lockstep QEMU and the guest are, the run's budgets and the server's options.
#[derive(Clone, Debug)]
pub struct LockstepConfig {
    /// The guest, the clock and the budgets; `qemu.qemu` is the lockstep binary (`bridge` and
    /// `idle_after` are the usb-redir path's and unused here).
    pub qemu: QemuConfig,
    /// Firmware directories (`-L`): Debian's seabios and qemu-system-data files.
    pub firmware: Vec<PathBuf>,
    /// How the device is presented.
    pub options: LockstepOptions,
    /// How a run starts: from a saved machine (the default of [`LockstepConfig::find`]) or
    /// by booting.
    pub start: Start,
}

/// How a lockstep run starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Boot SeaBIOS and the kernel with the device plugged in at power-on (13-50 s here).
    ColdBoot,
    /// Restore the machine saved after boot, before the device was plugged in, from this cache
    /// directory (made there on first use; see [`crate::snapshot`]).
    Snapshot {
        /// The cache (`<target>/guest-snapshots`).
        cache: PathBuf,
    },
}

/// The directories of Debian's `seabios` and `qemu-system-data` files that exist here (the
/// lockstep build installs no firmware of its own).
pub fn firmware_dirs() -> Vec<PathBuf> {
    ["/usr/share/seabios", "/usr/share/qemu"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .collect()
}

/// The lockstep QEMU `calametra-qemu/qemu/build.sh` last built under `target_dir`
/// (`<target_dir>/qemu-lockstep/current/qemu-system-x86_64`), or `CALAMETRA_LOCKSTEP_QEMU`.
pub fn find_qemu(target_dir: &Path) -> Result<PathBuf, String> {
    let p = match std::env::var_os("CALAMETRA_LOCKSTEP_QEMU") {
        Some(p) => PathBuf::from(p),
        None => target_dir.join("qemu-lockstep/current/qemu-system-x86_64"),
    };
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} is missing; build it with calametra-qemu/qemu/build.sh",
            p.display()
        ))
    }
}

impl LockstepConfig {
    /// Defaults for `guest` with the lockstep `qemu` binary: `QemuConfig::new`'s clock and
    /// budgets, Debian's firmware, the default options, a cold boot.
    pub fn new(qemu: PathBuf, guest: GuestImage) -> LockstepConfig {
        let mut q = QemuConfig::new(guest);
        q.qemu = qemu;
        LockstepConfig {
            qemu: q,
            firmware: firmware_dirs(),
            options: LockstepOptions::default(),
            start: Start::ColdBoot,
        }
    }

    /// The lockstep QEMU and the guest built under `target_dir`, starting from snapshots cached
    /// in `<target_dir>/guest-snapshots`.
    pub fn find(target_dir: &Path) -> Result<LockstepConfig, String> {
        let qemu = find_qemu(target_dir)?;
        let guest = GuestImage::find(target_dir)?;
        let mut lock = LockstepConfig::new(qemu, guest);
        lock.start = Start::Snapshot {
            cache: target_dir.join("guest-snapshots"),
        };
        Ok(lock)
    }

    /// The QEMU command of a snapshot start (see [`crate::snapshot`]): the machine of
    /// [`LockstepConfig::command`] without the lockstep device (plugged in after the restore)
    /// and with the `pvpanic` port the guest pauses on.
    pub fn snapshot_command(&self, initrd: &Path, append: &str) -> Command {
        let mut c = self.machine(initrd, append);
        c.args(["-device", "pvpanic", "-action", "panic=pause"]);
        c
    }

    /// The QEMU command for a run whose socket and initrd are `socket` and `initrd`.
    pub fn command(&self, socket: &Path, initrd: &Path, append: &str) -> Command {
        let mut c = self.machine(initrd, append);
        c.arg("-device").arg(format!(
            "usb-calametra,socket={},id=calametra0,bus=xhci.0",
            socket.display()
        ));
        c
    }

    /// The machine: firmware, clock, memory, console, the xHCI controller, the kernel.
    fn machine(&self, initrd: &Path, append: &str) -> Command {
        let q = &self.qemu;
        let mut c = Command::new(&q.qemu);
        for dir in &self.firmware {
            c.arg("-L").arg(dir);
        }
        c.args(["-machine", "q35", "-accel", "tcg"])
            .arg("-icount")
            .arg(format!("shift={},sleep=off,align=off", q.icount_shift))
            .arg("-rtc")
            .arg(format!("base={},clock=vm", q.rtc_base))
            .arg("-m")
            .arg(q.memory_mib.to_string())
            .args(["-smp", "1", "-nographic", "-nodefaults", "-serial", "stdio"])
            .args(["-no-reboot", "-device", "qemu-xhci,id=xhci"])
            .arg("-kernel")
            .arg(&q.guest.kernel)
            .arg("-initrd")
            .arg(initrd)
            .arg("-append")
            .arg(append);
        c
    }
}

/// Everything a lockstep guest run produced.
#[derive(Clone, Debug)]
pub struct LockstepRun {
    /// How it ended.
    pub outcome: Outcome,
    /// The invariant that broke, the probe's failure or the model gap (`None` for a pass and
    /// for `emulator_blocked`, which is no verdict).
    pub failure: Option<Failure>,
    /// The guest's console, line by line.
    pub console: Vec<String>,
    /// When each console line arrived (wall time since QEMU started; for people, never hashed).
    pub console_at: Vec<Duration>,
    /// The trace (JSON Lines, each ending in `\n`).
    pub trace: Vec<String>,
    /// The trace hash: every frame, the model's transfers, the console.
    pub hash: TraceHash,
    /// Deterministic records hashed.
    pub records: u64,
    /// Frames served.
    pub frames: u64,
    /// The guest clock of the last frame.
    pub end_clock_ns: Nanos,
    /// The faults and externals the run took (what a regression file keeps).
    pub events: Vec<Event>,
    /// Wall-clock timings (never hashed).
    pub timings: Timings,
    /// QEMU's exit code (`None` when killed).
    pub exit: Option<i32>,
    /// QEMU's stderr.
    pub qemu_stderr: String,
    /// The QEMU command line.
    pub command: String,
}

impl LockstepRun {
    /// A one-screen summary: outcome, timings, hash, the last console lines.
    pub fn summary(&self) -> String {
        let mut s = format!(
            "outcome: {}\ntrace hash: {} ({} records, {} frames, guest clock {} ns)\nenumerated after: {:?}, probe: {:?}, total: {:.1?}\n",
            self.outcome,
            self.hash,
            self.records,
            self.frames,
            self.end_clock_ns,
            self.timings.enumerated,
            self.timings.probe,
            self.timings.total
        );
        if let Some(f) = &self.failure {
            s.push_str(&format!("failure: {f}\n"));
        }
        if !self.events.is_empty() {
            s.push_str(&format!("events: {}\n", choices::story(&self.events)));
        }
        crate::launcher::console_tail(&mut s, &self.console, &self.qemu_stderr);
        s
    }

    /// Writes the trace as JSON Lines to `path` (creating its directory), atomically.
    pub fn write_trace(&self, path: &Path) -> std::io::Result<()> {
        crate::launcher::write_trace(path, &self.trace)
    }

    /// Console lines between `begin` and the next line starting with `end` (exclusive).
    pub fn console_block(&self, begin: &str, end: &str) -> Vec<String> {
        crate::launcher::console_block(&self.console, begin, end)
    }

    /// Wall time between the first console lines starting with `begin` and `end` (a step of
    /// the probe, for benchmarks).
    pub fn wall_between(&self, begin: &str, end: &str) -> Option<Duration> {
        let at = |m: &str| {
            let i = self.console.iter().position(|l| l.starts_with(m))?;
            self.console_at.get(i).copied()
        };
        Some(at(end)?.saturating_sub(at(begin)?))
    }
}

/// Every line still to come from `rx`, until its writer ends (QEMU exited) or `patience`.
fn drain(rx: &Receiver<String>, patience: Duration) -> Vec<String> {
    let deadline = Instant::now() + patience;
    let mut out = Vec::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => out.push(l),
            Err(RecvTimeoutError::Disconnected) | Err(RecvTimeoutError::Timeout) => return out,
        }
    }
}

/// What a run is asked to do besides the probe.
#[derive(Clone, Default)]
pub struct Extras {
    /// External events a seeded run places (or a replay takes from its events).
    pub externals: Vec<External>,
    /// Where on the guest clock a seeded run places them.
    pub window: (Nanos, Nanos),
    /// Checked after every frame; the first that breaks ends the run there.
    pub invariants: Vec<(String, Invariant)>,
}

/// Boots the lockstep guest with `device`, runs `probe`, and returns the run and the device
/// host. `config` gives the model's choice source, fault plan and fault set; its trace is
/// always kept.
pub fn run_with_host<D: Device>(
    device: D,
    config: &RunConfig,
    probe: &Probe,
    lock: &LockstepConfig,
) -> Result<(LockstepRun, DeviceHost), QemuError> {
    run_with_extras(device, config, &Extras::default(), probe, lock)
}

/// [`run_with_host`] with externals and invariants.
pub fn run_with_extras<D: Device>(
    device: D,
    config: &RunConfig,
    extras: &Extras,
    probe: &Probe,
    lock: &LockstepConfig,
) -> Result<(LockstepRun, DeviceHost), QemuError> {
    let start = Instant::now();
    let cfg = RunConfig {
        keep_trace: true,
        ..config.clone()
    };
    let placed = place_externals(
        &cfg.source,
        cfg.place_externals,
        &extras.externals,
        extras.window,
    );
    let host = DeviceHost::new(device, &cfg);
    let mut server = Server::new(
        host,
        lock.options.clone(),
        extras.externals.clone(),
        placed,
        extras.invariants.clone(),
    )
    .map_err(|e| QemuError::Qemu(e.to_string()))?;

    let scratch = tempfile::Builder::new()
        .prefix("calametra-lockstep-")
        .tempdir()
        .map_err(io("creating a scratch directory"))?;
    let dir = scratch.path();
    let socket = dir.join("lockstep.sock");
    let initrd = dir.join("initrd.img");
    guest::write_initrd(&lock.qemu.guest.initramfs, probe, &initrd)
        .map_err(io(format!("writing {}", initrd.display())))?;
    let listener =
        UnixListener::bind(&socket).map_err(io(format!("binding {}", socket.display())))?;
    listener
        .set_nonblocking(true)
        .map_err(io("making the socket non-blocking"))?;

    let d = server.device_descriptor();
    let (vid, pid) = (
        u16::from_le_bytes([d[8], d[9]]),
        u16::from_le_bytes([d[10], d[11]]),
    );
    let append = format!(
        "console=ttyS0 quiet panic=-1 usbcore.autosuspend=-1 calametra.probe={} calametra.dev={vid:04x}:{pid:04x} {}",
        probe.name(),
        lock.qemu.extra_append
    );
    let append = append.trim();
    let mut timings = Timings::default();
    let (q, stream, qmp, stopped) = match &lock.start {
        Start::ColdBoot => {
            let qmp_path = dir.join("qmp.sock");
            let mut cmd = lock.command(&socket, &initrd, append);
            cmd.arg("-qmp").arg(watchdog::qmp_arg(&qmp_path));
            let mut q = start_qemu(cmd, &lock.qemu.qemu)?;
            let qmp = watchdog::open_qmp(&qmp_path, &mut q);
            let stream = accept_qemu(&listener, &mut q, start, "lockstep")?;
            (q, stream, qmp, false)
        }
        Start::Snapshot { cache } => {
            let snap = snapshot::ensure(lock, cache, &initrd, append)?;
            timings.snapshot = Some(snap.made_in).filter(|_| snap.fresh);
            server
                .host_mut()
                .record("emulator", "snapshot", false, |r| {
                    r.str("key", &snap.key)
                        .bool("fresh", snap.fresh)
                        .str("dir", &snap.dir.display().to_string());
                });
            let restoring = Instant::now();
            let r = snapshot::restore(
                lock,
                &snap,
                &initrd,
                append,
                dir,
                &socket,
                &listener,
                &mut server,
            )?;
            timings.restored = Some(restoring.elapsed());
            (r.started, r.stream, Some(r.qmp), r.stopped)
        }
    };
    let command = q.command.clone();
    server.host_mut().record("emulator", "qemu", false, |r| {
        r.str("event", "start").str("command", &command);
    });
    let Started {
        console_rx,
        stderr_rx,
        mut guard,
        ..
    } = q;
    let served = serve(
        &mut server,
        stream,
        &mut guard,
        console_rx,
        GuestWatch::new(&lock.qemu, qmp, start),
        start,
        stopped,
    );
    let served = ServeEnd {
        timings: Timings {
            snapshot: timings.snapshot,
            restored: timings.restored,
            ..served.timings
        },
        ..served
    };
    let stderr: Vec<String> = stderr_rx
        .map(|rx| drain(&rx, Duration::from_millis(500)))
        .unwrap_or_default();
    drop(scratch);
    // QEMU stopped by a signal from outside (exit status 0, "terminating on signal 15 from
    // pid N") ended where the host's scheduler put it: no verdict, nothing deterministic.
    let mut served = served;
    if let Some(line) = stderr.iter().find(|l| l.contains("terminating on signal")) {
        if !matches!(
            served.outcome,
            Outcome::Passed | Outcome::EmulatorBlocked { .. }
        ) {
            served.outcome = Outcome::EmulatorBlocked {
                reason: format!("QEMU was stopped from outside the run: {line}"),
            };
            served.deterministic_end = false;
        }
    }

    // The console, whole, as deterministic records: with the vCPU waiting on every frame, what
    // the guest printed up to where the run ended is the same bytes on every run.
    let deterministic = served.deterministic_end;
    let host = server.host_mut();
    for (i, line) in served.console.iter().enumerate() {
        host.record("guest", "guest", deterministic, |r| {
            r.u64("n", i as u64).str("line", line);
        });
    }
    let trace: Vec<String> = server.host().lines().to_vec();
    let gap = model_gap(&trace);
    let failure = match (&served.outcome, server.failure(), &gap) {
        (Outcome::EmulatorBlocked { .. }, _, _) => None,
        (_, Some(f), _) => Some(f.clone()),
        (_, None, Some(g)) => Some(Failure::ModelGap(g.clone())),
        (Outcome::Failed { reason, .. }, None, None) => Some(Failure::TaskError {
            task: "guest probe".into(),
            message: reason.clone(),
        }),
        _ => None,
    };
    let outcome = match (served.outcome, &failure) {
        (o @ Outcome::EmulatorBlocked { .. }, _) => o,
        (_, Some(Failure::ModelGap(g))) => Outcome::ModelGap {
            gap: format!("{} asked `{}` in state `{}`", g.device, g.request, g.state),
        },
        (_, Some(f @ Failure::Invariant { .. })) => Outcome::Failed {
            rc: None,
            reason: f.to_string(),
        },
        (o, _) => o,
    };
    let (frames, end_clock_ns) = (server.frames(), server.last_clock());
    let outcome_name = outcome.name();
    let host = server.host_mut();
    let now = host.now();
    host.record("end", "lockstep", true, |r| {
        r.str("outcome", outcome_name)
            .u64("frames", frames)
            .u64("guest_clock_ns", end_clock_ns)
            .u64("model_clock_ns", now);
    });
    let trace: Vec<String> = server.host().lines().to_vec();
    let (hash, records) = server.host().hash();
    let run = LockstepRun {
        outcome,
        failure,
        console: served.console,
        console_at: served.console_at,
        events: run_events(server.host(), &trace),
        trace,
        hash,
        records,
        frames,
        end_clock_ns,
        timings: Timings {
            total: start.elapsed(),
            ..served.timings
        },
        exit: served.exit,
        qemu_stderr: stderr.join("\n"),
        command,
    };
    Ok((run, server.into_host()))
}

struct ServeEnd {
    outcome: Outcome,
    console: Vec<String>,
    console_at: Vec<Duration>,
    timings: Timings,
    exit: Option<i32>,
    /// QEMU exited by itself or was stopped on a frame: the console is complete and the same
    /// on every run.
    deterministic_end: bool,
}

/// The run loop: socket <-> server, console lines, watchdog.
fn serve(
    server: &mut Server,
    mut stream: UnixStream,
    guard: &mut Guard,
    console_rx: Option<Receiver<String>>,
    mut watch: GuestWatch,
    start: Instant,
    stopped_on_hello: bool,
) -> ServeEnd {
    let _ = stream.set_read_timeout(Some(Duration::from_millis(20)));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    let mut reader = FrameReader::new();
    let mut console = Vec::new();
    let mut console_at = Vec::new();
    let mut timings = Timings::default();
    let mut enumerated_at = None;
    let mut probe_rc: Option<i32> = None;
    let mut buf = vec![0u8; 64 * 1024];
    let mut socket_open = true;
    let mut lost: Option<String> = None;
    let mut stopped = stopped_on_hello;
    let mut on_line = |line: String,
                       console: &mut Vec<String>,
                       console_at: &mut Vec<Duration>,
                       timings: &mut Timings,
                       probe_rc: &mut Option<i32>| {
        console_at.push(start.elapsed());
        if line.contains(marker::ENUMERATED) && enumerated_at.is_none() {
            enumerated_at = Some(Instant::now());
            timings.enumerated = Some(start.elapsed());
        }
        if let Some(rc) = guest::probe_end_rc(&line) {
            if probe_rc.is_none() {
                timings.probe = enumerated_at.map(|t: Instant| t.elapsed());
            }
            *probe_rc = Some(rc);
        }
        console.push(line);
    };
    loop {
        if socket_open && !stopped {
            match stream.read(&mut buf) {
                Ok(0) => socket_open = false,
                Ok(n) => {
                    watch.progress();
                    reader.push(&buf[..n]);
                    while let Some(r) = reader.next_request() {
                        let served = r.and_then(|req| server.serve(&req));
                        match served {
                            Ok(Served::Reply(bytes)) => {
                                if stream.write_all(&bytes).is_err() {
                                    socket_open = false;
                                    break;
                                }
                            }
                            Ok(Served::Stop) => {
                                stopped = true;
                                break;
                            }
                            Err(e) => {
                                lost = Some(e.to_string());
                                socket_open = false;
                                break;
                            }
                        }
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {}
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => socket_open = false,
            }
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
        if let Some(rx) = &console_rx {
            for line in rx.try_iter() {
                watch.progress();
                on_line(
                    line,
                    &mut console,
                    &mut console_at,
                    &mut timings,
                    &mut probe_rc,
                );
            }
        }
        if stopped {
            // QEMU waits on the frame we did not answer: everything the guest printed before
            // it is in the pipe. Stop QEMU and read the rest.
            guard.kill();
            if let Some(rx) = &console_rx {
                for line in drain(rx, Duration::from_secs(5)) {
                    on_line(
                        line,
                        &mut console,
                        &mut console_at,
                        &mut timings,
                        &mut probe_rc,
                    );
                }
            }
            let reason = server
                .failure()
                .map(|f| f.to_string())
                .unwrap_or_else(|| "stopped".into());
            return ServeEnd {
                outcome: Outcome::Failed { rc: None, reason },
                console,
                console_at,
                timings,
                exit: None,
                deterministic_end: true,
            };
        }
        let status = guard.0.as_mut().and_then(|c| c.try_wait().ok().flatten());
        if let Some(status) = status {
            guard.0 = None;
            if let Some(rx) = &console_rx {
                for line in drain(rx, Duration::from_secs(5)) {
                    on_line(
                        line,
                        &mut console,
                        &mut console_at,
                        &mut timings,
                        &mut probe_rc,
                    );
                }
            }
            let code = status.code();
            let outcome = match probe_rc {
                Some(0) => Outcome::Passed,
                Some(rc) => Outcome::Failed {
                    rc: Some(rc),
                    reason: format!("the probe exited with {rc}"),
                },
                None => Outcome::Failed {
                    rc: None,
                    reason: match &lost {
                        Some(e) => format!("QEMU exited ({status}) before the probe ended; {e}"),
                        None => format!("QEMU exited ({status}) before the probe ended"),
                    },
                },
            };
            return ServeEnd {
                outcome,
                console,
                console_at,
                timings,
                exit: code,
                deterministic_end: lost.is_none(),
            };
        }
        let blocked = watch.check().map(|why| {
            format!(
                "{why} (last line: {:?}; {} frames)",
                console.last().cloned().unwrap_or_default(),
                server.frames()
            )
        });
        if let Some(reason) = blocked {
            let r = reason.clone();
            server
                .host_mut()
                .record("emulator", "watchdog", false, |d| {
                    d.str("event", "emulator_blocked").str("reason", &r);
                });
            guard.kill();
            if let Some(rx) = &console_rx {
                for line in drain(rx, Duration::from_secs(2)) {
                    console_at.push(start.elapsed());
                    console.push(line);
                }
            }
            return ServeEnd {
                outcome: Outcome::EmulatorBlocked { reason },
                console,
                console_at,
                timings,
                exit: None,
                deterministic_end: false,
            };
        }
    }
}

/// A guest scenario: the same trial names as an in-process scenario (`baseline`,
/// `seed::0x..`, `site::<site>::<fault>`, `regression::<id>`), each one lockstep guest run.
pub struct Scenario<D: Device> {
    /// The scenario path (`lockstep::dfu_download`), as in trial names and regression files.
    pub name: String,
    /// A fresh model for each run.
    pub model: Rc<dyn Fn() -> D>,
    /// What the guest runs.
    pub probe: Probe,
    /// The fault plan and the fault set seeded runs draw from (`source` is the trial's).
    pub base: RunConfig,
    /// Externals, their window, invariants.
    pub extras: Extras,
    /// QEMU, the guest and the server's options.
    pub lock: LockstepConfig,
}

/// One trial of a guest scenario.
#[derive(Clone, Debug)]
pub struct ScenarioRun {
    /// The trial's name (`lockstep::dfu_download::seed::0x2a`).
    pub trial: String,
    /// The trace hash.
    pub hash: TraceHash,
    /// The trace lines.
    pub lines: Vec<String>,
    /// What failed, if anything (`None` for a pass and for `emulator_blocked`).
    pub failure: Option<Failure>,
    /// The faults and externals it took.
    pub events: Vec<Event>,
    /// The whole guest run.
    pub run: LockstepRun,
}

impl<D: Device> Scenario<D> {
    /// The trial name of `probe`.
    pub fn trial_name(&self, probe: &explore::Probe) -> String {
        format!("{}::{}", self.name, probe.trial_suffix())
    }

    /// Runs one trial, `config` being its full run configuration.
    fn run_config(&self, trial: String, config: RunConfig) -> Result<ScenarioRun, QemuError> {
        let (run, _host) = run_with_extras(
            (self.model)(),
            &config,
            &self.extras,
            &self.probe,
            &self.lock,
        )?;
        Ok(ScenarioRun {
            trial,
            hash: run.hash,
            lines: run.trace.clone(),
            failure: run.failure.clone(),
            events: run.events.clone(),
            run,
        })
    }

    /// Runs the trial `probe` (`Baseline`: seed 0, no faults, no externals; `Seed(s)`: faults
    /// from `base.fault_set` and externals placed by `s`; `Site`: one pinned fault).
    pub fn run(&self, probe: &explore::Probe) -> Result<ScenarioRun, QemuError> {
        self.run_config(self.trial_name(probe), probe.config(&self.base))
    }

    /// The regression file of a failed run (its events are kept as they were: a guest run is
    /// too dear to minimize by replaying it dozens of times).
    pub fn regression(&self, run: &ScenarioRun) -> Option<Regression> {
        let failure = run.failure.as_ref()?;
        let signature = failure.signature();
        Some(Regression {
            format: regress::FORMAT.into(),
            version: regress::VERSION,
            scenario: self.name.clone(),
            id: regress::id_for(&self.name, &signature),
            signature,
            failure: failure.to_string(),
            found_by: run
                .trial
                .strip_prefix(&format!("{}::", self.name))
                .unwrap_or(&run.trial)
                .to_string(),
            base_seed: "0x0".into(),
            spec_sha256: self.base.spec.as_ref().map(|s| s.sha256().to_string()),
            story: choices::story(&run.events),
            events: run.events.clone(),
            run_aloud: String::new(),
            swarm: None,
            trace_hash: run.hash.to_string(),
            hash_version: calametra_core::trace::HASH_VERSION,
            package: "calametra-qemu".into(),
            target: "lockstep".into(),
        })
    }

    /// Replays a regression file's events (`regression::<id>`). Byte-exact or an error naming
    /// both hashes.
    pub fn replay(&self, reg: &Regression) -> Result<ScenarioRun, QemuError> {
        let config = explore::replay_config(&self.base, &reg.events);
        let run = self.run_config(format!("{}::regression::{}", self.name, reg.id), config)?;
        if run.hash.to_string() != reg.trace_hash {
            return Err(QemuError::Qemu(format!(
                "regression {} replayed with trace hash {}, the file says {}",
                reg.id, run.hash, reg.trace_hash
            )));
        }
        Ok(run)
    }
}

/// One guest trial of `scenario` (the harness-level entry point; see [`Scenario::run`]).
pub fn scenario_run<D: Device>(
    scenario: &Scenario<D>,
    probe: &explore::Probe,
) -> Result<ScenarioRun, QemuError> {
    scenario.run(probe)
}

#[cfg(test)]
mod tests {
    use super::*;
    use calametra_core::usb::{DevCtx, Reply as DevReply};

    /// A device with one interrupt IN endpoint that has data only after a timer fires.
    struct Ticker {
        armed: bool,
        ready: bool,
    }

    impl Device for Ticker {
        fn name(&self) -> &str {
            "ticker"
        }
        fn control(&mut self, cx: &mut DevCtx<'_>, s: &Setup, _data: &[u8]) -> DevReply {
            match (s.request_type, s.request) {
                (0x80, 6) if s.value == 0x0100 => DevReply::Data(vec![
                    18, 1, 0, 2, 0, 0, 0, 64, 0x09, 0x12, 0x02, 0, 0, 1, 0, 0, 0, 1,
                ]),
                (0x40, 1) => {
                    if !self.armed {
                        self.armed = true;
                        cx.wake_after(5_000_000, 1);
                    }
                    DevReply::Ack
                }
                _ => DevReply::Stall,
            }
        }
        fn out(&mut self, _cx: &mut DevCtx<'_>, _ep: u8, _data: &[u8]) -> DevReply {
            DevReply::Ack
        }
        fn poll_in(&mut self, _cx: &mut DevCtx<'_>, _ep: u8, _max: usize) -> DevReply {
            if self.ready {
                DevReply::Data(vec![7])
            } else {
                DevReply::Nak
            }
        }
        fn on_timer(&mut self, _cx: &mut DevCtx<'_>, _token: u64) {
            self.ready = true;
        }
    }

    fn server(externals: Vec<External>, placed: Vec<(Nanos, usize)>) -> Server {
        server_with(
            RunConfig {
                keep_trace: true,
                ..RunConfig::default()
            },
            externals,
            placed,
        )
    }

    fn server_with(
        config: RunConfig,
        externals: Vec<External>,
        placed: Vec<(Nanos, usize)>,
    ) -> Server {
        let host = DeviceHost::new(
            Ticker {
                armed: false,
                ready: false,
            },
            &config,
        );
        Server::new(
            host,
            LockstepOptions::default(),
            externals,
            placed,
            Vec::new(),
        )
        .unwrap()
    }

    /// A server whose model takes `fault` at `site`.
    fn server_faulted(site: &str, fault: Fault) -> Server {
        server_with(
            RunConfig {
                keep_trace: true,
                faults: calametra_core::fault::FaultPlan::single(site, fault),
                ..RunConfig::default()
            },
            Vec::new(),
            Vec::new(),
        )
    }

    fn reply_of(bytes: &[u8]) -> (Header, Reply) {
        let mut hb = [0u8; HEADER_LEN];
        hb.copy_from_slice(&bytes[..HEADER_LEN]);
        let h = Header::decode(&hb).unwrap();
        let p = &bytes[HEADER_LEN..];
        let w = |i: usize| u32::from_le_bytes([p[i], p[i + 1], p[i + 2], p[i + 3]]);
        let q = |i: usize| {
            let mut b = [0u8; 8];
            b.copy_from_slice(&p[i..i + 8]);
            u64::from_le_bytes(b)
        };
        (
            h,
            Reply {
                status: Status::from_code(w(0)),
                actions: w(4),
                wake_ns: q(8),
                complete_ns: q(16),
                data: p[PREFIX_LEN..].to_vec(),
            },
        )
    }

    fn hello() -> Vec<u8> {
        let mut v = VERSION.to_le_bytes().to_vec();
        v.extend_from_slice(&[0, 0, 0, 0]);
        v
    }

    fn req(kind: Kind, seq: u32, clock_ns: Nanos, ep: u8, payload: Vec<u8>) -> Request {
        Request {
            kind,
            ep,
            seq,
            clock_ns,
            payload,
        }
    }

    fn serve(s: &mut Server, r: Request) -> Reply {
        match s.serve(&r).unwrap() {
            Served::Reply(b) => {
                let (h, reply) = reply_of(&b);
                assert_eq!(h.ty, r.kind.code() | REPLY);
                assert_eq!(h.seq, r.seq);
                reply
            }
            Served::Stop => panic!("stopped"),
        }
    }

    #[test]
    fn frames_round_trip_through_the_reader() {
        let r = req(
            Kind::Control,
            3,
            123_456,
            0,
            vec![0x80, 6, 0, 1, 0, 0, 18, 0],
        );
        let bytes = r.encode();
        assert_eq!(&bytes[..4], b"CLM1");
        let mut rd = FrameReader::new();
        rd.push(&bytes[..10]);
        assert!(rd.next_request().is_none());
        rd.push(&bytes[10..]);
        assert_eq!(rd.next_request().unwrap().unwrap(), r);
        assert!(rd.next_request().is_none());
        let mut bad = bytes.clone();
        bad[0] = b'X';
        rd.push(&bad);
        assert!(matches!(rd.next_request(), Some(Err(FrameError::Magic(_)))));
    }

    #[test]
    fn the_hello_gives_version_speed_and_descriptor() {
        let mut s = server(Vec::new(), Vec::new());
        let r = serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        assert_eq!(r.status, Status::Ok);
        assert_eq!(&r.data[..4], &VERSION.to_le_bytes());
        assert_eq!(r.data[4], crate::proto::speed::HIGH);
        assert_eq!(r.data[5], 1);
        assert_eq!(&r.data[16..18], &[18, 1]);
        let e = s
            .serve(&req(Kind::Hello, 1, 0, 0, vec![9, 0, 0, 0]))
            .unwrap_err();
        assert_eq!(e, FrameError::Version(9));
        let e = s.serve(&req(Kind::Tick, 7, 0, 0, vec![])).unwrap_err();
        assert!(matches!(
            e,
            FrameError::Sequence {
                expected: 2,
                found: 7
            }
        ));
    }

    #[test]
    fn the_model_runs_on_the_guest_clock_and_naks_are_polled_again() {
        let mut s = server(Vec::new(), Vec::new());
        serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        let r = serve(
            &mut s,
            req(Kind::In, 1, 1_000, 0x81, 8u32.to_le_bytes().to_vec()),
        );
        assert_eq!(r.status, Status::Nak);
        assert_eq!(r.wake_ns, 0, "nothing can change: no tick wanted");
        // A vendor request arms the model's 5 ms timer: QEMU is asked for a tick then.
        let r = serve(
            &mut s,
            req(
                Kind::Control,
                2,
                2_000_000,
                0,
                vec![0x40, 1, 0, 0, 0, 0, 0, 0],
            ),
        );
        assert_eq!(r.status, Status::Ok);
        let t = s.host().next_event_time().unwrap();
        assert!(t >= 7_000_000, "{t}");
        assert_eq!(r.wake_ns, 2_000_000 + LockstepOptions::default().repoll_ns);
        let r = serve(&mut s, req(Kind::Tick, 3, 3_000_000, 0, vec![]));
        assert_eq!(r.actions & action::WAKE, action::WAKE);
        assert_eq!(r.wake_ns, t);
        let r = serve(
            &mut s,
            req(Kind::In, 4, 3_000_100, 0x81, 8u32.to_le_bytes().to_vec()),
        );
        assert_eq!(r.status, Status::Nak);
        // The tick at the timer's time fires it; the retry gets the data.
        let r = serve(&mut s, req(Kind::Tick, 5, t, 0, vec![]));
        assert_eq!(r.actions & action::WAKE, action::WAKE);
        let r = serve(
            &mut s,
            req(Kind::In, 6, t + 100, 0x81, 8u32.to_le_bytes().to_vec()),
        );
        assert_eq!((r.status, r.data), (Status::Ok, vec![7]));
        assert!(s
            .host()
            .lines()
            .iter()
            .any(|l| l.contains("\"frame\":\"tick\"")));
    }

    #[test]
    fn a_delayed_transfer_completes_later_on_the_guest_clock() {
        let mut s = server_faulted("ctrl.get_descriptor#3", Fault::Delay(3_000_000));
        serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        let get = vec![0x80, 6, 0, 1, 0, 0, 18, 0];
        // (get_descriptor#1 was the server's own, for the hello.) The next completes within
        // the model's latency: at once.
        let r = serve(&mut s, req(Kind::Control, 1, 1_000_000, 0, get.clone()));
        assert_eq!((r.status, r.complete_ns, r.data.len()), (Status::Ok, 0, 18));
        // The second is delayed 3 ms: answered now, completed on the guest clock then.
        let r = serve(&mut s, req(Kind::Control, 2, 2_000_000, 0, get));
        assert_eq!((r.status, r.data.len()), (Status::Ok, 18));
        assert!(r.complete_ns >= 5_000_000, "{}", r.complete_ns);
        assert_eq!(r.complete_ns, s.host().now());
        assert!(s
            .host()
            .lines()
            .iter()
            .any(|l| l.contains(&format!("\"complete_ns\":{}", r.complete_ns))));
    }

    #[test]
    fn a_short_out_reply_carries_the_count_the_model_took() {
        let mut s = server_faulted("bulk.out#2", Fault::Short(3));
        serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        let r = serve(&mut s, req(Kind::Out, 1, 1_000, 0x01, vec![1; 8]));
        assert_eq!(
            (r.status, r.data.len()),
            (Status::Ok, 0),
            "all taken: no count"
        );
        let r = serve(&mut s, req(Kind::Out, 2, 2_000, 0x01, vec![2; 8]));
        assert_eq!(
            (r.status, r.data),
            (Status::Ok, 3u32.to_le_bytes().to_vec())
        );
    }

    #[test]
    fn a_replug_power_cycles_the_model_and_reenumerates_the_guest() {
        let ext = vec![External::new("replug", ExternalAction::Replug)];
        let mut s = server(ext, vec![(5_000, 0)]);
        serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        let r = serve(&mut s, req(Kind::Tick, 1, 5_000, 0, vec![]));
        assert_eq!(r.actions, action::DETACH | action::ATTACH);
        assert!(s.host().is_attached());
        let lines = s.host().lines().join("\n");
        let gone = lines
            .find("\"to\":\"detached\"")
            .expect("the model lost power");
        let back = lines
            .find("\"to\":\"attached\"")
            .expect("and was plugged back");
        assert!(gone < back, "{lines}");
    }

    #[test]
    fn externals_land_on_the_guest_clock_and_detach_the_device() {
        let ext = vec![External::new("unplug", ExternalAction::Unplug)];
        let mut s = server(ext.clone(), vec![(5_000, 0)]);
        let r = serve(&mut s, req(Kind::Hello, 0, 0, 0, hello()));
        assert_eq!(r.wake_ns, 5_000, "a tick at the external's time");
        let r = serve(&mut s, req(Kind::Tick, 1, 5_000, 0, vec![]));
        assert_eq!(r.actions, action::DETACH);
        let ev = events_of(s.host().lines());
        assert_eq!(
            ev,
            vec![Event::External {
                name: "unplug".into(),
                point: 5_000
            }]
        );
        let placed = place_externals(&Source::Seeded(7), true, &ext, (1_000, 2_000));
        assert_eq!(placed.len(), 1);
        assert!((1_000..2_000).contains(&placed[0].0));
        assert_eq!(
            placed,
            place_externals(&Source::Seeded(7), true, &ext, (1_000, 2_000))
        );
        assert_eq!(
            place_externals(&Source::Replay(ev), true, &ext, (0, 1)),
            vec![(5_000, 0)]
        );
        assert!(place_externals(&Source::Default, true, &ext, (0, 10)).is_empty());
    }

    #[test]
    fn trace_fields_read_back() {
        let l = r#"{"seq":1,"t_ns":2,"kind":"fault","actor":"bus","deterministic":true,"data":{"site":"ctrl.dnload#3","fault":"delay(1ms)"}}"#;
        assert_eq!(
            events_of(&[l.to_string()]),
            vec![Event::Fault {
                site: "ctrl.dnload#3".into(),
                fault: Fault::Delay(1_000_000)
            }]
        );
    }
}
