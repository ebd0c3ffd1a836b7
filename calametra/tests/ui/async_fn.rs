#[calametra::scenario(schedules = 4)]
async fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
