//! The stateful Trigger 6 model: a [`Device`] that answers control requests from the spec's
//! facts and its own state, receives DMA-framed payloads on bulk OUT into sparse VRAM, decodes
//! video headers into flips, and raises hotplug and fence-done interrupts on endpoint 0x83.
//!
//! Every change of state is announced with [`DevCtx::transition`] first; a refused transition
//! leaves the state as it was and stalls the request in progress. A request the spec has no
//! evidence for stalls and records a model gap. Nothing here reads the wall clock or iterates
//! a hash container.

use super::bulk::{
    self, DmaHeader, PixelFormat, VideoHeader, DMA_HEADER_LEN, FLAG_CONTINUE, INTERRUPT_LEN,
    SESSION_AUDIO, SESSION_DISPLAY, VIDEO_HEADER_LEN,
};
use super::facts::Facts;
use super::invariants::RamWrite;
use super::marks;
use super::timing::{Timing, RECORD_LEN};
use super::vram::Vram;
use crate::chapter9;
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use calametra_core::Error;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

/// A narrow, test-only lie the model can be told to tell, so each invariant's sabotage test can
/// show the invariant catches it. `None` in every real run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sabotage {
    /// `get_status` answers "connected" even when no monitor is there.
    StatusStuckConnected,
    /// `set_mode` accepts any 32-byte record, even one not in the timing table.
    AcceptAnyTiming,
    /// The byte at this VRAM address is stored with bit 0 flipped.
    FlipVramBit(u64),
    /// DMA writes past the VRAM size are stored instead of stalled.
    IgnoreVramBounds,
    /// `get_vram_size` reports this many MiB instead of the real size.
    ReportVramMib(u8),
}

/// A flip the model has decoded from a video header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlipInfo {
    /// The output flipped (0 primary, 1 secondary).
    pub output: u8,
    /// The fence signalled when it is shown.
    pub fence: u32,
    /// The target format code.
    pub format: u32,
    /// VRAM address of the Y (or RGB) plane.
    pub y_offset: u32,
    /// VRAM address of the UV plane (NV12).
    pub uv_offset: u32,
    /// Y (or RGB) line pitch in bytes.
    pub y_pitch: u16,
    /// UV line pitch in bytes.
    pub uv_pitch: u16,
    /// Counts flips in this run, from 1.
    pub serial: u64,
}

/// One output's flip state: the flip whose payload is still arriving and the one shown.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct FlipState {
    /// Header received, payload incomplete.
    pub pending: Option<FlipInfo>,
    /// Latched for scan-out.
    pub shown: Option<FlipInfo>,
}

/// A flip the dock showed: its decoded header and the DMA command that carried it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlipRecord {
    /// The flip (output, fence, format, planes, pitches, serial).
    pub flip: FlipInfo,
    /// VRAM address of the DMA payload (its video header).
    pub payload_addr: u32,
    /// Bytes of the DMA payload: the 48-byte video header and the data after it.
    pub payload_len: u32,
    /// The video header as received.
    pub header: VideoHeader,
    /// DMA fragments (header and data packet pairs) the payload came in.
    pub fragments: u32,
    /// Bulk OUT transfers its data came in.
    pub bulk_transfers: u32,
}

/// What the DMA receiver has taken since power-on: counts a comparison reports.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DmaStats {
    /// DMA headers (fragments) accepted, by session.
    pub fragments: BTreeMap<u32, u64>,
    /// Payloads (commands) completed, by session.
    pub payloads: BTreeMap<u32, u64>,
    /// Display-session data chunks written to VRAM.
    pub display_writes: u64,
    /// Display-session bytes written to VRAM.
    pub display_bytes: u64,
}

/// A frame decoded from VRAM: the planes of the shown flip, without pitch padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Pixels per line (the output mode's hactive).
    pub width: u32,
    /// Lines (the output mode's vactive).
    pub height: u32,
    /// The format shown.
    pub format: PixelFormat,
    /// NV12: the Y plane then the interleaved CbCr plane; RGB: one plane.
    pub planes: Vec<Vec<u8>>,
}

impl Frame {
    /// The (Y, Cb, Cr) of a pixel of an NV12 frame; `None` for other formats or outside.
    pub fn ycbcr(&self, x: u32, y: u32) -> Option<(u8, u8, u8)> {
        if self.format != PixelFormat::Nv12 || x >= self.width || y >= self.height {
            return None;
        }
        let luma = *self.planes.first()?.get((y * self.width + x) as usize)?;
        let uv = self.planes.get(1)?;
        let i = ((y / 2) * self.width + (x & !1)) as usize;
        Some((luma, *uv.get(i)?, *uv.get(i + 1)?))
    }
}

#[derive(Clone, Debug)]
struct Output {
    connected: bool,
    edid: Vec<u8>,
    hotplug_raised: u32,
    last_status: Option<bool>,
    mode: Option<[u8; RECORD_LEN]>,
    modeset_in_progress: bool,
    enabled: bool,
}

/// A DMA command being received (one per session).
#[derive(Clone, Debug)]
struct Command {
    payload_len: u32,
    payload_addr: u32,
    next_offset: u32,
    head: Vec<u8>,
    video: Option<Result<FlipInfo, String>>,
    fragments: u32,
    transfers: u32,
    last_transfer: u64,
}

