//! The `calametra` tool on real files: good traces and regression files, and bad ones
//! (truncated JSONL, an empty file, a wrong format version, a missing file). A bad file is a
//! clear message and a non-zero exit, never a panic.

use calametra::choices::Source;
use calametra::report::write_trace;
use calametra::{run, RunConfig, Sim};
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::process::Command;

mod support;
use support::tool;

fn scenario(sim: &mut Sim) {
    support::loopback_reader(sim, "driver", 3);
}

fn trace_file(dir: &Path, name: &str, seed: u64) -> PathBuf {
    let r = run(
        RunConfig {
            source: Source::Seeded(seed),
            keep_trace: true,
            // Without a swarm two seeds' runs first part ways in time (a swarm's `config`
            // record, the first, would differ before that).
            swarm: false,
            ..RunConfig::default()
        },
        &scenario,
    );
    let p = dir.join(name);
    write_trace(
        &p,
        &r.lines,
        "cli::scenario",
        "calametra",
        "cli",
        &r.events,
        &r.hash.to_string(),
        None,
    )
    .unwrap();
    p
}

#[test]
fn diff_show_and_export_on_real_traces() {
    let dir = tempfile::tempdir().unwrap();
    let a = trace_file(dir.path(), "a.jsonl", 1);
    let a2 = trace_file(dir.path(), "a2.jsonl", 1);
    let b = trace_file(dir.path(), "b.jsonl", 2);
    let (code, out) = tool(&["diff", a.to_str().unwrap(), a2.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("identical"));
    let (code, out) = tool(&[
        "diff",
        a.to_str().unwrap(),
        b.to_str().unwrap(),
        "--context",
        "3",
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("first divergent record") && out.contains("fields that differ: t_ns"),
        "{out}"
    );
    assert!(
        out.contains("transfer") && out.contains("records per kind"),
        "{out}"
    );
    let (code, out) = tool(&["show", a.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("trace hash: sha256:") && out.contains("ctrl.load#3 ok"),
        "{out}"
    );
    let chrome = dir.path().join("a.chrome.json");
    let html = dir.path().join("a.html");
    let (code, out) = tool(&[
        "export",
        a.to_str().unwrap(),
        "--chrome",
        chrome.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    let v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&chrome).unwrap()).unwrap();
    assert!(v["traceEvents"].as_array().unwrap().len() > 5);
    assert!(std::fs::read_to_string(&html)
        .unwrap()
        .contains("data-rendered"));
}

#[test]
fn bad_files_are_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let good = trace_file(dir.path(), "good.jsonl", 1);
    let text = std::fs::read_to_string(&good).unwrap();
    let truncated = dir.path().join("truncated.jsonl");
    std::fs::write(&truncated, &text[..text.len() - 7]).unwrap();
    let empty = dir.path().join("empty.jsonl");
    std::fs::write(&empty, "").unwrap();
    let missing = dir.path().join("missing.jsonl");
    let garbage = dir.path().join("garbage.jsonl");
    std::fs::write(&garbage, "{\"seq\":\"x\"}\n").unwrap();
    let wrong_version = dir.path().join("reg.json");
    std::fs::write(
        &wrong_version,
        r#"{"format":"calametra.regression","version":99}"#,
    )
    .unwrap();

    for (args, needle) in [
        (
            vec!["show", truncated.to_str().unwrap()],
            "truncated record",
        ),
        (
            vec!["diff", good.to_str().unwrap(), truncated.to_str().unwrap()],
            "truncated record",
        ),
        (
            vec!["export", empty.to_str().unwrap(), "--html", "/dev/null"],
            "empty trace",
        ),
        (vec!["show", empty.to_str().unwrap()], "empty"),
        (vec!["show", missing.to_str().unwrap()], "missing.jsonl"),
        (
            vec!["diff", missing.to_str().unwrap(), good.to_str().unwrap()],
            "cannot open",
        ),
        (vec!["show", garbage.to_str().unwrap()], "field `seq`"),
        (
            vec!["show", wrong_version.to_str().unwrap()],
            "field `version`",
        ),
        (
            vec!["replay", wrong_version.to_str().unwrap()],
            "field `version`",
        ),
        (vec!["replay", missing.to_str().unwrap()], "missing.jsonl"),
    ] {
        let (code, out) = tool(&args);
        assert_ne!(code, 0, "{args:?}: {out}");
        assert!(
            out.contains(needle),
            "{args:?}: expected `{needle}` in: {out}"
        );
    }
    let (code, out) = tool(&["frobnicate"]);
    assert_eq!(code, 2);
    assert!(
        out.contains("unrecognized subcommand 'frobnicate'") && out.contains("Usage:"),
        "{out}"
    );
    let (code, out) = tool(&["export", good.to_str().unwrap()]);
    assert_eq!(code, 2, "{out}");
}

/// The tool run with `args` as raw OS strings: (exit code, stdout, stderr).
fn tool_os(args: &[&OsStr]) -> (i32, String, String) {
    let out = Command::new(env!("CARGO_BIN_EXE_calametra"))
        .args(args)
        .output()
        .expect("run calametra");
    let (stdout, stderr) = (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    );
    assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    (out.status.code().unwrap_or(-1), stdout, stderr)
}

fn os<'a>(args: &[&'a str]) -> Vec<&'a OsStr> {
    args.iter().map(|a| OsStr::new(*a)).collect()
}

