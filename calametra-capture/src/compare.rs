//! Comparing a model with a capture: each control transfer a real device answered is replayed,
//! in the capture's order, against the model through [`DeviceHost::control`], and the two
//! answers are classified (same, differs, model stalls, capture stalls, other, skipped).
//!
//! [`compare_all`] replays the whole capture: the control transfers and the bulk, interrupt
//! and isochronous ones, interleaved in the order the device saw them (an OUT or a control
//! transfer at its submission, an IN at its completion, when the device had the data). Bulk OUT
//! data goes to the model through [`DeviceHost::out`]; each IN the capture shows completing is
//! a poll of the model's endpoint at that moment ([`DeviceHost::poll_in`]), its packet compared
//! with the capture's ([`DataVerdict`]); an IN still pending when the capture ends is a poll
//! that must find nothing.
//!
//! A model may account for a difference through an [`Explain`] hook: a named reason from the
//! model's state (the capture's monitor is one the model does not have, a hot-plug happened at
//! a time the model does not see). Explained differences are listed with their reason and
//! counted apart from unexplained ones; a capture "compares clean" when nothing is unexplained.
//!
//! Nothing here reads the wall clock: the model's time moves only through the host, paced (by
//! default) by the capture's own timestamps.

use crate::{ControlTransfer, DataTransfer, Status, Transfers, XferType};
use calametra_core::clock::Nanos;
use calametra_core::host::DeviceHost;
use calametra_core::usb::{ControlType, Setup, TransferError};
use std::collections::BTreeMap;
use std::fmt;

/// The device wrapper that scripts events off the bus (a hot-plug the capture shows) into a
/// comparison; it lives in the core, since scenarios script events with it too.
pub use calametra_core::scripted::Scripted;

/// How to replay a capture.
#[derive(Clone, Debug)]
pub struct Options {
    /// The device to replay, as `(bus, address)`; `None` picks the device with the most control
    /// transfers (the lowest bus and address on a tie).
    pub device: Option<(u16, u8)>,
    /// Advance the model's virtual clock by the capture's gaps between submissions, so timers
    /// in the model see the time the real device saw (the clock never goes backwards): a
    /// transfer submitted at capture time `t` is replayed at
    /// [`capture_to_virtual`]`(origin, t)` after the host's time when the comparison starts.
    pub pace: bool,
    /// The capture time (microseconds) that maps to the start of the comparison; `None` takes
    /// the first replayed transfer's submission time. [`Scripted`] events use the same origin.
    pub origin_us: Option<i64>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            device: None,
            pace: true,
            origin_us: None,
        }
    }
}

/// Virtual nanoseconds from capture time `origin_us` to capture time `t_us` (0 before the
/// origin): how a paced comparison maps the capture's clock onto the model's.
pub fn capture_to_virtual(origin_us: i64, t_us: i64) -> Nanos {
    u64::try_from(t_us.saturating_sub(origin_us))
        .unwrap_or(0)
        .saturating_mul(1000)
}

/// A named reason, from the model's state, why a model's answer differs from the capture's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reason {
    /// A short stable name (`monitor_not_modelled`, `hotplug_before_model`).
    pub name: String,
    /// The model state and the capture fact that account for the difference.
    pub detail: String,
}

impl Reason {
    /// A reason with a name and a detail.
    pub fn new(name: impl Into<String>, detail: impl Into<String>) -> Reason {
        Reason {
            name: name.into(),
            detail: detail.into(),
        }
    }
}

/// What a model supplies to a comparison: names for its requests, actions before a transfer,
/// and reasons for differences.
pub trait Explain {
    /// Called before transfer `index` is replayed, after the clock has been paced; a hook may
    /// act on the host here (a reset the capture implies, say).
    fn before(&mut self, host: &mut DeviceHost, index: usize, transfer: &ControlTransfer) {
        let _ = (host, index, transfer);
    }

    /// Called for each transfer whose verdict is not [`Verdict::Same`] or
    /// [`Verdict::Skipped`]; returns the reason from the model's state, or `None` when the
    /// difference is not explained.
    fn explain(
        &mut self,
        host: &DeviceHost,
        transfer: &ControlTransfer,
        verdict: &Verdict,
    ) -> Option<Reason>;