#[derive(Clone, Debug)]
enum Rx {
    /// Collecting the bytes of a DMA header.
    Header(Vec<u8>),
    /// Receiving `hdr.packet_size` data bytes, `got` so far.
    Data { hdr: DmaHeader, got: u32 },
}

/// The Trigger 6 graphics function of the JCD543 dock.
pub struct Trigger6 {
    facts: Facts,
    address: u8,
    configuration: u8,
    outputs: [Output; 2],
    init: &'static str,
    ready: BTreeSet<u16>,
    luts: BTreeMap<u16, Vec<u8>>,
    replies: BTreeMap<super::facts::ReplyKey, Vec<u8>>,
    vram: Vram,
    rx: Rx,
    cmds: BTreeMap<u32, Command>,
    dma: DmaStats,
    flip_log: Vec<FlipRecord>,
    flips: [FlipState; 2],
    flip_serial: u64,
    completed_fences: Vec<u32>,
    interrupts: VecDeque<[u8; INTERRUPT_LEN]>,
    rejected_writes: Vec<RamWrite>,
    rejected: Vec<String>,
    out_transfers: u64,
    /// A test-only lie (see [`Sabotage`]); `None` in real runs.
    pub sabotage: Option<Sabotage>,
    pub(super) check_cache: RefCell<Option<(u64, u64, usize, usize)>>,
}

fn flip_machine(output: u8) -> &'static str {
    if output == 0 {
        "flip"
    } else {
        "flip_secondary"
    }
}

/// The state machine of a DMA session's receiver (the display session keeps the name it has
/// always had, so traces of display-only runs are unchanged).
fn dma_machine(sig: u32) -> &'static str {
    match sig {
        SESSION_DISPLAY => "dma",
        SESSION_AUDIO => "dma_audio",
        _ => "dma_other",
    }
}

fn out_machine(output: usize) -> &'static str {
    ["out0", "out1"][output.min(1)]
}

fn mode_machine(output: usize) -> &'static str {
    ["mode0", "mode1"][output.min(1)]
}

fn display_machine(output: usize) -> &'static str {
    ["display0", "display1"][output.min(1)]
}

impl Trigger6 {
    /// Builds the model from a spec; errors name the file and the field.
    pub fn try_from_spec(spec: &Spec) -> Result<Trigger6, Error> {
        let facts = Facts::from_spec(spec)?;
        let outputs = [0, 1].map(|o| Output {
            connected: facts.initial_connected[o],
            edid: facts.monitors[o].clone(),
            hotplug_raised: 0,
            last_status: None,
            mode: None,
            modeset_in_progress: false,
            enabled: false,
        });
        Ok(Trigger6 {
            replies: facts.replies.clone(),
            facts,
            address: 0,
            configuration: 0,
            outputs,
            init: "cold",
            ready: BTreeSet::new(),
            luts: BTreeMap::new(),
            vram: Vram::default(),
            rx: Rx::Header(Vec::new()),
            cmds: BTreeMap::new(),
            dma: DmaStats::default(),
            flip_log: Vec::new(),
            flips: [FlipState::default(); 2],
            flip_serial: 0,
            completed_fences: Vec::new(),
            interrupts: VecDeque::new(),
            rejected_writes: Vec::new(),
            rejected: Vec::new(),
            out_transfers: 0,
            sabotage: None,
            check_cache: RefCell::new(None),
        })
    }

    /// Builds the model from a spec; panics with the error's text (file and field) when the
    /// spec is malformed.
    pub fn from_spec(spec: &Spec) -> Trigger6 {
        match Trigger6::try_from_spec(spec) {
            Ok(m) => m,
            Err(e) => panic!("{e}"),
        }
    }

    // ----- ground truth, read-only -----

    /// The spec facts the model answers from.
    pub fn facts(&self) -> &Facts {
        &self.facts
    }

    /// Whether a monitor is on `output`.
    pub fn connected(&self, output: usize) -> bool {
        self.outputs.get(output).is_some_and(|o| o.connected)
    }

    /// Hotplug (connection change) interrupts raised for `output` so far.
    pub fn hotplug_raised(&self, output: usize) -> u32 {
        self.outputs.get(output).map_or(0, |o| o.hotplug_raised)
    }

    /// The 32-byte record of the mode set on `output`, if any.
    pub fn mode_bytes(&self, output: usize) -> Option<[u8; RECORD_LEN]> {
        self.outputs.get(output).and_then(|o| o.mode)
    }

    /// The mode set on `output`, decoded.
    pub fn mode(&self, output: usize) -> Option<Timing> {
        self.mode_bytes(output).and_then(|b| Timing::parse(&b))
    }

    /// Whether a modeset on `output` has not been finalised yet.
    pub fn modeset_in_progress(&self, output: usize) -> bool {
        self.outputs
            .get(output)
            .is_some_and(|o| o.modeset_in_progress)
    }

    /// Whether `set_monitor` turned `output` on.
    pub fn display_enabled(&self, output: usize) -> bool {
        self.outputs.get(output).is_some_and(|o| o.enabled)
    }

