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
        "CALAMETRA_SWEEP_GUIDE",
        "CALAMETRA_SWEEP_CORPUS",
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
    // The find's name is a trial that reproduces it: the sweep runs a seed as its `seed::`
    // trial does (the baseline's horizon and task choices), not a run of its own.
    let trial = format!("status_long::seed::{}", sig[0].2);
    let (ok, again) = run(planted(tmp.path())
        .env("CALAMETRA_REGRESSIONS", "off")
        .args(["--exact", &trial]));
    assert!(!ok, "`--exact {trial}` passes:\n{again}");
    assert!(
        again.contains(&format!("test {trial} ... FAILED"))
            && again.contains("invariant `belief_matches_connection` broke"),
        "{again}"
    );
}

/// A sweep of `runs` (whole, or in two partitions of half as many each) with guidance on
/// (the default) or off (`CALAMETRA_SWEEP_GUIDE=0`); the whole summary and the two merged.
fn whole_and_merged(dir: &Path, runs: u64, guide: bool) -> (Summary, Summary) {
    let sweep = |budget: u64, partition: Option<u64>, out: &Path| {
        let mut c = planted(dir);
        c.env("CALAMETRA_REGRESSIONS", "off")
            .env("CALAMETRA_SWEEP", budget.to_string())
            .env("CALAMETRA_SWEEP_SUMMARY", out)
            .env("CALAMETRA_SWEEP_GUIDE", if guide { "1" } else { "0" })
            .arg("status_long");
        if let Some(k) = partition {
            c.env("CALAMETRA_SWEEP_PARTITION", format!("{k}/2"))
                .env("CALAMETRA_SWEEP_THREADS", "1");
        }
        run(&mut c);
    };
    let whole = dir.join(format!("whole-{guide}.json"));
    sweep(runs, None, &whole);
    let mut parts = Vec::new();
    for k in 1..=2 {
        let p = dir.join(format!("part{k}-{guide}.json"));
        sweep(runs / 2, Some(k), &p);
        parts.push(p);
    }
    let merged = merge(parts.iter().map(|p| summary(p)).collect()).unwrap();
    (summary(&whole), merged)
}

#[test]
fn two_partitions_merge_into_the_signatures_of_one_unpartitioned_sweep() {
    let tmp = tempfile::tempdir().unwrap();
    // Seeds alone: each partition runs half the seeds, together the same 200, so the merged
    // report is the whole sweep's, run for run.
    let (whole, merged) = whole_and_merged(tmp.path(), 200, false);
    assert_eq!(merged.runs(), whole.runs());
    assert_eq!(signatures(&merged), signatures(&whole));
    assert_eq!(merged.partitions, vec!["1/2", "2/2"]);
    assert_eq!(
        merged.scenarios[0].tally.marks,
        whole.scenarios[0].tally.marks
    );
    // Guided (the default): the partitions' fresh seeds and mutants' indexes are disjoint
    // shares of one sequence, and they merge into one report of as many runs with the same
    // failure signatures; what each partition mutates is its own corpus, so the counts of
    // runs a signature met may differ from one unpartitioned sweep's.
    let (whole, merged) = whole_and_merged(tmp.path(), 200, true);
    assert_eq!(merged.runs(), whole.runs());
    assert_eq!(merged.partitions, vec!["1/2", "2/2"]);
    let keys = |s: &Summary| -> Vec<(String, String)> {
        signatures(s)
            .into_iter()
            .map(|(sc, sig, _, _)| (sc, sig))
            .collect()
    };
    assert_eq!(keys(&merged), keys(&whole));
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

#[test]
fn a_sweep_whose_finds_cannot_be_saved_fails_and_prints_them() {
    let tmp = tempfile::tempdir().unwrap();
    // A regressions directory that cannot be made (a regular file is in the way): even as
    // root, nothing can be saved there.
    let blocker = tmp.path().join("blocker");
    std::fs::write(&blocker, "a file").unwrap();
    let (ok, text) = run(planted(tmp.path())
        .env("CALAMETRA_REGRESSIONS", blocker.join("regs"))
        .env("CALAMETRA_SWEEP", "200")
        .env("CALAMETRA_SWEEP_SUMMARY", tmp.path().join("s.json"))
        .args(["--exact", "status_found::sweep"]));
    // status_found expects its failure: the find passes the sweep only when it is kept.
    assert!(!ok, "a find that cannot be saved fails the sweep:\n{text}");
    assert!(text.contains("could not save 1 find"), "{text}");
    assert!(
        text.contains("\"events\""),
        "the case is on the screen:\n{text}"
    );
}

#[test]
fn a_sweep_checks_its_outputs_and_its_selection_before_spending_the_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = tmp.path().join("a-directory");
    std::fs::create_dir_all(&dir).unwrap();
    let file = tmp.path().join("a-file");
    std::fs::write(&file, "x").unwrap();
    let summary_file = tmp.path().join("s.json");
    let cases: Vec<(&str, &Path, Vec<&str>, &str)> = vec![
        (
            "CALAMETRA_SWEEP_SUMMARY",
            &dir,
            vec![],
            "it is a directory, which an output never replaces",
        ),
        ("CALAMETRA_SWEEP_CORPUS", &file, vec![], "not a directory"),
        (
            "CALAMETRA_SWEEP_SUMMARY",
            &summary_file,
            vec!["no_such_scenario"],
            "the sweep sweeps nothing: no `<scenario>::sweep` trial matches the filter",
        ),
        (
            "CALAMETRA_SWEEP_SUMMARY",
            &summary_file,
            vec!["--ignored"],
            "sweep trials are never ignored",
        ),
    ];
    for (var, val, args, says) in cases {
        let o = planted(tmp.path())
            .env("CALAMETRA_SWEEP", "10m")
            .env(var, val)
            .args(&args)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        );
        assert_eq!(o.status.code(), Some(2), "{var} {args:?}: {text}");
        assert!(text.contains(says), "{var} {args:?}: {text}");
        assert!(!text.contains("::sweep ..."), "no trial ran: {text}");
    }
    assert!(dir.is_dir() && std::fs::read(&file).unwrap() == b"x");
}

