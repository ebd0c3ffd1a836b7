#!/usr/bin/env bash
# Installs what the QEMU path of Calametra needs on a fresh Debian bookworm machine:
# QEMU 10 (qemu-system-x86 from bookworm-backports, which has usb-redir, qemu-xhci and -icount),
# cpio and gzip for the guest's initramfs, kmod (depmod) for its module tree, and, to build the
# guest's trigger6 DRM module, linux-headers-<kernel> for the exact kernel guest/build.sh puts in
# the guest (`guest/build.sh --print-kernel`), with make, gcc and the static libc (t6probe), and
# libusb-1.0's headers and pkg-config (libusb-1.0-0-dev: the C program the guest tests link
# against the image's libusb, tests/guest-programs/).
# Idempotent, and quick when everything is there.
#
# The backports suite is added by reusing the URI of the machine's own Debian apt source (deb822
# files under /etc/apt/sources.list.d/ or the one-line /etc/apt/sources.list), so this script
# names no package host, and only for this script's apt commands: a private source-parts
# directory (links to the machine's sources and the backports stanza) removed when it exits, so
# no apt source file is left behind (one an earlier version left, calametra-backports.sources,
# is removed). Nothing here loads kernel modules or touches USB on the host: the headers are for
# building only.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)

log() { printf 'install-qemu: %s\n' "$*" >&2; }

have_all() {
    command -v qemu-system-x86_64 >/dev/null 2>&1 || return 1
    command -v cpio >/dev/null 2>&1 || return 1
    command -v gzip >/dev/null 2>&1 || return 1
    command -v dpkg-deb >/dev/null 2>&1 || return 1
    command -v apt-get >/dev/null 2>&1 || return 1
    [ -x /usr/sbin/depmod ] || [ -x /sbin/depmod ] || return 1
    local v
    v=$(qemu-system-x86_64 --version | head -n1 | sed -n 's/.*version \([0-9]*\)\..*/\1/p')
    [ -n "$v" ] && [ "$v" -ge 10 ] || return 1
    qemu-system-x86_64 -device help 2>/dev/null | grep -q '"usb-redir"' || return 1
    return 0
}

need_root() {
    if [ "$(id -u)" != 0 ]; then
        log "needs root (apt-get install); run as root or with sudo"
        exit 1
    fi
}

# The kernel headers of the guest's kernel, the tools that build the module and t6probe, and
# libusb-1.0's headers (the guest tests' C program).
headers_ready() {
    [ -f "/lib/modules/$1/build/Makefile" ] && command -v make >/dev/null 2>&1 \
        && command -v gcc >/dev/null 2>&1 && [ -f /usr/lib/x86_64-linux-gnu/libc.a ] \
        && [ -f /usr/include/libusb-1.0/libusb.h ] && command -v pkg-config >/dev/null 2>&1
}

install_headers() {
    local kver
    kver=$("$repo/guest/build.sh" --print-kernel 2>/dev/null || true)
    if [ -z "$kver" ]; then
        need_root
        apt-get update -qq
        kver=$("$repo/guest/build.sh" --print-kernel) || { log "apt knows no linux-image-6.1.0-*-amd64"; exit 1; }
    fi
    if headers_ready "$kver"; then
        log "already installed: linux-headers-$kver"
        return 0
    fi
    need_root
    log "installing linux-headers-$kver (building the guest's trigger6 module), make, gcc, libc6-dev, libusb-1.0-0-dev, pkg-config"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
        "linux-headers-$kver" make gcc libc6-dev libusb-1.0-0-dev pkg-config >/dev/null
    headers_ready "$kver" || { log "linux-headers-$kver was installed but /lib/modules/$kver/build is missing"; exit 1; }
    log "installed: linux-headers-$kver"
}

# An apt source file an earlier version of this script left behind.
leftover=/etc/apt/sources.list.d/calametra-backports.sources
if [ -f "$leftover" ] && [ "$(id -u)" = 0 ]; then
    log "removing $leftover (left by an earlier version; sources are private to the command now)"
    rm -f "$leftover"
fi

if have_all; then
    log "already installed: $(qemu-system-x86_64 --version | head -n1)"
    install_headers
    exit 0
fi

need_root

# The URI of the machine's main Debian archive: the source that carries the `bookworm` suite.
debian_uri() {
    local f uri suites
    for f in /etc/apt/sources.list.d/*.sources; do
        [ -f "$f" ] || continue
        # deb822: stanzas separated by blank lines; take URIs of a stanza whose Suites has bookworm.
        awk '
            BEGIN { RS=""; FS="\n" }
            {
                uri=""; suites=""
                for (i = 1; i <= NF; i++) {
                    if ($i ~ /^URIs:/)   { sub(/^URIs:[ \t]*/, "", $i); split($i, u, /[ \t]+/); uri=u[1] }
                    if ($i ~ /^Suites:/) { sub(/^Suites:[ \t]*/, "", $i); suites=" " $i " " }
                }
                if (uri != "" && suites ~ / bookworm /) { print uri; exit }
            }' "$f"
    done | head -n1
    if [ -f /etc/apt/sources.list ]; then
        awk '$1 == "deb" {
                 for (i = 2; i <= NF; i++) if ($i !~ /^\[/ && $i !~ /\]$/) { uri=$i; suite=$(i+1); break }
                 if (suite == "bookworm") { print uri; exit }
             }' /etc/apt/sources.list
    fi
}

backports_configured() {
    grep -rqs 'bookworm-backports' /etc/apt/sources.list /etc/apt/sources.list.d/ 2>/dev/null
}

# apt options for this script's commands: the machine's sources, plus bookworm-backports when
# the machine has no such source, in a private source-parts directory removed on exit.
apt_opts=()
if ! backports_configured; then
    uri=$(debian_uri | head -n1)
    if [ -z "$uri" ]; then
        log "found no Debian apt source with the bookworm suite in /etc/apt/sources.list.d/*.sources or /etc/apt/sources.list"
        exit 1
    fi
    parts=$(mktemp -d "${TMPDIR:-/tmp}/calametra-apt.XXXXXX")
    trap 'rm -rf "$parts"' EXIT
    for f in /etc/apt/sources.list.d/*; do
        [ -e "$f" ] && ln -s "$f" "$parts/"
    done
    cat > "$parts/calametra-backports.sources" <<SRC
Types: deb
URIs: $uri
Suites: bookworm-backports
Components: main
Signed-By: /usr/share/keyrings/debian-archive-keyring.gpg
SRC
    apt_opts=(-o "Dir::Etc::SourceParts=$parts")
    log "using bookworm-backports from the machine's Debian source (for this command only)"
    apt-get "${apt_opts[@]}" update -qq
elif ! apt-cache policy qemu-system-x86 2>/dev/null | grep -q bpo; then
    apt-get update -qq
fi

export DEBIAN_FRONTEND=noninteractive
log "installing qemu-system-x86 (backports), cpio, gzip, kmod"
apt-get "${apt_opts[@]}" install -y -qq --no-install-recommends -t bookworm-backports qemu-system-x86 >/dev/null
apt-get install -y -qq --no-install-recommends cpio gzip kmod xz-utils >/dev/null

if ! have_all; then
    log "QEMU was installed but lacks what Calametra needs (version >= 10 with usb-redir)"
    qemu-system-x86_64 --version >&2 || true
    exit 1
fi
log "installed: $(qemu-system-x86_64 --version | head -n1)"
install_headers
