//! Comparing the Trigger 6 model with a real capture (DESIGN.md section 10): the capture's
//! control transfers replayed in order, its monitor hot-plug scripted in at capture time, and
//! every difference the hot-plug accounts for named from the model's state.

use super::bulk::{parse_interrupt, DisplayEvent};
use super::Trigger6;
use calametra_core::capture::{Capture, ControlTransfer, DataTransfer, Status, XferType};
use calametra_core::compare::{self, Explain, Options, Reason, Report, Scripted, Verdict};
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_core::usb::{Device, Setup};
use calametra_core::RunConfig;

/// The capture's interrupt IN packet that reports a hot-plug on output 0.
fn hotplug(data: &[DataTransfer]) -> Option<&DataTransfer> {
    data.iter().find(|d| {
        d.xfer == XferType::Interrupt
            && d.status == Status::Ok
            && parse_interrupt(&d.data).contains(&DisplayEvent::Hotplug(0))
    })
}

/// The model as a comparison drives it: a Trigger 6 with the capture's events scripted in.
pub type Model = Scripted<Trigger6>;

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

/// Replays a capture's control transfers against the Trigger 6 model of `spec`. With
/// `replay_hotplug`, the capture's monitor (the spec's `capture_edid`) is plugged into the model
/// at the capture time of its hot-plug report; without it, the differences that hot-plug
/// explains are named `hotplug_not_replayed`.
pub fn compare_capture(
    capture: &Capture,
    spec: &Spec,
    replay_hotplug: bool,
) -> Result<(Report, DeviceHost), String> {
    let transfers = capture.transfers();
    let model = Trigger6::try_from_spec(spec).map_err(|e| e.to_string())?;
    let edid = model.facts().capture_edid.clone().ok_or_else(|| {
        format!(
            "{}: field `capture_edid`: missing; the comparison plugs the capture's monitor",
            spec.path().display()
        )
    })?;
    let origin_us = transfers
        .control
        .first()
        .map(|t| t.t_us)
        .ok_or_else(|| format!("{}: no control transfers", capture.path.display()))?;
    let plug = hotplug(&transfers.data).ok_or_else(|| {
        format!(
            "{}: no interrupt IN hot-plug report on output 0",
            capture.path.display()
        )
    })?;
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
    Ok((report, host))
}
