#!/usr/bin/env bash
# The test command: everything the project's tests need, then every test.
#
# On a fresh machine this installs, through the project's own scripts, what the end-to-end
# tests use: QEMU 10 from bookworm-backports and the kernel headers (scripts/install-qemu.sh),
# Debian's chromium (scripts/install-chromium.sh) and tshark (scripts/install-tshark.sh);
# builds the Linux 6.1 guest with its trigger6 DRM module (guest/build.sh) and the lockstep
# QEMU (calametra-qemu/qemu/build.sh), each cached under target/. Then: the determinism lints,
# every workspace test under nextest, the doctests, a 30 s sweep of the examples
# (scripts/sweep-examples.sh: fails on any signature but an `expect` scenario's known bug),
# the tests that need QEMU, chromium or
# tshark (--ignored), rust-analyzer's run button for a scenario
# (scripts/ide-runnables.sh), the hardware builds of the example drivers, the packaging of every
# published crate (cargo package: metadata, README, licences, nothing outside the package), the
# declared rust-version (1.89) on the user-facing crates, and a bounded smoke run of every fuzz
# target.
#
# CALAMETRA_SKIP_SYSTEM=1 runs only what needs the Rust toolchain alone.
set -euo pipefail
cd "$(dirname "$0")/.."
export CARGO_TERM_COLOR=never
started=$(date +%s)
step() { printf '\n==> [%ss] %s\n' "$(($(date +%s) - started))" "$*"; }

system=1
[ "${CALAMETRA_SKIP_SYSTEM:-0}" = 1 ] && system=0

if [ $system = 1 ]; then
  step "scripts/install-qemu.sh"; bash scripts/install-qemu.sh
  step "scripts/install-chromium.sh"; bash scripts/install-chromium.sh
  step "scripts/install-tshark.sh"; bash scripts/install-tshark.sh
  step "guest/build.sh"; bash guest/build.sh
  step "calametra-qemu/qemu/build.sh (the lockstep QEMU)"; bash calametra-qemu/qemu/build.sh
fi

step "cargo build --workspace --all-targets"
cargo build --workspace --all-targets

step "scripts/lint.sh (determinism hazards refused by clippy)"
bash scripts/lint.sh

# The house rules (DESIGN.md section 7): no import circle between a crate's files, no non-test
# file over 900 lines; its own sabotage test runs first.
step "scripts/house.sh (no import circles, no file over 900 lines)"
bash scripts/house.sh

step "cargo nextest run --workspace"
cargo nextest run --workspace --no-fail-fast

step "cargo test --workspace --doc"
cargo test --workspace --doc

# The everyday sim: seeded runs of the example drivers for 30 s on every core; any failure
# signature but an `expect` scenario's known bug fails the test command.
step "scripts/sweep-examples.sh (a ${CALAMETRA_SWEEP_BUDGET:-30s} sweep of the examples)"
bash scripts/sweep-examples.sh

if [ $system = 1 ]; then
  # One guest at a time: over usb-redir a guest run depends on host timing (DESIGN.md 9), and
  # two TCG guests on two cores starve each other's timeouts. A test that fails and then passes
  # on a retry is reported FLAKY by nextest, not hidden.
  step "tests that need QEMU, the guest, chromium or tshark (nextest --run-ignored ignored-only)"
  cargo nextest run --workspace --run-ignored ignored-only --test-threads 1 --retries 2 --no-fail-fast

  # rust-analyzer (rustup's component, installed here when absent) must offer a "Run Test"
  # button for each #[calametra::scenario] function, and its command must run the trials.
  step "scripts/ide-runnables.sh (rust-analyzer's run button for a scenario runs its trials)"
  rust-analyzer --version >/dev/null 2>&1 || rustup component add rust-analyzer
  bash scripts/ide-runnables.sh
fi

step "hardware builds of the example drivers (nusb)"
cargo build -p calametra-example-trigger6 --features hardware --all-targets
cargo build -p calametra-example-dfu-updater --features hardware
cargo build -p calametra-usb --features nusb

# Each published crate packs on its own: its manifest has what crates.io needs, its README and
# licence files are inside it, and nothing it builds lies outside it (the packaged manifest of a
# crate whose tests read the repository's files leaves those tests out, and says so).
published=(calametra-usb calametra-core calametra-capture calametra-macros calametra
           calametra-models calametra-qemu calametra-cli)
step "cargo package (the published crates: ${published[*]})"
packages=(); for p in "${published[@]}"; do packages+=(-p "$p"); done
cargo package --no-verify --offline --allow-dirty "${packages[@]}" 2>&1 \
  | { grep -v '^warning: ignoring \(test\|benchmark\) .* is not included in the published package$' || true; }

if [ $system = 1 ]; then
  # The declared rust-version is true: the crates a user compiles (the facade, the driver-facing
  # crate, the core) check with that toolchain (rustup installs it once; trybuild needs 1.88+).
  step "cargo +1.89 check (the declared rust-version of the user-facing crates)"
  rustup run 1.89 rustc --version >/dev/null 2>&1 || rustup toolchain install 1.89 --profile minimal
  CARGO_TARGET_DIR=target/msrv cargo +1.89 check -p calametra -p calametra-usb -p calametra-core
  CARGO_TARGET_DIR=target/msrv cargo +1.89 check -p calametra-usb --features nusb

  step "scripts/fuzz-smoke.sh (a bounded run of every fuzz target)"
  bash scripts/fuzz-smoke.sh
fi

step "done"
