//! End-to-end: a real KMS frame. The trigger6 DRM driver (`guest/trigger6-drm`, a Linux 6.1
//! kernel module built by `guest/build-drm.sh`) drives the Trigger 6 model served to the guest
//! in lockstep (`usb-calametra`, from the guest snapshot), so each run is byte-exact; `t6probe`
//! lists the two connectors, sets 1920x1080@60 on the connected one, page-flips once to the
//! colour bars and waits for the flip event. The model's VRAM decodes to
//! the same bars (FNV-1a checksum), and the model's mode, flip state and fences agree with what
//! the driver logged and the probe printed (the model's own invariants, fed the guest's view).
//! The monitor is unplugged in the model at a point the test picks, and the guest reports it.
//! Faults from the model's side (a stalled modeset, a short bulk transfer, a stalled bulk
//! transfer, a disconnect mid-frame) each end in an explained outcome in the guest, never a
//! hung run.
//!
//! The tests share one lock: two TCG guests at once on a two-core machine starve each other's
//! CPU. Needs the lockstep QEMU and the guest with its DRM module (see the ignore reason).

mod common;

use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_core::RunConfig;
use calametra_models::trigger6::{
    Connection, Dock, DriverView, FlipBelief, PixelFormat, RamWrite, Trigger6,
};
use calametra_qemu::lockstep;
use calametra_qemu::proto::speed;
use calametra_qemu::GuestRun;
use calametra_qemu::{Outcome, Probe};
use std::rc::Rc;
use std::sync::Mutex;

/// FNV-1a 64 of the 1920x1080 NV12 colour bars, Y plane then UV plane: the checksum the
/// example driver's test asserts for the same picture.
const BARS_CHECKSUM: u64 = 0x03a9_ad85_37ec_0a25;

/// (Y, Cb, Cr) of the eight 100% bars, BT.601 limited range (the example driver's `BARS`).
const BARS: [(u8, u8, u8); 8] = [
    (235, 128, 128),
    (210, 16, 146),
    (170, 166, 16),
    (145, 54, 34),
    (106, 202, 222),
    (81, 90, 240),
    (41, 240, 110),
    (16, 128, 128),
];

/// Where the driver puts output 0's frame (MCT's first 1080p framebuffer).
const FB0: u32 = 0x2e0_0000;

static ONE_GUEST_AT_A_TIME: Mutex<()> = Mutex::new(());

fn spec_model() -> Trigger6 {
    let bytes = include_bytes!("../../specs/trigger6-jcd543.json");
    let spec = Spec::parse("specs/trigger6-jcd543.json", bytes).expect("the Trigger 6 spec parses");
    Trigger6::try_from_spec(&spec).expect("the Trigger 6 model builds")
}

/// The NV12 bars as t6probe draws them (pitch = width, UV plane after the Y plane).
fn colour_bars_nv12(width: usize, height: usize) -> Vec<u8> {
    let bar = width / BARS.len();
    let mut v = Vec::with_capacity(width * height * 3 / 2);
    for _ in 0..height {
        for x in 0..width {
            v.push(BARS[x / bar].0);
        }
    }
    for _ in 0..height / 2 {
        for x in (0..width).step_by(2) {
            v.push(BARS[x / bar].1);
            v.push(BARS[x / bar].2);
        }
    }
    v
}

fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

/// The dock as the test stages it ([`Dock`]): the Trigger 6 model, with the HP X27q plugged
/// into output 0 when the driver sends its first vendor request (the dock powers up with the
/// monitor there), and, when `unplug_after_fence` is set, the monitor unplugged on the first
/// status query of output 0 after the model shows a flip with that fence (t6probe asks after
/// its page flip). Both are model-side events the bus orders, so they land at the same point
/// in every run.
fn staged_dock(unplug_after_fence: Option<u32>) -> Dock {
    match unplug_after_fence {
        Some(fence) => Dock::new(spec_model()).unplug_after_fence(fence),
        None => Dock::new(spec_model()),
    }
}

