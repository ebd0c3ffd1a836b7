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
use super::marks;
use super::timing::{Timing, RECORD_LEN};
use super::vram::Vram;
use crate::chapter9;
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use calametra_core::Error;
use std::cell::RefCell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};

mod control;
mod dma;

/// A region of VRAM a driver wrote (or believes it wrote).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RamWrite {
    /// First byte.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

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
