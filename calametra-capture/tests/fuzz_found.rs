//! Inputs the fuzz targets (`fuzz/`) found crashing capture import or comparison, minimized,
//! kept so the bugs stay fixed. Each test names the target that found it.

use calametra_capture::{compare, Capture};
use calametra_core::host::DeviceHost;
use calametra_core::usb::Loopback;
use calametra_core::RunConfig;

/// `capture`: a usbmon timestamp near `i64::MAX` paced the model's clock to the end of virtual
/// time, and the next transfer's arrival (`now + latency`) overflowed. The clock saturates.
#[test]
fn a_capture_timestamp_at_the_end_of_time_compares_without_overflow() {
    let text = "\
ffff000000000001 1000 S Ci:1:002:0 s c0 02 0000 0000 0004 4 <
ffff000000000001 1010 C Ci:1:002:0 0 0 <
ffff000000000002 9223372036854775807 S Ci:1:002:0 s c0 02 0000 0000 0004 4 <
ffff000000000002 9223372036854775807 C Ci:1:002:0 0 0 <
";
    let c = Capture::parse("huge-timestamp.txt", text.as_bytes()).unwrap();
    let transfers = c.control_transfers();
    assert_eq!(transfers.len(), 2);
    let mut host = DeviceHost::new(Loopback::default(), &RunConfig::default());
    let report = compare::compare(&transfers, &mut host);
    assert_eq!(report.entries.len(), 2, "{}", report.render());
    assert_eq!(host.now(), u64::MAX);
}
