//! Saved cases as a user meets them: the fixture targets `hw-loop` and `hw_twin` (one source,
//! `tests/fixture/hw_loop_case.rs`, with bugs planted by `HW_LOOP_*` knobs) run as built test
//! executables, with `--test-threads`, several processes at once, `--exact`, `--format json`,
//! a pasted replay command, nextest's JUnit report and `calametra review`.
//!
//! The executables are found by building them once with `cargo test --no-run
//! --message-format=json` (and `cargo build` for the `calametra` binary); every run writes its
//! cases into a fresh temporary `CALAMETRA_REGRESSIONS`, never into the repository.

mod support;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::{calametra_tool, cargo, cargo_path, clean, executables, root, run};

/// The fixture targets' test executables, built once.
fn fixtures() -> &'static BTreeMap<String, PathBuf> {
    static EXES: OnceLock<BTreeMap<String, PathBuf>> = OnceLock::new();
    EXES.get_or_init(|| {
        let mut c = cargo();
        c.args([
            "test",
            "--no-run",
            "-p",
            "calametra-tests",
            "--test",
            "hw-loop",
            "--test",
            "hw_twin",
        ]);
        let m = executables(c);
        assert!(
            m.contains_key("hw-loop") && m.contains_key("hw_twin"),
            "{m:?}"
        );
        m
    })
}

/// A fixture target's executable, to run with `regs` as `CALAMETRA_REGRESSIONS`.
fn fixture(target: &str, regs: &Path) -> Command {
    let mut c = clean(Command::new(&fixtures()[target]));
    c.env("CALAMETRA_REGRESSIONS", regs);
    c
}

/// Every file under `dir` with its bytes (a FIFO or other special file: a marker, unread), by
/// path relative to `dir`.
fn tree(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    fn walk(base: &Path, dir: &Path, out: &mut BTreeMap<PathBuf, Vec<u8>>) {
        let Ok(rd) = std::fs::read_dir(dir) else {
            return;
        };
        for e in rd.flatten() {
            let p = e.path();
            let ft = e.file_type().unwrap();
            if ft.is_dir() {
                walk(base, &p, out);
                continue;
            }
            let rel = p.strip_prefix(base).unwrap().to_path_buf();
            let bytes = if ft.is_file() {
                std::fs::read(&p).unwrap()
            } else {
                b"(not a regular file)".to_vec()
            };
            out.insert(rel, bytes);
        }
    }
    let mut out = BTreeMap::new();
    walk(dir, dir, &mut out);
    out
}

/// Every `N event(s)` figure a run printed: failure screens (`delta 9 -> 4 events`), one-line
/// reports (`this trial's minimal run: 3 events`), kept cases and the summary.
fn event_figures(text: &str) -> Vec<usize> {
    let mut v = Vec::new();
    for line in text.lines() {
        let words: Vec<&str> = line.split_whitespace().collect();
        for w in words.windows(2) {
            if w[1].starts_with("event") {
                if let Ok(n) = w[0].parse() {
                    v.push(n);
                }
            }
        }
    }
    v
}

/// The saved case files under `regs`, parsed.
fn cases(regs: &Path) -> BTreeMap<PathBuf, serde_json::Value> {
    tree(regs)
        .into_iter()
        .map(|(p, bytes)| {
            let v = serde_json::from_slice(&bytes)
                .unwrap_or_else(|e| panic!("{}: not a complete case: {e}", p.display()));
            (p, v)
        })
        .collect()
}

