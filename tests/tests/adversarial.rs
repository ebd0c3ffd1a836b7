//! Issue 19, the harness's side: adversarial `CALAMETRA_*` values (a schedule count that
//! overflows, values that are not UTF-8, unknown words), `CALAMETRA_REPLAY_FILE` naming its own
//! scenario and spec, saved cases whose events name what the scenario does not have, special
//! files given as input, and a relative `CARGO_TARGET_DIR`. Each drives the `adversary` binary
//! (`src/bin/adversary.rs`) as a user would. Some tests read the wall clock on purpose: a
//! refusal must come at once, not after building a billion trials.
#![allow(clippy::disallowed_methods)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::time::{Duration, Instant};

const EXE: &str = env!("CARGO_BIN_EXE_adversary");

/// The binary with none of the outer run's `CALAMETRA_*` variables, saving cases into `regs`.
fn adversary(regs: &Path) -> Command {
    let mut c = Command::new(EXE);
    for (k, _) in std::env::vars_os() {
        let k = k.to_string_lossy();
        if k.starts_with("CALAMETRA_") || k.starts_with("NEXTEST") {
            c.env_remove(&*k);
        }
    }
    c.env("CALAMETRA_REGRESSIONS", regs);
    c
}

/// Exit code and standard output and error together.
fn run(c: &mut Command) -> (Option<i32>, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("run the adversary binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    (status.code(), text)
}

/// The trials `--list` names.
fn listed(text: &str) -> Vec<String> {
    text.lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect()
}

#[test]
fn schedule_counts_past_the_bound_are_refused_at_once_naming_the_variable_and_the_sweep() {
    let regs = tempfile::tempdir().unwrap();
    for v in ["18446744073709551615", "100000000", "1000001", "0x1000000"] {
        let start = Instant::now();
        let (code, out) = run(adversary(regs.path())
            .arg("--list")
            .env("CALAMETRA_SCHEDULES", v));
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "{v}: took {:?}",
            start.elapsed()
        );
        assert_eq!(code, Some(2), "{v}: {out}");
        assert!(
            out.contains(&format!("CALAMETRA_SCHEDULES=`{v}`: at most 1000000"))
                && out.contains("CALAMETRA_SWEEP="),
            "{v}: {out}"
        );
        assert!(!out.contains("panicked"), "{out}");
    }
    for v in ["0", "zebra", "-1", "1e6"] {
        let (code, out) = run(adversary(regs.path())
            .arg("--list")
            .env("CALAMETRA_SCHEDULES", v));
        assert_eq!(code, Some(2), "{v}: {out}");
        assert!(
            out.contains(&format!("CALAMETRA_SCHEDULES=`{v}`: expected a number of seeded schedules from 1 to 1000000")),
            "{v}: {out}"
        );
    }
    // The bound itself is taken (listing is all that is asked here).
    let (code, out) = run(adversary(regs.path())
        .args(["--list", "--exact", "passing::baseline"])
        .env("CALAMETRA_SCHEDULES", "1000000"));
    assert_eq!(code, Some(0), "{out}");
}

