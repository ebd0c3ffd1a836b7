//! Pictures as a user meets them (issue 21), with the harness binary `scanout` (Trigger 6
//! scenarios on the dock's second output: `bars_shown` passes, `bars_on_output_1` fails once a
//! frame is on show) and the `calametra` tool:
//!
//! - a failing scenario run with `CALAMETRA_SCANOUT=<dir>` writes the dock's scanout as a PNG
//!   and its failure screen names the file (without the variable, no line and no file); a
//!   symlink where the PNG goes is refused and left as it is, and a variable naming a file is
//!   refused when the binary starts;
//! - the replay trial with `CALAMETRA_SCANOUT` writes every frame its run showed and the index;
//! - `calametra show TRACE --at STEP --scanout DIR` writes the picture on show at STEP (the
//!   second flip at the step it is first seen, the first a step before, none before the first),
//!   `replay --scanout DIR` the one at the end of the replay, and a failing case's frame is the
//!   one at the end of its run;
//! - `calametra export TRACE --html OUT --frames` embeds the five frames, each linked from the
//!   flip that showed it, and each decodes to the pinned colour bars.
//!
//! The tool runs the test binary through `--cargo`, a stand-in that runs the built `scanout`
//! binary with the arguments cargo would pass it after `--`.

mod support;

use calametra_models::trigger6::scanout::decode_png;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use support::{calametra_tool, clean, run, run_code};

/// SHA-256 of the colour bars' pixels at 1920x1080, as examples/trigger6/tests/trigger6.rs
/// pins them.
const BARS_PICTURE: &str = "fe031f5c2492e7584f2c17f5a31a11a0b8dd13849c54293035a390d5f40cbaf6";

fn scanout_bin(regs: &Path) -> Command {
    let mut c = clean(Command::new(env!("CARGO_BIN_EXE_scanout")));
    c.env("CALAMETRA_REGRESSIONS", regs)
        .args(["--exact", "bars_on_output_1::baseline"]);
    c
}

/// The value of the screen's line `head`, first match.
fn line<'a>(text: &'a str, head: &str) -> &'a str {
    text.lines()
        .find_map(|l| l.strip_prefix(head))
        .unwrap_or_else(|| panic!("no `{head}` line in:\n{text}"))
        .trim()
}

/// The PNG's size and the SHA-256 of its pixels.
fn picture(path: &Path) -> (u32, u32, String) {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let (w, h, px) = decode_png(&bytes).unwrap();
    (w, h, calametra::trace::sha256_hex(&px))
}

/// The failing run, with its pictures in `dir/pics`: the screen, the case and the trace.
fn fail_with_scanout(dir: &Path) -> (String, PathBuf, PathBuf) {
    let (ok, text) = run(scanout_bin(&dir.join("regs")).env("CALAMETRA_SCANOUT", dir.join("pics")));
    assert!(!ok, "the scenario fails:\n{text}");
    let case = PathBuf::from(line(&text, "regression: "));
    let trace = PathBuf::from(line(&text, "trace:      "));
    (text, case, trace)
}

#[test]
fn a_failing_trigger6_scenario_writes_its_scanout_and_the_screen_names_it() {
    let dir = tempfile::tempdir().unwrap();
    let (text, case, _) = fail_with_scanout(dir.path());
    assert!(text.contains("invariant `output_1_dark` broke"), "{text}");
    let scanout = line(&text, "scanout:    ");
    let (file, about) = scanout.split_once(" (").unwrap();
    let id = case.file_stem().unwrap().to_str().unwrap();
    let want = dir
        .path()
        .join("pics")
        .join(id)
        .join("01-trigger6-out1-flip1-fence1-nv12-1920x1080.png");
    assert_eq!(Path::new(file), want, "{text}");
    assert!(
        about.starts_with("output 1, nv12 1920x1080, fence 1"),
        "{about}"
    );
    assert_eq!(
        picture(&want),
        (1920, 1080, BARS_PICTURE.to_string()),
        "the colour bars"
    );
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(want.with_file_name("pictures.json")).unwrap())
            .unwrap();
    assert_eq!(index["pictures"].as_array().unwrap().len(), 1);
    assert_eq!(index["pictures"][0]["on_show"], true);
    assert_eq!(index["pictures"][0]["device"], "trigger6");

    // Not asked for: no line, no picture.
    let other = tempfile::tempdir().unwrap();
    let (ok, text) = run(&mut scanout_bin(&other.path().join("regs")));
    assert!(!ok);
    assert!(!text.contains("scanout:"), "{text}");

    // A CALAMETRA_SCANOUT that is a file is refused when the binary starts (exit 2).
    let file = other.path().join("a-file");
    std::fs::write(&file, b"kept").unwrap();
    let out = scanout_bin(&other.path().join("regs"))
        .env("CALAMETRA_SCANOUT", &file)
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(
        err.contains("CALAMETRA_SCANOUT=") && err.contains("not a directory"),
        "{err}"
    );
    assert_eq!(std::fs::read(&file).unwrap(), b"kept");

    // A symlink where the PNG goes is refused, named, and left pointing where it did.
    let sym = tempfile::tempdir().unwrap();
    let target = sym.path().join("elsewhere.png");
    std::fs::write(&target, b"mine").unwrap();
    let pics = sym.path().join("pics").join(id);
    std::fs::create_dir_all(&pics).unwrap();
    let link = pics.join("01-trigger6-out1-flip1-fence1-nv12-1920x1080.png");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let (ok, text) = run(
        scanout_bin(&sym.path().join("regs")).env("CALAMETRA_SCANOUT", sym.path().join("pics"))
    );
    assert!(!ok);
    let l = line(&text, "scanout:    not written: ");
    assert!(
        l.contains("is not a regular file") && l.contains(&*link.to_string_lossy()),
        "{l}"
    );
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());
    assert_eq!(std::fs::read(&target).unwrap(), b"mine");
}

