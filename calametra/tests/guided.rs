//! Guided sweeps (`calametra::sweep::run_guided`): a corpus of runs that reached something new,
//! mutated alongside fresh seeds. On workload D (a stalled write, a failed CLEAR_HALT and a
//! replug within a few steps) the guided sweep finds the bug in far fewer runs than seeds do;
//! a run budget makes the same runs and the same corpus whatever the thread count; the corpus
//! saves and reloads.

#[path = "../../calametra-core/tests/support/workload_d.rs"]
mod workload_d;

use calametra::sweep::{run_guided, run_guided_until, Corpus, Job, Partition, Stop, Tally};
use calametra_core::choices::{derive_seed, Source};
use calametra_core::fault::FaultSet;
use calametra_core::{run, RunConfig, Sim};

fn d(sim: &mut Sim) {
    workload_d::pipe_scenario(sim, false)
}

const PATH: &str = "guided::workload_d";

/// The scenario's configuration as the harness makes it: transport faults, the horizon the
/// baseline's steps and task choices.
fn base() -> RunConfig {
    let mut c = RunConfig {
        fault_set: FaultSet::Transport,
        ..RunConfig::default()
    };
    let b = calametra_core::explore::discover(&c, &d);
    c.horizon = b.steps.max(1);
    c.choices = calametra_core::explore::change_point_horizon(&c, &b, &d);
    c
}

fn found(t: &Tally) -> bool {
    t.signatures
        .values()
        .any(|g| g.failure.starts_with("invariant `each_write_once` broke"))
}

fn guided(base_seed: u64, runs: u64, threads: usize, corpus: Corpus) -> (Tally, Corpus) {
    let base = base();
    let job = Job {
        path: PATH,
        func: d,
        base: &base,
        base_seed,
    };
    let (t, _, c) = run_guided(
        &job,
        Stop::Runs(runs),
        Partition::default(),
        threads,
        corpus,
    );
    (t, c)
}

/// The first run (1-based) of a guided sweep from `base_seed` that breaks the invariant.
fn guided_runs_to_find(base_seed: u64, limit: u64) -> Option<u64> {
    let base = base();
    let job = Job {
        path: PATH,
        func: d,
        base: &base,
        base_seed,
    };
    let wanted = |f: &calametra_core::Failure| f.invariant() == Some("each_write_once");
    run_guided_until(
        &job,
        Stop::Runs(limit),
        Partition::default(),
        1,
        Corpus::new(PATH),
        &wanted,
    )
    .3
}

#[test]
fn a_guided_sweep_finds_workload_d_and_makes_the_same_runs_on_any_thread_count() {
    let (one, c1) = guided(1, 3000, 1, Corpus::new(PATH));
    let (two, c2) = guided(1, 3000, 2, Corpus::new(PATH));
    assert!(
        found(&one),
        "{:?}",
        one.signatures.keys().collect::<Vec<_>>()
    );
    assert_eq!(one, two, "the same runs and tallies on 1 and 2 threads");
    assert_eq!(c1, c2, "the same corpus");
    assert!(c1.entries.len() > 3, "{} entries", c1.entries.len());
    // The kept run of the signature is a mutant: its events replay to the failure.
    let g = one
        .signatures
        .values()
        .find(|g| g.failure.starts_with("invariant `each_write_once`"))
        .unwrap();
    if let Some(events) = &g.events_list {
        let r = run(calametra_core::explore::replay_config(&base(), events), &d);
        assert!(r.failure.is_some(), "{}", g.seed);
    }
}

#[test]
fn a_corpus_saves_reloads_and_a_second_sweep_starts_from_it() {
    let (_, c) = guided(7, 200, 1, Corpus::new(PATH));
    let text = c.to_json();
    let back = Corpus::parse(std::path::Path::new("c.json"), &text).unwrap();
    assert_eq!(back, c);
    let (_, c2) = guided(8, 64, 1, back);
    assert!(c2.entries.len() >= c.entries.len());
    assert_eq!(c2.entries[..c.entries.len()], c.entries[..]);
    assert!(Corpus::parse(std::path::Path::new("c.json"), "{}")
        .unwrap_err()
        .to_string()
        .contains("format"));
}

#[test]
#[ignore = "a measurement: cargo test --release -p calametra --test guided -- --ignored --nocapture"]
fn probe_workload_d() {
    let b = base();
    let n = 20_000u64;
    let uniform = (0..n)
        .filter(|&i| {
            let c = RunConfig {
                source: Source::Seeded(derive_seed(3, PATH, i)),
                swarm: false,
                ..b.clone()
            };
            run(c, &d).failure.is_some()
        })
        .count();
    let swarm = (0..n)
        .filter(|&i| {
            let c = RunConfig {
                source: Source::Seeded(derive_seed(3, PATH, i)),
                ..b.clone()
            };
            run(c, &d).failure.is_some()
        })
        .count();
    println!(
        "horizon {}: uniform {uniform}/{n}, swarm {swarm}/{n}",
        b.horizon
    );
    let mut g = Vec::new();
    for s in 1..=10u64 {
        g.push(guided_runs_to_find(s, 5000));
    }
    println!("guided runs to find: {g:?}");
}
