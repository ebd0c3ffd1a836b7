//! The usbredir host: serves one Calametra device to a usbredir guest (QEMU's `usb-redir`).
//!
//! [`Bridge`] is sans-I/O: bytes from the guest go in through [`Bridge::feed`], bytes for the
//! guest come out of [`Bridge::take_output`], and the launcher moves them over the socket. Every
//! request reaches the model through a [`DeviceHost`], so faults, transitions, model gaps and
//! the trace hash are those of an in-process run.
//!
//! Time: the model's clock moves by the bus latency of each transfer and, before each guest
//! request, by a fixed `request_gap_ns`, so the model's view is a function of the sequence of
//! requests the guest made, not of host timing. Only [`Bridge::idle_tick`] (called by the
//! launcher when the socket is quiet while an IN is pending) moves it by wall-clock occasion;
//! such ticks are counted and traced as `deterministic:false`.
//!
//! Trace: socket traffic is written as `emulator` records. What the bridge derives from the
//! model alone (its hello, the descriptors it read, `ep_info`, `interface_info`,
//! `device_connect`) is deterministic; what carries guest-chosen packet ids or arrives at
//! host-timed points (every guest packet, every reply, cancels, retries) is
//! `deterministic:false`. The model's own transfer records are deterministic and hashed.
//!
//! This file holds the bridge's state, its options and the launcher-facing calls; `serve.rs`
//! answers the guest's packets and `device.rs` carries transfers to and from the model.

mod device;
mod serve;

use crate::descriptors::{self, DeviceInfo};
use crate::proto::{
    ep_type, Caps, ControlHeader, Frame, Framer, Packet, ProtoError, Status, HOST_CAPS,
};
use calametra_core::clock::Nanos;
use calametra_core::host::DeviceHost;
use calametra_core::usb::{Setup, TransferError};
use std::collections::BTreeMap;

/// How the bridge presents the device and moves the model's clock.
#[derive(Clone, Debug)]
pub struct BridgeOptions {
    /// The speed announced in `device_connect` (`proto::speed`); `None` derives it from the
    /// device descriptor.
    pub speed: Option<u8>,
    /// Virtual time the model's clock advances before each guest request.
    pub request_gap_ns: Nanos,
    /// Virtual time one idle tick advances.
    pub idle_step_ns: Nanos,
    /// The version string of our hello.
    pub version: String,
    /// Interrupt packets streamed per endpoint per round, at most (a model that always has
    /// data must not starve the socket).
    pub interrupt_burst: usize,
    /// Announce the device only when [`Bridge::plug_in`] is called, not right after the hello.
    /// The launcher plugs the device in when the guest's `/init` starts, so the firmware
    /// (SeaBIOS enumerates USB devices too) never talks to the model and the model serves
    /// Linux alone.
    pub defer_connect: bool,
    /// Coverage marks that mean "the model re-enumerated by itself" (a DFU device with
    /// bitWillDetach switching modes): when one is reached, the bridge unplugs the device for
    /// the guest, reads its descriptors again and plugs it back in.
    pub reenumerate_marks: Vec<String>,
    /// After each request, let the model's next timer fire before the guest's next request
    /// (a warp of at most `idle_warp_ns`): the guest is taken to wait as long as the device
    /// asks (bwPollTimeout, a detach timer). Models with self-timed behaviour need it under
    /// `-icount sleep=off`, where an idle guest's clock jumps ahead at once. It depends on the
    /// request sequence only, so the hash stays deterministic.
    pub warp_after_request: bool,
    /// Model time one warp may advance at most, in `idle_step_ns` steps; it stops at the first
    /// step after which the model wrote a trace record (its next timer fired).
    pub idle_warp_ns: Nanos,
}

impl Default for BridgeOptions {
    fn default() -> Self {
        BridgeOptions {
            speed: None,
            request_gap_ns: 1_000_000,
            idle_step_ns: 1_000_000,
            version: format!("calametra usbredir host {}", env!("CARGO_PKG_VERSION")),
            interrupt_burst: 8,
            defer_connect: false,
            reenumerate_marks: Vec::new(),
            warp_after_request: false,
            idle_warp_ns: 50_000_000,
        }
    }
}