/// The stand-in for cargo: runs the `scanout` binary with what follows `--`.
fn fake_cargo(dir: &Path) -> PathBuf {
    let p = dir.join("fake-cargo");
    std::fs::write(
        &p,
        format!(
            "#!/bin/sh\nwhile [ \"$#\" -gt 0 ] && [ \"$1\" != -- ]; do shift; done\nshift\nexec '{}' \"$@\"\n",
            env!("CARGO_BIN_EXE_scanout")
        ),
    )
    .unwrap();
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).unwrap();
    p
}

fn tool(args: &[&std::ffi::OsStr]) -> (i32, String) {
    run_code(clean(Command::new(calametra_tool())).args(args))
}

/// The passing scenario's trace (`CALAMETRA_TRACE_OUT`) and the pictures its replay trial
/// writes (`CALAMETRA_REPLAY_FILE` with `CALAMETRA_SCANOUT`): the steps they appeared at.
fn shown_trace(dir: &Path) -> (PathBuf, Vec<u64>) {
    let trace = dir.join("shown.jsonl");
    let (ok, text) = run(clean(Command::new(env!("CARGO_BIN_EXE_scanout")))
        .env("CALAMETRA_TRACE_OUT", &trace)
        .args(["--exact", "bars_shown::baseline"]));
    assert!(ok, "{text}");
    let pics = dir.join("replayed");
    let (ok, text) = run(clean(Command::new(env!("CARGO_BIN_EXE_scanout")))
        .env("CALAMETRA_REPLAY_FILE", &trace)
        .env("CALAMETRA_SCANOUT", &pics)
        .args(["--exact", "bars_shown::replay"]));
    assert!(ok, "{text}");
    let index: serde_json::Value =
        serde_json::from_slice(&std::fs::read(pics.join("pictures.json")).unwrap()).unwrap();
    let pictures = index["pictures"].as_array().unwrap();
    let names: Vec<&str> = pictures
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        names,
        (1..=5)
            .map(|n| format!("out1-flip{n}-fence{n}-nv12-1920x1080"))
            .collect::<Vec<_>>(),
        "every flip the replay showed"
    );
    let on_show: Vec<bool> = pictures.iter().map(|p| p["on_show"] == true).collect();
    assert_eq!(on_show, [false, false, false, false, true]);
    for p in pictures {
        let (w, h, sha) = picture(&pics.join(p["file"].as_str().unwrap()));
        assert_eq!((w, h, sha.as_str()), (1920, 1080, BARS_PICTURE));
    }
    let steps = pictures
        .iter()
        .map(|p| p["step"].as_u64().unwrap())
        .collect();
    (trace, steps)
}

