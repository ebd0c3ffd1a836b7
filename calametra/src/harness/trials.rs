//! A scenario's trials: the libtest-mimic trials one scenario makes (its saved cases first,
//! `replay`, `baseline`, `marks`, `finds::..`, a site trial per fault site its baseline found
//! and a trial per seed, and those asked for by an exact name that listing does not make), the
//! bodies of the baseline, site, seed and marks trials, and the configuration its seeded trials
//! run on. Saved cases' trials, sweeps, output and the environment live in their own files.

use super::output::no_verdict;
use super::Scenario;
use crate::__private::Body;
use crate::env_names::SCHEDULES;
use crate::report;
use crate::sweep;
use calametra_core::explore::{self, Probe, Runner};
use calametra_core::regress;
use calametra_core::sim::RunResult;
use calametra_core::sweep::Partition;
use calametra_core::trace::{first_divergence, parse_kept, render_divergence};
use libtest_mimic::{Completion, Failed, Trial};
use std::collections::BTreeMap;
use std::sync::Arc;

/// Why a guest scenario's trials are ignored by default, and how to run them.
pub const GUEST_IGNORED: &str = "guest scenarios run a Linux guest under the lockstep QEMU (a few seconds a run from its snapshot, which the first run makes in about 15 s): their trials are ignored unless asked for with --ignored or --include-ignored (cargo nextest run --run-ignored all), after scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh";

/// `guided`: a guided sweep's find asked for by its exact name (`path::guided::..`): the
/// partition and the run.
pub(super) fn trials_for(
    s: Arc<Scenario>,
    requested: &[Probe],
    guided: Option<(Partition, u64)>,
) -> Vec<Trial> {
    let guest = s.is_guest();
    let mut trials = trials_unmarked(s, requested, guided);
    if guest {
        trials = trials
            .into_iter()
            .map(|t| t.with_ignored_flag(true))
            .collect();
    }
    trials
}

