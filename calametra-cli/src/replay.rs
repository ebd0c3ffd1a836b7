//! `calametra replay`: a saved case, a trace or a trial's name run again in its test binary,
//! byte-exact or a failure naming the first record that differs; with --at STEP the world at
//! that step.

use crate::output::{cargo_or_default, clean, fail, CliError};
use crate::pictures;
use crate::replaying::{file_or_trial, run_replay_trial, state_at};
use calametra::env_names::{SCANOUT, TRACE_OUT};
use calametra_core::choices::story;
use clap::Args;
use std::path::PathBuf;

/// The arguments of `calametra replay`.
#[derive(Args, Debug)]
pub(crate) struct ReplayArgs {
    /// A regression file (`calametra-regressions/...json`), a trace (`.jsonl`), or a trial's
    /// name (`path::scenario::seed::0x2a`: the trial is run once for its trace).
    file: PathBuf,
    /// With a trial's name: the package whose test binaries list it.
    #[arg(short = 'p', long = "package", value_name = "PKG")]
    package: Option<String>,
    /// Stop at this step (a scheduling point) and print the world there.
    #[arg(long, value_name = "STEP")]
    at: Option<String>,
    /// Write the pictures the devices show (a display's scanout) at --at STEP, or at the end of
    /// the replay, as PNGs into DIR (created; a symlink there is refused).
    #[arg(long, value_name = "DIR")]
    scanout: Option<PathBuf>,
    /// The cargo to run the test binary with (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
}

/// `calametra replay FILE [--cargo CARGO]`: replays a saved case or a trace file in its test
/// binary (`<scenario>::replay`, `CALAMETRA_REPLAY_FILE`), which checks the trace hash; the
/// trial also writes the replayed run's trace where `CALAMETRA_TRACE_OUT` says, and the records
/// of a trace file are compared with it field by field, so a file whose records were edited
/// fails naming the first edited record even when its summary's hash was kept. Without that
/// trace (a harness that does not write it) a trace file's records must still hash to its
/// summary's hash.
pub(crate) fn replay(a: &ReplayArgs) -> Result<(), CliError> {
    use calametra_core::divergence::{analyse, from_records, read, Options};
    use calametra_core::trace::hash_records;
    let tmp_trial = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let file = file_or_trial(&a.file, &a.cargo, a.package.as_deref(), tmp_trial.path())?;
    let loaded = calametra_core::tracefile::load_replay_file(&file).map_err(fail)?;
    let hash_version = loaded.hash_version;
    let (events, hash, recorded) = (loaded.events, loaded.hash, loaded.records);
    let cargo = cargo_or_default(&a.cargo);
    if let Some(at) = &a.at {
        return state_at(&file, &cargo, at, a.scanout.as_deref());
    }
    let what = match calametra_core::choices::count_events(&events) {
        0 => story(&events),
        n => format!(
            "{}: {}",
            calametra::report::count(n, "event"),
            story(&events)
        ),
    };
    println!(
        "{}",
        clean(&format!(
            "replaying {} ({what}), expecting {hash}",
            file.display()
        ))
    );
    let tmp = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let trace_out = tmp.path().join("replayed.jsonl");
    let pictures = tmp.path().join("pictures");
    let mut env = vec![(TRACE_OUT, trace_out.as_os_str())];
    if a.scanout.is_some() {
        env.push((SCANOUT, pictures.as_os_str()));
    }
    let r = run_replay_trial(&file, &cargo, &env, false)?;
    if !r.passed || !r.ran {
        return Err(fail(format!(
            "replay of {} failed (see the trial's output above)",
            file.display()
        )));
    }
    if let Some(out) = &a.scanout {
        pictures::copy_on_show(&pictures, out, &file, "at the end of the replay")?;
    }
    // The file's own records: what its summary's hash must cover.
    // (under the hash version the file records)
    let own = recorded
        .as_ref()
        .and_then(|r| hash_records(r, hash_version))
        .map(|h| h.to_string());
    let replayed = trace_out
        .exists()
        .then(|| read(&trace_out, None))
        .transpose()
        .map_err(|e| fail(format!("the replayed run's trace: {e}")))?;
    let deterministic = |t: &calametra_core::divergence::TraceRecs| {
        t.records.iter().filter(|r| r.deterministic).count()
    };
    match (&recorded, &replayed) {
        (Some(rec), Some(rep)) => {
            let mine = from_records(&file.display().to_string(), rec);
            let an = analyse(&mine, rep, Options::default());
            let (n, _) = an.deterministic_len();
            if an.identical() && own.as_deref() == Some(hash.as_str()) {
                println!("replay: {n}/{n} records, {hash} identical");
                return Ok(());
            }
            print!("{}", clean(&an.render()));
            let which = match an.divergent_records() {
                Some((Some(x), _)) => format!(
                    "record #{} (line {} of {}) is not what the replay wrote: {}",
                    an.matching(),
                    x.line_no,
                    file.display(),
                    an.fields.join(", ")
                ),
                Some((None, _)) => format!(
                    "{} ends after {} records; the replay goes on",
                    file.display(),
                    an.matching()
                ),
                None => "the record counts differ".to_string(),
            };
            Err(fail(format!(
                "replay: {}/{n} records reproduced; {which} (the file's records hash to {}, its summary says {hash}: the records were edited)",
                an.matching(),
                own.unwrap_or_default()
            )))
        }
        (Some(rec), None) => {
            let n = rec.iter().filter(|r| r.deterministic).count();
            match own {
                Some(own) if own != hash => Err(fail(format!(
                    "replay: the run replays to {hash}, but the {n} records of {} hash to {own}: the records were edited after the summary was written (the test binary wrote no {TRACE_OUT}, so the first edited record cannot be named)",
                    file.display()
                ))),
                _ => {
                    println!("replay: {n}/{n} records, {hash} identical");
                    Ok(())
                }
            }
        }
        (None, Some(rep)) => {
            let n = deterministic(rep);
            println!("replay: {n}/{n} records, {hash} identical");
            Ok(())
        }
        (None, None) => {
            println!("replay is byte-exact: {hash}");
            Ok(())
        }
    }
}
