//! The trace readers' memory, checked under `ulimit -v`: `diff`, `determinism`, `show` and
//! `export` stay within 4x the largest trace they are given (DESIGN "Traces in memory").
//!
//! One 12 MB trace (realistic records: transfers with payload heads, task polls, transitions,
//! a closing summary) is written by each test process. Each command then runs in a shell whose
//! address space is capped at a fixed allowance for the program itself (32 MiB: the binary,
//! its libraries, its stack; a 2 MB trace needs about 20) plus 4x the trace. Before the
//! readers kept a trace as its text and a few words a record (and read it record by record
//! where they can), `diff` of two such traces needed about 11x each and aborted there; `show`
//! about 10x and `export` about 7x.
//!
//! The `calametra` tool is built once (`support::calametra_tool`).

mod support;

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::{calametra_tool as tool, run_code as run};

/// What the program itself may take, besides the 4x.
const ALLOWANCE_KIB: u64 = 32 * 1024;
/// The trace's size.
const TRACE_BYTES: usize = 12 << 20;

/// A directory holding `trace.jsonl` (and room for outputs), made once for every test.
fn trace() -> &'static (tempfile::TempDir, PathBuf) {
    static T: OnceLock<(tempfile::TempDir, PathBuf)> = OnceLock::new();
    T.get_or_init(|| {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("trace.jsonl");
        let mut s = String::with_capacity(TRACE_BYTES + 4096);
        let mut seq = 0u64;
        let mut rec = |s: &mut String, t: u64, kind: &str, actor: &str, data: &str| {
            let _ = writeln!(
                s,
                r#"{{"seq":{seq},"t_ns":{t},"kind":"{kind}","actor":"{actor}","deterministic":true,"data":{data}}}"#
            );
            seq += 1;
        };
        let mut n = 0u64;
        while s.len() < TRACE_BYTES {
            let t = n * 125_000;
            rec(&mut s, t, "task", "updater", "{}");
            rec(
                &mut s,
                t,
                "transfer",
                "updater",
                &format!(
                    r#"{{"site":"ctrl.dnload#{n}","setup":"2101{:04x}00004000","out":"{}","status":"ok"}}"#,
                    n & 0xffff,
                    "a5".repeat(32)
                ),
            );
            rec(
                &mut s,
                t + 1000,
                "transition",
                "dfu",
                &format!(
                    r#"{{"machine":"dfu","from":"dnload_idle","to":"dnload_sync","site":"dfu.dnload_idle->dnload_sync#{n}"}}"#
                ),
            );
            n += 1;
        }
        let _ = writeln!(
            s,
            r#"{{"seq":{seq},"t_ns":{},"kind":"summary","actor":"sim","deterministic":false,"data":{{"scenario":"memory::long","hash":"sha256:{}","events":[]}}}}"#,
            n * 125_000,
            "0".repeat(64)
        );
        std::fs::write(&path, s).unwrap();
        (dir, path)
    })
}

/// Runs `calametra ARGS` (in the trace's directory) with the address space capped at the
/// allowance plus 4x the trace; returns its exit code and output.
fn capped(args: &[&str]) -> (i32, String) {
    let (dir, path) = trace();
    let size = std::fs::metadata(path).unwrap().len();
    let limit = ALLOWANCE_KIB + 4 * size / 1024;
    let mut script = format!("ulimit -v {limit} && exec \"$0\"");
    for i in 1..=args.len() {
        script.push_str(&format!(" \"${i}\""));
    }
    run(Command::new("sh")
        .current_dir(dir.path())
        .arg("-c")
        .arg(script)
        .arg(tool())
        .args(args))
}

fn trace_path() -> &'static str {
    trace().1.to_str().unwrap()
}

fn out(name: &str) -> String {
    trace().0.path().join(name).display().to_string()
}

#[test]
fn diff_of_two_long_traces_stays_within_4x() {
    let (_, p) = trace();
    let copy = p.with_file_name("copy.jsonl");
    std::fs::copy(p, &copy).unwrap();
    let (code, text) = capped(&["diff", trace_path(), copy.to_str().unwrap()]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("verdict: identical"), "{text}");
}

#[test]
fn determinism_of_a_long_trace_stays_within_4x() {
    let dir = out("det");
    let copy = format!("cp {} \"$CALAMETRA_TRACE_OUT\"", trace_path());
    let (code, text) = capped(&[
        "determinism",
        "--runs",
        "3",
        "--out",
        &dir,
        "--",
        "sh",
        "-c",
        &copy,
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("1 reference, 2 identical (deleted)"),
        "{text}"
    );
}

#[test]
fn show_of_a_long_trace_stays_within_4x() {
    let (code, text) = capped(&["show", trace_path()]);
    assert_eq!(code, 0, "{}", &text[..text.len().min(2000)]);
    assert!(text.contains("scenario: memory::long"), "{}", &text[..2000]);
    assert!(text.contains("transfer"), "{}", &text[..2000]);
}

#[test]
fn exports_of_a_long_trace_stay_within_4x() {
    for (flag, name) in [
        ("--pcapng", "t.pcapng"),
        ("--chrome", "t.json"),
        ("--html", "t.html"),
    ] {
        let o = out(name);
        let (code, text) = capped(&["export", trace_path(), flag, &o]);
        assert_eq!(code, 0, "{flag}: {text}");
        assert!(Path::new(&o).metadata().unwrap().len() > 1 << 20, "{flag}");
    }
}

/// A run past `--timeout` is killed with what it started, and the reference's verdict says so.
#[test]
fn determinism_timeout_kills_a_run_that_never_ends() {
    let dir = out("hang");
    let (code, text) = run(Command::new(tool()).args([
        "determinism",
        "--runs",
        "2",
        "--timeout",
        "300ms",
        "--out",
        &dir,
        "--",
        "sh",
        "-c",
        "sleep 600 & echo $! >> \"$(dirname \"$CALAMETRA_TRACE_OUT\")/../children\"; sleep 600",
    ]));
    assert_eq!(code, 2, "{text}");
    // The background sleeps went with their runs' process groups.
    let children = std::fs::read_to_string(Path::new(&dir).join("children")).unwrap();
    for pid in children.lines() {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        assert!(
            stat.is_empty() || stat.contains(") Z "),
            "run child {pid} outlived its run: {stat}"
        );
    }
    assert!(text.contains("timed out after 300ms (killed)"), "{text}");
    let status = std::fs::read_to_string(Path::new(&dir).join("run-001/status")).unwrap();
    assert!(status.starts_with("timed out"), "{status}");
}