#[test]
fn saved_files_are_byte_identical_whatever_the_threads_or_processes_and_hold_the_shortest_case() {
    let tmp = tempfile::tempdir().unwrap();
    let mut trees = Vec::new();
    let mut figures_seen = std::collections::BTreeSet::new();
    for threads in ["1", "8"] {
        for i in 0..5 {
            let regs = tmp.path().join(format!("t{threads}-{i}"));
            let (ok, out) = run(fixture("hw-loop", &regs)
                .args(["--test-threads", threads])
                .env("HW_LOOP_BUG_A", "1"));
            assert!(!ok, "the planted bug fails trials:\n{out}");
            let saved = cases(&regs);
            assert_eq!(saved.len(), 1, "one signature, one file: {saved:?}");
            let (path, case) = saved.iter().next().unwrap();
            assert!(
                path.starts_with("hw-loop/store_once"),
                "kept per target and scenario: {}",
                path.display()
            );
            let figures = event_figures(&out);
            figures_seen.extend(figures.iter().copied());
            let shortest = figures.iter().min().copied();
            // The events a screen counts: anchors (where an event happened, relative to what
            // it follows) go with their events.
            let events = case["events"].as_array().unwrap();
            let counted = events.iter().filter(|e| e["event"] != "anchor").count();
            assert_eq!(
                Some(counted),
                shortest,
                "the file holds the shortest case any trial printed ({figures:?}):\n{out}"
            );
            trees.push(((threads, i), tree(&regs)));
        }
    }
    assert!(
        figures_seen.len() >= 3,
        "trials find the bug with minimal runs of different lengths: {figures_seen:?}"
    );
    // Four processes at once, one directory.
    let shared = tmp.path().join("shared");
    let logs = tmp.path().join("logs");
    std::fs::create_dir(&logs).unwrap();
    let kids: Vec<_> = (0..4)
        .map(|i| {
            let log = std::fs::File::create(logs.join(format!("{i}.txt"))).unwrap();
            let child = fixture("hw-loop", &shared)
                .env("HW_LOOP_BUG_A", "1")
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap();
            (i, child)
        })
        .collect();
    let mut figures = Vec::new();
    for (i, mut k) in kids {
        assert!(!k.wait().unwrap().success());
        let out = std::fs::read_to_string(logs.join(format!("{i}.txt"))).unwrap();
        assert!(!out.contains("panicked"), "{out}");
        figures.extend(event_figures(&out));
    }
    let saved = cases(&shared);
    assert_eq!(
        saved.values().next().map(|c| {
            let events = c["events"].as_array().unwrap();
            events.iter().filter(|e| e["event"] != "anchor").count()
        }),
        figures.iter().min().copied(),
        "four processes at once keep the shortest case any of them printed ({figures:?})"
    );
    trees.push((("4 processes", 0), tree(&shared)));
    let (first, want) = &trees[0];
    for (who, t) in &trees[1..] {
        assert_eq!(
            t, want,
            "{who:?} left other files than {first:?} (no temporaries, same bytes)"
        );
    }
}

/// The trials a run ran, from libtest's `test NAME ... RESULT` lines.
fn ran(text: &str) -> Vec<String> {
    let mut v: Vec<String> = text
        .lines()
        .filter_map(|l| l.strip_prefix("test "))
        .filter_map(|l| l.split_once(" ... "))
        .map(|(name, _)| name.trim().to_string())
        .collect();
    v.sort();
    v
}

/// Saves the cases of the scenarios whose bugs `knobs` plant into `regs` with `target`, and
/// returns them by file (relative to `regs`).
fn save(target: &str, regs: &Path, knobs: &[&str]) -> BTreeMap<PathBuf, serde_json::Value> {
    let mut c = fixture(target, regs);
    for k in knobs {
        c.env(k, "1");
    }
    let (ok, out) = run(&mut c);
    assert!(!ok, "{knobs:?} plant bugs that fail trials:\n{out}");
    cases(regs)
}

/// The one saved case of `scenario` under `regs/target`: its path and id.
fn case_of(
    saved: &BTreeMap<PathBuf, serde_json::Value>,
    target: &str,
    scenario: &str,
) -> (PathBuf, String) {
    let dir = Path::new(target).join(scenario);
    let mut found = saved.iter().filter(|(p, _)| p.parent() == Some(&dir));
    let (p, v) = found
        .next()
        .unwrap_or_else(|| panic!("no case in {}: {saved:?}", dir.display()));
    assert!(found.next().is_none(), "one case in {}", dir.display());
    (p.clone(), v["id"].as_str().unwrap().to_string())
}