/// The guest side: load the DRM helpers and the trigger6 module, run t6probe, print the
/// driver's kernel messages. With `strict` the script's code is t6probe's; otherwise 0, and
/// the outcome is read from what was printed (a fault run is expected to go wrong).
fn script(probe_args: &str, strict: bool) -> Probe {
    let tail = if strict { "exit $rc" } else { "exit 0" };
    Probe::script(format!(
        r#"
for m in $(cat /lib/modules/trigger6/load-order); do
    insmod /lib/modules/trigger6/$m || echo "T6PROBE error=insmod-$m"
done
t6probe {probe_args}
rc=$?
echo "T6PROBE exit=$rc"
sleep 1
echo T6PROBE-DMESG-BEGIN
dmesg | grep -E 'trigger6|\[drm\]|usb|xhci'
echo T6PROBE-DMESG-END
{tail}
"#
    ))
}

/// Runs the guest with `dock` and `faults` over lockstep (from the guest snapshot), one guest
/// at a time; the host holds the dock.
fn boot(
    test: &str,
    dock: Dock,
    faults: FaultPlan,
    probe: &Probe,
) -> Option<(GuestRun, DeviceHost)> {
    let mut lock = common::lockstep_or_skip(test)?;
    // The JCD543 is a SuperSpeed device (bcdUSB 3.10, bMaxPacketSize0 9): announce it so, and
    // QEMU's xHCI puts it on the USB 3 side of its port.
    lock.options.speed = Some(speed::SUPER);
    let _one = ONE_GUEST_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner());
    let (run, host) = lockstep::run_with_host(
        dock,
        &RunConfig {
            faults,
            ..RunConfig::default()
        },
        probe,
        &lock,
    )
    .expect("the run starts");
    eprintln!("{}", run.summary());
    common::keep_lockstep_trace("drm", test, &run);
    eprintln!(
        "BENCH drm {test} enumerated_s={:.2} probe_s={:.2} total_s={:.2} hash={}",
        run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.timings.probe.unwrap_or_default().as_secs_f64(),
        run.timings.total.as_secs_f64(),
        run.hash
    );
    Some((run, host))
}

fn dock(host: &DeviceHost) -> &Dock {
    host.device::<Dock>().expect("the dock")
}

/// What the guest printed: t6probe's `T6PROBE ...` lines and the driver's kernel messages.
struct Guest {
    probe: Vec<String>,
    dmesg: Vec<String>,
}

impl Guest {
    fn of(run: &GuestRun) -> Guest {
        let probe = run
            .console
            .iter()
            .filter_map(|l| l.find("T6PROBE ").map(|i| l[i..].to_string()))
            .collect();
        let dmesg = run.console_block("T6PROBE-DMESG-BEGIN", "T6PROBE-DMESG-END");
        Guest { probe, dmesg }
    }

    /// The first probe line that starts with `T6PROBE <what>`.
    fn line(&self, what: &str) -> Option<&str> {
        let head = format!("T6PROBE {what}");
        self.probe
            .iter()
            .find(|l| l.starts_with(&head))
            .map(|s| s.as_str())
    }

    /// Every probe line that starts with `T6PROBE <what>`.
    fn lines(&self, what: &str) -> Vec<&str> {
        let head = format!("T6PROBE {what}");
        self.probe
            .iter()
            .filter(|l| l.starts_with(&head))
            .map(|s| s.as_str())
            .collect()
    }

    fn kernel(&self, needle: &str) -> Vec<&str> {
        self.dmesg
            .iter()
            .filter(|l| l.contains(needle))
            .map(|s| s.as_str())
            .collect()
    }

    fn text(&self) -> String {
        format!(
            "{}\n--- dmesg ---\n{}",
            self.probe.join("\n"),
            self.dmesg.join("\n")
        )
    }
}

/// `key=value` from a probe line.
fn kv<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key).and_then(|r| r.strip_prefix('=')))
}

/// The numbers after `fence ` in the driver's `output 0: fence N done` lines (and `... done
/// after its timeout`, when the guest's clock ran ahead of the host), in order.
fn fences_done(g: &Guest, output: u32) -> Vec<u32> {
    let head = format!("output {output}: fence ");
    g.kernel(&head)
        .iter()
        .filter(|l| l.contains(" done"))
        .filter_map(|l| {
            let rest = &l[l.find(&head)? + head.len()..];
            rest.split_whitespace().next()?.parse().ok()
        })
        .collect()
}

fn has_fault(run: &GuestRun, site: &str) -> bool {
    run.trace
        .iter()
        .any(|l| l.contains("\"kind\":\"fault\"") && l.contains(site))
}

