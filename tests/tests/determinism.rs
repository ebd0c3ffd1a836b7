//! `calametra determinism` on a scenario that leaks `HashMap` order (`src/bin/leaky.rs`): 50
//! runs of one seed, two at a time. The reference run and every divergent run are kept as
//! directories (command, status, output, trace, summary, and for a divergent run the diff
//! against the reference, naming the record and field where the order leaked); matching runs
//! are deleted; the summary's counts and run list match the directories present, and
//! `--check` notices when they stop matching.
//!
//! The `calametra` tool is built once with `cargo build --message-format=json`
//! (`support::calametra_tool`).

mod support;

use serde_json::Value;
use std::path::Path;
use std::process::Command;
use support::{calametra_tool as tool, root, run_code as run};

fn json(p: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(p).unwrap()).unwrap()
}

fn run_dirs(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("run-"))
        .collect();
    v.sort();
    v
}

#[test]
fn fifty_runs_of_a_hashmap_leak_keep_the_reference_and_each_divergent_run() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("leaky");
    let leaky = env!("CARGO_BIN_EXE_leaky");
    let (code, text) = run(Command::new(tool()).args([
        "determinism",
        "--runs",
        "50",
        "--parallel",
        "2",
        "--out",
        out.to_str().unwrap(),
        "--",
        leaky,
        "7",
    ]));
    eprintln!("{text}");
    assert_eq!(code, 1, "some runs diverge: {text}");

    // The summary's counts and run list are the directories present.
    let summary = json(&out.join("summary"));
    let config = json(&out.join("config"));
    assert_eq!(config["runs"], 50);
    assert_eq!(config["parallel"], 2);
    assert_eq!(summary["runs"], 50);
    let divergent = summary["divergent"].as_u64().unwrap() as usize;
    let identical = summary["identical"].as_u64().unwrap() as usize;
    assert_eq!(summary["unusable"], 0);
    assert!(divergent > 0, "the leak shows in 50 processes: {text}");
    assert_eq!(1 + identical + divergent, 50);
    let kept: Vec<String> = summary["kept"]
        .as_array()
        .unwrap()
        .iter()
        .map(|k| k["run"].as_str().unwrap().to_string())
        .collect();
    let present = run_dirs(&out);
    assert_eq!(kept, present, "the summary lists the directories present");
    assert_eq!(present.len(), 1 + divergent);
    assert_eq!(summary["deleted"].as_array().unwrap().len(), identical);
    for d in summary["deleted"].as_array().unwrap() {
        assert!(!out.join(d.as_str().unwrap()).exists());
    }
    assert!(
        text.contains(&format!(
            "50 runs: 1 reference, {identical} identical (deleted), {divergent} divergent, 0 unusable; the summary lists exactly the {} run directories present",
            1 + divergent
        )),
        "{text}"
    );
    assert!(
        text.contains(&format!(
            "{divergent} of 49 runs diverge from the reference"
        )),
        "{text}"
    );

    // The reference run: the exact command, its status, output, full trace and summary.
    let reference = out.join("run-001");
    let command = std::fs::read_to_string(reference.join("command")).unwrap();
    assert!(
        command.contains("CALAMETRA_TRACE_OUT=") && command.contains(&format!("{leaky} 7")),
        "{command}"
    );
    assert_eq!(
        std::fs::read_to_string(reference.join("status")).unwrap(),
        "exit 0\n"
    );
    assert!(std::fs::read_to_string(reference.join("stdout"))
        .unwrap()
        .contains("leaky: hash_order seed 0x7: sha256:"));
    let trace = std::fs::read_to_string(reference.join("trace.jsonl")).unwrap();
    assert!(trace.lines().count() > 10 && trace.contains("\"kind\":\"summary\""));
    assert_eq!(json(&reference.join("summary"))["role"], "reference");
    assert!(!reference.join("divergence").exists());

    // Each divergent run: its diff against the reference names where the order leaked.
    for run in &present[1..] {
        let dir = out.join(run);
        let s = json(&dir.join("summary"));
        assert_eq!(s["role"], "divergent", "{run}");
        assert_eq!(s["status"], "exit 0");
        let report = std::fs::read_to_string(dir.join("divergence")).unwrap();
        assert!(
            report.contains(
                "first divergent record: #2 (deterministic index), fields that differ: data.mark"
            ),
            "{run}: {report}"
        );
        assert!(
            report.lines().any(|l| l.starts_with("  * data.mark ")
                && l.contains("\"brightness\"")
                && l.contains("\"contrast\"")),
            "{run}: {report}"
        );
        assert!(
            report.contains("last matching record: #1"),
            "{run}: {report}"
        );
        assert!(dir.join("trace.jsonl").is_file() && dir.join("command").is_file());
    }

    // `--check` agrees, and notices a run directory gone missing.
    let (code, checked) =
        run(Command::new(tool()).args(["determinism", "--check", out.to_str().unwrap()]));
    assert_eq!(code, 0, "{checked}");
    std::fs::remove_dir_all(out.join(&present[1])).unwrap();
    let (code, checked) =
        run(Command::new(tool()).args(["determinism", "--check", out.to_str().unwrap()]));
    assert_eq!(code, 2, "{checked}");
    assert!(
        checked.contains("are not the run directories present"),
        "{checked}"
    );
}

