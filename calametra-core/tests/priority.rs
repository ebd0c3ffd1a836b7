//! The priority strategy (`Strategy::Priority`): a yield is a scheduling point, not a forced
//! switch, so the race of the peers' workload A with a `yield_now()` between steps (which PCT
//! as shuttle implements it, and loom, never produce) is found; runs are pure functions of
//! their seed and replay byte-exactly from their events.

use calametra_core::choices::{derive_seed, Source};
use calametra_core::exec::yield_now;
use calametra_core::explore::replay_config;
use calametra_core::swarm::Strategy;
use calametra_core::sync::Mutex;
use calametra_core::{run, RunConfig, Sim};
use std::cell::Cell;
use std::rc::Rc;

#[derive(Clone, Copy)]
struct Cell3 {
    connected: bool,
    status: u8,
    cache: u8,
}

async fn step(yields: bool) {
    if yields {
        yield_now().await;
    }
}

/// The peers' workload A (benches/peers), buggy: a poller re-checks `connected` and caches the
/// status in two lock steps, a hotplug task clears both.
fn stale_status(sim: &mut Sim, yields: bool) {
    let dev = Rc::new(Mutex::new(Cell3 {
        connected: true,
        status: 0x5a,
        cache: 0,
    }));
    let end: Rc<Cell<Option<(bool, Cell3)>>> = Rc::new(Cell::new(None));
    let d1 = dev.clone();
    let p = sim.spawn("poller", async move {
        if !d1.lock().await.connected {
            return false;
        }
        step(yields).await;
        let status = d1.lock().await.status;
        step(yields).await;
        let still = d1.lock().await.connected;
        step(yields).await;
        if still {
            d1.lock().await.cache = status;
        }
        true
    });
    let d2 = dev.clone();
    let h = sim.spawn("hotplug", async move {
        d2.lock().await.connected = false;
        step(yields).await;
        let mut d = d2.lock().await;
        d.status = 0;
        d.cache = 0;
    });
    let e2 = end.clone();
    sim.spawn("join", async move {
        let saw = p.await;
        h.await;
        let d = *dev.lock().await;
        e2.set(Some((saw, d)));
    });
    sim.invariant("no_stale_status_after_disconnect", move |_| {
        match end.get() {
            Some((true, d)) if !d.connected && d.cache != 0 => Err("stale"),
            _ => Ok(()),
        }
    });
}

fn yield_variant(sim: &mut Sim) {
    stale_status(sim, true)
}

fn noyield_variant(sim: &mut Sim) {
    stale_status(sim, false)
}

/// A seeded run as the harness makes it: `horizon` and `choices` are the baseline's steps and
/// task choices (10 and 8 without yields, 14 and 12 with them).
fn config(f: fn(&mut Sim), seed: u64, strategy: Option<Strategy>) -> RunConfig {
    let base = run(RunConfig::default(), &f);
    RunConfig {
        source: Source::Seeded(seed),
        strategy,
        horizon: base.steps,
        choices: base.choices,
        ..RunConfig::default()
    }
}

/// Failing runs among `n` seeds.
fn hits(f: fn(&mut Sim), strategy: Option<Strategy>, n: u64) -> u64 {
    (0..n)
        .filter(|&i| {
            run(config(f, derive_seed(7, "priority", i), strategy), &f)
                .failure
                .is_some()
        })
        .count() as u64
}

#[test]
#[ignore = "a measurement: cargo test -p calametra-core --test priority -- --ignored --nocapture"]
fn probe_hit_rates() {
    let n = 4000;
    for (name, f) in [
        ("noyield", noyield_variant as fn(&mut Sim)),
        ("yield", yield_variant),
    ] {
        let choices = run(RunConfig::default(), &f).choices as u32;
        let mut line = format!("{name}: swarm {}", hits(f, None, n));
        line += &format!(" uniform {}", hits(f, Some(Strategy::Uniform), n));
        for keep_percent in [50, 75, 90] {
            let st = Strategy::Sticky { keep_percent };
            line += &format!(" {st} {}", hits(f, Some(st), n));
        }
        for spawn_order in [false, true] {
            for depth in [2u8, 3] {
                for scale in [1u32, 2, 4] {
                    let st = Strategy::Priority {
                        depth,
                        horizon: choices * scale,
                        spawn_order,
                    };
                    line += &format!(" {st} {}", hits(f, Some(st), n));
                }
            }
        }
        println!("{line} (of {n})");
    }
}

#[test]
fn the_yield_variant_is_found_by_the_priority_strategy_and_replays() {
    let strategy = Some(Strategy::Priority {
        depth: 2,
        horizon: 16,
        spawn_order: false,
    });
    let found = (0..200)
        .map(|i| {
            run(
                config(yield_variant, derive_seed(1, "a-yield", i), strategy),
                &yield_variant,
            )
        })
        .find(|r| r.failure.is_some())
        .expect("the priority strategy finds the yield variant within 200 seeds");
    let again = run(
        replay_config(&RunConfig::default(), &found.events),
        &yield_variant,
    );
    assert_eq!(again.failure, found.failure);
    assert_eq!(
        again.hash, found.hash,
        "a priority run replays byte-exactly"
    );
}
