//! Issue 19, adversarial inputs and outputs: output paths that are symlinks, devices, FIFOs or
//! the input itself; captures that compare nothing; trace strings that hold template
//! placeholders, HTML or terminal escape sequences; special files as inputs.

use calametra::choices::Source;
use calametra::report::write_trace;
use calametra::{run, RunConfig, Sim};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

mod support;

/// Exit code, stdout, stderr.
fn tool(args: &[&str]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_calametra"))
        .args(args)
        .stdin(Stdio::null())
        .output()
        .expect("run calametra");
    let (so, se) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!so.contains("panicked") && !se.contains("panicked"), "{se}");
    (out.status.code().unwrap_or(-1), so, se)
}

const EVIL: &str =
    "__TITLE__{{TITLE}}<img src=x onerror=alert(1)>\x1b[2J\x1b]0;pwned\x07\x1b]52;c;aGk=\x07";

fn scenario(sim: &mut Sim) {
    support::loopback_reader(sim, EVIL, 2);
}

fn trace_file(dir: &Path, name: &str) -> PathBuf {
    let r = run(
        RunConfig {
            source: Source::Seeded(1),
            keep_trace: true,
            swarm: false,
            ..RunConfig::default()
        },
        &scenario,
    );
    let p = dir.join(name);
    write_trace(
        &p,
        &r.lines,
        "adversarial::scenario",
        "calametra",
        "adversarial",
        &r.events,
        &r.hash.to_string(),
        None,
    )
    .unwrap();
    p
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

fn mkfifo(p: &Path) {
    let st = Command::new("mkfifo").arg(p).status().expect("mkfifo");
    assert!(st.success());
}

#[test]
fn export_outputs_dash_devices_symlinks_and_the_input() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace_file(dir.path(), "t.jsonl");
    let before = std::fs::read(&t).unwrap();

    // `-` is standard output: the page alone there, the note on standard error.
    let (code, so, se) = tool(&["export", s(&t), "--html", "-"]);
    assert_eq!(code, 0, "{se}");
    assert!(so.starts_with("<!doctype html>") && so.trim_end().ends_with("</html>"));
    assert!(se.contains("wrote -"), "{se}");
    let (code, so, _) = tool(&["export", s(&t), "--chrome", "-"]);
    assert_eq!(code, 0);
    serde_json::from_str::<serde_json::Value>(&so).expect("chrome JSON on stdout");

    // A character device is written through, never replaced.
    let (code, _, se) = tool(&["export", s(&t), "--chrome", "/dev/null"]);
    assert_eq!(code, 0, "{se}");
    assert!(
        std::fs::symlink_metadata("/dev/null")
            .unwrap()
            .file_type()
            .is_symlink()
            || !std::fs::symlink_metadata("/dev/null").unwrap().is_file()
    );

    // A FIFO is written through: a reader gets the bytes and the FIFO stays a FIFO.
    let fifo = dir.path().join("out.fifo");
    mkfifo(&fifo);
    // A real thread: the FIFO's reader, outside any simulation.
    #[allow(clippy::disallowed_methods)]
    let reader = {
        let fifo = fifo.clone();
        std::thread::spawn(move || std::fs::read(&fifo).unwrap())
    };
    let (code, _, se) = tool(&["export", s(&t), "--html", s(&fifo)]);
    assert_eq!(code, 0, "{se}");
    let got = reader.join().unwrap();
    assert!(String::from_utf8_lossy(&got).starts_with("<!doctype html>"));
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::symlink_metadata(&fifo)
        .unwrap()
        .file_type()
        .is_fifo());

    // A symlink is refused and left as it is, its target untouched.
    let target = dir.path().join("target.txt");
    std::fs::write(&target, "keep me").unwrap();
    let link = dir.path().join("link.html");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (code, _, se) = tool(&["export", s(&t), "--html", s(&link)]);
    assert_eq!(code, 2, "{se}");
    assert!(
        se.contains("symbolic link") && se.contains("link.html"),
        "{se}"
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep me");

    // The input is never overwritten, by its own name or another.
    for out in [t.clone(), link_to(&t, dir.path())] {
        let (code, _, se) = tool(&["export", s(&t), "--html", s(&out)]);
        assert_eq!(code, 2, "{se}");
        if out == t {
            assert!(
                se.contains("is the input") && se.matches("t.jsonl").count() >= 2,
                "{se}"
            );
        }
        let (code, _, _) = tool(&["export", s(&t), "--chrome", s(&out)]);
        assert_eq!(code, 2);
    }
    let hard = dir.path().join("hard.jsonl");
    std::fs::hard_link(&t, &hard).unwrap();
    let (code, _, se) = tool(&["export", s(&t), "--chrome", s(&hard)]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("is the input"), "{se}");
    assert_eq!(std::fs::read(&t).unwrap(), before, "the input is untouched");

    // A directory is refused.
    let (code, _, se) = tool(&["export", s(&t), "--html", s(dir.path())]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("a directory"), "{se}");
}

