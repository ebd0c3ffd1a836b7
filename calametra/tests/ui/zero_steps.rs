#[calametra::scenario(max_steps = 0)]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
