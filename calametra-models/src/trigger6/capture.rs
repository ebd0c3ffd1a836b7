//! Comparing the Trigger 6 model with a real capture (DESIGN.md section 10): the whole capture
//! replayed in the order the dock saw it ([`calametra_capture::compare::compare_all`]): control
//! transfers, the Windows driver's bulk OUT stream (DMA headers and data, display and audio
//! sessions) and the dock's interrupt IN packets; its monitor hot-plug scripted in at capture
//! time, and every difference named from the model's state or left unexplained.
//!
//! On top of the core's per-transfer verdicts, [`Comparison`] reports what the dock made of the
//! bulk stream ([`BulkPath`]: DMA commands accepted by session, payloads completed, VRAM writes
//! and their bounds) and every frame a flip showed ([`ShownFrame`]: size, format, pitch, fence,
//! the decoded pixels' hash), each of which can be written as a PNG.

use super::bulk::{
    parse_interrupt, DisplayEvent, PixelFormat, FUNC_DISPLAY, SESSION_AUDIO, SESSION_DISPLAY,
};
use super::model::FlipRecord;
use super::scanout::Scanout;
use super::Trigger6;
use calametra_capture::compare::{
    self, DataEntry, DataVerdict, Explain, Options, Reason, Report, Scripted, Verdict,
};
use calametra_capture::{Capture, ControlTransfer, DataTransfer, Status, XferType};
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_core::usb::{Device, Setup};
use calametra_core::RunConfig;
use std::collections::BTreeMap;
use std::fmt;
use std::path::PathBuf;

/// The capture's interrupt IN packet that reports a hot-plug on output 0.
fn hotplug(data: &[DataTransfer]) -> Option<&DataTransfer> {
    data.iter().find(|d| {
        d.xfer == XferType::Interrupt
            && d.status == Status::Ok
            && parse_interrupt(&d.data).contains(&DisplayEvent::Hotplug(0))
    })
}

/// The model as a comparison drives it: a Trigger 6 with the capture's events scripted in.
pub type Model = Scripted<Trigger6>;

/// How to compare.
#[derive(Clone, Debug)]
pub struct CompareOptions {
    /// Plug the capture's monitor (the spec's `capture_monitor`) into output 0 at the capture
    /// time of its hot-plug report; without it, the differences that hot-plug explains are
    /// named `hotplug_not_replayed`.
    pub replay_hotplug: bool,
    /// Write each frame a flip showed as a PNG into this directory (created if missing).
    pub frames_dir: Option<PathBuf>,
}

impl Default for CompareOptions {
    fn default() -> Self {
        CompareOptions {
            replay_hotplug: true,
            frames_dir: None,
        }
    }
}

/// A frame the model showed during the replay: the flip, where in the capture it completed,
/// and the picture.
#[derive(Clone, Debug)]
pub struct ShownFrame {
    /// The flip and the DMA command that carried it.
    pub record: FlipRecord,
    /// The capture record (packet) of the bulk OUT that completed it.
    pub capture_record: usize,
    /// Its capture time, microseconds.
    pub t_us: i64,
    /// Pixels per line of the picture (the output's mode).
    pub width: u32,
    /// Lines of the picture.
    pub height: u32,
    /// The format decoded.
    pub format: PixelFormat,
    /// SHA-256 of the decoded RGB pixels ([`Scanout::sha256`]).
    pub sha256: String,
    /// The PNG written, when asked for.
    pub png: Option<PathBuf>,
}

impl fmt::Display for ShownFrame {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let r = &self.record;
        let h = &r.header;
        write!(
            f,
            "fence {} out{}: {} {}x{}, pitch {}",
            r.flip.fence,
            r.flip.output,
            self.format.name().to_uppercase(),
            self.width,
            self.height,
            h.y_pitch
        )?;
        if self.format == PixelFormat::Nv12 {
            write!(f, "/{} (UV at {:#x})", h.uv_pitch, h.uv_offset)?;
        }
        write!(
            f,
            ", plane at {:#x}; payload {:#x} bytes at {:#x} ({} header + {} data) in {} \
             fragments; shown at packet {}; pixels sha256 {}",
            h.y_offset,
            r.payload_len,
            r.payload_addr,
            super::bulk::VIDEO_HEADER_LEN,
            h.payload_size,
            r.fragments,
            self.capture_record,
            self.sha256
        )?;
        if let Some(p) = &self.png {
            write!(f, "; {}", p.display())?;
        }
        Ok(())
    }
}