#[test]
fn a_case_saved_by_one_target_is_not_replayed_by_another_and_a_copy_there_fails_as_foreign() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let saved = save("hw-loop", &regs, &["HW_LOOP_BUG_A"]);
    assert_eq!(saved.len(), 1, "{saved:?}");
    let (file, id) = case_of(&saved, "hw-loop", "store_once");
    let case = &saved[&file];
    assert_eq!(case["package"], "calametra-tests");
    assert_eq!(case["target"], "hw-loop", "the target as Cargo spells it");
    assert_eq!(case["scenario"], "store_once");

    // hw_twin has a scenario `store_once` too, and reads the same CALAMETRA_REGRESSIONS.
    let (ok, list) = run(fixture("hw_twin", &regs).arg("--list"));
    assert!(ok, "{list}");
    assert!(list.contains("store_once::baseline: test"), "{list}");
    assert!(!list.contains("regression::"), "{list}");
    let (ok, out) = run(&mut fixture("hw_twin", &regs));
    assert!(ok, "{out}");
    assert!(
        !ran(&out).iter().any(|t| t.contains("regression::")),
        "{out}"
    );
    let before = tree(&regs);

    // A copy of hw-loop's file in hw_twin's directory is hw-loop's case still: foreign there.
    let copy = regs.join("hw_twin/store_once").join(format!("{id}.json"));
    std::fs::create_dir_all(copy.parent().unwrap()).unwrap();
    std::fs::copy(regs.join(&file), &copy).unwrap();
    let trial = format!("store_once::regression::{id}");
    let states = tmp.path().join("states.jsonl");
    // Run, a fixed driver would make it `fixed` and a buggy one `fails`: it is neither.
    for bug in ["0", "1"] {
        let (ok, out) = run(fixture("hw_twin", &regs)
            .args(["--exact", &trial])
            .env("HW_LOOP_BUG_A", bug)
            .env("CALAMETRA_CASE_STATES", &states));
        assert!(!ok, "{out}");
        assert_eq!(ran(&out), [trial.as_str()], "{out}");
        for needle in [
            format!("{}: foreign case", copy.display()),
            "target `hw-loop`, not `hw_twin`".to_string(),
            "package `calametra-tests`".to_string(),
            "it is not run as this one's case".to_string(),
        ] {
            assert!(out.contains(&needle), "`{needle}` in:\n{out}");
        }
        assert!(
            !out.contains("fixed") && !out.contains("still fails"),
            "not replayed:\n{out}"
        );
        let text = std::fs::read_to_string(&states).unwrap();
        let states: Vec<serde_json::Value> = text
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .filter(|v: &serde_json::Value| v.get("file").is_some())
            .collect();
        assert_eq!(states.len(), 1, "{text}");
        assert_eq!(states[0]["state"], "foreign", "{text}");
    }
    let mut after = tree(&regs);
    after.remove(&Path::new("hw_twin/store_once").join(format!("{id}.json")));
    assert_eq!(after, before, "nothing else was written");
}

/// The rows `calametra review` printed: state by file.
fn review_rows(text: &str) -> BTreeMap<PathBuf, String> {
    let mut m = BTreeMap::new();
    for line in text.lines() {
        let mut words = line.split_whitespace();
        if let (Some(state), Some(file), None) = (words.next(), words.next(), words.next()) {
            if file.starts_with('/') {
                m.insert(PathBuf::from(file), state.to_string());
            }
        }
    }
    m
}

