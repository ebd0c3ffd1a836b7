//! Guest scenarios: the Trigger 6 model (`specs/trigger6-jcd543.json`) served to Debian's Linux
//! 6.1 in the lockstep QEMU, each run restored from the guest snapshot and byte-exact, console
//! included. The trials have the names of in-process trials (`baseline`, `seed::0x..`,
//! `finds::<invariant>`, `regression::<id>`) and are ignored unless asked for:
//!
//! ```sh
//! scripts/install-qemu.sh && guest/build.sh && calametra-qemu/qemu/build.sh
//! cargo test -p calametra-example-trigger6 --test guest -- --ignored --test-threads 1
//! ```
//!
//! - `kms_flip_and_unplug`: the trigger6 DRM module (`guest/trigger6-drm`) and `t6probe` list
//!   both connectors, set 1920x1080@60 on the connected one with a mid-grey frame, page-flip
//!   once to the colour bars and wait for the flip event; the monitor is then unplugged in the
//!   model and the guest sees the connector go disconnected. The guest checks what it printed
//!   (its exit status is the verdict); the model checks that every flip it shows holds the
//!   picture the guest drew (FNV-1a 64 of the decoded VRAM planes against pictures built here).
//!   Seeds delay the model's answers on the guest clock.
//! - `kms_flip_corrupted`: the same flip with seeds that garble bulk OUT payloads as the dock
//!   receives them (`faults = [garble]`, each garble's offset and mask drawn): a data packet of
//!   a frame the dock misreads lands in VRAM and the shown frame is not what the guest drew. The
//!   harness finds it, minimizes it, saves the case and replays the saved file byte-exactly. A
//!   garbled DMA header is a framing error the model answers with a stall (of that transfer or
//!   the next); the driver clears the endpoint's halt, cancels the dock's DMA and sends the
//!   frame again, so later garbled data still reaches a shown flip.
//! - `example_driver_over_usbfs`: the example driver (`t6-drive`, static) over usbfs: probe,
//!   EDID, modeset, five flips of the colour bars, each upload one 3 MB bulk OUT.
//! - `lsusb`: the kernel enumerates the model as the SuperSpeed dock the capture shows; the raw
//!   descriptors the kernel read (sysfs) are the spec's bytes, and `lsusb -v` reads the strings
//!   and the BOS descriptor.

use calametra_example_trigger6::frame::{colour_bars_nv12, fnv1a64};
use calametra_models::trigger6::{Dock, PixelFormat, Trigger6};
use calametra_qemu::probes::wait_configured;
use calametra_qemu::Guest;
use std::cell::Cell;

/// The page flip's fence (the modeset's frame is fence 1).
const UNPLUG_AFTER_FENCE: u32 = 2;

/// The dock as the scenarios stage it ([`Dock`]): the model, with the HP X27q plugged into
/// output 0 when the driver sends its first vendor request (the dock powers up with the monitor
/// there) and, with `unplug`, unplugged on the first status query of output 0 after the model
/// shows the page flip's fence, [`UNPLUG_AFTER_FENCE`] (t6probe asks after its page flip).
/// Both are model-side events the bus orders, so they land at the same point of every run;
/// each is traced as an `external` record.
fn dock(guest: &Guest, unplug: bool) -> Dock {
    let model = Trigger6::try_from_spec(guest.spec()).expect("the Trigger 6 model builds");
    match unplug {
        true => Dock::new(model).unplug_after_fence(UNPLUG_AFTER_FENCE),
        false => Dock::new(model),
    }
}

