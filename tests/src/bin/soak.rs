//! The determinism soak: `cargo run --release -p calametra-tests --bin soak -- [SEEDS]` runs every
//! listed scenario under SEEDS seeded schedules (faults drawn too), each twice, and counts runs
//! whose two trace hashes differ. It exits non-zero on any mismatch. Wall-clock time is read
//! here, outside every simulation, only to report the soak's duration.

use calametra::choices::Source;
use calametra::fault::FaultSet;
use calametra::{run, RunConfig, Sim};

type Scenario = (&'static str, fn(&mut Sim));

fn status(sim: &mut Sim) {
    calametra_tests::status_scenario(sim, false, 24);
}

fn scenarios() -> Vec<Scenario> {
    let mut v: Vec<Scenario> = vec![("status", status)];
    v.extend(calametra_tests::model_scenarios());
    v
}

#[allow(clippy::disallowed_methods)] // the soak's own duration, outside the simulations
fn main() {
    let seeds: u64 = std::env::args()
        .nth(1)
        .and_then(|a| a.parse().ok())
        .unwrap_or(10_000);
    let started = std::time::Instant::now();
    let mut mismatches = 0u64;
    let mut runs = 0u64;
    for (name, f) in scenarios() {
        let t = std::time::Instant::now();
        let mut failing = 0u64;
        for seed in 0..seeds {
            let cfg = RunConfig {
                source: Source::Seeded(seed),
                fault_set: FaultSet::Transport,
                ..RunConfig::default()
            };
            let a = run(cfg.clone(), &f);
            let b = run(cfg, &f);
            runs += 2;
            if a.failure.is_some() {
                failing += 1;
            }
            if a.hash != b.hash {
                mismatches += 1;
                eprintln!("MISMATCH: {name} seed {seed}: {} vs {}", a.hash, b.hash);
            }
        }
        println!("{name:<16} {seeds} seeds x 2 runs: {:.1} s ({failing} seeds end in a failure, counted as runs all the same)", t.elapsed().as_secs_f64());
    }
    println!(
        "soak: {runs} runs ({seeds} seeds x 2 x {} scenarios), mismatches = {mismatches}, {:.1} s",
        scenarios().len(),
        started.elapsed().as_secs_f64()
    );
    if mismatches > 0 {
        std::process::exit(1);
    }
}