#[test]
fn a_renamed_request_makes_a_case_stale_a_fixed_bug_makes_one_fixed_and_review_prunes_just_those() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let saved = save("hw-loop", &regs, &["HW_LOOP_BUG_A", "HW_LOOP_BUG_B"]);
    assert_eq!(saved.len(), 2, "{saved:?}");
    let (a, a_id) = case_of(&saved, "hw-loop", "store_once");
    let (b, b_id) = case_of(&saved, "hw-loop", "store_twice");
    let story = |p: &Path| saved[p]["story"].as_str().unwrap().to_string();
    assert_eq!(story(&a), "stall at ctrl.store#1", "the shortest case");
    // Files review must leave alone: a stray file and a foreign copy.
    let stray = regs.join("hw-loop/store_once/.gitkeep");
    std::fs::write(&stray, "").unwrap();
    let fifo = regs.join("hw-loop/store_twice/abcdefabcdef.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    let foreign = regs.join("hw_twin/store_once").join(format!("{a_id}.json"));
    std::fs::create_dir_all(foreign.parent().unwrap()).unwrap();
    std::fs::copy(regs.join(&a), &foreign).unwrap();

    // A's request renamed (its bug still there), B's bug fixed.
    let knobs = [("HW_LOOP_RENAME_A", "1"), ("HW_LOOP_BUG_A", "1")];
    let a_trial = format!("store_once::regression::{a_id}");
    let (ok, out) = run(fixture("hw-loop", &regs)
        .args(["--exact", &a_trial])
        .envs(knobs));
    assert!(!ok, "a stale case proves nothing, so it fails:\n{out}");
    for needle in [
        "stale: event 1 (`stall at ctrl.store#1`) did not apply",
        "the fault site `ctrl.store#1` was never reached",
        &regs.join(&a).display().to_string(),
    ] {
        assert!(out.contains(needle), "`{needle}` in:\n{out}");
    }
    let b_trial = format!("store_twice::regression::{b_id}");
    let (ok, out) = run(fixture("hw-loop", &regs)
        .args(["--exact", &b_trial])
        .envs(knobs));
    assert!(ok, "a fixed case passes by default:\n{out}");
    assert!(
        out.contains(&format!("{b_trial}: fixed: every recorded event applied")),
        "{out}"
    );
    let (ok, out) = run(fixture("hw-loop", &regs)
        .args(["--exact", &b_trial])
        .envs(knobs)
        .env("CALAMETRA_REPLAY", "strict"));
    assert!(!ok, "strict replay demands the recorded failure:\n{out}");
    assert!(out.contains("fixed: every recorded event applied"), "{out}");

    // calametra review, with the same environment, lists them; --prune removes just those.
    let review = |extra: &[&str]| {
        let mut c = clean(Command::new(calametra_tool()));
        c.args(["review", "--package", "calametra-tests"])
            .args(extra)
            .current_dir(root())
            .env("CALAMETRA_REGRESSIONS", &regs)
            .envs(knobs);
        let (ok, out) = run(&mut c);
        assert!(ok, "{out}");
        out
    };
    // The directory holds targets, not packages: which package's they are is --package's.
    let (ok, out) = run(clean(Command::new(calametra_tool()))
        .arg("review")
        .current_dir(root())
        .env("CALAMETRA_REGRESSIONS", &regs));
    assert!(!ok && out.contains("--package P"), "{out}");
    let out = review(&[]);
    let rows = review_rows(&out);
    // The stray file and the FIFO are not saved cases: counted as ignored, never rows.
    let want: BTreeMap<PathBuf, String> = [
        (regs.join(&a), "stale"),
        (regs.join(&b), "fixed"),
        (foreign.clone(), "foreign"),
    ]
    .into_iter()
    .map(|(p, s)| (p, s.to_string()))
    .collect();
    assert_eq!(rows, want, "{out}");
    assert!(
        out.contains("3 saved case files: 1 fixed, 1 foreign, 1 stale"),
        "{out}"
    );
    assert!(out.contains("ignored 2 files, not saved cases"), "{out}");
    let before = tree(&regs);
    // Without a terminal to confirm at, --prune lists what it would delete and deletes nothing.
    let mut c = clean(Command::new(calametra_tool()));
    c.args([
        "review",
        "--package",
        "calametra-tests",
        "--prune",
        "stale,fixed",
    ])
    .current_dir(root())
    .env("CALAMETRA_REGRESSIONS", &regs)
    .envs(knobs)
    .stdin(std::process::Stdio::null());
    let (ok, out) = run(&mut c);
    assert!(!ok, "{out}");
    assert!(out.contains("--prune fixed,stale deletes:"), "{out}");
    assert!(out.contains("add --yes to delete 2 files"), "{out}");
    assert_eq!(tree(&regs), before, "nothing deleted without --yes");
    let out = review(&["--prune", "stale,fixed", "--yes"]);
    assert!(out.contains("pruned 2 files"), "{out}");
    let mut want = before;
    want.remove(&a);
    want.remove(&b);
    assert_eq!(
        tree(&regs),
        want,
        "only the stale and the fixed file are gone"
    );
}

#[test]
fn exact_of_a_saved_case_that_is_not_there_fails_naming_the_missing_file() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let trial = "store_once::regression::0123456789ab";
    let (ok, out) = run(fixture("hw-loop", &regs).args(["--exact", trial]));
    assert!(!ok, "{out}");
    assert_eq!(ran(&out), [trial], "{out}");
    let missing = regs.join("hw-loop/store_once/0123456789ab.json");
    assert!(
        out.contains(&format!("{} does not exist", missing.display())),
        "{out}"
    );
}