/// The guest side of a KMS run: load the DRM helpers and the trigger6 module, run
/// `t6probe --wait-unplug 30`, and check what it printed: both connectors before (HDMI-A-1
/// connected with 1080p60, VGA-1 disconnected), the modeset, the flip event, the bars'
/// checksum as t6probe computed it, both connectors disconnected after the unplug and the
/// driver's hotplug message. One script for both KMS scenarios, so they share one snapshot
/// (its key holds the probe's files). A check that fails
/// prints `T6CHECK-FAILED <what>` and exits non-zero: the run's verdict.
fn kms_script() -> String {
    let wait = "--wait-unplug 30";
    let after = r#"
[ "$(echo "$conns" | wc -l)" = 4 ] || fail "four connector lines, before and after the unplug"
echo "$conns" | sed -n 3p | grep -q 'name=HDMI-A-1 status=disconnected' || fail "HDMI-A-1 disconnected after the unplug"
echo "$conns" | sed -n 4p | grep -q 'name=VGA-1 status=disconnected' || fail "VGA-1 still disconnected"
grep -q 'output 0: hotplug interrupt, HDMI-A-1 is disconnected' /tmp/dmesg || fail "the driver's hotplug message"
"#;
    format!(
        r#"
fail() {{ echo "T6CHECK-FAILED $1"; exit 20; }}
for m in $(cat /lib/modules/trigger6/load-order); do
    insmod /lib/modules/trigger6/$m || fail "insmod $m"
done
t6probe {wait} > /tmp/t6.out
rc=$?
cat /tmp/t6.out
echo "T6PROBE exit=$rc"
dmesg | grep -E 'trigger6|\[drm\]' > /tmp/dmesg
echo T6PROBE-DMESG-BEGIN
cat /tmp/dmesg
echo T6PROBE-DMESG-END
[ $rc = 0 ] || exit $rc
conns=$(grep '^T6PROBE connector ' /tmp/t6.out)
echo "$conns" | sed -n 1p | grep -q 'name=HDMI-A-1 status=connected .*1080p60=yes' || fail "HDMI-A-1 connected with 1080p60"
echo "$conns" | sed -n 2p | grep -q 'name=VGA-1 status=disconnected' || fail "VGA-1 listed, disconnected"
grep -q '^T6PROBE modeset .*mode=1920x1080@60 .*rc=0' /tmp/t6.out || fail "the 1080p60 modeset"
grep -q '^T6PROBE framebuffers .*bars-checksum=03a9ad8537ec0a25' /tmp/t6.out || fail "the bars' checksum"
grep -q '^T6PROBE flip-done type=.* user_data=0x7606' /tmp/t6.out || fail "the flip event"
{after}
echo T6CHECK-OK
exit 0
"#
    )
}

/// FNV-1a 64 of t6probe's two pictures at 1920x1080 NV12, built here from their definitions
/// (never from the model): the modeset's frame, every byte 128, and the page flip's colour
/// bars.
fn pictures() -> (u64, u64) {
    let grey = vec![128u8; 1920 * 1080 * 3 / 2];
    (fnv1a64(&[&grey]), fnv1a64(&[&colour_bars_nv12(1920, 1080)]))
}

/// The KMS run of both scenarios: the dock (the monitor unplugged after the page flip), the
/// guest's script, [`flips_show`] and, with `strict`, [`nothing_rejected`].
fn kms_session(guest: &mut Guest, strict: bool) {
    guest.attach(dock(guest, true));
    guest.run_script(&kms_script(), Vec::new());
    flips_show(guest, true);
    if strict {
        nothing_rejected(guest);
    }
}

