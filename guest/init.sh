#!/bin/busybox sh
# /init of the Calametra guest: mounts proc, sys and devtmpfs, loads the USB host modules and
# the class drivers (hid/usbhid/hid-generic, cdc-acm, usb-storage, sd_mod, vfat) in depmod
# order, runs the probe named on the kernel command line, prints the kernel log of the run and
# powers off.
#
#   calametra.probe=lsusb|dfu|script   what to run (default lsusb)
#   calametra.dev=VVVV:PPPP            the device under test (vendor:product, hex)
#   calametra.snapshot=pvpanic         pause for a snapshot once the modules are loaded
#
# Files the host adds in a second cpio archive appended to the initramfs: /calametra/env
# (sourced: DFU_ALT, DFU_SIZE, DFU_ARGS), /calametra/image.bin (the DFU image),
# /calametra/probe.sh (the `script` probe). Console markers the host parses, one per line:
#   CALAMETRA-ENUMERATED <sysfs name> <vid>:<pid>
#   CALAMETRA-PROBE-BEGIN name=<probe>
#   CALAMETRA-PROBE-END rc=<n>
#   CALAMETRA-DMESG-BEGIN / CALAMETRA-DMESG-END   the kernel log since the snapshot, after the probe
# The kernel reports a task blocked in D state for more than 40 s of guest time (a hang inside
# a driver; longer than the SCSI layer's 30 s command timeout, which is no hang) on the
# console, before the host's watchdog (60 s of guest time without progress) gives up.
# Waiting for the device has no deadline here: a guest that never sees it goes quiet, and the
# host's watchdog ends the run as emulator_blocked (no verdict) rather than this script failing.
/bin/busybox --install -s /bin
export PATH=/bin:/sbin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mkdir -p /dev/pts /tmp
echo "CALAMETRA-INIT"

for m in $(cat /lib/modules/load-order); do
    insmod "/lib/modules/$m" || echo "CALAMETRA-WARN insmod $m failed"
done
# Hung-task reports after 40 s of guest time, checked every 5 s, all of them (a hang in a
# class driver is a failure of its own kind on the host, named before the watchdog's turn).
echo 40 > /proc/sys/kernel/hung_task_timeout_secs 2>/dev/null
echo 5 > /proc/sys/kernel/hung_task_check_interval_secs 2>/dev/null
echo -1 > /proc/sys/kernel/hung_task_warnings 2>/dev/null

