//! The usbd-dfu firmware served to the Linux 6.1 guest through the usbredir bridge, and a DFU
//! campaign with the real dfu-util against it: download, upload, verify, with and without a
//! stall injected on the third DFU_DNLOAD. Needs QEMU and the guest (see the ignore reason).
//!
//! usbd-dfu reports bcdDFUVersion 0x011A, so dfu-util talks DfuSe to it: page erase commands,
//! a set-address command before each block, block numbers from 2, and a raw image needs an
//! address (`-s 0x08000000`). The stock `Probe::Dfu` runs `dfu-util -D image` without one, which
//! dfu-util refuses for a DfuSe device, so the campaign is a script probe. `:leave` ends the
//! download with the zero-length DFU_DNLOAD that makes the firmware manifest; the upload reads
//! back the image the firmware manifested. The bridge's DFU re-enumeration options
//! (`reenumerate_marks`, `warp_after_request`) do not apply: usbd-dfu starts in DFU mode, never
//! detaches (it stalls DFU_DETACH), and has no timers of its own.

use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::RunConfig;
use calametra_example_dfu_firmware::{firmware_device, update_image, DfuFirmwareDevice};
use calametra_qemu::{GuestImage, GuestRun, Outcome, Probe, QemuConfig};
use std::path::PathBuf;
use std::process::Command;

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../target")
}

/// QEMU and the guest, or `None` after saying why the test is skipped.
fn qemu_or_skip(test: &str) -> Option<QemuConfig> {
    let qemu = std::env::var("CALAMETRA_QEMU").unwrap_or_else(|_| "qemu-system-x86_64".into());
    let ok = Command::new(&qemu)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        eprintln!("SKIP {test}: `{qemu}` is not runnable; run scripts/install-qemu.sh");
        return None;
    }
    match GuestImage::find(&target_dir()) {
        Ok(g) => {
            let mut c = QemuConfig::new(g);
            c.qemu = qemu.into();
            Some(c)
        }
        Err(e) => {
            eprintln!("SKIP {test}: {e}");
            None
        }
    }
}

fn keep_trace(test: &str, run: &GuestRun) {
    let path = target_dir()
        .join("calametra/traces/qemu")
        .join(format!("{test}.jsonl"));
    match run.write_trace(&path) {
        Ok(()) => eprintln!("trace: {}", path.display()),
        Err(e) => eprintln!("trace not written to {}: {e}", path.display()),
    }
}

