//! What a comparison reports: the verdict of each control transfer ([`Verdict`], [`Entry`]) and
//! of each bulk, interrupt or isochronous one ([`DataVerdict`], [`DataEntry`]), the counts per
//! path ([`Summary`], [`PathSummary`]) and the [`Report`] printed from them, with the names of
//! requests and the bytes shown. Part of [`super`] (re-exported there); nothing here replays a
//! transfer or decides a verdict.

// The comparison's imports and types: this file is part of it.
use super::*;

/// How a model's answer compares with the capture's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Same status, and for IN the same bytes.
    Same,
    /// Both completed, with different IN bytes.
    Differs {
        /// The capture's bytes (as captured; a prefix when the capture truncated them).
        capture: Vec<u8>,
        /// The model's bytes.
        model: Vec<u8>,
        /// The first offset where they differ, or where the shorter one ends.
        first_difference: usize,
    },
    /// The capture completed; the model stalled.
    ModelStalls,
    /// The capture stalled; the model answered.
    CaptureStalls {
        /// What the model answered (empty for OUT).
        model: Vec<u8>,
    },
    /// A status other than ok or stall on either side (a capture error, no completion, a model
    /// timeout or disconnect).
    Other {
        /// The capture's status.
        capture: Status,
        /// The model's result, in words.
        model: String,
    },
    /// Not replayed, and why.
    Skipped {
        /// Why.
        why: String,
    },
}

impl Verdict {
    /// A short word for the verdict (`same`, `differs`, `model stalls`).
    pub fn word(&self) -> &'static str {
        match self {
            Verdict::Same => "same",
            Verdict::Differs { .. } => "differs",
            Verdict::ModelStalls => "model stalls",
            Verdict::CaptureStalls { .. } => "capture stalls",
            Verdict::Other { .. } => "other",
            Verdict::Skipped { .. } => "skipped",
        }
    }
}

/// One replayed transfer.
#[derive(Clone, Debug)]
pub struct Entry {
    /// Position among the replayed device's control transfers, from 0.
    pub index: usize,
    /// The transfer from the capture.
    pub transfer: ControlTransfer,
    /// The request's name (`get_descriptor(device)`, `vendor_87`, or the model's name).
    pub name: String,
    /// The model's answer; `None` when skipped.
    pub model: Option<Result<Vec<u8>, TransferError>>,
    /// The verdict.
    pub verdict: Verdict,
    /// The model's reason for a difference, when it gave one.
    pub reason: Option<Reason>,
    /// A remark (`compared the 32 captured bytes of 128`).
    pub note: Option<String>,
    /// Model gaps the model recorded while answering (`request in state`); seen only when the
    /// host keeps its trace (`RunConfig::keep_trace`).
    pub model_gaps: Vec<String>,
}

impl Entry {
    /// Whether this entry is a difference nobody explained.
    pub fn is_unexplained(&self) -> bool {
        !matches!(self.verdict, Verdict::Same | Verdict::Skipped { .. }) && self.reason.is_none()
    }
}

/// Counts of a report, for tests and the summary line.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Summary {
    /// Control transfers of the replayed device.
    pub total: usize,
    /// Same answer.
    pub same: usize,
    /// Different bytes.
    pub differ: usize,
    /// The model stalled where the capture did not.
    pub model_stalls: usize,
    /// The capture stalled where the model did not.
    pub capture_stalls: usize,
    /// Other statuses.
    pub other: usize,
    /// Not replayed.
    pub skipped: usize,
    /// Differences (of any kind) the model explained.
    pub explained: usize,
    /// Differences nobody explained.
    pub unexplained: usize,
    /// Transfers during which the model recorded a model gap (a request it has no evidence
    /// for), whatever their verdict.
    pub model_gaps: usize,
}

