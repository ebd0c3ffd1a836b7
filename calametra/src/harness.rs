//! The libtest-mimic harness behind `calametra::main!()`.
//!
//! Every registered scenario becomes trials named so that the name is the replay command:
//! `path::scenario::regression::<id>` (saved cases, listed first), `::baseline` (seed 0 with no
//! faults, run twice, hashes compared), `::site::<site>::<fault>` (one fault at one site found
//! in the baseline), `::seed::<hex>` (one seeded schedule) and, for `expect = "..."`,
//! `::finds::<inv>`. `--exact path::scenario` runs all of a scenario's trials; `--exact` of a
//! saved case that does not exist fails. A failing trial goes through the failure chain
//! ([`calametra_core::chain`]) and is reported on one screen per signature; a saved case's
//! trial says whether it still fails, is fixed or is stale. This module only adapts: it builds
//! trials and reports.
//!
//! # Environment
//!
//! Read once when the binary starts; a value that cannot be used (not a number,
//! out of range, not UTF-8, an unknown word, a file that cannot be read) stops the binary with
//! exit code 2 and a message naming the variable. Unset and empty are the same. Variables that
//! name files take any bytes a path may have; relative paths are made absolute against the
//! directory the binary runs in (a package's directory under `cargo test`).
//!
//! | variable | what it does | values and limits |
//! | --- | --- | --- |
//! | `CALAMETRA_SCHEDULES` | seeded schedules per scenario, instead of the attribute's | 1 to [`MAX_SCHEDULES`] (1,000,000, the attribute's bound too); more runs: `CALAMETRA_SWEEP` |
//! | `CALAMETRA_SEED` | re-bases the seeds | below 2^64, `0x..` or decimal |
//! | `CALAMETRA_REGRESSIONS` | `off`, or the saved cases' root directory | `off` or a path |
//! | `CALAMETRA_REPLAY` | `strict`: regression trials demand the recorded hash, a fixed case fails | `strict` |
//! | `CALAMETRA_REPLAY_FILE` | a saved case or a trace, replayed by the `replay` trial of the scenario (and package and test target) it names, stale when it records another spec | read when the binary starts, within the readers' limits ([`calametra_core::input`]: 16 MiB a case, 1 GiB a trace, 16 MiB a line; regular files only) |
//! | `CALAMETRA_TRACE_OUT` | the trial writes the full trace of its run | a path |
//! | `CALAMETRA_STOP_AT`, `CALAMETRA_STATE_OUT` | the `replay` trial stops at a step and writes the state | a step and a path, together |
//! | `CALAMETRA_SCANOUT` | a failing trial writes the pictures its devices show at the end of the minimal run (a display's scanout, [`calametra_core::picture`]) under `<dir>/<case id>/` and its screen names them; the `replay` trial writes every picture its run showed, and `pictures.json` | a path (a directory, created) |
//! | `CALAMETRA_CASE_STATES` | the states of the saved cases replayed (`calametra review`) | a path |
//! | `CALAMETRA_VERBOSE` | prints the screen of a failure an `expect` scenario found | set or not |
//! | `CALAMETRA_SWEEP`, `CALAMETRA_SWEEP_PARTITION`, `CALAMETRA_SWEEP_THREADS`, `CALAMETRA_SWEEP_SUMMARY` | a sweep instead of the trials | a duration or runs; `k/n`; 1 to 1024; a path |
//! | `CALAMETRA_SWEEP_GUIDE`, `CALAMETRA_SWEEP_CORPUS` | sweeps are guided by default; `0` sweeps seeds alone (uniform, `--no-guide`); the corpus kept in the directory | `1` or `0`; a path |
//! | `CALAMETRA_COMPARE_OUT` and its companions | a comparison of a capture with a model registered in this binary instead of the trials ([`crate::tool`]) | paths |
//!
//! Traces go under `calametra/traces/` of the target directory the binary was built in: an
//! absolute `CARGO_TARGET_DIR`, else the binary's own (a relative `CARGO_TARGET_DIR` is relative
//! to where cargo ran, not to the package directory the binary runs in).

