//! Saved cases as the harness sees them: whose they are and where they are kept, the
//! `regression::<id>` trial that replays one and says whether it still fails, is fixed or is
//! stale (re-hashing a case of an older hash version), the `replay` trial of
//! `CALAMETRA_REPLAY_FILE`, the `finds::<invariant>` trial that must find, save and replay its
//! case byte-exactly, and the states file `calametra review` reads. Building the other trials,
//! screens and reading the environment live elsewhere in the harness.

use super::output::no_verdict;
use super::{cargo_target, test_trial, Scenario};
use crate::__private::ScenarioDef;
use crate::env_names::{REGRESSIONS, REPLAY_FILE, SCHEDULES, STATE_OUT};
use crate::report;
use calametra_core::chain::{self, CaseState, Owner};
use calametra_core::explore::{self, Found, Met, Probe, Runner};
use calametra_core::regress::{self, Regression, Store};
use calametra_core::sim::Failure;
use calametra_core::trace::{first_divergence, parse_kept, render_divergence};
use calametra_core::tracefile::Replayable;
use libtest_mimic::{Completion, Failed, Trial};
use std::path::Path;

/// The states of the saved cases this binary replayed, for `calametra review`
/// (`CALAMETRA_CASE_STATES=<file>`: one JSON object a line, written when the binary ends).
static STATES: std::sync::Mutex<Vec<serde_json::Value>> = std::sync::Mutex::new(Vec::new());

/// A path that is not UTF-8 is also written as `file_bytes` (its bytes in hex), so `review`
/// matches it to its file exactly instead of through a lossy name.
fn note_state(file: &Path, scenario: &str, state: &str, detail: &str) {
    let mut line = serde_json::json!({
        "file": file.display().to_string(),
        "scenario": scenario,
        "state": state,
        "detail": detail,
    });
    #[cfg(unix)]
    if file.to_str().is_none() {
        use std::os::unix::ffi::OsStrExt;
        line["file_bytes"] = calametra_core::hex::encode(file.as_os_str().as_bytes()).into();
    }
    if let Ok(mut v) = STATES.lock() {
        v.push(line);
    }
}

/// Writes the states file, listing this binary's scenarios too (a saved case of a scenario
/// not among them is unreferenced).
pub(super) fn write_states(path: &Path, scenarios: &[String]) -> Result<(), String> {
    let mut out = String::new();
    for s in scenarios {
        out.push_str(&serde_json::json!({ "scenario_defined": s }).to_string());
        out.push('\n');
    }
    if let Ok(v) = STATES.lock() {
        for line in v.iter() {
            out.push_str(&line.to_string());
            out.push('\n');
        }
    }
    regress::write_atomic(path, out.as_bytes()).map_err(|e| e.to_string())
}

/// What a `finds::` trial's runs met instead of its invariant, one line per outcome (`passed`
/// or a failure signature) with its count and the first runs' trial names: a failure an
/// `expect` scenario walks past is not its verdict, but it is shown, not swallowed.
fn met_text(scenario: &str, met: &Met) -> String {
    const NAMES: usize = 3;
    let mut out = String::from("what the runs met instead:");
    for (outcome, n, names) in met.groups(NAMES) {
        let more = match n.saturating_sub(names.len()) {
            0 => String::new(),
            k => format!(", and {k} more"),
        };
        let names: Vec<String> = names.iter().map(|t| format!("{scenario}::{t}")).collect();
        out.push_str(&format!(
            "\n  {}: {outcome} ({}{more})",
            report::count(n, "run"),
            names.join(", ")
        ));
    }
    report::printable(&out)
}

/// A failing trial for `--exact <scenario>::regression::<id>` when no such saved case exists.
pub(super) fn missing_case(s: &Scenario, name: &str, id: &str) -> Trial {
    let msg = match &s.regress_dir {
        Some(d) => {
            let file = d.join(format!("{id}.json"));
            match std::fs::symlink_metadata(&file) {
                Ok(m) if !m.is_file() => format!(
                    "no saved case `{id}`: {} is not a regular file (a saved case is a regular file named <id>.json)",
                    file.display()
                ),
                _ => format!(
                    "no saved case `{id}`: {} does not exist (is it committed in this checkout? `calametra review` lists the saved cases)",
                    file.display()
                ),
            }
        }
        None => format!("no saved case `{id}`: saved cases are off ({REGRESSIONS}=off)"),
    };
    test_trial(name, move || Err(msg.into()))
}