impl Summary {
    /// Whether every transfer is the same, skipped for a stated reason, or explained.
    pub fn is_clean(&self) -> bool {
        self.unexplained == 0
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} control transfers: {} same, {} differ, {} model stalls, {} capture stalls, {} \
             other, {} skipped; {} explained, {} unexplained; {} model gaps",
            self.total,
            self.same,
            self.differ,
            self.model_stalls,
            self.capture_stalls,
            self.other,
            self.skipped,
            self.explained,
            self.unexplained,
            self.model_gaps
        )
    }
}

/// The result of a comparison. `Display` renders it for people: a header, one line a transfer
/// (index, time, setup, name, verdict), both byte strings under a difference, and the summary.
#[derive(Clone, Debug)]
pub struct Report {
    /// The replayed device as `(bus, address)`; `None` when the capture had no control
    /// transfers.
    pub device: Option<(u16, u8)>,
    /// The replayed transfers in capture order.
    pub entries: Vec<Entry>,
    /// Control transfers of other devices, not replayed, by `(bus, address)`.
    pub other_devices: BTreeMap<(u16, u8), usize>,
    /// Whether the clock was paced by the capture.
    pub paced: bool,
    /// The replayed bulk, interrupt and isochronous transfers, in the order they were replayed
    /// (empty unless the whole capture was replayed, [`compare_all`]).
    pub data: Vec<DataEntry>,
    /// Bulk, interrupt and isochronous transfers of other devices, not replayed.
    pub other_devices_data: BTreeMap<(u16, u8), usize>,
}

impl Report {
    /// The counts.
    pub fn summary(&self) -> Summary {
        let mut s = Summary {
            total: self.entries.len(),
            ..Summary::default()
        };
        for e in &self.entries {
            match e.verdict {
                Verdict::Same => s.same += 1,
                Verdict::Differs { .. } => s.differ += 1,
                Verdict::ModelStalls => s.model_stalls += 1,
                Verdict::CaptureStalls { .. } => s.capture_stalls += 1,
                Verdict::Other { .. } => s.other += 1,
                Verdict::Skipped { .. } => s.skipped += 1,
            }
            if e.reason.is_some() && !matches!(e.verdict, Verdict::Same | Verdict::Skipped { .. }) {
                s.explained += 1;
            }
            if e.is_unexplained() {
                s.unexplained += 1;
            }
            if !e.model_gaps.is_empty() {
                s.model_gaps += 1;
            }
        }
        s
    }

    /// The entries nobody explained.
    pub fn unexplained(&self) -> impl Iterator<Item = &Entry> {
        self.entries.iter().filter(|e| e.is_unexplained())
    }

    /// The counts of each data path (endpoint) replayed, in endpoint order.
    pub fn data_summaries(&self) -> BTreeMap<DataPath, PathSummary> {
        let mut m: BTreeMap<DataPath, PathSummary> = BTreeMap::new();
        for e in &self.data {
            m.entry(e.path).or_default().add(e);
        }
        m
    }

    /// The data entries nobody explained.
    pub fn unexplained_data(&self) -> impl Iterator<Item = &DataEntry> {
        self.data.iter().filter(|e| e.is_unexplained())
    }

    /// Whether every control and data transfer is the same, skipped for a stated reason, or
    /// explained.
    pub fn is_clean(&self) -> bool {
        self.summary().is_clean() && self.unexplained_data().next().is_none()
    }

