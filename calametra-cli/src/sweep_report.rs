//! `calametra sweep-report`: the summaries of a sweep's partitions (and of several test
//! targets) merged into one report, and the merged summary written.

use crate::output::{
    clean, fail, is_stream, not_an_input, note_written, usage, write_output, CliError,
};
use crate::sweep;
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The arguments of `calametra sweep-report`.
#[derive(Args, Debug)]
pub(crate) struct SweepReportArgs {
    /// The partitions' summaries (`CALAMETRA_SWEEP_SUMMARY` files).
    #[arg(required = true, value_name = "SUMMARY.json")]
    summaries: Vec<PathBuf>,
    /// Write the merged summary here (`-`: standard output, the report then goes to standard
    /// error). A character device or FIFO is written through; a symlink, or one of the
    /// summaries read, is refused.
    #[arg(long, value_name = "MERGED.json")]
    out: Option<PathBuf>,
}

/// `calametra sweep-report A.json B.json [--out M.json]`: merges the summaries that the
/// partitions of one sweep wrote (`CALAMETRA_SWEEP_PARTITION=k/n`) and prints the report.
pub(crate) fn sweep_report(a: &SweepReportArgs) -> Result<(), CliError> {
    use calametra_core::sweep::{merge, Summary};
    if a.summaries.is_empty() {
        return Err(usage("sweep-report needs one or more SUMMARY.json files"));
    }
    // Summaries by test target: partitions of one target merge; targets are reported side by
    // side (what `calametra sweep --out DIR` leaves, one file per target).
    let mut groups: BTreeMap<(String, String), (Vec<Summary>, Option<u64>)> = BTreeMap::new();
    for p in &a.summaries {
        // A regular file within the document limit: a FIFO or /dev/zero is refused, not read.
        let text = calametra_core::input::read_regular(
            p,
            calametra_core::input::MAX_DOCUMENT_BYTES,
            "sweep summary",
        )
        .map_err(|e| fail(format!("{}: {e}", p.display())))?;
        let s = Summary::parse(p, &text).map_err(|e| fail(e.to_string()))?;
        let g = groups
            .entry((s.package.clone(), s.target.clone()))
            .or_default();
        calametra_core::sweep::check_mergeable(&s, &mut g.1)
            .map_err(|e| fail(format!("{}: {e}", p.display())))?;
        g.0.push(s);
    }
    let mut merged = Vec::new();
    for (_, (parts, _)) in groups {
        merged.push(merge(parts).map_err(fail)?);
    }
    let report = match merged.as_slice() {
        [one] => clean(&one.report()),
        many => clean(&sweep::report(many, &[])),
    };
    if a.out.as_deref().is_some_and(is_stream) {
        eprint!("{report}");
    } else {
        print!("{report}");
    }
    if let Some(out) = &a.out {
        let [one] = merged.as_slice() else {
            return Err(usage(&format!(
                "--out: the summaries are of {} test targets; a merged summary is of one (merge each target's apart)",
                merged.len()
            )));
        };
        let inputs: Vec<&Path> = a.summaries.iter().map(|p| p.as_path()).collect();
        not_an_input(out, &inputs)?;
        write_output(out, one.to_json().as_bytes())?;
        note_written(out, " (the merged summary)");
    }
    Ok(())
}
