//! End-to-end: the Trigger 6 model (`specs/trigger6-jcd543.json`) in the Linux 6.1 guest, as
//! the SuperSpeed device the capture shows, in lockstep (`usb-calametra`, from the guest
//! snapshot, byte-exact). The same runs are guest scenarios in
//! `examples/trigger6/tests/guest.rs` (baseline twice, seeds, minimization); these tests check
//! what a scenario's invariants cannot see: every field lsusb prints, and the driver's printed
//! beliefs against the model.
//!
//! - `lsusb -v -d 0711:5601` shows the spec's descriptors: the kernel's raw descriptors (sysfs)
//!   are the spec's device and configuration bytes, and every field lsusb prints for the
//!   device, configuration, interface, endpoint and BOS descriptors has the spec's value. What
//!   lsusb asks that the capture lacks (the debug descriptor...) stalls without a model gap.
//! - The example driver (`examples/trigger6`), built as the static `t6-drive` binary, runs over
//!   usbfs in the guest: probe, EDID, modeset to 1920x1080@60, the colour bars uploaded and
//!   flipped with a fence, then its watch loop. The model's VRAM decodes to the same bars
//!   (FNV-1a 64, the in-process test's checksum), its flip state shows the driver's last fence,
//!   and the model's four invariants hold against the beliefs the driver printed.
//!
//! `t6-drive` is built by the test (`calametra_qemu::probes::StaticBinary`: `cargo build
//! --release --target x86_64-unknown-linux-gnu` with `+crt-static` into `target/t6-drive`;
//! seconds when up to date, minutes the first time), or taken from `CALAMETRA_T6_DRIVE`. It never goes into git or into the cached guest: it
//! travels in the run's probe archive. One guest at a time: two TCG guests on a two-core
//! machine starve each other's watchdog.

mod common;
mod lsusb;

use calametra_core::usb::Device;
use calametra_core::RunConfig;
use calametra_example_trigger6::driver::{FB_ADDR, HEIGHT, WIDTH};
use calametra_example_trigger6::frame::{colour_bars_nv12, fnv1a64, BARS};
use calametra_models::trigger6::{
    Connection, Dock, DriverView, FlipBelief, PixelFormat, RamWrite, Trigger6,
};
use calametra_qemu::lockstep;
use calametra_qemu::proto::speed;
use calametra_qemu::GuestRun;
use calametra_qemu::{guest, Outcome, Probe};
use lsusb::{lsusb_matches, split};
use std::path::Path;
use std::rc::Rc;
use std::sync::Mutex;
use std::time::Instant;

/// FNV-1a 64 of the 1920x1080 NV12 colour bars, Y plane then UV plane: what
/// `examples/trigger6/tests/trigger6.rs` asserts for the same picture in process.
const BARS_CHECKSUM: u64 = 0x03a9_ad85_37ec_0a25;

static ONE_GUEST_AT_A_TIME: Mutex<()> = Mutex::new(());

fn spec_model() -> Trigger6 {
    Trigger6::try_from_spec(&calametra_example_trigger6::spec()).expect("the Trigger 6 model")
}

/// The static `t6-drive` for the guest: `CALAMETRA_T6_DRIVE`, or built here into
/// `target/t6-drive` ([`calametra_qemu::probes::StaticBinary`], which also checks it is static).
#[allow(
    clippy::disallowed_methods,
    reason = "times the host-side build on the wall clock, outside any simulated run"
)]
fn t6_drive() -> Vec<u8> {
    let started = Instant::now();
    let bytes = calametra_qemu::probes::StaticBinary {
        workspace: &Path::new(env!("CARGO_MANIFEST_DIR")).join(".."),
        package: "calametra-example-trigger6",
        bin: "t6-drive",
        features: "hardware",
        target_dir: common::target_dir().join("t6-drive"),
        prebuilt_var: Some("CALAMETRA_T6_DRIVE"),
    }
    .bytes()
    .unwrap_or_else(|e| panic!("{e}"));
    eprintln!(
        "BENCH t6_drive_build_s={:.1}",
        started.elapsed().as_secs_f64()
    );
    bytes
}

/// Holds the machine for one test: its guest, and any build before it (a build beside a
/// running guest slows it towards its watchdog).
fn one_guest() -> std::sync::MutexGuard<'static, ()> {
    ONE_GUEST_AT_A_TIME
        .lock()
        .unwrap_or_else(|e| e.into_inner())
}

