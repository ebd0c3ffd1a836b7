//! Physical comparison (DESIGN.md section 10): the real JCD543 capture in `shared/refdata`
//! replayed against the Trigger 6 model built from `specs/trigger6-jcd543.json`. It must compare
//! clean: every control transfer the same, or each difference explained by a named reason from
//! the model's state.

use calametra_core::capture::{Capture, ControlTransfer, DataTransfer, Status, XferType};
use calametra_core::compare::{self, Explain, Options, Reason, Report, Scripted, Verdict};
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_core::usb::{Device, Setup};
use calametra_core::RunConfig;
use calametra_models::trigger6::bulk::{parse_interrupt, DisplayEvent};
use calametra_models::trigger6::Trigger6;
use std::path::{Path, PathBuf};

const CAPTURE: &str = "trace-JCD543-20220514T1928-4k-edid.pcapng.gz";

/// `shared/refdata`: `$CALAMETRA_REFDATA`, else `shared/` beside the repository, else
/// `/work/shared/refdata`.
fn refdata(name: &str) -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    let candidates = [
        std::env::var_os("CALAMETRA_REFDATA").map(PathBuf::from),
        manifest
            .parent()
            .and_then(Path::parent)
            .map(|p| p.join("shared/refdata")),
        Some(PathBuf::from("/work/shared/refdata")),
    ];
    for dir in candidates.into_iter().flatten() {
        let p = dir.join(name);
        if p.exists() {
            return p;
        }
    }
    panic!("refdata file {name} not found: set CALAMETRA_REFDATA to the shared/refdata folder");
}

fn spec() -> Spec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/trigger6-jcd543.json");
    Spec::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

/// The capture's interrupt IN packet that reports a hot-plug on output 0.
fn hotplug(data: &[DataTransfer]) -> &DataTransfer {
    data.iter()
        .find(|d| {
            d.xfer == XferType::Interrupt
                && d.status == Status::Ok
                && parse_interrupt(&d.data).contains(&DisplayEvent::Hotplug(0))
        })
        .expect("the capture reports a hot-plug on output 0")
}

type Model = Scripted<Trigger6>;

/// What the Trigger 6 model says about a difference: the capture's monitor appeared through a
/// hot-plug the model did not see.
struct Trigger6Explain {
    /// Capture time of the hot-plug report, microseconds.
    hotplug_us: i64,
    /// Its record (packet number) in the capture.
    hotplug_record: usize,
    /// The first control transfer's time, microseconds.
    origin_us: i64,
}

impl Explain for Trigger6Explain {
    fn explain(&mut self, host: &DeviceHost, t: &ControlTransfer, v: &Verdict) -> Option<Reason> {
        let model = host.device::<Model>()?.inner();
        let s = &t.setup;
        let output = match (s.request_type, s.request) {
            (0xc0, 0x87) => s.value as usize,
            (0xc0, 0x80) => s.index as usize,
            _ => return None,
        };
        let after_hotplug = t.t_us >= self.hotplug_us;
        let status_says_connected = s.request == 0x87
            && matches!(v, Verdict::Differs { capture, .. } if capture.as_slice() == [1]);
        let edid_stalls = s.request == 0x80 && *v == Verdict::ModelStalls;
        if after_hotplug && !model.connected(output) && (status_says_connected || edid_stalls) {
            return Some(Reason::new(
                "hotplug_not_replayed",
                format!(
                    "the capture's monitor was plugged into output {output} at +{:.6} s \
                     (interrupt IN, packet {}); the model has {}",
                    (self.hotplug_us - self.origin_us) as f64 / 1e6,
                    self.hotplug_record,
                    model.state_summary()
                ),
            ));
        }
        None
    }

    fn request_name(&self, host: &DeviceHost, setup: &Setup) -> Option<String> {
        host.device::<Model>()?
            .request_name(setup)
            .map(str::to_string)
    }
}

/// Replays the capture's control transfers; with `replay_hotplug`, the capture's monitor is
/// plugged into the model at the hot-plug's capture time.
fn run(replay_hotplug: bool) -> (Report, DeviceHost) {
    let capture = Capture::load(refdata(CAPTURE)).unwrap_or_else(|e| panic!("{e}"));
    let transfers = capture.transfers();
    let spec = spec();
    let model = Trigger6::try_from_spec(&spec).unwrap_or_else(|e| panic!("{e}"));
    let edid = model
        .facts()
        .capture_edid
        .clone()
        .expect("the spec carries the capture's monitor EDID");
    let origin_us = transfers.control[0].t_us;
    let plug = hotplug(&transfers.data);
    // The device saw the monitor by the time it completed the report.
    let hotplug_us = plug.complete_t_us.unwrap_or(plug.t_us);
    let mut model = Scripted::new(model);
    if replay_hotplug {
        model = model.at(
            compare::capture_to_virtual(origin_us, hotplug_us),
            format!(
                "hotplug out0 (capture packet {})",
                plug.complete_record.unwrap_or(0)
            ),
            move |d: &mut Trigger6, cx| {
                d.plug_monitor_with_edid(cx, 0, edid.clone());
            },
        );
    }
    let config = RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    };
    let mut host = DeviceHost::new(model, &config);
    let mut explain = Trigger6Explain {
        hotplug_us,
        hotplug_record: plug.complete_record.unwrap_or(0),
        origin_us,
    };
    let options = Options {
        origin_us: Some(origin_us),
        ..Options::default()
    };
    let report = compare::compare_with(&transfers.control, &mut host, &options, &mut explain);
    (report, host)
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
