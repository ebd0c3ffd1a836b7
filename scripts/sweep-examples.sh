#!/usr/bin/env bash
# The everyday sweep of the examples (the test command runs it): `calametra sweep` of the three
# example drivers' scenario binaries for CALAMETRA_SWEEP_BUDGET (30s by default) on every core,
# the budget shared between them, with one report. It fails on any failure signature other than
# an `expect` scenario's bug or a finding listed, with whose bug it is, in
# scripts/sweep-examples.known (`--known`), on a find it could not save, and on any other failed
# trial. An `expect` scenario whose bug this short time budget did not reach is reported, not
# failed (its finds:: trial in the test suite pins the bug). Finds go to a scratch directory
# (`--regressions`), never to the committed calametra-regressions/; the summaries are kept under
# target/calametra/sweeps/examples/ for a look afterwards (`calametra sweep-report <files>`).
set -euo pipefail
cd "$(dirname "$0")/.."
budget="${CALAMETRA_SWEEP_BUDGET:-30s}"
scratch="$(mktemp -d)"
trap 'rm -rf "$scratch"' EXIT
tool=target/debug/calametra
[ -n "${CARGO_TARGET_DIR:-}" ] && tool="$CARGO_TARGET_DIR/debug/calametra"
cargo build -q -p calametra-cli --bin calametra
"$tool" sweep "$budget" \
  -p calametra-example-trigger6 -p calametra-example-dfu-updater -p calametra-example-dfu-core-driver \
  --test scenarios \
  --known scripts/sweep-examples.known \
  --regressions "$scratch/finds" \
  --out target/calametra/sweeps/examples