/// Where the first transfer record holding `needle` is in the run's trace.
fn transfer_at(run: &GuestRun, needle: &str) -> Option<usize> {
    run.trace
        .iter()
        .position(|l| l.contains("\"kind\":\"transfer\"") && l.contains(needle))
}

/// A frame whose first upload failed was sent again after the dock's DMA was cancelled: the
/// run passed, the bars are on show, and fence 1 came back after the resend.
fn assert_frame_resent(run: &GuestRun, g: &Guest, dock: &Trigger6) {
    assert!(
        transfer_at(run, "cancel_bulk_out").is_some(),
        "the driver cancelled the dock's DMA receiver"
    );
    assert_eq!(
        run.outcome,
        Outcome::Passed,
        "{}\n{}",
        run.summary(),
        g.text()
    );
    assert_bars_shown(run, g, dock);
    assert_eq!(
        dock.completed_fences(),
        &[1, 2],
        "fence 1 came back after the resend"
    );
}

/// The checks every run that showed the bars shares: the decoded frame, its checksum, the
/// model's flip and fence against the driver's log, and the model's invariants fed the
/// guest's view. Returns the flip's fence.
fn assert_bars_shown(run: &GuestRun, g: &Guest, m: &Trigger6) -> u32 {
    let text = g.text();
    // The guest: a 1080p60 modeset, one page flip, its event.
    let modeset = g
        .line("modeset")
        .unwrap_or_else(|| panic!("no modeset: {text}"));
    assert_eq!(kv(modeset, "mode"), Some("1920x1080@60"), "{text}");
    assert_eq!(kv(modeset, "clock"), Some("148500"), "{text}");
    assert_eq!(kv(modeset, "rc"), Some("0"), "{text}");
    let fbs = g.line("framebuffers").expect("framebuffers line");
    let second = kv(fbs, "second").expect("second fb").to_string();
    let flip = g.line("page-flip").expect("page-flip line");
    assert_eq!(kv(flip, "rc"), Some("0"), "{text}");
    let done = g
        .line("flip-done")
        .unwrap_or_else(|| panic!("no flip event: {text}"));
    assert_eq!(kv(done, "user_data"), Some("0x7606"), "{text}");
    let crtc = g.line("crtc").expect("crtc line");
    assert_eq!(
        kv(crtc, "fb"),
        Some(second.as_str()),
        "the flip's fb is on the CRTC"
    );

    // The model: the mode, the output on, the flip shown and nothing pending.
    let mode = m.mode(0).expect("the model has a mode on output 0");
    assert_eq!(
        (mode.hactive, mode.vactive, mode.refresh_hz, mode.pclk_khz),
        (1920, 1080, 60, 148_500)
    );
    assert!(
        run.trace
            .iter()
            .any(|l| l.contains("\"kind\":\"transition\"")
                && l.contains("\"machine\":\"display0\"")
                && l.contains("\"to\":\"on\"")),
        "the driver turned output 0 on"
    );
    assert_eq!(
        m.display_enabled(0),
        g.kernel("output 0: off").is_empty(),
        "output 0 is on in the model unless the driver logged turning it off (t6probe's exit removes its framebuffers): {text}"
    );
    assert!(!m.modeset_in_progress(0), "the modeset was finalised");
    let flips = m.flip_state(0);
    let shown = flips.shown.expect("the model shows a flip on output 0");
    assert!(flips.pending.is_none(), "nothing half-received: {flips:?}");
    assert_eq!(
        (
            shown.format,
            shown.y_offset,
            shown.y_pitch,
            shown.uv_offset,
            shown.uv_pitch
        ),
        (6, FB0, 1920, FB0 + 1920 * 1080, 1920),
        "NV12 at the driver's framebuffer"
    );

    // The frame in VRAM is the colour bars.
    let f = m.shown_frame(0).expect("the shown frame decodes");
    assert_eq!(
        (f.width, f.height, f.format),
        (1920, 1080, PixelFormat::Nv12)
    );
    for (i, &bar) in BARS.iter().enumerate() {
        for (x, y) in [
            (i as u32 * 240, 0),
            (i as u32 * 240 + 239, 1079),
            (i as u32 * 240 + 120, 540),
        ] {
            assert_eq!(f.ycbcr(x, y), Some(bar), "bar {i} at ({x}, {y})");
        }
    }
    let sum = fnv1a64(&[&f.planes[0], &f.planes[1]]);
    assert_eq!(sum, BARS_CHECKSUM, "VRAM checksum {sum:#018x}");
    let guest_sum = kv(fbs, "bars-checksum").expect("the probe's checksum");
    assert_eq!(
        u64::from_str_radix(guest_sum, 16).ok(),
        Some(BARS_CHECKSUM),
        "the guest drew the same bars"
    );
    let pixels: Rc<[u8]> = colour_bars_nv12(1920, 1080).into();
    assert_eq!(fnv1a64(&[&pixels]), BARS_CHECKSUM);

    // The driver's view: the flip it logged is the one the model shows, and the fences it saw
    // come back are the ones the model completed, in order.
    let logged = format!(
        "output 0: flip fence {}: NV12 1920x1080 at {FB0:#x} pitch 1920",
        shown.fence
    );
    assert!(
        !g.kernel(&logged).is_empty(),
        "the driver logged `{logged}`: {text}"
    );
    let seen = fences_done(g, 0);
    assert_eq!(
        seen.last(),
        Some(&shown.fence),
        "the last fence the driver saw: {text}"
    );
    assert_eq!(
        m.completed_fences(),
        &seen[..],
        "the model completed exactly the fences the driver saw done"
    );
    let record = g
        .kernel("output 0: mode 1920x1080@60 set")
        .first()
        .and_then(|l| l.rsplit("table record ").next())
        .and_then(|r| r.trim_end_matches(')').parse::<usize>().ok())
        .unwrap_or_else(|| panic!("the driver logged its modeset: {text}"));
    let view = DriverView {
        connection: [Connection::Unknown; 2],
        hotplug_seen: [0; 2],
        vram_size: Some(m.vram_size()),
        modes: [Some(m.facts().tables[0][record]), None],
        flips: &[FlipBelief {
            output: 0,
            fence: shown.fence,
            format: 6,
            y_offset: FB0,
            uv_offset: FB0 + 1920 * 1080,
            y_pitch: 1920,
            uv_pitch: 1920,
            width: 1920,
            height: 1080,
            pixels,
        }],
        fence_done: *seen.last().unwrap_or(&0),
        writes: &[RamWrite {
            addr: (FB0 - 48) as u64,
            len: 48 + 1920 * 1080 * 3 / 2,
        }],
    };
    m.flip_state_matches_ram(&view)
        .expect("flip_state_matches_ram");
    m.modeset_has_valid_timing(&view)
        .expect("modeset_has_valid_timing");
    m.ram_writes_in_bounds(&view).expect("ram_writes_in_bounds");
    assert!(
        m.rejected().is_empty(),
        "the model refused nothing: {:?}",
        m.rejected()
    );
    assert!(
        !run.trace
            .iter()
            .any(|l| l.contains("\"kind\":\"model_gap\"")),
        "no model gap"
    );
    eprintln!(
        "colour bars checksum {sum:#018x}, fence {}, fences {:?}",
        shown.fence, seen
    );
    shown.fence
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest with the DRM module: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test drm -- --ignored"]
fn a_kms_page_flip_reaches_the_model_as_colour_bars_and_the_unplug_reaches_the_guest() {
    let test = "a_kms_page_flip_reaches_the_model_as_colour_bars_and_the_unplug_reaches_the_guest";
    // The monitor is unplugged in the model after the flip's fence; t6probe waits for it.
    let flip = || {
        boot(
            test,
            staged_dock(Some(2)),
            FaultPlan::default(),
            &script("--wait-unplug 30", true),
        )
    };
    let Some((run, host)) = flip() else {
        return;
    };
    let dock = dock(&host);
    let g = Guest::of(&run);
    let text = g.text();
    assert_eq!(run.outcome, Outcome::Passed, "{}\n{text}", run.summary());
    let m = dock.model();

    // Two connectors, the monitor on the first.
    let conns = g.lines("connector ");
    assert!(conns.len() >= 4, "listed before and after: {text}");
    assert_eq!(kv(conns[0], "name"), Some("HDMI-A-1"));
    assert_eq!(kv(conns[0], "status"), Some("connected"));
    assert_eq!(kv(conns[0], "1080p60"), Some("yes"));
    assert_eq!(kv(conns[1], "name"), Some("VGA-1"));
    assert_eq!(kv(conns[1], "status"), Some("disconnected"));

    let fence = assert_bars_shown(&run, &g, m);
    assert_eq!(
        fence, 2,
        "the modeset's frame is fence 1, the page flip's fence 2"
    );
    assert_eq!(m.completed_fences(), &[1, 2]);

    // The unplug: the model's ground truth and what the guest reports agree.
    assert!(
        dock.plugged() && dock.unplugged(),
        "the test plugged and unplugged the monitor"
    );
    assert!(!m.connected(0));
    assert_eq!(
        m.hotplug_raised(0),
        2,
        "plug and unplug each raised a hotplug interrupt"
    );
    let after = &conns[conns.len() - 2..];
    assert_eq!(kv(after[0], "name"), Some("HDMI-A-1"));
    assert_eq!(kv(after[0], "status"), Some("disconnected"), "{text}");
    assert_eq!(kv(after[1], "status"), Some("disconnected"));
    assert!(
        !g.kernel("output 0: hotplug interrupt, HDMI-A-1 is disconnected")
            .is_empty(),
        "the driver saw the hotplug interrupt: {text}"
    );
    let view = DriverView {
        connection: [Connection::Disconnected, Connection::Disconnected],
        hotplug_seen: [m.hotplug_raised(0), 0],
        ..DriverView::default()
    };
    m.status_matches_connection(&view)
        .expect("status_matches_connection");
    assert!(run
        .trace
        .iter()
        .any(|l| l.contains("\"kind\":\"external\"") && l.contains("unplug_monitor")));
    assert!(g.line("result=ok").is_some(), "{text}");

    // In lockstep the whole run is byte-exact: the same again, the same hash, console included.
    let Some((again, _)) = flip() else {
        return;
    };
    assert_eq!(again.console, run.console, "the console, line for line");
    assert_eq!(
        again.hash, run.hash,
        "the KMS flip run hashes the same twice"
    );
    eprintln!("HASH kms flip twice: {} {}", run.hash, again.hash);
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest with the DRM module: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test drm -- --ignored"]
fn a_stalled_modeset_is_logged_and_retried_and_the_frame_still_arrives() {
    let test = "a_stalled_modeset_is_logged_and_retried_and_the_frame_still_arrives";
    let Some((run, host)) = boot(
        test,
        staged_dock(None),
        FaultPlan::single("ctrl.set_mode#1", Fault::Stall),
        &script("", true),
    ) else {
        return;
    };
    let dock = dock(&host);
    let g = Guest::of(&run);
    let text = g.text();
    assert!(run.outcome.is_verdict(), "{}", run.summary());
    assert!(has_fault(&run, "ctrl.set_mode#1"), "the stall is traced");
    let err = g.kernel("output 0: modeset 1920x1080");
    assert!(
        err.iter()
            .any(|l| l.contains("failed at set_mode: -32; retrying")),
        "the driver logged the stall (-EPIPE) and its retry: {text}"
    );
    assert!(!text.contains("giving up"), "{text}");
    assert_eq!(run.outcome, Outcome::Passed, "{}\n{text}", run.summary());
    assert_bars_shown(&run, &g, dock.model());
    // The stall never reached the model: its only modeset is the retry.
    let set_modes = run
        .trace
        .iter()
        .filter(|l| l.contains("\"kind\":\"transition\"") && l.contains("\"machine\":\"mode0\""))
        .count();
    assert_eq!(set_modes, 1, "one modeset reached the model");
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest with the DRM module: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test drm -- --ignored"]
fn a_short_bulk_transfer_is_cancelled_and_the_frame_sent_again() {
    let test = "a_short_bulk_transfer_is_cancelled_and_the_frame_sent_again";
    // bulk.out#4 is the data packet of the second fragment of the first frame (header, data,
    // header, data): the dock takes 0x8000 of its 0x19000 bytes.
    let Some((run, host)) = boot(
        test,
        staged_dock(None),
        FaultPlan::single("bulk.out#4", Fault::Short(0x8000)),
        &script("", true),
    ) else {
        return;
    };
    let dock = dock(&host);
    let g = Guest::of(&run);
    let text = g.text();
    assert!(run.outcome.is_verdict(), "{}", run.summary());
    assert!(
        has_fault(&run, "bulk.out#4"),
        "the short transfer is traced"
    );
    // The model took 0x8000 bytes; what QEMU's xHCI reports to the guest for a short OUT TD
    // is its own business (65496 here): the driver only needs to see that it is short.
    assert!(
        g.kernel("bulk OUT: the dock took ")
            .iter()
            .any(|l| l.contains(" of 102400 bytes")),
        "the driver saw the short write: {text}"
    );
    assert!(
        !g.kernel("upload of fence 1 failed: -5; cancelling the dock's DMA and sending it again")
            .is_empty(),
        "{text}"
    );
    assert!(!text.contains("giving up"), "{text}");
    assert_frame_resent(&run, &g, dock.model());
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest with the DRM module: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test drm -- --ignored"]
fn a_stalled_bulk_transfer_has_its_halt_cleared_and_the_frame_sent_again() {
    let test = "a_stalled_bulk_transfer_has_its_halt_cleared_and_the_frame_sent_again";
    // bulk.out#3 is the DMA header of the second fragment of the first frame; a stall halts
    // the endpoint (in the bus as in xHCI) until the host clears it. Before the driver cleared
    // it, the resend and every later upload stalled too and the model showed no flip.
    let Some((run, host)) = boot(
        test,
        staged_dock(None),
        FaultPlan::single("bulk.out#3", Fault::Stall),
        &script("", true),
    ) else {
        return;
    };
    let dock = dock(&host);
    let g = Guest::of(&run);
    let text = g.text();
    assert!(run.outcome.is_verdict(), "{}", run.summary());
    assert!(has_fault(&run, "bulk.out#3"), "the stall is traced");
    assert!(
        !g.kernel("upload of fence 1 failed: -32; cancelling the dock's DMA and sending it again")
            .is_empty(),
        "the driver saw the stall (-EPIPE) and sent the frame again: {text}"
    );
    assert!(!text.contains("giving up"), "{text}");
    assert!(!text.contains("clearing its halt failed"), "{text}");
    // CLEAR_FEATURE(ENDPOINT_HALT) to the bulk OUT endpoint (0x02), then the dock's cancel.
    let clear = transfer_at(&run, "\"setup\":\"0201000002000000\"");
    let cancel = transfer_at(&run, "cancel_bulk_out");
    assert!(
        matches!((clear, cancel), (Some(a), Some(b)) if a < b),
        "the driver cleared the endpoint's halt, then cancelled the dock's DMA receiver"
    );
    let stalled = run
        .trace
        .iter()
        .filter(|l| {
            l.contains("\"kind\":\"transfer\"")
                && l.contains("\"site\":\"bulk.out#")
                && l.contains("\"status\":\"stall\"")
        })
        .count();
    assert_eq!(stalled, 1, "only the faulted transfer stalled");
    assert_frame_resent(&run, &g, dock.model());
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest with the DRM module: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test drm -- --ignored"]
fn a_disconnect_mid_frame_fails_the_upload_and_unbinds_the_driver() {
    let test = "a_disconnect_mid_frame_fails_the_upload_and_unbinds_the_driver";
    // bulk.out#6: the data packet of the third fragment of the first frame.
    let Some((run, host)) = boot(
        test,
        staged_dock(None),
        FaultPlan::single("bulk.out#6", Fault::Disconnect),
        &script("", false),
    ) else {
        return;
    };
    let dock = dock(&host);
    let g = Guest::of(&run);
    let text = g.text();
    assert!(
        run.outcome.is_verdict(),
        "the guest kept making progress: {}",
        run.summary()
    );
    assert_eq!(run.outcome, Outcome::Passed, "{}\n{text}", run.summary());
    assert!(has_fault(&run, "bulk.out#6"), "the disconnect is traced");
    assert!(
        run.trace
            .iter()
            .any(|l| l.contains("\"kind\":\"emulator\"") && l.contains("\"event\":\"detach\"")),
        "the lockstep device detached for the guest"
    );
    assert!(
        !g.kernel("output 0: upload of fence 1 failed").is_empty(),
        "the driver logged the failed upload: {text}"
    );
    assert!(
        !g.kernel("output 0: fence 1 abandoned").is_empty(),
        "the flip was completed without its fence: {text}"
    );
    assert!(!g.kernel("dock disconnected").is_empty(), "{text}");
    // The model: the mode was set, the frame never completed, no fence.
    let m = dock.model();
    assert!(m.mode(0).is_some());
    assert!(m.flip_state(0).shown.is_none(), "no frame was shown");
    assert!(m.completed_fences().is_empty());
    // The probe got an answer for everything it asked (no hang): it ended.
    assert!(g.line("exit=").is_some(), "{text}");
}
