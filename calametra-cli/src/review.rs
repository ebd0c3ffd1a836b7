//! `calametra review`: the saved cases of a workspace and what each shows now, in the manner of
//! `cargo insta review` and its `--unreferenced`.
//!
//! For every package (from `cargo metadata`) with a `calametra-regressions/` directory, each
//! test target's cases are replayed by that target's own test binary (`cargo test --test T --
//! regression::` with `CALAMETRA_CASE_STATES` set, so the harness writes each case's state), and
//! every case file is listed with its state:
//!
//! | state | meaning |
//! |---|---|
//! | `fails` | still fails with its recorded signature (the bug is there) |
//! | `fails-differently` | fails, with another signature |
//! | `fixed` | every recorded event applied and nothing failed |
//! | `stale` | an event no longer applies, or the spec changed: it proves nothing now |
//! | `foreign` | its package, target or scenario is not the ones it sits under |
//! | `other-build` | a guest case made for another QEMU build or guest image (its `guest_build`): not replayed |
//! | `unreferenced` | no scenario (or no test target) of that name exists any more |
//! | `unreadable` | not a saved case that parses (its message names the field) |
//! | `not-run` | its trial did not run (a guest scenario's, ignored by default) |
//!
//! `--prune STATE[,STATE..]` deletes the files in those states (and nothing else).
//!
//! With `CALAMETRA_REGRESSIONS=<dir>` set (as the test binaries read it), the cases are those
//! under `<dir>/<test target>/<scenario path>/` instead, for the one package `--package` names
//! (the directory does not say whose targets they are), and the test binaries are run with it.

use crate::{cargo_or_default, CliError, ReviewArgs};
use calametra::report::shell_quote;
use calametra_core::regress::is_case_file_name;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The states `--prune` accepts.
const STATES: &[&str] = &[
    "fails",
    "fails-differently",
    "fixed",
    "stale",
    "foreign",
    "other-build",
    "unreferenced",
    "unreadable",
    "not-run",
];

fn fail(msg: impl Into<String>) -> CliError {
    CliError(msg.into(), 1)
}

/// One saved case and what it shows.
struct Row {
    file: PathBuf,
    state: String,
    detail: String,
}

/// A package of the workspace: its name, directory and test targets.
struct Package {
    name: String,
    dir: PathBuf,
    tests: BTreeSet<String>,
}

