//! The command that needs the models and the capture readers (`compare`; `qemu` is in
//! `qemu.rs`). Models are found by their spec's `format` in the registry
//! ([`calametra_core::registry`]); this file names none of them.

use crate::{CliError, CompareArgs};
use calametra_capture::by_spec::{compare_spec, compares_whole_captures, Compared, SpecOptions};
use calametra_core::input::{open_regular, MAX_DOCUMENT_BYTES, MAX_TRACE_BYTES};
use calametra_core::spec::Spec;
use std::io::Read;
// The shipped models register themselves by spec format; linking their crate is all this
// tool does to find them.
use calametra_models as _;
use std::path::Path;

/// Whether a capture's first bytes can begin a capture: gzip, pcapng, pcap (either byte order,
/// micro- or nanoseconds) or usbmon text (no NUL or other control bytes but tab, CR and LF).
pub(crate) fn capture_magic_ok(head: &[u8]) -> bool {
    const MAGIC: [[u8; 4]; 5] = [
        [0x0a, 0x0d, 0x0d, 0x0a],
        [0xd4, 0xc3, 0xb2, 0xa1],
        [0xa1, 0xb2, 0xc3, 0xd4],
        [0x4d, 0x3c, 0xb2, 0xa1],
        [0xa1, 0xb2, 0x3c, 0x4d],
    ];
    head.starts_with(&[0x1f, 0x8b])
        || MAGIC.iter().any(|m| head.starts_with(m))
        || head
            .iter()
            .all(|&b| b >= 0x20 || b == b'\t' || b == b'\n' || b == b'\r')
}

/// Reads a regular file of at most `max` bytes ([`calametra_core::input::open_regular`]: a
/// FIFO or `/dev/zero` is refused before it is read); with `magic`, its first bytes are
/// checked before the rest is read. Errors exit 1, as the other bad inputs of `compare`.
pub(crate) fn read_bounded(
    path: &Path,
    max: u64,
    what: &str,
    magic: Option<fn(&[u8]) -> bool>,
) -> Result<Vec<u8>, CliError> {
    let bad = |e: String| CliError(format!("{}: {e}", path.display()), 1);
    let mut f = open_regular(path, max, what).map_err(bad)?;
    let mut bytes = Vec::new();
    if let Some(ok) = magic {
        (&mut f)
            .take(16)
            .read_to_end(&mut bytes)
            .map_err(|e| bad(format!("cannot read the {what}: {e}")))?;
        if !ok(&bytes) {
            return Err(bad(format!(
                "not a {what}: its first bytes are not gzip, pcapng, pcap or usbmon text"
            )));
        }
    }
    f.take(max + 1 - bytes.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(format!("cannot read the {what}: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(bad(format!(
            "cannot read the {what}: it grew past its limit while it was read"
        )));
    }
    Ok(bytes)
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
            crate::write_output(&path, png).map(|()| path).map_err(|e| {
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
    print!("{}", crate::clean(&c.render()));
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
    for (option, v) in [("--package", package), ("--test", test)] {
        if v.is_empty()
            || v.starts_with('-')
            || !v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(CliError(
                format!("{option} `{v}`: not a Cargo name (letters, digits, `-`, `_`)"),
                2,
            ));
        }
    }
    let abs = |p: &Path, what: &str| {
        std::fs::canonicalize(p)
            .map_err(|e| CliError(format!("{}: cannot open the {what}: {e}", p.display()), 1))
    };
    let (capture, spec) = (abs(&a.capture, "capture")?, abs(&a.spec, "spec")?);
    let tmp =
        tempfile::tempdir().map_err(|e| CliError(format!("a temporary directory: {e}"), 1))?;
    let out = tmp.path().join("compare.json");
    let cargo = crate::cargo_or_default(&a.cargo);
    let trial = "calametra::compare";
    println!("$ {cargo} test -p {package} --test {test} -- --exact {trial}");
    let mut c = std::process::Command::new(&cargo);
    c.args([
        "test", "-p", package, "--test", test, "--", "--exact", trial,
    ])
    .env("CALAMETRA_COMPARE_OUT", &out)
    .env("CALAMETRA_COMPARE_CAPTURE", &capture)
    .env("CALAMETRA_COMPARE_SPEC", &spec)
    .env(
        "CALAMETRA_COMPARE_DEVICE",
        a.device.as_deref().unwrap_or(""),
    )
    .env(
        "CALAMETRA_COMPARE_NO_HOTPLUG",
        if a.no_hotplug { "1" } else { "0" },
    );
    let status = c
        .status()
        .map_err(|e| CliError(format!("cannot run `{cargo}`: {e}"), 1))?;
    let text = std::fs::read_to_string(&out).map_err(|_| {
        CliError(
            format!(
                "{package}'s test `{test}` wrote no comparison ({status}): it must be a `calametra::main!()` test target (harness = false) that links calametra-capture (`use calametra_capture as _;`) and the model"
            ),
            1,
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| CliError(format!("the comparison {test} wrote: {e}"), 1))?;
    if let Some(e) = v["error"].as_str() {
        return Err(CliError(e.to_string(), 1));
    }
    let (Some(report), Some(compared), Some(clean)) = (
        v["text"].as_str(),
        v["compared"].as_u64(),
        v["clean"].as_bool(),
    ) else {
        return Err(CliError(
            format!("the comparison {test} wrote has no `text`, `compared` and `clean`: {text}"),
            1,
        ));
    };
    print!("{}", crate::clean(report));
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