impl BridgeOptions {
    /// Takes what a registered model says a guest run needs
    /// ([`calametra_core::registry::QemuHints`]): its re-enumeration marks (added) and whether
    /// to warp after each request (set when the model asks for it).
    pub fn apply(&mut self, hints: &calametra_core::registry::QemuHints) {
        self.reenumerate_marks
            .extend(hints.reenumerate_marks.iter().map(|m| m.to_string()));
        self.warp_after_request |= hints.warp_after_request;
    }
}

/// Why the bridge cannot serve the device at all.
#[derive(Debug)]
pub enum BridgeError {
    /// The model's descriptors could not be read or parsed.
    Descriptors(String),
    /// The guest's byte stream cannot be framed any more.
    Stream(ProtoError),
}

impl std::fmt::Display for BridgeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BridgeError::Descriptors(m) => write!(f, "reading the model's descriptors: {m}"),
            BridgeError::Stream(e) => write!(f, "the guest's usbredir stream is lost: {e}"),
        }
    }
}

impl std::error::Error for BridgeError {}

/// Counters for reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    /// Packets received from the guest.
    pub packets_in: u64,
    /// Packets sent to the guest.
    pub packets_out: u64,
    /// Malformed packets received (skipped).
    pub malformed: u64,
    /// Control requests served.
    pub control: u64,
    /// Bulk and interrupt requests served.
    pub data: u64,
    /// IN requests that NAKed at first and were kept pending.
    pub naks: u64,
    /// Requests the model never completed (kept unanswered until cancelled).
    pub swallowed: u64,
    /// Idle ticks (host-timed clock advances).
    pub idle_ticks: u64,
}

#[derive(Clone, Debug)]
struct PendingIn {
    id: u64,
    endpoint: u8,
    length: u32,
    stream_id: u32,
}

#[derive(Clone, Debug)]
enum Swallowed {
    Control(ControlHeader),
    Bulk { endpoint: u8, stream_id: u32 },
    Interrupt { endpoint: u8 },
}

/// A usbredir host serving one device.
pub struct Bridge {
    host: DeviceHost,
    opts: BridgeOptions,
    caps: Caps,
    framer: Framer,
    out: Vec<u8>,
    info: DeviceInfo,
    config: u8,
    alts: BTreeMap<u8, u8>,
    pending: Vec<PendingIn>,
    swallowed: BTreeMap<u64, Swallowed>,
    interrupts: BTreeMap<u8, u64>,
    connected: bool,
    hello_sent: bool,
    stats: Stats,
    activity: u64,
    plugged: bool,
    /// Whether the guest configured the device since the last device_connect (resets before
    /// that are the guest's enumeration of the attach, see `Packet::Reset`).
    configured_since_connect: bool,
    /// A re-enumeration waits for the guest's device_disconnect_ack.
    awaiting_ack: bool,
    marks_seen: u64,
}

fn get_descriptor(ty: u8, index: u8, length: u16) -> Setup {
    Setup {
        request_type: 0x80,
        request: 6,
        value: ((ty as u16) << 8) | index as u16,
        index: 0,
        length,
    }
}

fn status_of(e: TransferError) -> Status {
    match e {
        TransferError::Stall => Status::Stall,
        TransferError::Cancelled => Status::Cancelled,
        TransferError::Timeout => Status::Timeout,
        TransferError::Disconnected | TransferError::Fault => Status::IoError,
    }
}

impl Bridge {
    /// Reads the model's descriptors through `host` (GET_DESCRIPTOR, traced like any transfer)
    /// and prepares to serve it.
    pub fn new(mut host: DeviceHost, opts: BridgeOptions) -> Result<Bridge, BridgeError> {
        let info = read_descriptors(&mut host).map_err(BridgeError::Descriptors)?;
        let d = info.device.clone();
        let n = info.configs.len() as u64;
        host.record("emulator", "usbredir", true, |r| {
            r.str("event", "descriptors")
                .hex("device", &d)
                .u64("configurations", n);
        });
        Ok(Bridge {
            host,
            caps: Caps::new(HOST_CAPS),
            framer: Framer::new(),
            out: Vec::new(),
            info,
            config: 0,
            alts: BTreeMap::new(),
            pending: Vec::new(),
            swallowed: BTreeMap::new(),
            interrupts: BTreeMap::new(),
            connected: false,
            hello_sent: false,
            stats: Stats::default(),
            activity: 0,
            plugged: !opts.defer_connect,
            configured_since_connect: false,
            awaiting_ack: false,
            marks_seen: 0,
            opts,
        })
    }

