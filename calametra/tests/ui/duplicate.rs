#[calametra::scenario(schedules = 4, schedules = 8)]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
