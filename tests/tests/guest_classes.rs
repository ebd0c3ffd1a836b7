//! The kernel's own class drivers in the guest, against Calametra's class models: usbhid,
//! hid-generic and hidraw bind the HID model (`calametra_models::hid`), cdc-acm binds the
//! CDC-ACM echo model (`calametra_models::cdc_acm`), usb-storage and sd_mod bind the
//! mass-storage model (`calametra_models::msc`), and a shell script uses the device nodes they
//! make, as a user's program would. The kernel's log of each run (`dmesg`) is in the
//! trace; a kernel oops, `BUG:` or hung task would fail the trial as `kernel_fault`. Each
//! scenario runs its baseline twice (the same hash, console and kernel log included) and 8
//! seeds that delay the model's answers on the guest clock; `usb_storage_unplug_mid_write`'s
//! seeds also unplug the disk while the file is written. The trials are ignored unless
//! asked for:
//!
//! ```sh
//! scripts/install-qemu.sh && guest/build.sh && calametra-qemu/qemu/build.sh
//! cargo test -p calametra-tests --test guest_classes -- --ignored --test-threads 1
//! ```

use calametra_models::cdc_acm::{acm_host_behaved, Acm};
use calametra_models::hid::{output_reports_well_formed, Hid};
use calametra_models::msc::{bot_well_formed, Msc};
use calametra_qemu::lockstep::ExternalAction;
use calametra_qemu::probes::wait_configured;
use calametra_qemu::Guest;

/// `/dev/hidraw0`: read one of the model's samples (an input report), write an output report
/// (report ID 0, then 8 bytes), read reports until the model's answer echoing it.
const HIDRAW: &str = r#"
fail() { echo "HIDCHECK-FAILED $1"; exit 20; }
i=0
while [ ! -e /dev/hidraw0 ]; do
    i=$((i + 1)); [ $i -le 100 ] || fail "no /dev/hidraw0 10 s after the device was configured"
    sleep 0.1
done
exec 3<>/dev/hidraw0 || fail "open /dev/hidraw0"
report() { dd bs=8 count=1 <&3 2>/dev/null | od -An -v -tx1 | tr -d ' \n'; }
got=$(report)
echo "HID-INPUT $got"
case "$got" in
    ca??43414c410000) ;;
    *) fail "a sample is ca <n> 43414c41 0000, got $got" ;;
esac
printf '\000\132\001\002\003\004\005\006\007' >&3 || fail "write the output report"
n=0
while got=$(report); [ "${got#ac}" = "$got" ]; do
    n=$((n + 1)); [ $n -le 20 ] || fail "no answer in the 20 reports after the output report"
done
echo "HID-ANSWER $got"
[ "$got" = ac015a0102030405 ] || fail "the answer echoes the output report: ac015a0102030405, got $got"
echo HIDCHECK-OK
"#;

/// `/dev/ttyACM0`: raw, no echo, 115200 baud; a line written comes back byte for byte.
const TTYACM: &str = r#"
fail() { echo "ACMCHECK-FAILED $1"; exit 20; }
i=0
while [ ! -e /dev/ttyACM0 ]; do
    i=$((i + 1)); [ $i -le 100 ] || fail "no /dev/ttyACM0 10 s after the device was configured"
    sleep 0.1
