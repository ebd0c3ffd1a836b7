//! The headline story's scenario as a harness binary of the end-to-end tests (the same
//! scenario, path and seeds as `examples/trigger6-planted/tests/scenarios.rs`, whose 556
//! trials `scripts/explore.sh` runs), without its `expect`: a trial that breaks the invariant
//! fails and prints its screen, as a user's first run of the bug would. `tests/tests/story.rs`
//! drives it.

use calametra::prelude::*;

/// The planted copy of the Trigger 6 driver (see `calametra_example_trigger6_planted`).
#[calametra::scenario(
    spec = "../specs/trigger6-jcd543.json",
    schedules = 48,
    faults = transport
)]
fn fresh_frame_into_the_shown_buffer(sim: &mut Sim) {
    calametra_example_trigger6_planted::scenario(sim);
}

calametra::main!();
