//! What the end-to-end tests that drive cargo and the `calametra` tool share: the workspace
//! root, cargo with a clean environment, the executables a build made, the tool built once.
#![allow(dead_code)] // each test file uses its part

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;

/// The workspace root (the replay command a failure prints runs from there).
pub fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The cargo that runs these tests (`CARGO`), else the one on `PATH`.
pub fn cargo_path() -> PathBuf {
    std::env::var_os("CARGO")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("cargo"))
}

/// A command with none of the variables that change what a Calametra binary does (the outer
/// run's `CALAMETRA_*`, the fixture's knobs, nextest's markers): each test sets what it means.
pub fn clean(mut c: Command) -> Command {
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CALAMETRA_") || k.starts_with("HW_LOOP_") || k.starts_with("NEXTEST") {
            c.env_remove(&*k);
        }
    }
    c
}

/// A cargo command run from the workspace root.
pub fn cargo() -> Command {
    let mut c = clean(Command::new(cargo_path()));
    c.current_dir(root());
    c
}

/// The executables a `cargo ... --message-format=json` build produced, by target name.
pub fn executables(mut c: Command) -> BTreeMap<String, PathBuf> {
    let out = c
        .arg("--message-format=json")
        .stderr(Stdio::inherit())
        .output()
        .expect("run cargo");
    assert!(out.status.success(), "{c:?} failed");
    let mut m = BTreeMap::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(v) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if let (Some(name), Some(exe)) = (v["target"]["name"].as_str(), v["executable"].as_str()) {
            m.insert(name.to_string(), PathBuf::from(exe));
        }
    }
    m
}

/// The `calametra` tool, built once.
pub fn calametra_tool() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let mut c = cargo();
        c.args(["build", "-p", "calametra-cli", "--bin", "calametra"]);
        executables(c)
            .remove("calametra")
            .expect("cargo built the calametra binary")
    })
}

/// Runs `c`: its standard output and error together (a panic in them fails the test), and its
/// exit status.
fn output(c: &mut Command) -> (std::process::ExitStatus, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().unwrap_or_else(|e| panic!("run {c:?}: {e}"));
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    assert!(!text.contains("panicked"), "{text}");
    (status, text)
}

/// Runs `c`: whether it succeeded, and its standard output and error together.
pub fn run(c: &mut Command) -> (bool, String) {
    let (status, text) = output(c);
    (status.success(), text)
}

/// Runs `c`: its exit code (-1 when a signal ended it), and its standard output and error
/// together.
pub fn run_code(c: &mut Command) -> (i32, String) {
    let (status, text) = output(c);
    (status.code().unwrap_or(-1), text)
}
