#[calametra::scenario(guest = lockstep, max_steps = 100)]
fn s(guest: &mut Guest) { let _ = guest; }
calametra::main!();
