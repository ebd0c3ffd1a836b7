//! What the `calametra` command asks a test binary to do instead of running its trials: a
//! job that needs the models registered in that binary (a model of the user's own crate,
//! which the tool cannot link): `calametra compare --package P --test T` and `calametra qemu
//! --package P --test T`.
//!
//! | variable | what it does | values |
//! | --- | --- | --- |
//! | `CALAMETRA_COMPARE_OUT` | the binary compares a capture with a spec's model (the [`CompareHook`](calametra_core::registry::CompareHook) linked in, from `calametra-capture`), writes the result there as JSON (`text`, `compared`, `clean`; or `error`) and runs no trial | a path |
//! | `CALAMETRA_COMPARE_CAPTURE`, `CALAMETRA_COMPARE_SPEC` | the capture and the spec | paths, both required with `CALAMETRA_COMPARE_OUT` |
//! | `CALAMETRA_COMPARE_DEVICE` | only this device's control transfers | `BUS:ADDR` |
//! | `CALAMETRA_COMPARE_NO_HOTPLUG` | do not script the capture's hot-plug into a whole-capture comparison | `1` |
//! | `CALAMETRA_QEMU_OUT` | the binary runs a guest job (the [`QemuHook`](calametra_core::registry::QemuHook) linked in, from `calametra-qemu`) with the models registered here, writes the result there as JSON (`text`, `passed`; or `error`) and runs no trial | a path |
//! | `CALAMETRA_QEMU_JOB` | the job, as `calametra_qemu::job::Job::to_json` wrote it | a path, required with `CALAMETRA_QEMU_OUT` |
//!
//! Nothing here runs a scenario; the comparison itself lives in `calametra-capture`, the guest
//! run in `calametra-qemu`.

use crate::env_names::{
    COMPARE_CAPTURE, COMPARE_DEVICE, COMPARE_NO_HOTPLUG, COMPARE_OUT, COMPARE_SPEC, QEMU_JOB,
    QEMU_OUT,
};
use calametra_core::registry::{compare_hook, CompareRequest};
use std::path::PathBuf;

/// `CALAMETRA_<name>` as a path, unset or empty being `None`.
fn path_var(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The comparison the environment asks for; `Err` names the variable and what was expected.
fn request() -> Result<CompareRequest, String> {
    let need = |name: &str| {
        path_var(name)
            .ok_or_else(|| format!("{name}: missing; {COMPARE_OUT} needs the capture and the spec"))
    };
    let device = match std::env::var(COMPARE_DEVICE).ok().filter(|v| !v.is_empty()) {
        None => None,
        Some(d) => {
            let bad = || format!("{COMPARE_DEVICE}=`{d}`: expected BUS:ADDR");
            let (b, a) = d.split_once(':').ok_or_else(bad)?;
            Some((b.parse().map_err(|_| bad())?, a.parse().map_err(|_| bad())?))
        }
    };
    let no_hotplug = match std::env::var(COMPARE_NO_HOTPLUG).ok().as_deref() {
        None | Some("") | Some("0") => false,
        Some("1") => true,
        Some(v) => return Err(format!("{COMPARE_NO_HOTPLUG}=`{v}`: expected 1 or 0")),
    };
    Ok(CompareRequest {
        capture: need(COMPARE_CAPTURE)?,
        spec: need(COMPARE_SPEC)?,
        device,
        no_hotplug,
    })
}

/// The guest job `CALAMETRA_QEMU_JOB` names, run by the hook linked in; `Err` names the
/// variable or the file and what was expected.
fn qemu_job() -> Result<serde_json::Value, String> {
    let file = path_var(QEMU_JOB)
        .ok_or_else(|| format!("{QEMU_JOB}: missing; {QEMU_OUT} needs the job"))?;
    let job = calametra_core::input::read_regular(
        &file,
        calametra_core::input::MAX_DOCUMENT_BYTES,
        "guest job",
    )
    .map_err(|e| format!("{}: {e}", file.display()))?;
    let r = (calametra_core::registry::qemu_hook()?.0)(&job)?;
    Ok(serde_json::json!({"text": r.text, "passed": r.passed}))
}

/// Writes a job's result where it was asked to go: `Some(0)` when written, `Some(2)` not.
fn write_result(var: &str, out: &std::path::Path, json: serde_json::Value) -> Option<i32> {
    match calametra_core::regress::write_atomic(out, json.to_string().as_bytes()) {
        Ok(()) => Some(0),
        Err(e) => {
            eprintln!("calametra: {var}: {e}");
            Some(2)
        }
    }
}

/// Runs the job the environment asks for, if any: `Some(exit code)` when it did (0: the
/// result was written, whatever it says; 2: it could not be written), `None` when no job was
/// asked for and the binary runs its trials.
pub fn run_if_asked() -> Option<i32> {
    if let Some(out) = path_var(QEMU_OUT) {
        let json = qemu_job().unwrap_or_else(|e| serde_json::json!({ "error": e }));
        return write_result(QEMU_OUT, &out, json);
    }
    let out = path_var(COMPARE_OUT)?;
    let result = request().and_then(|r| (compare_hook()?.0)(&r));
    let json = match result {
        Ok(r) => serde_json::json!({"text": r.text, "compared": r.compared, "clean": r.clean}),
        Err(e) => serde_json::json!({ "error": e }),
    };
    write_result(COMPARE_OUT, &out, json)
}