fn link_to(t: &Path, dir: &Path) -> PathBuf {
    let l = dir.join("input-link.jsonl");
    std::os::unix::fs::symlink(t, &l).unwrap();
    l
}

fn sweep_summary(dir: &Path, k: u64) -> PathBuf {
    let v = serde_json::json!({
        "format": "calametra.sweep", "version": 1, "package": "p", "target": "t",
        "base_seed": "0x0", "partitions": [format!("{k}/2")], "budget": "10",
        "wall_s": 1.0, "threads": 2, "scenarios": [],
    });
    let p = dir.join(format!("part{k}.json"));
    std::fs::write(&p, v.to_string()).unwrap();
    p
}

#[test]
fn sweep_report_out_is_not_a_symlink_or_a_summary() {
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (sweep_summary(dir.path(), 1), sweep_summary(dir.path(), 2));
    let before = std::fs::read(&p1).unwrap();
    // Works, to stdout with `-` (the report then on stderr).
    let (code, so, se) = tool(&["sweep-report", s(&p1), s(&p2), "--out", "-"]);
    assert_eq!(code, 0, "{se}");
    assert!(so.contains("\"calametra.sweep\""), "{so}");
    assert!(se.contains("calametra sweep of p"), "{se}");
    // A symlink is refused, left as it is.
    let target = dir.path().join("target.json");
    std::fs::write(&target, "keep").unwrap();
    let link = dir.path().join("merged.json");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (code, _, se) = tool(&["sweep-report", s(&p1), s(&p2), "--out", s(&link)]);
    assert_eq!(code, 2, "{se}");
    assert!(se.contains("symbolic link"), "{se}");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    // A summary read is never the output.
    let (code, _, se) = tool(&["sweep-report", s(&p1), s(&p2), "--out", s(&p1)]);
    assert_eq!(code, 2, "{se}");
    assert!(
        se.contains("is the input") && se.contains("part1.json"),
        "{se}"
    );
    assert_eq!(std::fs::read(&p1).unwrap(), before);
}

#[test]
fn sweep_report_refuses_special_files_and_mismatched_partitions_naming_the_file() {
    let dir = tempfile::tempdir().unwrap();
    let (p1, p2) = (sweep_summary(dir.path(), 1), sweep_summary(dir.path(), 2));
    let fifo = dir.path().join("fifo.json");
    assert!(Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .unwrap()
        .success());
    // A FIFO or /dev/zero is refused before it is read (it would hang or fill memory).
    for special in [s(&fifo), "/dev/zero"] {
        let (code, _, se) = tool(&["sweep-report", s(&p1), special]);
        assert_eq!(code, 1, "{special}: {se}");
        assert!(
            se.contains(special) && se.contains("not a regular file"),
            "{se}"
        );
    }
    // A share of another split (1/2 with 2/3) is refused naming the file and the field.
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&p2).unwrap()).unwrap();
    v["partitions"] = serde_json::json!(["2/3"]);
    let other = dir.path().join("other.json");
    std::fs::write(&other, v.to_string()).unwrap();
    let (code, _, se) = tool(&["sweep-report", s(&p1), s(&other)]);
    assert_eq!(code, 1, "{se}");
    assert!(
        se.contains("other.json") && se.contains("field `partitions`"),
        "{se}"
    );
}

