#!/usr/bin/env bash
# Builds the disposable Calametra guest from Debian packages: Linux 6.1 (the newest
# linux-image-6.1.0-*-amd64 apt knows), its USB host modules (usb-common, usbcore, xhci-hcd,
# xhci-pci) and USB class drivers (usbhid and hid-generic for hidraw, cdc-acm, usb-storage
# with the SCSI disk layer, vfat with its code pages), with what they depend on, ordered by
# depmod and loaded by /init before the snapshot, busybox-static, usbutils (lsusb) and
# dfu-util with their shared libraries, in a gzip'd cpio (newc) initramfs whose /init is
# guest/init.sh, and the Trigger 6 KMS pieces guest/build-drm.sh builds (the trigger6 DRM module
# against linux-headers-<kernel>, the DRM helper modules it needs, the t6probe client). Packages
# are fetched with `apt-get download` and unpacked with `dpkg-deb -x`: nothing is installed
# into the host root (the headers package is scripts/install-qemu.sh's job).
#
# The result is cached under <target>/guest/<key>/ (vmlinuz, initramfs.cpio.gz, manifest.txt),
# keyed by the package versions, the headers and host compiler versions, and this directory's
# scripts and driver sources; a second run prints the path and returns at once. The last line
# of stdout is always the guest directory.
#
# Usage: guest/build.sh [--target-dir DIR] [--print-key | --print-kernel]
#   --print-kernel prints the kernel release the guest uses (6.1.0-N-amd64) and exits.
#   DIR defaults to <repo>/target; the cache is DIR/guest/<key>/ and DIR/guest/current links it.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/.." && pwd)
target="$repo/target"
print_key=0
print_kernel=0
while [ $# -gt 0 ]; do
    case "$1" in
        --target-dir) target=$2; shift 2 ;;
        --print-key) print_key=1; shift ;;
        --print-kernel) print_kernel=1; shift ;;
        -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
        *) echo "guest/build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { printf 'guest/build.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# The newest 6.1 kernel apt knows (after `apt-get update`).
newest_kernel() {
    apt-cache search --names-only '^linux-image-6\.1\.0-[0-9]+-amd64$' | awk '{print $1}' | sort -V | tail -n1
}
if [ "$print_kernel" = 1 ]; then
    kpkg=$(newest_kernel)
    [ -n "$kpkg" ] || die "apt knows no linux-image-6.1.0-*-amd64; run apt-get update"
    echo "${kpkg#linux-image-}"
    exit 0
fi

for tool in apt-get apt-cache dpkg-deb cpio gzip sha256sum; do
    command -v "$tool" >/dev/null 2>&1 || die "needs $tool; run scripts/install-qemu.sh first"
done
depmod=$(command -v depmod || true)
[ -n "$depmod" ] || [ -x /usr/sbin/depmod ] && depmod=${depmod:-/usr/sbin/depmod}
[ -x "$depmod" ] || die "needs depmod (kmod); run scripts/install-qemu.sh first"

candidate() { apt-cache policy "$1" 2>/dev/null | sed -n 's/^ *Candidate: *//p' | head -n1; }