fn packages(cargo: &str, only: Option<&str>) -> Result<Vec<Package>, CliError> {
    let out = Command::new(cargo)
        .args([
            "metadata",
            "--no-deps",
            "--format-version",
            "1",
            "--offline",
        ])
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo} metadata`: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "`{cargo} metadata` failed: run review inside a Cargo workspace"
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| fail(format!("`{cargo} metadata` printed no JSON: {e}")))?;
    let mut ps = Vec::new();
    for p in v["packages"].as_array().into_iter().flatten() {
        let (Some(name), Some(manifest)) = (p["name"].as_str(), p["manifest_path"].as_str()) else {
            continue;
        };
        if only.is_some_and(|o| o != name) {
            continue;
        }
        let tests = p["targets"]
            .as_array()
            .into_iter()
            .flatten()
            .filter(|t| {
                t["kind"]
                    .as_array()
                    .is_some_and(|k| k.iter().any(|k| k == "test"))
            })
            .filter_map(|t| t["name"].as_str().map(str::to_string))
            .collect();
        let dir = Path::new(manifest)
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf();
        ps.push(Package {
            name: name.to_string(),
            dir,
            tests,
        });
    }
    if let Some(o) = only {
        if ps.is_empty() {
            return Err(fail(format!("no package `{o}` in this workspace")));
        }
    }
    Ok(ps)
}

/// Every file under `dir`, recursively (symlinks and special files included, never followed).
fn files_under(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => files_under(&p, out),
            Ok(_) => out.push(p),
            Err(_) => {}
        }
    }
}

/// Whether `p` is a regular file (a symlink, FIFO or socket is not, and is never followed).
fn is_regular(p: &Path) -> bool {
    std::fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_file())
}

/// The scenario path a case file's location names: `<root>/<target>/<a>/<b>/<id>.json` is `a::b`.
fn scenario_of(target_dir: &Path, file: &Path) -> String {
    let rel = file
        .parent()
        .and_then(|p| p.strip_prefix(target_dir).ok())
        .unwrap_or(Path::new(""));
    rel.components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect::<Vec<_>>()
        .join("::")
}

/// Replays one target's cases through its test binary (with `CALAMETRA_REGRESSIONS=<regs>`
/// when given, else without it); returns (scenarios it defines, state and detail by file).
#[allow(clippy::type_complexity)]
fn run_target(
    cargo: &str,
    p: &Package,
    target: &str,
    regs: Option<&Path>,
) -> Result<(BTreeSet<String>, BTreeMap<PathBuf, (String, String)>), CliError> {
    let states = tempfile::Builder::new()
        .prefix("calametra-review-")
        .tempdir()
        .map_err(|e| fail(format!("cannot create a temporary directory: {e}")))?;
    let file = states.path().join("states.jsonl");
    let var = regs
        .map(|r| {
            format!(
                "CALAMETRA_REGRESSIONS={} ",
                shell_quote(&r.display().to_string())
            )
        })
        .unwrap_or_default();
    println!(
        "$ {var}{cargo} test -q -p {} --test {} -- regression::",
        shell_quote(&p.name),
        shell_quote(target)
    );
    // The trials' verdicts are in the states file; a failing case fails its trial, which is
    // what review reports, so the exit status is not an error here.
    let mut cmd = Command::new(cargo);
    match regs {
        Some(r) => cmd.env("CALAMETRA_REGRESSIONS", r),
        None => cmd.env_remove("CALAMETRA_REGRESSIONS"),
    };
    let out = cmd
        .args([
            "test",
            "-q",
            "-p",
            &p.name,
            "--test",
            target,
            "--",
            "regression::",
        ])
        .env("CALAMETRA_CASE_STATES", &file)
        .env_remove("CALAMETRA_REPLAY")
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo} test`: {e}")))?;
    let text = std::fs::read_to_string(&file).map_err(|_| {
        fail(format!(
            "`{cargo} test -p {} --test {target}` wrote no case states (did it build? is it a Calametra test binary?)\n{}",
            p.name,
            String::from_utf8_lossy(&out.stderr)
        ))
    })?;
    let mut defined = BTreeSet::new();
    let mut by_file = BTreeMap::new();
    for line in text.lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let Some(s) = v["scenario_defined"].as_str() {
            defined.insert(s.to_string());
        } else if let (Some(f), Some(st)) = (v["file"].as_str(), v["state"].as_str()) {
            let detail = v["detail"].as_str().unwrap_or("").to_string();
            let key = std::fs::canonicalize(f).unwrap_or_else(|_| PathBuf::from(f));
            by_file.insert(key, (st.to_string(), detail));
        }
    }
    Ok((defined, by_file))
}

/// `CALAMETRA_REGRESSIONS=<dir>`, made absolute (the test binaries run in their package's
/// directory): the root of the saved cases of the package `--package` names, which it requires.
/// `None` when unset: each package's `calametra-regressions/`.
fn regressions_root(package: Option<&str>) -> Result<Option<PathBuf>, CliError> {
    let Some(v) = std::env::var_os("CALAMETRA_REGRESSIONS").filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if v == "off" {
        return Err(CliError(
            "CALAMETRA_REGRESSIONS=off: saved cases are off, so there are none to review; unset it to review each package's calametra-regressions/".into(),
            2,
        ));
    }
    if package.is_none() {
        return Err(CliError(
            format!(
                "CALAMETRA_REGRESSIONS={} holds <test target>/<scenario path>/<id>.json, not packages: say whose test targets they are with --package P",
                Path::new(&v).display()
            ),
            2,
        ));
    }
    let p = Path::new(&v);
    Ok(Some(
        std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf()),
    ))
}

