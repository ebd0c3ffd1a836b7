#[calametra::scenario(guest = usbredir)]
fn s(guest: &mut Guest) { let _ = guest; }
calametra::main!();
