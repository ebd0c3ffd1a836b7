//! Workload A in loom, written directly against loom's API (`loom::sync::Mutex`,
//! `loom::thread`): the same steps as the shuttle version. loom explores every interleaving
//! (depth-first, no seed), so "runs until found" is one number and the correct variant's
//! throughput is the whole exploration's schedules per second.

use loom::sync::{Arc, Mutex};
use loom::thread;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicU64, Ordering};

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

/// Explores every interleaving of the variant; returns whether one failed and how many
/// executions ran (the failing one included).
pub fn explore(yields: bool, buggy: bool) -> (bool, u64) {
    // loom unwinds internally; another tool's panic hook (shuttle installs one) must not print.
    crate::quiet_panics();
    static COUNT: AtomicU64 = AtomicU64::new(0);
    COUNT.store(0, Ordering::Relaxed);
    let mut b = loom::model::Builder::new();
    b.preemption_bound = None;
    let r = catch_unwind(AssertUnwindSafe(|| {
        b.check(move || {
            COUNT.fetch_add(1, Ordering::Relaxed);
            stale_status(yields, buggy);
        })
    }));
    (r.is_err(), COUNT.load(Ordering::Relaxed))
}
