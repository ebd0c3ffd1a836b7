//! `calametra show`: the minimal story of a failure (a saved case, a trace or a trial's name),
//! printed with every string from the file cleaned; with --at STEP the world at that step.

use crate::export;
use crate::output::{cargo_or_default, clean, fail, CliError};
use crate::replaying::{file_or_trial, state_at};
use calametra::env_names::REPLAY_FILE;
use calametra_core::choices::story;
use calametra_core::tracefile::load_replayable;
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The arguments of `calametra show`.
#[derive(Args, Debug)]
pub(crate) struct ShowArgs {
    /// A regression file, a trace, or a trial's name (`path::scenario::seed::0x2a`: the
    /// trial is run once for its trace).
    file: PathBuf,
    /// With a trial's name: the package whose test binaries list it.
    #[arg(short = 'p', long = "package", value_name = "PKG")]
    package: Option<String>,
    /// Replay up to this step and print the world there (as `replay --at`).
    #[arg(long, value_name = "STEP")]
    at: Option<String>,
    /// With --at: write the pictures the devices show at STEP (a display's scanout) as PNGs
    /// into DIR (created; a symlink there is refused).
    #[arg(long, value_name = "DIR", requires = "at")]
    scanout: Option<PathBuf>,
    /// The cargo for --at (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
}

/// `calametra show FILE [--at STEP [--scanout DIR]]`.
pub(crate) fn show(a: &ShowArgs) -> Result<(), CliError> {
    use std::fmt::Write;
    let tmp_trial = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let file = file_or_trial(&a.file, &a.cargo, a.package.as_deref(), tmp_trial.path())?;
    if let Some(at) = &a.at {
        let cargo = cargo_or_default(&a.cargo);
        load_replayable(&file).map_err(fail)?;
        return state_at(&file, &cargo, at, a.scanout.as_deref());
    }
    // Through the core's bounded readers (a FIFO or `/dev/zero` is refused before it is read),
    // and record by record: a trace is read twice more below, never held whole.
    let loaded = calametra_core::tracefile::load_replay_header(&file).map_err(fail)?;
    let (events, hash) = (&loaded.events, &loaded.hash);
    let mut o = String::new();
    let Some(r) = &loaded.case else {
        return show_trace(&file, events, hash);
    };
    {
        let _ = writeln!(o, "{}", r.failure);
        let _ = writeln!(o, "scenario:  {}", r.scenario);
        let _ = writeln!(o, "signature: {}", r.signature);
        let _ = writeln!(o, "found by:  {} (base seed {})", r.found_by, r.base_seed);
        let _ = writeln!(o, "story:     {}", r.story);
        if !r.run_aloud.is_empty() {
            let _ = writeln!(o, "the run:   {}", r.run_aloud);
        }
        o.push_str(&calametra::report::event_list(&r.events, |_| String::new()));
        let _ = writeln!(o, "trace hash: {}", r.trace_hash);
        // The harness names a saved case's trial by its file name, not by the `id` inside it
        // (a renamed or copied file keeps its old id); a file not named as a case is replayed
        // through CALAMETRA_REPLAY_FILE.
        let stem = file
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| calametra_core::regress::is_case_file_name(n))
            .and_then(|n| n.strip_suffix(".json"));
        let command = match stem {
            Some(id) => calametra::report::replay_command(
                &r.package,
                &r.target,
                &format!("{}::regression::{id}", r.scenario),
                false,
            ),
            None => format!(
                "{REPLAY_FILE}={} {}",
                calametra::report::shell_quote(&file.display().to_string()),
                calametra::report::replay_command(
                    &r.package,
                    &r.target,
                    &format!("{}::replay", r.scenario),
                    false
                )
            ),
        };
        let _ = writeln!(o, "replay:    {command}");
        print!("{}", clean(&o));
    }
    Ok(())
}

/// `show` of a trace file: its summary, its records per kind, then what happened, printed as
/// the file is read (one record in memory at a time, whatever the trace's length).
fn show_trace(
    file: &Path,
    events: &[calametra_core::choices::Event],
    hash: &str,
) -> Result<(), CliError> {
    use calametra_core::trace::for_each_record;
    use std::io::Write;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut head = String::new();
    for_each_record(file, |r| {
        if r.deterministic {
            *counts.entry(r.kind.clone()).or_insert(0) += 1;
        }
        if r.kind == "summary" {
            head.clear();
            if let Some(f) = r.data.get("failure").and_then(|v| v.as_str()) {
                head.push_str(&format!("{f}\n"));
            }
            if let Some(sc) = r.data.get("scenario").and_then(|v| v.as_str()) {
                head.push_str(&format!("scenario: {sc}\n"));
            }
        }
        Ok(())
    })
    .map_err(|e| fail(e.to_string()))?;
    let mut o = head;
    o.push_str(&format!("story:    {}\n", story(events)));
    o.push_str(&format!("trace hash: {hash}\nrecords:\n"));
    for (k, n) in counts {
        o.push_str(&format!("  {k:<12} {n}\n"));
    }
    o.push_str("what happened:\n");
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // Every string here came from the file: no escape sequence reaches the terminal.
    let _ = out.write_all(clean(&o).as_bytes());
    for_each_record(file, |r| {
        if matches!(
            r.kind.as_str(),
            "transfer" | "fault" | "external" | "invariant" | "mark" | "model_gap" | "end"
        ) {
            let line = format!(
                "  #{:<5} {:>12} ns  {:<10} {}\n",
                r.seq,
                r.t_ns,
                r.actor,
                export::label(&r)
            );
            let _ = out.write_all(clean(&line).as_bytes());
        }
        Ok(())
    })
    .map_err(|e| fail(e.to_string()))?;
    let _ = out.flush();
    Ok(())
}