    /// The request's name in the report (`get_edid`); `None` uses a generic name. A hook
    /// that knows the model's type can ask it: `host.device::<M>()?.request_name(setup)`.
    fn request_name(&self, host: &DeviceHost, setup: &Setup) -> Option<String> {
        let _ = (host, setup);
        None
    }

    /// Called before data transfer `index` (bulk, interrupt) is replayed, after the clock has
    /// been paced. A reason returned says the model has no part in this transfer (a packet of
    /// a function the model does not have): it is not offered to the model, and its verdict is
    /// [`DataVerdict::CaptureOnly`], explained by that reason.
    fn before_data(
        &mut self,
        host: &mut DeviceHost,
        index: usize,
        transfer: &DataTransfer,
    ) -> Option<Reason> {
        let _ = (host, index, transfer);
        None
    }

    /// Called after a data transfer was replayed and classified (explained or not), with the
    /// model in its new state: where a hook looks at what the transfer did (a frame shown).
    fn after_data(&mut self, host: &mut DeviceHost, transfer: &DataTransfer, entry: &DataEntry) {
        let _ = (host, transfer, entry);
    }

    /// Called for each data transfer whose verdict is not [`DataVerdict::Same`] or
    /// [`DataVerdict::Skipped`]; returns the reason from the model's state, or `None` when the
    /// difference is not explained.
    fn explain_data(
        &mut self,
        host: &DeviceHost,
        transfer: &DataTransfer,
        verdict: &DataVerdict,
    ) -> Option<Reason> {
        let _ = (host, transfer, verdict);
        None
    }
}

/// No explanations: every difference counts as unexplained.
#[derive(Clone, Copy, Debug, Default)]
pub struct NoExplanations;

impl Explain for NoExplanations {
    fn explain(&mut self, _: &DeviceHost, _: &ControlTransfer, _: &Verdict) -> Option<Reason> {
        None
    }
}

/// An [`Explain`] made from a closure (see [`explain_with`]).
pub struct ExplainFn<F>(F);

/// An [`Explain`] whose `explain` is `f`.
pub fn explain_with<F>(f: F) -> ExplainFn<F>
where
    F: FnMut(&DeviceHost, &ControlTransfer, &Verdict) -> Option<Reason>,
{
    ExplainFn(f)
}

impl<F> Explain for ExplainFn<F>
where
    F: FnMut(&DeviceHost, &ControlTransfer, &Verdict) -> Option<Reason>,
{
    fn explain(&mut self, host: &DeviceHost, t: &ControlTransfer, v: &Verdict) -> Option<Reason> {
        (self.0)(host, t, v)
    }
}

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

/// The device with the most control transfers (the lowest `(bus, address)` on a tie).
pub fn busiest_device(transfers: &[ControlTransfer]) -> Option<(u16, u8)> {
    let mut counts: BTreeMap<(u16, u8), usize> = BTreeMap::new();
    for t in transfers {
        *counts.entry((t.bus, t.device)).or_default() += 1;
    }
    let mut best: Option<((u16, u8), usize)> = None;
    for (k, n) in counts {
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((k, n));
        }
    }
    best.map(|(k, _)| k)
}

/// Replays `transfers` against the host's model with default [`Options`] and no explanations.
pub fn compare(transfers: &[ControlTransfer], host: &mut DeviceHost) -> Report {
    compare_with(transfers, host, &Options::default(), &mut NoExplanations)
}

/// Replays the control transfers of one device (see [`Options::device`]) against the host's
/// model, in capture order, and classifies each.
///
/// `SET_ADDRESS` is not replayed: the host controller and the bus assign addresses (an xHCI
/// controller sends it itself, so usbmon often does not even show it). A transfer whose
/// submission failed on the host (`E`) is not replayed either: the device saw nothing. An OUT
/// transfer whose data the capture truncated is skipped, since its bytes cannot be sent.
pub fn compare_with(
    transfers: &[ControlTransfer],
    host: &mut DeviceHost,
    options: &Options,
    explain: &mut dyn Explain,
) -> Report {
    let device = options.device.or_else(|| busiest_device(transfers));
    let mut other_devices = BTreeMap::new();
    let mut entries = Vec::new();
    let mut pacer = Pacer::new(host, options);
    for t in transfers {
        if Some((t.bus, t.device)) != device {
            *other_devices.entry((t.bus, t.device)).or_insert(0) += 1;
            continue;
        }
        let index = entries.len();
        entries.push(replay_control(host, &mut pacer, explain, index, t));
    }
    Report {
        device,
        entries,
        other_devices,
        paced: options.pace,
        data: Vec::new(),
        other_devices_data: BTreeMap::new(),
    }
}