/// What the dock's DMA receiver made of the capture's bulk OUT stream.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct BulkPath {
    /// DMA commands (a 32-byte header and its data packet) accepted, by session.
    pub commands: BTreeMap<u32, u64>,
    /// Payloads completed (last fragment received), by session.
    pub payloads: BTreeMap<u32, u64>,
    /// Display data chunks written to VRAM.
    pub ram_writes: u64,
    /// Display bytes written to VRAM.
    pub ram_bytes: u64,
    /// One past the highest VRAM byte written.
    pub ram_extent: u64,
    /// The VRAM size.
    pub vram_size: u64,
    /// DMA writes refused for reaching past the VRAM.
    pub ram_refused: usize,
    /// Requests the model refused (stalled) for a reason named in the spec.
    pub refused: Vec<String>,
    /// Sessions with a command still half-received at the end.
    pub in_progress: Vec<u32>,
    /// Bulk OUT transfers during which the model recorded a model gap.
    pub model_gaps: usize,
}

impl BulkPath {
    /// All DMA commands accepted.
    pub fn total_commands(&self) -> u64 {
        self.commands.values().sum()
    }

    /// Whether every VRAM write stayed inside the VRAM and none was refused.
    pub fn ram_in_bounds(&self) -> bool {
        self.ram_extent <= self.vram_size && self.ram_refused == 0
    }
}

fn session_name(sig: u32) -> String {
    match sig {
        SESSION_DISPLAY => "display (session 0)".into(),
        SESSION_AUDIO => "audio (session 3)".into(),
        s => format!("session {s}"),
    }
}

impl fmt::Display for BulkPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let list = |m: &BTreeMap<u32, u64>| {
            m.iter()
                .map(|(s, n)| format!("{n} {}", session_name(*s)))
                .collect::<Vec<_>>()
                .join(", ")
        };
        writeln!(
            f,
            "bulk commands accepted: {} ({}); payloads completed: {} ({}); {}; {} model gaps",
            self.total_commands(),
            list(&self.commands),
            self.payloads.values().sum::<u64>(),
            list(&self.payloads),
            if self.in_progress.is_empty() {
                "none left half-received".to_string()
            } else {
                format!("half-received at the end: sessions {:?}", self.in_progress)
            },
            self.model_gaps
        )?;
        write!(
            f,
            "RAM writes: {} display chunks, {} bytes, {} (highest byte {:#x} of {} MiB of VRAM), \
             {} refused",
            self.ram_writes,
            self.ram_bytes,
            if self.ram_in_bounds() {
                "all in bounds"
            } else {
                "OUT OF BOUNDS"
            },
            self.ram_extent.saturating_sub(1),
            self.vram_size >> 20,
            self.ram_refused
        )?;
        for r in &self.refused {
            write!(f, "\nrefused: {r}")?;
        }
        Ok(())
    }
}

/// The result of comparing the model with a capture.
pub struct Comparison {
    /// The per-transfer verdicts: control, bulk and interrupt.
    pub report: Report,
    /// What the DMA receiver made of the bulk stream.
    pub bulk: BulkPath,
    /// The frames flips showed, in order.
    pub frames: Vec<ShownFrame>,
    /// The host, with the model in its final state.
    pub host: DeviceHost,
}

impl Comparison {
    /// Whether every transfer is the same, skipped for a stated reason, or explained, every
    /// VRAM write stayed in bounds and no DMA command was left half-received.
    pub fn is_clean(&self) -> bool {
        self.report.is_clean() && self.bulk.ram_in_bounds() && self.bulk.in_progress.is_empty()
    }

    /// The model at the end.
    pub fn model(&self) -> Option<&Trigger6> {
        self.host.device::<Model>().map(|m| m.inner())
    }
}

