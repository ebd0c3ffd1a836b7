#[calametra::scenario(seed = 7, expect = "no_stale_status")]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
