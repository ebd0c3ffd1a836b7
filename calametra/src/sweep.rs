//! The sweep driver: spends a budget (wall time or a number of runs) on seeded runs of one
//! scenario, on every core.
//!
//! Each worker thread takes the next index of the sweep's sequence of seeds (this partition's
//! share of it), runs that seed single-threaded in its own simulated world, and counts it in its
//! own [`Tally`]; the tallies are merged when the budget is spent. Which runs a time budget
//! reaches depends on the machine; what each seed does never does, and the kept run of each
//! signature is the shortest one (the smaller seed on ties), so the report and saved cases
//! of a run budget are the same on every machine. The wall clock is read here only to stop,
//! outside any simulated run. The pure parts (partitions, tallies, summaries, merging, the
//! guided corpus and its mutations) are [`calametra_core::sweep`]'s, re-exported here.
//!
//! A *guided* sweep ([`run_guided`]; the harness's default, `CALAMETRA_SWEEP_GUIDE=0` sweeps
//! seeds alone with [`run`]; `CALAMETRA_SWEEP_CORPUS=<dir>` keeps its corpus between sweeps)
//! spends every other run, once its corpus holds
//! something, on a mutant of a corpus entry (a replay of mutated events) instead of a fresh
//! seed, and keeps in its corpus every run that reached something no run had (see
//! [`Corpus`]). It proceeds in rounds of [`ROUND`] runs: a round's runs are fixed by the
//! corpus at its start and the runs' indexes (fresh runs take the partition's seeds in order,
//! as an unguided sweep; mutants derive from a stream named by the index), and the round's
//! finished runs enter the corpus in index order. So a run budget makes the same runs, the
//! same corpus and the same report on every machine and thread count. Under a time budget
//! each run is as reproducible (a seed, or events that are saved with its case), and the runs
//! made are the sequence's first ones, but how far into the sequence the sweep gets, and so
//! the corpus it ends with, depends on the machine. Partitions keep disjoint fresh seeds and
//! disjoint mutant indexes (shares of one sequence), and their summaries merge into one
//! report (`calametra sweep-report`); their mutants come from each partition's own corpus, so
//! the merged counts of a signature's runs may differ from one unpartitioned guided sweep's
//! (a uniform sweep's partitions merge into it run for run).

pub use calametra_core::sweep::*;

