//! The sweep driver: spends a budget (wall time or a number of runs) on seeded runs of one
//! scenario, on every core.
//!
//! Each worker thread takes the next index of the sweep's sequence of seeds (this partition's
//! share of it), runs that seed single-threaded in its own simulated world, and counts it in its
//! own [`Tally`]; the tallies are merged when the budget is spent. Which runs a time budget
//! reaches depends on the machine; what each seed does never does, and the kept run of each
//! signature is the shortest one (the smaller seed on ties), so the report and saved cases
//! of a run budget are the same on every machine. The wall clock is read here only to stop,
//! outside any simulated run. The pure parts (partitions, tallies, summaries, merging) are
//! [`calametra_core::sweep`]'s, re-exported here.

pub use calametra_core::sweep::*;

use calametra_core::explore::{InProcess, Probe, Runner};
use calametra_core::sim::{RunConfig, Sim};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One scenario's sweep.
pub struct Job<'a> {
    /// The scenario path (seeds are derived from it).
    pub path: &'a str,
    /// The scenario function.
    pub func: fn(&mut Sim),
    /// The scenario's run configuration.
    pub base: &'a RunConfig,
    /// `CALAMETRA_SEED`.
    pub base_seed: u64,
}

/// What a budget means for one scenario: stop at a deadline, or after `n` runs.
#[derive(Clone, Copy, Debug)]
pub enum Stop {
    /// Wall time for this scenario.
    After(Duration),
    /// Runs of this scenario (in this partition).
    Runs(u64),
}

impl Stop {
    /// A binary's budget shared by `scenarios` scenarios swept one after another.
    pub fn share(budget: Budget, scenarios: usize) -> Stop {
        match budget {
            Budget::Runs(n) => Stop::Runs(n),
            Budget::Time(d) => Stop::After(d / scenarios.max(1) as u32),
        }
    }
}

/// Runs `job`'s seeds on `threads` workers until `stop`; returns the merged tally and the
/// wall time spent.
#[allow(clippy::disallowed_methods)] // the driver's threads and clock stay outside the runs
pub fn run(job: &Job<'_>, stop: Stop, partition: Partition, threads: usize) -> (Tally, Duration) {
    let started = Instant::now();
    let next = AtomicU64::new(0);
    let tallies: Vec<Tally> = std::thread::scope(|sc| {
        let workers: Vec<_> = (0..threads.max(1))
            .map(|_| {
                sc.spawn(|| {
                    let mut t = Tally::default();
                    let runner = InProcess(&job.func);
                    loop {
                        let j = next.fetch_add(1, Ordering::Relaxed);
                        match stop {
                            Stop::Runs(n) if j >= n => break,
                            Stop::After(d) if started.elapsed() >= d => break,
                            _ => {}
                        }
                        let seed = seed_at(job.base_seed, job.path, partition.index(j));
                        match runner.run(Probe::Seed(seed).config(job.base)) {
                            Ok(r) => {
                                let failure = r.failure.as_ref().map(|f| {
                                    (
                                        f.signature(),
                                        f.to_string(),
                                        calametra_core::choices::count_events(&r.events) as u64,
                                        f.is_model_gap(),
                                    )
                                });
                                t.add(seed, failure, r.marks.into_keys());
                            }
                            Err(_) => {
                                t.runs += 1;
                                t.no_verdict += 1;
                            }
                        }
                    }
                    t
                })
            })
            .collect();
        workers
            .into_iter()
            .map(|w| w.join().unwrap_or_default())
            .collect()
    });
    let mut all = Tally::default();
    for t in tallies {
        all.absorb(t);
    }
    (all, started.elapsed())
}

/// Worker threads: `CALAMETRA_SWEEP_THREADS`, else every core.
pub fn default_threads() -> usize {
    std::thread::available_parallelism()
        .map(|n| n.get())
        .unwrap_or(1)
}