#[cfg(unix)]
#[test]
fn a_closed_pipe_ends_the_tool_quietly_never_a_panic() {
    use std::os::unix::process::ExitStatusExt;
    let dir = tempfile::tempdir().unwrap();
    let t = trace_file(dir.path(), "a.jsonl");
    for args in [
        vec!["show", s(&t)],
        vec!["diff", s(&t), s(&t)],
        vec!["export", s(&t), "--html", "-"],
    ] {
        // The reading end closed before the tool writes: `calametra ... | head -0`.
        let (r, w) = std::io::pipe().unwrap();
        drop(r);
        let out = Command::new(env!("CARGO_BIN_EXE_calametra"))
            .args(&args)
            .stdin(Stdio::null())
            .stdout(w)
            .stderr(Stdio::piped())
            .output()
            .unwrap();
        let se = String::from_utf8_lossy(&out.stderr);
        assert!(!se.contains("panicked"), "{args:?}: {se}");
        assert_eq!(
            out.status.signal(),
            Some(13),
            "{args:?}: SIGPIPE ends it: {se}"
        );
    }
}

#[test]
fn html_export_escapes_placeholders_and_markup_in_one_pass() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace_file(dir.path(), "__LANES__{{TITLE}}__DATA__<b>.jsonl");
    let out = dir.path().join("out.html");
    let (code, _, se) = tool(&["export", s(&t), "--html", s(&out)]);
    assert_eq!(code, 0, "{se}");
    let h = std::fs::read_to_string(&out).unwrap();
    assert!(!h.contains("<img"), "markup from the trace landed raw");
    assert!(!h.contains("<b>"), "markup from the file name landed raw");
    // Each placeholder of the template filled exactly once; the inserted names stay text.
    let title = &h[h.find("<title>").unwrap()..h.find("</title>").unwrap()];
    assert!(
        title.contains("__LANES__{{TITLE}}__DATA__&lt;b&gt;.jsonl"),
        "{title}"
    );
    let h1 = &h[h.find("<h1>").unwrap()..h.find("</h1>").unwrap()];
    assert!(h1.contains("__LANES__"), "{h1}");
    assert!(h.contains("__TITLE__{{TITLE}}\\u003cimg src=x onerror=alert(1)\\u003e"));
    assert_eq!(h.matches("</script>").count(), 1);
    assert!(!h.contains("<!--"));
    assert_eq!(h.matches("var lanes = [").count(), 1);
    assert_eq!(h.matches("var data = [").count(), 1);
}

#[test]
fn show_sanitizes_terminal_escapes_and_refuses_special_files() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace_file(dir.path(), "t.jsonl");
    let (code, so, se) = tool(&["show", s(&t)]);
    assert_eq!(code, 0, "{se}");
    assert!(!so.contains('\x1b') && !so.contains('\x07'), "{so:?}");
    assert!(so.contains("\\u{1b}[2J") && so.contains("\\u{7}"), "{so}");

    // diff prints the records' strings cleaned too.
    let t2 = dir.path().join("t2.jsonl");
    let text = std::fs::read_to_string(&t).unwrap();
    std::fs::write(&t2, text.replacen("\"t_ns\":0", "\"t_ns\":1", 1)).unwrap();
    let (_, so, _) = tool(&["diff", s(&t), s(&t2)]);
    assert!(!so.contains('\x1b'), "{so:?}");

    // Special files as inputs: a clear error, never a hang.
    let fifo = dir.path().join("in.fifo");
    mkfifo(&fifo);
    for input in [Path::new("/dev/zero"), fifo.as_path()] {
        let (code, _, se) = tool(&["show", s(input)]);
        assert_eq!(code, 1, "{se}");
        assert!(se.contains("not a regular file"), "{se}");
        let (code, _, se) = tool(&["diff", s(input), s(&t)]);
        assert_eq!(code, 2, "{se}");
        assert!(se.contains("not a regular file"), "{se}");
        let (code, _, se) = tool(&["export", s(input), "--chrome", "-"]);
        assert_eq!(code, 1, "{se}");
        assert!(se.contains("not a regular file"), "{se}");
    }
}

fn spec() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/trigger6-jcd543.json")
}