#[test]
fn help_version_and_completions_exit_0() {
    let (code, out, _) = tool_os(&os(&["--help"]));
    assert_eq!(code, 0, "{out}");
    for cmd in [
        "replay",
        "diff",
        "determinism",
        "show",
        "review",
        "sweep-report",
        "export",
        "compare",
        "qemu",
        "completions",
    ] {
        assert!(out.contains(cmd), "--help does not list `{cmd}`:\n{out}");
    }
    // Per-command help, as `--help` and as `help <COMMAND>`.
    let (code, replay, _) = tool_os(&os(&["replay", "--help"]));
    assert_eq!(code, 0, "{replay}");
    assert!(
        replay.contains("Usage: calametra replay") && replay.contains("--at <STEP>"),
        "{replay}"
    );
    let (code, help_replay, _) = tool_os(&os(&["help", "replay"]));
    assert_eq!(code, 0, "{help_replay}");
    assert!(
        help_replay.contains("Usage: calametra replay"),
        "{help_replay}"
    );
    for v in ["-V", "--version"] {
        let (code, out, _) = tool_os(&os(&[v]));
        assert_eq!(code, 0, "{out}");
        assert_eq!(out.trim(), concat!("calametra ", env!("CARGO_PKG_VERSION")));
    }
    for shell in ["bash", "zsh", "fish"] {
        let (code, out, err) = tool_os(&os(&["completions", shell]));
        assert_eq!(code, 0, "{shell}: {err}");
        assert!(
            out.contains("calametra") && out.contains("replay") && out.contains("context"),
            "{shell}: {out}"
        );
    }
    let (code, _, err) = tool_os(&os(&["completions", "tcsh"]));
    assert_eq!(code, 2, "{err}");
}

#[test]
fn options_take_equals_signs_and_bad_arguments_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let a = trace_file(dir.path(), "a.jsonl", 1);
    let b = trace_file(dir.path(), "b.jsonl", 2);
    // `--opt=value` and `--opt value` are the same option.
    let (code, eq, _) = tool_os(&[
        OsStr::new("diff"),
        a.as_os_str(),
        b.as_os_str(),
        OsStr::new("--context=3"),
    ]);
    assert_eq!(code, 1, "{eq}");
    let (_, spaced, _) = tool_os(&[
        OsStr::new("diff"),
        a.as_os_str(),
        b.as_os_str(),
        OsStr::new("--context"),
        OsStr::new("3"),
    ]);
    assert_eq!(eq, spaced);
    // A number that is not one, an unknown option, a missing argument: exit 2, saying what.
    for (args, needle) in [
        (
            vec!["diff", "x.jsonl", "y.jsonl", "--context=many"],
            "--context",
        ),
        (vec!["show", "x.jsonl", "--frobnicate"], "--frobnicate"),
        (vec!["diff", "x.jsonl"], "<B>"),
        (vec!["export", "x.jsonl"], "--chrome"),
    ] {
        let (code, _, err) = tool_os(&os(&args));
        assert_eq!(code, 2, "{args:?}: {err}");
        assert!(
            err.contains(needle),
            "{args:?}: expected `{needle}` in {err}"
        );
    }
}