impl fmt::Display for Comparison {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.report)?;
        writeln!(f, "{}", self.bulk)?;
        writeln!(f, "frames reassembled and flipped: {}", self.frames.len())?;
        for fr in &self.frames {
            writeln!(f, "  {fr}")?;
        }
        Ok(())
    }
}

/// What a comparison calls with each frame shown and its picture.
type OnFrame = Box<dyn FnMut(&ShownFrame, &Scanout)>;

/// What the Trigger 6 model says about a difference, and what it watches during the replay.
struct Trigger6Explain {
    /// Capture time of the hot-plug report, microseconds.
    hotplug_us: i64,
    /// Its record (packet number) in the capture.
    hotplug_record: usize,
    /// The first control transfer's time, microseconds.
    origin_us: i64,
    /// Flips of the model's log already reported.
    flips_seen: usize,
    /// The frames shown so far.
    frames: Vec<ShownFrame>,
    /// Where to write them.
    frames_dir: Option<PathBuf>,
    /// The first error writing one.
    write_error: Option<String>,
    /// Called with each frame and its picture.
    on_frame: OnFrame,
}

impl Trigger6Explain {
    fn plugged_at(&self) -> String {
        format!(
            "+{:.6} s (interrupt IN, packet {})",
            (self.hotplug_us - self.origin_us) as f64 / 1e6,
            self.hotplug_record
        )
    }
}

impl Explain for Trigger6Explain {
    fn explain(&mut self, host: &DeviceHost, t: &ControlTransfer, v: &Verdict) -> Option<Reason> {
        let model = host.device::<Model>()?.inner();
        let s = &t.setup;
        let output = match (s.request_type, s.request) {
            (0xc0, 0x87) => s.value as usize,
            (0xc0, 0x80) => s.index as usize,
            _ => return None,
        };
        let after_hotplug = t.t_us >= self.hotplug_us;
        let status_says_connected = s.request == 0x87
            && matches!(v, Verdict::Differs { capture, .. } if capture.as_slice() == [1]);
        let edid_stalls = s.request == 0x80 && *v == Verdict::ModelStalls;
        if after_hotplug && !model.connected(output) && (status_says_connected || edid_stalls) {
            return Some(Reason::new(
                "hotplug_not_replayed",
                format!(
                    "the capture's monitor was plugged into output {output} at {}; the model \
                     has {}",
                    self.plugged_at(),
                    model.state_summary()
                ),
            ));
        }
        None
    }

    fn request_name(&self, host: &DeviceHost, setup: &Setup) -> Option<String> {
        host.device::<Model>()?
            .request_name(setup)
            .map(str::to_string)
    }

    fn before_data(
        &mut self,
        host: &mut DeviceHost,
        _index: usize,
        t: &DataTransfer,
    ) -> Option<Reason> {
        // The model is the dock's display function: a packet of another function (FuncMask
        // without the display bit) has no source in it, so it is not asked for one.
        let model = host.device::<Model>()?.inner();
        if t.xfer != XferType::Interrupt || t.status != Status::Ok {
            return None;
        }
        let mask = *t.data.first()?;
        if mask & FUNC_DISPLAY != 0 || mask == 0 {
            return None;
        }
        let word = |at: usize| {
            t.data
                .get(at..at + 4)
                .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        };
        Some(Reason::new(
            "audio_interrupt_not_modelled",
            format!(
                "FuncMask {mask:#04x} ({}), AudioRender word {:#010x}: the model is the dock's \
                 display function, its audio is the capture's canned control replies (engine 0 \
                 {}), and it raises no audio interrupt",
                func_names(mask),
                word(0x20),
                if model.audio_engine_running(0) {
                    "running"
                } else {
                    "stopped"
                }
            ),
        ))
    }

    fn explain_data(
        &mut self,
        host: &DeviceHost,
        t: &DataTransfer,
        v: &DataVerdict,
    ) -> Option<Reason> {
        let model = host.device::<Model>()?.inner();
        let events = parse_interrupt(&t.data);
        if *v == DataVerdict::CaptureOnly
            && t.xfer == XferType::Interrupt
            && events.contains(&DisplayEvent::Hotplug(0))
            && !model.connected(0)
        {
            return Some(Reason::new(
                "hotplug_not_replayed",
                format!(
                    "this is the capture's hot-plug report of output 0 at {}; the model has {}",
                    self.plugged_at(),
                    model.state_summary()
                ),
            ));
        }
        None
    }