    /// The report as text (the same as `Display`).
    pub fn render(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.device {
            Some((bus, dev)) => writeln!(
                f,
                "replaying bus {bus} device {dev} against the model, in capture order{}",
                if self.paced {
                    ", clock paced by the capture"
                } else {
                    ""
                }
            )?,
            None => writeln!(f, "the capture has no control transfers")?,
        }
        for ((bus, dev), n) in &self.other_devices {
            writeln!(
                f,
                "not replayed: {n} control transfers of bus {bus} device {dev}"
            )?;
        }
        let t0 = self.entries.first().map_or(0, |e| e.transfer.t_us);
        for e in &self.entries {
            let dt = e.transfer.t_us.saturating_sub(t0);
            write!(
                f,
                "{:>4} {:>4}.{:06} {}  {:<26} {}",
                e.index,
                dt.div_euclid(1_000_000),
                dt.rem_euclid(1_000_000),
                setup_words(&e.transfer.setup),
                e.name,
                describe(e)
            )?;
            if let Some(r) = &e.reason {
                write!(f, " [explained: {}: {}]", r.name, r.detail)?;
            } else if e.is_unexplained() {
                write!(f, " [UNEXPLAINED]")?;
            }
            if let Some(n) = &e.note {
                write!(f, " ({n})")?;
            }
            for g in &e.model_gaps {
                write!(f, " [model gap: {g}]")?;
            }
            writeln!(f)?;
            match &e.verdict {
                Verdict::Differs {
                    capture,
                    model,
                    first_difference,
                } => {
                    writeln!(f, "{}", bytes_line("capture", capture, *first_difference))?;
                    writeln!(f, "{}", bytes_line("model", model, *first_difference))?;
                }
                Verdict::CaptureStalls { model } if !model.is_empty() => {
                    writeln!(f, "{}", bytes_line("model", model, 0))?;
                }
                _ => {}
            }
        }
        write!(f, "{}", self.summary())?;
        if let Some((bus, dev)) = self.device {
            write!(f, " (bus {bus} device {dev})")?;
        }
        writeln!(f)?;
        if self.data.is_empty() && self.other_devices_data.is_empty() {
            return Ok(());
        }
        for ((bus, dev), n) in &self.other_devices_data {
            writeln!(
                f,
                "not replayed: {n} bulk, interrupt and isochronous transfers of bus {bus} device \
                 {dev}"
            )?;
        }
        // Every IN and every difference has its line; an OUT the model took whole, like the
        // real device, is only counted (a frame is hundreds of them).
        for e in &self.data {
            if e.verdict == DataVerdict::Same && !e.path.is_in() && e.model_gaps.is_empty() {
                continue;
            }
            let dt = e.t_us.saturating_sub(t0);
            write!(
                f,
                "{:>5} {:>4}.{:06} {:<17} {:>7} bytes  {}",
                e.index,
                dt.div_euclid(1_000_000),
                dt.rem_euclid(1_000_000),
                e.path.to_string(),
                e.length,
                describe_data(e)
            )?;
            if let Some(r) = &e.reason {
                write!(f, " [explained: {}: {}]", r.name, r.detail)?;
            } else if e.is_unexplained() {
                write!(f, " [UNEXPLAINED]")?;
            }
            if let Some(n) = &e.note {
                write!(f, " ({n})")?;
            }
            for g in &e.model_gaps {
                write!(f, " [model gap: {g}]")?;
            }
            writeln!(f)?;
            match &e.verdict {
                DataVerdict::Differs {
                    capture,
                    model,
                    first_difference,
                } => {
                    writeln!(f, "{}", bytes_line("capture", capture, *first_difference))?;
                    writeln!(f, "{}", bytes_line("model", model, *first_difference))?;
                }
                DataVerdict::ModelOnly { model } => {
                    writeln!(f, "{}", bytes_line("model", model, 0))?;
                }
                _ => {}
            }
        }
        for (path, s) in self.data_summaries() {
            writeln!(f, "{path}: {s}")?;
        }
        Ok(())
    }
}

/// A data path of a device: an endpoint and its transfer type (ordered by endpoint).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DataPath {
    /// The endpoint address, bit 7 set for IN.
    pub endpoint: u8,
    /// Bulk, interrupt or isochronous.
    pub xfer: XferType,
}

impl DataPath {
    /// Whether data flows device-to-host.
    pub fn is_in(&self) -> bool {
        self.endpoint & calametra_core::usb::DIR_IN != 0
    }
}

