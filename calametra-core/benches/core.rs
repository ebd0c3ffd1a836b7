//! `cargo bench -p calametra-core --bench core`: runs/s and records/s of a ~100-record scenario
//! with hashing, its heap allocations per run (a counting allocator) and, where valgrind is
//! installed, its instructions per run under callgrind (a figure that does not move with the
//! machine's load); the trace record's cost (encoding + hash, JSON formatting); exploration of 24
//! fault sites + 48 seeds; and minimization of a 48-event failure. Wall-clock timing lives here,
//! never in tests.
//!
//! Environment: `CALAMETRA_BENCH_RUNS_ONLY=1` stops after the runs/s figures;
//! `CALAMETRA_BENCH_NO_CALLGRIND=1` skips callgrind; `CALAMETRA_BENCH_CALLGRIND_RUNS=<n>` (set by
//! the bench for its child under callgrind) makes only `n` runs of the scenario and exits.

use calametra_core::choices::{Event, Source};
use calametra_core::exec::{client_choose, sleep};
use calametra_core::explore::{self, Probe};
use calametra_core::fault::{FaultSet, Site, SiteKind};
use calametra_core::shrink::minimize;
use calametra_core::trace::Trace;
use calametra_core::usb::Loopback;
use calametra_core::{run, RunConfig, Sim};
use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// The system allocator, counting allocations (the bench's allocation counter).
struct Counting;

static ALLOCS: AtomicU64 = AtomicU64::new(0);

// SAFETY: forwards every call to `System` unchanged; the counter is only a relaxed atomic.
unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: the caller's contract is passed on unchanged.
        unsafe { System.alloc(l) }
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        // SAFETY: as above.
        unsafe { System.dealloc(p, l) }
    }
    unsafe fn alloc_zeroed(&self, l: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.alloc_zeroed(l) }
    }
    unsafe fn realloc(&self, p: *mut u8, l: Layout, n: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        // SAFETY: as above.
        unsafe { System.realloc(p, l, n) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

/// Instructions one run of the scenario executes under callgrind: the bench itself, run twice
/// under `valgrind --tool=callgrind` (0 runs and `n` runs), the difference over `n`. `None`
/// where valgrind is missing or fails.
#[allow(
    clippy::disallowed_methods,
    reason = "a benchmark runs valgrind, outside any simulated run"
)]
fn callgrind_per_run(n: u64) -> Option<(f64, u64)> {
    let exe = std::env::current_exe().ok()?;
    let total = |runs: u64| -> Option<u64> {
        let out = std::process::Command::new("valgrind")
            .args([
                "--tool=callgrind",
                "--callgrind-out-file=/dev/null",
                "--dump-instr=no",
            ])
            .arg(&exe)
            .env("CALAMETRA_BENCH_CALLGRIND_RUNS", runs.to_string())
            .output()
            .ok()?;
        let err = String::from_utf8_lossy(&out.stderr);
        // `==123== Collected : 123456789`
        err.lines()
            .find_map(|l| l.split("Collected :").nth(1))
            .and_then(|v| v.trim().parse().ok())
    };
    let base = total(0)?;
    let with = total(n)?;
    Some((with.saturating_sub(base) as f64 / n as f64, with))
}

const T: Duration = Duration::from_millis(10);

/// Two tasks, a device, 16 control transfers and timers: about 100 trace records.
fn hundred_records(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    for name in ["a", "b"] {
        let iface = dev.interface();
        sim.spawn(name, async move {
            for i in 0..8u8 {
                let _ = iface.control_out(Loopback::store(&[i, i]), T).await;
                let _ = iface.control_in(Loopback::load(2), T).await;
                sleep(Duration::from_micros(50)).await;
            }
        });
    }
    sim.invariant("short", move |w| w.model(dev).stored().len() <= 2);
}

/// Client actions with a planted bug: fails once `poke` was drawn three times.
fn planted(sim: &mut Sim) {
    let pokes = Rc::new(Cell::new(0u32));
    let p2 = pokes.clone();
    sim.spawn("client", async move {
        for _ in 0..64 {
            match client_choose(&[
                "poke", "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n",
            ]) {
                Some(0) => p2.set(p2.get() + 1),
                Some(_) => {}
                None => return,
            }
            calametra_core::exec::yield_now().await;
        }
    });
    sim.invariant("fewer_than_three_pokes", move |_| pokes.get() < 3);
}