/// `flip_shows_what_the_guest_drew`: each flip the model shows on output 0, from the frame it
/// is first shown on, decodes to the picture the guest drew for it, NV12 at 1920x1080: with
/// `grey_first` (t6probe) mid grey for fence 1, the modeset's, and the colour bars after it;
/// otherwise (the example driver) the colour bars for every fence.
fn flips_show(guest: &mut Guest, grey_first: bool) {
    let (grey, bars) = pictures();
    // The serial of the last flip judged: a flip is judged once, on the frame that shows it
    // (the next upload may overwrite the same VRAM while it is still on show).
    let judged = Cell::new(0u64);
    guest.invariant("flip_shows_what_the_guest_drew", move |d: &Dock| {
        let Some(flip) = d.model().flip_state(0).shown else {
            return Ok(());
        };
        if flip.serial == judged.get() {
            return Ok(());
        }
        judged.set(flip.serial);
        let f = d.model().shown_frame(0).ok_or(format!(
            "flip {} (fence {}) does not decode",
            flip.serial, flip.fence
        ))?;
        if (f.width, f.height, f.format) != (1920, 1080, PixelFormat::Nv12) {
            return Err(format!(
                "fence {} shows {}x{} {:?}, not 1920x1080 NV12",
                flip.fence, f.width, f.height, f.format
            ));
        }
        let (want, what) = if grey_first && flip.fence <= 1 {
            (grey, "mid grey")
        } else {
            (bars, "the colour bars")
        };
        let sum = fnv1a64(&[&f.planes[0], &f.planes[1]]);
        if sum != want {
            return Err(format!(
                "fence {} shows a frame with checksum {sum:#018x}, not {what} ({want:#018x})",
                flip.fence
            ));
        }
        Ok(())
    });
}

/// `nothing_rejected`: the model refused no request or write.
fn nothing_rejected(guest: &mut Guest) {
    guest.invariant("nothing_rejected", |d: &Dock| match d.model().rejected() {
        [] => Ok(()),
        r => Err(format!("the model refused {}: {}", r.len(), r.join("; "))),
    });
}

/// The page flip and the unplug: the baseline twice (the same hash, console included) and a
/// seed that delays the model's answers (each delay reaches the guest on its clock).
#[calametra::scenario(spec = "../../specs/trigger6-jcd543.json", guest = lockstep, schedules = 1, faults = [delay])]
fn kms_flip_and_unplug(guest: &mut Guest) {
    kms_session(guest, true);
}

/// The page flip and the unplug with seeds that garble bulk OUT payloads: the dock misreads a
/// data packet of a frame, which reaches VRAM, and the flip shows something else than the guest
/// drew. Found, minimized, saved and the saved file replayed byte-exactly. `garble`, not
/// `corrupt`: a frame's payload goes OUT, and a byte the device misreads is the device's doing,
/// which no driver can see or prevent (hence `expect`: the break is the point); `corrupt` is a
/// wrong byte of a reply the driver receives, which it must validate. Of its first 48 seeds
/// (CALAMETRA_SCHEDULES=48, measured with `expect` taken out so that each seed is a trial), 40
/// break the invariant, the first of them seed 1 (one event: `garble(100230,0xf6) at
/// bulk.out#48`); 5 garble DMA headers until both tries of a frame's upload stall and the probe
/// exits 20 (four garbles, the shortest); 3 pass.
#[calametra::scenario(
    spec = "../../specs/trigger6-jcd543.json",
    guest = lockstep,
    schedules = 4,
    faults = [garble],
    expect = "flip_shows_what_the_guest_drew"
)]
fn kms_flip_corrupted(guest: &mut Guest) {
    kms_session(guest, false);
}

/// lsusb against the spec: the guest waits for the dock, compares the raw descriptors the
/// kernel read (`descriptors` in sysfs: the device descriptor and the configuration) with the
/// spec's bytes, and runs `lsusb -v`, which must read the strings and the BOS descriptor. A
/// seed delays the model's answers on the guest clock.
#[calametra::scenario(spec = "../../specs/trigger6-jcd543.json", guest = lockstep, schedules = 1, faults = [delay])]
fn lsusb(guest: &mut Guest) {
    let model = Trigger6::try_from_spec(guest.spec()).expect("the Trigger 6 model builds");
    let facts = model.facts();
    let mut want = facts.device.clone();
    want.extend_from_slice(&facts.configuration);
    guest.attach(model);
    guest.run_script(
        &format!("{}{LSUSB}", wait_configured("0711:5601")),
        vec![("calametra/descriptors".into(), want)],
    );
}