#[test]
fn a_skipped_scenario_leaves_its_share_of_a_time_budget_to_the_others() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("t.json");
    let (_, text) = run(planted(tmp.path())
        .env("CALAMETRA_REGRESSIONS", "off")
        .env("CALAMETRA_SWEEP", "2s")
        .env("CALAMETRA_SWEEP_SUMMARY", &out)
        .args(["--skip", "status_found"]));
    let s = summary(&out);
    assert_eq!(s.scenarios.len(), 1, "{text}");
    // A time budget stops a scenario only once its share has passed: the one scenario swept
    // gets all of it (before, half went to the skipped one and was never spent).
    assert!(s.wall_s >= 1.9, "{} s of 2s spent:\n{text}", s.wall_s);
}

#[cfg(unix)]
#[test]
#[allow(clippy::disallowed_methods)] // waits on the wall clock for the sweep to get going
fn a_sweep_stopped_by_sigterm_keeps_its_finds_and_writes_a_partial_summary() {
    let tmp = tempfile::tempdir().unwrap();
    let out = tmp.path().join("partial.json");
    let child = planted(tmp.path())
        .env("CALAMETRA_SWEEP", "10m")
        .env("CALAMETRA_SWEEP_THREADS", "1")
        .env("CALAMETRA_SWEEP_SUMMARY", &out)
        .arg("status_long")
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Until the sweep has run for a while (its trial has started), then the signal.
    std::thread::sleep(std::time::Duration::from_secs(3));
    let killed = Command::new("kill")
        .args(["-TERM", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(killed.success());
    let o = child.wait_with_output().unwrap();
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.status.code(), Some(128 + 15), "{text}");
    let s = summary(&out);
    assert!(s.interrupted, "{text}");
    assert!(s.runs() > 0, "{text}");
    assert!(text.contains("interrupted: stopped by a signal"), "{text}");
    let sig = signatures(&s);
    assert_eq!(sig.len(), 1, "the planted bug was met: {sig:?}\n{text}");
    let dir = tmp.path().join("regs").join("planted").join("status_long");
    let files: Vec<_> = std::fs::read_dir(&dir)
        .map(|d| d.flatten().collect())
        .unwrap_or_default();
    assert_eq!(files.len(), 1, "its find is saved:\n{text}");
}

/// A known findings file (`CALAMETRA_SWEEP_KNOWN`): a signature it lists for the scenario is
/// met without failing the sweep, still saved, and the report says whose bug it is; the same
/// signature listed for another scenario, or not listed, fails the sweep as before; a bad file
/// is an error naming the variable, the file and the line before any run.
#[test]
fn a_known_finding_passes_the_sweep_and_the_report_says_whose_bug_it_is() {
    let tmp = tempfile::tempdir().unwrap();
    let known = tmp.path().join("sweep.known");
    let sweep = |file: &str, out: &Path| {
        std::fs::write(&known, file).unwrap();
        run(planted(tmp.path())
            .env("CALAMETRA_SWEEP", "300")
            .env("CALAMETRA_SWEEP_SUMMARY", out)
            .env("CALAMETRA_SWEEP_KNOWN", &known)
            .arg("status_long"))
    };
    let out = tmp.path().join("known.json");
    let (ok, text) = sweep(
        "# package | scenario | signature starts with | whose bug\n\
         calametra-tests | status_long | invariant `belief_matches_connection` broke | the status device's planted bug (this test's own)\n",
        &out,
    );
    assert!(ok, "a sweep meeting only a known finding passes:\n{text}");
    assert!(
        text.contains("test status_long::sweep ... ok")
            && text.contains("known: the status device's planted bug (this test's own)"),
        "{text}"
    );
    let s = summary(&out);
    let sc = &s.scenarios[0];
    assert_eq!(sc.known.len(), 1, "{:?}", sc.known);
    assert!(sc.known.keys().all(|k| sc.tally.signatures.contains_key(k)));
    let dir = tmp.path().join("regs").join("planted").join("status_long");
    assert_eq!(
        std::fs::read_dir(&dir).unwrap().count(),
        1,
        "the known find is saved"
    );

    // Listed for another scenario, another package, or another signature: not known.
    for other in [
        "calametra-tests | status_found | invariant `belief_matches_connection` broke | x\n",
        "other-package | status_long | invariant `belief_matches_connection` broke | x\n",
        "* | status_long | invariant `another` broke | x\n",
    ] {
        let (ok, text) = sweep(other, &tmp.path().join("other.json"));
        assert!(!ok, "{other}: the sweep passes:\n{text}");
        assert!(
            text.contains("test status_long::sweep ... FAILED") && !text.contains("known: "),
            "{text}"
        );
    }

    // `*` as the package is any package.
    let (ok, text) = sweep(
        "* | status_long | invariant `belief_matches_connection` | planted\n",
        &tmp.path().join("any.json"),
    );
    assert!(ok && text.contains("known: planted"), "{text}");

    // A bad line: refused before anything runs, naming the variable, the file and the line.
    let (ok, text) = sweep(
        "# fine\n\nstatus_long | the bug\n",
        &tmp.path().join("bad.json"),
    );
    assert!(!ok);
    assert!(
        text.contains("CALAMETRA_SWEEP_KNOWN")
            && text.contains("sweep.known")
            && text.contains("line 3")
            && text.contains("expected four fields"),
        "{text}"
    );
    assert!(
        !tmp.path().join("bad.json").exists(),
        "nothing ran:\n{text}"
    );
}

/// An `expect` scenario whose bug a sweep did not reach: a sweep of a number of runs fails (the
/// same runs on every machine), a time budget passes and its report says the bug was not
/// reached (how many runs fit is the host's speed; the `finds::` trial pins the bug).
#[test]
fn an_expected_bug_not_reached_fails_a_run_budget_and_is_reported_under_a_time_budget() {
    let tmp = tempfile::tempdir().unwrap();
    let fixed = |budget: &str| {
        run(planted(tmp.path())
            .env("CALAMETRA_TEST_FIXED", "1")
            .env("CALAMETRA_SWEEP", budget)
            .env("CALAMETRA_SWEEP_SUMMARY", tmp.path().join("s.json"))
            .arg("status_found"))
    };
    let (ok, text) = fixed("20");
    assert!(!ok, "{text}");
    assert!(
        text.contains("the sweep (20 runs) did not break invariant `belief_matches_connection`"),
        "{text}"
    );
    let (ok, text) = fixed("100ms");
    assert!(ok, "{text}");
    assert!(
        text.contains("expected invariant `belief_matches_connection` not broken in this sweep"),
        "{text}"
    );
    let s = summary(&tmp.path().join("s.json"));
    assert_eq!(
        s.scenarios[0].expect.as_deref(),
        Some("belief_matches_connection")
    );
}
