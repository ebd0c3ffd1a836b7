#[calametra::scenario(shedules = 4)]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
