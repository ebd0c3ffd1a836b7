//! The HTML timeline in a real browser: `calametra export --html` writes the page of a trace,
//! headless Chromium loads it, the page's script renders every event without a script error,
//! and a screenshot is taken.

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
    let trace = dir.path().join("export-test.jsonl");
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
