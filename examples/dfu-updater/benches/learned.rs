//! `cargo bench -p calametra-example-dfu-updater --bench learned`: runs/s of the updater's
//! baseline on the hand-written DFU model (the scenario with its three invariants, and the
//! updater alone) and on a model learned from that run's own recording. Wall-clock timing
//! lives here, never in tests.

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
    let budget = Duration::from_secs(3);
    let hand = runs_per_s(&scenario, budget);
    let bare = runs_per_s(
        &|sim: &mut Sim| {
            let dev = sim.attach(Dfu::from_spec(&hand_spec));
            recorded::updater(sim, dev.interface());
        },
        budget,
    );
    let learned = runs_per_s(
        &|sim: &mut Sim| {
            let dev = sim.attach(Learned::from_spec(&spec));
            recorded::updater(sim, dev.interface());
        },
        budget,
    );
    println!("updater baseline, hand DFU model, scenario with invariants: {hand:8.0} runs/s");
    println!("updater baseline, hand DFU model, updater alone:             {bare:8.0} runs/s");
    println!(
        "updater baseline, learned model:                            {learned:8.0} runs/s ({:.2}x the scenario, {:.2}x the updater alone)",
        learned / hand,
        learned / bare
    );
}
