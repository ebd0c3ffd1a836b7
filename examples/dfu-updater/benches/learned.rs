//! `cargo bench -p calametra-example-dfu-updater --bench learned`: runs/s of the updater's
//! baseline on the hand-written DFU model (the scenario with its three invariants, and the
//! updater alone) and on a model learned from that run's own recording. Wall-clock timing
//! lives here, never in tests. Three rounds of a second each, taking turns; the best of each.

use calametra_core::explore::Probe;
use calametra_core::{run, RunConfig, Sim};
use calametra_example_dfu_updater::scenario;
use calametra_models::dfu::Dfu;
use calametra_models::learned::Learned;
use std::time::{Duration, Instant};

#[path = "../tests/recorded/mod.rs"]
mod recorded;

/// Runs per second of `f`'s baseline over about `budget` of wall clock.
#[allow(clippy::disallowed_methods)] // a benchmark times on purpose
fn runs_per_s(f: &dyn Fn(&mut Sim), budget: Duration) -> f64 {
    let config = Probe::Baseline.config(&RunConfig::default());
    let r = run(config.clone(), f);
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let start = Instant::now();
    let mut n = 0u64;
    while start.elapsed() < budget {
        let r = run(config.clone(), f);
        assert!(r.failure.is_none());
        n += 1;
    }
    n as f64 / start.elapsed().as_secs_f64()
}

fn main() {
    let (spec, _) = recorded::learned_spec();
    let hand_spec = calametra_core::spec::Spec::parse(
        "specs/dfu11-tolerant.json",
        calametra_example_dfu_updater::scenario::TOLERANT_SPEC,
    )
    .unwrap();
    // Rounds that take turns, the best of each kept: a busy machine slows them alike.
    let bare_scenario = |sim: &mut Sim| {
        let dev = sim.attach(Dfu::from_spec(&hand_spec));
        recorded::updater(sim, dev.interface());
    };
    let learned_scenario = |sim: &mut Sim| {
        let dev = sim.attach(Learned::from_spec(&spec));
        recorded::updater(sim, dev.interface());
    };
    let budget = Duration::from_secs(1);
    let (mut hand, mut bare, mut learned) = (0f64, 0f64, 0f64);
    for _ in 0..3 {
        hand = hand.max(runs_per_s(&scenario, budget));
        bare = bare.max(runs_per_s(&bare_scenario, budget));
        learned = learned.max(runs_per_s(&learned_scenario, budget));
    }
    println!("updater baseline, hand DFU model, scenario with invariants: {hand:8.0} runs/s");
    println!("updater baseline, hand DFU model, updater alone:             {bare:8.0} runs/s");
    println!(
        "updater baseline, learned model:                            {learned:8.0} runs/s ({:.2}x the scenario, {:.2}x the updater alone)",
        learned / hand,
        learned / bare
    );
}