use calametra_core::explore::{replay_config, InProcess, Probe, Runner};
use calametra_core::sim::{RunConfig, RunResult, Sim};
use std::sync::atomic::{AtomicBool, AtomicI32, AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// Set by SIGTERM or SIGINT during a sweep ([`catch_interrupts`]): the workers stop taking
/// runs, and the sweep saves what it found and writes a partial summary before it exits. The
/// driver's state, outside every simulated run (no run reads it).
static INTERRUPTED: AtomicBool = AtomicBool::new(false);
/// The signal that set [`INTERRUPTED`].
static SIGNAL: AtomicI32 = AtomicI32::new(0);

/// Whether a signal asked the sweep to stop.
pub fn interrupted() -> bool {
    INTERRUPTED.load(Ordering::Relaxed)
}

/// The signal that stopped the sweep (15 for SIGTERM, 2 for SIGINT), if one did.
pub fn interrupt_signal() -> Option<i32> {
    interrupted().then(|| SIGNAL.load(Ordering::Relaxed))
}

/// Stops the sweep instead of the process on the first SIGTERM or SIGINT (a CI job cancelled,
/// Ctrl-C), so the finds so far are saved and a partial summary written; a second one ends the
/// process as usual (the handler is installed with `SA_RESETHAND`). Unix only; elsewhere a
/// sweep ends with the process.
pub fn catch_interrupts() {
    #[cfg(unix)]
    {
        extern "C" fn on_signal(sig: libc::c_int) {
            // Async-signal-safe: two atomic stores.
            SIGNAL.store(sig, Ordering::Relaxed);
            INTERRUPTED.store(true, Ordering::Relaxed);
        }
        for sig in [libc::SIGTERM, libc::SIGINT] {
            // SAFETY: `sa` is a zeroed sigaction filled with a handler that only stores
            // atomics; sigaction copies it.
            unsafe {
                let mut sa: libc::sigaction = std::mem::zeroed();
                sa.sa_sigaction = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
                sa.sa_flags = libc::SA_RESETHAND | libc::SA_RESTART;
                libc::sigemptyset(&mut sa.sa_mask);
                libc::sigaction(sig, &sa, std::ptr::null_mut());
            }
        }
    }
}

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
                        if interrupted() {
                            break;
                        }
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

/// What one run of a guided sweep produced, for its tally and the corpus.
struct Made {
    result: Result<RunResult, String>,
    features: std::collections::BTreeSet<String>,
    mutant: bool,
}

fn make(runner: &InProcess<'_>, base: &RunConfig, input: &Input) -> Made {
    let mut c = match input {
        Input::Fresh(seed) => Probe::Seed(*seed).config(base),
        Input::Mutant { events, .. } => replay_config(base, events),
    };
    c.coverage = true;
    c.record_sites = true;
    let mut result = runner.run(c);
    let features = result
        .as_mut()
        .map(|r| std::mem::take(&mut r.coverage))
        .unwrap_or_default();
    Made {
        result,
        features,
        mutant: matches!(input, Input::Mutant { .. }),
    }
}

/// The inputs of runs `js` (this partition's, one round) of a guided sweep whose corpus at the
/// round's start is `corpus`; `fresh` counts the fresh seeds taken so far (moved on by this
/// round's).
fn round_inputs(
    job: &Job<'_>,
    partition: Partition,
    corpus: &Corpus,
    kinds: &[calametra_core::fault::FaultKind],
    js: std::ops::Range<u64>,
    fresh: &mut u64,
) -> Vec<Input> {
    js.map(|j| {
        if corpus.mutates(j) {
            corpus.mutant(job.base_seed, partition.index(j), kinds)
        } else {
            let s = seed_at(job.base_seed, job.path, partition.index(*fresh));
            *fresh += 1;
            Input::Fresh(s)
        }
    })
    .collect()
}

/// What the corpus keeps of a finished run: its events, features, the first 512 distinct
/// sites it crossed (and which of them are OUT transfers) and its steps.
fn finished_of(r: &RunResult, features: std::collections::BTreeSet<String>) -> Finished {
    let mut sites: Vec<String> = Vec::new();
    let mut outs: Vec<String> = Vec::new();
    for site in &r.sites {
        if sites.len() >= 512 {
            break;
        }
        if !sites.contains(&site.name) {
            sites.push(site.name.clone());
            if matches!(
                site.kind,
                calametra_core::fault::SiteKind::Transfer {
                    dir: calametra_core::fault::Dir::Out,
                    ..
                }
            ) {
                outs.push(site.name.clone());
            }
        }
    }
    Finished {
        events: r.events.clone(),
        features,
        sites,
        outs,
        steps: r.steps,
    }
}

/// The name of run `j` of `partition`'s guided sequence, as a trial suffix: `guided::<j>`
/// (an unpartitioned sweep) or `guided::<k>of<n>::<j>`. With the scenario path and the base
/// seed (`CALAMETRA_SEED`, printed with every find) it names the run as a seed does: the
/// harness remakes it for `--exact <path>::guided::..` ([`guided_input`]).
pub fn guided_suffix(partition: Partition, j: u64) -> String {
    if partition.n == 1 {
        format!("guided::{j}")
    } else {
        format!("guided::{}of{}::{j}", partition.k, partition.n)
    }
}

/// Reads [`guided_suffix`] back: the partition and the run.
pub fn parse_guided_suffix(s: &str) -> Option<(Partition, u64)> {
    let rest = s.strip_prefix("guided::")?;
    let number = |t: &str| -> Option<u64> {
        (!t.is_empty()
            && t.bytes().all(|b| b.is_ascii_digit())
            && (t == "0" || !t.starts_with('0')))
        .then(|| t.parse().ok())
        .flatten()
    };
    match rest.split_once("::") {
        None => Some((Partition::default(), number(rest)?)),
        Some((p, j)) => {
            let (k, n) = p.split_once("of")?;
            let p = Partition::parse(&format!("{k}/{n}")).ok()?;
            (p.n > 1).then_some(())?;
            Some((p, number(j)?))
        }
    }
}

/// The run `j` of `partition` of a guided sweep from base seed `job.base_seed` whose tally
/// kept `seed` text `guided:<index>` (see [`Tally::add_mutant`]): `index` is the run's place
/// in the whole sequence, `j` its place in the partition's.
pub fn guided_run_of(seed: &str, partition: Partition) -> Option<u64> {
    let index: u64 = seed.strip_prefix("guided:")?.parse().ok()?;
    let k0 = partition.k - 1;
    (index >= k0 && (index - k0).is_multiple_of(partition.n)).then(|| (index - k0) / partition.n)
}

/// What run `j` of `partition`'s guided sweep of `job` was, a fresh seed or a mutant's events:
/// the rounds before `j`'s are made again from `corpus` (empty for a sweep that started
/// without one) on `threads` workers, as [`run_guided`] made them, and `j`'s input is taken
/// from its round. A run budget or a time budget alike (a round's input does not depend on
/// how far the sweep got), at the cost of the runs before `j`'s round.
#[allow(clippy::disallowed_methods)] // the driver's threads stay outside the runs
pub fn guided_input(
    job: &Job<'_>,
    partition: Partition,
    threads: usize,
    corpus: Corpus,
    j: u64,
) -> Input {
    let kinds = job.base.fault_set.kinds();
    let mut corpus = corpus;
    let (mut j0, mut fresh) = (0u64, 0u64);
    loop {
        let inputs = round_inputs(job, partition, &corpus, &kinds, j0..j0 + ROUND, &mut fresh);
        if j < j0 + ROUND {
            return inputs[(j - j0) as usize].clone();
        }
        let next = AtomicU64::new(0);
        let slots: Vec<std::sync::Mutex<Option<Made>>> =
            (0..ROUND).map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|sc| {
            for _ in 0..threads.max(1) {
                sc.spawn(|| {
                    let runner = InProcess(&job.func);
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= ROUND {
                            break;
                        }
                        let made = make(&runner, job.base, &inputs[k as usize]);
                        if let Ok(mut s) = slots[k as usize].lock() {
                            *s = Some(made);
                        }
                    }
                });
            }
        });
        let finished = slots
            .into_iter()
            .filter_map(|s| s.into_inner().ok().flatten())
            .filter_map(|m| m.result.ok().map(|r| finished_of(&r, m.features)))
            .collect();
        corpus.absorb(finished);
        j0 += ROUND;
    }
}

