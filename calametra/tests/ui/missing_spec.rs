#[calametra::scenario(spec = "specs/does-not-exist.json")]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