mod cases;
mod environment;
mod output;
mod sweeps;

pub use environment::MAX_SCHEDULES;
pub use output::NO_VERDICT;

use crate::__private::{Body, FaultsArg, ScenarioDef};
use crate::report;
use crate::sweep;
use calametra_core::explore::{self, InProcess, Probe, Runner};
use calametra_core::fault::{FaultPlan, FaultSet};
use calametra_core::regress;
use calametra_core::sim::{RunConfig, RunResult};
use calametra_core::spec::Spec;
use calametra_core::sweep::Partition;
use calametra_core::trace::{first_divergence, parse_kept, render_divergence};
use cases::{missing_case, replay_elsewhere, write_states};
use environment::{absolute, Env, RegressionsMode};
use libtest_mimic::{Arguments, Completion, Failed, Trial};
use output::no_verdict;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use sweeps::{check_sweep_outputs, finish_sweep, nothing_swept, sweep_trials};

/// Seeded schedules when the attribute does not say.
pub const DEFAULT_SCHEDULES: u64 = 16;

/// One scenario, ready to make trials.
struct Scenario {
    def: &'static ScenarioDef,
    path: String,
    /// The test target's name as Cargo spells it (hyphens kept).
    target: String,
    /// Where this scenario's cases were kept before they were kept per test target.
    legacy_dir: Option<PathBuf>,
    base: RunConfig,
    env: Env,
    regress_dir: Option<PathBuf>,
}

impl ScenarioDef {
    /// The scenario's path as trials name it: the module path without the crate, then the name.
    pub fn path(&self) -> String {
        match self.module.split_once("::") {
            Some((_, rest)) => format!("{rest}::{}", self.name),
            None => self.name.to_string(),
        }
    }
}

/// The test target's name as Cargo spells it. `CARGO_CRATE_NAME` (what the macro can see) has
/// hyphens turned into underscores, and `--test hw_loop` does not run target `hw-loop`, so the
/// name is looked up among the package's targets: the `name = ".."` of its `[[test]]`,
/// `[[bench]]`, `[[example]]` and `[[bin]]` sections, and the auto-discovered `tests/*.rs`,
/// `tests/*/main.rs` (likewise under `benches/`, `examples/` and `src/bin/`). Falls back to the crate name.
fn cargo_target(def: &ScenarioDef) -> String {
    let dir = Path::new(def.manifest_dir);
    let mut names: Vec<String> = Vec::new();
    if let Ok(toml) = std::fs::read_to_string(dir.join("Cargo.toml")) {
        let mut in_target = false;
        for line in toml.lines() {
            let t = line.trim();
            if t.starts_with('[') {
                in_target = matches!(t, "[[test]]" | "[[bench]]" | "[[example]]" | "[[bin]]");
                continue;
            }
            if !in_target {
                continue;
            }
            if let Some(v) = t.strip_prefix("name").map(str::trim_start) {
                if let Some(v) = v.strip_prefix('=') {
                    let v = v.trim().trim_matches(|c| c == '"' || c == '\'');
                    names.push(v.to_string());
                }
            }
        }
    }
    for sub in ["tests", "benches", "examples", "src/bin"] {
        let Ok(rd) = std::fs::read_dir(dir.join(sub)) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            let name = e.file_name().to_string_lossy().into_owned();
            if let Some(stem) = name.strip_suffix(".rs") {
                names.push(stem.to_string());
            } else if p.join("main.rs").is_file() {
                names.push(name);
            }
        }
    }
    names
        .into_iter()
        .find(|n| n.replace('-', "_") == def.target)
        .unwrap_or_else(|| def.target.to_string())
}

