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
//! `--prune STATE[,STATE..]` deletes the files in those states (and nothing else). Only a
//! saved case can be pruned: a regular file named `<12 hex digits>.json`, reached from the root
//! without passing through a symlink. Anything else under the root (a `README.md`, a
//! `.gitkeep`, a symlink, a FIFO, a whole source tree when `CALAMETRA_REGRESSIONS=.`) is
//! counted as ignored and never touched. The files are listed before anything is deleted;
//! they are deleted with `--yes`, or when a person at a terminal answers `y`.
//!
//! Test targets and `[[bin]]` harness targets are both replayed: a `[[bin]]` target's cases
//! through `cargo run --bin T -- regression::`.
//!
//! With `CALAMETRA_REGRESSIONS=<dir>` set (as the test binaries read it), the cases are those
//! under `<dir>/<test target>/<scenario path>/` instead, for the one package `--package` names
//! (the directory does not say whose targets they are), and the test binaries are run with it.

use crate::output::{cargo_or_default, clean, fail, CliError};
use calametra::env_names::{CASE_STATES, REGRESSIONS, REPLAY, SWEEP};
use calametra::report::shell_quote;
use calametra_core::regress::is_case_file_name;
use clap::Args;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The arguments of `calametra review`.
#[derive(Args, Debug)]
pub(crate) struct ReviewArgs {
    /// Only this package's saved cases (required with CALAMETRA_REGRESSIONS=<dir>).
    #[arg(long, value_name = "P")]
    package: Option<String>,
    /// Delete the files in these states (comma-separated: fixed,stale,...): only saved cases
    /// (regular `<12 hex>.json` files, never through a symlink), listed first.
    #[arg(long, value_name = "STATE,..")]
    prune: Option<String>,
    /// Delete what --prune lists without asking (needed when standard input is not a terminal).
    #[arg(long, requires = "prune")]
    yes: bool,
    /// The cargo that runs the test binaries (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
}

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

/// One saved case and what it shows.
struct Row {
    file: PathBuf,
    state: String,
    detail: String,
    /// The root it was found under: what a pruned file must lie under.
    root: PathBuf,
}

/// How a target's harness is run: `cargo test --test T` or `cargo run --bin T`.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Kind {
    Test,
    Bin,
}

/// A package of the workspace: its name, directory and the targets that can hold saved cases
/// (test targets and `[[bin]]` targets, which a harness binary may be).
struct Package {
    name: String,
    dir: PathBuf,
    targets: BTreeMap<String, Kind>,
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
        let mut targets = BTreeMap::new();
        for t in p["targets"].as_array().into_iter().flatten() {
            let Some(tname) = t["name"].as_str() else {
                continue;
            };
            let kinds = t["kind"].as_array();
            let has = |k: &str| kinds.is_some_and(|ks| ks.iter().any(|x| x == k));
            if has("test") {
                targets.insert(tname.to_string(), Kind::Test);
            } else if has("bin") {
                targets.entry(tname.to_string()).or_insert(Kind::Bin);
            }
        }
        let dir = Path::new(manifest)
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf();
        ps.push(Package {
            name: name.to_string(),
            dir,
            targets,
        });
    }
    if let Some(o) = only {
        if ps.is_empty() {
            return Err(fail(format!("no package `{o}` in this workspace")));
        }
    }
    Ok(ps)
}

/// What lies under a directory of saved cases: the saved cases (regular files named
/// `<12 hex digits>.json`) and everything else, which review lists by count and never touches.
#[derive(Default)]
struct Found {
    cases: Vec<PathBuf>,
    ignored: Vec<PathBuf>,
}

/// Walks `dir` recursively without following a symlink (`DirEntry::file_type` does not follow
/// one: a symlinked directory is ignored, not entered).
fn walk(dir: &Path, out: &mut Found) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    let mut entries: Vec<_> = rd.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(t) if t.is_file() && is_case_name(&p) => out.cases.push(p),
            _ => out.ignored.push(p),
        }
    }
}

fn is_case_name(p: &Path) -> bool {
    p.file_name()
        .and_then(|n| n.to_str())
        .is_some_and(is_case_file_name)
}

