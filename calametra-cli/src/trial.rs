//! A trial named instead of a file: `calametra replay|show path::seed::0x2a [--at STEP]`.
//!
//! The trial is found among the workspace's test binaries (`--list`), run once with
//! `CALAMETRA_TRACE_OUT` (its run's full trace) and `CALAMETRA_REGRESSIONS=off` (nothing saved),
//! and its trace is what `replay` and `show` then read, exactly as a trace file given by hand.
//! Only the finding lives here; replaying and showing are the commands' own.

use crate::binaries::{test_binaries, trials};
use crate::output::{fail, CliError};
use calametra::env_names::{REGRESSIONS, SWEEP, TRACE_OUT};
use std::path::{Path, PathBuf};
use std::process::Command;

/// Whether a command's FILE argument names a trial rather than a file: no such file, and a
/// trial's shape (`a::b::seed::0x2a`, `...::site::...`, `...::baseline`, `...::finds::...`).
pub fn is_trial_name(arg: &Path) -> bool {
    let Some(s) = arg.to_str() else {
        return false;
    };
    if arg.exists() || s.contains('/') || !s.contains("::") {
        return false;
    }
    s.ends_with("::baseline")
        || ["::seed::", "::site::", "::finds::", "::regression::"]
            .iter()
            .any(|k| s.contains(k))
}

/// Runs the trial `name` of whichever test binary lists it (of `package` when given) and
/// returns its run's trace, in `dir`.
pub fn trace_of(
    name: &str,
    cargo: &str,
    package: Option<&str>,
    dir: &Path,
) -> Result<PathBuf, CliError> {
    let packages: Vec<String> = package.into_iter().map(str::to_string).collect();
    let mut found = Vec::new();
    for b in test_binaries(cargo, &packages, &[])? {
        if trials(&b, false)?.iter().any(|t| t == name) {
            found.push(b);
        }
    }
    let b = match found.as_slice() {
        [] => {
            return Err(fail(format!(
                "no test binary{} lists a trial `{name}` (the names are in `cargo test -- --list`; a file of that name does not exist either)",
                package.map(|p| format!(" of {p}")).unwrap_or_default()
            )))
        }
        [one] => one,
        many => {
            return Err(fail(format!(
                "several test binaries list `{name}`: {}; choose one with -p",
                many.iter()
                    .map(|b| format!("{} --test {}", b.package, b.target))
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    };
    let trace = dir.join("trial.jsonl");
    println!(
        "$ {TRACE_OUT}={} {REGRESSIONS}=off cargo test -p {} --test {} -- --exact {} --include-ignored",
        calametra::report::shell_quote(&trace.display().to_string()),
        b.package,
        b.target,
        calametra::report::shell_quote(name)
    );
    // The trial's verdict does not matter here (a failing seed is what one shows): its run's
    // trace does.
    let _ = Command::new(&b.exe)
        .args(["--exact", name, "--include-ignored"])
        .current_dir(&b.dir)
        .env(TRACE_OUT, &trace)
        .env(REGRESSIONS, "off")
        .env_remove(SWEEP)
        .stdout(std::process::Stdio::null())
        .status()
        .map_err(|e| fail(format!("{}: cannot run: {e}", b.exe.display())))?;
    if !trace.is_file() {
        return Err(fail(format!(
            "the trial `{name}` wrote no trace (did it run? `{} --exact {name}` shows its output)",
            b.exe.display()
        )));
    }
    Ok(trace)
}
