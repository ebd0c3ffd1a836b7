//! The Trigger 6 model's coverage marks over a fixed set of seeds, as the framework's floor: the
//! `trigger6_marks::marks` trial fails with every mark's count when one of `marks::ALL` is
//! reached by fewer than three of the 16 seeds. The scenario polls status, modesets and flips
//! a fragmented frame while a second task modesets again, with an `unplug` external.

use calametra::prelude::*;
use calametra_models::trigger6::marks;

mod support;

#[calametra::scenario(schedules = 16, marks = marks::ALL, marks_floor = 3)]
fn trigger6_marks(sim: &mut Sim) {
    support::marks_scenario(sim);
}

calametra::main!();
