#!/usr/bin/env bash
# Builds the guest's Trigger 6 KMS pieces and puts them in the initramfs root (guest/build.sh
# calls it): the out-of-tree DRM driver guest/trigger6-drm/trigger6_drm.c, built with kbuild
# against Debian's linux-headers-KVER (installed on the host by scripts/install-qemu.sh; only
# built here, never loaded on the host), the DRM helper modules it depends on from the unpacked
# kernel package (drm, drm_kms_helper, drm_shmem_helper, in dependency order), and t6probe,
# the static KMS client the QEMU test runs (host gcc -static, the kernel's uapi DRM headers).
#
# Result in ROOT: lib/modules/trigger6/*.ko and lib/modules/trigger6/load-order (insmod them
# in that order; /init does not: a probe script does), bin/t6probe.
#
# Usage: guest/build-drm.sh KVER MODULES_DIR ROOT WORK
#   KVER         the guest kernel release (6.1.0-N-amd64)
#   MODULES_DIR  the unpacked kernel package's lib/modules/KVER, after depmod
#   ROOT         the initramfs root (its lib/modules/load-order lists modules /init loads)
#   WORK         a scratch directory
# Build output goes to stderr.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
log() { printf 'guest/build-drm.sh: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

[ $# = 4 ] || die "usage: guest/build-drm.sh KVER MODULES_DIR ROOT WORK"
kver=$1 mods=$2 root=$3 work=$4
kbuild=/lib/modules/$kver/build
[ -f "$kbuild/Makefile" ] || die "no kernel headers for $kver at $kbuild; install linux-headers-$kver (scripts/install-qemu.sh does)"
command -v make >/dev/null 2>&1 || die "needs make; install build-essential"
command -v gcc >/dev/null 2>&1 || die "needs gcc; install build-essential"
modinfo=$(command -v modinfo || echo /usr/sbin/modinfo)

# The driver, with kbuild, outside the source tree.
src="$work/trigger6-drm"
rm -rf "$src"
mkdir -p "$src"
cp "$here/trigger6-drm/Kbuild" "$here/trigger6-drm/trigger6_drm.c" "$src/"
log "building trigger6_drm.ko against $kbuild"
make -s -C "$kbuild" M="$src" modules >&2 || die "the trigger6 module did not build"
ko="$src/trigger6_drm.ko"
[ -f "$ko" ] || die "kbuild produced no $ko"
magic=$("$modinfo" -F vermagic "$ko")
case "$magic" in
    "$kver "*) ;;
    *) die "trigger6_drm.ko has vermagic '$magic', not $kver" ;;
esac

# Its dependencies from the kernel package, dependencies first, minus what /init loads.
name_of() { local f=${1##*/}; f=${f%.ko*}; echo "${f//-/_}"; }
declare -A loaded=()
while read -r m; do [ -n "$m" ] && loaded[$(name_of "$m")]=1; done < "$root/lib/modules/load-order"
order=()
add_dep() { # a module name (drm_kms_helper); its own dependencies first, once each
    local name=$1 rel dep
    [ -n "${loaded[$name]:-}" ] && return 0
    rel=$(awk -F: -v n="$name" '{ f = $1; sub(/.*\//, "", f); sub(/\.ko(\.[a-z]+)?$/, "", f); gsub(/-/, "_", f); if (f == n) { print $1; exit } }' "$mods/modules.dep")
    [ -n "$rel" ] || die "module $name (needed by trigger6_drm) is not in the kernel package"
    loaded[$name]=1
    for dep in $(awk -v m="$rel:" '$1 == m { for (i = 2; i <= NF; i++) print $i }' "$mods/modules.dep"); do
        add_dep "$(name_of "$dep")"
    done
    order+=("$rel")
}
for d in $("$modinfo" -F depends "$ko" | tr ',' ' '); do
    add_dep "$(name_of "$d")"
done

dest="$root/lib/modules/trigger6"
mkdir -p "$dest"
: > "$dest/load-order"
for rel in "${order[@]}"; do
    base=${rel##*/}
    case "$base" in
        *.ko.xz) xz -dc "$mods/$rel" > "$dest/${base%.xz}"; base=${base%.xz} ;;
        *.ko.zst) zstd -qdc "$mods/$rel" > "$dest/${base%.zst}"; base=${base%.zst} ;;
        *) cp "$mods/$rel" "$dest/$base" ;;
    esac
    echo "$base" >> "$dest/load-order"
done
cp "$ko" "$dest/trigger6_drm.ko"
echo trigger6_drm.ko >> "$dest/load-order"

# t6probe: the uapi DRM headers of the same kernel, __user defined away (they are unsanitised).
inc="$work/t6probe-include"
real=$(readlink -f "$kbuild")
uapi=""
for d in "$real/include/uapi/drm" "${real%-amd64}-common/include/uapi/drm"; do
    [ -f "$d/drm_mode.h" ] && { uapi=$d; break; }
done
[ -n "$uapi" ] || die "no uapi DRM headers under the $kver headers"
mkdir -p "$inc"
ln -sfn "$uapi" "$inc/drm"
gcc -static -O2 -Wall -D__user= -I"$inc" -o "$root/bin/t6probe" "$here/trigger6-drm/t6probe.c" >&2 \
    || die "t6probe did not build (needs the static libc: libc6-dev)"

log "trigger6: $(tr '\n' ' ' < "$dest/load-order")+ bin/t6probe"
