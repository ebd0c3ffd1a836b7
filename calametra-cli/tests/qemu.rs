//! `calametra qemu`: its options as a user gets them wrong (clear errors, exit 2, no guest
//! booted), and, with the lockstep QEMU built, a guest run of a model registered in a user's
//! own crate (`--package P --test T`: the counter of `tests/tests/own_model/`, which this tool
//! does not link).

use std::path::{Path, PathBuf};
use std::process::Command;

fn tool(args: &[&str]) -> (i32, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_calametra"))
        .args(args)
        .output()
        .expect("run calametra");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("panicked"), "{text}");
    (out.status.code().unwrap_or(-1), text)
}

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn repo_file(rel: &str) -> String {
    repo().join(rel).display().to_string()
}

#[test]
fn malformed_options_are_usage_errors_before_any_guest_boots() {
    let spec = repo_file("specs/dfu11-tolerant.json");
    let (code, out) = tool(&["qemu", "--spec", &spec, "--file", "a:b"]);
    assert_eq!(code, 2, "--file needs --bin: {out}");
    let (code, out) = tool(&[
        "qemu",
        "--spec",
        &spec,
        "--bin",
        "/bin/true",
        "--file",
        "nodest",
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--file `nodest`: expected SRC:DEST"), "{out}");
    let (code, out) = tool(&["qemu", "--spec", &spec, "--probe", "nothing"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("--probe `nothing`"), "{out}");
    let (code, out) = tool(&["qemu", "--spec", &spec, "--package", "x y", "--test", "t"]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("not a Cargo name"), "{out}");
    let (code, out) = tool(&["qemu", "--spec", &spec, "--", "-v"]);
    assert_eq!(code, 2, "arguments need --bin: {out}");
}

#[test]
fn a_spec_no_model_registers_is_named_before_any_guest_boots() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("other.json");
    std::fs::write(
        &spec,
        r#"{"format": "example.spec.nothing", "version": 1, "source": "a test"}"#,
    )
    .unwrap();
    let (code, out) = tool(&["qemu", "--spec", spec.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("`example.spec.nothing` is not a model registered in this binary")
            && out.contains("calametra.spec.dfu"),
        "{out}"
    );
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh (scripts/test.sh does), then cargo test -p calametra-cli --test qemu -- --ignored"]
fn a_model_of_the_users_own_crate_is_served_to_the_guest_from_its_test_binary() {
    let spec = repo_file("tests/tests/own_model/counter.json");
    let dir = tempfile::tempdir().unwrap();
    let trace = dir.path().join("counter.jsonl");
    let (code, out) = tool(&[
        "qemu",
        "--spec",
        &spec,
        "--package",
        "calametra-tests",
        "--test",
        "own_model_scenario",
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    // The guest's lsusb saw the counter by its ids and read its product string.
    assert!(out.contains("outcome: passed"), "{out}");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(
        text.contains("ID 1209:0c07") && text.contains("iProduct                1 counter"),
        "the guest's lsusb -v of the counter is in the trace:\n{out}"
    );
    // This tool alone does not know the counter: the error lists what it links.
    let (code, out) = tool(&["qemu", "--spec", &spec]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("`example.spec.counter` is not a model registered"),
        "{out}"
    );
}
