//! The harness side of a sweep (`CALAMETRA_SWEEP`): one `<scenario>::sweep` trial per
//! in-process scenario sharing the budget, the scenario's seeded or guided runs handed to
//! [`crate::sweep`], each signature's kept run through the failure chain, the `guided::<j>`
//! trial that remakes a guided find by its name, and the binary's sweep summary. The runs
//! themselves, the corpus and the budget are [`crate::sweep`]'s; nothing here reads the
//! environment.

use super::environment::{Env, SweepEnv};
use super::output::{no_verdict, target_dir};
use super::{cargo_target, test_trial, Scenario};
use crate::__private::{Body, ScenarioDef};
use crate::env_names::{SWEEP_CORPUS, SWEEP_SUMMARY};
use crate::report;
use crate::sweep;
use calametra_core::explore::{self, InProcess, Probe, Runner};
use calametra_core::regress;
use calametra_core::sweep::{Partition, ScenarioSweep, Summary};
use libtest_mimic::{Arguments, Failed, Trial};
use std::path::{Path, PathBuf};

/// The scenarios this binary swept, with the wall time each took.
static SWEPT: std::sync::Mutex<Vec<(ScenarioSweep, std::time::Duration)>> =
    std::sync::Mutex::new(Vec::new());

/// Whether libtest-mimic will run the sweep trial `name` of the scenario at `path`: the
/// filter (or `--exact`) and every `--skip` as it applies them, and no `--ignored` (a sweep
/// trial is never ignored, so `--ignored` runs none).
fn sweep_selected(args: &Arguments, path: &str, name: &str) -> bool {
    let chosen = match (&args.filter, args.exact) {
        (None, _) => true,
        (Some(f), true) => f == name || f == path,
        (Some(f), false) => name.contains(f.as_str()),
    };
    let skipped = args.skip.iter().any(|k| match args.exact {
        true => k == name,
        false => name.contains(k.as_str()),
    });
    chosen && !skipped && !args.ignored
}

