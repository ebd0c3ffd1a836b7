//! `calametra compare`: a real capture replayed against the model its spec's `format` names
//! (in this tool, or with --package P --test T inside that test binary, where a model of the
//! user's own crate is registered). Models are found by their spec's `format` in the registry
//! ([`calametra_core::registry`]); this file names none of them.

use crate::input::{capture_magic_ok, read_bounded};
use crate::output::{clean, write_output, CliError};
use calametra::env_names::{
    COMPARE_CAPTURE, COMPARE_DEVICE, COMPARE_NO_HOTPLUG, COMPARE_OUT, COMPARE_SPEC,
};
use calametra_capture::by_spec::{compare_spec, compares_whole_captures, Compared, SpecOptions};
use calametra_core::input::{MAX_DOCUMENT_BYTES, MAX_TRACE_BYTES};
use calametra_core::spec::Spec;
use clap::Args;
// The shipped models register themselves by spec format; linking their crate is all this
// tool does to find them.
use calametra_models as _;
use std::path::{Path, PathBuf};

/// The arguments of `calametra compare`.
#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// The capture: pcap or pcapng (usbmon link type 189 or 220) or usbmon text, maybe gzipped.
    #[arg(long, value_name = "CAPTURE")]
    pub(crate) capture: PathBuf,
    /// The device spec whose model is compared.
    #[arg(long, value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    /// Compare only this device's control transfers (default: the busiest device).
    #[arg(long, value_name = "BUS:ADDR")]
    pub(crate) device: Option<String>,
    /// Do not script the capture's monitor hot-plug into the model (Trigger 6).
    #[arg(long)]
    pub(crate) no_hotplug: bool,
    /// Write each frame a flip showed as a PNG into DIR (Trigger 6); as every output, a
    /// symlink in DIR is refused (exit 1 after the comparison), never replaced.
    #[arg(long, value_name = "DIR")]
    pub(crate) frames: Option<PathBuf>,
    /// Compare inside this package's test binary (with --test), with the models registered
    /// there: a model of your own crate, which this tool does not link.
    #[arg(long, value_name = "P", requires = "test", conflicts_with = "frames")]
    pub(crate) package: Option<String>,
    /// The test target of --package: a `calametra::main!()` binary (harness = false) that
    /// links calametra-capture and the model.
    #[arg(long, value_name = "T", requires = "package")]
    pub(crate) test: Option<String>,
    /// The cargo for --package (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    pub(crate) cargo: Option<String>,
}

