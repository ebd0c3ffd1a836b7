//! The Trigger 6 driver under the Calametra harness: the fixed driver against every fault site
//! of its baseline and 48 seeded schedules, the same on the second output (a monitor
//! hot-plugged into output 1), and the planted race, which exploration must find and minimize
//! (its regression file is committed and replayed first, byte-exactly).
//!
//! `cargo test -p calametra-example-trigger6 --test scenarios -- --list` shows the trials.

use calametra::prelude::*;
use calametra_example_trigger6::{scenario_fixed, scenario_planted, scenario_second_output};

/// The fixed driver: no invariant may break under any single fault or any seed, `corrupt`
/// included (a fault may make the driver give up with an error; that is a pass).
///
/// `corrupt` is a wrong byte of an IN payload (the reply a driver must validate). It found one
/// robustness bug here, now fixed: a fence notification whose fence number arrives corrupted
/// (`fixed_driver::seed::0xec27eba6b8d7`, base seed 0, minimized to `corrupt(13,0x52) at
/// intr.in#3`: "fence 20994 done") was recorded though the driver had submitted fences 1 and
/// 2 only, breaking `flip_state_matches_ram`; the driver now takes a completion only for a
/// fence it submitted (`irq_loop`). A device misreading what the driver sent is `garble`, which
/// no driver can prevent and this scenario does not name; the guest scenario
/// `kms_flip_corrupted` garbles frames on purpose.
#[calametra::scenario(
    spec = "../../specs/trigger6-jcd543.json",
    schedules = 48,
    faults = all
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
