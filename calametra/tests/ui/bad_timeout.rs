#[calametra::scenario(virtual_timeout = "soon")]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