PROBE=lsusb
DEV=
SNAPSHOT=
for arg in $(cat /proc/cmdline); do
    case "$arg" in
        calametra.probe=*) PROBE=${arg#calametra.probe=} ;;
        calametra.dev=*) DEV=${arg#calametra.dev=} ;;
        calametra.snapshot=*) SNAPSHOT=${arg#calametra.snapshot=} ;;
    esac
done
[ -f /calametra/env ] && . /calametra/env

# The run's kernel log starts here (the boot's is the same in every run).
dmesg -c > /dev/null
# A snapshot start: the host boots without the device and QEMU (`-device pvpanic -action
# panic=pause`) stops on this write, at the same guest instruction every time; the host saves
# the machine there. A run restored from it goes on from here, and the device arrives then.
if [ "$SNAPSHOT" = pvpanic ]; then
    echo "CALAMETRA-SNAPSHOT"
    printf '\001' | dd of=/dev/port bs=1 seek=1285 count=1 2>/dev/null
    echo "CALAMETRA-RESTORED"
fi
VID=${DEV%%:*}
PID=${DEV##*:}
export VID PID

# Prints the sysfs name of the configured device VID:PID once it is there.
find_dev() {
    for d in /sys/bus/usb/devices/*; do
        [ -f "$d/idVendor" ] || continue
        [ "$(cat "$d/idVendor")" = "$VID" ] || continue
        [ "$(cat "$d/idProduct")" = "$PID" ] || continue
        [ -n "$(cat "$d/bConfigurationValue" 2>/dev/null)" ] || continue
        basename "$d"
        return 0
    done
    return 1
}

wait_dev() {
    while ! SYSDEV=$(find_dev); do sleep 0.2; done
    echo "CALAMETRA-ENUMERATED $SYSDEV $VID:$PID"
}

probe_lsusb() {
    wait_dev
    echo "CALAMETRA-DESCRIPTORS-BEGIN"
    od -An -v -tx1 "/sys/bus/usb/devices/$SYSDEV/descriptors"
    echo "CALAMETRA-DESCRIPTORS-END"
    echo "CALAMETRA-LSUSB-BEGIN"
    lsusb -v -d "$VID:$PID"
    rc=$?
    echo "CALAMETRA-LSUSB-END rc=$rc"
    return $rc
}

# The class protocol of the device's first interface: 01 run-time DFU, 02 DFU mode.
dfu_protocol() {
    cat "/sys/bus/usb/devices/$SYSDEV:1.0/bInterfaceProtocol" 2>/dev/null
}

probe_dfu() {
    wait_dev
    if [ "$(dfu_protocol)" = 01 ]; then
        # Detach in its own dfu-util run: without udevd, libusb in one process never sees the
        # device come back, so a new process looks for it in DFU mode.
        echo "CALAMETRA-DFU-DETACH"
        dfu-util -d "$VID:$PID" -e
        while ! { SYSDEV=$(find_dev) && [ "$(dfu_protocol)" = 02 ]; }; do sleep 0.2; done
        echo "CALAMETRA-DFU-MODE $SYSDEV"
    fi
    img=/calametra/image.bin
    if [ ! -f "$img" ]; then
        # No image from the host: a fixed 64 KiB pattern.
        i=0
        while [ $i -lt 256 ]; do printf '%0255d\n' $i; i=$((i + 1)); done > /tmp/image.bin
        img=/tmp/image.bin
    fi
    size=${DFU_SIZE:-$(wc -c < "$img")}
    alt=${DFU_ALT:-0}
    echo "CALAMETRA-DFU-DOWNLOAD-BEGIN size=$size"
    dfu-util -d "$VID:$PID" -a "$alt" ${DFU_ARGS:-} -D "$img"
    rc=$?
    echo "CALAMETRA-DFU-DOWNLOAD-END rc=$rc"
    [ $rc = 0 ] || return $rc
    wait_dev
    echo "CALAMETRA-DFU-UPLOAD-BEGIN"
    rm -f /tmp/upload.bin
    dfu-util -d "$VID:$PID" -a "$alt" ${DFU_ARGS:-} -U /tmp/upload.bin -Z "$size"
    rc=$?
    echo "CALAMETRA-DFU-UPLOAD-END rc=$rc"
    [ $rc = 0 ] || return $rc
    if cmp "$img" /tmp/upload.bin; then
        echo "CALAMETRA-DFU-MATCH $(md5sum < "$img" | cut -c1-32)"
        return 0
    fi
    echo "CALAMETRA-DFU-MISMATCH $(md5sum < "$img" | cut -c1-32) $(md5sum < /tmp/upload.bin | cut -c1-32)"
    return 1
}

probe_script() {
    if [ ! -f /calametra/probe.sh ]; then
        echo "CALAMETRA-ERROR the script probe needs /calametra/probe.sh"
        return 2
    fi
    sh /calametra/probe.sh
}

echo "CALAMETRA-PROBE-BEGIN name=$PROBE"
case "$PROBE" in
    lsusb) probe_lsusb ;;
    dfu) probe_dfu ;;
    script) probe_script ;;
    *) echo "CALAMETRA-ERROR unknown probe $PROBE"; false ;;
esac
rc=$?
echo "CALAMETRA-PROBE-END rc=$rc"
echo "CALAMETRA-DMESG-BEGIN"
dmesg
echo "CALAMETRA-DMESG-END"
sync
poweroff -f