/// A deterministic program: every run matches, every run but the reference is deleted.
#[test]
fn identical_runs_are_deleted_and_exit_0() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("same");
    let trace = tmp.path().join("fixed.jsonl");
    std::fs::write(
        &trace,
        "{\"seq\":0,\"t_ns\":0,\"kind\":\"task\",\"actor\":\"a\",\"deterministic\":true,\"data\":{}}\n",
    )
    .unwrap();
    let (code, text) = run(Command::new(tool()).args([
        "determinism",
        "--runs",
        "4",
        "--out",
        out.to_str().unwrap(),
        "--",
        "sh",
        "-c",
        &format!("cp {} \"$CALAMETRA_TRACE_OUT\"", trace.display()),
    ]));
    assert_eq!(code, 0, "{text}");
    assert_eq!(run_dirs(&out), vec!["run-001".to_string()]);
    assert!(
        text.contains("4 runs: 1 reference, 3 identical (deleted), 0 divergent, 0 unusable"),
        "{text}"
    );
    // A program that writes no trace is unusable input.
    let (code, text) = run(Command::new(tool()).args([
        "determinism",
        "--runs",
        "2",
        "--out",
        tmp.path().join("none").to_str().unwrap(),
        "--",
        "true",
    ]));
    assert_eq!(code, 2, "{text}");
    assert!(text.contains("the reference run"), "{text}");
}

/// The test-binary route: a harness binary's seed trial run N times (`nested::inner` pins seed
/// 0x2a, so the binary lists that trial). The binary is built once
/// and run directly with `--exact <scenario>::seed::<hex> --include-ignored`,
/// `CALAMETRA_REGRESSIONS=off` and `CALAMETRA_TRACE_OUT`. Its trial must write its run's trace
/// there, which the harness does not do yet (the harness side is the lead's): until then the
/// runner stops at the reference run, saying so.
#[test]
fn a_harness_seed_trial_runs_as_its_exact_trial() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("demo");
    let (code, text) = run(Command::new(tool()).current_dir(root()).args([
        "determinism",
        "--package",
        "calametra-tests",
        "--bin",
        "demo",
        "--scenario",
        "nested::inner",
        "--seed",
        "0x2a",
        "--runs",
        "3",
        "--out",
        out.to_str().unwrap(),
    ]));
    let command = std::fs::read_to_string(out.join("run-001/command")).unwrap();
    assert!(
        command.contains("CALAMETRA_REGRESSIONS=off")
            && command.contains("--exact nested::inner::seed::0x2a --include-ignored")
            && command.contains(&format!("cd {}", root().join("tests").display())),
        "{command}"
    );
    assert!(std::fs::read_to_string(out.join("run-001/status"))
        .unwrap()
        .contains("trial passed"));
    // The harness writes CALAMETRA_TRACE_OUT: three identical runs, the reference kept.
    assert!(out.join("run-001/trace.jsonl").exists(), "{text}");
    assert_eq!(code, 0, "{text}");
    assert_eq!(run_dirs(&out), vec!["run-001".to_string()]);
}