    /// The device host (the model, its trace and hash).
    pub fn host(&self) -> &DeviceHost {
        &self.host
    }

    /// The device host, mutably (to disconnect the device, read ground truth).
    pub fn host_mut(&mut self) -> &mut DeviceHost {
        &mut self.host
    }

    /// Gives the device host back.
    pub fn into_host(self) -> DeviceHost {
        self.host
    }

    /// The descriptors read from the model.
    pub fn info(&self) -> &DeviceInfo {
        &self.info
    }

    /// Counters so far.
    pub fn stats(&self) -> &Stats {
        &self.stats
    }

    /// The negotiated capabilities.
    pub fn caps(&self) -> &Caps {
        &self.caps
    }

    /// Whether the device is announced to the guest.
    pub fn is_connected(&self) -> bool {
        self.connected
    }

    /// A counter that moves whenever USB traffic crossed the socket (the watchdog's evidence
    /// of progress).
    pub fn activity(&self) -> u64 {
        self.activity
    }

    /// Whether an IN request or interrupt stream waits on the model (idle ticks help it).
    pub fn has_pending_input(&self) -> bool {
        !self.pending.is_empty() || !self.interrupts.is_empty()
    }

    /// Whether an idle tick would do anything now.
    pub fn wants_tick(&self) -> bool {
        self.connected && self.has_pending_input()
    }

    /// Plugs the device in: announces it now if the guest's hello has arrived, else as soon as
    /// it does. Only needed with `defer_connect`.
    pub fn plug_in(&mut self) {
        if self.plugged {
            return;
        }
        self.plugged = true;
        if self.caps.peer.is_some() && self.host.is_attached() && !self.connected {
            self.announce();
        }
    }

    /// Queues our hello; call once when the connection opens.
    pub fn start(&mut self) {
        if self.hello_sent {
            return;
        }
        self.hello_sent = true;
        let hello = Packet::Hello {
            version: self.opts.version.clone(),
            caps: vec![HOST_CAPS],
        };
        let v = self.opts.version.clone();
        self.host.record("emulator", "usbredir", true, |r| {
            r.str("dir", "out")
                .str("packet", "hello")
                .str("version", &v)
                .u64("caps", HOST_CAPS as u64);
        });
        self.send(0, hello, false);
    }

    /// The bytes queued for the guest, emptied.
    pub fn take_output(&mut self) -> Vec<u8> {
        std::mem::take(&mut self.out)
    }

    /// Feeds bytes from the guest and serves every whole packet. A malformed packet is traced
    /// and skipped; only a stream that cannot be framed any more is an error.
    pub fn feed(&mut self, bytes: &[u8]) -> Result<(), BridgeError> {
        self.framer.push(bytes);
        loop {
            let frame = match self.framer.next(&self.caps, false) {
                None => return Ok(()),
                Some(Err(e)) => {
                    let m = e.to_string();
                    self.host.record("emulator", "usbredir", false, |r| {
                        r.str("event", "stream_lost").str("error", &m);
                    });
                    return Err(BridgeError::Stream(e));
                }
                Some(Ok(f)) => f,
            };
            self.stats.packets_in += 1;
            self.activity += 1;
            let request = frame.ty != crate::proto::ty::HELLO
                && frame.ty != crate::proto::ty::CANCEL_DATA_PACKET;
            self.serve(frame);
            if request && self.opts.warp_after_request && self.connected {
                self.warp();
                self.retry_pending();
            }
            self.check_reenumerated();
        }
    }

    /// Disconnects the device (the model is unplugged) and tells the guest.
    pub fn disconnect(&mut self) {
        self.host.disconnect();
        self.check_attached();
    }

    /// Moves the model's clock by one idle step and offers pending INs again. The launcher
    /// calls this when the socket has been quiet for a while and an IN waits; the number of
    /// calls depends on host timing, so each is traced `deterministic:false` and counted.
    pub fn idle_tick(&mut self) {
        if !self.wants_tick() {
            return;
        }
        self.stats.idle_ticks += 1;
        let from = self.host.now();
        let t = self.warp();
        self.host.record("emulator", "usbredir", false, |r| {
            r.str("event", "idle_tick")
                .u64("from_ns", from)
                .u64("to_ns", t);
        });
        self.retry_pending();
        self.check_reenumerated();
    }

