//! The harness as a user meets it: the built binaries run with `--list`, `--exact`, filters;
//! failures minimized, saved, replayed; sabotage caught. Each test drives a real binary.

use std::path::Path;
use std::process::{Command, Output};

fn bin(name: &str) -> Command {
    let path = match name {
        "demo" => env!("CARGO_BIN_EXE_demo"),
        "planted" => env!("CARGO_BIN_EXE_planted"),
        "sabotage" => env!("CARGO_BIN_EXE_sabotage"),
        _ => unreachable!(),
    };
    let mut c = Command::new(path);
    c.env_remove("CALAMETRA_SCHEDULES")
        .env_remove("CALAMETRA_SEED")
        .env_remove("CALAMETRA_REPLAY")
        .env_remove("CALAMETRA_TEST_FIXED")
        .env("CALAMETRA_REGRESSIONS", "off");
    c
}

fn run(c: &mut Command) -> (bool, String) {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("run the harness binary");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&stdout),
        String::from_utf8_lossy(&stderr)
    );
    (status.success(), text)
}

fn ran(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("test "))
        .filter(|l| l.contains(" ... "))
        .filter_map(|l| l.split(" ... ").next())
        .map(|s| s.trim().to_string())
        .collect();
    v.sort();
    v
}

#[test]
fn list_exact_filter_and_scenario_paths() {
    let (ok, list) = run(bin("demo").arg("--list"));
    assert!(ok, "{list}");
    let names: Vec<&str> = list
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .collect();
    assert!(names.contains(&"three_tasks::baseline"));
    assert!(names.contains(&"nested::inner::baseline"));
    assert!(
        names.contains(&"nested::inner::seed::0x2a"),
        "a pinned seed is the only seed"
    );
    assert_eq!(
        names
            .iter()
            .filter(|n| n.starts_with("three_tasks::seed::"))
            .count(),
        12
    );
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("status_fixed::site::ctrl.get_status#1::")),
        "{list}"
    );
    assert!(
        names.contains(&"nested::inner::site::ctrl.store#1::stall"),
        "faults = [stall] only: {list}"
    );
    assert!(!names
        .iter()
        .any(|n| n.starts_with("nested::inner::site::") && !n.ends_with("::stall")));

    // --exact NAME runs that one trial.
    let (ok, out) = run(bin("demo").args(["--exact", "three_tasks::baseline"]));
    assert!(ok, "{out}");
    assert_eq!(ran(&out), ["three_tasks::baseline"]);

    // --exact with an unknown fault primitive is refused, naming the known ones (it used to
    // run nothing and pass).
    let (ok, out) = run(bin("demo").args(["--exact", "nested::inner::site::ctrl.store#1::melt"]));
    assert!(!ok, "{out}");
    assert!(
        out.contains("`melt` is not a fault; expected stall, timeout, short(n)"),
        "{out}"
    );

    // --exact SCENARIO (what IDEs send for a function) runs all of its trials.
    let (ok, out) = run(bin("demo").args(["--exact", "three_tasks"]));
    assert!(ok, "{out}");
    let r = ran(&out);
    assert_eq!(r.len(), 13, "{out}");
    assert!(r.iter().all(|n| n.starts_with("three_tasks::")));

    // A filter runs the matching trials.
    let (ok, out) = run(bin("demo").arg("nested::"));
    assert!(ok, "{out}");
    assert!(
        ran(&out).iter().all(|n| n.starts_with("nested::inner::")) && ran(&out).len() >= 3,
        "{out}"
    );

    // CALAMETRA_SCHEDULES widens, CALAMETRA_SEED re-bases.
    let (_, wide) = run(bin("demo").arg("--list").env("CALAMETRA_SCHEDULES", "20"));
    assert_eq!(
        wide.lines()
            .filter(|l| l.starts_with("three_tasks::seed::"))
            .count(),
        20
    );
    let (_, rebased) = run(bin("demo").arg("--list").env("CALAMETRA_SEED", "0x99"));
    let seeds = |t: &str| {
        t.lines()
            .filter(|l| l.starts_with("three_tasks::seed::"))
            .map(str::to_string)
            .collect::<Vec<_>>()
    };
    assert_ne!(seeds(&rebased), seeds(&list));
    let (ok, bad) = run(bin("demo").arg("--list").env("CALAMETRA_SEED", "zebra"));
    assert!(!ok && bad.contains("CALAMETRA_SEED"), "{bad}");

    // Everything passes, and --ignored runs nothing here.
    let (ok, out) = run(&mut bin("demo"));
    assert!(ok, "{out}");
    let (ok, out) = run(bin("demo").arg("--ignored"));
    assert!(ok && out.contains("0 passed"), "{out}");
}

