#!/usr/bin/env bash
# Installs Debian's tshark for the pcapng export tests (`tshark -r FILE -V` decodes what
# `calametra export --pcapng` and the recorder write). Idempotent: nothing to do when tshark is
# already on the PATH. The package asks (debconf) whether non-root users may capture packets;
# the answer is preseeded to "no" and the front end is non-interactive, so nothing prompts:
# the tests only read files, they never capture.
set -euo pipefail
if command -v tshark >/dev/null 2>&1; then
  exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
echo "wireshark-common wireshark-common/install-setuid boolean false" | $SUDO debconf-set-selections
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends tshark >/dev/null
command -v tshark >/dev/null
