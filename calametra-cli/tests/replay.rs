//! `calametra replay` as the tool sees it, with a stand-in for cargo (`--cargo`): a script that
//! answers as the replay trial of a test binary would, writing the replayed run's trace to
//! `CALAMETRA_TRACE_OUT` and the state at a step to `CALAMETRA_STATE_OUT` (for `CALAMETRA_STOP_AT`),
//! from files made here by running the scenario in process. (What the harness must do for real
//! is the lead's; these check the tool's side of it.)
//!
//! - a trace file replays as `N/N records, sha256:... identical`;
//! - a trace whose records were edited but whose summary's hash was kept fails, naming the first
//!   edited record (with the replayed run's trace), or saying its records no longer hash to its
//!   summary's hash (without it);
//! - `replay --at STEP` and `show --at STEP` print the world at the step.

use calametra::choices::Source;
use calametra::report::write_trace;
use calametra::{run, RunConfig, Sim};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod support;

fn scenario(sim: &mut Sim) {
    support::loopback_reader(sim, "driver", 3);
}

fn config() -> RunConfig {
    RunConfig {
        source: Source::Seeded(1),
        keep_trace: true,
        ..RunConfig::default()
    }
}

/// A trace file of the scenario's run, and the number of its deterministic records.
fn trace_file(dir: &Path) -> (PathBuf, usize) {
    let r = run(config(), &scenario);
    let p = dir.join("run.jsonl");
    write_trace(
        &p,
        &r.lines,
        "replay::scenario",
        "calametra",
        "replay",
        &r.events,
        &r.hash.to_string(),
        None,
    )
    .unwrap();
    (p, r.records as usize)
}

/// The stand-in for cargo: the replay trial passes, writing `$PRISTINE` as the replayed run's
/// trace (when `$PRISTINE` is set) and `$DUMPS/at-$CALAMETRA_STOP_AT.json` as the state.
fn fake_cargo(dir: &Path) -> PathBuf {
    let p = dir.join("fake-cargo");
    std::fs::write(
        &p,
        r#"#!/bin/sh
[ -n "$CALAMETRA_REPLAY_FILE" ] || { echo "no CALAMETRA_REPLAY_FILE" >&2; exit 3; }
if [ -n "$CALAMETRA_TRACE_OUT" ] && [ -n "$PRISTINE" ]; then cp "$PRISTINE" "$CALAMETRA_TRACE_OUT"; fi
if [ -n "$CALAMETRA_STATE_OUT" ] && [ -f "$DUMPS/at-$CALAMETRA_STOP_AT.json" ]; then
  cp "$DUMPS/at-$CALAMETRA_STOP_AT.json" "$CALAMETRA_STATE_OUT"
fi
echo "test $5 ... ok"
echo "test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out"
"#,
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn tool(args: &[&str], env: &[(&str, &Path)]) -> (i32, String) {
    let mut c = Command::new(env!("CARGO_BIN_EXE_calametra"));
    c.args(args).env_remove("PRISTINE").env_remove("DUMPS");
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c.output().expect("run calametra");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("panicked"), "{text}");
    (out.status.code().unwrap_or(-1), text)
}

/// `file` with the `data.in` of its `n`th transfer record changed, every other byte kept (the
/// summary's hash too).
fn edit(file: &Path, n: usize) -> (PathBuf, usize, usize) {
    let text = std::fs::read_to_string(file).unwrap();
    let mut seen = 0;
    let mut at = (0, 0);
    let lines: Vec<String> = text
        .lines()
        .enumerate()
        .map(|(i, l)| {
            if l.contains("\"kind\":\"transfer\"") && l.contains("\"in\":\"") {
                seen += 1;
                if seen == n {
                    let v: serde_json::Value = serde_json::from_str(l).unwrap();
                    at = (v["seq"].as_u64().unwrap() as usize, i + 1);
                    let old = v["data"]["in"].as_str().unwrap().to_string();
                    return l.replace(&format!("\"in\":\"{old}\""), "\"in\":\"ffffffff\"");
                }
            }
            l.to_string()
        })
        .collect();
    let p = file.with_file_name("edited.jsonl");
    std::fs::write(&p, lines.join("\n") + "\n").unwrap();
    (p, at.0, at.1)
}

#[test]
fn a_trace_replays_record_for_record() {
    let dir = tempfile::tempdir().unwrap();
    let (file, n) = trace_file(dir.path());
    let cargo = fake_cargo(dir.path());
    let f = file.to_str().unwrap();
    let (code, out) = tool(
        &["replay", f, "--cargo", cargo.to_str().unwrap()],
        &[("PRISTINE", &file)],
    );
    assert_eq!(code, 0, "{out}");
    let hash = run(config(), &scenario).hash;
    assert!(
        out.contains(&format!("replay: {n}/{n} records, {hash} identical")),
        "{out}"
    );
    // Without the replayed run's trace (a harness that does not write it), the file's own
    // records still hash to its summary's hash.
    let (code, out) = tool(&["replay", f, "--cargo", cargo.to_str().unwrap()], &[]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!("replay: {n}/{n} records, {hash} identical")),
        "{out}"
    );
}

