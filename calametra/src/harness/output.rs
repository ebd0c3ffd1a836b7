//! What the harness shows and writes for a trial: a failure's screen (after the failure chain
//! minimized and saved it), the trace files under the target directory and `CALAMETRA_TRACE_OUT`,
//! the pictures of `CALAMETRA_SCANOUT`, and the message of a run that gave no verdict. Nothing
//! here decides whether a trial passes, builds trials or reads the environment.

use super::environment::absolute;
use super::Scenario;
use crate::__private::ScenarioDef;
use crate::env_names::{REGRESSIONS, SCANOUT, SEED, TRACE_OUT};
use crate::report::{self, Screen};
use calametra_core::chain::{self, Found, Handled};
use calametra_core::choices::{count_events, Event};
use calametra_core::explore::{Probe, Runner};
use calametra_core::regress::{self, Saved};
use calametra_core::sim::{Failure, RunResult};
use calametra_core::tracefile::{write_trace_summary, TraceSummary};
use std::path::{Path, PathBuf};

/// The Cargo target directory the test binary was built in: an absolute `CARGO_TARGET_DIR`;
/// else the target directory holding the binary (`tracefile::cargo_target_dir`; a relative
/// `CARGO_TARGET_DIR` is relative to the directory cargo ran in, while cargo runs a test binary
/// in its package's directory: resolved there it would put traces under the package); else a
/// relative `CARGO_TARGET_DIR` made absolute; else `<crate>/target`.
pub(super) fn target_dir(def: &ScenarioDef) -> PathBuf {
    let beside_exe = || {
        let exe = std::env::current_exe().ok()?;
        calametra_core::tracefile::cargo_target_dir(&exe)
    };
    match std::env::var_os("CARGO_TARGET_DIR")
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
    {
        Some(d) if d.is_absolute() => d,
        Some(d) => beside_exe().unwrap_or_else(|| absolute(&d)),
        None => beside_exe().unwrap_or_else(|| Path::new(def.manifest_dir).join("target")),
    }
}

/// Writes the pictures of `log` into `dir` (created) as PNGs, with the index
/// (`pictures.json`, [`PictureIndex`]); `only_on_show`: those on show at the run's end or stop.
/// A path there that is not a regular file (a symlink, a directory) is refused and left as it
/// is. Returns a line a picture, `<file> (<about>)`, or `none on show` when there are none.
fn write_pictures(
    dir: &Path,
    log: &calametra_core::picture::PictureLog,
    only_on_show: bool,
) -> Result<Vec<String>, String> {
    use calametra_core::picture::{PictureEntry, PictureIndex};
    let mut index = PictureIndex {
        format: "calametra.pictures".into(),
        version: 1,
        pictures: Vec::new(),
    };
    let mut lines = Vec::new();
    for (i, shown) in log.shown.iter().enumerate() {
        let on_show = log.at_end.contains(&i);
        if only_on_show && !on_show {
            continue;
        }
        let n = index.pictures.len() + 1;
        let mut entry = PictureEntry {
            file: None,
            error: None,
            device: shown.device_name.clone(),
            name: shown.name.clone(),
            step: shown.step,
            t_ns: shown.t_ns,
            records: shown.records,
            width: 0,
            height: 0,
            about: String::new(),
            on_show,
        };
        match &shown.picture {
            Ok(p) => {
                let file = PictureIndex::file_name(n, &shown.device_name, &shown.name);
                let path = dir.join(&file);
                write_new_or_regular(&path, &p.png)?;
                lines.push(format!("{} ({})", path.display(), p.about));
                entry.file = Some(file);
                (entry.width, entry.height, entry.about) = (p.width, p.height, p.about.clone());
            }
            Err(e) => {
                lines.push(format!("{} of {}: {e}", shown.name, shown.device_name));
                entry.error = Some(e.clone());
            }
        }
        index.pictures.push(entry);
    }
    write_new_or_regular(&dir.join(PictureIndex::FILE), index.to_json().as_bytes())?;
    if lines.is_empty() {
        lines.push(format!(
            "none on show (no device showed a picture; the index is {})",
            dir.join(PictureIndex::FILE).display()
        ));
    }
    Ok(lines)
}

