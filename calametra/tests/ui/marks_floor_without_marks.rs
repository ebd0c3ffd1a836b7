#[calametra::scenario(schedules = 4, marks_floor = 2)]
fn s(sim: &mut Sim) { let _ = sim; }
calametra::main!();
