//! The flash logger's harness binary (`calametra_tests::flash_logger`): its scenario with
//! transport faults, as a user declares it. `tests/tests/guided_default.rs` sweeps it.

use calametra::prelude::*;

/// The flash logger (see `calametra_tests::flash_logger`).
#[calametra::scenario(schedules = 16, faults = transport)]
fn flash_logger(sim: &mut Sim) {
    calametra_tests::flash_logger::scenario(sim);
}

calametra::main!();