/// Writes `path` atomically, unless something other than a regular file is there (a symlink,
/// a directory, a FIFO), which is refused, naming it, and left as it is.
fn write_new_or_regular(path: &Path, bytes: &[u8]) -> Result<(), String> {
    if let Ok(m) = std::fs::symlink_metadata(path) {
        if !m.file_type().is_file() {
            return Err(format!(
                "{}: is not a regular file (a symlink, a directory or a special file): refusing to replace it",
                path.display()
            ));
        }
    }
    regress::write_atomic(path, bytes).map_err(|e| e.to_string())
}

/// The first words of a trial's message when a run gave no verdict; grep a CI log for them.
pub const NO_VERDICT: &str = "calametra: NO VERDICT";

/// A run that gave no verdict (DESIGN 9: `emulator_blocked`) is neither a pass nor a failure
/// of the scenario, but libtest knows only passed, failed and ignored, and an ignored trial
/// would let CI pass without a verdict: the trial fails, and its message opens with a line of
/// its own, `calametra: NO VERDICT (emulator_blocked): <reason>` (`calametra: NO VERDICT:
/// <reason>` for another run that could not end), which no driver failure starts with. That
/// first line is what libtest prints under the trial's name and nextest puts in JUnit's
/// `<failure message>` (README, "No verdict").
pub(super) fn no_verdict(reason: String) -> String {
    let head = match reason.strip_prefix("emulator_blocked: ") {
        Some(why) => format!("{NO_VERDICT} (emulator_blocked): {why}"),
        None => format!("{NO_VERDICT}: {reason}"),
    };
    format!(
        "{head}\nThis is no verdict on the driver: the run did not reach its end, so it neither passed nor failed; libtest can only show the trial FAILED (README, \"No verdict\")."
    )
}

impl Scenario {
    fn traces_dir(&self) -> PathBuf {
        regress::scenario_dir(
            &target_dir(self.def)
                .join("calametra")
                .join("traces")
                .join(&self.target),
            &self.path,
        )
    }

    /// `CALAMETRA_TRACE_OUT`: writes the full trace of the run a trial made (its lines must
    /// have been kept).
    pub(super) fn write_trace_out(&self, r: &RunResult) -> Result<(), String> {
        let Some(out) = &self.env.trace_out else {
            return Ok(());
        };
        let failure = r.failure.as_ref().map(|f| f.to_string());
        self.write_trace(
            out,
            &r.lines,
            &r.events,
            &r.hash.to_string(),
            failure.as_deref(),
        )
        .map_err(|e| format!("{TRACE_OUT}: {e}"))
    }

    /// Writes a trace file of this scenario: the lines, then the summary with the events, the
    /// hash, the failure and the spec's SHA-256 (which a replay of the file checks).
    fn write_trace(
        &self,
        path: &Path,
        lines: &[String],
        events: &[Event],
        hash: &str,
        failure: Option<&str>,
    ) -> Result<(), String> {
        let spec = self.base.spec.as_ref().map(|s| s.sha256().to_string());
        write_trace_summary(
            path,
            lines,
            &TraceSummary {
                scenario: &self.path,
                package: self.def.package,
                target: &self.target,
                events,
                hash,
                failure,
                spec_sha256: Some(spec.as_deref()),
            },
        )
    }

    /// Minimizes, saves and reports a failure found by `trial`.
    pub(super) fn report(
        &self,
        runner: &dyn Runner,
        trial: &str,
        probe: Option<&Probe>,
        r: &RunResult,
        fail: &Failure,
    ) -> String {
        self.report_as(runner, trial, probe, r, fail, true).0
    }

