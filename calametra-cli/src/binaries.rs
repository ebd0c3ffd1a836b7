//! The workspace's test binaries as cargo builds them (`cargo test --no-run`, in cargo's
//! order, with their package names) and the trials each lists, for the commands that run
//! trials by name or sweep them (`sweep`, `replay`/`show` of a trial's name). No command lives
//! here, and nothing here imports a command.

use crate::output::{fail, CliError};
use calametra::env_names::SWEEP;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// A test binary cargo built.
#[derive(Clone, Debug)]
pub struct TestBinary {
    /// Its package.
    pub package: String,
    /// Its test target.
    pub target: String,
    /// The executable.
    pub exe: PathBuf,
    /// Its package's directory (where `cargo test` runs it).
    pub dir: PathBuf,
}

/// Package names by manifest path (`cargo metadata --no-deps`).
fn package_names(cargo: &str) -> Result<BTreeMap<PathBuf, String>, CliError> {
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo} metadata`: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "`{cargo} metadata` failed: run this inside a Cargo workspace"
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| fail(format!("`{cargo} metadata` printed no JSON: {e}")))?;
    let mut m = BTreeMap::new();
    for p in v["packages"].as_array().into_iter().flatten() {
        if let (Some(n), Some(mp)) = (p["name"].as_str(), p["manifest_path"].as_str()) {
            m.insert(PathBuf::from(mp), n.to_string());
        }
    }
    Ok(m)
}

/// Builds the test targets (`cargo test --no-run`, with `-p` and `--test` as given, every test
/// target when no `--test`) and lists their executables in cargo's order.
pub fn test_binaries(
    cargo: &str,
    packages: &[String],
    tests: &[String],
) -> Result<Vec<TestBinary>, CliError> {
    let names = package_names(cargo)?;
    let mut c = Command::new(cargo);
    c.args([
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    for p in packages {
        c.args(["-p", p]);
    }
    if tests.is_empty() {
        c.arg("--tests");
    }
    for t in tests {
        c.args(["--test", t]);
    }
    eprintln!(
        "$ {cargo} {}",
        c.get_args()
            .map(|a| calametra::report::shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = c
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo} test --no-run`: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "`{cargo} test --no-run` failed (its errors are above)"
        )));
    }
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if m["reason"] != "compiler-artifact" || m["profile"]["test"] != true {
            continue;
        }
        let is_test = m["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|x| x == "test"));
        let (Some(exe), Some(target), Some(manifest)) = (
            m["executable"].as_str(),
            m["target"]["name"].as_str(),
            m["manifest_path"].as_str(),
        ) else {
            continue;
        };
        if !is_test {
            continue;
        }
        let manifest = PathBuf::from(manifest);
        let Some(package) = names.get(&manifest).cloned() else {
            continue;
        };
        v.push(TestBinary {
            package,
            target: target.to_string(),
            exe: PathBuf::from(exe),
            dir: manifest.parent().unwrap_or(Path::new(".")).to_path_buf(),
        });
    }
    Ok(v)
}

/// The trials a test binary lists (`--list`): every one, or the ignored ones alone.
pub fn trials(b: &TestBinary, ignored_only: bool) -> Result<Vec<String>, CliError> {
    let which = if ignored_only {
        "--ignored"
    } else {
        "--include-ignored"
    };
    let out = Command::new(&b.exe)
        .args(["--list", which])
        .current_dir(&b.dir)
        .env_remove(SWEEP)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| fail(format!("{}: cannot list its trials: {e}", b.exe.display())))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect())
}

/// Whether a binary holds in-process Calametra scenarios (a `<scenario>::baseline` trial that
/// is not ignored: a guest scenario's trials are, and a sweep leaves them out).
pub(crate) fn is_scenario_binary(b: &TestBinary) -> Result<bool, CliError> {
    let ignored = trials(b, true)?;
    Ok(trials(b, false)?
        .iter()
        .any(|t| t.ends_with("::baseline") && !ignored.contains(t)))
}