#[allow(
    clippy::disallowed_methods,
    reason = "a benchmark measures wall time, outside any simulated run"
)]
fn time<R>(f: impl FnMut() -> R, iters: u32) -> (f64, R) {
    let mut f = f;
    let mut last = None;
    let t = Instant::now();
    for _ in 0..iters {
        last = Some(std::hint::black_box(f()));
    }
    (t.elapsed().as_secs_f64(), last.expect("ran"))
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    // 1. Runs per second of a ~100-record scenario, hashing included.
    let cfg = RunConfig {
        source: Source::Seeded(1),
        ..RunConfig::default()
    };
    if let Some(n) = std::env::var("CALAMETRA_BENCH_CALLGRIND_RUNS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
    {
        // The child under callgrind: the first run's one-time costs stay in both counts.
        let _ = std::hint::black_box(run(cfg.clone(), &hundred_records).hash);
        for _ in 0..n {
            let _ = std::hint::black_box(run(cfg.clone(), &hundred_records).hash);
        }
        return;
    }
    let probe = run(cfg.clone(), &hundred_records);
    assert!(probe.failure.is_none(), "{:?}", probe.failure);
    let records = probe.records;
    let iters = 4000;
    let mut samples = Vec::new();
    for _ in 0..5 {
        let (secs, _) = time(|| run(cfg.clone(), &hundred_records).hash, iters);
        samples.push(iters as f64 / secs);
    }
    let runs_per_s = median(samples);
    println!("scenario: {records} deterministic records per run");
    println!("runs/s (hash included, median of 5 x {iters}): {runs_per_s:.0}");
    println!("records/s: {:.0}", runs_per_s * records as f64);
    let before = ALLOCS.load(Ordering::Relaxed);
    let n = 1000u64;
    for _ in 0..n {
        let _ = std::hint::black_box(run(cfg.clone(), &hundred_records).hash);
    }
    let allocs = (ALLOCS.load(Ordering::Relaxed) - before) as f64 / n as f64;
    println!(
        "allocations per run: {allocs:.1} ({:.2} per record)",
        allocs / records as f64
    );
    if std::env::var_os("CALAMETRA_BENCH_NO_CALLGRIND").is_none() {
        match callgrind_per_run(200) {
            Some((per_run, _)) => println!(
                "instructions per run (callgrind, 200 runs less 0): {per_run:.0} ({:.0} per record)",
                per_run / records as f64
            ),
            None => println!("instructions per run: (valgrind not found or failed)"),
        }
    }
    if std::env::var_os("CALAMETRA_BENCH_RUNS_ONLY").is_some() {
        return;
    }

    // 2. A record's cost: encoding + hash (what every run pays), and JSON formatting (what a
    // kept or written trace adds), each per record.
    let n = 1_000_000u64;
    let emit = |t: &mut Trace, i: u64, deterministic: bool| {
        t.emit(i, "transfer", "driver", deterministic, |d| {
            d.str("site", "ctrl.load#1")
                .hex("setup", &[0xc0, 2, 0, 0, 0, 0, 2, 0])
                .str("status", "ok")
                .u64("len", 2);
        });
    };
    let (secs_hash, _) = time(
        || {
            let mut t = Trace::new(false);
            for i in 0..n {
                emit(&mut t, i, true);
            }
            t.hash()
        },
        1,
    );
    let (secs_json, _) = time(
        || {
            let mut t = Trace::new(true);
            for i in 0..n {
                emit(&mut t, i, false);
            }
            t.total_records()
        },
        1,
    );
    println!(
        "record encoding + hash: {:.0} ns/record; JSON formatting (kept lines): {:.0} ns/record",
        secs_hash / n as f64 * 1e9,
        secs_json / n as f64 * 1e9
    );

    // 3. Exploration: 24 fault sites + 48 seeds of a small scenario.
    let sites: Vec<Site> = (1..=4)
        .map(|i| Site {
            name: format!("ctrl.load#{i}"),
            kind: SiteKind::Transfer {
                len: 2,
                dir: calametra_core::fault::Dir::In,
                packet: 1,
            },
        })
        .collect();
    let mut probes = explore::site_probes(&sites, &FaultSet::Transport);
    assert_eq!(probes.len(), 24);
    probes.extend(explore::seed_probes("bench::small", 0, 48));
    let base = RunConfig::default();
    let mut samples = Vec::new();
    for _ in 0..5 {
        let (secs, failures) = time(
            || {
                probes
                    .iter()
                    .filter(|p| run(p.config(&base), &hundred_records).failure.is_some())
                    .count()
            },
            1,
        );
        let _ = failures;
        samples.push(secs * 1e3);
    }
    println!(
        "explore 24 sites + 48 seeds (72 runs): {:.2} ms (median of 5)",
        median(samples)
    );

    // 4. Minimization of a 48-event failure.
    let failing = (0..10_000u64)
        .map(|s| run(Probe::Seed(s).config(&base), &planted))
        .find(|r| r.failure.is_some() && r.events.len() >= 48)
        .expect("a seed fails after at least 48 events");
    let events: Vec<Event> = failing.events.clone();
    let sig = failing
        .failure
        .as_ref()
        .map(|f| f.signature())
        .unwrap_or_default();
    let mut samples = Vec::new();
    let mut result = None;
    for _ in 0..5 {
        let (secs, shrunk) = time(
            || {
                minimize(events.clone(), &mut |cand| {
                    let r = run(explore::replay_config(&base, cand), &planted);
                    match r.failure {
                        Some(f) if f.signature() == sig => Some(r.events),
                        _ => None,
                    }
                })
            },
            1,
        );
        samples.push(secs * 1e3);
        result = Some(shrunk);
    }
    let shrunk = result.expect("minimized");
    println!(
        "minimize a {}-event failure to {} events ({} replays, delta {}): {:.2} ms (median of 5)",
        events.len(),
        shrunk.events.len(),
        shrunk.attempts,
        shrunk.chain_text(),
        median(samples)
    );
}