#[test]
fn bad_words_and_values_that_are_not_utf8_name_their_variable() {
    let regs = tempfile::tempdir().unwrap();
    let cases: &[(&str, &str, &str)] = &[
        (
            "CALAMETRA_SEED",
            "garbage",
            "CALAMETRA_SEED=`garbage`: expected a seed",
        ),
        (
            "CALAMETRA_SEED",
            "0x1ffffffffffffffff",
            "CALAMETRA_SEED=`0x1ffffffffffffffff`: expected a seed",
        ),
        (
            "CALAMETRA_REPLAY",
            "lenient",
            "CALAMETRA_REPLAY=`lenient`: expected `strict`",
        ),
        ("CALAMETRA_STOP_AT", "soon", "CALAMETRA_STOP_AT"),
        ("CALAMETRA_SWEEP", "forever", "CALAMETRA_SWEEP="),
    ];
    for (k, v, says) in cases {
        let mut c = adversary(regs.path());
        c.arg("--list").env(k, v);
        if *k == "CALAMETRA_STOP_AT" {
            c.env("CALAMETRA_STATE_OUT", regs.path().join("state.json"));
        }
        let (code, out) = run(&mut c);
        assert_eq!(code, Some(2), "{k}={v}: {out}");
        assert!(out.contains(says), "{k}={v}: {out}");
    }
    #[cfg(unix)]
    {
        use std::ffi::OsStr;
        use std::os::unix::ffi::OsStrExt;
        let bad = OsStr::from_bytes(b"0x\xff\xfe");
        for k in [
            "CALAMETRA_SCHEDULES",
            "CALAMETRA_SEED",
            "CALAMETRA_REPLAY",
            "CALAMETRA_SWEEP",
        ] {
            let (code, out) = run(adversary(regs.path()).arg("--list").env(k, bad));
            assert_eq!(code, Some(2), "{k}: {out}");
            assert!(
                out.contains(&format!(
                    "calametra: {k}=`0x\u{fffd}\u{fffd}`: not valid UTF-8"
                )),
                "{k}: {out}"
            );
        }
        // A path may be any bytes: a directory whose name is not UTF-8 holds the saved cases.
        let dir = regs.path().join(OsStr::from_bytes(b"r\xe9gressions"));
        let (code, out) = run(adversary(&dir).args(["--exact", "with_spec::finds::never"]));
        assert_eq!(code, Some(0), "{out}");
        assert!(dir.join("adversary/with_spec").is_dir(), "{out}");
    }
}

/// Saves the cases of `with_spec` and `unplugged` into `regs` and returns their files.
fn saved_cases(regs: &Path) -> (PathBuf, PathBuf) {
    let (code, out) = run(adversary(regs).arg("::finds::"));
    assert_eq!(code, Some(0), "{out}");
    let one = |scenario: &str| {
        let dir = regs.join("adversary").join(scenario);
        let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().path())
            .collect();
        assert_eq!(files.len(), 1, "{files:?}");
        files.remove(0)
    };
    (one("with_spec"), one("unplugged"))
}

fn edit(path: &Path, to: &Path, f: impl FnOnce(&mut Value)) {
    let mut v: Value = serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap();
    f(&mut v);
    std::fs::write(to, serde_json::to_string_pretty(&v).unwrap()).unwrap();
}

/// The target directory the binary was built in (where its traces go).
fn exe_target_dir() -> PathBuf {
    calametra::tracefile::cargo_target_dir(Path::new(EXE))
        .expect("the binary is in a cargo target directory")
}

