//! The `calametra export` command: its arguments, and each output asked for written from the
//! trace (the formats themselves are the parent module's and [`super::pcapng`]'s); with
//! `--frames` the trace's run is replayed in its test binary for its pictures.

use crate::output::{
    cargo_or_default, fail, is_stream, not_an_input, note_written, usage, write_output, CliError,
};
use crate::pictures;
use crate::replaying::run_replay_trial;
use calametra::env_names::SCANOUT;
use calametra_core::tracefile::load_replayable;
use clap::Args;
use std::path::{Path, PathBuf};

/// The arguments of `calametra export`.
#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("output").required(true).multiple(true).args(["chrome", "html", "pcapng"])))]
pub(crate) struct ExportArgs {
    /// A trace (`.jsonl`).
    file: PathBuf,
    /// Write a Chrome trace event file (opens in Perfetto or chrome://tracing); `-` is standard
    /// output.
    #[arg(long, value_name = "OUT.json")]
    chrome: Option<PathBuf>,
    /// Write a self-contained HTML timeline (every string from the trace escaped); `-` is
    /// standard output.
    #[arg(long, value_name = "OUT.html")]
    html: Option<PathBuf>,
    /// Write the run's transfers as a usbmon pcapng capture (link type 220; opens in
    /// Wireshark, reads in `compare`): each a submission and a completion with the status the
    /// Linux host would see (stall -32, timeout -2, cancel -104, disconnect -108, fault -71;
    /// short: status 0 with the short length); `-` is standard output.
    #[arg(long, value_name = "OUT.pcapng")]
    pcapng: Option<PathBuf>,
    /// With --html: replay the trace's run in its test binary (as `replay`), take every picture
    /// a device showed (each frame a flip showed), and embed them in the page, each linked from
    /// the event that showed it.
    #[arg(long, requires = "html")]
    frames: bool,
    /// The cargo for --frames (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
}

/// `export --frames`: replays `file` in its test binary with `CALAMETRA_SCANOUT` and reads back
/// every picture its run showed. The replay must pass (byte-exact), or the pictures would not
/// be this trace's.
fn export_frames(file: &Path, cargo: &str, to_stderr: bool) -> Result<Vec<super::Frame>, CliError> {
    load_replayable(file).map_err(fail)?;
    let tmp = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let dir = tmp.path().join("pictures");
    let r = run_replay_trial(file, cargo, &[(SCANOUT, dir.as_os_str())], to_stderr)?;
    if !r.passed || !r.ran {
        return Err(fail(format!(
            "--frames: the replay of {} failed (see the trial's output above), so the pictures it would give are not this trace's",
            file.display()
        )));
    }
    let index = pictures::read_index(&dir, file)?;
    let mut frames = Vec::new();
    for entry in index.pictures {
        let png = pictures::png(&dir, &entry)?;
        frames.push(super::Frame { entry, png });
    }
    Ok(frames)
}

/// `calametra export FILE (--chrome OUT.json | --html OUT.html [--frames] | --pcapng OUT.pcapng)..`.
pub(crate) fn export_cmd(a: &ExportArgs) -> Result<(), CliError> {
    let file = &a.file;
    if a.chrome.is_none() && a.html.is_none() && a.pcapng.is_none() {
        return Err(usage(
            "export needs --chrome OUT.json, --html OUT.html or --pcapng OUT.pcapng",
        ));
    }
    for out in [&a.chrome, &a.html, &a.pcapng].into_iter().flatten() {
        not_an_input(out, &[file])?;
    }
    // Read record by record, twice at most an export: a long trace is never held whole.
    let recs = super::TraceFile(file);
    let bad = |e: String| {
        let name = file.display().to_string();
        // A reading error names the file already; a record's names only its line.
        fail(if e.starts_with(&name) {
            e
        } else {
            format!("{name}: {e}")
        })
    };
    if let Some(out) = &a.chrome {
        write_output(out, super::chrome(&recs).map_err(bad)?.as_bytes())?;
        note_written(out, " (open it in Perfetto or chrome://tracing)");
    }
    if let Some(out) = &a.html {
        let title = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".to_string());
        let frames = if a.frames {
            export_frames(file, &cargo_or_default(&a.cargo), is_stream(out))?
        } else {
            Vec::new()
        };
        write_output(
            out,
            super::html(&recs, &title, &frames).map_err(bad)?.as_bytes(),
        )?;
        note_written(out, "");
    }
    if let Some(out) = &a.pcapng {
        let bytes = super::pcapng::pcapng(&recs).map_err(bad)?;
        write_output(out, &bytes)?;
        note_written(out, " (open it in Wireshark)");
    }
    Ok(())
}
