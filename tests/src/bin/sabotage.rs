//! Scenarios that break the rules on purpose: each must be caught, with a useful message.

use calametra::prelude::*;
#[allow(
    clippy::disallowed_types,
    reason = "leaks hash order on purpose: the harness must catch it"
)]
use std::collections::HashMap;

/// Iterates a std HashMap with RandomState and lets the order reach the trace.
#[calametra::scenario(schedules = 1)]
#[allow(
    clippy::disallowed_types,
    reason = "leaks hash order on purpose: the harness must catch it"
)]
fn hashmap_order(sim: &mut Sim) {
    let mut m = HashMap::new();
    for i in 0..16 {
        m.insert(format!("key{i}"), i);
    }
    sim.spawn("leaky", async move {
        for (k, _) in m.iter() {
            mark(k);
        }
    });
}

/// Reads the wall clock and lets it reach the trace.
#[calametra::scenario(schedules = 1)]
#[allow(
    clippy::disallowed_methods,
    reason = "leaks the wall clock on purpose: the harness must catch it"
)]
fn wall_clock(sim: &mut Sim) {
    sim.spawn("leaky", async move {
        let t = std::time::Instant::now();
        let mut x = 0u64;
        for i in 0..1000 {
            x = x.wrapping_add(i);
        }
        mark(&format!("took {:?} for {x}", t.elapsed()));
    });
}

/// Panics on some seeds (client draw 3): those trials fail, the others still run.
#[calametra::scenario(schedules = 12)]
fn panics_sometimes(sim: &mut Sim) {
    sim.spawn("driver", async {
        if let Some(3) = client_below(4) {
            panic!("driver bug: unexpected action 3");
        }
    });
}

calametra::main!();