#[test]
fn a_replay_file_replays_in_its_own_scenario_only_and_checks_its_spec() {
    let regs = tempfile::tempdir().unwrap();
    let (case, _) = saved_cases(regs.path());
    let other = tempfile::tempdir().unwrap();

    // Only the scenario the file names gets a `replay` trial, and it replays byte-exactly.
    let (code, out) = run(adversary(other.path())
        .arg("--list")
        .env("CALAMETRA_REPLAY_FILE", &case));
    assert_eq!(code, Some(0), "{out}");
    let replays: Vec<String> = listed(&out)
        .into_iter()
        .filter(|n| n.ends_with("::replay"))
        .collect();
    assert_eq!(replays, ["with_spec::replay"], "{out}");
    let (code, out) = run(adversary(other.path())
        .args(["--exact", "with_spec::replay"])
        .env("CALAMETRA_REPLAY_FILE", &case));
    assert_eq!(code, Some(0), "{out}");
    assert!(out.contains("1 passed"), "{out}");

    // A case recorded against another spec is stale, not replayed.
    let edited = other.path().join("edited.json");
    edit(&case, &edited, |v| {
        v["spec_sha256"] = Value::from("00".repeat(32))
    });
    let (code, out) = run(adversary(other.path())
        .args(["--exact", "with_spec::replay"])
        .env("CALAMETRA_REPLAY_FILE", &edited));
    assert_eq!(code, Some(101), "{out}");
    assert!(
        out.contains("was recorded against another spec (sha256 0000")
            && out.contains("the scenario now has sha256 6e615c0d"),
        "{out}"
    );
    edit(&case, &edited, |v| v["spec_sha256"] = Value::Null);
    let (_, out) = run(adversary(other.path())
        .args(["--exact", "with_spec::replay"])
        .env("CALAMETRA_REPLAY_FILE", &edited));
    assert!(
        out.contains("(no spec; the scenario now has sha256"),
        "{out}"
    );

    // The trace of the failure records the spec too, and is checked the same way.
    // Named by the case and its trace hash, so it is the saved case's run and no other.
    let id = case.file_stem().unwrap().to_str().unwrap();
    let saved: Value = serde_json::from_str(&std::fs::read_to_string(&case).unwrap()).unwrap();
    let case_hash = saved["trace_hash"].as_str().unwrap().to_string();
    let hex12 = &case_hash.strip_prefix("sha256:").unwrap()[..12];
    let trace = exe_target_dir().join(format!(
        "calametra/traces/adversary/with_spec/{id}-{hex12}.jsonl"
    ));
    let text = std::fs::read_to_string(&trace).unwrap();
    let summary: Value = serde_json::from_str(text.lines().last().unwrap()).unwrap();
    assert_eq!(summary["data"]["hash"].as_str(), Some(case_hash.as_str()), "{summary}");
    assert_eq!(
        summary["data"]["spec_sha256"].as_str().map(|s| &s[..8]),
        Some("6e615c0d"),
        "{summary}"
    );
    let (code, out) = run(adversary(other.path())
        .args(["--exact", "with_spec::replay"])
        .env("CALAMETRA_REPLAY_FILE", &trace));
    assert_eq!(code, Some(0), "{out}");
    let stale_trace = other.path().join("stale.jsonl");
    let mut lines: Vec<String> = text.lines().map(str::to_string).collect();
    let last = lines.pop().unwrap();
    lines.push(last.replace("\"spec_sha256\":\"6e615c0d", "\"spec_sha256\":\"00000000"));
    std::fs::write(&stale_trace, lines.join("\n") + "\n").unwrap();
    let (code, out) = run(adversary(other.path())
        .args(["--exact", "with_spec::replay"])
        .env("CALAMETRA_REPLAY_FILE", &stale_trace));
    assert_eq!(code, Some(101), "{out}");
    assert!(out.contains("recorded against another spec"), "{out}");

    // A file of this target naming a scenario that is not here fails as its own trial; a file
    // of another target makes no trial here.
    edit(&case, &edited, |v| v["scenario"] = Value::from("renamed"));
    let (code, out) = run(adversary(other.path())
        .args(["--exact", "renamed::replay"])
        .env("CALAMETRA_REPLAY_FILE", &edited));
    assert_eq!(code, Some(101), "{out}");
    assert!(
        out.contains("no scenario `renamed` in calametra-tests's test target `adversary`"),
        "{out}"
    );
    edit(&case, &edited, |v| v["target"] = Value::from("demo"));
    let (code, out) = run(adversary(other.path())
        .arg("--list")
        .env("CALAMETRA_REPLAY_FILE", &edited));
    assert_eq!(code, Some(0), "{out}");
    assert!(!out.contains("::replay"), "{out}");
    assert!(out.contains("is a case of test target `demo`"), "{out}");
}