    /// [`Self::report`]; `unexpected` failures go into the binary's summary of signatures.
    /// Also returns what the failure chain made of it.
    pub(super) fn report_as(
        &self,
        runner: &dyn Runner,
        trial: &str,
        probe: Option<&Probe>,
        r: &RunResult,
        fail: &Failure,
        unexpected: bool,
    ) -> (String, Handled) {
        let found = Found {
            trial,
            run: r,
            failure: fail,
        };
        let h = chain::handle(
            runner,
            &self.base,
            &self.owner(),
            self.env.base_seed,
            found,
            &*self.store(),
        );
        let (sig, shrunk, fin) = (&h.signature, &h.shrunk, &h.fin);
        let hash = fin.hash.to_string();
        // Named by the case and this run's own hash: every failing trial of a signature wrote
        // `<id>.jsonl` in turn, so it held another run than the saved case. A case's trace is
        // `<id>-<its trace hash's first 12 hex digits>.jsonl`.
        let short = hash.strip_prefix("sha256:").unwrap_or(&hash);
        let trace = self.traces_dir().join(format!(
            "{}-{}.jsonl",
            h.case.id,
            &short[..short.len().min(12)]
        ));
        let trace = self
            .write_trace(
                &trace,
                &fin.lines,
                &shrunk.events,
                &hash,
                Some(&h.case.failure),
            )
            .map(|_| trace);
        let regression = match &h.saved {
            Ok(Saved::Written(p)) | Ok(Saved::Unchanged(p)) => Ok(p.display().to_string()),
            Ok(Saved::KeptBetter { path, kept }) => Ok(format!(
                "{} (it keeps a better case of this signature, {} found by {}; this run's case of {} is not saved)",
                path.display(),
                report::count(count_events(&kept.events), "event"),
                kept.found_by,
                report::count(count_events(&shrunk.events), "event"),
            )),
            Ok(Saved::Off) => Ok(format!("not saved ({REGRESSIONS}=off)")),
            Err(e) => Err(e.clone()),
        };
        let note = match h.fails_differently() {
            Some(f) => format!("\nnote: the minimal run now fails differently: {f}\n"),
            None => String::new(),
        };
        let seed_line = match probe {
            Some(Probe::Seed(s)) => Some(format!(
                "seed:      {s:#x} (base seed {:#x}; {SEED} re-bases the seeds){}",
                self.env.base_seed,
                match &r.swarm {
                    Some(sw) => format!("\n{sw}"),
                    None => String::new(),
                }
            )),
            _ => None,
        };
        if unexpected {
            report::note_failure(&self.path, sig, trial, &shrunk.events, fail.is_model_gap());
        }
        let replay_trial = self.trial(&format!("regression::{}", h.case.id));
        let mut screen = Screen {
            failure: &h.case.failure,
            signature: sig,
            model_gap: fail.is_model_gap(),
            trial,
            seed_line,
            chain: &shrunk.chain_text(),
            events: &shrunk.events,
            lines: &fin.lines,
            hash: &hash,
            regression_json: regression.is_err().then(|| h.case.to_json()),
            regression,
            trace,
            replay: self.replay_command(&replay_trial),
            scanout: None,
        };
        // One full screen per signature per test binary; the others say where it is.
        if unexpected {
            if let Some(first) = report::claim_screen(&h.case.id, trial) {
                let case = match &screen.regression {
                    Ok(r) => r.clone(),
                    Err(e) => format!("not saved: {e}"),
                };
                let line = format!(
                    "same failure as {first} (its screen above): {}; this trial's minimal run: {}; case: {case}",
                    h.case.failure,
                    report::count(count_events(&shrunk.events), "event"),
                );
                return (line, h);
            }
        }
        // Only a full screen shows pictures: taking them replays the minimal run once more.
        screen.scanout = self
            .env
            .scanout
            .as_ref()
            .map(|dir| self.failure_pictures(runner, &shrunk.events, &dir.join(&h.case.id)));
        (format!("{}{note}", screen.render()), h)
    }

    /// `CALAMETRA_SCANOUT` for a failure: replays its minimal events watching pictures and
    /// writes those on show at the end into `dir`, one line a file for the screen.
    fn failure_pictures(
        &self,
        runner: &dyn Runner,
        events: &[Event],
        dir: &Path,
    ) -> Result<Vec<String>, String> {
        if self.is_guest() {
            return Err("not taken: a guest run's pictures are not watched".into());
        }
        let mut base = self.base.clone();
        base.pictures = true;
        let r = chain::replay(runner, &base, events, false).map_err(no_verdict)?;
        write_pictures(dir, &r.pictures.unwrap_or_default(), true)
    }

    /// `CALAMETRA_SCANOUT` for the `replay` trial: every picture the run just made showed, and
    /// the index, which marks those on show at its end (or at `CALAMETRA_STOP_AT`).
    pub(super) fn write_scanout(&self, r: &RunResult) -> Result<(), String> {
        let Some(dir) = &self.env.scanout else {
            return Ok(());
        };
        if self.is_guest() {
            return Err(format!(
                "{SCANOUT}: a guest run's pictures are not watched; replay an in-process scenario"
            ));
        }
        let log = r.pictures.clone().unwrap_or_default();
        write_pictures(dir, &log, false)
            .map(drop)
            .map_err(|e| format!("{SCANOUT}: {e}"))
    }
}
