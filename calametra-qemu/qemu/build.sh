#!/usr/bin/env bash
# Builds the lockstep QEMU: QEMU 10.0.2 from Debian's source archive with the usb-calametra
# device of patches/*.patch, only qemu-system-x86_64 (TCG, no default features).
#
# The source is Debian's repacked upstream tarball (qemu_10.0.2+ds.orig.tar.xz) from
# bookworm-backports, fetched with `apt-get source --download-only` (a deb-src entry reusing the
# URI of the machine's own Debian apt source, so this script names no package host, in a
# private apt source-parts directory used by this script's apt commands and removed when it
# exits: no apt source file is left behind; the .dsc and debian.tar.xz of that upload are not
# served, which is tolerated) and
# verified twice: against the SHA-256 pinned here and against the one in apt's Sources index.
# The +ds tarball lacks the bundled meson wheels (fetched with pip, hash-pinned, into
# python/wheels) and the firmware blobs (not installed; runs take -L to Debian's seabios and
# qemu-system-data files, see calametra_qemu::lockstep::firmware_dirs).
#
# The binary is cached under <target>/qemu-lockstep/<key>/qemu-system-x86_64, keyed by the
# source checksum, the configure flags and the patches; <target>/qemu-lockstep/current links the last
# one. A cached build returns at once. The last line of stdout is always the binary's path.
# Build dependencies are installed with apt-get (as root; idempotent).
#
# Usage: calametra-qemu/qemu/build.sh [--target-dir DIR] [--keep-tree] [--print-key]
#   DIR defaults to <repo>/target. --keep-tree keeps the patched source and build tree in
#   <key>/tree for work on the device (edit hw/usb/dev-calametra.c there, `ninja -C
#   <key>/tree/build qemu-system-x86_64`).
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
target="$repo/target"
keep_tree=0
print_key=0
while [ $# -gt 0 ]; do
    case "$1" in
        --target-dir) target=$2; shift 2 ;;
        --keep-tree) keep_tree=1; shift ;;
        --print-key) print_key=1; shift ;;
        -h|--help) sed -n '2,22p' "$0"; exit 0 ;;
        *) echo "calametra-qemu/qemu/build.sh: unknown argument $1" >&2; exit 2 ;;
    esac
done

log() { printf 'qemu-lockstep: %s\n' "$*" >&2; }
die() { log "$*"; exit 1; }

# What is built. A new QEMU is a new pin here (and patches rebased onto it).
upstream=10.0.2
debian_version="1:10.0.2+ds-2+deb13u1~bpo12+1"
suite=bookworm-backports
orig="qemu_${upstream}+ds.orig.tar.xz"
orig_sha256=0901da33844a331bf8b3602b9c1fbd178e60b737c8e3ade678255bd090c9b9f1
configure_flags=(--target-list=x86_64-softmmu --without-default-features --enable-tcg
    --disable-docs --disable-werror --disable-install-blobs)
# QEMU's pythondeps.toml installs these into its build venv; the +ds tarball drops the wheels.
wheels=(
    "meson==1.5.0 --hash=sha256:52b34f4903b882df52ad0d533146d4b992c018ea77399f825579737672ae7b20"
    "pycotap==1.3.1 --hash=sha256:1c3a25b3ff89e48f4e00f1f71dbbc1642b4f65c65d416524d07e73492fff25ea"
)