/// A guided sweep of `job` (see the module doc): rounds of [`ROUND`] runs on `threads`
/// workers until `stop`, starting from `corpus` (empty, or loaded from a previous sweep).
/// Returns the tally, the wall time and the corpus at the end.
pub fn run_guided(
    job: &Job<'_>,
    stop: Stop,
    partition: Partition,
    threads: usize,
    corpus: Corpus,
) -> (Tally, Duration, Corpus) {
    let (t, d, c, _) = run_guided_until(job, stop, partition, threads, corpus, &|_| false);
    (t, d, c)
}

/// [`run_guided`] that also stops at the first run (in index order) whose failure `wanted`
/// accepts; the fourth value is how many runs that took (that run included), `None` when the
/// budget ran out first. Benchmarks measure runs-to-find with it.
#[allow(clippy::disallowed_methods)] // the driver's threads and clock stay outside the runs
pub fn run_guided_until(
    job: &Job<'_>,
    stop: Stop,
    partition: Partition,
    threads: usize,
    corpus: Corpus,
    wanted: &dyn Fn(&calametra_core::sim::Failure) -> bool,
) -> (Tally, Duration, Corpus, Option<u64>) {
    let started = Instant::now();
    let mut found_at = None;
    let kinds = job.base.fault_set.kinds();
    let mut corpus = corpus;
    let mut tally = Tally::default();
    let (mut j0, mut fresh) = (0u64, 0u64);
    loop {
        let n = match stop {
            _ if interrupted() => 0,
            Stop::Runs(total) => ROUND.min(total.saturating_sub(j0)),
            Stop::After(d) if started.elapsed() >= d => 0,
            Stop::After(_) => ROUND,
        };
        if n == 0 {
            break;
        }
        let inputs = round_inputs(job, partition, &corpus, &kinds, j0..j0 + n, &mut fresh);
        let next = AtomicU64::new(0);
        let slots: Vec<std::sync::Mutex<Option<Made>>> =
            (0..n).map(|_| std::sync::Mutex::new(None)).collect();
        std::thread::scope(|sc| {
            for _ in 0..threads.max(1) {
                sc.spawn(|| {
                    let runner = InProcess(&job.func);
                    loop {
                        let k = next.fetch_add(1, Ordering::Relaxed);
                        if k >= n || interrupted() {
                            break;
                        }
                        if let Stop::After(d) = stop {
                            if started.elapsed() >= d {
                                break;
                            }
                        }
                        let made = make(&runner, job.base, &inputs[k as usize]);
                        if let Ok(mut s) = slots[k as usize].lock() {
                            *s = Some(made);
                        }
                    }
                });
            }
        });
        // The round's finished runs, in index order (under a time budget, the first ones).
        let mut finished = Vec::new();
        let mut done = 0u64;
        for (k, slot) in slots.into_iter().enumerate() {
            let Some(made) = slot.into_inner().ok().flatten() else {
                break;
            };
            done += 1;
            let index = partition.index(j0 + k as u64);
            match &made.result {
                Ok(r) => {
                    if found_at.is_none() && r.failure.as_ref().is_some_and(wanted) {
                        found_at = Some(j0 + k as u64 + 1);
                    }
                    let marks = r.marks.keys().cloned();
                    if made.mutant {
                        let failure = r
                            .failure
                            .as_ref()
                            .map(|f| (f.signature(), f.to_string(), f.is_model_gap()));
                        tally.add_mutant(index, failure, &r.events, marks);
                    } else {
                        let seed = match &inputs[k] {
                            Input::Fresh(s) => *s,
                            Input::Mutant { .. } => 0,
                        };
                        let failure = r.failure.as_ref().map(|f| {
                            (
                                f.signature(),
                                f.to_string(),
                                calametra_core::choices::count_events(&r.events) as u64,
                                f.is_model_gap(),
                            )
                        });
                        tally.add(seed, failure, marks);
                    }
                    finished.push(finished_of(r, made.features));
                }
                Err(_) => {
                    tally.runs += 1;
                    tally.no_verdict += 1;
                }
            }
        }
        corpus.absorb(finished);
        j0 += done;
        if done < n || found_at.is_some() {
            break;
        }
    }
    (tally, started.elapsed(), corpus, found_at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_guided_find_is_named_by_its_partition_and_run_and_read_back() {
        for (p, j, name) in [
            (Partition::default(), 829, "guided::829"),
            (Partition { k: 2, n: 3 }, 7, "guided::2of3::7"),
        ] {
            assert_eq!(guided_suffix(p, j), name);
            assert_eq!(parse_guided_suffix(name), Some((p, j)));
            // The tally's `guided:<index>` is the run's place in the whole sequence.
            assert_eq!(guided_run_of(&format!("guided:{}", p.index(j)), p), Some(j));
        }
        for bad in [
            "guided::",
            "guided::08",
            "guided::x",
            "guided::1of1::3",
            "guided::0of2::3",
            "guided::3of2::1",
            "seed::0x1",
        ] {
            assert_eq!(parse_guided_suffix(bad), None, "{bad}");
        }
        // Another partition's run is not this one's.
        assert_eq!(guided_run_of("guided:5", Partition { k: 2, n: 3 }), None);
        assert_eq!(guided_run_of("0x4", Partition::default()), None);
    }
}