fn trials_unmarked(
    s: Arc<Scenario>,
    requested: &[Probe],
    guided: Option<(Partition, u64)>,
) -> Vec<Trial> {
    let mut trials = Vec::new();
    // A guided sweep's find asked for by its exact name, made for it on the configuration a
    // sweep uses (its own discovery, as the sweep's).
    if let Some((partition, j)) = guided {
        if !s.is_guest() {
            let s2 = (*s).clone_shallow();
            trials.push(test_trial(
                s.trial(&sweep::guided_suffix(partition, j)),
                move || s2.guided(partition, j),
            ));
        }
    }
    // Saved cases in the layout of an earlier version are not silently ignored.
    if let (Some(old), Some(new)) = (&s.legacy_dir, &s.regress_dir) {
        let cases = regress::list(old).map(|l| l.cases).unwrap_or_default();
        if !cases.is_empty() && old != new {
            let msg = format!(
                "{} in {} {} in the layout of an earlier Calametra version; saved cases now live per test target: move them to {} (for example `mkdir -p {} && git mv {}/*.json {}/`)",
                report::count(cases.len(), "saved case"),
                old.display(),
                if cases.len() == 1 { "is" } else { "are" },
                new.display(),
                new.display(),
                old.display(),
                new.display()
            );
            trials.push(test_trial(s.trial("regression::(old layout)"), move || {
                Err(msg.into())
            }));
        }
    }
    // Saved failures first.
    if let Some(dir) = &s.regress_dir {
        match regress::list(dir) {
            Ok(listing) => {
                for f in &listing.skipped {
                    eprintln!(
                        "calametra: skipped {}: not a saved case (a saved case is a regular file named <12 hex digits>.json)",
                        report::printable(&f.display().to_string())
                    );
                }
                for f in listing.cases {
                    let id = f
                        .file_stem()
                        .and_then(|n| n.to_str())
                        .unwrap_or("?")
                        .to_string();
                    let s2 = s.clone();
                    trials.push(ignorable_trial(
                        s.trial(&format!("regression::{id}")),
                        move || s2.regression(&f),
                    ));
                }
            }
            Err(e) => {
                let msg = e.to_string();
                trials.push(test_trial(s.trial("regression::(directory)"), move || {
                    Err(msg.into())
                }));
            }
        }
    }
    // `CALAMETRA_REPLAY_FILE` replays in the scenario the file names, and only there.
    if let Some(file) = s.env.replay.clone().filter(|f| s.owns(f)) {
        let s2 = s.clone();
        trials.push(test_trial(s.trial("replay"), move || s2.replay_file(&file)));
    }
    let s2 = s.clone();
    trials.push(test_trial(s.trial("baseline"), move || s2.baseline()));
    let (sites, s) = match &s.def.func {
        Body::Sim(func) => {
            let (disc, s_h) = s.discovered(func);
            let sites = explore::site_probes(&disc.sites, &s.base.fault_set);
            (sites, Arc::new(s_h))
        }
        // Listing does not boot a guest to find sites; a site trial asked for by its name
        // (`--exact path::site::<site>::<fault>`) is made for it.
        Body::Guest(_) => {
            for p in requested {
                if matches!(p, Probe::Site { .. }) {
                    let (s2, p2) = (s.clone(), p.clone());
                    trials.push(test_trial(s.trial(&p.trial_suffix()), move || {
                        s2.probe(&p2)
                    }));
                }
            }
            (Vec::new(), s)
        }
    };
    if let Some(floor) = s.def.marks_floor {
        let s2 = s.clone();
        trials.push(test_trial(s.trial("marks"), move || s2.marks_floor(floor)));
    }
    // An `expect` scenario pins its known bug with `finds::` and keeps its site and seed
    // trials too: one that breaks the expected invariant passes (the known bug), any other
    // failure fails, so pinning a bug costs no coverage. A guest scenario's expect keeps its
    // `finds::` alone: its seeds are its hunt for the known bug, seconds a run, and the other
    // failures they meet (the Trigger 6 KMS probe exiting 2 after a corrupted descriptor) are a
    // triage of their own, not a verdict this trial can give; `finds::` lists them when its
    // budget runs out (`met_text`), so none is swallowed.
    if let Some(inv) = s.def.expect {
        let s2 = s.clone();
        let sites2 = sites.clone();
        trials.push(test_trial(s.trial(&format!("finds::{inv}")), move || {
            s2.finds(inv, &sites2)
        }));
        if s.is_guest() {
            return trials;
        }
    }
    // A seed asked for by its exact name that the listing does not hold (a sweep's find, a
    // seed from another base) is made for it.
    let mut seeds = s.seed_probes();
    for p in requested {
        if matches!(p, Probe::Seed(_)) && !seeds.contains(p) && !s.is_guest() {
            seeds.push(p.clone());
        }
    }
    for p in sites.into_iter().chain(seeds) {
        let s2 = s.clone();
        trials.push(test_trial(s.trial(&p.trial_suffix()), move || s2.probe(&p)));
    }
    trials
}

/// A libtest-mimic trial whose failure message also reaches nextest: nextest runs one trial a
/// process and reads a failure's description from an `Error: ` line on standard error (what a
/// `main` returning `Err` prints), for its JUnit `<failure message>` and libtest-json output.
pub(super) fn test_trial(
    name: impl Into<String>,
    f: impl FnOnce() -> Result<(), Failed> + Send + 'static,
) -> Trial {
    Trial::test(name, move || {
        let r = f();
        if let Err(e) = &r {
            if std::env::var_os("NEXTEST").is_some() {
                eprintln!("Error: {}", e.message().unwrap_or("failed"));
            }
        }
        r
    })
}

/// [`test_trial`] for a trial that may decide at run time not to run (a saved case made for
/// another build): libtest-mimic reports it `ignored (<reason>)`.
fn ignorable_trial(
    name: impl Into<String>,
    f: impl FnOnce() -> Result<Completion, Failed> + Send + 'static,
) -> Trial {
    Trial::ignorable_test(name, move || {
        let r = f();
        if let Err(e) = &r {
            if std::env::var_os("NEXTEST").is_some() {
                eprintln!("Error: {}", e.message().unwrap_or("failed"));
            }
        }
        r
    })
}

impl Scenario {
    fn baseline(&self) -> Result<(), Failed> {
        self.with_runner(|runner| self.baseline_with(runner))
            .map_err(Failed::from)
    }

