//! End-to-end: dfu-util, a host tool no one here wrote, runs a DFU campaign in the Linux 6.1
//! guest against `calametra_models::dfu` served through usbredir: a 64 KiB download and upload
//! round trip, and a campaign with a stall injected on the third DNLOAD that shows dfu-util's
//! error, the model's state, and the recovery. Needs QEMU and the guest (see the ignore reason).

mod common;

use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::spec::Spec;
use calametra_core::RunConfig;
use calametra_models::dfu::{marks, seal_image, Dfu, State};
use calametra_qemu::{Outcome, Probe, QemuConfig};
use common::qemu_or_skip;

fn tolerant() -> Dfu {
    let bytes = include_bytes!("../../specs/dfu11-tolerant.json");
    let spec = Spec::parse("specs/dfu11-tolerant.json", bytes).expect("the DFU spec parses");
    Dfu::try_from_spec(&spec).expect("the DFU model builds")
}

/// 64 KiB: a deterministic pattern sealed with the model's CRC-32 trailer.
fn image() -> Vec<u8> {
    let mut x = 0x2545_f491u32;
    let body: Vec<u8> = (0..65536 - 4)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect();
    seal_image(&body)
}

/// The bridge settings a WillDetach DFU device needs: it re-enumerates itself (the marks), and
/// its bwPollTimeout and detach timers run before the guest's next request.
fn dfu_qemu(mut q: QemuConfig) -> QemuConfig {
    q.bridge.reenumerate_marks = vec![
        marks::WILL_DETACH_TO_DFU.to_string(),
        marks::WILL_DETACH_TO_APP.to_string(),
    ];
    q.bridge.warp_after_request = true;
    q
}

#[test]
#[ignore = "needs QEMU and the guest: run scripts/install-qemu.sh && guest/build.sh, then cargo test -p calametra-qemu -- --ignored"]
fn dfu_util_downloads_64k_and_uploads_it_back_identical() {
    let Some(qemu) = qemu_or_skip("dfu_util_downloads_64k_and_uploads_it_back_identical") else {
        return;
    };
    let img = image();
    let (run, host) = calametra_qemu::run_with_host(
        tolerant(),
        &RunConfig::default(),
        &Probe::Dfu {
            image: img.clone(),
            alt: 0,
        },
        &dfu_qemu(qemu),
    )
    .expect("the run starts");
    eprintln!("{}", run.summary());
    common::keep_trace("dfu_util_downloads_64k_and_uploads_it_back_identical", &run);
    assert_eq!(run.outcome, Outcome::Passed, "{}", run.summary());
    assert!(run
        .console
        .iter()
        .any(|l| l.contains("CALAMETRA-DFU-MATCH")));
    let dfu = host.device::<Dfu>().expect("the DFU model");
    assert_eq!(
        dfu.valid_image(),
        Some(&img[..]),
        "the model installed exactly the image dfu-util sent"
    );
    assert!(dfu.in_dfu_mode(), "a tolerant device stays in DFU mode");
    assert_eq!(dfu.state(), State::DfuIdle);
    let dnloads = run
        .trace
        .iter()
        .filter(|l| l.contains("\"site\":\"ctrl.dnload#"))
        .count();
    assert!(dnloads >= 32, "{dnloads} DNLOAD transfers traced");
    eprintln!(
        "BENCH dfu boot_to_enumerated_s={:.2} round_trip_s={:.2} total_s={:.2} hash={}",
        run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.timings.probe.unwrap_or_default().as_secs_f64(),
        run.timings.total.as_secs_f64(),
        run.hash
    );
}