/// `calametra review [--package P] [--prune STATE,..] [--cargo CARGO]`.
pub fn review(a: &ReviewArgs) -> Result<(), CliError> {
    let prune: BTreeSet<String> = match &a.prune {
        None => BTreeSet::new(),
        Some(v) => {
            let mut s = BTreeSet::new();
            for w in v.split(',').map(str::trim).filter(|w| !w.is_empty()) {
                if !STATES.contains(&w) {
                    return Err(CliError(
                        format!(
                            "--prune: unknown state `{w}`; expected some of {}",
                            STATES.join(", ")
                        ),
                        2,
                    ));
                }
                s.insert(w.to_string());
            }
            s
        }
    };
    let cargo = cargo_or_default(&a.cargo);
    let package = a.package.as_deref();
    let regs = regressions_root(package)?;
    let mut rows = Vec::new();
    for p in packages(&cargo, package)? {
        let root = regs
            .clone()
            .unwrap_or_else(|| p.dir.join("calametra-regressions"));
        let layout = match &regs {
            Some(r) => format!("{}/<test target>/<scenario path>/", r.display()),
            None => "calametra-regressions/<test target>/<scenario path>/".to_string(),
        };
        let Ok(rd) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = rd.flatten().map(|e| e.path()).collect();
        dirs.sort();
        for dir in dirs {
            let mut files = Vec::new();
            if dir.is_dir() {
                files_under(&dir, &mut files);
            } else {
                files.push(dir.clone());
            }
            files.sort();
            if files.is_empty() {
                continue;
            }
            let target = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            if !dir.is_dir() || !p.tests.contains(&target) {
                for f in files {
                    rows.push(Row {
                        file: f,
                        state: "unreferenced".into(),
                        detail: format!(
                            "package `{}` has no test target `{target}` (saved cases live in {layout})",
                            p.name
                        ),
                    });
                }
                continue;
            }
            let (defined, states) = run_target(&cargo, &p, &target, regs.as_deref())?;
            for f in files {
                let name = f
                    .file_name()
                    .map(|n| n.to_string_lossy().into_owned())
                    .unwrap_or_default();
                let scenario = scenario_of(&dir, &f);
                let key = std::fs::canonicalize(&f).unwrap_or_else(|_| f.clone());
                let (state, detail) = if let Some((s, d)) = states.get(&key) {
                    (s.clone(), d.clone())
                } else if !defined.contains(&scenario) {
                    (
                        "unreferenced".into(),
                        format!(
                            "target `{target}` has no scenario `{scenario}` (renamed or removed?)"
                        ),
                    )
                } else if !is_case_file_name(&name) || !is_regular(&f) {
                    (
                        "unreadable".into(),
                        "not a saved case (a saved case is a regular file named <12 hex digits>.json)"
                            .into(),
                    )
                } else {
                    (
                        "not-run".into(),
                        "its trial did not run (a guest scenario's are ignored by default)".into(),
                    )
                };
                rows.push(Row {
                    file: f,
                    state,
                    detail,
                });
            }
        }
    }
    if rows.is_empty() {
        println!("no saved cases in this workspace");
        return Ok(());
    }
    let here = std::env::current_dir().unwrap_or_default();
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &rows {
        *counts.entry(r.state.as_str()).or_default() += 1;
        let shown = r.file.strip_prefix(&here).unwrap_or(&r.file);
        let first = crate::clean(r.detail.lines().next().unwrap_or(""));
        let shown = crate::clean(&shown.display().to_string());
        println!("{:<18} {shown}\n{:<18} {first}", r.state, "");
    }
    let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!("{} saved case file(s): {}", rows.len(), summary.join(", "));
    let mut removed = 0;
    for r in rows.iter().filter(|r| prune.contains(&r.state)) {
        std::fs::remove_file(&r.file)
            .map_err(|e| fail(format!("{}: cannot remove: {e}", r.file.display())))?;
        println!("removed {} ({})", r.file.display(), r.state);
        removed += 1;
    }
    if !prune.is_empty() {
        println!("pruned {removed} file(s)");
    }
    Ok(())
}
