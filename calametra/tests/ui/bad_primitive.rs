use calametra::prelude::*;
#[calametra::scenario(faults = [stall, explode])]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
