use calametra::prelude::*;
#[calametra::scenario(schedules = 4, faults = [stall, short, delay], max_steps = 500, virtual_timeout = "2s", seed = 0x2a)]
fn pinned(sim: &mut Sim) { let _ = sim; }
#[calametra::scenario(faults = all, schedules = 2)]
fn everything(sim: &mut Sim) { let _ = sim; }
calametra::main!();