patches=("$here"/patches/*.patch)
[ -f "${patches[0]}" ] || die "no patches in $here/patches"
# The cache key: the source, how it is configured, the wheels and the patches.
key=$( { echo "$orig $orig_sha256"; printf '%s\n' "${configure_flags[@]}" "${wheels[@]}";
         cat "${patches[@]}"; } | sha256sum | cut -c1-16)
if [ "$print_key" = 1 ]; then echo "$key"; exit 0; fi

base="$target/qemu-lockstep"
out="$base/$key"
cached() {
    if [ -x "$out/qemu-system-x86_64" ] && [ -f "$out/manifest.txt" ]; then
        ln -sfn "$key" "$base/current"
        log "cached: $out"
        echo "$out/qemu-system-x86_64"
        exit 0
    fi
}
cached
# One build at a time per target directory: a second run waits, then finds the first's binary.
mkdir -p "$base"
exec 9>"$base/.build.lock"
if ! flock -n 9; then
    log "another build.sh is building in $base; waiting for it"
    flock 9
fi
cached

[ "$(id -u)" = 0 ] || die "needs root for apt-get (build dependencies)"
# apt options of the source fetch (a private source-parts directory when a deb-src is needed).
apt_opts=()
parts=""
trap '[ -z "$parts" ] || rm -rf "$parts"' EXIT
export DEBIAN_FRONTEND=noninteractive

# Build dependencies, and the firmware the runs load with -L.
deps=(gcc make pkg-config ninja-build flex bison libfdt-dev libglib2.0-dev libpixman-1-dev
      python3 python3-venv python3-pip patch xz-utils dpkg-dev seabios qemu-system-data)
missing=()
for p in "${deps[@]}"; do
    [ "$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)" = "install ok installed" ] || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
    log "installing ${missing[*]}"
    apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null \
        || { apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null; } \
        || die "apt-get install ${missing[*]} failed"
fi

# The URI of the machine's main Debian archive: the source that carries the `bookworm` suite
# (as scripts/install-qemu.sh finds it).
debian_uri() {
    local f
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        awk '
            BEGIN { RS=""; FS="\n" }
            {
                uri=""; suites=""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uri=u[1] }
                    if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); suites=" " $i " " }
                }
                if (uri != "" && suites ~ / bookworm / && !found) { print uri; found = 1 }
            }' "$f"
    done | awk 'NR == 1'
    if [ -f /etc/apt/sources.list ]; then
        awk '$1 == "deb" && !found {
                 for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { uri=$i; suite=$(i+1); break }
                 if (suite == "bookworm") { print uri; found = 1 }
             }' /etc/apt/sources.list
    fi
}

# The SHA-256 apt's Sources index gives for the tarball (empty when it does not know it).
index_sha256() {
    # `showsrc` lists every known source version; keep the paragraph of the pinned one.
    # (awk reads to the end: an early exit would fail the pipeline under pipefail.)
    { apt-cache "${apt_opts[@]}" showsrc qemu 2>/dev/null || true; } | awk -v f="$orig" -v v="$debian_version" '
        /^$/ { ver = ""; on = 0 }
        /^Version:/ { ver = $2 }
        /^Checksums-Sha256:/ { on = 1; next }
        /^[^ ]/ { on = 0 }
        on && ver == v && $3 == f && !found { print $1; found = 1 }'
}

# An apt source file an earlier version of this script left behind.
rm -f /etc/apt/sources.list.d/calametra-backports-src.sources

if [ -z "$(index_sha256)" ]; then
    uri=$(debian_uri | awk 'NR == 1')
    [ -n "$uri" ] || die "found no Debian apt source with the bookworm suite to add deb-src $suite from"
    parts=$(mktemp -d "${TMPDIR:-/tmp}/calametra-apt.XXXXXX")
    for f in /etc/apt/sources.list.d/*; do
        [ -e "$f" ] && ln -s "$f" "$parts/"
    done
    cat > "$parts/calametra-backports-src.sources" <<SRC
Types: deb-src
URIs: $uri
Suites: $suite
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt_opts=(-o "Dir::Etc::SourceParts=$parts")
    log "using deb-src $suite from the machine's Debian source (for this command only)"
    apt-get "${apt_opts[@]}" update -qq
fi
indexed=$(index_sha256)
[ -n "$indexed" ] || die "apt's Sources index has no $orig for qemu $debian_version (has $suite moved on? update the pin)"
[ "$indexed" = "$orig_sha256" ] || die "the Sources index says $orig is $indexed, pinned $orig_sha256"

mkdir -p "$base/src"
if [ ! -f "$base/src/$orig" ] || [ "$(sha256sum < "$base/src/$orig" | cut -d' ' -f1)" != "$orig_sha256" ]; then
    rm -f "$base/src/$orig"
    log "fetching $orig (apt-get source --download-only qemu=$debian_version)"
    # The upload's .dsc and debian.tar.xz answer 404; only the upstream tarball is needed.
    (cd "$base/src" && apt-get "${apt_opts[@]}" source --download-only -qq -o APT::Sandbox::User=root "qemu=$debian_version" >/dev/null 2>&1) || true
    [ -f "$base/src/$orig" ] || die "apt-get source did not fetch $orig"
fi
got=$(sha256sum < "$base/src/$orig" | cut -d' ' -f1)
[ "$got" = "$orig_sha256" ] || die "$orig has SHA-256 $got, expected $orig_sha256"
log "verified $orig ($orig_sha256)"

started=$(date +%s)
rm -rf "$out"
mkdir -p "$out"
work="$out/tree"
mkdir -p "$work"
cleanup() {
    [ "$keep_tree" = 1 ] || rm -rf "$work"
    [ -z "$parts" ] || rm -rf "$parts"
}
trap cleanup EXIT
tar -xJf "$base/src/$orig" -C "$work" --strip-components=1
for p in "${patches[@]}"; do
    log "applying $(basename "$p")"
    patch -d "$work" -p1 -s --no-backup-if-mismatch < "$p" || die "$(basename "$p") does not apply to $orig"
done

reqs="$out/wheels.txt"
printf '%s\n' "${wheels[@]}" > "$reqs"
mkdir -p "$work/python/wheels"
log "fetching the meson wheels (pip, hash-pinned)"
python3 -m pip download -q --no-deps --only-binary=:all: --require-hashes -r "$reqs" -d "$work/python/wheels" \
    || die "pip download of the meson wheels failed"

mkdir -p "$work/build"
log "configuring: ${configure_flags[*]}"
(cd "$work/build" && ../configure --python=/usr/bin/python3 "${configure_flags[@]}" > "$out/configure.log" 2>&1) \
    || { tail -n 30 "$out/configure.log" >&2; die "configure failed (log: $out/configure.log)"; }
log "building qemu-system-x86_64 (ninja, $(nproc) jobs)"
(cd "$work/build" && ninja qemu-system-x86_64 > "$out/ninja.log" 2>&1) \
    || { tail -n 30 "$out/ninja.log" >&2; die "ninja failed (log: $out/ninja.log)"; }
cp "$work/build/qemu-system-x86_64" "$out/qemu-system-x86_64.tmp"
devices=$("$out/qemu-system-x86_64.tmp" -device help 2>/dev/null || true)
case "$devices" in
    *'"usb-calametra"'*) ;;
    *) die "the built QEMU has no usb-calametra device" ;;
esac
seconds=$(( $(date +%s) - started ))
{
    echo "calametra lockstep qemu $key"
    echo "source=$orig sha256=$orig_sha256 debian=$debian_version suite=$suite"
    for p in "${patches[@]}"; do echo "patch=$(basename "$p") sha256=$(sha256sum < "$p" | cut -d' ' -f1)"; done
    echo "configure=${configure_flags[*]}"
    echo "version=$("$out/qemu-system-x86_64.tmp" --version | awk 'NR == 1')"
    echo "build_seconds=$seconds"
    echo "cores=$(nproc)"
} > "$out/manifest.txt"
mv "$out/qemu-system-x86_64.tmp" "$out/qemu-system-x86_64"
ln -sfn "$key" "$base/current"
log "built $out/qemu-system-x86_64 in ${seconds}s"
echo "$out/qemu-system-x86_64"