/// Replays the whole capture of one device (see [`Options::device`]; by default the device
/// with the most control transfers, or with the most transfers when none is a control
/// transfer): its control transfers as [`compare_with`] does, and its bulk, interrupt and
/// isochronous transfers, interleaved in the order the device saw them. The report's
/// `entries` are the control transfers, its `data` the others.
///
/// The order is the capture's record order of the moment that matters to the device: a
/// control or OUT transfer's submission (the host offers the data then), an IN transfer's
/// completion (the device had the data then). With [`Options::pace`] the clock is advanced to
/// that moment's capture time first.
///
/// - Bulk and interrupt OUT: the captured bytes go to the model ([`DeviceHost::out`]); same
///   when it takes them all (or both stall). An OUT whose bytes the capture truncated, or
///   whose submission failed, is skipped; one that never completed in the capture is skipped
///   too (whether the device took it is unknown).
/// - Bulk and interrupt IN completed in the capture: one poll of the model's endpoint for the
///   bytes the host asked for ([`DeviceHost::poll_in`]); same bytes, differs, or capture only
///   (the model had nothing yet).
/// - Bulk and interrupt IN the capture shows pending at its end, or cancelled: a poll at the
///   end (or at the cancellation) that must find nothing; a packet is model only.
/// - Isochronous transfers are skipped (not replayed).
pub fn compare_all(
    transfers: &Transfers,
    host: &mut DeviceHost,
    options: &Options,
    explain: &mut dyn Explain,
) -> Report {
    let device = options
        .device
        .or_else(|| busiest_device(&transfers.control))
        .or_else(|| busiest_data_device(&transfers.data));
    let mut other_devices = BTreeMap::new();
    let mut other_devices_data = BTreeMap::new();
    let mut steps: Vec<(usize, usize, Step)> = Vec::new();
    for (i, t) in transfers.control.iter().enumerate() {
        if Some((t.bus, t.device)) == device {
            steps.push((t.submit_record, t.submit_record, Step::Control(i)));
        } else {
            *other_devices.entry((t.bus, t.device)).or_insert(0) += 1;
        }
    }
    for (i, t) in transfers.data.iter().enumerate() {
        if Some((t.bus, t.device)) == device {
            steps.push((data_record(t), t.submit_record, Step::Data(i)));
        } else {
            *other_devices_data.entry((t.bus, t.device)).or_insert(0) += 1;
        }
    }
    steps.sort_by_key(|s| (s.0, s.1));
    // An IN still pending at the end of the capture is replayed at the capture's last time.
    let last_us = transfers
        .control
        .iter()
        .map(|t| t.complete_t_us.unwrap_or(t.t_us))
        .chain(
            transfers
                .data
                .iter()
                .map(|t| t.complete_t_us.unwrap_or(t.t_us)),
        )
        .max()
        .unwrap_or(0);
    let mut data_index = BTreeMap::new();
    for (n, i) in steps
        .iter()
        .filter_map(|s| match s.2 {
            Step::Data(i) => Some(i),
            Step::Control(_) => None,
        })
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .enumerate()
    {
        data_index.insert(i, n);
    }
    let mut entries = Vec::new();
    let mut data = Vec::new();
    let mut pacer = Pacer::new(host, options);
    for (_, _, step) in steps {
        match step {
            Step::Control(i) => {
                let index = entries.len();
                entries.push(replay_control(
                    host,
                    &mut pacer,
                    explain,
                    index,
                    &transfers.control[i],
                ));
            }
            Step::Data(i) => {
                let t = &transfers.data[i];
                let index = data_index.get(&i).copied().unwrap_or(i);
                let entry = replay_data(host, &mut pacer, explain, index, t, last_us);
                explain.after_data(host, t, &entry);
                data.push(entry);
            }
        }
    }
    Report {
        device,
        entries,
        other_devices,
        paced: options.pace,
        data,
        other_devices_data,
    }
}

