//! `cargo bench -p calametra-core --bench core`: runs/s and records/s of a ~100-record scenario
//! with hashing, the trace hash's cost per record, exploration of 24 fault sites + 48 seeds, and
//! minimization of a 48-event failure. Wall-clock timing lives here, never in tests.

use calametra_core::choices::{Event, Source};
use calametra_core::exec::{client_choose, sleep};
use calametra_core::explore::{self, Probe};
use calametra_core::fault::{FaultSet, Site, SiteKind};
use calametra_core::shrink::minimize;
use calametra_core::trace::Trace;
use calametra_core::usb::{ControlIn, ControlOut, ControlType, Loopback, Recipient};
use calametra_core::{run, RunConfig, Sim};
use std::cell::Cell;
use std::rc::Rc;
use std::time::{Duration, Instant};

const T: Duration = Duration::from_millis(10);

/// Two tasks, a device, 16 control transfers and timers: about 100 trace records.
fn hundred_records(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    for name in ["a", "b"] {
        let iface = dev.interface();
        sim.spawn(name, async move {
            for i in 0..8u8 {
                let out = ControlOut {
                    control_type: ControlType::Vendor,
                    recipient: Recipient::Device,
                    request: 1,
                    value: 0,
                    index: 0,
                    data: &[i, i],
                };
                let _ = iface.control_out(out, T).await;
                let _ = iface
                    .control_in(
                        ControlIn {
                            control_type: ControlType::Vendor,
                            recipient: Recipient::Device,
                            request: 2,
                            value: 0,
                            index: 0,
                            length: 2,
                        },
                        T,
                    )
                    .await;
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
    if std::env::var_os("CALAMETRA_BENCH_RUNS_ONLY").is_some() {
        return;
    }

    // 2. The hash's cost per record: emit+hash vs emit into a trace that keeps nothing.
    let n = 1_000_000u64;
    let (secs, _) = time(
        || {
            let mut t = Trace::new(false);
            for i in 0..n {
                t.emit(i, "transfer", "driver", true, |d| {
                    d.str("site", "ctrl.load#1")
                        .hex("setup", &[0xc0, 2, 0, 0, 0, 0, 2, 0])
                        .str("status", "ok")
                        .u64("len", 2);
                });
            }
            t.hash()
        },
        1,
    );
    let (secs_nohash, _) = time(
        || {
            let mut t = Trace::new(false);
            for i in 0..n {
                t.emit(i, "transfer", "driver", false, |d| {
                    d.str("site", "ctrl.load#1")
                        .hex("setup", &[0xc0, 2, 0, 0, 0, 0, 2, 0])
                        .str("status", "ok")
                        .u64("len", 2);
                });
            }
            t.total_records()
        },
        1,
    );
    println!("record formatting + hash: {:.0} ns/record; formatting only: {:.0} ns/record; hash: {:.0} ns/record", secs / n as f64 * 1e9, secs_nohash / n as f64 * 1e9, (secs - secs_nohash).max(0.0) / n as f64 * 1e9);

    // 3. Exploration: 24 fault sites + 48 seeds of a small scenario.
    let sites: Vec<Site> = (1..=4)
        .map(|i| Site {
            name: format!("ctrl.load#{i}"),
            kind: SiteKind::Transfer { len: 2 },
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
