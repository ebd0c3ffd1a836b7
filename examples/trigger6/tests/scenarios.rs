//! The Trigger 6 driver under the Calametra harness: the fixed driver against every fault site
//! of its baseline and 48 seeded schedules, the same on the second output (a monitor
//! hot-plugged into output 1), and the planted race, which exploration must find and minimize
//! (its regression file is committed and replayed first, byte-exactly).
//!
//! `cargo test -p calametra-example-trigger6 --test scenarios -- --list` shows the trials.

use calametra::prelude::*;
use calametra_example_trigger6::{scenario_fixed, scenario_planted, scenario_second_output};

/// The fixed driver: no invariant may break under any single transport fault but a corrupted
/// payload, or any seed (a fault may make the driver give up with an error; that is a pass).
///
/// Not `corrupt`: since seeded runs draw its offset and mask (not only `corrupt(0,0xff)`), it
/// breaks this driver's invariants in ways no fault-free order does, each an untriaged
/// robustness question rather than the race this scenario pins: a corrupted SET_MODE reaches
/// the dock as another valid mode the driver never reads back (`corrupt(31,0x26)` at
/// `ctrl.set_mode#1`, `modeset_has_valid_timing`), a corrupted DMA header or fence
/// notification is trusted (`flip_state_matches_ram` at `bulk.out#10`, `intr.in#4`). On a real
/// bus a damaged packet fails its CRC; a device answering garbage is another matter. The guest
/// scenario `kms_flip_corrupted` explores corruption on purpose.
#[calametra::scenario(
    spec = "../../specs/trigger6-jcd543.json",
    schedules = 48,
    faults = [stall, timeout, short, disconnect, delay]
)]
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