fn fault_set(arg: &FaultsArg) -> FaultSet {
    match arg {
        FaultsArg::None => FaultSet::None,
        FaultsArg::Transport => FaultSet::Transport,
        FaultsArg::All => FaultSet::All,
        FaultsArg::Only(kinds) => FaultSet::Only(kinds.to_vec()),
    }
}

impl Scenario {
    fn new(def: &'static ScenarioDef, env: &Env) -> Result<Scenario, String> {
        let path = def.path();
        let spec = match &def.spec {
            Some(e) => Some(Arc::new(
                Spec::parse(Path::new(def.manifest_dir).join(e.path), e.bytes)
                    .map_err(|e| e.to_string())?,
            )),
            None => None,
        };
        let faults = match &def.fault_schedule {
            Some(e) => {
                let p = Path::new(def.manifest_dir).join(e.path);
                let text = std::str::from_utf8(e.bytes)
                    .map_err(|_| format!("{}: not UTF-8 text", p.display()))?;
                FaultPlan::parse(&p, text).map_err(|e| e.to_string())?
            }
            None => FaultPlan::default(),
        };
        let mut base = RunConfig {
            faults,
            fault_set: fault_set(&def.faults),
            spec,
            ..RunConfig::default()
        };
        if let Some(n) = def.max_steps {
            base.max_steps = n;
        }
        if let Some(t) = def.virtual_timeout_ns {
            base.virtual_timeout = t;
        }
        let target = cargo_target(def);
        let root = match &env.regressions {
            RegressionsMode::Off => None,
            RegressionsMode::Dir(Some(d)) => Some(absolute(d)),
            RegressionsMode::Dir(None) => {
                Some(Path::new(def.manifest_dir).join("calametra-regressions"))
            }
        };
        // One directory per test target: two targets never share (or replay) each other's cases.
        let regress_dir = root
            .as_ref()
            .map(|r| regress::scenario_dir(&r.join(&target), &path));
        // Before saved cases were kept per test target they sat directly under the root.
        let legacy_dir = root.map(|r| regress::scenario_dir(&r, &path));
        Ok(Scenario {
            def,
            path,
            target,
            base,
            env: env.clone(),
            regress_dir,
            legacy_dir,
        })
    }

    /// Runs `f` with the scenario's runner: the simulator in process, or (for a guest
    /// scenario) the lockstep guest, built when a trial first needs it.
    fn with_runner<R>(
        &self,
        f: impl FnOnce(&dyn Runner) -> Result<R, String>,
    ) -> Result<R, String> {
        match &self.def.func {
            Body::Sim(func) => f(&InProcess(func)),
            Body::Guest(make) => {
                let runner = make()?;
                f(&*runner)
            }
        }
    }

    fn is_guest(&self) -> bool {
        matches!(self.def.func, Body::Guest(_))
    }

    fn trial(&self, suffix: &str) -> String {
        format!("{}::{suffix}", self.path)
    }

    fn schedules(&self) -> u64 {
        self.env
            .schedules
            .or(self.def.schedules)
            .unwrap_or(DEFAULT_SCHEDULES)
    }

    fn seed_probes(&self) -> Vec<Probe> {
        match self.def.seed {
            Some(s) => vec![Probe::Seed(s)],
            None => explore::seed_probes(&self.path, self.env.base_seed, self.schedules()),
        }
    }

    fn replay_command(&self, trial: &str) -> String {
        report::replay_command(self.def.package, &self.target, trial, self.is_guest())
    }

    /// The configuration of `p`, keeping the trace when `CALAMETRA_TRACE_OUT` asks for it.
    fn probe_config(&self, p: &Probe) -> RunConfig {
        let mut c = p.config(&self.base);
        c.keep_trace |= self.env.trace_out.is_some();
        c
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
            "{} of {} declared marks reached by fewer than {floor} of the {} fixed seeds (widen with CALAMETRA_SCHEDULES=N, or make the marks reachable):\n{table}",
            low,
            declared.len(),
            probes.len()
        )
        .into())
    }

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
}