/// Runs the guest with `device` in lockstep (the caller holds [`one_guest`]).
fn boot_lockstep<D: Device>(
    test: &str,
    device: D,
    probe: &Probe,
) -> Option<(GuestRun, calametra_core::host::DeviceHost)> {
    let lock = common::lockstep_or_skip(test)?;
    // The JCD543 is a SuperSpeed device (bcdUSB 3.10, bMaxPacketSize0 9): the lockstep server
    // derives that from its device descriptor, so QEMU's xHCI puts it on a USB 3 port.
    assert_eq!(
        lock.options.speed, None,
        "the speed comes from the descriptor"
    );
    let (run, host) = lockstep::run_with_host(device, &RunConfig::default(), probe, &lock)
        .expect("the run starts");
    eprintln!("{}", run.summary());
    common::keep_lockstep_trace("trigger6", test, &run);
    Some((run, host))
}

/// The setups of GET_DESCRIPTOR requests that stalled, as `wValue`.
fn stalled_descriptors(trace: &[String]) -> Vec<u16> {
    trace
        .iter()
        .filter(|l| l.contains("\"kind\":\"transfer\"") && l.contains("\"setup\":\"8006"))
        .filter(|l| l.contains("\"status\":\"stall\""))
        .filter_map(|l| {
            let s = l.split("\"setup\":\"").nth(1)?;
            let v = u16::from_str_radix(s.get(4..8)?, 16).ok()?;
            Some(v.swap_bytes())
        })
        .collect()
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test trigger6 -- --ignored"]
fn the_trigger6_model_enumerates_and_lsusb_shows_the_spec_descriptors() {
    let test = "the_trigger6_model_enumerates_and_lsusb_shows_the_spec_descriptors";
    let _one = one_guest();
    let model = spec_model();
    let facts = model.facts();
    let (device, config, bos) = (
        facts.device.clone(),
        facts.configuration.clone(),
        facts.bos.clone(),
    );
    let Some((run, host)) = boot_lockstep(test, model, &Probe::Lsusb) else {
        return;
    };
    assert_eq!(run.outcome, Outcome::Passed, "{}", run.summary());
    assert!(
        run.trace
            .iter()
            .all(|l| !l.contains("\"kind\":\"model_gap\"")),
        "no model gap"
    );
    assert!(
        run.trace
            .iter()
            .any(|l| l.contains("\"event\":\"descriptor\"") && l.contains("\"speed\":3")),
        "announced as SuperSpeed ({})",
        speed::SUPER
    );

    // The kernel's raw descriptors are the spec's bytes.
    let dump = guest::descriptor_dump(&run.console).expect("the probe dumps descriptors");
    let mut want = device.clone();
    want.extend_from_slice(&config);
    assert_eq!(dump, want, "sysfs descriptors differ from the spec's bytes");

    // lsusb -v shows every field of the device, configuration, interface and endpoint
    // descriptors, and of the BOS descriptor, with the spec's value.
    let lsusb = run.console_block("CALAMETRA-LSUSB-BEGIN", "CALAMETRA-LSUSB-END");
    let text = lsusb.join("\n");
    let mut descs = vec![device.clone()];
    descs.extend(split(&config));
    descs.extend(split(&bos));
    let checked = lsusb_matches(&lsusb, &descs).unwrap_or_else(|e| panic!("{e}\n{text}"));
    assert!(checked >= 67, "only {checked} fields checked\n{text}");
    assert!(text.contains("ID 0711:5601"), "{text}");
    assert!(text.contains("MCT Corp."), "iManufacturer read: {text}");
    assert!(text.contains("USB Station"), "iProduct read: {text}");
    assert!(text.contains("Binary Object Store Descriptor"), "{text}");
    assert!(text.contains("SuperSpeed USB Device Capability"), "{text}");

    // What the capture lacks and USB settles stalled, and was no model gap.
    let stalled = stalled_descriptors(&run.trace);
    eprintln!("stalled GET_DESCRIPTOR wValues: {stalled:04x?}");
    assert!(
        stalled.contains(&0x0a00),
        "lsusb -v asks for the debug descriptor: {stalled:04x?}"
    );
    let dock = host.device::<Trigger6>().expect("the model");
    assert!(dock.rejected().is_empty(), "{:?}", dock.rejected());
    eprintln!(
        "BENCH t6_lsusb boot_to_enumerated_s={:.2} probe_s={:.2} total_s={:.2} checked={checked} hash={}",
        run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.timings.probe.unwrap_or_default().as_secs_f64(),
        run.timings.total.as_secs_f64(),
        run.hash
    );
}

/// The guest waits for the dock, checks its usbfs node is there (devtmpfs, mounted by
/// `/init`, creates `/dev/bus/usb/BBB/DDD`), and runs the driver. In lockstep the model's
/// clock is the guest's, so the driver runs with its own timeouts and sleeps (over usb-redir
/// they were stretched times 50: the guest's clock jumped ahead while the host answered).
const DRIVE: &str = r#"
node=/dev/bus/usb/$(printf %03d $(cat /sys/bus/usb/devices/$dev/busnum))/$(printf %03d $(cat /sys/bus/usb/devices/$dev/devnum))
if [ ! -c "$node" ]; then
    echo "T6DRIVE-NO-USBFS $node"
    ls -lR /dev/bus
    exit 4
fi
echo "T6DRIVE-NODE $node"
/calametra/t6-drive
rc=$?
echo "T6DRIVE-EXIT rc=$rc"
exit $rc
"#;

/// The driver's beliefs as `t6-drive` printed them (`T6DRIVE-VIEW`), with the pixels of each
/// flip: the colour bars, when the printed checksum says so.
struct GuestView {
    connection: [Connection; 2],
    hotplug_seen: [u32; 2],
    vram_size: Option<u64>,
    modes: [Option<[u8; 32]>; 2],
    fence_done: u32,
    writes: Vec<RamWrite>,
    flips: Vec<FlipBelief>,
}

impl GuestView {
    fn parse(line: &str, bars: &Rc<[u8]>) -> Result<GuestView, String> {
        let field = |k: &str| {
            line.split_whitespace()
                .find_map(|w| w.strip_prefix(&format!("{k}=")))
                .ok_or(format!("no {k}= in {line}"))
        };
        let num = |s: &str| {
            s.parse::<u64>()
                .map_err(|e| format!("{s:?} is not a number: {e}"))
        };
        let pair = |k: &str| -> Result<[String; 2], String> {
            let v: Vec<String> = field(k)?.split(',').map(str::to_string).collect();
            v.try_into().map_err(|_| format!("{k} is not a pair"))
        };
        let connection = pair("connection")?.map(|c| match c.as_str() {
            "Connected" => Connection::Connected,
            "Disconnected" => Connection::Disconnected,
            _ => Connection::Unknown,
        });
        let [h0, h1] = pair("hotplug_seen")?;
        let mode = |k: &str| -> Result<Option<[u8; 32]>, String> {
            match field(k)? {
                "none" => Ok(None),
                hex => {
                    let b = calametra_core::hex::decode(hex)?;
                    b.try_into()
                        .map(Some)
                        .map_err(|_| format!("{k} is not 32 bytes"))
                }
            }
        };
        let writes = field("writes")?
            .split(';')
            .filter(|w| !w.is_empty())
            .map(|w| {
                let (a, l) = w.split_once('+').ok_or(format!("write {w:?}"))?;
                Ok(RamWrite {
                    addr: num(a)?,
                    len: num(l)?,
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        let bars_fnv = fnv1a64(&[bars]);
        let flips = field("flips")?
            .split(';')
            .filter(|f| !f.is_empty())
            .map(|f| {
                let p: Vec<&str> = f.split(':').collect();
                if p.len() != 10 {
                    return Err(format!("flip {f:?}"));
                }
                let fnv = u64::from_str_radix(p[9].trim_start_matches("0x"), 16)
                    .map_err(|e| e.to_string())?;
                if fnv != bars_fnv {
                    return Err(format!("flip {f:?} carried other pixels than the bars"));
                }
                Ok(FlipBelief {
                    output: num(p[0])? as u8,
                    fence: num(p[1])? as u32,
                    format: num(p[2])? as u32,
                    y_offset: num(p[3])? as u32,
                    uv_offset: num(p[4])? as u32,
                    y_pitch: num(p[5])? as u16,
                    uv_pitch: num(p[6])? as u16,
                    width: num(p[7])? as u16,
                    height: num(p[8])? as u16,
                    pixels: bars.clone(),
                })
            })
            .collect::<Result<Vec<_>, String>>()?;
        Ok(GuestView {
            connection,
            hotplug_seen: [num(&h0)? as u32, num(&h1)? as u32],
            vram_size: match field("vram_size")? {
                "none" => None,
                n => Some(num(n)?),
            },
            modes: [mode("mode0")?, mode("mode1")?],
            fence_done: num(field("fence_done")?)? as u32,
            writes,
            flips,
        })
    }

    fn view(&self) -> DriverView<'_> {
        DriverView {
            connection: self.connection,
            hotplug_seen: self.hotplug_seen,
            vram_size: self.vram_size,
            modes: self.modes,
            flips: &self.flips,
            fence_done: self.fence_done,
            writes: &self.writes,
        }
    }
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test trigger6 -- --ignored"]
fn the_example_driver_runs_over_usbfs_and_the_model_shows_the_colour_bars() {
    let test = "the_example_driver_runs_over_usbfs_and_the_model_shows_the_colour_bars";
    if common::lockstep_or_skip(test).is_none() {
        return;
    }
    let _one = one_guest();
    let bytes = t6_drive();
    let probe = Probe::Script {
        script: format!(
            "{}{DRIVE}",
            calametra_qemu::probes::wait_configured("0711:5601")
        ),
        files: vec![("calametra/t6-drive".into(), bytes)],
    };
    // The dock (`trigger6::Dock`): the HP X27q plugged into output 0 when the driver sends its
    // first vendor request (the dock powers up with the monitor there, as in the in-process
    // scenario; the kernel's enumeration sends no vendor request), a model-side event the bus
    // orders.
    let dock = Dock::new(spec_model());
    let Some((run, host)) = boot_lockstep(test, dock, &probe) else {
        return;
    };
    let text = run.console.join("\n");
    assert_eq!(run.outcome, Outcome::Passed, "{}\n{text}", run.summary());

    // What the driver says it did.
    let summary = run
        .console
        .iter()
        .find_map(|l| l.split("T6DRIVE ok ").nth(1))
        .unwrap_or_else(|| panic!("t6-drive did not succeed:\n{text}"));
    eprintln!("t6-drive: {summary}");
    for want in [
        "ending=Completed",
        "mode=1920x1080@60",
        "edid=HPN3725",
        &format!("frame_fnv1a64={BARS_CHECKSUM:#018x}"),
    ] {
        assert!(summary.contains(want), "{want} in {summary}");
    }
    let bars: Rc<[u8]> = colour_bars_nv12(WIDTH as usize, HEIGHT as usize).into();
    let view_line = run
        .console
        .iter()
        .find(|l| l.contains("T6DRIVE-VIEW "))
        .expect("t6-drive prints its beliefs");
    let guest = GuestView::parse(view_line, &bars).unwrap_or_else(|e| panic!("{e}"));

    // The model's ground truth.
    let dock = host.device::<Dock>().expect("the dock");
    let m = dock.model();
    assert_eq!(m.init_state(), "finalised");
    let mode = m.mode(0).expect("a mode on output 0");
    assert_eq!(
        (mode.hactive, mode.vactive, mode.refresh_hz),
        (1920, 1080, 60)
    );
    assert!(m.display_enabled(0), "the driver turned output 0 on");
    let flip = m.flip_state(0);
    assert_eq!(flip.pending, None, "no flip left half-received");
    let shown = flip.shown.expect("a flip is shown");
    assert_eq!(
        shown.fence, guest.fence_done,
        "the last fence the driver saw done"
    );
    assert_eq!((shown.format, shown.y_offset), (6, FB_ADDR));
    let fences: Vec<u32> = (1..=guest.fence_done).collect();
    assert_eq!(m.completed_fences(), &fences[..], "every fence, in order");
    assert!(m.rejected().is_empty(), "{:?}", m.rejected());

    // The VRAM holds the colour bars.
    let frame = m.shown_frame(0).expect("the shown frame decodes");
    assert_eq!((frame.width, frame.height), (1920, 1080));
    assert_eq!(frame.format, PixelFormat::Nv12);
    let sum = fnv1a64(&[&frame.planes[0], &frame.planes[1]]);
    assert_eq!(sum, BARS_CHECKSUM, "VRAM checksum {sum:#018x}");
    assert_eq!(
        [&frame.planes[0][..], &frame.planes[1][..]].concat(),
        &bars[..]
    );
    for (i, bar) in BARS.iter().enumerate() {
        let x = i as u32 * 240 + 120;
        assert_eq!(frame.ycbcr(x, 540), Some(*bar), "bar {i}");
    }

    // The model's invariants, fed what the driver in the guest believes.
    let v = guest.view();
    for (name, r) in [
        ("flip_state_matches_ram", m.flip_state_matches_ram(&v)),
        ("status_matches_connection", m.status_matches_connection(&v)),
        ("modeset_has_valid_timing", m.modeset_has_valid_timing(&v)),
        ("ram_writes_in_bounds", m.ram_writes_in_bounds(&v)),
    ] {
        r.unwrap_or_else(|e| panic!("{name}: {e}"));
    }
    assert_eq!(guest.connection[0], Connection::Connected);

    let millis = summary
        .split("millis=")
        .nth(1)
        .and_then(|s| s.trim().parse::<u64>().ok())
        .unwrap_or_default();
    eprintln!(
        "BENCH t6_drive boot_to_enumerated_s={:.2} probe_s={:.2} total_s={:.2} guest_driver_ms={millis} fences={} hash={}",
        run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.timings.probe.unwrap_or_default().as_secs_f64(),
        run.timings.total.as_secs_f64(),
        guest.fence_done,
        run.hash
    );
}