#[test]
fn the_replay_command_a_failure_prints_runs_its_case_when_pasted_into_a_shell() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let (ok, out) = run(fixture("hw-loop", &regs)
        .arg("store_once::")
        .env("HW_LOOP_BUG_A", "1"));
    assert!(!ok, "{out}");
    let (_, id) = case_of(&cases(&regs), "hw-loop", "store_once");
    let trial = format!("store_once::regression::{id}");
    let command = out
        .lines()
        .find_map(|l| l.strip_prefix("replay:     "))
        .unwrap_or_else(|| panic!("a replay line in:\n{out}"));
    assert_eq!(
        command,
        format!("cargo test -p calametra-tests --test hw-loop -- --exact {trial}")
    );
    // Pasted into a shell in the workspace root, with the same environment (and the cargo
    // that runs these tests first on PATH).
    let mut path = std::ffi::OsString::new();
    if let Some(dir) = cargo_path().parent().filter(|d| d.is_absolute()) {
        path.push(dir);
        path.push(":");
    }
    path.push(std::env::var_os("PATH").unwrap_or_default());
    let (ok, out) = run(clean(Command::new("sh"))
        .args(["-c", command])
        .current_dir(root())
        .env("PATH", path)
        .env("CALAMETRA_REGRESSIONS", &regs)
        .env("HW_LOOP_BUG_A", "1"));
    assert!(!ok, "the case still fails:\n{out}");
    assert_eq!(ran(&out), [trial.as_str()], "one trial ran:\n{out}");
    assert!(out.contains(&format!("test {trial} ... FAILED")), "{out}");
    assert!(out.contains("reproduced byte-exactly"), "{out}");
}

#[test]
fn json_output_is_one_json_object_a_line_with_the_summary_on_stderr() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    // Twice: the second run replays the saved case first.
    for round in 0..2 {
        let out = fixture("hw-loop", &regs)
            .args(["--format", "json", "-Z", "unstable-options"])
            .env("HW_LOOP_BUG_A", "1")
            .output()
            .unwrap();
        assert!(!out.status.success());
        let stdout = String::from_utf8(out.stdout).unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        let events: Vec<serde_json::Value> = stdout
            .lines()
            .map(|l| {
                serde_json::from_str(l)
                    .unwrap_or_else(|e| panic!("round {round}: not JSON ({e}): {l}\n{stdout}"))
            })
            .collect();
        let failed: Vec<&str> = events
            .iter()
            .filter(|v| v["type"] == "test" && v["event"] == "failed")
            .map(|v| v["name"].as_str().unwrap())
            .collect();
        assert!(failed.len() > 2, "round {round}: {stdout}");
        assert_eq!(
            failed.iter().any(|n| n.contains("::regression::")),
            round == 1,
            "round {round}: {failed:?}"
        );
        assert!(
            stderr.contains("calametra: 1 failure signature"),
            "round {round}: {stderr}"
        );
    }
}

