//! The Trigger 6 driver under the Calametra harness: the fixed driver against every fault site
//! of its baseline and 48 seeded schedules, the same on the second output (a monitor
//! hot-plugged into output 1), and the planted race, which exploration must find and minimize
//! (its regression file is committed and replayed first, byte-exactly).
//!
//! `cargo test -p calametra-example-trigger6 --test scenarios -- --list` shows the trials.

use calametra::prelude::*;
use calametra_example_trigger6::{scenario_fixed, scenario_planted, scenario_second_output};

/// The fixed driver: no invariant may break under any single transport fault or any seed (a
/// fault may make the driver give up with an error; that is a pass).
#[calametra::scenario(spec = "../../specs/trigger6-jcd543.json", schedules = 48, faults = transport)]
fn fixed_driver(sim: &mut Sim) {
    scenario_fixed(sim);
}

/// The planted race: a stale "connected" status reply, taken before an unplug, is accepted
/// after it. Exploration must break `status_matches_connection`.
#[calametra::scenario(
    spec = "../../specs/trigger6-jcd543.json",
    schedules = 200,
    expect = "status_matches_connection"
)]
fn stale_status_after_disconnect(sim: &mut Sim) {
    scenario_planted(sim);
}

/// The second output: a monitor hot-plugged into output 1 while the driver, driving output 1,
/// waits; the driver shows the colour bars there. No invariant may break under any single
/// transport fault or any seed.
#[calametra::scenario(spec = "../../specs/trigger6-jcd543.json", schedules = 16, faults = transport)]
fn second_output(sim: &mut Sim) {
    scenario_second_output(sim);
}

calametra::main!();
