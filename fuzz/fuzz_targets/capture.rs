//! Captures (`calametra compare --capture`): pcapng, pcap and usbmon text, optionally gzipped,
//! detected by magic: `Capture::parse`, the transfers and devices read from it, and a capture
//! that parses is compared against the Trigger 6 model as `calametra compare` does, and learned
//! as `calametra learn` does (the spec written, read back into the replay model, which replays
//! the capture's first control transfers).
#![no_main]

use calametra_capture::compare;
use calametra_capture::learn::{learn, Input, Selection};
use calametra_capture::Capture;
use calametra_core::spec::Spec;
use calametra_fuzz::{host, spec};
use calametra_models::learned::Learned;
use calametra_models::trigger6::Trigger6;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(capture) = Capture::parse("fuzz.pcapng", data) else {
        return;
    };
    let _ = capture.transfers();
    let _ = capture.devices();
    if let Ok(input) = Input::parse("fuzz.pcapng", data) {
        if let Ok((learned, _)) = learn(&[input], &Selection::Only) {
            let json = learned.to_json();
            let spec = Spec::parse("fuzz-learned.json", &json).expect("a learned spec parses");
            let model = Learned::try_from_spec(&spec).expect("a learned spec reads back");
            let mut transfers = capture.control_transfers();
            transfers.truncate(64);
            let mut h = host(model);
            let _ = compare::compare(&transfers, &mut h).summary();
        }
    }
    let mut transfers = capture.control_transfers();
    transfers.truncate(64);
    let Ok(model) = Trigger6::try_from_spec(spec(0)) else {
        return;
    };
    let mut h = host(model);
    let report = compare::compare(&transfers, &mut h);
    let _ = report.summary();
    let _ = report.render();
});
