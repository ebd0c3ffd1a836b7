use calametra::prelude::*;
#[calametra::scenario(schedules = 4, faults = [stall, short, delay], max_steps = 500, virtual_timeout = "2s", seed = 0x2a)]
fn pinned(sim: &mut Sim) { let _ = sim; }
#[calametra::scenario(faults = all, schedules = 2)]
fn everything(sim: &mut Sim) { let _ = sim; }
const MARKS: &[&str] = &["A", "B"];
#[calametra::scenario(schedules = 2, marks = ["A"], marks_floor = 1)]
fn marked(sim: &mut Sim) { sim.spawn("t", async { mark("A"); }); }
#[calametra::scenario(schedules = 2, marks = MARKS)]
fn marked_by_a_const(sim: &mut Sim) { let _ = sim; }
// One duration grammar with CALAMETRA_SWEEP: hours and minutes too.
#[calametra::scenario(schedules = 1, virtual_timeout = "6h")]
fn hours(sim: &mut Sim) { let _ = sim; }
#[calametra::scenario(schedules = 1, virtual_timeout = "1.5m")]
fn minutes(sim: &mut Sim) { let _ = sim; }
// One primitive alone, named without a list.
#[calametra::scenario(schedules = 1, faults = delay)]
fn one_primitive(sim: &mut Sim) { let _ = sim; }
calametra::main!();
