//! Guidance is the default of a sweep, and it is what finds a bug that takes two faults and a
//! replug (the flash logger, `calametra_tests::flash_logger`: a stalled write, a failed
//! CLEAR_HALT right after it and a replug within a few steps).
//!
//! - In process, the sweep the harness makes by default (`calametra::sweep::run_guided`, from an
//!   empty corpus, on the scenario's configuration: transport faults) finds it within
//!   [`RUNS`] runs for at least 9 of the 10 base seeds 1..=10. A run budget, not a time one, so
//!   the test is the same on any machine: [`RUNS`] is fewer runs than every default one-second
//!   sweep of this debug build made here (2,265 to 4,082 runs; BENCHMARKS.md has the
//!   measurement and the command).
//! - Through the harness binary: a sweep without any guide variable is guided and finds it,
//!   naming the find `flash_logger::guided::<j>`; `--exact` with that name makes the same
//!   run again (the same saved case, the same trace hash); `CALAMETRA_SWEEP_GUIDE=0` sweeps
//!   seeds alone and does not find it in as many runs.

use calametra::fault::FaultSet;
use calametra::sweep::{run_guided_until, Corpus, Job, Partition, Stop};
use calametra::RunConfig;
use std::path::Path;
use std::process::Command;

/// The scenario's path in its harness binary (the seeds are derived from it).
const PATH: &str = "flash_logger";
/// The run budget standing for a one-second sweep (see the module doc).
const RUNS: u64 = 2000;

fn flash_logger(sim: &mut calametra::Sim) {
    calametra_tests::flash_logger::scenario(sim)
}

#[test]
fn a_default_sweep_finds_the_flash_logger_bug_for_nine_of_ten_base_seeds() {
    // What the harness's `Scenario` makes of `#[calametra::scenario(faults = transport)]`.
    let base = RunConfig {
        fault_set: FaultSet::Transport,
        ..RunConfig::default()
    };
    let wanted = |f: &calametra::Failure| f.invariant() == Some("each_record_once");
    let mut found = Vec::new();
    for base_seed in 1..=10u64 {
        let job = Job {
            path: PATH,
            func: flash_logger,
            base: &base,
            base_seed,
        };
        let (_, _, _, at) = run_guided_until(
            &job,
            Stop::Runs(RUNS),
            Partition::default(),
            calametra::sweep::default_threads(),
            Corpus::new(PATH),
            &wanted,
        );
        found.push((base_seed, at));
    }
    let hits = found.iter().filter(|(_, at)| at.is_some()).count();
    eprintln!("runs to find, by base seed (run budget {RUNS}): {found:?}");
    assert!(hits >= 9, "runs to find, by base seed: {found:?}");
}

fn bin() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_flash_logger"));
    for v in [
        "CALAMETRA_SCHEDULES",
        "CALAMETRA_REPLAY",
        "CALAMETRA_SWEEP",
        "CALAMETRA_SWEEP_GUIDE",
        "CALAMETRA_SWEEP_CORPUS",
        "CALAMETRA_SWEEP_PARTITION",
        "CALAMETRA_SWEEP_THREADS",
    ] {
        c.env_remove(v);
    }
    // Base seed 2: under base seed 1 the guided sweep now meets the bug first in a run whose
    // minimal case keeps a leading replug (four events) since `corrupt` is no longer drawn or
    // added at OUT sites; under 2 it is the three events below, as 1 gave before.
    c.env("CALAMETRA_SEED", "2");
    c
}

fn run(c: &mut Command) -> (bool, String) {
    let o = c.output().expect("run the flash logger binary");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn case_hash(dir: &Path) -> String {
    let files: Vec<_> = std::fs::read_dir(dir.join("flash_logger").join("flash_logger"))
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    v["trace_hash"].as_str().unwrap().to_string()
}

#[test]
fn the_harness_sweeps_guided_by_default_and_names_a_guided_find_so_exact_remakes_it() {
    let tmp = tempfile::tempdir().unwrap();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    let (ok, out) = run(bin()
        .env("CALAMETRA_SWEEP", RUNS.to_string())
        .env("CALAMETRA_REGRESSIONS", &a)
        .env("CALAMETRA_SWEEP_SUMMARY", tmp.path().join("guided.json")));
    assert!(!ok, "{out}");
    // Two faults and a replug: a stalled write, the CLEAR_HALT after it failing, the replug.
    let minimal = out
        .lines()
        .find_map(|l| l.strip_prefix("minimal events: "))
        .expect("a minimal events line");
    let events: Vec<&str> = minimal.split(" . ").collect();
    assert!(out.contains("invariant `each_record_once` broke"), "{out}");
    assert_eq!(events.len(), 3, "{minimal}");
    assert!(events[0].starts_with("stall at bulk.out#"), "{minimal}");
    assert!(events[1].contains(" at ctrl.clear_halt#"), "{minimal}");
    assert_eq!(events[2], "replug", "{minimal}");
    let name = out
        .lines()
        .find_map(|l| l.strip_prefix("found by:  "))
        .expect("a found-by line")
        .to_string();
    assert!(name.starts_with("flash_logger::guided::"), "{out}");
    // The name remakes the run: the same case, the same trace hash.
    let (ok, again) = run(bin()
        .args(["--exact", &name])
        .env("CALAMETRA_REGRESSIONS", &b));
    assert!(
        !ok && again.contains(&format!("found by:  {name}")),
        "{again}"
    );
    assert_eq!(case_hash(&a), case_hash(&b));
    // Seeds alone, as many runs: not found.
    let (ok, out) = run(bin()
        .env("CALAMETRA_SWEEP", RUNS.to_string())
        .env("CALAMETRA_SWEEP_GUIDE", "0")
        .env("CALAMETRA_REGRESSIONS", "off")
        .env("CALAMETRA_SWEEP_SUMMARY", tmp.path().join("uniform.json")));
    assert!(
        ok && out.contains("flash_logger: 2000 runs, 0 failure signatures"),
        "{out}"
    );
}