    fn after_data(&mut self, host: &mut DeviceHost, t: &DataTransfer, entry: &DataEntry) {
        if t.is_in() {
            return;
        }
        let Some(model) = host.device::<Model>().map(|m| m.inner()) else {
            return;
        };
        let log = model.flip_log();
        while self.flips_seen < log.len() {
            let record = log[self.flips_seen];
            self.flips_seen += 1;
            // The newest flip is the one shown; an older one in the same transfer was
            // replaced before a monitor could see it.
            let output = record.flip.output as usize;
            let Some(scanout) = model
                .scanout(output)
                .filter(|_| model.flip_state(output).shown == Some(record.flip))
            else {
                continue;
            };
            let mut frame = ShownFrame {
                record,
                capture_record: entry.record,
                t_us: entry.t_us,
                width: scanout.width,
                height: scanout.height,
                format: scanout.format,
                sha256: scanout.sha256(),
                png: None,
            };
            if let Some(dir) = &self.frames_dir {
                let path = dir.join(format!(
                    "{:02}-{}",
                    self.frames.len() + 1,
                    scanout.file_name()
                ));
                match scanout.write_png(&path) {
                    Ok(()) => frame.png = Some(path),
                    Err(e) => {
                        self.write_error.get_or_insert(e);
                    }
                }
            }
            (self.on_frame)(&frame, &scanout);
            self.frames.push(frame);
        }
    }
}

/// The names of the functions of an interrupt FuncMask (MCT t6bulkdef.h).
fn func_names(mask: u8) -> String {
    const NAMES: [(u8, &str); 7] = [
        (0x02, "cpu"),
        (0x04, "display"),
        (0x08, "usb host"),
        (0x10, "net"),
        (0x20, "audio"),
        (0x40, "serial"),
        (0x80, "rom"),
    ];
    let v: Vec<&str> = NAMES
        .iter()
        .filter(|(b, _)| mask & b != 0)
        .map(|(_, n)| *n)
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(", ")
    }
}

/// Replays a capture against the Trigger 6 model of `spec` (see [`compare_capture_with`]) and
/// returns the report and the host. With `replay_hotplug`, the capture's monitor is plugged
/// into the model at the capture time of its hot-plug report; without it, the differences that
/// hot-plug explains are named `hotplug_not_replayed`.
pub fn compare_capture(
    capture: &Capture,
    spec: &Spec,
    replay_hotplug: bool,
) -> Result<(Report, DeviceHost), String> {
    let c = compare_capture_with(
        capture,
        spec,
        &CompareOptions {
            replay_hotplug,
            frames_dir: None,
        },
        |_, _| {},
    )?;
    Ok((c.report, c.host))
}

