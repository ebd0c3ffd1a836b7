//! `calametra qemu`: its options as a user gets them wrong (clear errors, exit 2, no guest
//! booted), and, with the lockstep QEMU built, a guest run of a model registered in a user's
//! own crate (`--package P --test T`: the counter of `tests/tests/own_model/`, which this tool
//! does not link).

mod support;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::tool;

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
fn a_program_or_file_that_cannot_be_read_is_named_before_any_guest_boots() {
    let spec = repo_file("specs/dfu11-usbd-dfu.json");
    let dir = tempfile::tempdir().unwrap();
    let missing = dir.path().join("no-such-program");
    let (code, out) = tool(&["qemu", "--spec", &spec, "--bin", missing.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("no-such-program"), "{out}");
    let bin = dir.path().join("prog");
    std::fs::write(&bin, "#!/bin/sh\nexit 0\n").unwrap();
    let (code, out) = tool(&[
        "qemu",
        "--spec",
        &spec,
        "--bin",
        bin.to_str().unwrap(),
        "--file",
        "/no/such/file:data.bin",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("/no/such/file"), "{out}");
}

#[test]
fn with_package_the_job_runs_in_the_test_binary_among_its_registered_models() {
    // A format nobody registers: the error comes from inside calametra-tests' own_model_scenario
    // binary (it lists the counter registered there), before any guest is looked for.
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("other.json");
    std::fs::write(
        &spec,
        r#"{"format": "example.spec.nothing", "version": 1, "source": "a test"}"#,
    )
    .unwrap();
    let (code, out) = tool(&[
        "qemu",
        "--spec",
        spec.to_str().unwrap(),
        "--package",
        "calametra-tests",
        "--test",
        "own_model_scenario",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("`example.spec.nothing` is not a model registered in this binary")
            && out.contains("example.spec.counter"),
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

/// A learned spec (`calametra learn` of the real JCD543 capture) is served to the guest like
/// any model: Linux enumerates the learned dock from its recorded answers and lsusb names it.
#[test]
#[ignore = "needs the lockstep QEMU and the guest: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh (scripts/test.sh does), then cargo test -p calametra-cli --test qemu -- --ignored"]
fn a_learned_spec_is_served_to_the_guest_and_enumerates() {
    let dir = tempfile::tempdir().unwrap();
    let spec = dir.path().join("jcd543.json");
    let (code, out) = tool(&[
        "learn",
        "--capture",
        &repo_file("refdata/trace-JCD543-20220514T1928-4k-edid.pcapng.gz"),
        "--out",
        spec.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    let script = dir.path().join("probe.sh");
    std::fs::write(
        &script,
        // A script probe starts when the guest does; it waits for the device itself.
        "until lsusb -d 0711:5601; do sleep 0.2; done\necho LEARNED-DOCK-ENUMERATED\n",
    )
    .unwrap();
    let trace = dir.path().join("learned.jsonl");
    let (code, out) = tool(&[
        "qemu",
        "--spec",
        spec.to_str().unwrap(),
        "--script",
        script.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    let text = std::fs::read_to_string(&trace).unwrap();
    assert!(
        text.contains("ID 0711:5601 MCT Corp. USB Station")
            && text.contains("LEARNED-DOCK-ENUMERATED"),
        "the guest's lsusb of the learned dock is in the trace:\n{out}"
    );
}

/// Compiles a C file of the repository with gcc against libusb-1.0 (`pkg-config`): the host's
/// Debian libraries, the same as the guest image's.
fn gcc(out: &Path, args: &[&str]) {
    let flags = Command::new("pkg-config")
        .args(["--cflags", "--libs", "libusb-1.0"])
        .output()
        .expect("pkg-config (scripts/install-qemu.sh installs libusb-1.0-0-dev)");
    assert!(
        flags.status.success(),
        "pkg-config libusb-1.0: is libusb-1.0-0-dev installed (scripts/install-qemu.sh)?"
    );
    let flags = String::from_utf8(flags.stdout).unwrap();
    let status = Command::new("gcc")
        .args(["-O2", "-Wall", "-o"])
        .arg(out)
        .args(args)
        .args(flags.split_whitespace())
        .status()
        .expect("gcc");
    assert!(status.success(), "gcc {args:?}");
}

#[test]
#[ignore = "needs the lockstep QEMU, the guest and libusb-1.0-0-dev: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh (scripts/test.sh does), then cargo test -p calametra-cli --test qemu -- --ignored"]
fn a_dynamically_linked_libusb_program_runs_against_a_shipped_model() {
    let dir = tempfile::tempdir().unwrap();
    let bin = dir.path().join("dfu-status");
    gcc(
        &bin,
        &[&repo_file(
            "tests/guest-programs/libusb-dfu-status/dfu-status.c",
        )],
    );
    let spec = repo_file("specs/dfu11-usbd-dfu.json");
    let trace = dir.path().join("dfu-status.jsonl");
    let (code, out) = tool(&[
        "qemu",
        "--spec",
        &spec,
        "--bin",
        bin.to_str().unwrap(),
        "--trace",
        trace.to_str().unwrap(),
        "--",
        "1209:0001",
    ]);
    assert_eq!(code, 0, "{out}");
    // Its exit status and output, on the screen and in the trace.
    assert!(out.contains("program: exit status 0"), "{out}");
    assert!(
        out.contains(
            r#"stdout| device 1209:0001 bcdDevice 0010 product "Calametra usbd-dfu firmware""#
        ) && out.contains("stdout| bStatus 0 bwPollTimeout 0 bState 2"),
        "{out}"
    );
    let text = std::fs::read_to_string(&trace).unwrap();
    let program = text
        .lines()
        .find(|l| l.contains(r#""kind":"program""#))
        .unwrap_or_else(|| panic!("no program record in the trace:\n{text}"));
    assert!(
        program.contains(r#""status":0"#) && program.contains("bState 2"),
        "{program}"
    );

    // A program linked against a library the image lacks is refused by name before any boot.
    let lib = dir.path().join("libcalametra-missing.so.1");
    let src = dir.path().join("missing.c");
    std::fs::write(&src, "int calametra_missing(void) { return 7; }\n").unwrap();
    gcc(
        &lib,
        &[
            "-shared",
            "-fPIC",
            "-Wl,-soname,libcalametra-missing.so.1",
            src.to_str().unwrap(),
        ],
    );
    let main = dir.path().join("main.c");
    std::fs::write(
        &main,
        "int calametra_missing(void);\nint main(void) { return calametra_missing() == 7 ? 0 : 1; }\n",
    )
    .unwrap();
    let needs = dir.path().join("needs-missing");
    gcc(&needs, &[main.to_str().unwrap(), lib.to_str().unwrap()]);
    let (code, out) = tool(&["qemu", "--spec", &spec, "--bin", needs.to_str().unwrap()]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("needs-missing: the guest image")
            && out.contains("lacks libcalametra-missing.so.1 (needed by needs-missing)")
            && out.contains("libusb-1.0.so.0"),
        "{out}"
    );
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest built in this repository's target/ (scripts/install-qemu.sh, guest/build.sh, calametra-qemu/qemu/build.sh; scripts/test.sh runs them), then cargo test -p calametra-cli --test qemu -- --ignored"]
fn a_crate_outside_the_workspace_runs_a_guest_scenario_after_guest_setup() {
    let target = repo().join("target");
    std::fs::create_dir_all(&target).unwrap();
    // The user's cache, on the target's file system so the seeded build is hard links.
    let cache = tempfile::tempdir_in(&target).unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_calametra"))
        .args(["guest-setup", "--no-install", "--cache"])
        .arg(cache.path())
        .arg("--reuse")
        .arg(&target)
        .output()
        .expect("run calametra guest-setup");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        cache
            .path()
            .join("guest/current/initramfs.cpio.gz")
            .is_file(),
        "{text}"
    );
    assert!(
        cache
            .path()
            .join("qemu-lockstep/current/qemu-system-x86_64")
            .is_file(),
        "{text}"
    );

    // A crate of its own (its own workspace), depending on the crates as a user's would; the
    // workspace's lock file pins the same versions (nothing is fetched).
    let krate = tempfile::tempdir().unwrap();
    let k = krate.path();
    let dep = |name: &str| format!("{name} = {{ path = {:?} }}\n", repo().join(name));
    std::fs::write(
        k.join("Cargo.toml"),
        format!(
            "[package]\nname = \"outside-guest\"\nversion = \"0.1.0\"\nedition = \"2021\"\npublish = false\n\n[workspace]\n\n[dev-dependencies]\n{}{}{}\n[[test]]\nname = \"guest\"\nharness = false\n",
            dep("calametra"),
            dep("calametra-qemu"),
            dep("calametra-models")
        ),
    )
    .unwrap();
    std::fs::copy(repo().join("Cargo.lock"), k.join("Cargo.lock")).unwrap();
    std::fs::create_dir_all(k.join("src")).unwrap();
    std::fs::write(k.join("src/lib.rs"), "").unwrap();
    std::fs::create_dir_all(k.join("tests")).unwrap();
    std::fs::copy(repo().join("specs/dfu11-usbd-dfu.json"), k.join("dfu.json")).unwrap();
    std::fs::write(
        k.join("tests/guest.rs"),
        r#"use calametra_models as _;
use calametra_qemu::{Guest, Probe};

#[calametra::scenario(spec = "dfu.json", guest = lockstep)]
fn lsusb(guest: &mut Guest) {
    guest.attach_registered();
    guest.probe(Probe::Lsusb);
}

calametra::main!();
"#,
    )
    .unwrap();
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let out = Command::new(cargo)
        .args(["test", "--offline", "--test", "guest", "--"])
        .args(["--ignored", "--exact", "lsusb::baseline"])
        .current_dir(k)
        .env("CARGO_TARGET_DIR", target.join("outside-crate"))
        .env("CALAMETRA_CACHE", cache.path())
        .env_remove("CALAMETRA_GUEST_DIR")
        .env_remove("CALAMETRA_LOCKSTEP_QEMU")
        .output()
        .expect("cargo test in the outside crate");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{text}");
    assert!(text.contains("test lsusb::baseline ... ok"), "{text}");
    // Its runs restored a snapshot made in the user's cache: the cache served them.
    let snapshots: Vec<_> = std::fs::read_dir(cache.path().join("guest-snapshots"))
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert!(!snapshots.is_empty(), "no snapshot in the cache:\n{text}");
}