kpkg=$(newest_kernel)
[ -n "$kpkg" ] || die "apt knows no linux-image-6.1.0-*-amd64; run apt-get update"
kver=${kpkg#linux-image-}

pkgs=("$kpkg" busybox-static usbutils dfu-util libusb-1.0-0 libudev1)
versions=""
for p in "${pkgs[@]}"; do
    v=$(candidate "$p")
    [ -n "$v" ] && [ "$v" != "(none)" ] || die "apt has no candidate for $p; run apt-get update"
    versions+="$p=$v"$'\n'
done
libc=$(dpkg-query -W -f='${Version}' libc6 2>/dev/null || echo unknown)
versions+="libc6(host)=$libc"$'\n'
headers=$(dpkg-query -W -f='${Version}' "linux-headers-$kver" 2>/dev/null || echo none)
versions+="linux-headers-$kver(host)=$headers"$'\n'
versions+="gcc(host)=$(gcc -dumpfullversion 2>/dev/null || echo none)"$'\n'
scripts_sum=$(cat "$here/build.sh" "$here/init.sh" "$here/build-drm.sh" "$here"/trigger6-drm/* | sha256sum | cut -c1-16)
key=$(printf '%sscripts=%s\n' "$versions" "$scripts_sum" | sha256sum | cut -c1-16)
if [ "$print_key" = 1 ]; then echo "$key"; exit 0; fi

out="$target/guest/$key"
if [ -f "$out/initramfs.cpio.gz" ] && [ -f "$out/vmlinuz" ] && [ -f "$out/manifest.txt" ]; then
    ln -sfn "$key" "$target/guest/current"
    log "cached: $out"
    echo "$out"
    exit 0
fi

mkdir -p "$target/guest/debs"
work=$(mktemp -d "$target/guest/.build.XXXXXX")
trap 'rm -rf "$work"' EXIT

log "downloading ${pkgs[*]}"
debs="$target/guest/debs"
for p in "${pkgs[@]}"; do
    v=$(candidate "$p")
    # apt-get download writes into the current directory; reuse a .deb we already have.
    vfile=${v//:/%3a}
    if ! ls "$debs/${p}_${vfile}_"*.deb >/dev/null 2>&1; then
        (cd "$debs" && apt-get download -qq -o APT::Sandbox::User=root "$p=$v") || die "apt-get download $p=$v failed"
    fi
done

ext="$work/ext"
mkdir -p "$ext"
for p in "${pkgs[@]}"; do
    v=$(candidate "$p"); vfile=${v//:/%3a}
    deb=$(ls "$debs/${p}_${vfile}_"*.deb | head -n1)
    dpkg-deb -x "$deb" "$ext"
done

root="$work/root"
mkdir -p "$root"/{bin,sbin,dev,proc,sys,tmp,run,etc,lib64,calametra,usr/lib/x86_64-linux-gnu,lib/x86_64-linux-gnu}
ln -s bin "$root/usr/bin" 2>/dev/null || true
ln -s sbin "$root/usr/sbin" 2>/dev/null || true

# busybox; its applets are linked by /init at boot.
cp "$ext/bin/busybox" "$root/bin/busybox"

# Kernel and modules.
cp "$ext/boot/vmlinuz-$kver" "$work/vmlinuz"
mods="$ext/lib/modules/$kver"
[ -d "$mods" ] || die "the kernel package has no lib/modules/$kver"
"$depmod" -b "$ext" "$kver"
# The host controller, then the class drivers a model of that class binds (each loaded before
# any device enumerates, so the first device of a class finds its driver there).
want=(usb-common usbcore xhci-hcd xhci-pci
      hid usbhid hid-generic cdc-acm usb-storage sd-mod vfat nls-cp437 nls-ascii)
order=()
add_mod() { # add a module and (first) its dependencies from modules.dep, once each
    local rel=$1 dep
    for m in "${order[@]}"; do [ "$m" = "$rel" ] && return 0; done
    for dep in $(awk -v m="$rel:" '$1 == m { for (i = 2; i <= NF; i++) print $i }' "$mods/modules.dep"); do
        add_mod "$dep"
    done
    order+=("$rel")
}
for name in "${want[@]}"; do
    rel=$(awk -F: -v n="$name" '{ f = $1; sub(/.*\//, "", f); sub(/\.ko(\.[a-z]+)?$/, "", f); gsub(/_/, "-", f); if (f == n) { print $1; exit } }' "$mods/modules.dep")
    [ -n "$rel" ] || die "module $name is not in $kpkg"
    add_mod "$rel"
done
mkdir -p "$root/lib/modules"
: > "$root/lib/modules/load-order"
for rel in "${order[@]}"; do
    base=$(basename "$rel")
    case "$base" in
        *.ko.xz) xz -dc "$mods/$rel" > "$root/lib/modules/${base%.xz}"; base=${base%.xz} ;;
        *.ko.zst) zstd -qdc "$mods/$rel" > "$root/lib/modules/${base%.zst}"; base=${base%.zst} ;;
        *) cp "$mods/$rel" "$root/lib/modules/$base" ;;
    esac
    echo "$base" >> "$root/lib/modules/load-order"
done

# usbutils and dfu-util with their shared libraries (resolved from the unpacked packages first,
# then the host's glibc, which is the same Debian release).
cp "$ext/usr/bin/lsusb" "$root/bin/lsusb"
cp "$ext/usr/bin/dfu-util" "$root/bin/dfu-util"
libpath="$ext/lib/x86_64-linux-gnu:$ext/usr/lib/x86_64-linux-gnu"
for bin in "$root/bin/lsusb" "$root/bin/dfu-util"; do
    LD_LIBRARY_PATH="$libpath" ldd "$bin" | awk '/=>/ { print $3 } /^\t\/lib64\// { print $1 }' | while read -r lib; do
        [ -n "$lib" ] && [ -f "$lib" ] || die "$(basename "$bin"): unresolved library $lib"
        name=$(basename "$lib")
        case "$lib" in
            /lib64/*) cp -L "$lib" "$root/lib64/$name" ;;
            *) cp -L "$lib" "$root/lib/x86_64-linux-gnu/$name" ;;
        esac
    done
done
[ -f "$root/lib64/ld-linux-x86-64.so.2" ] || cp -L /lib64/ld-linux-x86-64.so.2 "$root/lib64/"

# The Trigger 6 DRM driver, its helper modules and t6probe.
"$here/build-drm.sh" "$kver" "$mods" "$root" "$work" || die "guest/build-drm.sh failed"

cp "$here/init.sh" "$root/init"
chmod 755 "$root/init"
printf 'root:x:0:0:root:/:/bin/sh\n' > "$root/etc/passwd"

{
    echo "calametra guest $key"
    echo "kernel=$kver"
    printf '%s' "$versions"
    echo "modules=$(tr '\n' ' ' < "$root/lib/modules/load-order")"
    echo "trigger6=$(tr '\n' ' ' < "$root/lib/modules/trigger6/load-order")"
} > "$work/manifest.txt"

(cd "$root" && find . -print0 | LC_ALL=C sort -z | cpio --null --create --format=newc --quiet --owner=0:0 --reproducible) \
    | gzip -9n > "$work/initramfs.cpio.gz"

mkdir -p "$out"
mv "$work/vmlinuz" "$work/initramfs.cpio.gz" "$work/manifest.txt" "$out/"
ln -sfn "$key" "$target/guest/current"
log "built $out ($(du -h "$out/initramfs.cpio.gz" | cut -f1) initramfs, kernel $kver)"
echo "$out"