/// Why a guest scenario's trials are ignored by default, and how to run them.
pub const GUEST_IGNORED: &str = "guest scenarios run a Linux guest under the lockstep QEMU (a few seconds a run from its snapshot, which the first run makes in about 15 s): their trials are ignored unless asked for with --ignored or --include-ignored (cargo nextest run --run-ignored all), after scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh";

/// `guided`: a guided sweep's find asked for by its exact name (`path::guided::..`): the
/// partition and the run.
fn trials_for(
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
    // failures they meet (the Trigger 6 KMS probe exiting 20 after a corrupted DMA header)
    // are a triage of their own, not a verdict this trial can give.
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

impl Scenario {
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
    fn seeded(&self, func: &fn(&mut crate::Sim)) -> Scenario {
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

/// Every registered scenario, sorted by path.
pub fn scenarios() -> Vec<&'static ScenarioDef> {
    let mut v: Vec<&'static ScenarioDef> = inventory::iter::<ScenarioDef>.into_iter().collect();
    v.sort_by_key(|d| d.path());
    v
}

/// A libtest-mimic trial whose failure message also reaches nextest: nextest runs one trial a
/// process and reads a failure's description from an `Error: ` line on standard error (what a
/// `main` returning `Err` prints), for its JUnit `<failure message>` and libtest-json output.
fn test_trial(
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

/// The harness's main: builds the trials of every scenario in this binary and runs them with
/// libtest-mimic's command line (`--list`, `--exact`, filters, `--ignored`, nextest).
pub fn main() {
    // A job of the `calametra` command (`compare --package P --test T`) instead of the trials.
    if let Some(code) = crate::tool::run_if_asked() {
        std::process::exit(code);
    }
    let mut args = Arguments::from_args();
    let env = match Env::read() {
        Ok(e) => e,
        Err(e) => {
            eprintln!("calametra: {e}");
            std::process::exit(2);
        }
    };
    let defs = scenarios();
    if let Some(sw) = env.sweep.clone() {
        // One scenario's sweep at a time: each uses every core.
        args.test_threads = Some(1);
        let (trials, swept) = sweep_trials(&defs, &env, &sw, &args);
        if !args.list {
            // Where the sweep's outputs go is checked before any budget is spent, and a sweep
            // that would sweep nothing says so instead of passing on 0 runs.
            if let Err(e) = check_sweep_outputs(defs.first().copied(), &sw) {
                eprintln!("calametra: {e}");
                std::process::exit(2);
            }
            if swept == 0 {
                eprintln!(
                    "calametra: the sweep sweeps nothing: {}",
                    nothing_swept(&defs, &args)
                );
                std::process::exit(2);
            }
            sweep::catch_interrupts();
        }
        let json = matches!(args.format, Some(libtest_mimic::FormatSetting::Json));
        let conclusion = libtest_mimic::run(&args, trials);
        if !args.list {
            match finish_sweep(defs.first().copied(), &env, &sw) {
                Ok(r) if json => eprint!("{r}"),
                Ok(r) => print!("{r}"),
                Err(e) => {
                    eprintln!("calametra: the sweep summary: {e}");
                    std::process::exit(2);
                }
            }
            if let Some(sig) = sweep::interrupt_signal() {
                // As a process the signal ended would: 128 + the signal's number.
                std::process::exit(128 + sig);
            }
        }
        conclusion.exit();
    }
    // `--exact path::scenario` (what IDEs send for a function) runs all of its trials.
    let mut only: Option<String> = None;
    if args.exact {
        if let Some(f) = &args.filter {
            if defs.iter().any(|d| &d.path() == f) {
                only = Some(f.clone());
                args.filter = None;
                args.exact = false;
            }
        }
    }
    let mut trials = Vec::new();
    let mut guests = 0usize;
    // Where a trial asked for by its exact name would come from, if none is made.
    let mut missing: Option<Trial> = None;
    let mut defined = Vec::new();
    let first = defs.first().copied();
    let all_paths: Vec<String> = defs.iter().map(|d| d.path()).collect();
    // `--exact path::scenario::<trial>` (what nextest sends, one trial a process) runs a trial
    // of one scenario: the others' trials are not made, so their sites are not discovered
    // (a baseline run each) in every process. A trial named by no scenario's path makes all, as
    // before, so its absence is reported as libtest reports it.
    let exact_of = match (&args.filter, args.exact, only.is_some()) {
        (Some(f), true, false)
            if defs
                .iter()
                .any(|d| f.starts_with(&format!("{}::", d.path()))) =>
        {
            Some(f.clone())
        }
        _ => None,
    };
    for def in defs {
        if only.as_ref().is_some_and(|o| *o != def.path()) {
            continue;
        }
        if exact_of
            .as_ref()
            .is_some_and(|f| !f.starts_with(&format!("{}::", def.path())))
        {
            defined.push(def.path());
            continue;
        }
        defined.push(def.path());
        // A trial asked for by its exact name, which listing may not make by itself; one
        // naming an unknown fault primitive fails with the known ones, never runs nothing.
        let guided = match (&args.filter, args.exact) {
            (Some(f), true) => f
                .strip_prefix(&format!("{}::", def.path()))
                .and_then(sweep::parse_guided_suffix),
            _ => None,
        };
        let requested: Vec<Probe> = match (&args.filter, args.exact) {
            (Some(f), true) => match f
                .strip_prefix(&format!("{}::", def.path()))
                .map(Probe::parse_suffix_checked)
            {
                Some(Err(e)) => {
                    let name = f.clone();
                    trials.push(test_trial(f.clone(), move || {
                        Err(format!("`{name}`: {e}").into())
                    }));
                    Vec::new()
                }
                Some(Ok(p)) => p.into_iter().collect(),
                None => Vec::new(),
            },
            _ => Vec::new(),
        };
        if matches!(def.func, Body::Guest(_)) {
            guests += 1;
        }
        match Scenario::new(def, &env) {
            Ok(s) => {
                if let (Some(f), true) = (&args.filter, args.exact) {
                    if let Some(id) = f.strip_prefix(&format!("{}::regression::", s.path)) {
                        missing = Some(missing_case(&s, f, id));
                    }
                }
                trials.extend(trials_for(Arc::new(s), &requested, guided));
            }
            Err(e) => {
                let path = def.path();
                trials.push(test_trial(format!("{path}::baseline"), move || {
                    Err(e.into())
                }));
            }
        }
    }
    // `--exact path::regression::<id>` for a case not in this checkout must not pass having
    // run nothing (a replay command pasted from a CI log).
    if let (Some(m), Some(f)) = (missing, &args.filter) {
        if !trials.iter().any(|t| t.name() == f) {
            trials.push(m);
        }
    }
    if let (Some(file), Some(first)) = (&env.replay, first) {
        replay_elsewhere(file, first, &all_paths, &mut trials);
    }
    let json = matches!(args.format, Some(libtest_mimic::FormatSetting::Json));
    if guests > 0 && !args.ignored && !args.include_ignored && !args.list {
        eprintln!(
            "calametra: {} ignored: {GUEST_IGNORED}",
            report::count(guests, "guest scenario")
        );
    }
    let conclusion = libtest_mimic::run(&args, trials);
    if let Some(s) = report::summary() {
        // With `--format json`, standard output is JSON only.
        if json {
            eprintln!("{s}");
        } else {
            println!("{s}");
        }
    }
    if let Some(path) = &env.states_file {
        if let Err(e) = write_states(path, &defined) {
            eprintln!("calametra: CALAMETRA_CASE_STATES: {e}");
            std::process::exit(2);
        }
    }
    conclusion.exit();
}
