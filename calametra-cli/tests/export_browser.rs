//! The HTML timeline in a real browser: `calametra export --html` writes the page of a trace,
//! headless Chromium loads it, the page's script renders every event without a script error,
//! and a screenshot is taken; with `--frames`, the embedded pictures are linked from their
//! events in the table and the chart, and back.

use calametra::choices::Source;
use calametra::fault::{Fault, FaultPlan};
use calametra::report::write_trace;
use calametra::trace::read_jsonl;
use calametra::usb::{ControlIn, ControlType, Loopback, Recipient};
use calametra::{run, RunConfig, Sim};
use std::process::Command;
use std::time::Duration;

fn scenario(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    let iface = dev.interface();
    sim.spawn("driver", async move {
        for _ in 0..4 {
            let _ = iface
                .control_in(
                    ControlIn {
                        control_type: ControlType::Vendor,
                        recipient: Recipient::Device,
                        request: 2,
                        value: 0,
                        index: 0,
                        length: 4,
                    },
                    Duration::from_millis(5),
                )
                .await;
        }
    });
    sim.invariant("never_stalls_twice", |w| w.step() < 6);
}

/// Writes run `r` of [`scenario`] as trace file `name` in `dir`.
fn write_run(dir: &std::path::Path, name: &str, r: &calametra::RunResult) -> std::path::PathBuf {
    let trace = dir.join(name);
    write_trace(
        &trace,
        &r.lines,
        "export_browser::scenario",
        "calametra-cli",
        "export_browser",
        &r.events,
        &r.hash.to_string(),
        None,
    )
    .unwrap();
    trace
}

fn chromium(args: &[&str], profile: &std::path::Path) -> std::process::Output {
    Command::new("chromium")
        .args([
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
        ])
        .arg(format!("--user-data-dir={}", profile.display()))
        .args(args)
        .output()
        .expect("run chromium")
}

#[test]
#[ignore = "needs Debian's chromium: run scripts/install-chromium.sh, then cargo test -p calametra-cli --test export_browser -- --ignored"]
fn the_html_timeline_renders_in_headless_chromium() {
    let cfg = RunConfig {
        source: Source::Seeded(3),
        keep_trace: true,
        faults: FaultPlan::single("ctrl.load#2", Fault::Stall),
        ..RunConfig::default()
    };
    let r = run(cfg, &scenario);
    assert!(
        r.failure.is_some(),
        "the run ends at the failing invariant, which the page marks"
    );
    let dir = tempfile::tempdir().unwrap();
    let trace = write_run(dir.path(), "export-test.jsonl", &r);
    // The page draws every record but the file's closing `summary`.
    let recs: Vec<_> = read_jsonl(&trace)
        .unwrap()
        .into_iter()
        .filter(|r| r.kind != "summary")
        .collect();
    let page = dir.path().join("timeline.html");
    let out = Command::new(env!("CARGO_BIN_EXE_calametra"))
        .arg("export")
        .arg(&trace)
        .arg("--html")
        .arg(&page)
        .output()
        .expect("run calametra export");
    assert!(
        out.status.success(),
        "calametra export: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let url = format!("file://{}", page.display());

    let out = chromium(&["--dump-dom", &url], &dir.path().join("p1"));
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "page script did not finish: {dom}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!dom.contains("data-error=\""), "script error: {dom}");
    assert!(
        dom.contains(&format!("data-events=\"{}\"", recs.len())),
        "every record drawn"
    );
    assert!(
        dom.contains("invariant never_stalls_twice broke"),
        "the failing invariant is listed"
    );

    let png = dir.path().join("timeline.png");
    let out = chromium(
        &[
            &format!("--screenshot={}", png.display()),
            "--window-size=1200,700",
            &url,
        ],
        &dir.path().join("p2"),
    );
    let bytes = std::fs::read(&png).unwrap_or_else(|e| {
        panic!(
            "no screenshot ({e}): {}",
            String::from_utf8_lossy(&out.stderr)
        )
    });
    assert!(
        bytes.starts_with(b"\x89PNG") && bytes.len() > 5_000,
        "a real screenshot"
    );
    if let Ok(keep) = std::env::var("CALAMETRA_KEEP_SCREENSHOT") {
        std::fs::copy(&png, keep).unwrap();
    }
}

