//! Issue 19: the readers of files people hand to Calametra (`trace::read_jsonl`,
//! `divergence::read`, `tracefile::load_replay_file`, `Regression::load`) on adversarial input:
//! a FIFO, `/dev/zero`, a directory, sparse files of 1 and 2 GiB, a saved case with a trailing
//! comma, deep nesting. Each is refused with a message naming the file and what is wrong, fast,
//! and (under `ulimit -v`) within a small memory bound.

use calametra_core::divergence;
use calametra_core::input::{MAX_LINE_BYTES, MAX_TRACE_BYTES};
use calametra_core::regress::Regression;
use calametra_core::trace::read_jsonl;
use calametra_core::tracefile::load_replay_file;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// A reader, by name, reduced to what it says of a file.
type Reader = (&'static str, fn(&Path) -> Result<(), String>);

/// What each reader says of `path`, each read on a thread given `limit` to finish (a FIFO
/// opened to read would block forever: the test fails instead of hanging).
fn errors(path: &Path) -> Vec<(&'static str, String)> {
    let readers: [Reader; 4] = [
        ("read_jsonl", |p| {
            read_jsonl(p).map(drop).map_err(|e| e.to_string())
        }),
        ("divergence::read", |p| {
            divergence::read(p, None)
                .map(drop)
                .map_err(|e| e.to_string())
        }),
        ("load_replay_file", |p| load_replay_file(p).map(drop)),
        ("Regression::load", |p| {
            Regression::load(p).map(drop).map_err(|e| e.to_string())
        }),
    ];
    readers
        .into_iter()
        .map(|(name, f)| {
            let (tx, rx) = std::sync::mpsc::channel();
            let p = path.to_path_buf();
            // A real thread on purpose: a reader that blocks (a FIFO) fails the test after the
            // timeout instead of hanging it. No simulation runs here.
            #[allow(clippy::disallowed_methods)]
            std::thread::spawn(move || {
                let _ = tx.send(f(&p));
            });
            let r = rx
                .recv_timeout(Duration::from_secs(20))
                .unwrap_or_else(|_| panic!("{name} of {} did not return", path.display()));
            (name, r.expect_err(name))
        })
        .collect()
}

fn mkfifo(p: &Path) {
    let st = std::process::Command::new("mkfifo")
        .arg(p)
        .status()
        .unwrap();
    assert!(st.success(), "mkfifo");
}

fn sparse(p: &Path, len: u64) {
    std::fs::File::create(p).unwrap().set_len(len).unwrap();
}

#[cfg(unix)]
#[test]
fn special_files_are_refused_without_blocking_or_reading() {
    let dir = tempfile::tempdir().unwrap();
    let fifo = dir.path().join("case.json");
    mkfifo(&fifo);
    for (name, e) in errors(&fifo) {
        assert!(
            e.contains(&fifo.display().to_string())
                && e.contains("a FIFO (named pipe), not a regular file"),
            "{name}: {e}"
        );
    }
    for (name, e) in errors(Path::new("/dev/zero")) {
        assert!(
            e.starts_with("/dev/zero: ") && e.contains("a character device, not a regular file"),
            "{name}: {e}"
        );
    }
    for (name, e) in errors(dir.path()) {
        assert!(e.contains("a directory, not a regular file"), "{name}: {e}");
    }
}

#[test]
fn files_past_the_limits_are_refused_with_the_limit_named() {
    let dir = tempfile::tempdir().unwrap();
    // Past the trace limit: refused by its size, nothing read.
    let huge = dir.path().join("huge.jsonl");
    sparse(&huge, 2 << 30);
    for (name, e) in errors(&huge) {
        assert!(
            e.contains("2 GiB")
                && (e.contains("more than the 1 GiB") || e.contains("more than the 16 MiB")),
            "{name}: {e}"
        );
    }
    // Within the trace limit but one line of NULs: stopped at the line limit.
    let big = dir.path().join("big.jsonl");
    sparse(&big, MAX_TRACE_BYTES);
    for (name, e) in errors(&big) {
        if name == "Regression::load" {
            assert!(e.contains("more than the 16 MiB"), "{name}: {e}");
        } else {
            assert!(e.contains(":1: line longer than 16 MiB"), "{name}: {e}");
        }
    }
    let _ = MAX_LINE_BYTES;
}

/// A saved case written by hand with a trailing comma, and JSON nested past serde_json's limit:
/// each reader says what is wrong, where, in words that do not mislead.
#[test]
fn a_trailing_comma_and_deep_nesting_are_named_as_such() {
    let dir = tempfile::tempdir().unwrap();
    let case = dir.path().join("0123456789ab.json");
    let text = "{\n  \"format\": \"calametra.regression\",\n  \"version\": 1,\n}\n";
    std::fs::write(&case, text).unwrap();
    for (name, e) in errors(&case) {
        assert!(
            e.contains("0123456789ab.json") && e.contains("trailing comma at line 4 column 1"),
            "{name}: {e}"
        );
        assert!(
            !e.contains("truncated") && !e.contains("EOF"),
            "{name}: {e}"
        );
    }
    // What `calametra show` meets when the document does not parse: the trace reader says it
    // is a JSON document, not JSON Lines.
    let e = read_jsonl(&case).unwrap_err().to_string();
    assert!(
        e.contains(":1: not a JSON Lines trace: a JSON document"),
        "{e}"
    );
    // The saved case's own reader names the document as the field.
    let e = Regression::load(&case).unwrap_err().to_string();
    assert!(
        e.contains("field `(document)`: not valid JSON: trailing comma at line 4 column 1"),
        "{e}"
    );

    for (file, text) in [
        ("deep.jsonl", "[".repeat(100_000)),
        ("deep-line.jsonl", format!("{}\n", "[".repeat(100_000))),
    ] {
        let p = dir.path().join(file);
        std::fs::write(&p, &text).unwrap();
        for (name, e) in errors(&p) {
            assert!(e.contains("nested too deeply"), "{name} of {file}: {e}");
            assert!(!e.contains("truncated"), "{name} of {file}: {e}");
        }
    }
    // A trace cut mid-record is still "truncated".
    let p = dir.path().join("cut.jsonl");
    std::fs::write(
        &p,
        "{\"seq\":0,\"t_ns\":0,\"kind\":\"x\",\"actor\":\"a\",\"deter",
    )
    .unwrap();
    for (name, e) in errors(&p).into_iter().take(3) {
        assert!(e.contains("truncated record"), "{name}: {e}");
    }
}

/// The helper run under `ulimit -v`: reads `CALAMETRA_TEST_READ` with every reader and prints
/// what each said; does nothing in an ordinary test run.
#[test]
fn read_under_ulimit_helper() {
    let Some(p) = std::env::var_os("CALAMETRA_TEST_READ") else {
        return;
    };
    for (name, e) in errors(Path::new(&p)) {
        println!("{name}: {e}");
    }
}

/// Issue 19: `/dev/zero` or a 1 GB sparse file used to be read until 2 GB were allocated and
/// the process aborted. Under a 256 MiB address-space limit each reader refuses them cleanly.
#[cfg(target_os = "linux")]
#[test]
fn readers_stay_within_a_small_memory_bound_on_endless_input() {
    let dir = tempfile::tempdir().unwrap();
    let sparse_file = dir.path().join("sparse.jsonl");
    sparse(&sparse_file, 1 << 30);
    let exe: PathBuf = std::env::current_exe().unwrap();
    for input in [Path::new("/dev/zero"), &sparse_file] {
        let out = std::process::Command::new("sh")
            .arg("-c")
            .arg("ulimit -v 262144 && exec \"$0\" \"$@\"")
            .arg(&exe)
            .args([
                "--exact",
                "read_under_ulimit_helper",
                "--nocapture",
                "--test-threads=1",
            ])
            .env("CALAMETRA_TEST_READ", input)
            .output()
            .unwrap();
        let text = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        assert!(
            out.status.success(),
            "{}: {:?}\n{text}",
            input.display(),
            out.status
        );
        for name in [
            "read_jsonl",
            "divergence::read",
            "load_replay_file",
            "Regression::load",
        ] {
            assert!(
                text.contains(&format!("{name}: {}", input.display())),
                "{text}"
            );
        }
    }
}
