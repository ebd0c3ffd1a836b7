//! The learned model's own comparison with a whole capture: control, bulk OUT and interrupt IN
//! transfers replayed against the replay model (what `calametra compare` runs for a
//! `calametra.spec.learned` spec through its registration). Nothing here reads a clock.

use super::Learned;
use calametra_capture::compare::{compare_all, NoExplanations, Options};
use calametra_capture::Capture;
use calametra_core::host::DeviceHost;
use calametra_core::registry::{CaptureOptions, CaptureReport, PictureSink};
use calametra_core::sim::RunConfig;
use calametra_core::spec::Spec;
use std::path::Path;

/// [`calametra_core::registry::CompareCaptureFn`] for a learned spec: the capture's transfers
/// of its busiest device, in capture order, against a fresh [`Learned`]. A learned model shows
/// no pictures and scripts its own events, so `pictures` and the hot-plug option change nothing.
pub fn compare_registered(
    capture_path: &Path,
    capture: &[u8],
    spec: &Spec,
    _options: &CaptureOptions,
    _pictures: Option<PictureSink>,
) -> Result<CaptureReport, String> {
    let capture = Capture::parse(capture_path, capture).map_err(|e| e.to_string())?;
    let model = Learned::try_from_spec(spec).map_err(|e| e.to_string())?;
    let mut host = DeviceHost::new(
        model,
        &RunConfig {
            keep_trace: true,
            ..RunConfig::default()
        },
    );
    let report = compare_all(
        &capture.transfers(),
        &mut host,
        &Options::default(),
        &mut NoExplanations,
    );
    Ok(CaptureReport {
        text: report.render(),
        compared: report.entries.len() + report.data.len(),
        clean: report.is_clean(),
    })
}
