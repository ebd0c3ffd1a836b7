//! Regression files (`calametra-regressions/**.json`): `Regression::parse`; a file that parses
//! writes back to text that parses to the same value, and its events are replayed into the
//! loopback scenario the way the harness replays a saved failure: hostile events (a pick
//! past the options, a fault at any site, a huge point) are not panics.
#![no_main]

use calametra_core::choices::{story, Source};
use calametra_core::fault::FaultPlan;
use calametra_core::regress::Regression;
use calametra_fuzz::{no_panic, run_loopback};
use libfuzzer_sys::fuzz_target;
use std::path::Path;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let path = Path::new("calametra-regressions/fuzz/0123456789ab.json");
    let Ok(r) = Regression::parse(path, text) else {
        return;
    };
    let again = Regression::parse(path, &r.to_json()).expect("a written file reads back");
    assert_eq!(again, r);
    let _ = story(&r.events);
    no_panic(&run_loopback(
        FaultPlan::default(),
        Source::Replay(r.events),
    ));
});