    /// The init state: `cold`, `low`, `high` or `finalised`.
    pub fn init_state(&self) -> &'static str {
        self.init
    }

    /// Whether `set_ready` was sent since power-on or the last reset.
    pub fn software_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// The flip state of `output`.
    pub fn flip_state(&self, output: usize) -> FlipState {
        self.flips.get(output).copied().unwrap_or_default()
    }

    /// Fence ids the model completed, in order.
    pub fn completed_fences(&self) -> &[u32] {
        &self.completed_fences
    }

    /// Every flip the dock showed, in order, with the DMA command that carried it.
    pub fn flip_log(&self) -> &[FlipRecord] {
        &self.flip_log
    }

    /// What the DMA receiver has taken: fragments and payloads by session, VRAM writes.
    pub fn dma_stats(&self) -> &DmaStats {
        &self.dma
    }

    /// Whether audio engine `engine` runs: the Activity word of the engine state the host last
    /// set (`aud_set_engine_state`, 0x24), as `aud_get_engine_state` (0xa4) returns it.
    pub fn audio_engine_running(&self, engine: u16) -> bool {
        self.replies
            .get(&(0xc0, 0xa4, 0, engine))
            .is_some_and(|d| d.iter().take(4).any(|b| *b != 0))
    }

    /// DMA sessions with a command still being received.
    pub fn dma_in_progress(&self) -> Vec<u32> {
        self.cmds.keys().copied().collect()
    }

    /// The VRAM size in bytes (from the spec, whatever `get_vram_size` may be told to say).
    pub fn vram_size(&self) -> u64 {
        self.facts.vram_bytes()
    }

    /// `len` bytes of VRAM at `addr`.
    pub fn vram_bytes(&self, addr: u64, len: usize) -> Vec<u8> {
        self.vram.read(addr, len)
    }

    /// The VRAM store itself (extent, generation, comparisons).
    pub fn vram(&self) -> &Vram {
        &self.vram
    }

    /// DMA writes the model refused because they reached past the VRAM size.
    pub fn rejected_writes(&self) -> &[RamWrite] {
        &self.rejected_writes
    }

    /// Every request the model refused (stalled) for a reason named in the spec, in order.
    pub fn rejected(&self) -> &[String] {
        &self.rejected
    }

    /// Interrupt packets waiting for the host.
    pub fn interrupts_pending(&self) -> usize {
        self.interrupts.len()
    }

    /// Decodes the frame shown on `output` from VRAM: the shown flip's planes at the output's
    /// mode size. `None` when nothing is shown or no mode is set. Reads the whole frame, so
    /// call it when you need the pixels, not on every step.
    pub fn shown_frame(&self, output: usize) -> Option<Frame> {
        let flip = self.flip_state(output).shown?;
        let mode = self.mode(output)?;
        let format = PixelFormat::from_code(flip.format)?;
        let (w, h) = (mode.hactive as u32, mode.vactive as u32);
        let mut planes = Vec::new();
        let line = format.line_bytes(w) as usize;
        let mut y = vec![0u8; line * h as usize];
        for r in 0..h as usize {
            let at = flip.y_offset as u64 + (r * flip.y_pitch as usize) as u64;
            self.vram.read_into(at, &mut y[r * line..(r + 1) * line]);
        }
        planes.push(y);
        if format == PixelFormat::Nv12 {
            let rows = h.div_ceil(2) as usize;
            let mut uv = vec![0u8; line * rows];
            for r in 0..rows {
                let at = flip.uv_offset as u64 + (r * flip.uv_pitch as usize) as u64;
                self.vram.read_into(at, &mut uv[r * line..(r + 1) * line]);
            }
            planes.push(uv);
        }
        Some(Frame {
            width: w,
            height: h,
            format,
            planes,
        })
    }

    /// A one-line summary of the state, for model gaps and messages.
    pub fn state_summary(&self) -> String {
        let o = |i: usize| {
            let x = &self.outputs[i];
            format!(
                "out{i} {}{}{}",
                if x.connected {
                    "connected"
                } else {
                    "disconnected"
                },
                if x.mode.is_some() { ", mode set" } else { "" },
                if x.enabled { ", on" } else { "" }
            )
        };
        format!(
            "init {}, {}, {}, {}, dma {}",
            self.init,
            if self.ready.is_empty() {
                "not ready"
            } else {
                "ready"
            },
            o(0),
            o(1),
            if self.cmds.is_empty() {
                "idle"
            } else {
                "receiving"
            }
        )
    }

    // ----- external events -----

    /// Plugs the spec's monitor for `output` into it (output 0: the HP X27q on HDMI; output 1:
    /// the HP X27q's DisplayPort EDID, the spec's second monitor): a connection change and a
    /// hotplug interrupt for that output (DisplayEvent 0x01 or 0x02). Returns whether the
    /// state changed.
    pub fn plug_monitor(&mut self, cx: &mut DevCtx<'_>, output: usize) -> bool {
        let Some(edid) = self.facts.monitors.get(output).cloned() else {
            return false;
        };
        self.plug_monitor_with_edid(cx, output, edid)
    }

    /// The EDID of the monitor on `output` (the last one plugged there), if one is connected.
    pub fn monitor_edid(&self, output: usize) -> Option<&[u8]> {
        self.outputs
            .get(output)
            .filter(|o| o.connected)
            .map(|o| o.edid.as_slice())
    }

    /// Plugs a monitor with this EDID into `output`. Returns whether the state changed.
    pub fn plug_monitor_with_edid(
        &mut self,
        cx: &mut DevCtx<'_>,
        output: usize,
        edid: Vec<u8>,
    ) -> bool {
        if output > 1 || self.outputs[output].connected {
            return false;
        }
        if !cx.transition(out_machine(output), "disconnected", "connected") {
            return false;
        }
        let o = &mut self.outputs[output];
        o.connected = true;
        o.edid = edid;
        self.raise_hotplug(output);
        true
    }

    /// Unplugs the monitor from `output`: a connection change and a hotplug interrupt. Marks
    /// `StaleStatusAfterDisconnect` when the last status reply for the output said connected.
    /// Returns whether the state changed.
    pub fn unplug_monitor(&mut self, cx: &mut DevCtx<'_>, output: usize) -> bool {
        if output > 1 || !self.outputs[output].connected {
            return false;
        }
        if !cx.transition(out_machine(output), "connected", "disconnected") {
            return false;
        }
        self.outputs[output].connected = false;
        if self.outputs[output].last_status == Some(true) {
            cx.mark(marks::STALE_STATUS_AFTER_DISCONNECT);
        }
        self.raise_hotplug(output);
        true
    }

    fn raise_hotplug(&mut self, output: usize) {
        self.outputs[output].hotplug_raised += 1;
        let ev = if output == 0 {
            bulk::EVENT_HOTPLUG_0
        } else {
            bulk::EVENT_HOTPLUG_1
        };
        self.interrupts.push_back(bulk::display_interrupt(ev, 0));
    }

    // ----- control -----

    fn gap(&self, cx: &mut DevCtx<'_>, setup: &Setup, why: &str) -> Reply {
        cx.model_gap(
            &format!(
                "control {:02x}/{:02x} wValue {:#06x} wIndex {:#06x} wLength {} ({why})",
                setup.request_type, setup.request, setup.value, setup.index, setup.length
            ),
            &self.state_summary(),
        );
        Reply::Stall
    }

    fn refuse(&mut self, cx: &mut DevCtx<'_>, what: String) -> Reply {
        cx.record("rejected", |d| {
            d.str("why", &what);
        });
        self.rejected.push(what);
        Reply::Stall
    }

    fn data(setup: &Setup, mut v: Vec<u8>) -> Reply {
        v.truncate(setup.length as usize);
        Reply::Data(v)
    }

    fn standard(&mut self, cx: &mut DevCtx<'_>, setup: &Setup) -> Reply {
        let [lo, hi] = setup.value.to_le_bytes();
        match (setup.request_type, setup.request) {
            (0x80, 6) => match hi {
                1 => Self::data(setup, self.facts.device.clone()),
                2 if lo == 0 => Self::data(setup, self.facts.configuration.clone()),
                0x0f => Self::data(setup, self.facts.bos.clone()),
                3 if lo == 0 => Self::data(setup, self.facts.strings[&0].clone()),
                3 => match self.facts.strings.get(&lo) {
                    Some(s) if self.facts.languages.contains(&setup.index) => {
                        Self::data(setup, s.clone())
                    }
                    _ => self.gap(cx, setup, "string descriptor not in the spec"),
                },
                // The descriptor set is the capture's, read whole; what USB itself says of a
                // descriptor it lacks is evidence enough for a stall, and no gap:
                // - bNumConfigurations is 1: no configuration at another index (USB 2.0 and
                //   USB 3.2 §9.4.3, a descriptor the device does not support is a Request Error);
                // - the capture shows a SuperSpeed device (bcdUSB 0x0310, bMaxPacketSize0 9):
                //   one operating at SuperSpeed answers GetDescriptor() for a device_qualifier or
                //   an other_speed_configuration with a Request Error (USB 3.2 §9.4.3, §9.6.2);
                // - the other standard types it lacks (debug, interface, endpoint, companion...),
                //   each with its clause in `chapter9`.
                2 | 6 | 7 => Reply::Stall,
                t if chapter9::absent_descriptor(t).is_some() => Reply::Stall,
                _ => self.gap(cx, setup, "descriptor type not in the spec"),
            },
            (0x80, 8) => Self::data(setup, vec![self.configuration]),
            (0x00, 5) => {
                let to = if setup.value == 0 {
                    "default"
                } else {
                    "addressed"
                };
                let from = if self.address == 0 {
                    "default"
                } else {
                    "addressed"
                };
                if from != to && !cx.transition("address", from, to) {
                    return Reply::Stall;
                }
                self.address = (setup.value & 0x7f) as u8;
                Reply::Ack
            }
            (0x00, 9) if setup.value <= 1 => {
                let name = |c: u8| if c == 0 { "unconfigured" } else { "configured" };
                let to = setup.value as u8;
                if to != self.configuration
                    && !cx.transition("config", name(self.configuration), name(to))
                {
                    return Reply::Stall;
                }
                self.configuration = to;
                Reply::Ack
            }
            (0x01, 11) if setup.index == 0 && setup.value == 0 => Reply::Ack,
            (0x81, 10) if setup.index == 0 => Self::data(setup, vec![0]),
            (0x80..=0x82, 0) => Self::data(setup, vec![0, 0]),
            // SET_FEATURE U1/U2 enable (in the capture) and endpoint halt; CLEAR_FEATURE.
            (0x00 | 0x02, 1 | 3) => Reply::Ack,
            // USB 3 SET_SEL and SET_ISOCH_DELAY (in the capture).
            (0x00, 0x30) | (0x00, 0x31) => Reply::Ack,
            _ => self.gap(cx, setup, "standard request not in the spec"),
        }
    }

    fn output_of(&self, v: u16) -> Option<usize> {
        (v < 2).then_some(v as usize)
    }

    fn vendor(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            (0xc0, 0x88) => {
                let mib = match self.sabotage {
                    Some(Sabotage::ReportVramMib(m)) => m,
                    _ => self.facts.vram_mib,
                };
                Self::data(setup, vec![mib])
            }
            (0x40, 0x14) => self.cancel_bulk_out(cx),
            (0xc0, 0x87) => {
                let Some(o) = self.output_of(setup.value) else {
                    return self.gap(cx, setup, "no such output");
                };
                let mut c = self.outputs[o].connected;
                if self.sabotage == Some(Sabotage::StatusStuckConnected) {
                    c = true;
                }
                self.outputs[o].last_status = Some(c);
                Self::data(setup, vec![c as u8])
            }
            (0xc0, 0x80) => {
                let Some(o) = self.output_of(setup.index) else {
                    return self.gap(cx, setup, "no such output");
                };
                let out = &self.outputs[o];
                let at = setup.value as usize;
                if !out.connected {
                    return self.refuse(cx, format!("get_edid on output {o}: no monitor"));
                }
                if at >= out.edid.len() {
                    return self.refuse(
                        cx,
                        format!("get_edid at {at}: the EDID has {} bytes", out.edid.len()),
                    );
                }
                let end = (at + setup.length as usize).min(out.edid.len());
                Self::data(setup, out.edid[at..end].to_vec())
            }
            (0xc0, 0x84) => {
                let Some(o) = self.output_of(setup.value) else {
                    return self.gap(cx, setup, "no such output");
                };
                let n = self.facts.tables[o].len() as u32;
                Self::data(setup, n.to_le_bytes().to_vec())
            }
            (0xc0, 0x89) => {
                let Some(o) = self.output_of(setup.value) else {
                    return self.gap(cx, setup, "no such output");
                };
                let table = &self.facts.tables[o];
                let total = table.len() * RECORD_LEN;
                let at = (setup.index as usize).min(total);
                let end = (at + setup.length as usize).min(total);
                let mut v = Vec::with_capacity(end - at);
                for i in at..end {
                    v.push(table[i / RECORD_LEN][i % RECORD_LEN]);
                }
                Reply::Data(v)
            }
            (0x40, 0x1c) => {
                let to = match setup.value {
                    0x0000 => "low",
                    0x0100 => "high",
                    0x0002 => "finalised",
                    _ => return self.gap(cx, setup, "init value not in the capture"),
                };
                if to != self.init && !cx.transition("init", self.init, to) {
                    return Reply::Stall;
                }
                self.init = to;
                if to == "finalised" {
                    for o in &mut self.outputs {
                        o.modeset_in_progress = false;
                    }
                }
                Reply::Ack
            }
            (0x40, 0x1d) => {
                if !matches!(setup.index, 0x100 | 0x200 | 0x400) {
                    return self.gap(cx, setup, "LUT channel not in the capture");
                }
                if data.len() != 256 {
                    return self.refuse(cx, format!("set_lut with {} bytes, not 256", data.len()));
                }
                if self.luts.is_empty() && !cx.transition("lut", "default", "loaded") {
                    return Reply::Stall;
                }
                self.luts.insert(setup.index, data.to_vec());
                Reply::Ack
            }
            (0x40, 0x30) => self.hardware_reset(cx),
            (0x40, 0x12) => self.set_mode(cx, setup, data),
            (0x40, 0x31) => {
                if self.ready.is_empty() && !cx.transition("ready", "off", "on") {
                    return Reply::Stall;
                }
                self.ready.insert(setup.value);
                Reply::Ack
            }
            (0x40, 0x03) => {
                let Some(o) = self.output_of(setup.value) else {
                    return self.gap(cx, setup, "no such output");
                };
                let on = match setup.index {
                    0 => false,
                    1 => true,
                    _ => return self.gap(cx, setup, "monitor control other than 0/1"),
                };
                let name = |b: bool| if b { "on" } else { "off" };
                if on != self.outputs[o].enabled
                    && !cx.transition(display_machine(o), name(!on), name(on))
                {
                    return Reply::Stall;
                }
                self.outputs[o].enabled = on;
                Reply::Ack
            }
            (0x40, 0x24) => {
                // The audio engine state that aud_get_engine_state (0xa4) returns; its first
                // word is the engine's Activity (the capture starts it after the modeset).
                let key = (0xc0, 0xa4, 0, setup.index);
                let active = |d: &[u8]| d.iter().take(4).any(|b| *b != 0);
                let was = self.replies.get(&key).is_some_and(|d| active(d));
                let now = active(data);
                let machine = if setup.index == 0 { "audio0" } else { "audio1" };
                let name = |a: bool| if a { "running" } else { "stopped" };
                if was != now && !cx.transition(machine, name(was), name(now)) {
                    return Reply::Stall;
                }
                self.replies.insert(key, data.to_vec());
                Reply::Ack
            }
            (0x40, 0x23) => {
                // The node value that aud_get_node_value (0xa3) returns.
                self.replies
                    .insert((0xc0, 0xa3, setup.value, setup.index), data.to_vec());
                Reply::Ack
            }
            (ty, req) => {
                let key = (ty, req, setup.value, setup.index);
                if let Some(r) = self.replies.get(&key) {
                    return Self::data(setup, r.clone());
                }
                if self.facts.acked_out.contains(&(ty, req)) {
                    return Reply::Ack;
                }
                self.gap(cx, setup, "request not in the spec")
            }
        }
    }

    fn set_mode(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        let Some(o) = self.output_of(setup.value) else {
            return self.gap(cx, setup, "no such output");
        };
        let Some(t) = Timing::parse(data) else {
            return self.refuse(cx, format!("set_mode with {} bytes, not 32", data.len()));
        };
        let known = self.facts.tables[o]
            .iter()
            .filter_map(|r| Timing::parse(r))
            .any(|r| r.same_geometry(&t));
        if !known && self.sabotage != Some(Sabotage::AcceptAnyTiming) {
            return self.refuse(
                cx,
                format!("set_mode on output {o}: {t} is not in the output's timing table"),
            );
        }
        let from = if self.outputs[o].mode.is_some() {
            "set"
        } else {
            "unset"
        };
        if !cx.transition(mode_machine(o), from, "set") {
            return Reply::Stall;
        }
        let mut b = [0u8; RECORD_LEN];
        b.copy_from_slice(data);
        self.outputs[o].mode = Some(b);
        self.outputs[o].modeset_in_progress = true;
        if self.flips[o].pending.is_some() {
            cx.mark(marks::FLIP_DURING_MODESET);
        }
        Reply::Ack
    }

    fn hardware_reset(&mut self, cx: &mut DevCtx<'_>) -> Reply {
        if !cx.transition("init", self.init, "cold") {
            return Reply::Stall;
        }
        self.init = "cold";
        self.ready.clear();
        self.luts.clear();
        for o in &mut self.outputs {
            o.mode = None;
            o.modeset_in_progress = false;
            o.enabled = false;
        }
        self.flips = [FlipState::default(); 2];
        self.cmds.clear();
        self.rx = Rx::Header(Vec::new());
        Reply::Ack
    }

    fn cancel_bulk_out(&mut self, cx: &mut DevCtx<'_>) -> Reply {
        let sessions: Vec<u32> = self.cmds.keys().copied().collect();
        for sig in sessions {
            if !self.drop_command(cx, sig) {
                return Reply::Stall;
            }
        }
        self.rx = Rx::Header(Vec::new());
        Reply::Ack
    }

    /// Drops the DMA command in progress on session `sig` and its pending flip. `false` when a
    /// transition was refused (nothing changed).
    fn drop_command(&mut self, cx: &mut DevCtx<'_>, sig: u32) -> bool {
        if !self.cmds.contains_key(&sig) {
            return true;
        }
        if !cx.transition(dma_machine(sig), "receiving", "idle") {
            return false;
        }
        if let Some(Some(Ok(flip))) = self.cmds.get(&sig).map(|c| c.video.clone()) {
            let o = flip.output as usize;
            if self.flips[o].pending.is_some()
                && cx.transition(flip_machine(flip.output), "pending", "cancelled")
            {
                self.flips[o].pending = None;
            }
        }
        self.cmds.remove(&sig);
        self.rx = Rx::Header(Vec::new());
        true
    }

    // ----- bulk OUT -----

    /// A framing error on session `sig` (`None` or an unknown session: the stream itself).
    /// The command of that session is dropped (of every session when the stream lost its
    /// framing), and the receiver waits for a new header.
    fn framing_error(&mut self, cx: &mut DevCtx<'_>, sig: Option<u32>, why: String) -> Reply {
        let sessions: Vec<u32> = match sig {
            Some(s) if s == SESSION_DISPLAY || s == SESSION_AUDIO => vec![s],
            _ => self.cmds.keys().copied().collect(),
        };
        for s in sessions {
            self.drop_command(cx, s);
        }
        self.rx = Rx::Header(Vec::new());
        self.refuse(cx, why)
    }

    /// A complete DMA header arrived.
    fn accept_header(&mut self, cx: &mut DevCtx<'_>, h: DmaHeader) -> Result<(), String> {
        if h.signature != SESSION_DISPLAY && h.signature != SESSION_AUDIO {
            return Err(format!(
                "bulk: DMA session {:#x} is not modelled (display 0, audio 3)",
                h.signature
            ));
        }
        if h.packet_size == 0
            || h.packet_offset as u64 + h.packet_size as u64 > h.payload_len as u64
        {
            return Err(format!(
                "bulk: fragment {:#x}+{:#x} does not fit the payload of {:#x} bytes",
                h.packet_offset, h.packet_size, h.payload_len
            ));
        }
        let end = h.payload_addr as u64 + h.payload_len as u64;
        if h.signature == SESSION_DISPLAY
            && end > self.vram_size()
            && self.sabotage != Some(Sabotage::IgnoreVramBounds)
        {
            self.rejected_writes.push(RamWrite {
                addr: h.payload_addr as u64,
                len: h.payload_len as u64,
            });
            return Err(format!(
                "bulk: a write of {:#x} bytes at {:#x} reaches past the VRAM end {:#x}",
                h.payload_len,
                h.payload_addr,
                self.vram_size()
            ));
        }
        // Each session has its own command in progress: the capture interleaves audio
        // commands (session 3) between the fragments of a frame (session 0).
        match self.cmds.get(&h.signature) {
            Some(c) => {
                if c.payload_len != h.payload_len
                    || c.payload_addr != h.payload_addr
                    || c.next_offset != h.packet_offset
                {
                    return Err(format!(
                        "bulk: fragment at {:#x} of {:#x} bytes for {:#x} does not continue the command in progress (next {:#x} of {:#x} for {:#x})",
                        h.packet_offset, h.payload_len, h.payload_addr, c.next_offset, c.payload_len, c.payload_addr
                    ));
                }
            }
            None => {
                if h.packet_offset != 0 {
                    return Err(format!(
                        "bulk: a command starts with a fragment at offset {:#x}",
                        h.packet_offset
                    ));
                }
                if !cx.transition(dma_machine(h.signature), "idle", "receiving") {
                    self.rx = Rx::Header(Vec::new());
                    return Err("bulk: refused".into());
                }
                self.cmds.insert(
                    h.signature,
                    Command {
                        payload_len: h.payload_len,
                        payload_addr: h.payload_addr,
                        next_offset: 0,
                        head: Vec::new(),
                        video: None,
                        fragments: 0,
                        transfers: 0,
                        last_transfer: 0,
                    },
                );
            }
        }
        if let Some(c) = self.cmds.get_mut(&h.signature) {
            c.fragments += 1;
        }
        *self.dma.fragments.entry(h.signature).or_default() += 1;
        self.rx = Rx::Data { hdr: h, got: 0 };
        Ok(())
    }

    /// Data bytes of the command in progress on session `sig`, at `offset` inside its
    /// payload.
    fn accept_data(
        &mut self,
        cx: &mut DevCtx<'_>,
        sig: u32,
        offset: u32,
        chunk: &[u8],
    ) -> Result<(), String> {
        let transfer = self.out_transfers;
        let Some(c) = self.cmds.get_mut(&sig) else {
            return Err("bulk: data without a command".into());
        };
        if c.last_transfer != transfer {
            c.last_transfer = transfer;
            c.transfers += 1;
        }
        if sig != SESSION_DISPLAY {
            return Ok(()); // audio PCM is accepted and not modelled
        }
        let addr = c.payload_addr as u64 + offset as u64;
        if let Some(Sabotage::FlipVramBit(bad)) = self.sabotage {
            if bad >= addr && bad < addr + chunk.len() as u64 {
                let mut v = chunk.to_vec();
                v[(bad - addr) as usize] ^= 1;
                self.vram.write(addr, &v);
            } else {
                self.vram.write(addr, chunk);
            }
        } else {
            self.vram.write(addr, chunk);
        }
        self.dma.display_writes += 1;
        self.dma.display_bytes += chunk.len() as u64;
        let c = self.cmds.get_mut(&sig).ok_or("bulk: command vanished")?;
        if (offset as usize) < VIDEO_HEADER_LEN && c.head.len() == offset as usize {
            let n = (VIDEO_HEADER_LEN - c.head.len()).min(chunk.len());
            c.head.extend_from_slice(&chunk[..n]);
            if c.head.len() == VIDEO_HEADER_LEN {
                let mut b = [0u8; VIDEO_HEADER_LEN];
                b.copy_from_slice(&c.head);
                let v = VideoHeader::parse(&b);
                let decoded = self.decode_flip(&v);
                if let Ok(flip) = decoded {
                    let o = flip.output as usize;
                    let from = if self.flips[o].shown.is_some() {
                        "shown"
                    } else {
                        "idle"
                    };
                    if !cx.transition(flip_machine(flip.output), from, "pending") {
                        if let Some(c) = self.cmds.get_mut(&sig) {
                            c.video = Some(Err("flip refused".into()));
                        }
                        return Err("bulk: flip refused".into());
                    }
                    self.flips[o].pending = Some(flip);
                    if self.outputs[o].modeset_in_progress {
                        cx.mark(marks::FLIP_DURING_MODESET);
                    }
                }
                if let Some(c) = self.cmds.get_mut(&sig) {
                    c.video = Some(decoded);
                }
            }
        }
        Ok(())
    }

    fn decode_flip(&mut self, v: &VideoHeader) -> Result<FlipInfo, String> {
        let output = match v.command {
            bulk::CMD_FLIP_PRIMARY => 0,
            bulk::CMD_FLIP_SECONDARY => 1,
            c => {
                return Err(format!(
                    "video command {c} is not modelled (3 flip primary, 4 flip secondary)"
                ))
            }
        };
        if PixelFormat::from_code(v.target_format).is_none() || v.source_format != v.target_format {
            return Err(format!(
                "video formats {} -> {} are not modelled (NV12 6, RGB32 8, RGB24 9, unconverted)",
                v.source_format, v.target_format
            ));
        }
        self.flip_serial += 1;
        Ok(FlipInfo {
            output,
            fence: v.fence,
            format: v.target_format,
            y_offset: v.y_offset,
            uv_offset: v.uv_offset,
            y_pitch: v.y_pitch,
            uv_pitch: v.uv_pitch,
            serial: self.flip_serial,
        })
    }

    /// The last fragment of the command of session `sig` arrived.
    fn finish_command(&mut self, cx: &mut DevCtx<'_>, sig: u32) -> Result<(), String> {
        let Some(c) = self.cmds.get(&sig).cloned() else {
            return Ok(());
        };
        if !cx.transition(dma_machine(sig), "receiving", "idle") {
            return Err("bulk: refused".into());
        }
        self.cmds.remove(&sig);
        self.rx = Rx::Header(Vec::new());
        *self.dma.payloads.entry(sig).or_default() += 1;
        if sig != SESSION_DISPLAY {
            return Ok(());
        }
        if c.fragments > 1 || c.transfers > 1 {
            cx.mark(marks::FRAGMENTED_FRAME);
        }
        let flip = match c.video {
            None => {
                return Err(format!(
                    "bulk: a display payload of {} bytes is shorter than a video header",
                    c.payload_len
                ))
            }
            Some(Err(e)) => return Err(format!("bulk: {e}")),
            Some(Ok(f)) => f,
        };
        let o = flip.output as usize;
        if self.flips[o].pending != Some(flip) {
            return Ok(());
        }
        if !cx.transition(flip_machine(flip.output), "pending", "shown") {
            return Err("bulk: flip refused".into());
        }
        self.flips[o].pending = None;
        self.flips[o].shown = Some(flip);
        if self.outputs[o].modeset_in_progress {
            cx.mark(marks::FLIP_DURING_MODESET);
        }
        let mut h = [0u8; VIDEO_HEADER_LEN];
        h.copy_from_slice(&c.head);
        self.flip_log.push(FlipRecord {
            flip,
            payload_addr: c.payload_addr,
            payload_len: c.payload_len,
            header: VideoHeader::parse(&h),
            fragments: c.fragments,
            bulk_transfers: c.transfers,
        });
        self.completed_fences.push(flip.fence);
        self.interrupts
            .push_back(bulk::display_interrupt(bulk::EVENT_FENCE_DONE, flip.fence));
        Ok(())
    }

    fn bulk_out(&mut self, cx: &mut DevCtx<'_>, data: &[u8]) -> Reply {
        self.out_transfers += 1;
        let mut rest = data;
        loop {
            if let Rx::Data { hdr, got } = self.rx {
                if got == hdr.packet_size {
                    let next = hdr.packet_offset + hdr.packet_size;
                    if let Some(c) = self.cmds.get_mut(&hdr.signature) {
                        c.next_offset = next;
                    }
                    if hdr.flags & FLAG_CONTINUE == 0 {
                        if next != hdr.payload_len {
                            return self.framing_error(
                                cx,
                                Some(hdr.signature),
                                format!("bulk: last fragment ends at {next:#x}, the payload has {:#x} bytes", hdr.payload_len),
                            );
                        }
                        if let Err(e) = self.finish_command(cx, hdr.signature) {
                            return self.refuse(cx, e);
                        }
                    } else {
                        self.rx = Rx::Header(Vec::new());
                    }
                    continue;
                }
            }
            if rest.is_empty() {
                return Reply::Ack;
            }
            match std::mem::replace(&mut self.rx, Rx::Header(Vec::new())) {
                Rx::Header(mut buf) => {
                    let n = (DMA_HEADER_LEN - buf.len()).min(rest.len());
                    buf.extend_from_slice(&rest[..n]);
                    rest = &rest[n..];
                    if buf.len() < DMA_HEADER_LEN {
                        self.rx = Rx::Header(buf);
                        continue;
                    }
                    let mut b = [0u8; DMA_HEADER_LEN];
                    b.copy_from_slice(&buf);
                    let h = DmaHeader::parse(&b);
                    if let Err(e) = self.accept_header(cx, h) {
                        return self.framing_error(cx, Some(h.signature), e);
                    }
                }
                Rx::Data { hdr, got } => {
                    let n = ((hdr.packet_size - got) as usize).min(rest.len());
                    self.rx = Rx::Data {
                        hdr,
                        got: got + n as u32,
                    };
                    if let Err(e) =
                        self.accept_data(cx, hdr.signature, hdr.packet_offset + got, &rest[..n])
                    {
                        return self.refuse(cx, e);
                    }
                    rest = &rest[n..];
                }
            }
        }
    }
}