impl fmt::Display for DataPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} {} {:#04x}",
            self.xfer.as_str(),
            if self.is_in() { "IN" } else { "OUT" },
            self.endpoint
        )
    }
}

/// What the model did with a replayed data transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ModelAnswer {
    /// OUT: it took this many bytes.
    Accepted(usize),
    /// IN: it answered these bytes.
    Data(Vec<u8>),
    /// IN: it had nothing (NAK).
    Nothing,
    /// It failed the transfer.
    Error(TransferError),
}

impl fmt::Display for ModelAnswer {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ModelAnswer::Accepted(n) => write!(f, "accepted {n} bytes"),
            ModelAnswer::Data(d) => write!(f, "answered {} bytes", d.len()),
            ModelAnswer::Nothing => f.write_str("had nothing (NAK)"),
            ModelAnswer::Error(e) => write!(f, "{e}"),
        }
    }
}

/// How the model's side of a bulk, interrupt or isochronous transfer compares with the
/// capture's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DataVerdict {
    /// OUT: both took every byte (or both stalled). IN: the same bytes, or (an IN the capture
    /// shows still pending, or cancelled, at its end) nothing on either side.
    Same,
    /// IN: both answered, with different bytes.
    Differs {
        /// The capture's bytes.
        capture: Vec<u8>,
        /// The model's bytes.
        model: Vec<u8>,
        /// The first offset where they differ, or where the shorter one ends.
        first_difference: usize,
    },
    /// The capture completed; the model stalled.
    ModelStalls,
    /// The capture stalled; the model did not.
    CaptureStalls,
    /// IN: the capture shows a packet; the model had none then (or was not asked: see
    /// [`Explain::before_data`]).
    CaptureOnly,
    /// IN: the model had a packet where the real device had none (an IN pending or cancelled
    /// when the capture shows it).
    ModelOnly {
        /// The model's packet.
        model: Vec<u8>,
    },
    /// Any other pair of outcomes (a different byte count taken, an error on either side).
    Other {
        /// The capture's status.
        capture: Status,
        /// The model's answer, in words.
        model: String,
    },
    /// Not replayed, and why.
    Skipped {
        /// Why.
        why: String,
    },
}

impl DataVerdict {
    /// A short word for the verdict (`same`, `capture only`).
    pub fn word(&self) -> &'static str {
        match self {
            DataVerdict::Same => "same",
            DataVerdict::Differs { .. } => "differs",
            DataVerdict::ModelStalls => "model stalls",
            DataVerdict::CaptureStalls => "capture stalls",
            DataVerdict::CaptureOnly => "capture only",
            DataVerdict::ModelOnly { .. } => "model only",
            DataVerdict::Other { .. } => "other",
            DataVerdict::Skipped { .. } => "skipped",
        }
    }
}

/// One replayed bulk, interrupt or isochronous transfer. The OUT data itself is not kept (a
/// capture's frames are megabytes); the capture's IN bytes are, in the verdict or in
/// `capture_in`.
#[derive(Clone, Debug)]
pub struct DataEntry {
    /// Position among the replayed device's data transfers (in submission order), from 0.
    pub index: usize,
    /// The endpoint.
    pub path: DataPath,
    /// The capture record the replay stands at: an OUT's submission, an IN's completion (its
    /// submission when it never completed).
    pub record: usize,
    /// The capture time of that record, microseconds.
    pub t_us: i64,
    /// How the transfer ended in the capture.
    pub status: Status,
    /// Bytes in the capture: offered (OUT) or received (IN).
    pub length: u32,
    /// The capture's IN bytes.
    pub capture_in: Vec<u8>,
    /// What the model did; `None` when it was not asked.
    pub model: Option<ModelAnswer>,
    /// The verdict.
    pub verdict: DataVerdict,
    /// The model's reason for a difference, when it gave one.
    pub reason: Option<Reason>,
    /// A remark.
    pub note: Option<String>,
    /// Model gaps the model recorded while answering (`request in state`).
    pub model_gaps: Vec<String>,
}