/// `s` as a TOML basic string.
fn toml_str(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

/// The `message` attribute of the `<failure>` of each failed test case of a JUnit report.
fn junit_failures(xml: &str) -> BTreeMap<String, String> {
    let attr = |tag: &str, name: &str| {
        let start = tag.find(&format!(" {name}=\""))? + name.len() + 3;
        let len = tag[start..].find('"')?;
        Some(tag[start..start + len].to_string())
    };
    let mut m = BTreeMap::new();
    for case in xml.split("<testcase").skip(1) {
        let name = attr(case, "name").unwrap_or_default();
        if let Some(at) = case.find("<failure") {
            let message = attr(&case[at..], "message").unwrap_or_default();
            m.insert(name, message.replace("&apos;", "'").replace("&quot;", "\""));
        }
    }
    m
}

#[test]
fn under_nextest_the_junit_report_carries_each_failure_message() {
    let version = cargo().args(["nextest", "--version"]).output();
    if !version.is_ok_and(|o| o.status.success()) {
        eprintln!(
            "skipped: `cargo nextest --version` does not run here (cargo-nextest is not installed)"
        );
        return;
    }
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let store = tmp.path().join("nextest");
    let config = tmp.path().join("nextest.toml");
    std::fs::write(
        &config,
        format!(
            "[store]\ndir = {}\n\n[profile.saved-cases]\nfail-fast = false\n\n[profile.saved-cases.junit]\npath = \"junit.xml\"\n",
            toml_str(&store.display().to_string())
        ),
    )
    .unwrap();
    let (ok, out) = run(cargo()
        .args([
            "nextest",
            "run",
            "-p",
            "calametra-tests",
            "--test",
            "hw-loop",
        ])
        .args([
            "--no-fail-fast",
            "--profile",
            "saved-cases",
            "--config-file",
        ])
        .arg(&config)
        .args(["-E", "test(/^store_once::/)"])
        .env("CALAMETRA_REGRESSIONS", &regs)
        .env("HW_LOOP_BUG_A", "1"));
    assert!(!ok, "{out}");
    let xml = std::fs::read_to_string(store.join("saved-cases/junit.xml"))
        .unwrap_or_else(|e| panic!("no JUnit report ({e}):\n{out}"));
    let failures = junit_failures(&xml);
    assert!(
        failures.contains_key("store_once::site::ctrl.store#1::stall") && failures.len() > 2,
        "{failures:?}\n{xml}"
    );
    for (name, message) in &failures {
        assert!(
            message.contains("invariant `believed_means_held` broke"),
            "{name}: the failure message is `{message}`"
        );
    }
}

/// Runs `c` bounded by coreutils' `timeout`: a hang fails the test instead of stalling it.
fn bounded(c: &Command) -> Command {
    let mut t = Command::new("timeout");
    t.arg("120").arg(c.get_program()).args(c.get_args());
    for (k, v) in c.get_envs() {
        match v {
            Some(v) => t.env(k, v),
            None => t.env_remove(k),
        };
    }
    t
}

#[test]
fn stray_files_in_a_case_directory_are_not_trials_do_not_hang_and_orphaned_temporaries_go() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let dir = regs.join("hw-loop/store_once");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join(".gitkeep"), "").unwrap();
    std::fs::write(dir.join("x.json.orig"), "{}").unwrap();
    std::fs::write(dir.join(".calametra-123.tmp"), "{\"form").unwrap();
    // A FIFO named as a case: opening it to read would wait for a writer forever.
    let fifo = dir.join("abcdefabcdef.json");
    let st = Command::new("mkfifo").arg(&fifo).status().unwrap();
    assert!(st.success(), "mkfifo");
    let (ok, list) = run(&mut bounded(fixture("hw-loop", &regs).arg("--list")));
    assert!(ok, "{list}");
    assert!(!list.contains("regression::"), "{list}");
    let (ok, out) = run(&mut bounded(&fixture("hw-loop", &regs)));
    assert!(ok, "{out}");
    for name in [".gitkeep", "x.json.orig", "abcdefabcdef.json"] {
        assert!(
            out.contains(&format!(
                "calametra: skipped {}: not a saved case",
                dir.join(name).display()
            )),
            "{name}: {out}"
        );
    }
    let left: Vec<_> = tree_names(&dir);
    assert_eq!(
        left,
        [".gitkeep", "abcdefabcdef.json", "x.json.orig"],
        "the orphaned temporary is removed, nothing else"
    );
}

/// The names in `dir`, sorted (without reading them: one may be a FIFO).
fn tree_names(dir: &Path) -> Vec<String> {
    let mut v: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    v.sort();
    v
}

#[test]
fn a_saved_file_follows_the_umask() {
    use std::os::unix::fs::PermissionsExt;
    for (umask, mode) in [("022", 0o644), ("077", 0o600)] {
        let tmp = tempfile::tempdir().unwrap();
        let regs = tmp.path().join("regs");
        let mut c = clean(Command::new("sh"));
        c.arg("-c")
            .arg(format!("umask {umask}; exec \"$0\" \"$@\""))
            .arg(&fixtures()["hw-loop"])
            .args(["--exact", "store_once::site::ctrl.store#1::stall"])
            .env("CALAMETRA_REGRESSIONS", &regs)
            .env("HW_LOOP_BUG_A", "1");
        let (ok, out) = run(&mut c);
        assert!(!ok, "{out}");
        let (file, _) = case_of(&cases(&regs), "hw-loop", "store_once");
        let got = std::fs::metadata(regs.join(&file))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(got, mode, "umask {umask}: mode {got:o}");
    }
}