#[test]
fn a_saved_case_naming_an_unknown_external_or_a_step_past_the_run_is_stale_saying_so() {
    let regs = tempfile::tempdir().unwrap();
    let (_, case) = saved_cases(regs.path());
    let id = case.file_stem().unwrap().to_str().unwrap().to_string();
    let trial = format!("unplugged::regression::{id}");
    let index = |v: &Value| {
        v["events"]
            .as_array()
            .unwrap()
            .iter()
            .position(|e| e["event"] == "external")
            .expect("the case unplugs")
    };
    // A name the scenario does not declare.
    edit(&case, &case, |v| {
        let i = index(v);
        v["events"][i]["name"] = Value::from("unplgu");
    });
    let before = std::fs::read(&case).unwrap();
    let (code, out) = run(adversary(regs.path()).args(["--exact", &trial]));
    assert_eq!(code, Some(101), "{out}");
    assert!(
        out.contains("stale: event")
            && out.contains("no external named `unplgu` in this scenario (it has: unplug, replug)"),
        "{out}"
    );
    // A stale case is reported, never rewritten.
    assert_eq!(std::fs::read(&case).unwrap(), before);
    // A step the run never reaches (in a case recorded by raw steps, as saved before
    // anchors: an anchor would place the external by what it follows).
    edit(&case, &case, |v| {
        v["events"]
            .as_array_mut()
            .unwrap()
            .retain(|e| e["event"] != "anchor");
        let i = index(v);
        v["events"][i]["name"] = Value::from("unplug");
        v["events"][i]["point"] = Value::from(999_999u64);
    });
    let (code, out) = run(adversary(regs.path()).args(["--exact", &trial]));
    assert_eq!(code, Some(101), "{out}");
    assert!(
        out.contains("stale: event") && out.contains("before step 999999"),
        "{out}"
    );
    // Replayed as a file, the same reason comes with the hash mismatch.
    let (code, out) = run(adversary(regs.path())
        .args(["--exact", "unplugged::replay"])
        .env("CALAMETRA_REPLAY_FILE", &case));
    assert_eq!(code, Some(101), "{out}");
    assert!(
        out.contains("is not byte-exact") && out.contains("before step 999999"),
        "{out}"
    );
}

#[cfg(unix)]
#[test]
fn special_files_as_a_replay_file_are_refused_at_once() {
    let regs = tempfile::tempdir().unwrap();
    let fifo = regs.path().join("case.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (file, says) in [
        (fifo.as_path(), "a FIFO (named pipe), not a regular file"),
        (
            Path::new("/dev/zero"),
            "a character device, not a regular file",
        ),
        (regs.path(), "a directory, not a regular file"),
    ] {
        let mut c = adversary(regs.path());
        c.arg("--list").env("CALAMETRA_REPLAY_FILE", file);
        let start = Instant::now();
        let (code, out) = run(&mut c);
        assert!(start.elapsed() < Duration::from_secs(10));
        assert_eq!(code, Some(2), "{out}");
        assert!(
            out.contains("CALAMETRA_REPLAY_FILE: ") && out.contains(says),
            "{out}"
        );
    }
    // A saved case with a trailing comma: named as such, with its line.
    let bad = regs.path().join("bad.json");
    std::fs::write(
        &bad,
        "{\n  \"format\": \"calametra.regression\",\n  \"version\": 1,\n}\n",
    )
    .unwrap();
    let (code, out) = run(adversary(regs.path())
        .arg("--list")
        .env("CALAMETRA_REPLAY_FILE", &bad));
    assert_eq!(code, Some(2), "{out}");
    assert!(out.contains("trailing comma at line 4 column 1"), "{out}");
    // The file is left as it was.
    assert_eq!(
        std::fs::read_to_string(&bad).unwrap(),
        "{\n  \"format\": \"calametra.regression\",\n  \"version\": 1,\n}\n"
    );
}

/// A relative `CARGO_TARGET_DIR` is relative to where cargo ran, not to the directory the test
/// binary runs in (its package's): traces go to the target directory the binary is in.
#[test]
fn a_relative_cargo_target_dir_puts_traces_in_the_binarys_target_directory() {
    let regs = tempfile::tempdir().unwrap();
    let cwd = tempfile::tempdir().unwrap();
    let traces = exe_target_dir().join("calametra/traces/adversary/unplugged");
    let _ = std::fs::remove_dir_all(&traces);
    let (code, out) = run(adversary(regs.path())
        .current_dir(cwd.path())
        .env("CARGO_TARGET_DIR", "relative-target")
        .args(["--exact", "unplugged::finds::still_plugged"]));
    assert_eq!(code, Some(0), "{out}");
    assert!(!cwd.path().join("relative-target").exists(), "{out}");
    // Other tests' runs of this binary may be writing here at the same time (an atomic write's
    // `.calametra-*.tmp` is seen mid-way): the trace files are what count.
    let written: Vec<_> = std::fs::read_dir(&traces)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".jsonl"))
        .collect();
    assert!(!written.is_empty(), "no trace in {}", traces.display());
}
