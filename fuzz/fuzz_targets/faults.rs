//! Fault schedule JSON (`specs/faults/*.json`): `FaultPlan::parse`, and a plan that parses is
//! applied to a run of the loopback scenario (every transfer type, unplug and replug): the
//! bus applies whatever the file says without panicking. The trial-name form
//! (`Fault::parse`, `short(4)`, `corrupt(0,0xff)`) is read too.
#![no_main]

use calametra_core::choices::Source;
use calametra_core::fault::{Fault, FaultPlan};
use calametra_fuzz::{no_panic, run_loopback};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if text.len() < 40 {
        if let Ok(f) = Fault::parse(text) {
            assert_eq!(Fault::parse(&f.to_string()), Ok(f.clone()), "{f}");
        }
    }
    let Ok(plan) = FaultPlan::parse(Path::new("specs/faults/fuzz.json"), text) else {
        return;
    };
    no_panic(&run_loopback(plan.clone(), Source::Default));
    no_panic(&run_loopback(plan, Source::Seeded(data.len() as u64)));
});
