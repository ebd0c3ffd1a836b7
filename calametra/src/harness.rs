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
//! # Files
//!
//! Split by role. This file keeps what every role shares, the `Scenario` a trial runs (its
//! settings, its test target, where its cases are kept, its runner), and `main`, which picks
//! the scenarios and trials the command line asks for. The rest, each file one role:
//!
//! - `environment.rs`: the variables below, read once into one typed `Env` under the names of
//!   [`crate::env_names`]; no `CALAMETRA_*` variable is read anywhere else in the harness.
//! - `trials.rs`: a scenario's trials, and the bodies of its baseline, site, seed and marks trials.
//! - `cases.rs`: saved cases: the `regression::`, `replay` and `finds::` trials, re-hashing,
//!   the states file of `calametra review`.
//! - `sweeps.rs`: the harness side of `CALAMETRA_SWEEP` (the runs are [`crate::sweep`]'s).
//! - `output.rs`: a failure's screen, trace files, pictures, the no-verdict message.
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
mod trials;

pub use environment::MAX_SCHEDULES;
pub use output::NO_VERDICT;
pub use trials::GUEST_IGNORED;

use crate::__private::{Body, FaultsArg, ScenarioDef};
use crate::env_names::CASE_STATES;
use crate::report;
use crate::sweep;
use calametra_core::explore::{self, InProcess, Probe, Runner};
use calametra_core::fault::{FaultPlan, FaultSet};
use calametra_core::regress;
use calametra_core::sim::RunConfig;
use calametra_core::spec::Spec;
use cases::{missing_case, replay_elsewhere, write_states};
use environment::{absolute, Env, RegressionsMode};
use libtest_mimic::{Arguments, Trial};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use sweeps::{check_sweep_outputs, finish_sweep, nothing_swept, sweep_trials};
use trials::{test_trial, trials_for};

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
}

/// Every registered scenario, sorted by path.
pub fn scenarios() -> Vec<&'static ScenarioDef> {
    let mut v: Vec<&'static ScenarioDef> = inventory::iter::<ScenarioDef>.into_iter().collect();
    v.sort_by_key(|d| d.path());
    v
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
            eprintln!("calametra: {CASE_STATES}: {e}");
            std::process::exit(2);
        }
    }
    conclusion.exit();
}
