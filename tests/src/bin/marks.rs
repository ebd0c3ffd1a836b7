//! A harness binary for the coverage-marks floor: one scenario whose declared marks are all
//! reached often enough, and one (the sabotage) that declares a mark no seed reaches.

use calametra::prelude::*;

/// Marks `Often` on every run and `Sometimes` when the task's data draw is 0 (one in two).
fn marking(sim: &mut Sim) {
    sim.spawn("client", async move {
        mark("Often");
        if data_below(2) == 0 {
            mark("Sometimes");
        }
    });
}

/// Every declared mark is reached by at least 3 of the 16 fixed seeds.
#[calametra::scenario(schedules = 16, marks = ["Often", "Sometimes"], marks_floor = 3)]
fn floor_met(sim: &mut Sim) {
    marking(sim);
}

/// `Never` is declared but nothing marks it: the `marks` trial must fail with the table.
#[calametra::scenario(schedules = 16, marks = ["Often", "Never"], marks_floor = 3)]
fn floor_missed(sim: &mut Sim) {
    marking(sim);
}

calametra::main!();