#[test]
fn an_expect_scenario_whose_case_cannot_be_saved_fails_saying_why_and_passes_with_saving_off() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    // A regular file where the scenario's case directory should be (root ignores modes).
    let blocker = regs.join("planted/status_found");
    std::fs::create_dir_all(blocker.parent().unwrap()).unwrap();
    std::fs::write(&blocker, "a file where the directory should be").unwrap();
    let trial = "status_found::finds::belief_matches_connection";
    let planted = || clean(Command::new(env!("CARGO_BIN_EXE_planted")));
    let (ok, out) = run(planted()
        .args(["--exact", trial])
        .env("CALAMETRA_REGRESSIONS", &regs));
    assert!(!ok, "{out}");
    assert!(
        out.contains("found `belief_matches_connection`, but its case could not be saved: ")
            && out.contains(&blocker.display().to_string()),
        "{out}"
    );
    let (ok, out) = run(planted()
        .args(["--exact", trial])
        .env("CALAMETRA_REGRESSIONS", "off"));
    assert!(ok, "{out}");
}

/// Issue 18: a saved case made for another build (`guest_build`: a guest scenario's, here put
/// into an in-process scenario's case, which has no build) is not replayed: the trial is
/// ignored at run time naming both builds, neither a pass nor a failure, and the states file
/// says `other-build`. The same file without the field replays as before.
#[test]
fn a_case_made_for_another_build_is_ignored_naming_both_builds() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let saved = save("hw-loop", &regs, &["HW_LOOP_BUG_A"]);
    let (file, id) = case_of(&saved, "hw-loop", "store_once");
    let path = regs.join(&file);
    let build = format!("sha256:{}", "5a".repeat(32));
    let mut case = saved[&file].clone();
    case["guest_build"] = serde_json::json!(build);
    std::fs::write(&path, serde_json::to_string_pretty(&case).unwrap() + "\n").unwrap();
    let trial = format!("store_once::regression::{id}");
    let states = tmp.path().join("states.jsonl");
    for bug in ["0", "1"] {
        let (ok, out) = run(fixture("hw-loop", &regs)
            .args(["--exact", &trial])
            .env("HW_LOOP_BUG_A", bug)
            .env("CALAMETRA_CASE_STATES", &states));
        assert!(ok, "neither a failure:\n{out}");
        let why = format!("made for another build ({build} vs none (in process))");
        assert!(
            out.contains(&format!("test {trial} ... ignored ({why})")),
            "nor a pass:\n{out}"
        );
        assert!(out.contains("0 passed; 0 failed; 1 ignored"), "{out}");
        let text = std::fs::read_to_string(&states).unwrap();
        let row = text
            .lines()
            .map(|l| serde_json::from_str::<serde_json::Value>(l).unwrap())
            .find(|v| v.get("file").is_some())
            .unwrap_or_else(|| panic!("a state for the case: {text}"));
        assert_eq!(row["state"], "other-build", "{text}");
        assert_eq!(row["detail"], why.as_str(), "{text}");
    }
    // Unpinned again, it replays: the planted bug still fails it.
    std::fs::write(
        &path,
        serde_json::to_string_pretty(&saved[&file]).unwrap() + "\n",
    )
    .unwrap();
    let (ok, out) = run(fixture("hw-loop", &regs)
        .args(["--exact", &trial])
        .env("HW_LOOP_BUG_A", "1"));
    assert!(!ok, "{out}");
    assert!(out.contains("saved failure still fails"), "{out}");
}

/// A directory entry named `name` that is not UTF-8 (`regs\xff`), where the file system allows.
#[cfg(unix)]
fn non_utf8(dir: &Path, name: &str) -> PathBuf {
    use std::os::unix::ffi::OsStringExt;
    let mut bytes = name.as_bytes().to_vec();
    bytes.push(0xff);
    dir.join(std::ffi::OsString::from_vec(bytes))
}