/// Shell helpers: wait for the configured 1209:0001 device.
const PRELUDE: &str = r#"
dev=1209:0001
found() {
    for d in /sys/bus/usb/devices/*; do
        [ -f "$d/idVendor" ] || continue
        [ "$(cat $d/idVendor):$(cat $d/idProduct)" = "$dev" ] || continue
        [ -n "$(cat $d/bConfigurationValue 2>/dev/null)" ] || continue
        return 0
    done
    return 1
}
wait_dev() { while ! found; do sleep 0.2; done; }
wait_dev
echo "CALAMETRA-ENUMERATED $dev"
dfu-util -l -d $dev
"#;

/// Download with `:leave` (manifest), upload the 64 KiB back, compare.
const ROUND_TRIP: &str = r#"
download() {
    dfu-util -d $dev -a 0 -s 0x08000000:leave -D /calametra/image.bin
    rc=$?
    echo "CALAMETRA-DFU-DOWNLOAD rc=$rc"
    return $rc
}
# dfu-util is run again (at most three times) when a run fails: under -icount a guest-side
# control-transfer timeout can cut a run short before it touched the device.
download_retry() {
    for i in 1 2 3; do download && return 0; wait_dev; done
    return $rc
}
upload_and_compare() {
    wait_dev
    for i in 1 2 3; do
        rm -f /tmp/up.bin
        dfu-util -d $dev -a 0 -s 0x08000000:65536 -U /tmp/up.bin && break
        [ $i = 3 ] && return 3
        wait_dev
    done
    cmp /calametra/image.bin /tmp/up.bin || return 4
    echo CALAMETRA-DFU-MATCH
}
"#;

fn script(body: &str) -> Probe {
    Probe::Script {
        script: format!("{PRELUDE}{ROUND_TRIP}{body}"),
        files: vec![("calametra/image.bin".into(), update_image())],
    }
}

fn count(run: &GuestRun, site: &str) -> usize {
    run.trace
        .iter()
        .filter(|l| {
            l.contains("\"kind\":\"transfer\"") && l.contains(&format!("\"site\":\"{site}#"))
        })
        .count()
}

#[test]
#[ignore = "needs QEMU and the guest: run scripts/install-qemu.sh && guest/build.sh, then cargo test -p calametra-example-dfu-firmware -- --ignored"]
fn dfu_util_downloads_uploads_and_verifies_64k_on_the_usbd_dfu_firmware() {
    let test = "dfu_util_downloads_uploads_and_verifies_64k_on_the_usbd_dfu_firmware";
    let Some(qemu) = qemu_or_skip(test) else {
        return;
    };
    let (run, host) = calametra_qemu::run_with_host(
        firmware_device(),
        &RunConfig::default(),
        &script("download_retry || exit $?\nupload_and_compare\n"),
        &qemu,
    )
    .expect("the run starts");
    eprintln!("{}", run.summary());
    keep_trace(test, &run);
    let text = run.console.join("\n");
    assert_eq!(run.outcome, Outcome::Passed, "{}", run.summary());
    assert!(text.contains("CALAMETRA-DFU-MATCH"), "{text}");
    // dfu-util saw a DfuSe device and read its memory layout from the interface string.
    assert!(text.contains("@Flash/0x08000000/64*1Kg"), "{text}");
    let fw = host.device::<DfuFirmwareDevice>().expect("the firmware");
    let img = update_image();
    assert_eq!(
        fw.firmware().flash().manifested.as_deref(),
        Some(&img[..]),
        "the firmware manifested exactly the image dfu-util sent"
    );
    assert_eq!(fw.state("usb"), Some("configured"));
    // 512 data blocks, 64 page erases and the set-address commands; 513 uploads (the last
    // one at the 64 KiB limit dfu-util was given).
    let dnloads = count(&run, "ctrl.dnload");
    assert!(dnloads >= 512 + 64, "{dnloads} DFU_DNLOAD transfers");
    assert!(count(&run, "ctrl.upload") >= 512);
    eprintln!(
        "BENCH usbd-dfu dfu-util boot_to_enumerated_s={:.2} probe_s={:.2} total_s={:.2} dnloads={dnloads} hash={}",
        run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.timings.probe.unwrap_or_default().as_secs_f64(),
        run.timings.total.as_secs_f64(),
        run.hash
    );
}

#[test]
#[ignore = "needs QEMU and the guest: run scripts/install-qemu.sh && guest/build.sh, then cargo test -p calametra-example-dfu-firmware -- --ignored"]
fn a_stall_on_the_third_dnload_fails_dfu_util_and_the_firmware_recovers() {
    let test = "a_stall_on_the_third_dnload_fails_dfu_util_and_the_firmware_recovers";
    let Some(qemu) = qemu_or_skip(test) else {
        return;
    };
    let body = r#"
download
echo "CALAMETRA-DFU-FIRST rc=$rc"
wait_dev
download_retry || exit $?
echo "CALAMETRA-DFU-SECOND rc=0"
upload_and_compare
"#;
    let (run, host) = calametra_qemu::run_with_host(
        firmware_device(),
        &RunConfig {
            faults: FaultPlan::single("ctrl.dnload#3", Fault::Stall),
            ..RunConfig::default()
        },
        &script(body),
        &qemu,
    )
    .expect("the run starts");
    eprintln!("{}", run.summary());
    keep_trace(test, &run);
    let text = run.console.join("\n");
    let first = run
        .console
        .iter()
        .find_map(|l| l.split("CALAMETRA-DFU-FIRST rc=").nth(1))
        .and_then(|rc| rc.trim().parse::<i32>().ok());
    assert!(
        matches!(first, Some(rc) if rc != 0),
        "the first download fails: {text}"
    );
    // dfu-util 0.11 erases every page of the image first: the third DFU_DNLOAD is the erase
    // command for the third page.
    assert!(
        text.contains("Error during special command \"ERASE_PAGE\" download"),
        "dfu-util says why: {text}"
    );
    // The stall crossed the bus and never reached the firmware.
    let fault_at = run
        .trace
        .iter()
        .position(|l| l.contains("\"kind\":\"fault\"") && l.contains("ctrl.dnload#3"))
        .expect("the fault is traced");
    assert!(run.trace[fault_at + 1..]
        .iter()
        .take(4)
        .any(|l| l.contains("\"site\":\"ctrl.dnload#3\"") && l.contains("\"status\":\"stall\"")));
    assert!(text.contains("CALAMETRA-DFU-SECOND rc=0"), "{text}");
    assert!(text.contains("CALAMETRA-DFU-MATCH"), "{text}");
    assert_eq!(run.outcome, Outcome::Passed, "{}", run.summary());
    let fw = host.device::<DfuFirmwareDevice>().expect("the firmware");
    assert_eq!(
        fw.firmware().flash().manifested.as_deref(),
        Some(&update_image()[..])
    );
}