const LSUSB: &str = r#"
fail() { echo "T6CHECK-FAILED $1"; exit 20; }
[ "$(cat /sys/bus/usb/devices/$dev/speed)" = 5000 ] || fail "SuperSpeed (5000), got $(cat /sys/bus/usb/devices/$dev/speed)"
echo CALAMETRA-DESCRIPTORS-BEGIN
od -An -v -tx1 /sys/bus/usb/devices/$dev/descriptors
echo CALAMETRA-DESCRIPTORS-END
cmp /sys/bus/usb/devices/$dev/descriptors /calametra/descriptors || fail "the kernel's descriptors are the spec's bytes"
lsusb -v -d 0711:5601 > /tmp/lsusb.txt
rc=$?
echo CALAMETRA-LSUSB-BEGIN
cat /tmp/lsusb.txt
echo "CALAMETRA-LSUSB-END rc=$rc"
[ $rc = 0 ] || fail "lsusb -v exited with $rc"
for want in 'ID 0711:5601' 'bcdUSB +3\.10' 'bMaxPacketSize0 +9' 'MCT Corp\.' 'USB Station' 'Binary Object Store Descriptor' 'SuperSpeed USB Device Capability'; do
    grep -qE "$want" /tmp/lsusb.txt || fail "lsusb -v shows $want"
done
echo T6CHECK-OK
exit 0
"#;

/// The example driver (`examples/trigger6`, built as the static `t6-drive`) over usbfs in the
/// guest: probe, EDID, modeset to 1920x1080@60, the colour bars uploaded and flipped with a
/// fence (each upload one 3 MB bulk OUT), then its watch loop. The guest checks the driver's
/// summary; the model checks every flip it shows is the bars and that it refused nothing. A
/// seed delays the model's answers on the guest clock.
#[calametra::scenario(spec = "../../specs/trigger6-jcd543.json", guest = lockstep, schedules = 1, faults = [delay])]
fn example_driver_over_usbfs(guest: &mut Guest) {
    guest.attach(dock(guest, false));
    let bin = match t6_drive() {
        Ok(b) => b.clone(),
        Err(e) => panic!("{e}"),
    };
    guest.run_script(
        &format!("{}{DRIVE}", wait_configured("0711:5601")),
        vec![("calametra/t6-drive".into(), bin)],
    );
    flips_show(guest, false);
    nothing_rejected(guest);
}

/// The guest waits for the dock and its usbfs node (devtmpfs, mounted by `/init`), runs the
/// driver (its own timeouts and sleeps: the model's clock is the guest's) and checks what it
/// printed.
const DRIVE: &str = r#"
fail() { echo "T6CHECK-FAILED $1"; exit 20; }
node=/dev/bus/usb/$(printf %03d $(cat /sys/bus/usb/devices/$dev/busnum))/$(printf %03d $(cat /sys/bus/usb/devices/$dev/devnum))
[ -c "$node" ] || fail "the usbfs node $node"
echo "T6DRIVE-NODE $node"
/calametra/t6-drive > /tmp/drive.out
rc=$?
cat /tmp/drive.out
echo "T6DRIVE-EXIT rc=$rc"
[ $rc = 0 ] || exit $rc
for want in 'ending=Completed' 'mode=1920x1080@60' 'edid=HPN3725' 'frame_fnv1a64=0x03a9ad8537ec0a25'; do
    grep '^T6DRIVE ok ' /tmp/drive.out | grep -qF "$want" || fail "the driver's summary shows $want"
done
echo T6CHECK-OK
exit 0
"#;

/// The static `t6-drive` for the guest, read once: `CALAMETRA_T6_DRIVE`, or built into
/// `<target>/t6-drive` ([`calametra_qemu::probes::StaticBinary`]). It travels in the run's
/// probe archive, never in git or the cached guest.
fn t6_drive() -> &'static Result<Vec<u8>, String> {
    static BIN: std::sync::OnceLock<Result<Vec<u8>, String>> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        calametra_qemu::probes::StaticBinary {
            workspace: &root,
            package: "calametra-example-trigger6",
            bin: "t6-drive",
            features: "hardware",
            target_dir: target.join("t6-drive"),
            prebuilt_var: Some("CALAMETRA_T6_DRIVE"),
        }
        .bytes()
    })
}

calametra::main!();