/// Replays the whole capture (control, bulk and interrupt transfers, in the order the dock saw
/// them) against the Trigger 6 model of `spec`. Each frame a flip shows is handed to
/// `on_frame` with its picture (and written as a PNG when [`CompareOptions::frames_dir`] is
/// set). Errors: a spec without `capture_monitor`, a capture without control transfers or
/// without the hot-plug report, a frame that could not be written.
pub fn compare_capture_with(
    capture: &Capture,
    spec: &Spec,
    options: &CompareOptions,
    on_frame: impl FnMut(&ShownFrame, &Scanout) + 'static,
) -> Result<Comparison, String> {
    let transfers = capture.transfers();
    let model = Trigger6::try_from_spec(spec).map_err(|e| e.to_string())?;
    let edid = model.facts().capture_edid.clone().ok_or_else(|| {
        format!(
            "{}: field `capture_edid`: missing; the comparison plugs the capture's monitor",
            spec.path().display()
        )
    })?;
    let origin_us = transfers
        .control
        .first()
        .map(|t| t.t_us)
        .ok_or_else(|| format!("{}: no control transfers", capture.path.display()))?;
    let plug = hotplug(&transfers.data).ok_or_else(|| {
        format!(
            "{}: no interrupt IN hot-plug report on output 0",
            capture.path.display()
        )
    })?;
    if let Some(dir) = &options.frames_dir {
        std::fs::create_dir_all(dir)
            .map_err(|e| format!("{}: cannot create the directory: {e}", dir.display()))?;
    }
    // The device saw the monitor by the time it completed the report.
    let hotplug_us = plug.complete_t_us.unwrap_or(plug.t_us);
    let mut model = Scripted::new(model);
    if options.replay_hotplug {
        model = model.at(
            compare::capture_to_virtual(origin_us, hotplug_us),
            format!(
                "hotplug out0 (capture packet {})",
                plug.complete_record.unwrap_or(0)
            ),
            move |d: &mut Trigger6, cx| {
                d.plug_monitor_with_edid(cx, 0, edid.clone());
            },
        );
    }
    let config = RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    };
    let mut host = DeviceHost::new(model, &config);
    let mut explain = Trigger6Explain {
        hotplug_us,
        hotplug_record: plug.complete_record.unwrap_or(0),
        origin_us,
        flips_seen: 0,
        frames: Vec::new(),
        frames_dir: options.frames_dir.clone(),
        write_error: None,
        on_frame: Box::new(on_frame),
    };
    let opts = Options {
        origin_us: Some(origin_us),
        ..Options::default()
    };
    let report = compare::compare_all(&transfers, &mut host, &opts, &mut explain);
    if let Some(e) = explain.write_error {
        return Err(e);
    }
    let m = host
        .device::<Model>()
        .map(|m| m.inner())
        .ok_or("the comparison lost its model")?;
    let stats = m.dma_stats();
    let bulk_out = m.facts().bulk_out_ep;
    let bulk = BulkPath {
        commands: stats.fragments.clone(),
        payloads: stats.payloads.clone(),
        ram_writes: stats.display_writes,
        ram_bytes: stats.display_bytes,
        ram_extent: m.vram().extent(),
        vram_size: m.vram_size(),
        ram_refused: m.rejected_writes().len(),
        refused: m
            .rejected()
            .iter()
            .filter(|r| r.starts_with("bulk"))
            .cloned()
            .collect(),
        in_progress: m.dma_in_progress(),
        model_gaps: report
            .data
            .iter()
            .filter(|e| e.path.endpoint == bulk_out && !e.model_gaps.is_empty())
            .count(),
    };
    Ok(Comparison {
        report,
        bulk,
        frames: explain.frames,
        host,
    })
}

/// The Trigger 6's whole-capture comparison as the model registry calls it
/// ([`calametra_core::registry::CompareCaptureFn`], what `calametra compare` runs for a
/// `calametra.spec.trigger6` spec): parses the capture, runs [`compare_capture_with`] and
/// hands each frame a flip showed to `pictures` as `NN-<scanout file name>` (NN counting from
/// 01 in the order shown) and its PNG; the report names the path each was written to.
pub fn compare_registered(
    capture_path: &std::path::Path,
    capture: &[u8],
    spec: &Spec,
    options: &calametra_core::registry::CaptureOptions,
    pictures: Option<calametra_core::registry::PictureSink>,
) -> Result<calametra_core::registry::CaptureReport, String> {
    use std::cell::RefCell;
    use std::rc::Rc;
    let capture = Capture::parse(capture_path, capture).map_err(|e| e.to_string())?;
    let written: Rc<RefCell<Vec<Option<PathBuf>>>> = Default::default();
    let on_frame = {
        let written = written.clone();
        let mut sink = pictures;
        move |_: &ShownFrame, scanout: &Scanout| {
            let Some(sink) = sink.as_mut() else { return };
            let name = format!("{:02}-{}", written.borrow().len() + 1, scanout.file_name());
            let path = sink(&name, &scanout.png()).ok();
            written.borrow_mut().push(path);
        }
    };
    let options = CompareOptions {
        replay_hotplug: options.replay_hotplug,
        frames_dir: None,
    };
    let mut c = compare_capture_with(&capture, spec, &options, on_frame)?;
    for (frame, path) in c.frames.iter_mut().zip(written.borrow().iter()) {
        frame.png = path.clone();
    }
    Ok(calametra_core::registry::CaptureReport {
        text: c.to_string(),
        compared: c.report.summary().total,
        clean: c.is_clean(),
    })
}