/// Whether `file` may be deleted: a regular file named like a saved case, under `root`, with
/// no symlink between `root` and it (checked again right before the deletion, so a directory
/// swapped for a symlink since the listing is not followed).
fn deletable(root: &Path, file: &Path) -> Result<(), String> {
    let rel = file
        .strip_prefix(root)
        .map_err(|_| format!("not under {}", root.display()))?;
    if !is_case_name(file) {
        return Err("not named <12 hex digits>.json".into());
    }
    let mut at = root.to_path_buf();
    let parts: Vec<_> = rel.components().collect();
    for (i, c) in parts.iter().enumerate() {
        match c {
            std::path::Component::Normal(n) => at.push(n),
            _ => return Err("its path leaves the root".into()),
        }
        let m = std::fs::symlink_metadata(&at).map_err(|e| format!("{}: {e}", at.display()))?;
        let last = i + 1 == parts.len();
        if m.file_type().is_symlink() {
            return Err(format!("{} is a symlink (never followed)", at.display()));
        }
        if last && !m.file_type().is_file() {
            return Err("not a regular file".into());
        }
        if !last && !m.file_type().is_dir() {
            return Err(format!("{} is not a directory", at.display()));
        }
    }
    Ok(())
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

/// The path a states line names: `file_bytes` (the path's bytes in hex, written when the path
/// is not UTF-8, so a non-UTF-8 regressions path still matches its file), else `file`.
fn state_path(v: &serde_json::Value) -> Option<PathBuf> {
    #[cfg(unix)]
    if let Some(h) = v["file_bytes"].as_str() {
        use std::os::unix::ffi::OsStringExt;
        let bytes = calametra_core::hex::decode(h).ok()?;
        return Some(PathBuf::from(std::ffi::OsString::from_vec(bytes)));
    }
    v["file"].as_str().map(PathBuf::from)
}

/// Replays one target's cases through its binary (with `CALAMETRA_REGRESSIONS=<regs>` when
/// given, else without it); returns (scenarios it defines, state and detail by file).
#[allow(clippy::type_complexity)]
fn run_target(
    cargo: &str,
    p: &Package,
    target: &str,
    kind: Kind,
    regs: Option<&Path>,
) -> Result<(BTreeSet<String>, BTreeMap<PathBuf, (String, String)>), CliError> {
    let states = tempfile::Builder::new()
        .prefix("calametra-review-")
        .tempdir()
        .map_err(|e| fail(format!("cannot create a temporary directory: {e}")))?;
    let file = states.path().join("states.jsonl");
    let var = regs
        .map(|r| format!("{REGRESSIONS}={} ", shell_quote(&r.display().to_string())))
        .unwrap_or_default();
    let (verb, flag) = match kind {
        Kind::Test => ("test", "--test"),
        Kind::Bin => ("run", "--bin"),
    };
    println!(
        "$ {var}{cargo} {verb} -q -p {} {flag} {} -- regression::",
        shell_quote(&p.name),
        shell_quote(target)
    );
    // The trials' verdicts are in the states file; a failing case fails its trial, which is
    // what review reports, so the exit status is not an error here. A sweep's variables would
    // turn the binary into a sweep, which writes no states: review replays, so they go.
    let mut cmd = Command::new(cargo);
    match regs {
        Some(r) => cmd.env(REGRESSIONS, r),
        None => cmd.env_remove(REGRESSIONS),
    };
    for (k, _) in std::env::vars_os() {
        if k.to_str().is_some_and(|k| k.starts_with(SWEEP)) {
            cmd.env_remove(k);
        }
    }
    let out = cmd
        .args([
            verb,
            "-q",
            "-p",
            &p.name,
            flag,
            target,
            "--",
            "regression::",
        ])
        .env(CASE_STATES, &file)
        .env_remove(REPLAY)
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo} {verb}`: {e}")))?;
    let text = std::fs::read_to_string(&file).map_err(|_| {
        fail(format!(
            "`{cargo} {verb} -p {} {flag} {target}` wrote no case states (did it build? is it a Calametra harness binary?)\n{}",
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
        } else if let (Some(f), Some(st)) = (state_path(&v), v["state"].as_str()) {
            let detail = v["detail"].as_str().unwrap_or("").to_string();
            let key = std::fs::canonicalize(&f).unwrap_or(f);
            by_file.insert(key, (st.to_string(), detail));
        }
    }
    Ok((defined, by_file))
}

/// `CALAMETRA_REGRESSIONS=<dir>`, made absolute (the test binaries run in their package's
/// directory): the root of the saved cases of the package `--package` names, which it requires.
/// `None` when unset: each package's `calametra-regressions/`.
fn regressions_root(package: Option<&str>) -> Result<Option<PathBuf>, CliError> {
    let Some(v) = std::env::var_os(REGRESSIONS).filter(|v| !v.is_empty()) else {
        return Ok(None);
    };
    if v == "off" {
        return Err(CliError(
            format!("{REGRESSIONS}=off: saved cases are off, so there are none to review; unset it to review each package's calametra-regressions/"),
            2,
        ));
    }
    if package.is_none() {
        return Err(CliError(
            format!(
                "{REGRESSIONS}={} holds <test target>/<scenario path>/<id>.json, not packages: say whose test targets they are with --package P",
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

/// `calametra review [--package P] [--prune STATE,..] [--yes] [--cargo CARGO]`.
pub fn review(a: &ReviewArgs) -> Result<(), CliError> {
    let prune: BTreeSet<String> = match &a.prune {
        None => BTreeSet::new(),
        Some(v) => {
            let mut s = BTreeSet::new();
            for w in v.split(',').map(str::trim).filter(|w| !w.is_empty()) {
                if !STATES.contains(&w) {
                    return Err(CliError(
                        format!(
                            "--prune: unknown state `{}`; expected some of {}",
                            clean(w),
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
    let mut ignored: Vec<PathBuf> = Vec::new();
    for p in packages(&cargo, package)? {
        let root = regs
            .clone()
            .unwrap_or_else(|| p.dir.join("calametra-regressions"));
        let layout = match &regs {
            Some(r) => format!("{}/<target>/<scenario path>/", r.display()),
            None => "calametra-regressions/<target>/<scenario path>/".to_string(),
        };
        // The root itself may be a symlink (the user named it); nothing under it is followed.
        let Ok(rd) = std::fs::read_dir(&root) else {
            continue;
        };
        let mut entries: Vec<_> = rd.flatten().collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let dir = e.path();
            let is_dir = e.file_type().is_ok_and(|t| t.is_dir());
            if !is_dir {
                ignored.push(dir);
                continue;
            }
            let mut found = Found::default();
            walk(&dir, &mut found);
            ignored.append(&mut found.ignored);
            let files = found.cases;
            if files.is_empty() {
                continue;
            }
            let target = dir
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .unwrap_or_default();
            let Some(&kind) = p.targets.get(&target) else {
                for f in files {
                    rows.push(Row {
                        file: f,
                        state: "unreferenced".into(),
                        detail: format!(
                            "package `{}` has no test or bin target `{target}` (saved cases live in {layout})",
                            p.name
                        ),
                        root: root.clone(),
                    });
                }
                continue;
            };
            let (defined, states) = run_target(&cargo, &p, &target, kind, regs.as_deref())?;
            for f in files {
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
                    root: root.clone(),
                });
            }
        }
    }
    let here = std::env::current_dir().unwrap_or_default();
    let shown = |f: &Path| clean(&f.strip_prefix(&here).unwrap_or(f).display().to_string());
    if !ignored.is_empty() {
        println!(
            "ignored {}, not saved cases (never pruned: a saved case is a regular file named <12 hex digits>.json, and review follows no symlink){}",
            count(ignored.len(), "file"),
            if ignored.len() > 5 { "; the first 5:" } else { ":" }
        );
        for f in ignored.iter().take(5) {
            println!("  {}", shown(f));
        }
    }
    if rows.is_empty() {
        println!("no saved cases in this workspace");
        return Ok(());
    }
    let mut counts: BTreeMap<&str, usize> = BTreeMap::new();
    for r in &rows {
        *counts.entry(r.state.as_str()).or_default() += 1;
        let first = clean(r.detail.lines().next().unwrap_or(""));
        println!("{:<18} {}\n{:<18} {first}", r.state, shown(&r.file), "");
    }
    let summary: Vec<String> = counts.iter().map(|(s, n)| format!("{n} {s}")).collect();
    println!(
        "{}: {}",
        calametra::report::count(rows.len(), "saved case file"),
        summary.join(", ")
    );
    if prune.is_empty() {
        return Ok(());
    }
    let doomed: Vec<&Row> = rows.iter().filter(|r| prune.contains(&r.state)).collect();
    if doomed.is_empty() {
        println!("pruned 0 files: none is {}", join_or(&prune));
        return Ok(());
    }
    println!(
        "--prune {} deletes:",
        prune.iter().cloned().collect::<Vec<_>>().join(",")
    );
    for r in &doomed {
        println!("  {} ({})", shown(&r.file), r.state);
    }
    if !a.yes && !confirmed(doomed.len())? {
        return Err(CliError(
            format!(
                "deleted nothing: confirm at a terminal, or add --yes to delete {}",
                count(doomed.len(), "file")
            ),
            2,
        ));
    }
    let mut removed = 0;
    for r in doomed {
        if let Err(why) = deletable(&r.root, &r.file) {
            println!("kept {}: {why}", shown(&r.file));
            continue;
        }
        std::fs::remove_file(&r.file)
            .map_err(|e| fail(format!("{}: cannot remove: {e}", shown(&r.file))))?;
        println!("removed {} ({})", shown(&r.file), r.state);
        removed += 1;
    }
    println!("pruned {}", count(removed, "file"));
    Ok(())
}

/// `n` things, in English: `1 file`, `2 files`.
fn count(n: usize, what: &str) -> String {
    calametra::report::count(n, what)
}

fn join_or(states: &BTreeSet<String>) -> String {
    states.iter().cloned().collect::<Vec<_>>().join(" or ")
}

/// Asks a person at a terminal whether to delete `n` files; `false` without a terminal (a
/// script says `--yes`).
fn confirmed(n: usize) -> Result<bool, CliError> {
    use std::io::{BufRead, IsTerminal, Write};
    let stdin = std::io::stdin();
    if !stdin.is_terminal() {
        return Ok(false);
    }
    print!("delete {}? [y/N] ", count(n, "file"));
    std::io::stdout().flush().ok();
    let mut line = String::new();
    stdin
        .lock()
        .read_line(&mut line)
        .map_err(|e| fail(format!("cannot read the answer: {e}")))?;
    Ok(matches!(line.trim(), "y" | "Y" | "yes"))
}