#[derive(Clone, Copy)]
enum Step {
    Control(usize),
    Data(usize),
}

/// The record a data transfer is replayed at: an OUT's submission, an IN's completion (an IN
/// with none goes last).
fn data_record(t: &DataTransfer) -> usize {
    if t.is_in() {
        t.complete_record.unwrap_or(usize::MAX)
    } else {
        t.submit_record
    }
}

/// The device with the most data transfers (the lowest `(bus, address)` on a tie).
fn busiest_data_device(transfers: &[DataTransfer]) -> Option<(u16, u8)> {
    let mut counts: BTreeMap<(u16, u8), usize> = BTreeMap::new();
    for t in transfers {
        *counts.entry((t.bus, t.device)).or_default() += 1;
    }
    let mut best: Option<((u16, u8), usize)> = None;
    for (k, n) in counts {
        if best.is_none_or(|(_, m)| n > m) {
            best = Some((k, n));
        }
    }
    best.map(|(k, _)| k)
}

/// Moves the model's clock along the capture's.
struct Pacer {
    pace: bool,
    start_ns: Nanos,
    origin: Option<i64>,
}

impl Pacer {
    fn new(host: &DeviceHost, options: &Options) -> Pacer {
        Pacer {
            pace: options.pace,
            start_ns: host.now(),
            origin: options.origin_us,
        }
    }

    fn to(&mut self, host: &mut DeviceHost, t_us: i64) {
        if self.pace {
            let origin = *self.origin.get_or_insert(t_us);
            host.advance_to(
                self.start_ns
                    .saturating_add(capture_to_virtual(origin, t_us)),
            );
        }
    }
}

fn replay_control(
    host: &mut DeviceHost,
    pacer: &mut Pacer,
    explain: &mut dyn Explain,
    index: usize,
    t: &ControlTransfer,
) -> Entry {
    let name = explain
        .request_name(host, &t.setup)
        .unwrap_or_else(|| request_name(&t.setup));
    let skip = skip_reason(t);
    if skip.is_none() {
        pacer.to(host, t.t_us);
    }
    let mut entry = Entry {
        index,
        transfer: t.clone(),
        name,
        model: None,
        verdict: Verdict::Same,
        reason: None,
        note: None,
        model_gaps: Vec::new(),
    };
    if let Some(why) = skip {
        entry.verdict = Verdict::Skipped { why };
        return entry;
    }
    explain.before(host, index, t);
    let mark = host.lines().len();
    let answer = host.control(t.setup, &t.data);
    entry.model_gaps = model_gaps(host.lines().get(mark..).unwrap_or(&[]));
    let (verdict, note) = classify(t, &answer);
    if !matches!(verdict, Verdict::Same | Verdict::Skipped { .. }) {
        entry.reason = explain.explain(host, t, &verdict);
    }
    entry.model = Some(answer);
    entry.verdict = verdict;
    entry.note = note;
    entry
}

/// Whether the capture shows an IN ending with no data from the device: never completed, or
/// cancelled by the host.
fn in_without_packet(status: Status) -> bool {
    matches!(
        status,
        Status::NoCompletion | Status::Error(-2) | Status::Error(-104) | Status::Error(-108)
    )
}