#[test]
#[ignore = "needs QEMU and the guest: run scripts/install-qemu.sh && guest/build.sh, then cargo test -p calametra-qemu -- --ignored"]
fn a_stall_on_the_third_dnload_shows_the_error_the_state_and_the_recovery() {
    let Some(qemu) =
        qemu_or_skip("a_stall_on_the_third_dnload_shows_the_error_the_state_and_the_recovery")
    else {
        return;
    };
    let img = image();
    // A campaign: download (fails at the injected stall), show the state, download again
    // (dfu-util aborts the half-done transfer first), upload and compare.
    let script = r#"
dev=1209:0001
# Prints the sysfs name of the configured device whose first interface has DFU protocol $1.
find() {
    for d in /sys/bus/usb/devices/*; do
        [ -f "$d/idVendor" ] || continue
        [ "$(cat $d/idVendor):$(cat $d/idProduct)" = "$dev" ] || continue
        [ -n "$(cat $d/bConfigurationValue 2>/dev/null)" ] || continue
        [ "$(cat $d:1.0/bInterfaceProtocol 2>/dev/null)" = "$1" ] || continue
        echo "${d##*/}"
        return 0
    done
    return 1
}
wait_mode() { while ! find "$1" >/dev/null; do sleep 0.2; done; }
wait_mode 01
echo "CALAMETRA-ENUMERATED $dev run-time"
dfu-util -d $dev -e
wait_mode 02
echo "CALAMETRA-DFU-MODE"
dfu-util -d $dev -a 0 -D /calametra/image.bin
echo "CALAMETRA-DFU-FIRST rc=$?"
wait_mode 02
dfu-util -d $dev -a 0 -D /calametra/image.bin
rc=$?
echo "CALAMETRA-DFU-SECOND rc=$rc"
[ $rc = 0 ] || exit $rc
wait_mode 02
dfu-util -d $dev -a 0 -U /tmp/up.bin -Z 65536 || exit 3
cmp /calametra/image.bin /tmp/up.bin && echo CALAMETRA-DFU-MATCH
"#;
    let (run, mut host) = calametra_qemu::run_with_host(
        tolerant(),
        &RunConfig {
            faults: FaultPlan::single("ctrl.dnload#3", Fault::Stall),
            ..RunConfig::default()
        },
        &Probe::Script {
            script: script.into(),
            files: vec![("calametra/image.bin".into(), img.clone())],
        },
        &dfu_qemu(qemu),
    )
    .expect("the run starts");
    eprintln!("{}", run.summary());
    common::keep_trace(
        "a_stall_on_the_third_dnload_shows_the_error_the_state_and_the_recovery",
        &run,
    );
    let text = run.console.join("\n");
    // dfu-util's error.
    let first = run
        .console
        .iter()
        .find_map(|l| l.split("CALAMETRA-DFU-FIRST rc=").nth(1))
        .and_then(|rc| rc.trim().parse::<i32>().ok());
    assert!(
        matches!(first, Some(rc) if rc != 0),
        "the first download fails: {text}"
    );
    assert!(
        text.contains("rror during download") || text.contains("download failed"),
        "dfu-util says why: {text}"
    );
    // The injected fault is in the trace where it crossed the bus.
    assert!(run
        .trace
        .iter()
        .any(|l| l.contains("\"kind\":\"fault\"") && l.contains("ctrl.dnload#3")));
    // The model's state: the stall never reached it, so it was left in dfuDNLOAD-IDLE with a
    // half-written staging bank, until dfu-util's second run aborted it.
    let aborted = host.world().marks().contains_key(marks::ABORT_DOWNLOAD);
    let dfu = host.device::<Dfu>().expect("the DFU model");
    let names: Vec<(String, String)> = dfu
        .history()
        .iter()
        .map(|t| (t.from.name().to_string(), t.to.name().to_string()))
        .collect();
    eprintln!(
        "first model transitions: {:?}",
        &names[..names.len().min(12)]
    );
    // The model's state as dfu-util's second run found it, and its recovery.
    assert!(text.contains("dfuDNLOAD-IDLE"), "{text}");
    assert!(
        text.contains("Aborting previous incomplete transfer"),
        "{text}"
    );
    assert!(
        aborted || names.iter().any(|(f, t)| f == "dnload_idle" && t == "idle"),
        "the recovery aborted the half-done download: {names:?}"
    );
    // The recovery.
    assert!(text.contains("CALAMETRA-DFU-SECOND rc=0"), "{text}");
    assert!(text.contains("CALAMETRA-DFU-MATCH"), "{text}");
    assert_eq!(run.outcome, Outcome::Passed, "{}", run.summary());
    assert_eq!(dfu.valid_image(), Some(&img[..]));
}