impl std::fmt::Debug for Trigger6 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Trigger6({})", self.state_summary())
    }
}

impl Device for Trigger6 {
    fn name(&self) -> &str {
        &self.facts.name
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        let key = (setup.request_type, setup.request);
        if self.facts.stalls.contains(&key) {
            return Reply::Stall; // the capture shows this request stalling
        }
        match setup.request_type & 0x60 {
            0x00 => self.standard(cx, setup),
            0x40 => self.vendor(cx, setup, data),
            _ => self.gap(cx, setup, "class request"),
        }
    }

    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        if ep != self.facts.bulk_out_ep {
            cx.model_gap(&format!("out ep {ep:#04x}"), &self.state_summary());
            return Reply::Stall;
        }
        self.bulk_out(cx, data)
    }

    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        if ep == self.facts.interrupt_ep {
            return match self.interrupts.pop_front() {
                Some(p) => {
                    let mut v = p.to_vec();
                    v.truncate(max_len);
                    Reply::Data(v)
                }
                None => Reply::Nak,
            };
        }
        cx.model_gap(
            &format!("in ep {ep:#04x}"),
            "the capture shows no data on this endpoint",
        );
        Reply::Stall
    }

    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        if self.configuration != 0 && cx.transition("config", "configured", "unconfigured") {
            self.configuration = 0;
        }
        if self.address != 0 && cx.transition("address", "addressed", "default") {
            self.address = 0;
        }
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        let key = (setup.request_type, setup.request);
        if key == (0x40, 0x1c) && setup.value == 2 {
            return Some(&self.facts.finalise_name);
        }
        self.facts.names.get(&key).map(|s| s.as_str())
    }

    fn pictures(&self) -> Vec<String> {
        self.picture_names()
    }

    fn picture(&self, name: &str) -> Option<calametra_core::picture::Picture> {
        self.render_picture(name)
    }
}