#[test]
fn nondeterminism_is_caught_by_the_baseline_double_run() {
    for scenario in ["hashmap_order", "wall_clock"] {
        let (ok, out) = run(bin("sabotage").args(["--exact", &format!("{scenario}::baseline")]));
        assert!(!ok, "{scenario}: must fail\n{out}");
        assert!(out.contains("nondeterminism"), "{out}");
        assert!(out.contains("first divergent record"), "{out}");
        assert!(out.contains("fields that differ: data.mark"), "{out}");
    }
}

#[test]
fn a_panicking_scenario_is_one_failed_trial_and_the_others_run() {
    let (ok, out) = run(bin("sabotage").arg("panics_sometimes::seed::"));
    assert!(!ok);
    assert!(
        out.contains("`driver` panicked: driver bug: unexpected action 3"),
        "{out}"
    );
    assert!(out.contains("seed:      0x"), "{out}");
    assert!(out.contains("replay:     cargo test -p calametra-tests --test sabotage -- --exact panics_sometimes::regression::"), "{out}");
    let summary = out
        .lines()
        .find(|l| l.starts_with("test result:"))
        .unwrap_or("");
    let passed: usize = summary
        .split("ok. ")
        .nth(1)
        .or_else(|| summary.split("FAILED. ").nth(1))
        .and_then(|s| s.split(' ').next())
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    assert!(
        passed > 0,
        "the other trials still ran and passed: {summary}"
    );
}

fn regression_files(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut v = Vec::new();
    if let Ok(rd) = std::fs::read_dir(dir) {
        for e in rd.flatten() {
            let p = e.path();
            if p.extension().is_some_and(|x| x == "json") {
                v.push(p);
            }
        }
    }
    v.sort();
    v
}

/// The seeded trials of the planted binary's `status_long` scenario, as it lists them.
fn planted_seeds() -> Vec<String> {
    let (_, list) = run(bin("planted").arg("--list"));
    list.lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|n| n.starts_with("status_long::seed::"))
        .map(str::to_string)
        .collect()
}