#[test]
fn the_tool_writes_the_scanout_at_a_step_and_after_a_replay_and_the_timeline_embeds_the_frames() {
    let dir = tempfile::tempdir().unwrap();
    let (trace, steps) = shown_trace(dir.path());
    let cargo = fake_cargo(dir.path()).into_os_string();
    let os = |s: &str| std::ffi::OsString::from(s);
    let trace = trace.into_os_string();
    let name = |n: u64| format!("trigger6-out1-flip{n}-fence{n}-nv12-1920x1080.png");

    // At the step the second flip is first seen: it is on show; a step before, the first.
    for (step, flip) in [(steps[1], 2), (steps[1] - 1, 1)] {
        let out = dir.path().join(format!("at-{step}"));
        let (code, text) = tool(&[
            &os("show"),
            &trace,
            &os("--at"),
            &os(&step.to_string()),
            &os("--scanout"),
            out.as_os_str(),
            &os("--cargo"),
            &cargo,
        ]);
        assert_eq!(code, 0, "{text}");
        let png = out.join(name(flip));
        assert!(
            text.contains(&format!("scanout at step {step}: wrote {}", png.display())),
            "{text}"
        );
        assert_eq!(picture(&png), (1920, 1080, BARS_PICTURE.to_string()));
        assert_eq!(
            std::fs::read_dir(&out).unwrap().count(),
            1,
            "one output shows a frame"
        );
        // The scripted dock describes its model in the state printed.
        assert!(
            text.contains("out1.mode") && text.contains("1920x1080@60"),
            "{text}"
        );
    }
    // Before the first flip: nothing on show, nothing written.
    let before = dir.path().join("before");
    let (code, text) = tool(&[
        &os("show"),
        &trace,
        &os("--at"),
        &os(&(steps[0] - 1).to_string()),
        &os("--scanout"),
        before.as_os_str(),
        &os("--cargo"),
        &cargo,
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("no device shows a picture"), "{text}");
    assert!(!before.exists(), "nothing written");

    // After a replay: the last flip, the replay byte-exact.
    let end = dir.path().join("end");
    let (code, text) = tool(&[
        &os("replay"),
        &trace,
        &os("--scanout"),
        end.as_os_str(),
        &os("--cargo"),
        &cargo,
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(text.contains("identical"), "{text}");
    assert_eq!(
        picture(&end.join(name(5))),
        (1920, 1080, BARS_PICTURE.to_string())
    );

    // The timeline embeds the five frames, each linked from the flip that showed it.
    let html = dir.path().join("run.html");
    let (code, text) = tool(&[
        &os("export"),
        &trace,
        &os("--html"),
        html.as_os_str(),
        &os("--frames"),
        &os("--cargo"),
        &cargo,
    ]);
    assert_eq!(code, 0, "{text}");
    let page = std::fs::read_to_string(&html).unwrap();
    let flips: Vec<&str> = page
        .split("{\"seq\":")
        .filter(|d| d.contains("\"label\":\"flip_secondary: pending -\\u003e shown\""))
        .collect();
    assert_eq!(flips.len(), 5, "{text}");
    for (k, flip) in flips.iter().enumerate() {
        assert!(flip.contains(&format!("\"frames\":[{}]", k + 1)), "{flip}");
        let seq = flip.split(',').next().unwrap();
        assert!(page.contains(&format!("<a href=\"#ev-{seq}\">event #{seq}</a>")));
        let data = page
            .split(&format!(
                "<figure id=\"frame-{}\"><img src=\"data:image/png;base64,",
                k + 1
            ))
            .nth(1)
            .expect("the frame embedded")
            .split('"')
            .next()
            .unwrap();
        let (w, h, px) = decode_png(&unbase64(data)).unwrap();
        assert_eq!((w, h), (1920, 1080));
        assert_eq!(calametra::trace::sha256_hex(&px), BARS_PICTURE);
    }
    assert_eq!(page.matches("<figure").count(), 5);

    // A failing case's replay shows its frame at the end of the run, which ends before the
    // step asked for.
    let (_, case, _) = fail_with_scanout(dir.path());
    let failed = dir.path().join("failed");
    let (code, text) = tool(&[
        &os("show"),
        case.as_os_str(),
        &os("--at"),
        &os("100000"),
        &os("--scanout"),
        failed.as_os_str(),
        &os("--cargo"),
        &cargo,
    ]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains(
            "scanout at the end of the run, before step 100000 (invariant `output_1_dark` broke"
        ),
        "{text}"
    );
    assert_eq!(
        picture(&failed.join(name(1))),
        (1920, 1080, BARS_PICTURE.to_string())
    );
}

/// Standard base64 decoded (the test's own, to read back what the page embeds).
fn unbase64(s: &str) -> Vec<u8> {
    let val = |c: u8| match c {
        b'A'..=b'Z' => c - b'A',
        b'a'..=b'z' => c - b'a' + 26,
        b'0'..=b'9' => c - b'0' + 52,
        b'+' => 62,
        b'/' => 63,
        _ => panic!("not base64: {c}"),
    };
    let bytes: Vec<u8> = s.bytes().filter(|&c| c != b'=').collect();
    let mut out = Vec::new();
    for chunk in bytes.chunks(4) {
        let mut n = 0u32;
        for (i, &c) in chunk.iter().enumerate() {
            n |= u32::from(val(c)) << (18 - 6 * i);
        }
        out.extend_from_slice(&n.to_be_bytes()[1..chunk.len()]);
    }
    out
}
