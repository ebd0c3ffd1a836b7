#[calametra::scenario(schedules = "many")]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
