//! `calametra learn`: one device's traffic in one or more captures into a learned spec
//! (`calametra.spec.learned`, see DESIGN.md), and `calametra compare` of a learned spec, which
//! replays the whole capture (control, bulk, interrupt) against the replay model.
//!
//! The spec is written atomically through the tool's one output writer; the same captures give
//! the same bytes. Bad input exits 1 with a message naming the file (and the offset or field);
//! a bad argument exits 2.

use crate::input::{capture_magic_ok, read_bounded};
use crate::output::{clean, is_stream, note_written, write_output, CliError};
use calametra_capture::learn::{learn as learn_captures, Input, Selection};
use calametra_core::input::MAX_TRACE_BYTES;
use clap::Args;
use std::path::PathBuf;

/// The arguments of `calametra learn`.
#[derive(Args, Debug)]
pub(crate) struct LearnArgs {
    /// A capture: pcap or pcapng (usbmon link type 189 or 220) or usbmon text, maybe gzipped.
    /// Repeat for several; their outcomes are kept in the order given.
    #[arg(long, value_name = "CAPTURE", required = true)]
    pub(crate) capture: Vec<PathBuf>,
    /// The device to learn, by bus and address (`6.25`); needed when a capture shows several.
    #[arg(long, value_name = "BUS.ADDR", conflicts_with = "id")]
    pub(crate) device: Option<String>,
    /// The device to learn, by the ids of its device descriptor (`0711:5601`).
    #[arg(long, value_name = "VID:PID")]
    pub(crate) id: Option<String>,
    /// Where to write the spec (`specs/NAME.json`; `-` for standard output).
    #[arg(long, value_name = "SPEC")]
    pub(crate) out: PathBuf,
}

/// `calametra learn --capture FILE [--capture FILE ...] [--device BUS.ADDR | --id VID:PID]
/// --out SPEC`.
pub(crate) fn learn(a: &LearnArgs) -> Result<(), CliError> {
    let selection = match (&a.device, &a.id) {
        (Some(d), _) => {
            Selection::parse_device(d).map_err(|e| CliError(format!("--device {e}"), 2))?
        }
        (None, Some(i)) => Selection::parse_id(i).map_err(|e| CliError(format!("--id {e}"), 2))?,
        (None, None) => Selection::Only,
    };
    let mut inputs = Vec::new();
    for path in &a.capture {
        let bytes = read_bounded(path, MAX_TRACE_BYTES, "capture", Some(capture_magic_ok))?;
        inputs.push(Input::parse(path, &bytes).map_err(|e| CliError(e.to_string(), 1))?);
    }
    let (spec, report) =
        learn_captures(&inputs, &selection).map_err(|e| CliError(e.to_string(), 1))?;
    write_output(&a.out, &spec.to_json())?;
    if is_stream(&a.out) {
        eprint!("{}", clean(&report.to_string()));
    } else {
        print!("{}", clean(&report.to_string()));
    }
    note_written(&a.out, &format!(" ({})", spec.name));
    Ok(())
}