/// `calametra compare --capture FILE --spec SPEC [--device BUS:ADDR] [--frames DIR]
/// [--no-hotplug]`.
pub fn compare(a: &CompareArgs) -> Result<(), CliError> {
    let (cap, spec) = (&a.capture, &a.spec);
    let device = match &a.device {
        None => None,
        Some(d) => {
            let (b, a) = d
                .split_once(':')
                .ok_or_else(|| CliError(format!("--device `{d}`: expected BUS:ADDR"), 2))?;
            Some((
                b.parse()
                    .map_err(|_| CliError(format!("--device `{d}`: bad bus"), 2))?,
                a.parse()
                    .map_err(|_| CliError(format!("--device `{d}`: bad address"), 2))?,
            ))
        }
    };
    if let (Some(package), Some(test)) = (&a.package, &a.test) {
        return compare_in_test_binary(a, package, test);
    }
    let spec_bytes = read_bounded(spec, MAX_DOCUMENT_BYTES, "spec", None)?;
    let spec = Spec::parse(spec, &spec_bytes).map_err(|e| CliError(e.to_string(), 1))?;
    let cap_bytes = read_bounded(cap, MAX_TRACE_BYTES, "capture", Some(capture_magic_ok))?;
    // Pictures come only from a model's own whole-capture comparison (the Trigger 6's flips).
    let whole = compares_whole_captures(&spec).map_err(|e| CliError(e, 1))?;
    if a.frames.is_some() && (!whole || device.is_some()) {
        let whole: Vec<&str> = calametra_core::registry::models()
            .iter()
            .filter(|m| m.compare_capture.is_some())
            .map(|m| m.format)
            .collect();
        return Err(CliError(
            format!(
                "--frames needs a model that compares whole captures ({}) and no --device",
                whole.join(", ")
            ),
            2,
        ));
    }
    // With `--frames DIR` each picture the comparison hands over is written there, through
    // the tool's one output writer (a symlink among DIR's files is refused, never replaced).
    if let Some(dir) = &a.frames {
        std::fs::create_dir_all(dir).map_err(|e| {
            CliError(
                format!("{}: cannot create the directory: {e}", dir.display()),
                1,
            )
        })?;
    }
    let errors: std::rc::Rc<std::cell::RefCell<Vec<String>>> = Default::default();
    let sink = a.frames.clone().map(|dir| {
        let errors = errors.clone();
        Box::new(move |name: &str, png: &[u8]| {
            let path = dir.join(name);
            write_output(&path, png).map(|()| path).map_err(|e| {
                errors.borrow_mut().push(e.0.clone());
                e.0
            })
        }) as calametra_core::registry::PictureSink
    });
    let options = SpecOptions {
        device,
        no_hotplug: a.no_hotplug,
    };
    let c = compare_spec(cap, &cap_bytes, &spec, &options, sink).map_err(|e| CliError(e, 1))?;
    drop(cap_bytes);
    print!("{}", clean(&c.render()));
    if let Some(e) = errors.borrow().first() {
        return Err(CliError(format!("a frame's PNG: {e}"), 1));
    }
    if c.compared() == 0 {
        let why = match (&c, &a.device) {
            (Compared::Whole(_), _) => "the capture holds no transfers of the device".to_string(),
            (_, Some(d)) => format!("no control transfer in the capture is of --device {d}"),
            (_, None) => "the capture holds no control transfers".to_string(),
        };
        return Err(CliError(
            format!("{}: nothing was compared: {why}", cap.display()),
            1,
        ));
    }
    if c.is_clean() {
        Ok(())
    } else {
        Err(CliError(
            "the model differs from the capture (unexplained differences above)".into(),
            1,
        ))
    }
}

/// `compare --package P --test T`: the comparison runs inside that test binary, whose harness
/// finds the spec's model among the models registered there (`calametra::tool`: the
/// `CALAMETRA_COMPARE_*` variables) and writes the result as JSON; this prints it and exits as
/// the comparison in this tool does.
fn compare_in_test_binary(a: &CompareArgs, package: &str, test: &str) -> Result<(), CliError> {
    crate::user_binary::check_names(package, test)?;
    let abs = |p: &Path, what: &str| {
        std::fs::canonicalize(p)
            .map_err(|e| CliError(format!("{}: cannot open the {what}: {e}", p.display()), 1))
    };
    let (capture, spec) = (abs(&a.capture, "capture")?, abs(&a.spec, "spec")?);
    let tmp =
        tempfile::tempdir().map_err(|e| CliError(format!("a temporary directory: {e}"), 1))?;
    let out = tmp.path().join("compare.json");
    let device = a.device.clone().unwrap_or_default();
    let no_hotplug = if a.no_hotplug { "1" } else { "0" };
    let v = crate::user_binary::ask(&crate::user_binary::Ask {
        package,
        test,
        trial: "calametra::compare",
        cargo: &a.cargo,
        env: vec![
            (COMPARE_OUT, out.as_os_str()),
            (COMPARE_CAPTURE, capture.as_os_str()),
            (COMPARE_SPEC, spec.as_os_str()),
            (COMPARE_DEVICE, device.as_ref()),
            (COMPARE_NO_HOTPLUG, no_hotplug.as_ref()),
        ],
        out: &out,
        what: "comparison",
        links: "calametra-capture",
    })?;
    let (Some(report), Some(compared), Some(clean)) = (
        v["text"].as_str(),
        v["compared"].as_u64(),
        v["clean"].as_bool(),
    ) else {
        return Err(CliError(
            format!("the comparison {test} wrote has no `text`, `compared` and `clean`: {v}"),
            1,
        ));
    };
    print!("{}", crate::output::clean(report));
    if compared == 0 {
        return Err(CliError(
            format!(
                "{}: nothing was compared: no transfer of the device in the capture",
                a.capture.display()
            ),
            1,
        ));
    }
    if clean {
        Ok(())
    } else {
        Err(CliError(
            "the model differs from the capture (unexplained differences above)".into(),
            1,
        ))
    }
}