impl DataEntry {
    /// Whether this entry is a difference nobody explained.
    pub fn is_unexplained(&self) -> bool {
        !matches!(
            self.verdict,
            DataVerdict::Same | DataVerdict::Skipped { .. }
        ) && self.reason.is_none()
    }
}

/// The counts of one data path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PathSummary {
    /// Transfers of the path.
    pub total: usize,
    /// Bytes the capture shows crossing it.
    pub bytes: u64,
    /// Same outcome.
    pub same: usize,
    /// Different IN bytes.
    pub differ: usize,
    /// The model stalled where the capture did not.
    pub model_stalls: usize,
    /// The capture stalled where the model did not.
    pub capture_stalls: usize,
    /// A packet in the capture only.
    pub capture_only: usize,
    /// A packet from the model only.
    pub model_only: usize,
    /// Other outcomes.
    pub other: usize,
    /// Not replayed.
    pub skipped: usize,
    /// Differences the model explained.
    pub explained: usize,
    /// Differences nobody explained.
    pub unexplained: usize,
    /// Transfers during which the model recorded a model gap.
    pub model_gaps: usize,
}

impl PathSummary {
    fn add(&mut self, e: &DataEntry) {
        self.total += 1;
        self.bytes += u64::from(e.length);
        match e.verdict {
            DataVerdict::Same => self.same += 1,
            DataVerdict::Differs { .. } => self.differ += 1,
            DataVerdict::ModelStalls => self.model_stalls += 1,
            DataVerdict::CaptureStalls => self.capture_stalls += 1,
            DataVerdict::CaptureOnly => self.capture_only += 1,
            DataVerdict::ModelOnly { .. } => self.model_only += 1,
            DataVerdict::Other { .. } => self.other += 1,
            DataVerdict::Skipped { .. } => self.skipped += 1,
        }
        if e.reason.is_some()
            && !matches!(e.verdict, DataVerdict::Same | DataVerdict::Skipped { .. })
        {
            self.explained += 1;
        }
        if e.is_unexplained() {
            self.unexplained += 1;
        }
        if !e.model_gaps.is_empty() {
            self.model_gaps += 1;
        }
    }

    /// Whether every transfer of the path is the same, skipped for a stated reason, or
    /// explained.
    pub fn is_clean(&self) -> bool {
        self.unexplained == 0
    }
}

impl fmt::Display for PathSummary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} transfers ({} bytes): {} same, {} differ, {} model stalls, {} capture stalls, {} \
             capture only, {} model only, {} other, {} skipped; {} explained, {} unexplained; {} \
             model gaps",
            self.total,
            self.bytes,
            self.same,
            self.differ,
            self.model_stalls,
            self.capture_stalls,
            self.capture_only,
            self.model_only,
            self.other,
            self.skipped,
            self.explained,
            self.unexplained,
            self.model_gaps
        )
    }
}

fn describe_data(e: &DataEntry) -> String {
    match &e.verdict {
        DataVerdict::Same => match (&e.model, e.status) {
            (_, Status::Stall) => "same (both stall)".into(),
            (Some(ModelAnswer::Nothing), _) => {
                "same (nothing on either side by the end of the capture)".into()
            }
            _ if e.path.is_in() => format!("same ({} bytes)", e.capture_in.len()),
            _ => "same (taken whole)".into(),
        },
        DataVerdict::Differs {
            capture,
            model,
            first_difference,
        } => format!(
            "differs at byte {first_difference} (capture {} bytes, model {} bytes)",
            capture.len(),
            model.len()
        ),
        DataVerdict::ModelStalls => format!("model stalls; capture: {}", e.status),
        DataVerdict::CaptureStalls => match &e.model {
            Some(m) => format!("capture stalls; model {m}"),
            None => "capture stalls".into(),
        },
        DataVerdict::CaptureOnly => match &e.model {
            Some(m) => format!("capture only; the model {m}"),
            None => "capture only; not offered to the model".into(),
        },
        DataVerdict::ModelOnly { model } => format!(
            "model only: {} bytes where the capture has none ({})",
            model.len(),
            e.status
        ),
        DataVerdict::Other { capture, model } => format!("other: capture {capture}, model {model}"),
        DataVerdict::Skipped { why } => format!("skipped: {why}"),
    }
}