#[test]
fn an_edited_record_under_a_kept_hash_fails_naming_the_record() {
    let dir = tempfile::tempdir().unwrap();
    let (file, n) = trace_file(dir.path());
    let (edited, seq, line) = edit(&file, 2);
    let cargo = fake_cargo(dir.path());
    let e = edited.to_str().unwrap();
    let (code, out) = tool(
        &["replay", e, "--cargo", cargo.to_str().unwrap()],
        &[("PRISTINE", &file)],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(&format!(
            "replay: {seq}/{n} records reproduced; record #{seq} (line {line} of {e}) is not what the replay wrote: data.in"
        )),
        "{out}"
    );
    assert!(out.contains("the records were edited"), "{out}");
    assert!(
        out.contains("\"ffffffff\""),
        "the field table shows the edit: {out}"
    );
    // Without the replayed run's trace: the edit is still caught, by the hash.
    let (code, out) = tool(&["replay", e, "--cargo", cargo.to_str().unwrap()], &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("the records were edited after the summary was written"),
        "{out}"
    );
}

#[test]
fn replay_and_show_at_a_step_print_the_world_there() {
    let dir = tempfile::tempdir().unwrap();
    let (file, _) = trace_file(dir.path());
    let cargo = fake_cargo(dir.path());
    let dumps = dir.path().join("dumps");
    std::fs::create_dir(&dumps).unwrap();
    let state = run(
        RunConfig {
            stop_at: Some(4),
            ..config()
        },
        &scenario,
    )
    .state
    .unwrap();
    std::fs::write(dumps.join("at-4.json"), state.to_json()).unwrap();
    let f = file.to_str().unwrap();
    for cmd in ["replay", "show"] {
        let (code, out) = tool(
            &[cmd, f, "--at", "4", "--cargo", cargo.to_str().unwrap()],
            &[("DUMPS", &dumps)],
        );
        assert_eq!(code, 0, "{cmd}: {out}");
        assert!(
            out.contains("state at step 4 (before anything of it happens)"),
            "{cmd}: {out}"
        );
        assert!(out.contains("loopback (attached)"), "{cmd}: {out}");
        assert!(out.contains("driver"), "{cmd}: {out}");
        assert!(out.contains("choice streams:"), "{cmd}: {out}");
    }
    // A test binary that does not write the state: a clear error.
    let (code, out) = tool(
        &["replay", f, "--at", "5", "--cargo", cargo.to_str().unwrap()],
        &[("DUMPS", &dumps)],
    );
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("wrote no state to CALAMETRA_STATE_OUT"),
        "{out}"
    );
    let (code, out) = tool(&["replay", f, "--at", "x"], &[]);
    assert_eq!(code, 2, "{out}");
}
