//! A harness binary whose Trigger 6 scenario fails once a frame is on the dock's second output:
//! its failure screen, with `CALAMETRA_SCANOUT=<dir>`, writes and names the picture the dock
//! shows (the colour bars); its saved case and traces replay with pictures for `calametra`
//! (`show --at --scanout`, `replay --scanout`, `export --frames`).

use calametra::prelude::*;
use calametra_example_trigger6::build_second_output;

/// The example's second-output scenario with an invariant that breaks once output 1 shows a
/// frame: the driver's first flip there breaks it, with no fault and no event.
#[calametra::scenario(schedules = 1, faults = none)]
fn bars_on_output_1(sim: &mut Sim) {
    let h = build_second_output(sim);
    sim.invariant("output_1_dark", move |w| {
        w.model(h.dock).inner().flip_state(1).shown.is_none()
    });
}

/// The example's second-output scenario as it is (it passes): the colour bars flipped onto
/// output 1 five times, a trace to replay with pictures.
#[calametra::scenario(schedules = 1, faults = none)]
fn bars_shown(sim: &mut Sim) {
    build_second_output(sim);
}

calametra::main!();
