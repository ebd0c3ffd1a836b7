//! The usbd-dfu firmware on the simulated bus: it enumerates, the example updater downloads the
//! 64 KiB image, manifests it and uploads it back identical, and the run is byte-exact twice.

use calametra_core::{run, RunConfig, Sim};
use calametra_example_dfu_firmware::scenario::scenario_with_outcome;
use calametra_example_dfu_firmware::{scenario, update_image};
use std::cell::RefCell;
use std::rc::Rc;

#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "times the test itself on the wall clock, outside any simulated run"
)]
fn usbd_dfu_enumerates_and_takes_a_64k_download_and_upload_byte_exact_twice() {
    let started = std::time::Instant::now();
    let config = RunConfig {
        keep_trace: true,
        record_sites: true,
        ..RunConfig::default()
    };
    let seen = Rc::new(RefCell::new(None));
    let s2 = seen.clone();
    let a = run(config.clone(), &move |sim: &mut Sim| {
        let (dev, outcome) = scenario_with_outcome(sim);
        let s3 = s2.clone();
        sim.invariant("record", move |w| {
            let d = w.model(dev);
            let f = d.firmware().flash();
            *s3.borrow_mut() = Some((
                outcome.borrow().clone(),
                f.manifested.clone(),
                f.programs,
                d.state("usb"),
                d.state("dfu"),
                d.address(),
            ));
            true
        });
    });
    assert!(
        a.failure.is_none(),
        "{:?}\n{}",
        a.failure,
        a.lines[a.lines.len().saturating_sub(40)..].join("\n")
    );
    let (outcome, manifested, programs, usb, dfu, address) = seen.borrow_mut().take().expect("ran");
    let report = outcome
        .expect("the updater finished")
        .expect("the update succeeded");
    let img = update_image();
    assert_eq!(img.len(), 64 * 1024);
    assert_eq!(
        (report.attempts, report.blocks, report.transfer_size),
        (1, 512, 128)
    );
    assert!(
        report.verified && report.manifestation_tolerant,
        "{report:?}"
    );
    assert_eq!(
        manifested.as_deref(),
        Some(&img[..]),
        "the firmware manifested the image"
    );
    assert_eq!(programs, 512);
    assert_eq!((usb, dfu, address), (Some("configured"), Some("idle"), 1));
    let text = a.lines.join("\n");
    // Enumeration, DfuSe block numbers on the wire, and the firmware's states as transitions.
    for needle in [
        "\"site\":\"ctrl.set_address#1\"",
        "\"site\":\"usb.default->addressed#1\"",
        "\"site\":\"usb.addressed->configured#1\"",
        "\"site\":\"ctrl.dnload#1\",\"setup\":\"2101020000008000\"",
        "\"site\":\"dfu.idle->dnload_sync#1\"",
        "\"site\":\"dfu.dnload_sync->dnbusy#512\"",
        "\"site\":\"dfu.manifest->manifest_sync#1\"",
        "\"site\":\"ctrl.upload#513\"",
        "SETUP OUT0:64 OUT0:64 IN0:0",
    ] {
        assert!(text.contains(needle), "{needle}");
    }
    let b = run(config, &scenario);
    assert!(b.failure.is_none());
    assert_eq!(a.hash, b.hash, "byte-exact trace hash across two runs");
    eprintln!(
        "usbd-dfu 64 KiB update: {} records, {} steps, virtual {:.3} s, hash {}, wall {:?} for two runs",
        a.records,
        a.steps,
        a.end_ns as f64 / 1e9,
        a.hash,
        started.elapsed()
    );
}
