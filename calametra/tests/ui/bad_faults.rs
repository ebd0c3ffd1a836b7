use calametra::prelude::*;
#[calametra::scenario(faults = sometimes)]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