    /// Like QEMU's icount warp for an idle guest: jumps the model to its next event, in
    /// `idle_step_ns` steps, at most `idle_warp_ns`; returns the new time.
    fn warp(&mut self) -> Nanos {
        let from = self.host.now();
        let (_, before) = self.host.hash();
        let step = self.opts.idle_step_ns.max(1);
        let mut t = from;
        while t < from + self.opts.idle_warp_ns.max(step) {
            t += step;
            self.host.advance_to(t);
            if self.host.hash().1 != before {
                break;
            }
        }
        t
    }

    /// Total count of the re-enumeration marks reached so far.
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

    /// Unplugs and replugs the device for the guest when the model re-enumerated by itself.
    fn check_reenumerated(&mut self) {
        let n = self.reenumerate_count();
        if n == self.marks_seen {
            return;
        }
        self.marks_seen = n;
        if !self.connected || !self.host.is_attached() {
            return;
        }
        self.connected = false;
        self.pending.clear();
        self.interrupts.clear();
        self.swallowed.clear();
        self.host.record("emulator", "usbredir", true, |r| {
            r.str("event", "reenumerate")
                .str("packet", "device_disconnect");
        });
        self.send(0, Packet::DeviceDisconnect, false);
        match read_descriptors(&mut self.host) {
            Ok(info) => self.info = info,
            Err(e) => {
                self.host.record("emulator", "usbredir", true, |r| {
                    r.str("event", "reenumerate_failed").str("error", &e);
                });
                return;
            }
        }
        self.config = 0;
        self.alts.clear();
        if self.caps.both(crate::proto::CAP_DEVICE_DISCONNECT_ACK) {
            self.awaiting_ack = true;
        } else {
            self.announce();
        }
    }

    fn send(&mut self, id: u64, p: Packet, trace: bool) {
        if trace {
            let name = p.name();
            let detail = describe(&p);
            self.host.record("emulator", "usbredir", false, |r| {
                r.str("dir", "out")
                    .str("packet", name)
                    .u64("id", id)
                    .str("detail", &detail);
            });
        }
        self.out.extend_from_slice(&p.encode(id, &self.caps));
        self.stats.packets_out += 1;
    }

    /// Sends ep_info and interface_info for the active configuration (deterministic records:
    /// their content follows from the model's descriptors and the requests it served).
    fn send_tables(&mut self) {
        let alts = self.alts.clone();
        let (ep, ifs) = self
            .info
            .tables(self.config, |i| alts.get(&i).copied().unwrap_or(0));
        let types: Vec<String> = (0..32)
            .filter(|&i| ep.ty[i] != ep_type::INVALID)
            .map(|i| {
                format!(
                    "{:02x}:{}:{}",
                    crate::proto::index_ep(i),
                    ep.ty[i],
                    ep.max_packet_size[i]
                )
            })
            .collect();
        let config = self.config as u64;
        let count = ifs.count as u64;
        self.host.record("emulator", "usbredir", true, |r| {
            r.str("dir", "out")
                .str("packet", "ep_info+interface_info")
                .u64("configuration", config)
                .strs("endpoints", &types)
                .u64("interfaces", count);
        });
        self.send(0, Packet::EpInfo(Box::new(ep)), false);
        self.send(0, Packet::InterfaceInfo(Box::new(ifs)), false);
    }

    fn announce(&mut self) {
        let speed = self.opts.speed.unwrap_or_else(|| self.info.default_speed());
        let dc = self.info.connect(speed);
        self.send_tables();
        let (vid, pid) = (dc.vendor_id, dc.product_id);
        self.host.record("emulator", "usbredir", true, |r| {
            r.str("dir", "out")
                .str("packet", "device_connect")
                .u64("speed", speed as u64)
                .str("device", &format!("{vid:04x}:{pid:04x}"));
        });
        self.send(0, Packet::DeviceConnect(dc), false);
        self.connected = true;
        self.configured_since_connect = false;
    }

    fn check_attached(&mut self) {
        if self.connected && !self.host.is_attached() {
            self.connected = false;
            self.pending.clear();
            self.interrupts.clear();
            self.host.record("emulator", "usbredir", true, |r| {
                r.str("dir", "out").str("packet", "device_disconnect");
            });
            self.send(0, Packet::DeviceDisconnect, false);
        }
    }
}