/// The setup as usbmon text prints it: `c0 80 0000 0000 0080`.
fn setup_words(s: &Setup) -> String {
    format!(
        "{:02x} {:02x} {:04x} {:04x} {:04x}",
        s.request_type, s.request, s.value, s.index, s.length
    )
}

fn describe(e: &Entry) -> String {
    let t = &e.transfer;
    match &e.verdict {
        Verdict::Same => match t.status {
            Status::Stall => "same (both stall)".into(),
            _ if t.is_in() => format!("same ({} bytes)", t.actual),
            _ => format!("same (OUT {} bytes)", t.data.len()),
        },
        Verdict::Differs {
            capture,
            model,
            first_difference,
        } => format!(
            "differs at byte {first_difference} (capture {} bytes, model {} bytes)",
            if t.truncated {
                t.actual as usize
            } else {
                capture.len()
            },
            model.len()
        ),
        Verdict::ModelStalls => format!("model stalls; capture: {}", t.status),
        Verdict::CaptureStalls { model } => {
            if t.is_in() {
                format!("capture stalls; model answered {} bytes", model.len())
            } else {
                "capture stalls; model accepted".into()
            }
        }
        Verdict::Other { capture, model } => format!("other: capture {capture}, model {model}"),
        Verdict::Skipped { why } => format!("skipped: {why}"),
    }
}

/// One side's bytes; long strings show 64 bytes around the first difference.
fn bytes_line(label: &str, b: &[u8], at: usize) -> String {
    const WINDOW: usize = 64;
    let (start, end) = if b.len() <= WINDOW {
        (0, b.len())
    } else {
        let start = (at / 16 * 16).saturating_sub(16).min(b.len());
        (start, (start + WINDOW).min(b.len()))
    };
    let body = calametra_core::hex::encode(b.get(start..end).unwrap_or(&[]));
    let from = if start > 0 || end < b.len() {
        format!(", from byte {start}")
    } else {
        String::new()
    };
    format!(
        "{:>11}{label:<7} {} bytes{from}: {}{body}{}",
        "",
        b.len(),
        if start > 0 { "..." } else { "" },
        if end < b.len() { "..." } else { "" }
    )
}

/// A generic name for a request: chapter 9 names (with the descriptor type for
/// `get_descriptor`), or `vendor_87`, `class_21`.
pub fn request_name(s: &Setup) -> String {
    match s.control_type() {
        Some(ControlType::Standard) => {
            let base = match (s.standard_name(), s.request) {
                (Some(n), _) => n.to_string(),
                // USB 3.x chapter 9 requests the core's table does not name.
                (None, 0x30) => "set_sel".into(),
                (None, 0x31) => "set_isoch_delay".into(),
                (None, r) => format!("standard_{r:02x}"),
            };
            if s.request == 6 && s.request_type & 0x80 != 0 {
                let [ty, idx] = [(s.value >> 8) as u8, s.value as u8];
                let what = match ty {
                    1 => "device".to_string(),
                    2 => "config".to_string(),
                    3 => format!("string {idx}"),
                    6 => "qualifier".to_string(),
                    15 => "bos".to_string(),
                    other => format!("type {other:#04x}"),
                };
                format!("{base}({what})")
            } else {
                base
            }
        }
        Some(ControlType::Class) => format!("class_{:02x}", s.request),
        Some(ControlType::Vendor) => format!("vendor_{:02x}", s.request),
        None => format!("reserved_{:02x}", s.request),
    }
}