#[test]
fn a_planted_bug_is_found_minimized_saved_and_replayed() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let seeds = planted_seeds();
    assert_eq!(seeds.len(), 64);
    // Find a seed whose failing run took at least 40 events.
    let mut found = None;
    for s in &seeds {
        let (ok, out) = run(bin("planted")
            .args(["--exact", s])
            .env("CALAMETRA_REGRESSIONS", &regs));
        if ok {
            continue;
        }
        let chain = out
            .lines()
            .find_map(|l| l.strip_prefix("delta "))
            .unwrap_or("")
            .to_string();
        let first: usize = chain
            .split(' ')
            .next()
            .and_then(|n| n.parse().ok())
            .unwrap_or(0);
        assert!(
            out.contains("minimal events: get_status . disconnect . get_status\n"),
            "{out}"
        );
        assert!(chain.ends_with("-> 3 events"), "{chain}");
        if first >= 40 {
            found = Some((s.clone(), out));
            break;
        }
    }
    let (trial, out) = found.expect("some seed fails after 40 or more events");
    assert!(out.contains("found by:  ") && out.contains(&trial));

    // The regression file: written, read back, exactly the 1-minimal events.
    let dir = regs.join("planted").join("status_long");
    let files = regression_files(&dir);
    assert_eq!(files.len(), 1, "one signature, one file: {files:?}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&files[0]).unwrap()).unwrap();
    assert_eq!(v["format"], "calametra.regression");
    let labels: Vec<&str> = v["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["label"].as_str().unwrap())
        .collect();
    assert_eq!(labels, ["get_status", "disconnect", "get_status"]);
    let id = v["id"].as_str().unwrap().to_string();
    let reg_trial = format!("status_long::regression::{id}");
    assert!(
        out.contains(&format!(
            "replay:     cargo test -p calametra-tests --test planted -- --exact {reg_trial}"
        )),
        "{out}"
    );

    // Replayed byte-exactly (strict replay passes only on the identical trace hash).
    let (ok, out) = run(bin("planted")
        .args(["--exact", &reg_trial])
        .env("CALAMETRA_REGRESSIONS", &regs)
        .env("CALAMETRA_REPLAY", "strict"));
    assert!(ok, "{out}");
    // Not fixed: the regression trial fails, reproduced byte-exactly.
    let (ok, out) = run(bin("planted")
        .args(["--exact", &reg_trial])
        .env("CALAMETRA_REGRESSIONS", &regs));
    assert!(!ok && out.contains("reproduced byte-exactly"), "{out}");
    // Fixed: the saved case passes.
    let (ok, out) = run(bin("planted")
        .args(["--exact", &reg_trial])
        .env("CALAMETRA_REGRESSIONS", &regs)
        .env("CALAMETRA_TEST_FIXED", "1"));
    assert!(ok, "{out}");
    // Cases saved before the current trace encoding (hash version 1: SHA-256 over the
    // deterministic JSON lines, no `hash_version` field; version 2: the binary encoding with
    // every string written out) replay byte-exactly under their version, strict replay
    // included, and are re-hashed in place with a note; never stale or failed.
    let cur = calametra::trace::HASH_VERSION;
    assert_eq!(cur, 3);
    let cur_text = std::fs::read_to_string(&files[0]).unwrap();
    let cur_hash = v["trace_hash"].as_str().unwrap();
    assert!(cur_text.contains(&format!("  \"hash_version\": {cur},\n")));
    let trace = tmp.path().join("case-trace.jsonl");
    let (ok, out) = run(bin("planted")
        .args(["--exact", "status_long::replay"])
        .env("CALAMETRA_REPLAY_FILE", &files[0])
        .env("CALAMETRA_TRACE_OUT", &trace));
    assert!(ok, "{out}");
    let mut json_lines = String::new();
    for line in std::fs::read_to_string(&trace).unwrap().lines() {
        let r: serde_json::Value = serde_json::from_str(line).unwrap();
        if r["deterministic"] == true {
            json_lines.push_str(line);
            json_lines.push('\n');
        }
    }
    let records = calametra::trace::read_jsonl(&trace).unwrap();
    let v1_hash = format!(
        "sha256:{}",
        calametra::trace::sha256_hex(json_lines.as_bytes())
    );
    let hash_of = |version| {
        calametra::trace::hash_records(&records, version)
            .unwrap()
            .to_string()
    };
    assert_eq!(hash_of(1), v1_hash);
    assert_eq!(hash_of(cur), cur_hash);
    let trace_text = std::fs::read_to_string(&trace).unwrap();
    let cur_field = format!(",\"hash_version\":{cur}");
    assert!(trace_text.contains(&format!("\"hash\":\"{cur_hash}\"{cur_field}")));
    for version in [1, 2] {
        let old_hash = hash_of(version);
        assert_ne!(old_hash, cur_hash);
        // A trace file of that version (version 1: its summary without `hash_version`)
        // replays byte-exactly under it, with a note.
        let field = match version {
            1 => String::new(),
            _ => format!(",\"hash_version\":{version}"),
        };
        let old_trace = tmp.path().join(format!("case-trace-v{version}.jsonl"));
        std::fs::write(
            &old_trace,
            trace_text
                .replace(&cur_field, &field)
                .replace(cur_hash, &old_hash),
        )
        .unwrap();
        let (ok, out) = run(bin("planted")
            .args(["--exact", "status_long::replay"])
            .env("CALAMETRA_REPLAY_FILE", &old_trace));
        assert!(ok, "{out}");
        assert!(
            out.contains(&format!(
                "recorded with trace-hash version {version} and reproduced byte-exactly under it"
            )),
            "{out}"
        );
        // A saved case of that version is replayed by its events, checked under its version
        // and rewritten with the current one.
        let field = match version {
            1 => String::new(),
            _ => format!("  \"hash_version\": {version},\n"),
        };
        let old_text = cur_text
            .replace(cur_hash, &old_hash)
            .replace(&format!("  \"hash_version\": {cur},\n"), &field);
        assert_eq!(old_text.contains("hash_version"), version > 1, "{old_text}");
        std::fs::write(&files[0], &old_text).unwrap();
        let (ok, out) = run(bin("planted")
            .args(["--exact", &reg_trial])
            .env("CALAMETRA_REGRESSIONS", &regs)
            .env("CALAMETRA_REPLAY", "strict"));
        assert!(ok, "{out}");
        assert!(
            out.contains(&format!("saved with trace-hash version {version} ({old_hash}), which this replay reproduced byte-exactly; re-hashed to version {cur}: {cur_hash} (file rewritten)")),
            "{out}"
        );
        assert_eq!(std::fs::read_to_string(&files[0]).unwrap(), cur_text);
        // A hash of that version that the replay does not reproduce is not byte-exact.
        std::fs::write(&files[0], old_text.replace(&old_hash, cur_hash)).unwrap();
        let (ok, out) = run(bin("planted")
            .args(["--exact", &reg_trial])
            .env("CALAMETRA_REGRESSIONS", &regs));
        assert!(
            !ok && out.contains(&format!(
                "hash version {version}); replay is not byte-exact"
            )),
            "{out}"
        );
        std::fs::write(&files[0], &cur_text).unwrap();
    }

    // A tampered hash makes strict replay fail and say so.
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let hash = v["trace_hash"].as_str().unwrap();
    std::fs::write(
        &files[0],
        text.replace(
            hash,
            "sha256:0000000000000000000000000000000000000000000000000000000000000000",
        ),
    )
    .unwrap();
    let (ok, out) = run(bin("planted")
        .args(["--exact", &reg_trial])
        .env("CALAMETRA_REGRESSIONS", &regs)
        .env("CALAMETRA_REPLAY", "strict"));
    assert!(!ok && out.contains("not byte-exact"), "{out}");
    // A corrupt file is a clear failure naming it, not a panic, not skipped.
    std::fs::write(&files[0], &text[..text.len() / 2]).unwrap();
    let (ok, out) = run(bin("planted")
        .args(["--exact", &reg_trial])
        .env("CALAMETRA_REGRESSIONS", &regs));
    assert!(
        !ok && out.contains(&files[0].display().to_string()) && out.contains("truncated"),
        "{out}"
    );
}

#[test]
fn an_expect_scenario_passes_when_exploration_finds_its_bug_and_fails_when_not() {
    let (ok, out) =
        run(bin("planted").args(["--exact", "status_found::finds::belief_matches_connection"]));
    assert!(ok, "{out}");
    let (ok, out) = run(bin("planted")
        .args(["--exact", "status_found::finds::belief_matches_connection"])
        .env("CALAMETRA_TEST_FIXED", "1"));
    assert!(!ok && out.contains("ran out of budget"), "{out}");
    // What the runs met instead is listed, by outcome, with the runs' trial names.
    assert!(
        out.contains("what the runs met instead:\n  ")
            && out.contains(": passed (status_found::baseline, status_found::seed::0x"),
        "{out}"
    );
}

#[test]
fn two_processes_writing_the_same_regression_leave_one_complete_file() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let (_, list) = run(bin("planted").arg("--list"));
    let seed = list
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .find(|n| n.starts_with("status_long::seed::"))
        .unwrap()
        .to_string();
    for _ in 0..3 {
        let kids: Vec<_> = (0..4)
            .map(|_| {
                bin("planted")
                    .args(["--exact", &seed])
                    .env("CALAMETRA_REGRESSIONS", &regs)
                    .stdout(std::process::Stdio::null())
                    .spawn()
                    .unwrap()
            })
            .collect();
        for mut k in kids {
            let _ = k.wait();
        }
    }
    let dir = regs.join("planted").join("status_long");
    let all: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert_eq!(all.len(), 1, "no temporaries left, one file: {all:?}");
    let files = regression_files(&dir);
    let text = std::fs::read_to_string(&files[0]).unwrap();
    let v: serde_json::Value = serde_json::from_str(&text).expect("complete, valid JSON");
    assert_eq!(v["events"].as_array().unwrap().len(), 3);
}