/// A short human description of a packet for `emulator` records.
pub fn describe(p: &Packet) -> String {
    match p {
        Packet::Hello { version, caps } => format!("{version:?} caps {caps:x?}"),
        Packet::Control { header: h, data } => format!(
            "setup {:02x} {:02x} {:04x} {:04x} {:04x} status {} data {}",
            h.requesttype,
            h.request,
            h.value,
            h.index,
            h.length,
            h.status.name(),
            data.len()
        ),
        Packet::Bulk {
            endpoint,
            status,
            length,
            data,
            ..
        } => format!(
            "ep {endpoint:02x} len {length} status {} data {}",
            status.name(),
            data.len()
        ),
        Packet::Interrupt {
            endpoint,
            status,
            data,
            ..
        } => format!(
            "ep {endpoint:02x} status {} data {}",
            status.name(),
            data.len()
        ),
        Packet::SetConfiguration { configuration } => format!("configuration {configuration}"),
        Packet::ConfigurationStatus {
            status,
            configuration,
        } => format!("{} configuration {configuration}", status.name()),
        Packet::SetAltSetting { interface, alt } => format!("interface {interface} alt {alt}"),
        Packet::GetAltSetting { interface } => format!("interface {interface}"),
        Packet::AltSettingStatus {
            status,
            interface,
            alt,
        } => format!("{} interface {interface} alt {alt}", status.name()),
        Packet::StartInterruptReceiving { endpoint }
        | Packet::StopInterruptReceiving { endpoint } => format!("ep {endpoint:02x}"),
        Packet::InterruptReceivingStatus { status, endpoint } => {
            format!("{} ep {endpoint:02x}", status.name())
        }
        Packet::FilterFilter { rules } => rules.clone(),
        _ => String::new(),
    }
}

/// Reads the device descriptor and every configuration through the device host.
fn read_descriptors(host: &mut DeviceHost) -> Result<DeviceInfo, String> {
    let dev = host
        .control(get_descriptor(1, 0, 18), &[])
        .map_err(|e| format!("GET_DESCRIPTOR(device) failed: {e}"))?;
    let device = descriptors::parse_device(&dev)?;
    let n = device[17];
    let mut configs = Vec::new();
    for i in 0..n {
        let head = host
            .control(get_descriptor(2, i, 9), &[])
            .map_err(|e| format!("GET_DESCRIPTOR(configuration {i}, 9) failed: {e}"))?;
        if head.len() < 4 {
            return Err(format!(
                "configuration {i}: expected 9 bytes, the model returned {}",
                head.len()
            ));
        }
        let total = u16::from_le_bytes([head[2], head[3]]);
        let raw = host
            .control(get_descriptor(2, i, total), &[])
            .map_err(|e| format!("GET_DESCRIPTOR(configuration {i}, {total}) failed: {e}"))?;
        configs.push(descriptors::parse_config(&raw)?);
    }
    Ok(DeviceInfo { device, configs })
}
/// The usbredir transport: the loop feeds QEMU's `usb-redir` stream to the bridge.
impl crate::transport::Transport for Bridge {
    fn feed(&mut self, bytes: &[u8]) -> Result<(), String> {
        Bridge::feed(self, bytes).map_err(|e| e.to_string())
    }

    fn take_output(&mut self) -> Vec<u8> {
        Bridge::take_output(self)
    }

    fn activity(&self) -> u64 {
        Bridge::activity(self)
    }

    /// Console lines are `guest` records (not deterministic: see [`crate::launcher`]); the
    /// device is plugged in when `/init` starts (with `defer_connect`).
    fn console_line(&mut self, line: &str) {
        self.host_mut().record("guest", "guest", false, |r| {
            r.str("line", line);
        });
        if line.contains(crate::guest::marker::INIT) {
            self.plug_in();
        }
    }

    fn idle(&mut self) -> bool {
        if self.wants_tick() {
            self.idle_tick();
            true
        } else {
            false
        }
    }

    fn exited(&mut self, code: Option<i32>) {
        self.host_mut().record("emulator", "qemu", false, |r| {
            r.str("event", "exit")
                .i64("code", code.map(i64::from).unwrap_or(-1));
        });
    }

    fn host_mut(&mut self) -> &mut DeviceHost {
        Bridge::host_mut(self)
    }

    fn describe(&self) -> String {
        format!("usbredir {:?}", self.stats())
    }
}
