//! Comparing a capture with the model its spec names: the model found by the spec's `format`
//! in the model registry ([`calametra_core::registry`]), then either the model's own
//! whole-capture comparison (when it registered one and no single device is asked for) or the
//! capture's control transfers replayed against it ([`crate::compare::compare_with`]).
//!
//! This is the one entry point `calametra compare` and a test of a user's own model share; the
//! tool adds only where pictures are written and how the result is printed. Nothing here
//! writes a file.

use crate::compare::{compare_with, NoExplanations, Options, Report};
use crate::Capture;
use calametra_core::host::DeviceHost;
use calametra_core::registry::{
    self, Boxed, CaptureOptions, CaptureReport, CompareRequest, PictureSink,
};
use calametra_core::spec::Spec;
use calametra_core::RunConfig;
use std::path::Path;

/// How to compare a capture with a spec's model.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SpecOptions {
    /// Compare only this device's control transfers, as `(bus, address)` (the model's own
    /// whole-capture comparison is then not used); `None`: the busiest device, or the whole
    /// capture for a model that compares whole captures.
    pub device: Option<(u16, u8)>,
    /// Do not script the capture's external changes (a monitor hot-plug) into a model that
    /// compares whole captures; the differences they explain are shown, explained.
    pub no_hotplug: bool,
}

/// What a comparison by spec found.
pub enum Compared {
    /// The model's own whole-capture comparison.
    Whole(CaptureReport),
    /// The capture's control transfers replayed against the model, and the host it ran in.
    Control(Report, Box<DeviceHost>),
}

impl Compared {
    /// The report for people.
    pub fn render(&self) -> String {
        match self {
            Compared::Whole(r) => r.text.clone(),
            Compared::Control(r, _) => r.render(),
        }
    }

    /// How many transfers were compared (0: none of the device's, nothing was compared).
    pub fn compared(&self) -> usize {
        match self {
            Compared::Whole(r) => r.compared,
            Compared::Control(r, _) => r.summary().total,
        }
    }

    /// Whether every difference is explained.
    pub fn is_clean(&self) -> bool {
        match self {
            Compared::Whole(r) => r.clean,
            Compared::Control(r, _) => r.summary().is_clean(),
        }
    }
}

/// Whether the model `spec` names compares whole captures itself (so pictures can be asked
/// of it). Errors as [`registry::for_spec`].
pub fn compares_whole_captures(spec: &Spec) -> Result<bool, String> {
    Ok(registry::for_spec(spec)?.compare_capture.is_some())
}

/// Compares the capture at `capture_path` (its bytes: gzip, pcapng, pcap or usbmon text) with
/// the model `spec` names. `pictures` is where a whole-capture comparison hands the pictures
/// the device showed (ignored by the control-transfer comparison). Errors: the capture cannot
/// be read or holds no usbmon events, the format is not registered (the error lists those
/// that are), the spec is not the model's, or the model's own comparison failed.
pub fn compare_spec(
    capture_path: &Path,
    capture: &[u8],
    spec: &Spec,
    options: &SpecOptions,
    pictures: Option<PictureSink>,
) -> Result<Compared, String> {
    let parsed = Capture::parse(capture_path, capture).map_err(|e| e.to_string())?;
    if parsed.events.is_empty() {
        return Err(format!(
            "{}: nothing was compared: the capture holds no usbmon events (empty, a header alone, or comments alone)",
            capture_path.display()
        ));
    }
    let def = registry::for_spec(spec)?;
    if let (Some(compare_capture), None) = (def.compare_capture, options.device) {
        // The model reads the capture's bytes itself; the events read here (to refuse an
        // empty capture by the same message for every model) go first.
        drop(parsed);
        let options = CaptureOptions {
            replay_hotplug: !options.no_hotplug,
        };
        return compare_capture(capture_path, capture, spec, &options, pictures)
            .map(Compared::Whole);
    }
    let config = RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    };
    let control = parsed.control_transfers();
    drop(parsed);
    let mut host = DeviceHost::new(Boxed((def.build)(spec)?), &config);
    let compare_options = Options {
        device: options.device,
        ..Options::default()
    };
    let report = compare_with(&control, &mut host, &compare_options, &mut NoExplanations);
    Ok(Compared::Control(report, Box::new(host)))
}

/// Reads a regular file of at most `max` bytes (a FIFO or `/dev/zero` is refused before it is
/// read); errors name the file.
fn read_file(path: &Path, max: u64, what: &str) -> Result<Vec<u8>, String> {
    use std::io::Read;
    let f = calametra_core::input::open_regular(path, max, what)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    let mut bytes = Vec::new();
    f.take(max + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("{}: cannot read the {what}: {e}", path.display()))?;
    if bytes.len() as u64 > max {
        return Err(format!(
            "{}: cannot read the {what}: it grew past its limit while it was read",
            path.display()
        ));
    }
    Ok(bytes)
}

/// [`compare_spec`] on the files a [`CompareRequest`] names (what a test binary runs for
/// `calametra compare --package P --test T`, with the models registered in it). The spec and
/// the capture are read within the readers' limits; no pictures are written.
pub fn compare_request(r: &CompareRequest) -> Result<CaptureReport, String> {
    use calametra_core::input::{MAX_DOCUMENT_BYTES, MAX_TRACE_BYTES};
    let spec_bytes = read_file(&r.spec, MAX_DOCUMENT_BYTES, "spec")?;
    let spec = Spec::parse(&r.spec, &spec_bytes).map_err(|e| e.to_string())?;
    let capture = read_file(&r.capture, MAX_TRACE_BYTES, "capture")?;
    let options = SpecOptions {
        device: r.device,
        no_hotplug: r.no_hotplug,
    };
    let c = compare_spec(&r.capture, &capture, &spec, &options, None)?;
    Ok(CaptureReport {
        text: c.render(),
        compared: c.compared(),
        clean: c.is_clean(),
    })
}

registry::inventory::submit! {
    registry::CompareHook(compare_request)
}