#[test]
fn an_unwritable_regression_directory_prints_the_case_in_full() {
    let tmp = tempfile::tempdir().unwrap();
    let blocker = tmp.path().join("not-a-dir");
    std::fs::write(&blocker, "a file where the directory should be").unwrap();
    let (_, list) = run(bin("planted").arg("--list"));
    let seed = list
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .find(|n| n.starts_with("status_long::seed::"))
        .unwrap()
        .to_string();
    let (ok, out) = run(bin("planted")
        .args(["--exact", &seed])
        .env("CALAMETRA_REGRESSIONS", blocker.join("regs")));
    assert!(!ok);
    assert!(
        out.contains("regression: NOT WRITTEN") && out.contains("not-a-dir"),
        "{out}"
    );
    assert!(
        out.contains("the case in full, so it is not lost:")
            && out.contains("\"format\": \"calametra.regression\""),
        "{out}"
    );
}

#[test]
fn a_fault_schedule_file_applies_to_every_trial() {
    let (ok, out) = run(bin("demo").args(["--exact", "status_scheduled_stall::baseline"]));
    assert!(ok, "{out}");
    let (_, list) = run(bin("demo").arg("--list"));
    assert!(list.contains("status_scheduled_stall::seed::"), "{list}");
}

#[test]
fn a_model_that_panics_is_one_failed_trial_with_the_panic() {
    let (ok, out) = run(bin("sabotage").arg("model_panics::"));
    assert!(!ok);
    assert!(
        out.contains("`device` panicked: model bug: request 2 was never expected"),
        "{out}"
    );
    assert!(
        out.contains("test result: FAILED"),
        "the binary ran to its summary: {out}"
    );
}