#[cfg(unix)]
#[test]
fn review_prune_deletes_only_saved_cases_never_through_a_symlink_keeps_a_bin_targets_failing_case_and_reads_a_non_utf8_root(
) {
    let tmp = tempfile::tempdir().unwrap();
    // What must survive: files outside the root reached through a symlinked directory, a
    // symlinked case-named file, stray files, a [[bin]] harness target's still-failing case,
    // and a still-failing case under a root whose name is not UTF-8.
    let outside = tmp.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    for f in [
        "id_ed25519",
        "notes.txt",
        "0123456789ab.json",
        "victim.json",
    ] {
        std::fs::write(outside.join(f), "keep me").unwrap();
    }
    let regs = non_utf8(tmp.path(), "regs");
    let saved = save("hw-loop", &regs, &["HW_LOOP_BUG_A"]);
    assert_eq!(saved.len(), 1, "{saved:?}");
    let (hw_case, _) = case_of(&saved, "hw-loop", "store_once");
    let planted_exe = Path::new(env!("CARGO_BIN_EXE_planted"));
    let (ok, list) = run(clean(Command::new(planted_exe)).arg("--list"));
    assert!(ok, "{list}");
    let seeds: Vec<&str> = list
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .filter(|t| t.starts_with("status_long::seed::"))
        .collect();
    let planted_found = seeds.iter().take(16).any(|s| {
        let (ok, _) = run(clean(Command::new(planted_exe))
            .args(["--exact", s])
            .env("CALAMETRA_REGRESSIONS", &regs));
        !ok
    });
    assert!(
        planted_found,
        "one of the first 16 seeds finds the planted bug"
    );
    let planted_cases = tree(&regs.join("planted"));
    assert_eq!(planted_cases.len(), 1, "{planted_cases:?}");
    std::os::unix::fs::symlink(&outside, regs.join("linked")).unwrap();
    std::os::unix::fs::symlink(&outside, regs.join("hw-loop/store_once/linked")).unwrap();
    std::os::unix::fs::symlink(
        outside.join("victim.json"),
        regs.join("hw-loop/store_once/abcdefabcdef.json"),
    )
    .unwrap();
    std::fs::write(regs.join("README.md"), "what these are").unwrap();
    std::fs::write(regs.join("hw-loop/.gitkeep"), "").unwrap();
    let outside_before = tree(&outside);
    let before = tree(&regs);

    let mut c = clean(Command::new(calametra_tool()));
    c.args(["review", "--package", "calametra-tests"])
        .args([
            "--prune",
            "unreferenced,unreadable,not-run,foreign,stale",
            "--yes",
        ])
        .current_dir(root())
        .env("CALAMETRA_REGRESSIONS", &regs)
        .env("HW_LOOP_BUG_A", "1")
        // An exported sweep budget does not turn review's replays into sweeps.
        .env("CALAMETRA_SWEEP", "1s");
    let (ok, out) = run(&mut c);
    assert!(ok, "{out}");
    assert!(out.contains("2 saved case files: 2 fails"), "{out}");
    assert!(
        out.contains("cargo run -q -p calametra-tests --bin planted"),
        "{out}"
    );
    assert!(out.contains("ignored 5 files, not saved cases"), "{out}");
    assert!(out.contains("pruned 0 files"), "{out}");
    assert!(regs.join(&hw_case).is_file());
    assert_eq!(tree(&regs), before, "nothing under the root was deleted");
    assert_eq!(tree(&outside), outside_before, "nothing outside it either");

    // A source tree named as the root: no file of it is a saved case, so none is pruned.
    let src = tmp.path().join("crate");
    for (f, text) in [
        ("Cargo.toml", "[package]"),
        ("src/lib.rs", "//! a crate"),
        (
            ".git/objects/ab/cdef0123456789abcdef0123456789abcdef01",
            "x",
        ),
        ("tests/README.md", "x"),
    ] {
        std::fs::create_dir_all(src.join(f).parent().unwrap()).unwrap();
        std::fs::write(src.join(f), text).unwrap();
    }
    let src_before = tree(&src);
    let mut c = clean(Command::new(calametra_tool()));
    c.args(["review", "--package", "calametra-tests"])
        .args(["--prune", "unreferenced,unreadable,not-run", "--yes"])
        .current_dir(root())
        .env("CALAMETRA_REGRESSIONS", &src);
    let (ok, out) = run(&mut c);
    assert!(ok, "{out}");
    assert!(out.contains("no saved cases in this workspace"), "{out}");
    assert_eq!(tree(&src), src_before, "nothing of the tree was deleted");
}

#[test]
fn a_file_named_with_terminal_escapes_is_printed_escaped() {
    let tmp = tempfile::tempdir().unwrap();
    let regs = tmp.path().join("regs");
    let dir = regs.join("hw-loop/store_once");
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("\u{1b}[2J\u{1b}[31mred\r.json"), "x").unwrap();
    let (ok, out) = run(fixture("hw-loop", &regs).arg("--list"));
    assert!(ok, "{out}");
    assert!(!out.contains('\u{1b}') && !out.contains('\r'), "{out:?}");
    assert!(out.contains("\\u{1b}[2J\\u{1b}[31mred\\u{d}.json"), "{out}");
}