/// `CALAMETRA_REPLAY_FILE` naming a scenario that no trial of this binary replays: a file of
/// this package and test target whose scenario is not here is a failing `<scenario>::replay`
/// trial (renamed or moved), rather than no trial at all; a file of the same scenario in another
/// test target is said on standard error; any other file is another binary's.
pub(super) fn replay_elsewhere(
    file: &Replayable,
    first: &'static ScenarioDef,
    paths: &[String],
    trials: &mut Vec<Trial>,
) {
    let target = cargo_target(first);
    let name = format!("{}::replay", file.scenario);
    if trials.iter().any(|t| t.name() == name) || file.package != first.package {
        return;
    }
    if file.target == target && !paths.contains(&file.scenario) {
        let msg = format!(
            "{}: no scenario `{}` in {}'s test target `{target}` (renamed or moved? `--list` shows the scenarios)",
            file.path.display(),
            file.scenario,
            first.package
        );
        trials.push(test_trial(name, move || Err(msg.into())));
    } else if file.target != target && paths.contains(&file.scenario) {
        eprintln!(
            "calametra: {REPLAY_FILE} {} is a case of test target `{}`; this is `{target}`, which makes no replay trial for it",
            file.path.display(),
            file.target
        );
    }
}

impl Scenario {
    pub(super) fn owner(&self) -> Owner {
        Owner {
            package: self.def.package.into(),
            target: self.target.clone(),
            scenario: self.path.clone(),
        }
    }

    pub(super) fn store(&self) -> Box<dyn Store> {
        match &self.regress_dir {
            Some(d) => Box::new(regress::Dir(d.clone())),
            None => Box::new(regress::Off),
        }
    }

    /// `finds::<invariant>`: walks the sites (when listing could name them) and the seeds until
    /// the invariant breaks, minimizes and saves the case, and checks that the file it saved
    /// replays byte-exactly (same signature, same trace hash).
    pub(super) fn finds(&self, invariant: &str, sites: &[Probe]) -> Result<(), Failed> {
        self.with_runner(|runner| self.finds_with(runner, invariant, sites))
            .map_err(Failed::from)
    }

    fn finds_with(
        &self,
        runner: &dyn Runner,
        invariant: &str,
        sites: &[Probe],
    ) -> Result<(), String> {
        // The default run first: when it already breaks the invariant, it is what found it
        // (not the first seed that happens to run it again).
        let mut probes = vec![Probe::Baseline];
        probes.extend(sites.iter().cloned());
        probes.extend(self.seed_probes());
        let wanted = |f: &Failure| f.invariant() == Some(invariant);
        let (probe, r, before) =
            match explore::find(&probes, &self.base, runner, &wanted).map_err(no_verdict)? {
                Found::Yes(probe, r, before) => (probe, *r, before),
                Found::No(met) => {
                    return Err(format!(
                        "exploration ran out of budget ({}: the baseline, {} and {}) without breaking invariant `{invariant}`; widen it with {SCHEDULES}=N\n{}",
                        report::count(probes.len(), "run"),
                        report::count(sites.len(), "fault site"),
                        report::count(probes.len() - sites.len() - 1, "seed"),
                        met_text(&self.path, &met)
                    ))
                }
            };
        if self.env.verbose && !before.0.is_empty() {
            println!(
                "before {}::{}, {}",
                self.path,
                probe.trial_suffix(),
                met_text(&self.path, &before)
            );
        }
        let Some(f) = &r.failure else { return Ok(()) };
        let (text, handled) = self.report_as(
            runner,
            &self.trial(&probe.trial_suffix()),
            Some(&probe),
            &r,
            f,
            false,
        );
        if self.env.verbose {
            println!("{text}");
        }
        // An `expect` scenario's job is a saved case: one that could not be saved is a failure
        // (saving turned off is not).
        if let Err(e) = &handled.saved {
            return Err(format!(
                "found `{invariant}`, but its case could not be saved: {e}\n{text}"
            ));
        }
        // The case kept for the signature, read back from disk and replayed, is byte-exact.
        chain::verify(runner, &self.base, &handled)
            .map_err(|e| format!("found `{invariant}`, but {e}\n{text}"))
    }

    /// `regression::<id>`: replays a saved case. A guest case made for another build is not
    /// replayed: the trial is ignored at run time, with the reason (`made for another build`).
    pub(super) fn regression(&self, path: &Path) -> Result<Completion, Failed> {
        self.with_runner(|runner| self.regression_with(runner, path))
            .map_err(Failed::from)
    }

