//! Physical comparison (DESIGN.md section 10): the real JCD543 capture in `refdata/`
//! replayed against the Trigger 6 model built from `specs/trigger6-jcd543.json`. It must compare
//! clean: every control transfer the same, or each difference explained by a named reason from
//! the model's state.

use calametra_core::capture::Capture;
use calametra_core::compare::Report;
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_models::trigger6::capture::{compare_capture, Model};
use std::path::{Path, PathBuf};

const CAPTURE: &str = "trace-JCD543-20220514T1928-4k-edid.pcapng.gz";

/// A file of the repository's `refdata/` folder.
fn refdata(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../refdata")
        .join(name);
    assert!(
        p.exists(),
        "refdata file {} not found: it is part of the repository",
        p.display()
    );
    p
}

fn spec() -> Spec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/trigger6-jcd543.json");
    Spec::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn run(replay_hotplug: bool) -> (Report, DeviceHost) {
    let capture = Capture::load(refdata(CAPTURE)).unwrap_or_else(|e| panic!("{e}"));
    compare_capture(&capture, &spec(), replay_hotplug).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_real_capture_compares_clean_against_trigger6() {
    let (report, host) = run(true);
    let s = report.summary();
    assert_eq!(report.device, Some((6, 25)));
    assert_eq!(s.total, 75, "{report}");
    assert!(s.is_clean(), "{report}");
    assert_eq!(s.same, 75, "every transfer the same:\n{report}");
    assert_eq!(s.model_gaps, 0, "{report}");
    let model = host.device::<Model>().unwrap();
    assert_eq!(model.done().len(), 1, "the hot-plug ran");
    assert!(model.inner().connected(0));
}

#[test]
fn without_the_hotplug_each_difference_is_explained_by_the_model_state() {
    let (report, _) = run(false);
    let s = report.summary();
    assert_eq!(s.total, 75);
    assert!(s.is_clean(), "{report}");
    assert!(s.explained > 0, "{report}");
    for e in report.entries.iter().filter(|e| e.reason.is_some()) {
        assert_eq!(e.reason.as_ref().unwrap().name, "hotplug_not_replayed");
    }
    assert!(report
        .render()
        .contains("[explained: hotplug_not_replayed: "));
}
