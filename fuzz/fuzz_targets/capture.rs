//! Captures (`calametra compare --capture`): pcapng, pcap and usbmon text, optionally gzipped,
//! detected by magic: `Capture::parse`, the transfers and devices read from it, and a capture
//! that parses is compared against the Trigger 6 model as `calametra compare` does.
#![no_main]

use calametra_capture::compare;
use calametra_capture::Capture;
use calametra_fuzz::{host, spec};
use calametra_models::trigger6::Trigger6;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(capture) = Capture::parse("fuzz.pcapng", data) else {
        return;
    };
    let _ = capture.transfers();
    let _ = capture.devices();
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