/// `export --frames` in a real browser: the page of a trace with two pictures (from a stand-in
/// for cargo that answers as a replay trial with `CALAMETRA_SCANOUT` would: the index and two
/// PNGs) renders without a script error, links each frame from the device's record written
/// before it, in the table and the chart, and shows the images decoded.
#[test]
#[ignore = "needs Debian's chromium: run scripts/install-chromium.sh, then cargo test -p calametra-cli --test export_browser -- --ignored"]
fn the_html_timeline_with_frames_renders_in_headless_chromium() {
    use calametra_models::trigger6::scanout::encode_png;
    use std::os::unix::fs::PermissionsExt;
    let cfg = RunConfig {
        source: Source::Seeded(3),
        keep_trace: true,
        ..RunConfig::default()
    };
    let r = run(cfg, &scenario);
    let dir = tempfile::tempdir().unwrap();
    let trace = write_run(dir.path(), "frames.jsonl", &r);
    let recs = read_jsonl(&trace).unwrap();
    // The pictures' device is the actor of the transfers (the loopback writes no records of
    // its own here); each picture is seen just after one of its records.
    let actor = recs
        .iter()
        .find(|r| r.kind == "transfer")
        .unwrap()
        .actor
        .clone();
    let loopback: Vec<u64> = recs
        .iter()
        .filter(|r| r.actor == actor && r.kind == "transfer")
        .map(|r| r.seq)
        .collect();
    let seen_after = |n: usize| {
        recs.iter()
            .filter(|r| r.seq > loopback[n])
            .map(|r| r.seq)
            .min()
            .unwrap()
    };
    // Two pictures: red, then green, seen just after the actor's first and second transfers.
    let pics = dir.path().join("pics");
    std::fs::create_dir_all(&pics).unwrap();
    let mut entries = Vec::new();
    for (i, rgb) in [[255u8, 0, 0], [0, 255, 0]].iter().enumerate() {
        let file = format!("0{}-dev-p{i}.png", i + 1);
        std::fs::write(pics.join(&file), encode_png(4, 2, &rgb.repeat(8))).unwrap();
        entries.push(serde_json::json!({
            "file": file, "error": null, "device": actor, "name": format!("p{i}"),
            "step": i + 1, "t_ns": 0, "records": seen_after(i), "width": 4, "height": 2,
            "about": format!("picture {i} <&>"), "on_show": i == 1
        }));
    }
    let index =
        serde_json::json!({"format": "calametra.pictures", "version": 1, "pictures": entries});
    std::fs::write(pics.join("pictures.json"), index.to_string()).unwrap();
    let cargo = dir.path().join("fake-cargo");
    std::fs::write(
        &cargo,
        format!(
            "#!/bin/sh\nmkdir -p \"$CALAMETRA_SCANOUT\" && cp '{}'/* \"$CALAMETRA_SCANOUT\"/\necho \"test $5 ... ok\"\necho \"test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 3 filtered out\"\n",
            pics.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&cargo, std::fs::Permissions::from_mode(0o755)).unwrap();
    let page = dir.path().join("frames.html");
    let out = Command::new(env!("CARGO_BIN_EXE_calametra"))
        .arg("export")
        .arg(&trace)
        .arg("--html")
        .arg(&page)
        .arg("--frames")
        .arg("--cargo")
        .arg(&cargo)
        .output()
        .expect("run calametra export");
    assert!(
        out.status.success(),
        "calametra export --frames: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    let url = format!("file://{}", page.display());
    let out = chromium(&["--dump-dom", &url], &dir.path().join("p1"));
    let dom = String::from_utf8_lossy(&out.stdout);
    assert!(
        dom.contains("data-rendered=\"ok\""),
        "page script did not finish: {dom}"
    );
    assert!(!dom.contains("data-error=\""), "script error: {dom}");
    assert!(
        dom.contains("data-frame-links=\"2\""),
        "both frames linked in the table: {dom}"
    );
    for (k, seq) in [(1, loopback[0]), (2, loopback[1])] {
        assert!(
            dom.contains(&format!(
                "<a href=\"#frame-{k}\" class=\"frame-link\">frame {k}</a>"
            )),
            "frame {k} linked: {dom}"
        );
        assert!(
            dom.contains(&format!("<tr id=\"ev-{seq}\">")),
            "record {seq} has its anchor"
        );
        assert!(dom.contains(&format!("<a href=\"#ev-{seq}\">event #{seq}</a>")));
    }
    assert_eq!(dom.matches("<figure").count(), 2);
    assert!(dom.contains("picture 0 &lt;&amp;&gt;"), "captions escaped");
    assert!(
        dom.contains("class=\"ev transfer framed\"") || dom.contains("framed\""),
        "framed events in the chart"
    );
}
