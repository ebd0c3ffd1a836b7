//! A harness binary with a planted bug in a small test model (the status device's disconnect
//! forgets its cached status). `CALAMETRA_TEST_FIXED=1` fixes the bug, as a developer would.

use calametra::prelude::*;
use calametra_tests::status_scenario;

fn fixed() -> bool {
    // Read once at scenario setup: the same for every run of a process.
    std::env::var_os("CALAMETRA_TEST_FIXED").is_some()
}

/// Long client runs: up to 64 actions, so some failing seeds take 40 or more events.
#[calametra::scenario(schedules = 64)]
fn status_long(sim: &mut Sim) {
    status_scenario(sim, !fixed(), 64);
}

/// The same bug, as a scenario whose job is to show it is found.
#[calametra::scenario(schedules = 64, expect = "belief_matches_connection")]
fn status_found(sim: &mut Sim) {
    status_scenario(sim, !fixed(), 48);
}

calametra::main!();
