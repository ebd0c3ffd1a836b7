//! Learning a device from captures (`calametra learn`): what one device did, read out of one or
//! more captures into a learned spec (`calametra.spec.learned`, [`format`](mod@format)) that
//! the replay model of `calametra-models` (`learned::Learned`) answers from.
//!
//! - [`select`]: which device of each capture (the only one, `--device BUS.ADDR`, `--id
//!   VID:PID`); an error lists the devices a capture shows.
//! - `build`: the device's transfers, in the order the device saw them, into keys (a control
//!   request by setup packet and OUT data, an OUT transfer by endpoint and data) with their
//!   outcomes in capture order, the IN replies that followed an OUT, the IN packets nobody asked
//!   for (scripted events), per-key latency and the complete descriptors.
//! - [`format`](mod@format): the spec's types, its one writer and its one reader.
//!
//! Learning is a function of the captures' bytes: the same captures give the same spec, byte
//! for byte (no time of the learning, no directory, sorted keys). Nothing here reads the clock
//! and nothing panics on input; a capture with no device, several devices and no selection, or
//! nothing to learn is an error naming the file and listing the devices it shows.
//!
//! ```no_run
//! use calametra_capture::learn::{learn, Input, Selection};
//!
//! let input = Input::load("dock.pcapng.gz")?;
//! let (spec, report) = learn(&[input], &Selection::Only)?;
//! std::fs::write("specs/dock.json", spec.to_json())?;
//! print!("{report}");
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod build;
pub mod format;
pub mod select;

pub use build::Counts;
pub use format::LearnedSpec;
pub use select::Selection;

use crate::Capture;
use calametra_core::error::Error;
use std::fmt;
use std::path::{Path, PathBuf};

/// One capture to learn from: its file's name and SHA-256, and what it holds.
#[derive(Clone, Debug)]
pub struct Input {
    /// The file's name, without its directory (what the spec's `source` records).
    pub file: String,
    /// SHA-256 of the file's bytes, hex.
    pub sha256: String,
    /// The parsed capture.
    pub capture: Capture,
}

impl Input {
    /// Reads and parses a capture file.
    pub fn load(path: impl AsRef<Path>) -> Result<Input, Error> {
        let path = path.as_ref();
        Input::parse(path, &crate::read_capture_file(path)?)
    }

    /// Parses capture bytes; `path` names the file (its last component is recorded).
    pub fn parse(path: impl Into<PathBuf>, bytes: &[u8]) -> Result<Input, Error> {
        let path = path.into();
        let file = path.file_name().map_or_else(
            || path.display().to_string(),
            |n| n.to_string_lossy().into(),
        );
        Ok(Input {
            file,
            sha256: calametra_core::trace::sha256_hex(bytes),
            capture: Capture::parse(path, bytes)?,
        })
    }
}

/// What `learn` made of each capture.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Per capture: its file, the device learned (bus, address) and the counts.
    pub captures: Vec<(String, (u16, u8), Counts)>,
    /// Keys, outcomes and events in the spec.
    pub control_keys: usize,
    /// OUT keys.
    pub out_keys: usize,
    /// Outcomes over all keys.
    pub outcomes: usize,
    /// Scripted events.
    pub events: usize,
    /// Descriptors kept.
    pub descriptors: usize,
}

impl fmt::Display for Report {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for (file, (bus, addr), c) in &self.captures {
            writeln!(
                f,
                "{file}: bus {bus} device {addr}: learned {} control transfers, {} OUT \
                 transfers, {} IN replies, {} IN events",
                c.control, c.out, c.replies, c.events
            )?;
            for (why, n) in &c.skipped {
                writeln!(f, "  skipped {n}: {why}")?;
            }
        }
        writeln!(
            f,
            "spec: {} control keys, {} OUT keys, {} outcomes, {} scripted events, {} \
             descriptors",
            self.control_keys, self.out_keys, self.outcomes, self.events, self.descriptors
        )
    }
}

/// Learns the selected device of every capture into one spec, outcomes in capture order (the
/// captures in the order given). Errors name the capture file.
pub fn learn(inputs: &[Input], selection: &Selection) -> Result<(LearnedSpec, Report), Error> {
    let mut learner = build::Learner::default();
    let mut report = Report::default();
    let mut spec = LearnedSpec::default();
    let mut id = None;
    for input in inputs {
        let transfers = input.capture.transfers();
        let device = select::select(&input.capture, &transfers.control, selection)?;
        let counts = learner.add(&transfers, device);
        if counts.control + counts.out + counts.events == 0 {
            let skipped: Vec<String> = counts
                .skipped
                .iter()
                .map(|(w, n)| format!("{n} skipped: {w}"))
                .collect();
            return Err(Error::File {
                path: input.capture.path.clone(),
                field: "(transfers)".into(),
                message: format!(
                    "nothing to learn of bus {} device {}: no transfer the device answered{}; \
                     {}",
                    device.0,
                    device.1,
                    if skipped.is_empty() {
                        String::new()
                    } else {
                        format!(" ({})", skipped.join(", "))
                    },
                    select::listing(&input.capture, &transfers.control)
                ),
            });
        }
        if id.is_none() {
            id = select::ids(&transfers.control).get(&device).copied();
        }
        spec.captures.push(format::CaptureSource {
            file: input.file.clone(),
            sha256: input.sha256.clone(),
            bus: device.0,
            address: device.1,
        });
        report.captures.push((input.file.clone(), device, counts));
    }
    if learner.is_empty() {
        return Err(Error::File {
            path: PathBuf::from("(captures)"),
            field: "(transfers)".into(),
            message: "no capture was given; nothing to learn".into(),
        });
    }
    let (descriptors, control, out, events, in_endpoints) = learner.finish();
    spec.name = match id {
        Some((v, p)) => format!("learned-{v:04x}-{p:04x}"),
        None => "learned".into(),
    };
    spec.id = id;
    report.control_keys = control.len();
    report.out_keys = out.len();
    report.outcomes = control.iter().map(|k| k.outcomes.len()).sum::<usize>()
        + out.iter().map(|k| k.outcomes.len()).sum::<usize>();
    report.events = events.len();
    report.descriptors = descriptors.len();
    spec.descriptors = descriptors;
    spec.control = control;
    spec.out = out;
    spec.events = events;
    spec.in_endpoints = in_endpoints;
    Ok((spec, report))
}