    fn baseline_with(&self, runner: &dyn Runner) -> Result<(), String> {
        let mut c = Probe::Baseline.config(&self.base);
        c.keep_trace = true;
        let a = runner.run(c.clone()).map_err(no_verdict)?;
        self.write_trace_out(&a)?;
        let b = runner.run(c).map_err(no_verdict)?;
        if a.hash != b.hash {
            let (ra, rb) = (parse_kept(&a.lines), parse_kept(&b.lines));
            let detail = match first_divergence(&ra, &rb) {
                Some(d) => render_divergence(&ra, &d, 20),
                None => "the kept records agree but the hashes differ".into(),
            };
            return Err(format!(
                "nondeterminism: the baseline ran twice and the trace hashes differ\n  first run:  {}\n  second run: {}\n{detail}\nSomething in the scenario reads the wall clock, iterates a std HashMap/HashSet, spawns a thread or uses OS randomness.",
                a.hash, b.hash
            ));
        }
        match &a.failure {
            None => Ok(()),
            Some(f) if self.def.expect.is_some_and(|e| f.invariant() == Some(e)) => Ok(()),
            Some(f) => Err(self.report(
                runner,
                &self.trial("baseline"),
                Some(&Probe::Baseline),
                &a,
                f,
            )),
        }
    }

    fn probe(&self, p: &Probe) -> Result<(), Failed> {
        self.with_runner(|runner| {
            let r = runner.run(self.probe_config(p)).map_err(no_verdict)?;
            self.write_trace_out(&r)?;
            match &r.failure {
                None => Ok(()),
                // The known bug of an `expect` scenario: its `finds::` trial pins it.
                Some(f) if self.def.expect.is_some_and(|e| f.invariant() == Some(e)) => Ok(()),
                Some(f) => Err(self.report(runner, &self.trial(&p.trial_suffix()), Some(p), &r, f)),
            }
        })
        .map_err(Failed::from)
    }

    /// `path::marks` (`marks_floor = N`): runs the scenario's fixed seeds and fails when a mark
    /// it declares is reached by fewer than N of them, printing the count of every mark.
    fn marks_floor(&self, floor: u64) -> Result<(), Failed> {
        let declared = (self.def.marks)();
        let probes = self.seed_probes();
        let counts = self.with_runner(|runner| {
            let mut counts: BTreeMap<String, u64> =
                declared.iter().map(|m| (m.clone(), 0)).collect();
            for p in &probes {
                let r = runner.run(p.config(&self.base)).map_err(no_verdict)?;
                for m in r.marks.keys() {
                    *counts.entry(m.clone()).or_insert(0) += 1;
                }
            }
            Ok(counts)
        })?;
        let width = counts.keys().map(String::len).max().unwrap_or(4).max(4);
        let mut table = format!(
            "{:<width$}  seeds reaching it (of {}), floor {floor}\n",
            "mark",
            probes.len()
        );
        let mut low = 0;
        for (m, n) in &counts {
            let note = if !declared.contains(m) {
                "  (reached, not declared)"
            } else if *n < floor {
                low += 1;
                "  BELOW THE FLOOR"
            } else {
                ""
            };
            table.push_str(&format!("{m:<width$}  {n}{note}\n"));
        }
        if low == 0 {
            return Ok(());
        }
        Err(format!(
            "{} of {} declared marks reached by fewer than {floor} of the {} fixed seeds (widen with {SCHEDULES}=N, or make the marks reachable):\n{table}",
            low,
            declared.len(),
            probes.len()
        )
        .into())
    }

    /// The baseline run with site discovery, and the scenario as its seeded trials run it:
    /// the horizon is the baseline's steps and the task choices a seeded run draws its change
    /// points over come from it ([`explore::change_point_horizon`]).
    fn discovered(&self, func: &fn(&mut crate::Sim)) -> (RunResult, Scenario) {
        let disc = explore::discover(&self.base, func);
        let mut s = self.clone_shallow();
        s.base.horizon = disc.steps.max(1);
        s.base.choices = explore::change_point_horizon(&self.base, &disc, func);
        (disc, s)
    }

    /// [`Scenario::discovered`]'s scenario alone.
    pub(super) fn seeded(&self, func: &fn(&mut crate::Sim)) -> Scenario {
        self.discovered(func).1
    }

    fn clone_shallow(&self) -> Scenario {
        Scenario {
            def: self.def,
            path: self.path.clone(),
            target: self.target.clone(),
            legacy_dir: self.legacy_dir.clone(),
            base: self.base.clone(),
            env: self.env.clone(),
            regress_dir: self.regress_dir.clone(),
        }
    }
}