fn replay_data(
    host: &mut DeviceHost,
    pacer: &mut Pacer,
    explain: &mut dyn Explain,
    index: usize,
    t: &DataTransfer,
    last_us: i64,
) -> DataEntry {
    let path = DataPath {
        xfer: t.xfer,
        endpoint: t.endpoint,
    };
    let is_in = t.is_in();
    let (record, t_us) = if is_in {
        match (t.complete_record, t.complete_t_us) {
            (Some(r), Some(c)) => (r, c),
            _ => (t.submit_record, last_us.max(t.t_us)),
        }
    } else {
        (t.submit_record, t.t_us)
    };
    let mut entry = DataEntry {
        index,
        path,
        record,
        t_us,
        status: t.status,
        length: if is_in { t.actual } else { t.requested },
        capture_in: if is_in { t.data.clone() } else { Vec::new() },
        model: None,
        verdict: DataVerdict::Same,
        reason: None,
        note: None,
        model_gaps: Vec::new(),
    };
    let skip = match t.status {
        _ if t.xfer == XferType::Isochronous => {
            Some("isochronous transfers are not replayed".to_string())
        }
        Status::SubmitError(e) => Some(format!(
            "the submission failed on the host ({e}); the device saw nothing"
        )),
        Status::NoCompletion if !is_in => Some(
            "the OUT never completed in the capture; whether the device took its bytes is unknown"
                .to_string(),
        ),
        _ if !is_in && t.truncated => Some(format!(
            "the capture kept {} of the {} OUT bytes; the transfer cannot be resent",
            t.data.len(),
            t.requested
        )),
        _ => None,
    };
    if let Some(why) = skip {
        entry.verdict = DataVerdict::Skipped { why };
        return entry;
    }
    pacer.to(host, t_us);
    if let Some(reason) = explain.before_data(host, index, t) {
        entry.verdict = DataVerdict::CaptureOnly;
        entry.reason = Some(reason);
        return entry;
    }
    let mark = host.lines().len();
    let answer = if is_in {
        let len = usize::try_from(t.requested).unwrap_or(usize::MAX);
        match host.poll_in(t.endpoint, len, t.xfer == XferType::Interrupt) {
            None => ModelAnswer::Nothing,
            Some(Ok(d)) => ModelAnswer::Data(d),
            Some(Err(e)) => ModelAnswer::Error(e),
        }
    } else {
        match host.out(t.endpoint, &t.data) {
            Ok(n) => ModelAnswer::Accepted(n),
            Err(e) => ModelAnswer::Error(e),
        }
    };
    entry.model_gaps = model_gaps(host.lines().get(mark..).unwrap_or(&[]));
    let (verdict, note) = classify_data(t, &answer);
    if !matches!(verdict, DataVerdict::Same | DataVerdict::Skipped { .. }) {
        entry.reason = explain.explain_data(host, t, &verdict);
    }
    entry.model = Some(answer);
    entry.verdict = verdict;
    entry.note = note;
    entry
}

/// The verdict for one bulk or interrupt transfer, and a remark.
pub fn classify_data(t: &DataTransfer, model: &ModelAnswer) -> (DataVerdict, Option<String>) {
    let other = |model: &ModelAnswer| DataVerdict::Other {
        capture: t.status,
        model: model.to_string(),
    };
    if t.is_in() {
        if in_without_packet(t.status) {
            let note = Some(match t.status {
                Status::NoCompletion => "pending at the end of the capture".to_string(),
                s => format!("cancelled in the capture: {s}"),
            });
            return match model {
                ModelAnswer::Nothing => (DataVerdict::Same, note),
                ModelAnswer::Data(d) => (DataVerdict::ModelOnly { model: d.clone() }, note),
                m => (other(m), note),
            };
        }
        return match (t.status, model) {
            (Status::Ok, ModelAnswer::Data(m)) => {
                let cap = &t.data;
                if t.truncated {
                    let note = Some(format!(
                        "compared the {} captured bytes of {}",
                        cap.len(),
                        t.actual
                    ));
                    if m.get(..cap.len()) == Some(cap.as_slice()) && m.len() == t.actual as usize {
                        return (DataVerdict::Same, note);
                    }
                    return (differs(cap, m), note);
                }
                if cap == m {
                    (DataVerdict::Same, None)
                } else {
                    (differs(cap, m), None)
                }
            }
            (Status::Ok, ModelAnswer::Nothing) => (DataVerdict::CaptureOnly, None),
            (Status::Ok, ModelAnswer::Error(TransferError::Stall)) => {
                (DataVerdict::ModelStalls, None)
            }
            (Status::Stall, ModelAnswer::Error(TransferError::Stall)) => (DataVerdict::Same, None),
            (Status::Stall, _) => (DataVerdict::CaptureStalls, None),
            (_, m) => (other(m), None),
        };
    }
    match (t.status, model) {
        (Status::Ok, ModelAnswer::Accepted(n)) if *n as u64 == u64::from(t.actual) => {
            (DataVerdict::Same, None)
        }
        (Status::Ok, ModelAnswer::Error(TransferError::Stall)) => (DataVerdict::ModelStalls, None),
        (Status::Stall, ModelAnswer::Error(TransferError::Stall)) => (DataVerdict::Same, None),
        (Status::Stall, _) => (DataVerdict::CaptureStalls, None),
        (_, m) => (
            other(m),
            Some(format!(
                "the capture's device took {} of {} bytes",
                t.actual, t.requested
            )),
        ),
    }
}

