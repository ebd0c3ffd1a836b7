#!/usr/bin/env bash
# The test command: everything the project's tests need, then every test.
#
# On a fresh machine this installs the system packages the end-to-end tests use (QEMU from
# bookworm-backports, Debian's chromium) through the project's own scripts, builds the Linux
# guest once (cached under target/guest), then runs the workspace's tests under nextest, the
# doctests, the tests that need QEMU or chromium, and compiles the hardware builds of the
# example drivers. Set CALAMETRA_SKIP_SYSTEM=1 to run only what needs the Rust toolchain.
set -euo pipefail
cd "$(dirname "$0")/.."

step() { printf '\n==> %s\n' "$*"; }

if [ "${CALAMETRA_SKIP_SYSTEM:-0}" != 1 ]; then
  for s in scripts/install-qemu.sh scripts/install-chromium.sh; do
    if [ -x "$s" ]; then step "$s"; "$s"; fi
  done
  if [ -x guest/build.sh ]; then step "guest/build.sh"; guest/build.sh; fi
fi

step "cargo build --workspace --all-targets"
cargo build --workspace --all-targets

step "cargo nextest run --workspace"
cargo nextest run --workspace --no-fail-fast

step "cargo test --workspace --doc"
cargo test --workspace --doc

if [ "${CALAMETRA_SKIP_SYSTEM:-0}" != 1 ]; then
  step "tests that need QEMU or chromium (cargo test -- --ignored)"
  cargo test --workspace -- --ignored
fi

step "hardware builds of the example drivers (nusb)"
for p in calametra-example-trigger6 calametra-example-dfu-updater; do
  if grep -q '^hardware *= *\[.*nusb' "examples/${p#calametra-example-}/Cargo.toml" 2>/dev/null; then
    cargo build -p "$p" --features hardware
  fi
done
