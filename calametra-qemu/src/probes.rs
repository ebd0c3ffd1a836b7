//! Guest probes the project's guest scenarios and tests share.

/// The start of a probe script that needs the device `vid_pid` (`"0711:5601"`): waits until the
/// kernel has configured it, sets `$dev` to its sysfs name and prints
/// `CALAMETRA-ENUMERATED <dev> <vid:pid>` ([`crate::guest::marker::ENUMERATED`]). A script is
/// this followed by what it checks (`format!("{}{CHECKS}", wait_configured("0711:5601"))`).
pub fn wait_configured(vid_pid: &str) -> String {
    let enumerated = crate::guest::marker::ENUMERATED;
    format!(
        r#"
find_configured() {{
    for d in /sys/bus/usb/devices/*; do
        [ "$(cat $d/idVendor 2>/dev/null):$(cat $d/idProduct 2>/dev/null)" = {vid_pid} ] || continue
        [ -n "$(cat $d/bConfigurationValue 2>/dev/null)" ] || continue
        echo "${{d##*/}}"
        return 0
    done
    return 1
}}
while ! dev=$(find_configured); do sleep 0.2; done
echo "{enumerated} $dev {vid_pid}"
"#
    )
}

/// Waits for `dev` (`vid:pid`), prints `lsusb -v` between markers, detaches it to DFU mode with
/// `dfu-util -e` (a bitWillDetach device re-enumerates by itself), waits for the DFU-mode
/// interface and downloads `/calametra/image.bin`. Its exit status is dfu-util's.
pub fn dfu_detach_and_download(dev: &str) -> String {
    format!(
        r#"
dev={dev}
# The sysfs name of the configured device whose first interface has DFU protocol $1.
find() {{
    for d in /sys/bus/usb/devices/*; do
        [ -f "$d/idVendor" ] || continue
        [ "$(cat $d/idVendor):$(cat $d/idProduct)" = "$dev" ] || continue
        [ -n "$(cat $d/bConfigurationValue 2>/dev/null)" ] || continue
        [ "$(cat $d:1.0/bInterfaceProtocol 2>/dev/null)" = "$1" ] || continue
        echo "${{d##*/}}"
        return 0
    done
    return 1
}}
wait_mode() {{ while ! find "$1" >/dev/null; do sleep 0.2; done; }}
wait_mode 01
echo "CALAMETRA-ENUMERATED $(find 01) $dev"
echo "CALAMETRA-LSUSB-BEGIN"
lsusb -v -d $dev
echo "CALAMETRA-LSUSB-END rc=$?"
dfu-util -d $dev -e
wait_mode 02
echo "CALAMETRA-DFU-MODE $(find 02)"
echo "CALAMETRA-DFU-DOWNLOAD-BEGIN"
dfu-util -d $dev -a 0 -D /calametra/image.bin
rc=$?
echo "CALAMETRA-DFU-DOWNLOAD-END rc=$rc"
exit $rc
"#
    )
}

/// `len` bytes of a fixed xorshift pattern: the body of the images the DFU guest runs
/// download (seal it with `calametra_models::dfu::seal_image` for a model that checks images).
pub fn pattern(len: usize) -> Vec<u8> {
    let mut x = 0x2545_f491u32;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}