fn differs(cap: &[u8], m: &[u8]) -> DataVerdict {
    let first = cap
        .iter()
        .zip(m)
        .position(|(a, b)| a != b)
        .unwrap_or(cap.len().min(m.len()));
    DataVerdict::Differs {
        capture: cap.to_vec(),
        model: m.to_vec(),
        first_difference: first,
    }
}

/// The model gaps among trace lines, as `request in state`.
fn model_gaps(lines: &[String]) -> Vec<String> {
    lines
        .iter()
        .filter(|l| l.contains("\"model_gap\""))
        .filter_map(|l| calametra_core::trace::parse_record(l, 0).ok())
        .filter(|r| r.kind == "model_gap")
        .map(|r| {
            let field = |k: &str| {
                r.data
                    .get(k)
                    .and_then(|v| v.as_str())
                    .unwrap_or("?")
                    .to_string()
            };
            format!("{} in {}", field("request"), field("state"))
        })
        .collect()
}

fn skip_reason(t: &ControlTransfer) -> Option<String> {
    let s = &t.setup;
    if s.request_type == 0x00 && s.request == 5 {
        return Some(format!(
            "SET_ADDRESS {} is the host controller's and the bus's business, not the model's",
            s.value
        ));
    }
    if let Status::SubmitError(e) = t.status {
        return Some(format!(
            "the submission failed on the host ({e}); the device saw nothing"
        ));
    }
    if !s.is_in() && t.truncated {
        return Some(format!(
            "the capture kept {} of the {} OUT bytes; the request cannot be resent",
            t.data.len(),
            s.length
        ));
    }
    None
}

/// The verdict for one transfer, and a remark.
pub fn classify(
    t: &ControlTransfer,
    model: &Result<Vec<u8>, TransferError>,
) -> (Verdict, Option<String>) {
    match (t.status, model) {
        (Status::Ok, Ok(m)) if t.is_in() => compare_in(t, m),
        (Status::Ok, Ok(_)) => (Verdict::Same, None),
        (Status::Ok, Err(TransferError::Stall)) => (Verdict::ModelStalls, None),
        (Status::Stall, Err(TransferError::Stall)) => (Verdict::Same, None),
        (Status::Stall, Ok(m)) => (Verdict::CaptureStalls { model: m.clone() }, None),
        (capture, m) => (
            Verdict::Other {
                capture,
                model: match m {
                    Ok(d) if t.is_in() => format!("answered {} bytes", d.len()),
                    Ok(_) => "accepted".into(),
                    Err(e) => e.to_string(),
                },
            },
            None,
        ),
    }
}

fn compare_in(t: &ControlTransfer, m: &[u8]) -> (Verdict, Option<String>) {
    let cap = &t.data;
    let first = cap
        .iter()
        .zip(m)
        .position(|(a, b)| a != b)
        .unwrap_or(cap.len().min(m.len()));
    if t.truncated {
        let note = Some(format!(
            "compared the {} captured bytes of {}",
            cap.len(),
            t.actual
        ));
        let prefix_same = m.get(..cap.len()) == Some(cap.as_slice());
        if prefix_same && m.len() == t.actual as usize {
            return (Verdict::Same, note);
        }
        let first = if prefix_same { cap.len() } else { first };
        return (
            Verdict::Differs {
                capture: cap.clone(),
                model: m.to_vec(),
                first_difference: first,
            },
            note,
        );
    }
    if cap.as_slice() == m {
        (Verdict::Same, None)
    } else {
        (
            Verdict::Differs {
                capture: cap.clone(),
                model: m.to_vec(),
                first_difference: first,
            },
            None,
        )
    }
}
