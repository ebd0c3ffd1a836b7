//! Sweeps as a user runs them: `CALAMETRA_SWEEP=<budget>` on a test binary with a planted bug,
//! its closing report and summary, partitions merged by `calametra sweep-report`, and the
//! failure found saved like any other case.

use calametra::sweep::{merge, Summary};
use std::path::Path;
use std::process::Command;

fn planted(dir: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_planted"));
    for v in [
        "CALAMETRA_SCHEDULES",
        "CALAMETRA_SEED",
        "CALAMETRA_REPLAY",
        "CALAMETRA_TEST_FIXED",
        "CALAMETRA_SWEEP_PARTITION",
        "CALAMETRA_SWEEP_THREADS",
    ] {
        c.env_remove(v);
    }
    c.env("CALAMETRA_REGRESSIONS", dir.join("regs"));
    c
}

fn run(c: &mut Command) -> (bool, String) {
    let o = c.output().expect("run the planted binary");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

fn summary(path: &Path) -> Summary {
    let text = std::fs::read_to_string(path).expect("the sweep wrote its summary");
    Summary::parse(path, &text).expect("a summary that parses")
}

/// The signatures a summary met, with each one's kept seed and run count, per scenario.
fn signatures(s: &Summary) -> Vec<(String, String, String, u64)> {
    let mut v = Vec::new();
    for sc in &s.scenarios {
        for (sig, g) in &sc.tally.signatures {
            v.push((sc.scenario.clone(), sig.clone(), g.seed.clone(), g.runs));
        }
    }
    v
}

#[test]
fn a_sweep_finds_the_planted_bug_reports_it_and_saves_the_shortest_case() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("sweep.json");
    let (ok, text) = run(planted(tmp.path())
        .env("CALAMETRA_SWEEP", "300")
        .env("CALAMETRA_SWEEP_SUMMARY", &out)
        .arg("status_long"));
    assert!(!ok, "a sweep that meets a failure fails:\n{text}");
    assert!(
        text.contains("test status_long::sweep ... FAILED"),
        "{text}"
    );
    for line in [
        "calametra sweep of calametra-tests --test planted (partition 1/1; base seed 0x0): 300 runs in",
        "status_long: 300 runs, 1 failure signature",
        "invariant `belief_matches_connection` broke",
        "shortest: seed::0x",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    let s = summary(&out);
    assert_eq!(s.runs(), 300);
    let sig = signatures(&s);
    assert_eq!(sig.len(), 1, "{sig:?}");
    // The kept run's case is saved like any other, in the target's directory.
    let dir = tmp.path().join("regs").join("planted").join("status_long");
    let files: Vec<_> = std::fs::read_dir(&dir).unwrap().flatten().collect();
    assert_eq!(files.len(), 1, "one case for the one signature");
    assert!(
        text.contains(&format!("found by:  status_long::seed::{}", sig[0].2)),
        "{text}"
    );
}

#[test]
fn two_partitions_merge_into_the_signatures_of_one_unpartitioned_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    let whole = tmp.path().join("whole.json");
    run(planted(tmp.path())
        .env("CALAMETRA_REGRESSIONS", "off")
        .env("CALAMETRA_SWEEP", "200")
        .env("CALAMETRA_SWEEP_SUMMARY", &whole)
        .arg("status_long"));
    let mut parts = Vec::new();
    for k in 1..=2 {
        let p = tmp.path().join(format!("part{k}.json"));
        // Each partition runs half the runs: together the same 200 seeds.
        run(planted(tmp.path())
            .env("CALAMETRA_REGRESSIONS", "off")
            .env("CALAMETRA_SWEEP", "100")
            .env("CALAMETRA_SWEEP_PARTITION", format!("{k}/2"))
            .env("CALAMETRA_SWEEP_THREADS", "1")
            .env("CALAMETRA_SWEEP_SUMMARY", &p)
            .arg("status_long"));
        parts.push(p);
    }
    let merged = merge(parts.iter().map(|p| summary(p)).collect()).unwrap();
    let whole = summary(&whole);
    assert_eq!(merged.runs(), whole.runs());
    assert_eq!(signatures(&merged), signatures(&whole));
    assert_eq!(merged.partitions, vec!["1/2", "2/2"]);
    assert_eq!(
        merged.scenarios[0].tally.marks,
        whole.scenarios[0].tally.marks
    );
}

#[test]
fn a_time_budget_stops_and_reports_what_it_ran() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.json");
    let (_, text) = run(planted(tmp.path())
        .env("CALAMETRA_REGRESSIONS", "off")
        .env("CALAMETRA_SWEEP", "1s")
        .env("CALAMETRA_SWEEP_SUMMARY", &out)
        .arg("status_long"));
    let s = summary(&out);
    assert!(s.runs() > 0, "{text}");
    assert_eq!(s.budget, "1s");
    assert!(text.contains("runs/s"), "{text}");
}

#[test]
fn bad_sweep_settings_are_clear_errors() {
    let tmp = tempfile::tempdir().unwrap();
    for (var, val, says) in [
        ("CALAMETRA_SWEEP", "10x", "CALAMETRA_SWEEP=`10x`"),
        (
            "CALAMETRA_SWEEP_PARTITION",
            "3/2",
            "CALAMETRA_SWEEP_PARTITION=`3/2`",
        ),
        (
            "CALAMETRA_SWEEP_THREADS",
            "0",
            "CALAMETRA_SWEEP_THREADS=`0`",
        ),
    ] {
        let mut c = planted(tmp.path());
        c.env("CALAMETRA_SWEEP", "10").env(var, val);
        let o = c.output().unwrap();
        let err = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(2), "{var}={val}: {err}");
        assert!(err.contains(says), "{var}={val}: {err}");
    }
}