#[test]
fn compare_that_compares_nothing_fails() {
    let dir = tempfile::tempdir().unwrap();
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../refdata/trace-JCD543-20220514T1928-4k-edid.pcapng.gz");
    let spec = spec();
    // A --device that matches nothing.
    let (code, _, se) = tool(&[
        "compare",
        "--capture",
        s(&real),
        "--spec",
        s(&spec),
        "--device",
        "99:99",
    ]);
    assert_eq!(code, 1, "{se}");
    assert!(
        se.contains("nothing was compared") && se.contains("99:99"),
        "{se}"
    );

    // A header-only pcap (usbmon link type 220), a comment-only usbmon text, an empty file.
    let mut pcap = vec![0xd4, 0xc3, 0xb2, 0xa1, 2, 0, 4, 0];
    pcap.extend_from_slice(&[0; 8]);
    pcap.extend_from_slice(&65535u32.to_le_bytes());
    pcap.extend_from_slice(&220u32.to_le_bytes());
    let header_only = dir.path().join("header.pcap");
    std::fs::write(&header_only, &pcap).unwrap();
    let comments = dir.path().join("comments.txt");
    std::fs::write(&comments, "# nothing here\n# at all\n").unwrap();
    let empty = dir.path().join("empty.txt");
    std::fs::write(&empty, "").unwrap();
    for cap in [&header_only, &comments, &empty] {
        let (code, so, se) = tool(&["compare", "--capture", s(cap), "--spec", s(&spec)]);
        assert_eq!(code, 1, "{}: {so}{se}", cap.display());
        assert!(
            se.contains("nothing was compared") || se.contains("empty"),
            "{}: {se}",
            cap.display()
        );
    }
}

#[test]
fn compare_refuses_special_files_and_checks_the_magic_first() {
    let dir = tempfile::tempdir().unwrap();
    let spec = spec();
    let fifo = dir.path().join("cap.fifo");
    mkfifo(&fifo);
    for cap in [Path::new("/dev/zero"), fifo.as_path()] {
        let (code, _, se) = tool(&["compare", "--capture", s(cap), "--spec", s(&spec)]);
        assert_eq!(code, 1, "{se}");
        assert!(se.contains("not a regular file"), "{se}");
    }
    let (code, _, se) = tool(&["compare", "--capture", s(&spec), "--spec", "/dev/zero"]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("not a regular file"), "{se}");
    // Binary that is no capture: refused from its first bytes.
    let junk = dir.path().join("junk.bin");
    std::fs::write(&junk, [0u8, 1, 2, 3, 0xff, 0xfe, 0, 0, 9, 9]).unwrap();
    let (code, _, se) = tool(&["compare", "--capture", s(&junk), "--spec", s(&spec)]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("first bytes"), "{se}");
}

#[test]
fn compare_frames_are_written_through_the_output_writer() {
    let dir = tempfile::tempdir().unwrap();
    let real = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../refdata/trace-JCD543-20220514T1928-4k-edid.pcapng.gz");
    let frames = dir.path().join("frames");
    std::fs::create_dir(&frames).unwrap();
    // A symlink planted where the first frame goes: refused, left as it is.
    let target = dir.path().join("elsewhere.txt");
    std::fs::write(&target, "keep").unwrap();
    let link = frames.join("01-out0-fence1-rgb24-3840x2160.png");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (code, _, se) = tool(&[
        "compare",
        "--capture",
        s(&real),
        "--spec",
        s(&spec()),
        "--frames",
        s(&frames),
    ]);
    assert_eq!(code, 1, "{se}");
    assert!(
        se.contains("symbolic link") && se.contains("01-out0"),
        "{se}"
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read_to_string(&target).unwrap(), "keep");
    // The other frames are written as PNGs.
    let png = std::fs::read(frames.join("02-out0-fence2-rgb24-3840x2160.png")).unwrap();
    assert!(png.starts_with(b"\x89PNG"));
}

#[test]
fn replay_and_error_messages_print_file_names_cleaned() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace_file(dir.path(), "t\x1b]0;pwned\x07.jsonl");
    let (_, so, se) = tool(&["replay", s(&t), "--cargo", "/bin/false"]);
    assert!(
        so.contains("replaying") && so.contains("\\u{1b}]0;pwned\\u{7}"),
        "{so}"
    );
    assert!(
        !so.contains('\x1b') && !se.contains('\x1b'),
        "{so:?} {se:?}"
    );
    let missing = dir.path().join("gone\x1b[2J.jsonl");
    let (code, so, se) = tool(&["show", s(&missing)]);
    assert_eq!(code, 1, "{se}");
    assert!(se.contains("\\u{1b}[2J"), "{se}");
    assert!(!so.contains('\x1b') && !se.contains('\x1b'), "{se:?}");
}