    fn regression_with(&self, runner: &dyn Runner, path: &Path) -> Result<Completion, String> {
        let reg = match Regression::load(path) {
            Ok(r) => r,
            Err(e) => {
                note_state(path, &self.path, "unreadable", &e.to_string());
                return Err(e.to_string());
            }
        };
        let trial = self.trial(&format!("regression::{}", reg.id));
        let state = chain::check_case(runner, &self.base, &self.owner(), &reg, true);
        let rehashed = self.rehash(path, &reg, &state, &trial);
        let retire = format!(
            "retire it with `calametra review --prune {}` (or delete {})",
            state.word(),
            path.display()
        );
        let (ok, detail) = match &state {
            CaseState::OtherBuild { recorded, this } => {
                let why = format!("made for another build ({recorded} vs {this})");
                note_state(path, &self.path, state.word(), &why);
                // nextest has no run-time skip: there the trial passes, and this line says why.
                eprintln!(
                    "calametra: {trial}: not replayed: {why}; {} holds a case that replays byte-exactly only with the QEMU build and guest image it records",
                    path.display()
                );
                return Ok(Completion::ignored_with(why));
            }
            CaseState::Foreign(e) => (false, format!("{}: foreign case: {e}", path.display())),
            CaseState::NoVerdict(e) => (false, no_verdict(e.clone())),
            CaseState::Stale(why) => (
                false,
                format!(
                    "stale: {why}\nThe saved case no longer describes this code, so its replay proves nothing (neither fixed nor failing).\nfile: {}\nevents: {}\nRe-explore to find the failure again if it still exists, then {retire}.",
                    path.display(),
                    reg.story
                ),
            ),
            CaseState::Fixed { run } => {
                let text = format!(
                    "fixed: every recorded event applied and the failure no longer happens ({})\nfile: {}\nevents: {}\ntrace hash now: {}\nKeep it as a regression test, or {retire}.",
                    reg.failure,
                    path.display(),
                    reg.story,
                    run.hash
                );
                // An `expect` scenario's case is its known bug, and strict replay demands the
                // recorded run: for them a fixed case is a failed trial.
                let expected_here = self.def.expect.is_some() || self.env.strict;
                if !expected_here {
                    eprintln!("calametra: {trial}: {}", text.replace('\n', "\n  "));
                }
                (!expected_here, text)
            }
            CaseState::Fails { exact: true, .. } if self.def.expect.is_some() || self.env.strict => {
                (true, format!("fails as recorded, byte-exactly{rehashed}"))
            }
            CaseState::Fails { exact, run } => {
                let f = run.failure.clone();
                let how = if *exact {
                    format!("reproduced byte-exactly{rehashed}")
                } else {
                    format!(
                        "same signature, but the trace hash is {} (recorded {}, hash version {}); replay is not byte-exact",
                        run.hash, reg.trace_hash, reg.hash_version
                    )
                };
                if let Some(f) = &f {
                    report::note_failure(&self.path, &f.signature(), &trial, &reg.events, f.is_model_gap());
                }
                (
                    false,
                    format!(
                        "saved failure still fails ({how}): {}\nminimal events: {}\nfile: {}\nreplay: {}",
                        reg.failure,
                        reg.story,
                        path.display(),
                        self.replay_command(&trial)
                    ),
                )
            }
            CaseState::FailsDifferently { run, failure } => {
                report::note_failure(
                    &self.path,
                    &failure.signature(),
                    &trial,
                    &reg.events,
                    failure.is_model_gap(),
                );
                (
                    false,
                    format!(
                        "saved failure now fails differently: {failure}\n  recorded: {} ({})\n  replayed: {}\nminimal events: {}\nfile: {}\nreplay: {}",
                        reg.failure,
                        reg.trace_hash,
                        run.hash,
                        reg.story,
                        path.display(),
                        self.replay_command(&trial)
                    ),
                )
            }
        };
        note_state(path, &self.path, state.word(), &detail);
        if ok {
            Ok(Completion::Completed)
        } else {
            Err(detail)
        }
    }

    /// A saved case of an older trace-hash version that replayed byte-exactly under it is
    /// re-hashed: the file is rewritten with the replay's hash of the current version (unless
    /// another writer changed it meanwhile), with a note on stderr. Returns the note for the
    /// trial's message (empty when nothing was to do).
    fn rehash(&self, path: &Path, reg: &Regression, state: &CaseState, trial: &str) -> String {
        let CaseState::Fails { exact: true, run } = state else {
            return String::new();
        };
        if reg.hash_version == calametra_core::trace::HASH_VERSION {
            return String::new();
        }
        let new = reg.rehashed(run.hash);
        let what = match new.replace(path, reg) {
            Ok(true) => "file rewritten".to_string(),
            Ok(false) => "file not rewritten: another writer changed it meanwhile".to_string(),
            Err(e) => format!("file not rewritten: {e}"),
        };
        let note = format!(
            "saved with trace-hash version {} ({}), which this replay reproduced byte-exactly; re-hashed to version {}: {} ({what})",
            reg.hash_version,
            reg.trace_hash,
            new.hash_version,
            new.trace_hash
        );
        eprintln!("calametra: {trial}: {}: {note}", path.display());
        format!("; {note}")
    }

