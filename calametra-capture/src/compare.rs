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

mod classify;
mod report;

pub use classify::{classify, classify_data};
use classify::{model_gaps, skip_reason};
pub use report::*;

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