#[test]
fn a_non_utf8_argument_is_a_clear_error_never_a_panic() {
    let bad = OsStr::from_bytes(b"caf\xe9.jsonl");
    // A file name is any OS string: it is looked for, and reported missing.
    let (code, _, err) = tool_os(&[OsStr::new("show"), bad]);
    assert_eq!(code, 1, "{err}");
    assert!(err.contains("caf") && err.contains("cannot"), "{err}");
    // Where text is needed (a package name, a subcommand), it is a usage error.
    let (code, _, err) = tool_os(&[OsStr::new("review"), OsStr::new("--package"), bad]);
    assert_eq!(code, 2, "{err}");
    assert!(err.contains("invalid UTF-8"), "{err}");
    let (code, _, err) = tool_os(&[bad]);
    assert_eq!(code, 2, "{err}");
}

/// A file of the repository's `refdata/` folder.
fn refdata(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../refdata")
        .join(name);
    assert!(
        p.exists(),
        "refdata {} not found: it is part of the repository",
        p.display()
    );
    p
}

#[test]
fn the_real_capture_compares_clean_from_the_command_line() {
    let cap = refdata("trace-JCD543-20220514T1928-4k-edid.pcapng.gz");
    let spec = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/trigger6-jcd543.json");
    let frames = Path::new(env!("CARGO_TARGET_TMPDIR")).join("cli-compare-frames");
    let _ = std::fs::remove_dir_all(&frames);
    let (code, out) = tool(&[
        "compare",
        "--capture",
        cap.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
        "--frames",
        frames.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("75 control transfers: 75 same, 0 differ, 0 model stalls, 0 capture stalls"),
        "{out}"
    );
    // The bulk and interrupt paths too, and the four frames as pictures.
    assert!(
        out.contains("bulk OUT 0x02: 2168 transfers (87462080 bytes): 2168 same, 0 differ"),
        "{out}"
    );
    assert!(
        out.contains("interrupt IN 0x83: 12 transfers (448 bytes): 10 same, 0 differ"),
        "{out}"
    );
    assert!(out.contains("2 explained, 0 unexplained"), "{out}");
    assert!(out.contains("bulk commands accepted: 1084"), "{out}");
    assert!(out.contains("frames reassembled and flipped: 4"), "{out}");
    let mut pngs: Vec<String> = std::fs::read_dir(&frames)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    pngs.sort();
    assert_eq!(
        pngs,
        [
            "01-out0-fence1-rgb24-3840x2160.png",
            "02-out0-fence2-rgb24-3840x2160.png",
            "03-out0-fence3-rgb24-3840x2160.png",
            "04-out0-fence4-nv12-3840x2160.png",
        ]
    );
    let (code, out) = tool(&[
        "compare",
        "--capture",
        cap.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
        "--no-hotplug",
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("7 explained, 0 unexplained"), "{out}");
    // A capture that is not one is a clear error.
    let (code, out) = tool(&[
        "compare",
        "--capture",
        spec.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("trigger6-jcd543.json"), "{out}");
}

/// `show` of a saved case prints the command that replays that file: the regression trial of
/// its file name (not of the `id` inside it), or CALAMETRA_REPLAY_FILE for a file not named as
/// a case (issue 41).
#[test]
fn show_prints_a_replay_command_for_the_file_shown() {
    let case = Path::new(env!("CARGO_MANIFEST_DIR")).join(
        "../examples/dfu-updater/calametra-regressions/scenarios/planted_success_without_manifest/d07b88f2dd1d.json",
    );
    let dir = tempfile::tempdir().unwrap();
    let renamed = dir.path().join("0123456789ab.json");
    std::fs::copy(&case, &renamed).unwrap();
    let (code, out) = tool(&["show", renamed.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("replay:    cargo test -p calametra-example-dfu-updater --test scenarios -- --exact planted_success_without_manifest::regression::0123456789ab\n"),
        "{out}"
    );
    let loose = dir.path().join("bug report.json");
    std::fs::copy(&case, &loose).unwrap();
    let (code, out) = tool(&["show", loose.to_str().unwrap()]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains(&format!(
            "replay:    CALAMETRA_REPLAY_FILE='{}' cargo test -p calametra-example-dfu-updater --test scenarios -- --exact planted_success_without_manifest::replay\n",
            loose.display()
        )),
        "{out}"
    );
}

#[test]
fn compare_finds_models_by_format_and_names_the_registered_ones() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("one.usbmon");
    std::fs::write(
        &cap,
        "ffff1 100 S Ci:1:002:0 s 80 06 0100 0000 0012 18 <\nffff1 110 C Ci:1:002:0 -32 0\n",
    )
    .unwrap();
    let spec = dir.path().join("widget.json");
    std::fs::write(
        &spec,
        r#"{"format": "mycompany.spec.widget", "version": 1, "source": "a test"}"#,
    )
    .unwrap();
    let (code, out) = tool(&[
        "compare",
        "--capture",
        cap.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("widget.json: field `format`: `mycompany.spec.widget`")
            && out.contains(
                "registered: calametra.spec.cdc_acm, calametra.spec.dfu, calametra.spec.hid, calametra.spec.learned, calametra.spec.msc, calametra.spec.trigger6"
            ),
        "{out}"
    );
    // A DFU spec is found by its format; it has no whole-capture comparison, so no pictures.
    let dfu = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/dfu11-tolerant.json");
    let (code, out) = tool(&[
        "compare",
        "--capture",
        cap.to_str().unwrap(),
        "--spec",
        dfu.to_str().unwrap(),
        "--frames",
        dir.path().join("frames").to_str().unwrap(),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(
        out.contains(
            "--frames needs a model that compares whole captures (calametra.spec.learned, calametra.spec.trigger6)"
        ),
        "{out}"
    );
    // Without --frames it replays the control transfers against the DFU model, which has a
    // device descriptor where this capture stalled.
    let (code, out) = tool(&[
        "compare",
        "--capture",
        cap.to_str().unwrap(),
        "--spec",
        dfu.to_str().unwrap(),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains(
            "get_descriptor(device)     capture stalls; model answered 18 bytes [UNEXPLAINED]"
        ),
        "{out}"
    );
}

/// A stand-in for cargo that writes, where `CALAMETRA_COMPARE_OUT` says, what a test binary's
/// harness writes for `compare --package P --test T` (`json`, in which `SPEC` becomes the
/// spec path it was given), or nothing when `json` is empty.
fn fake_compare_cargo(dir: &Path, json: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join("fake-cargo");
    let body = if json.is_empty() {
        "#!/bin/sh\nexit 0\n".to_string()
    } else {
        format!(
            "#!/bin/sh\nprintf '%s' '{}' | sed \"s|SPEC|$CALAMETRA_COMPARE_SPEC|\" > \"$CALAMETRA_COMPARE_OUT\"\n",
            json
        )
    };
    std::fs::write(&p, body).unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

#[test]
fn compare_in_a_test_binary_prints_its_result_and_exits_as_compare_does() {
    let dir = tempfile::tempdir().unwrap();
    let cap = dir.path().join("c.usbmon");
    std::fs::write(&cap, "").unwrap();
    let spec = dir.path().join("widget.json");
    std::fs::write(&spec, "{}").unwrap();
    let run = |json: &str, extra: &[&str]| {
        let cargo = fake_compare_cargo(dir.path(), json);
        let mut args = vec![
            "compare",
            "--capture",
            cap.to_str().unwrap(),
            "--spec",
            spec.to_str().unwrap(),
            "--package",
            "my-driver",
            "--test",
            "models",
            "--cargo",
            cargo.to_str().unwrap(),
        ];
        args.extend_from_slice(extra);
        tool(&args)
    };
    // The spec goes to the test binary by its absolute path; its report is printed.
    let (code, out) = run(
        r#"{"text": "compared SPEC\n", "compared": 3, "clean": true}"#,
        &[],
    );
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("test -p my-driver --test models -- --exact calametra::compare"),
        "{out}"
    );
    let abs = std::fs::canonicalize(&spec).unwrap();
    assert!(
        out.contains(&format!("compared {}", abs.display())),
        "{out}"
    );
    let (code, out) = run(r#"{"text": "x\n", "compared": 3, "clean": false}"#, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("the model differs from the capture"), "{out}");
    let (code, out) = run(r#"{"text": "", "compared": 0, "clean": true}"#, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("nothing was compared"), "{out}");
    let (code, out) = run(r#"{"error": "widget.json: field `format`: unknown"}"#, &[]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("field `format`: unknown"), "{out}");
    // A binary that wrote nothing (not a calametra::main!() target) is named, with the fix.
    let (code, out) = run("", &[]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("calametra::main!()") && out.contains("calametra_capture"),
        "{out}"
    );
    // --frames is for the tool's own models; a bad name is a usage error.
    let (code, out) = run("", &["--frames", "x"]);
    assert_eq!(code, 2, "{out}");
    let (code, out) = tool(&[
        "compare",
        "--capture",
        cap.to_str().unwrap(),
        "--spec",
        spec.to_str().unwrap(),
        "--package",
        "-x",
        "--test",
        "t",
    ]);
    assert_eq!(code, 2, "{out}");
}
