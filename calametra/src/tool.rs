//! What the `calametra` command asks a test binary to do instead of running its trials: a
//! job that needs the models registered in that binary (a model of the user's own crate,
//! which the tool cannot link). Today one job: `calametra compare --package P --test T`.
//!
//! | variable | what it does | values |
//! | --- | --- | --- |
//! | `CALAMETRA_COMPARE_OUT` | the binary compares a capture with a spec's model (the [`CompareHook`](calametra_core::registry::CompareHook) linked in, from `calametra-capture`), writes the result there as JSON (`text`, `compared`, `clean`; or `error`) and runs no trial | a path |
//! | `CALAMETRA_COMPARE_CAPTURE`, `CALAMETRA_COMPARE_SPEC` | the capture and the spec | paths, both required with `CALAMETRA_COMPARE_OUT` |
//! | `CALAMETRA_COMPARE_DEVICE` | only this device's control transfers | `BUS:ADDR` |
//! | `CALAMETRA_COMPARE_NO_HOTPLUG` | do not script the capture's hot-plug into a whole-capture comparison | `1` |
//!
//! Nothing here runs a scenario; the comparison itself lives in `calametra-capture`.

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
        path_var(name).ok_or_else(|| {
            format!("{name}: missing; CALAMETRA_COMPARE_OUT needs the capture and the spec")
        })
    };
    let device = match std::env::var("CALAMETRA_COMPARE_DEVICE")
        .ok()
        .filter(|v| !v.is_empty())
    {
        None => None,
        Some(d) => {
            let bad = || format!("CALAMETRA_COMPARE_DEVICE=`{d}`: expected BUS:ADDR");
            let (b, a) = d.split_once(':').ok_or_else(bad)?;
            Some((b.parse().map_err(|_| bad())?, a.parse().map_err(|_| bad())?))
        }
    };
    let no_hotplug = match std::env::var("CALAMETRA_COMPARE_NO_HOTPLUG")
        .ok()
        .as_deref()
    {
        None | Some("") | Some("0") => false,
        Some("1") => true,
        Some(v) => {
            return Err(format!(
                "CALAMETRA_COMPARE_NO_HOTPLUG=`{v}`: expected 1 or 0"
            ))
        }
    };
    Ok(CompareRequest {
        capture: need("CALAMETRA_COMPARE_CAPTURE")?,
        spec: need("CALAMETRA_COMPARE_SPEC")?,
        device,
        no_hotplug,
    })
}

/// Runs the job the environment asks for, if any: `Some(exit code)` when it did (0: the
/// result was written, whatever it says; 2: it could not be written), `None` when no job was
/// asked for and the binary runs its trials.
pub fn run_if_asked() -> Option<i32> {
    let out = path_var("CALAMETRA_COMPARE_OUT")?;
    let result = request().and_then(|r| (compare_hook()?.0)(&r));
    let json = match result {
        Ok(r) => serde_json::json!({"text": r.text, "compared": r.compared, "clean": r.clean}),
        Err(e) => serde_json::json!({ "error": e }),
    };
    match calametra_core::regress::write_atomic(&out, json.to_string().as_bytes()) {
        Ok(()) => Some(0),
        Err(e) => {
            eprintln!("calametra: CALAMETRA_COMPARE_OUT: {e}");
            Some(2)
        }
    }
}
