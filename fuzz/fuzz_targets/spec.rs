//! Spec JSON as a user writes it: `Spec::parse`, then every model's `try_from_spec` (the
//! learned replay model's too); a model that builds is enumerated like a freshly plugged
//! device. Malformed specs are errors naming file and field, never panics.
#![no_main]

use calametra_core::spec::Spec;
use calametra_fuzz::{enumerate, host, models_from, observe};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(spec) = Spec::parse("fuzz/spec.json", data) else {
        return;
    };
    for model in models_from(&spec) {
        let mut h = host(model);
        enumerate(&mut h);
        observe(&mut h);
    }
});
