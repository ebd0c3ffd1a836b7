//! Workload A in shuttle: the same poller and hotplug steps as threads on `shuttle::sync::Mutex`
//! (whose `lock` is a scheduling point), `shuttle::thread::yield_now` between steps in the
//! yield variant, the main thread joining both and asserting. Runs under shuttle's random and
//! PCT schedulers.

use shuttle::scheduler::{PctScheduler, RandomScheduler, Scheduler};
use shuttle::sync::Mutex;
use shuttle::{thread, Config, FailurePersistence, Runner};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

#[derive(Clone, Copy)]
struct DevCell {
    connected: bool,
    status: u8,
    cache: u8,
}

fn step_yield(yields: bool) {
    if yields {
        thread::yield_now();
    }
}

/// One execution of workload A.
pub fn stale_status(yields: bool, buggy: bool) {
    let dev = Arc::new(Mutex::new(DevCell {
        connected: true,
        status: 0x5a,
        cache: 0,
    }));
    let d1 = dev.clone();
    let p = thread::spawn(move || {
        if !d1.lock().unwrap().connected {
            return false;
        }
        step_yield(yields);
        let status = d1.lock().unwrap().status;
        step_yield(yields);
        if buggy {
            let still = d1.lock().unwrap().connected;
            step_yield(yields);
            if still {
                d1.lock().unwrap().cache = status;
            }
        } else {
            let mut d = d1.lock().unwrap();
            if d.connected {
                d.cache = status;
            }
        }
        true
    });
    let d2 = dev.clone();
    let h = thread::spawn(move || {
        d2.lock().unwrap().connected = false;
        step_yield(yields);
        let mut d = d2.lock().unwrap();
        d.status = 0;
        d.cache = 0;
    });
    let saw = p.join().unwrap();
    h.join().unwrap();
    let d = *dev.lock().unwrap();
    assert!(
        !(saw && !d.connected && d.cache != 0),
        "status cached while disconnected"
    );
}

/// Which shuttle scheduler.
#[derive(Clone, Copy, Debug)]
pub enum Sched {
    /// `RandomScheduler`: a uniformly random runnable task at every scheduling point.
    Random,
    /// `PctScheduler` with depth 3.
    Pct,
}

fn config() -> Config {
    let mut c = Config::new();
    c.failure_persistence = FailurePersistence::None;
    c.silence_warnings = true;
    c
}

/// Runs `iterations` executions of the variant; returns whether one failed and how many ran
/// (the failing one included).
pub fn explore(s: Sched, seed: u64, iterations: usize, yields: bool, buggy: bool) -> (bool, u64) {
    let body = move || stale_status(yields, buggy);
    match s {
        Sched::Random => explore_with(RandomScheduler::new_from_seed(seed, iterations), body),
        Sched::Pct => explore_with(PctScheduler::new_from_seed(seed, 3, iterations), body),
    }
}

/// Runs `body` under `sched` until the scheduler stops or an execution fails; returns whether
/// one failed and how many ran (the failing one included).
fn explore_with<S: Scheduler + 'static>(
    sched: S,
    body: impl Fn() + Send + Sync + 'static,
) -> (bool, u64) {
    let count = Arc::new(AtomicU64::new(0));
    let c2 = count.clone();
    let runner = Runner::new(sched, config());
    let r = catch_unwind(AssertUnwindSafe(|| {
        runner.run(move || {
            c2.fetch_add(1, Ordering::Relaxed);
            body();
        })
    }));
    // shuttle installs a panic hook that prints every panic, in any tool, from then on.
    crate::quiet_panics();
    (r.is_err(), count.load(Ordering::Relaxed))
}

/// What `calametra-peers --spin s-W` loops on: shuttle's random scheduler over `iterations`
/// executions of a probe, the same probes Calametra's `--spin` has, so what a run and what a
/// step cost can be set side by side. `e0`: an execution whose main thread does nothing;
/// `y2`: two threads that yield 500 times each, joined by the main thread; `a`, `ay`:
/// workload A (the correct variant) without and with yields. Returns how many executions ran;
/// `None` for another name.
pub fn spin(w: &str, seed: u64, iterations: usize) -> Option<u64> {
    let body: fn() = match w {
        "e0" => || {},
        "y2" => || {
            let ts: Vec<_> = (0..2)
                .map(|_| {
                    thread::spawn(|| {
                        for _ in 0..500 {
                            thread::yield_now();
                        }
                    })
                })
                .collect();
            for t in ts {
                t.join().unwrap();
            }
        },
        "a" => || stale_status(false, false),
        "ay" => || stale_status(true, false),
        _ => return None,
    };
    let (_, ran) = explore_with(RandomScheduler::new_from_seed(seed, iterations), body);
    Some(ran)
}