    /// `CALAMETRA_REPLAY_FILE`: replays a regression file or a trace file byte-exactly.
    pub(super) fn replay_file(&self, file: &Replayable) -> Result<(), Failed> {
        self.with_runner(|runner| self.replay_file_with(runner, file))
            .map_err(Failed::from)
    }

    /// Whether `file` (`CALAMETRA_REPLAY_FILE`) is one of this scenario's: its scenario path,
    /// and its package and test target when it names them.
    pub(super) fn owns(&self, file: &Replayable) -> bool {
        file.scenario == self.path
            && (file.package.is_empty() || file.package == self.def.package)
            && (file.target.is_empty() || file.target == self.target)
    }

    fn replay_file_with(&self, runner: &dyn Runner, file: &Replayable) -> Result<(), String> {
        let path = &file.path;
        // A file recorded against another spec replays into another world: its verdict would
        // prove nothing (a trace that does not record its spec is replayed unchecked).
        if let Some(recorded) = &file.spec_sha256 {
            let now = self.base.spec.as_ref().map(|s| s.sha256().to_string());
            if *recorded != now {
                let word = |h: &Option<String>| match h {
                    Some(h) => format!("sha256 {h}"),
                    None => "no spec".to_string(),
                };
                return Err(format!(
                    "stale: {} was recorded against another spec ({}; the scenario now has {}), so its replay proves nothing; re-explore to record it again",
                    path.display(),
                    word(recorded),
                    word(&now)
                ));
            }
        }
        let events = &file.events;
        let mut base = self.base.clone();
        base.pictures = self.env.scanout.is_some();
        if let Some((at, out)) = &self.env.stop_at {
            let mut c = calametra_core::explore::replay_config(&base, events);
            c.stop_at = Some(*at);
            let r = runner.run(c).map_err(no_verdict)?;
            self.write_scanout(&r)?;
            let state = r.state.as_ref().ok_or_else(|| {
                format!("the run gave no state at step {at} (a guest run does not describe its world yet)")
            })?;
            return regress::write_atomic(out, state.to_json().as_bytes())
                .map_err(|e| format!("{STATE_OUT}: {e}"));
        }
        let r = chain::replay(runner, &base, events, true).map_err(no_verdict)?;
        self.write_scanout(&r)?;
        self.write_trace_out(&r)?;
        let hash = &file.hash;
        // A file of an older hash version is checked under that version (the replay kept its
        // lines); the replay's own hash is the current version's.
        let replayed = if file.hash_version == calametra_core::trace::HASH_VERSION {
            Some(r.hash)
        } else {
            calametra_core::trace::hash_records(&parse_kept(&r.lines), file.hash_version)
        };
        if replayed.is_some_and(|h| h.to_string() == *hash) {
            if file.hash_version != calametra_core::trace::HASH_VERSION {
                eprintln!(
                    "calametra: {}: recorded with trace-hash version {} and reproduced byte-exactly under it; under version {} its hash is {}",
                    path.display(),
                    file.hash_version,
                    calametra_core::trace::HASH_VERSION,
                    r.hash
                );
            }
            return Ok(());
        }
        let mut msg = format!(
            "replay of {} is not byte-exact\n  recorded: {hash} (hash version {})\n  replayed: {}\n",
            path.display(),
            file.hash_version,
            replayed.map_or_else(|| "(no hash of that version)".to_string(), |h| h.to_string())
        );
        // An event that did not apply (an unknown external, a step past the run's end) is
        // the likeliest reason: say which.
        if let Some(i) = calametra_core::choices::first_unapplied(events, &r.events) {
            msg.push_str(&format!(
                "  event {} (`{}`) did not apply: {}\n",
                i + 1,
                events[i],
                chain::explain_unapplied(&events[i], &r)
            ));
        }
        if let Some(recorded) = &file.records {
            let now = parse_kept(&r.lines);
            if let Some(d) = first_divergence(recorded, &now) {
                msg.push_str(&render_divergence(recorded, &d, 20));
            }
        }
        Err(msg)
    }
}
