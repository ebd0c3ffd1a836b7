//! The headline story: the planted copy of the Trigger 6 driver under the harness, over every
//! transport fault site of its baseline and 48 seeded schedules. Exploration must break
//! `flip_state_matches_ram` (the copy uploads a fresh frame into the buffer the dock still
//! shows), minimize it and save it; the saved case is committed and replayed first,
//! byte-exactly.
//!
//! `cargo test -p calametra-example-trigger6-planted --test scenarios -- --list` shows the
//! trials; `scripts/explore.sh` runs the story.

use calametra::prelude::*;

/// The planted race, found among the transport fault sites and seeded schedules.
#[calametra::scenario(
    spec = "../../specs/trigger6-jcd543.json",
    schedules = 48,
    faults = transport,
    expect = "flip_state_matches_ram"
)]
fn fresh_frame_into_the_shown_buffer(sim: &mut Sim) {
    calametra_example_trigger6_planted::scenario(sim);
}

calametra::main!();