done
exec 3<>/dev/ttyACM0 || fail "open /dev/ttyACM0"
stty raw -echo 115200 <&3 || fail "stty"
cat <&3 > /tmp/rx &
reader=$!
msg='hello from the guest through cdc-acm, 0123456789'
printf '%s\n' "$msg" >&3 || fail "write"
want=$(( ${#msg} + 1 ))
i=0
while [ "$(wc -c < /tmp/rx)" -lt $want ]; do
    i=$((i + 1))
    [ $i -le 100 ] || fail "$(wc -c < /tmp/rx) of $want bytes came back"
    sleep 0.1
done
kill $reader
echo "ACM-ECHO $(cat /tmp/rx)"
printf '%s\n' "$msg" | cmp - /tmp/rx || fail "the echo differs"
echo ACMCHECK-OK
"#;

/// hidraw against the HID model: the input report read, the output report written and checked
/// by the model (`output_reports_well_formed`), its answer read back.
#[calametra::scenario(spec = "../calametra-models/specs/hid-reports.json", guest = lockstep, schedules = 8, faults = [delay])]
fn hidraw_reports(guest: &mut Guest) {
    guest.attach(Hid::from_spec(guest.spec()));
    guest.run_script(
        &format!("{}{HIDRAW}", wait_configured("1209:0c10")),
        Vec::new(),
    );
    guest.invariant("output_reports_well_formed", |d: &Hid| {
        output_reports_well_formed(d)
    });
}

/// ttyACM against the CDC-ACM echo model: a line comes back byte for byte; the model checks
/// the line coding and that data comes only while DTR is raised (`acm_host_behaved`).
#[calametra::scenario(spec = "../calametra-models/specs/cdc-acm-echo.json", guest = lockstep, schedules = 8, faults = [delay])]
fn ttyacm_echo(guest: &mut Guest) {
    guest.attach(Acm::from_spec(guest.spec()));
    guest.run_script(
        &format!("{}{TTYACM}", wait_configured("1209:0c11")),
        Vec::new(),
    );
    guest.invariant("acm_host_behaved", |d: &Acm| acm_host_behaved(d));
}

/// `/dev/sda`: format the model's disk (`mkdosfs`), mount it, write a 96 KiB file, unmount,
/// drop the caches, mount again and compare; or, when the device was unplugged during the
/// write, check that the kernel logged the disconnect (and, as on every run, no oops).
const USB_STORAGE: &str = r#"
unplugged() { dmesg | grep -q 'USB disconnect'; }
# After an unplug (the unplug scenario's seeds) any step may fail: what counts then is that the
# kernel logged the disconnect, and (as on every run) reported no oops, BUG or hung task.
fail() {
    if unplugged; then
        echo "MSC-UNPLUGGED at: $1"
        umount /mnt 2>/dev/null
        dmesg | grep -E 'USB disconnect|I/O error|rejecting I/O' | head -n 3
        exit 0
    fi
    echo "MSCCHECK-FAILED $1"; exit 20
}
i=0
while [ ! -b /dev/sda ]; do
    i=$((i + 1)); [ $i -le 100 ] || fail "no /dev/sda 10 s after the device was configured"
    sleep 0.1
done
mkdosfs /dev/sda > /dev/null || fail "mkdosfs /dev/sda"
mkdir -p /mnt
mount -t vfat /dev/sda /mnt || fail "mount"
i=0
while [ $i -lt 3072 ]; do printf '%07d calametra mass storage.\n' $i; i=$((i + 1)); done > /tmp/file
echo MSC-WRITE-BEGIN
cp /tmp/file /mnt/file && sync
rc=$?
echo "MSC-WRITE-END rc=$rc"
[ $rc = 0 ] || fail "the write (cp and sync exited with $rc)"
umount /mnt || fail "umount"
echo 3 > /proc/sys/vm/drop_caches
mount -t vfat /dev/sda /mnt || fail "mount again"
cmp /tmp/file /mnt/file || fail "the file read back differs"
umount /mnt
echo MSCCHECK-OK
"#;

/// usb-storage and sd_mod against the mass-storage model: the disk formatted, mounted, a file
/// written and read back identical, every CBW well formed (`bot_well_formed`).
#[calametra::scenario(spec = "../calametra-models/specs/msc-disk.json", guest = lockstep, schedules = 8, faults = [delay])]
fn usb_storage_file(guest: &mut Guest) {
    guest.attach(Msc::from_spec(guest.spec()));
    guest.run_script(
        &format!("{}{USB_STORAGE}", wait_configured("1209:0c12")),
        Vec::new(),
    );
    guest.invariant("bot_well_formed", |d: &Msc| bot_well_formed(d));
}

/// Where on the guest clock (ns since boot) the baseline of `usb_storage_file` writes the file
/// (its first and last WRITE(10) of the file, 220.759 s and 221.099 s, from the snapshot of
/// this QEMU and guest build; the device enumerates at about 218.0 s, so a later build that
/// shifts these a little still unplugs a configured disk, and the script judges any step): the
/// window the unplug's seeds draw from.
const WRITE_WINDOW_NS: (u64, u64) = (220_750_000_000, 221_100_000_000);

/// The same run with an `unplug` that each seed places while the file is being written: the
/// write fails, the kernel logs the disconnect, and no oops, BUG or hung task follows (a
/// `kernel_fault` would fail the trial with the kernel's last lines).
#[calametra::scenario(spec = "../calametra-models/specs/msc-disk.json", guest = lockstep, schedules = 8, faults = [delay])]
fn usb_storage_unplug_mid_write(guest: &mut Guest) {
    usb_storage_file(guest);
    guest.external("unplug", ExternalAction::Unplug);
    guest.window(WRITE_WINDOW_NS.0, WRITE_WINDOW_NS.1);
}

calametra::main!();
