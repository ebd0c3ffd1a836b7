#[calametra::scenario(schedules = 4)]
fn s() {}
calametra::main!();