#[test]
#[allow(clippy::disallowed_methods)] // host-side: real processes killed after real delays
fn a_process_killed_mid_write_leaves_no_partial_regression_file() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let seeds = planted_seeds();
    // Kill writers at many different moments (deterministic delays, no randomness).
    for (i, seed) in seeds.iter().take(24).enumerate() {
        let mut child = bin("planted")
            .args(["--exact", seed])
            .env("CALAMETRA_REGRESSIONS", &regs)
            .stdout(std::process::Stdio::null())
            .spawn()
            .unwrap();
        std::thread::sleep(std::time::Duration::from_micros(500 * (i as u64 % 12)));
        let _ = child.kill();
        let _ = child.wait();
    }
    let dir = regs.join("planted").join("status_long");
    for p in regression_files(&dir) {
        let text = std::fs::read_to_string(&p).unwrap();
        let v: Result<serde_json::Value, _> = serde_json::from_str(&text);
        assert!(v.is_ok(), "partial file {}: {text}", p.display());
    }
    // What the harness lists is only complete files: temporaries are never read as cases.
    let (ok, out) = run(bin("planted")
        .args(["--list"])
        .env("CALAMETRA_REGRESSIONS", &regs));
    assert!(ok, "{out}");
    assert!(!out.contains(".calametra-"), "{out}");
}

/// The test binary's own outputs never replace a symlink, a FIFO or a directory with a regular
/// file (issue 41): the trial or the binary fails naming what is there, and it is left as it was.
#[cfg(unix)]
#[test]
fn the_binarys_outputs_never_replace_a_symlink_a_fifo_or_a_directory() {
    let tmp = tempfile::tempdir().unwrap();
    let target = tmp.path().join("precious.txt");
    std::fs::write(&target, "keep me").unwrap();
    let link = tmp.path().join("link.jsonl");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let fifo = tmp.path().join("fifo.jsonl");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    for (var, path, says) in [
        (
            "CALAMETRA_TRACE_OUT",
            &link,
            "it is a symlink, which an output never replaces",
        ),
        (
            "CALAMETRA_TRACE_OUT",
            &fifo,
            "it is a FIFO, socket or device",
        ),
        ("CALAMETRA_CASE_STATES", &link, "it is a symlink"),
        (
            "CALAMETRA_CASE_STATES",
            &tmp.path().to_path_buf(),
            "it is a directory",
        ),
    ] {
        let (ok, out) = run(bin("planted")
            .args(["--exact", "status_long::baseline"])
            .env(var, path));
        assert!(!ok, "{var}={}: {out}", path.display());
        assert!(out.contains(says), "{var}={}: {out}", path.display());
    }
    // A dangling CALAMETRA_SCANOUT symlink: a clear error, not "File exists".
    let dangling = tmp.path().join("pictures");
    std::os::unix::fs::symlink(tmp.path().join("nowhere"), &dangling).unwrap();
    let (ok, out) = run(bin("planted")
        .args(["--exact", "status_long::baseline"])
        .env("CALAMETRA_SCANOUT", &dangling));
    assert!(!ok && out.contains("a symlink to nothing"), "{out}");
    assert_eq!(std::fs::read_to_string(&link).unwrap(), "keep me");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());
}
