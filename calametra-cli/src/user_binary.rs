//! A command's work done inside the user's own test binary, where the user's models register
//! themselves (`compare --package P --test T`, `qemu --package P --test T`): the names checked,
//! `cargo test -p P --test T -- --exact <trial>` run with the variables that say what to do, and
//! the JSON answer the trial wrote read back, its `error` a failure. What the answer means is
//! the command's; nothing else lives here.

use crate::output::{cargo_or_default, CliError};
use std::ffi::OsStr;
use std::path::Path;

/// Whether `v` is a Cargo package or target name as commands take one: letters, digits, `-`
/// and `_`, not empty, and not an option (no leading `-`).
pub(crate) fn is_cargo_name(v: &str) -> bool {
    !v.is_empty()
        && !v.starts_with('-')
        && v.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// `--package` and `--test` as Cargo names (letters, digits, `-`, `_`; not an option).
pub(crate) fn check_names(package: &str, test: &str) -> Result<(), CliError> {
    for (option, v) in [("--package", package), ("--test", test)] {
        if !is_cargo_name(v) {
            return Err(CliError(
                format!("{option} `{v}`: not a Cargo name (letters, digits, `-`, `_`)"),
                2,
            ));
        }
    }
    Ok(())
}

/// What one trial of the user's test binary is asked to do.
pub(crate) struct Ask<'a> {
    /// The package and test target.
    pub package: &'a str,
    pub test: &'a str,
    /// The trial (`calametra::compare`, `calametra::qemu`).
    pub trial: &'a str,
    /// The cargo (`--cargo`, else `$CARGO`, else `cargo`).
    pub cargo: &'a Option<String>,
    /// The variables saying what to do.
    pub env: Vec<(&'a str, &'a OsStr)>,
    /// Where the trial writes its answer.
    pub out: &'a Path,
    /// What the answer is, for the error when none was written (`comparison`, `guest run`).
    pub what: &'a str,
    /// The crate the test target must link for the trial to exist (`calametra-capture`).
    pub links: &'a str,
}

/// Runs the trial and returns its answer; an answer holding `error` is that failure.
pub(crate) fn ask(a: &Ask<'_>) -> Result<serde_json::Value, CliError> {
    let cargo = cargo_or_default(a.cargo);
    let (package, test, trial) = (a.package, a.test, a.trial);
    println!("$ {cargo} test -p {package} --test {test} -- --exact {trial}");
    let mut c = std::process::Command::new(&cargo);
    c.args([
        "test", "-p", package, "--test", test, "--", "--exact", trial,
    ]);
    for (k, v) in &a.env {
        c.env(k, v);
    }
    let status = c
        .status()
        .map_err(|e| CliError(format!("cannot run `{cargo}`: {e}"), 1))?;
    let text = std::fs::read_to_string(a.out).map_err(|_| {
        CliError(
            format!(
                "{package}'s test `{test}` wrote no {} ({status}): it must be a `calametra::main!()` test target (harness = false) that links {} (`use {} as _;`) and the model",
                a.what,
                a.links,
                a.links.replace('-', "_")
            ),
            1,
        )
    })?;
    let v: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| CliError(format!("the {} {test} wrote: {e}", a.what), 1))?;
    if let Some(e) = v["error"].as_str() {
        return Err(CliError(e.to_string(), 1));
    }
    Ok(v)
}