/// Why no scenario is swept, for the error a sweep of nothing ends with.
pub(super) fn nothing_swept(defs: &[&'static ScenarioDef], args: &Arguments) -> String {
    let sim = defs
        .iter()
        .filter(|d| matches!(d.func, Body::Sim(_)))
        .count();
    if defs.is_empty() {
        "this binary holds no scenario".into()
    } else if sim == 0 {
        "this binary's scenarios are all guest scenarios, which are not swept (a guest run takes seconds)".into()
    } else if args.ignored {
        "--ignored selects ignored trials, and sweep trials are never ignored".into()
    } else {
        format!(
            "no `<scenario>::sweep` trial matches the filter{} (list them with --list)",
            if args.skip.is_empty() {
                ""
            } else {
                " and --skip"
            }
        )
    }
}

/// The sweep's outputs, checked before any run: the summary's path must be a regular file or
/// nothing (never a directory, a symlink or a FIFO), and the corpus's a directory or nothing.
pub(super) fn check_sweep_outputs(def: Option<&ScenarioDef>, sw: &SweepEnv) -> Result<(), String> {
    if let Some(def) = def {
        let path = summary_path(def, sw);
        regress::check_replaceable(&path).map_err(|e| format!("{SWEEP_SUMMARY}: {e}"))?;
    }
    if let Some(Some(dir)) = &sw.guide {
        if let Ok(m) = std::fs::symlink_metadata(dir) {
            if !m.is_dir() {
                return Err(format!(
                    "{SWEEP_CORPUS}={}: not a directory (expected a directory for the corpus, made when missing)",
                    dir.display()
                ));
            }
        }
    }
    Ok(())
}

/// Where this binary's sweep summary goes: `CALAMETRA_SWEEP_SUMMARY`, else
/// `target/calametra/sweeps/<package>-<target>-<k>of<n>.json`.
fn summary_path(def: &ScenarioDef, sw: &SweepEnv) -> PathBuf {
    sw.summary.clone().unwrap_or_else(|| {
        target_dir(def)
            .join("calametra")
            .join("sweeps")
            .join(format!(
                "{}-{}-{}of{}.json",
                def.package,
                cargo_target(def),
                sw.partition.k,
                sw.partition.n
            ))
    })
}

/// The sweep's trials: one `path::sweep` per in-process scenario, run one at a time (each
/// uses every core), sharing the budget; and how many of them will run.
pub(super) fn sweep_trials(
    defs: &[&'static ScenarioDef],
    env: &Env,
    sw: &SweepEnv,
    args: &Arguments,
) -> (Vec<Trial>, usize) {
    let selected: Vec<&&'static ScenarioDef> = defs
        .iter()
        .filter(|d| matches!(d.func, Body::Sim(_)))
        .filter(|d| sweep_selected(args, &d.path(), &format!("{}::sweep", d.path())))
        .collect();
    let stop = sweep::Stop::share(sw.budget, selected.len());
    let mut trials = Vec::new();
    for def in defs {
        let name = format!("{}::sweep", def.path());
        if matches!(def.func, Body::Guest(_)) {
            continue;
        }
        match Scenario::new(def, env) {
            Ok(s) => {
                let sw = sw.clone();
                trials.push(test_trial(name, move || s.sweep(&sw, stop)));
            }
            Err(e) => trials.push(test_trial(name, move || Err(e.into()))),
        }
    }
    (trials, selected.len())
}

/// Seconds in all: a fold from +0.0, since an empty `f64` sum is -0.0, which a summary printed
/// as "in -0.0s".
fn total_seconds(ds: impl Iterator<Item = std::time::Duration>) -> f64 {
    ds.fold(0.0, |a, d| a + d.as_secs_f64())
}

/// Writes this binary's sweep summary and returns the closing report.
pub(super) fn finish_sweep(
    def: Option<&ScenarioDef>,
    env: &Env,
    sw: &SweepEnv,
) -> Result<String, String> {
    let Some(def) = def else {
        return Ok(String::new());
    };
    let mut swept = SWEPT.lock().map(|v| v.clone()).unwrap_or_default();
    swept.sort_by(|a, b| a.0.scenario.cmp(&b.0.scenario));
    let target = cargo_target(def);
    let path = summary_path(def, sw);
    let summary = Summary {
        format: calametra_core::sweep::FORMAT.into(),
        version: calametra_core::sweep::VERSION,
        package: def.package.into(),
        target: target.clone(),
        base_seed: format!("{:#x}", env.base_seed),
        partitions: vec![sw.partition.to_string()],
        budget: sw.budget_text.clone(),
        wall_s: total_seconds(swept.iter().map(|(_, d)| *d)),
        threads: sw.threads as u64,
        scenarios: swept.into_iter().map(|(s, _)| s).collect(),
        interrupted: sweep::interrupted(),
    };
    regress::write_atomic(&path, summary.to_json().as_bytes()).map_err(|e| e.to_string())?;
    Ok(format!("{}summary: {}\n", summary.report(), path.display()))
}

impl Scenario {
    /// A guided sweep's tally, wall time and whether it started from an empty corpus (then
    /// its finds are named `guided::..` and remade by that name); its corpus read from and
    /// written back to `<dir>/<scenario path>.json` when a directory is given.
    fn guided_sweep(
        &self,
        job: &sweep::Job<'_>,
        stop: sweep::Stop,
        sw: &SweepEnv,
        dir: Option<&Path>,
    ) -> Result<(sweep::Tally, std::time::Duration, bool), Failed> {
        let file = dir.map(|d| d.join(format!("{}.json", self.path.replace("::", "."))));
        let corpus = match &file {
            Some(f) if f.exists() => {
                // A regular file within the trace limit (a FIFO there must not hang the sweep).
                let text = calametra_core::input::read_regular(
                    f,
                    calametra_core::input::MAX_TRACE_BYTES,
                    "corpus",
                )
                .map_err(|e| format!("{SWEEP_CORPUS}: {}: {e}", f.display()))?;
                sweep::Corpus::parse(f, &text).map_err(|e| e.to_string())?
            }
            _ => sweep::Corpus::new(&self.path),
        };
        let from_empty = corpus.entries.is_empty();
        let (tally, wall, corpus) = sweep::run_guided(job, stop, sw.partition, sw.threads, corpus);
        if let Some(f) = &file {
            regress::write_atomic(f, corpus.to_json().as_bytes()).map_err(|e| e.to_string())?;
        }
        Ok((tally, wall, from_empty))
    }

    /// `guided::<j>` (`guided::<k>of<n>::<j>`): run `j` of the guided sweep of this scenario
    /// from the base seed (partition `k/n`), made again ([`sweep::guided_input`]: the rounds
    /// before it are run again, from an empty corpus) and run as a seed trial is: a failure
    /// is minimized, saved and reported under this name, on the configuration a sweep runs
    /// (the seeded trials', [`Scenario::seeded`]).
    pub(super) fn guided(&self, partition: Partition, j: u64) -> Result<(), Failed> {
        let Body::Sim(func) = &self.def.func else {
            return Err("guest scenarios are not swept (a guest run takes seconds)".into());
        };
        let seeded = self.seeded(func);
        let job = sweep::Job {
            path: &seeded.path,
            func: *func,
            base: &seeded.base,
            base_seed: self.env.base_seed,
        };
        let input = sweep::guided_input(
            &job,
            partition,
            sweep::default_threads(),
            sweep::Corpus::new(&self.path),
            j,
        );
        let (config, probe) = match input {
            sweep::Input::Fresh(seed) => (
                Probe::Seed(seed).config(&seeded.base),
                Some(Probe::Seed(seed)),
            ),
            sweep::Input::Mutant { events, .. } => {
                (explore::replay_config(&seeded.base, events), None)
            }
        };
        let trial = self.trial(&sweep::guided_suffix(partition, j));
        self.with_runner(|runner| {
            let r = runner.run(config).map_err(no_verdict)?;
            self.write_trace_out(&r)?;
            match &r.failure {
                None => Ok(()),
                Some(f) if self.def.expect.is_some_and(|e| f.invariant() == Some(e)) => Ok(()),
                Some(f) => Err(self.report(runner, &trial, probe.as_ref(), &r, f)),
            }
        })
        .map_err(Failed::from)
    }

    /// `path::sweep`: seeded runs for the budget on every core; each signature's kept run (the
    /// shortest, the smaller seed on ties) goes through the failure chain and is saved like
    /// any other case. Fails when a failure other than an `expect` scenario's was met.
    fn sweep(&self, sweep: &SweepEnv, stop: sweep::Stop) -> Result<(), Failed> {
        let Body::Sim(func) = &self.def.func else {
            return Err("guest scenarios are not swept (a guest run takes seconds)".into());
        };
        // Seeds run as their `seed::` trials run them (the baseline's horizon and task choices),
        // so a sweep's find named `seed::0x..` reproduces with `--exact` and replays as one.
        self.seeded(func).sweep_seeded(sweep, stop, func)
    }

    fn sweep_seeded(
        &self,
        sweep: &SweepEnv,
        stop: sweep::Stop,
        func: &fn(&mut crate::Sim),
    ) -> Result<(), Failed> {
        let job = sweep::Job {
            path: &self.path,
            func: *func,
            base: &self.base,
            base_seed: self.env.base_seed,
        };
        let (mut tally, wall, named) = match &sweep.guide {
            None => {
                let (t, w) = sweep::run(&job, stop, sweep.partition, sweep.threads);
                (t, w, false)
            }
            Some(dir) => self.guided_sweep(&job, stop, sweep, dir.as_deref())?,
        };
        tally.declared_marks = (self.def.marks)();
        tally.declared_marks.sort();
        let mut screens = Vec::new();
        let mut unexpected = 0;
        // Finds the regressions directory could not take: the sweep fails with them (a find
        // that is not saved is lost when the process ends), expected ones included.
        let mut unsaved: Vec<String> = Vec::new();
        let runner = InProcess(func);
        // Signatures a known findings file lists: met, minimized and saved, not failures.
        let mut known = std::collections::BTreeMap::new();
        for (sig, g) in &tally.signatures {
            let account = sweep
                .known
                .as_deref()
                .and_then(|k| k.find(self.def.package, &self.path, sig))
                .map(|k| k.account.clone());
            if let Some(events) = &g.events_list {
                // A guided sweep's mutant: its events are the run.
                let Ok(r) = runner.run(explore::replay_config(&self.base, events)) else {
                    continue;
                };
                let Some(f) = &r.failure else { continue };
                let expected =
                    account.is_some() || self.def.expect.is_some_and(|e| f.invariant() == Some(e));
                unexpected += usize::from(!expected);
                // Named by its place in the guided sequence when the sweep started from an
                // empty corpus (`--exact` remakes it); a corpus loaded from a directory is not
                // in the name, so that find is the sweep's, reproduced by its saved case.
                let trial = match sweep::guided_run_of(&g.seed, sweep.partition) {
                    Some(j) if named => self.trial(&sweep::guided_suffix(sweep.partition, j)),
                    _ => self.trial("sweep"),
                };
                let (text, h) = self.report_as(&runner, &trial, None, &r, f, !expected);
                if let Err(e) = &h.saved {
                    unsaved.push(format!("{}: {e}", h.case.failure));
                }
                screens.push(text);
                if let Some(a) = account {
                    known.insert(sig.clone(), a);
                }
                continue;
            }
            let Some(seed) = g
                .seed
                .strip_prefix("0x")
                .and_then(|h| u64::from_str_radix(h, 16).ok())
            else {
                continue;
            };
            let probe = Probe::Seed(seed);
            let Ok(r) = runner.run(probe.config(&self.base)) else {
                continue;
            };
            let Some(f) = &r.failure else { continue };
            let expected =
                account.is_some() || self.def.expect.is_some_and(|e| f.invariant() == Some(e));
            if !expected {
                unexpected += 1;
            }
            let trial = self.trial(&probe.trial_suffix());
            let (text, h) = self.report_as(&runner, &trial, Some(&probe), &r, f, !expected);
            if let Err(e) = &h.saved {
                unsaved.push(format!("{}: {e}", h.case.failure));
            }
            screens.push(text);
            if let Some(a) = account {
                known.insert(sig.clone(), a);
            }
        }
        if let Ok(mut v) = SWEPT.lock() {
            v.push((
                calametra_core::sweep::ScenarioSweep {
                    scenario: self.path.clone(),
                    tally: tally.clone(),
                    known,
                    expect: self.def.expect.map(String::from),
                },
                wall,
            ));
        }
        if !unsaved.is_empty() {
            return Err(format!(
                "the sweep ({}) could not save {} (its case is printed on the screen below; fix the directory and sweep again):\n{}\n{}",
                report::count(tally.runs as usize, "run"),
                report::count(unsaved.len(), "find"),
                unsaved.join("\n"),
                screens.join("\n")
            )
            .into());
        }
        // An `expect` scenario's bug not reached fails a sweep of a number of runs (the same
        // runs on every machine); under a time budget, how many runs fit is the host's speed, so
        // the report says it was not reached and the scenario's `finds::` trial pins the bug.
        if let (Some(inv), calametra_core::sweep::Budget::Runs(_)) =
            (self.def.expect, &sweep.budget)
        {
            if !tally
                .signatures
                .values()
                .any(|g| g.failure.starts_with(&format!("invariant `{inv}` broke")))
            {
                return Err(format!(
                    "the sweep ({}) did not break invariant `{inv}`",
                    report::count(tally.runs as usize, "run")
                )
                .into());
            }
        }
        if unexpected == 0 {
            return Ok(());
        }
        Err(format!(
            "the sweep met {} in {}:\n{}",
            report::count(unexpected, "failure signature"),
            report::count(tally.runs as usize, "run"),
            screens.join("\n")
        )
        .into())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_time_at_all_reads_as_zero_seconds_not_minus_zero() {
        let t = super::total_seconds(std::iter::empty());
        assert_eq!(format!("{t:.1}s"), "0.0s");
        let two = [std::time::Duration::from_millis(1500); 2];
        assert_eq!(super::total_seconds(two.into_iter()), 3.0);
    }
}
