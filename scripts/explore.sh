#!/usr/bin/env bash
# The main job: explore the example scenarios, minimize what fails, save it, and replay it
# byte-exactly. CALAMETRA_SCHEDULES widens the seeded exploration (default 200 here).
set -euo pipefail
cd "$(dirname "$0")/.."
export CALAMETRA_SCHEDULES="${CALAMETRA_SCHEDULES:-200}"
step() { printf '\n==> %s\n' "$*"; }

cargo build -q -p calametra-cli --bin calametra
tool=target/debug/calametra
[ -n "${CARGO_TARGET_DIR:-}" ] && tool="$CARGO_TARGET_DIR/debug/calametra"

step "Trigger 6: the fixed driver under every transport fault site and $CALAMETRA_SCHEDULES seeded schedules"
cargo test -q -p calametra-example-trigger6 --test scenarios -- fixed_driver

# The headline story, on a COPY of the Trigger 6 driver with a race planted in it
# (examples/trigger6-planted; the shipped example driver is unchanged): after a status read
# says the monitor is gone, the copy trusts it across the disconnect and, when the monitor is
# back, uploads a fresh frame into the buffer the dock still shows. The finds:: trial walks
# every transport fault site of the baseline, then the seeded schedules, until
# `flip_state_matches_ram` breaks; then minimizes it and saves it.
step "Trigger 6 (the planted copy): exploration finds the race, minimizes it and saves it (the failure screen)"
CALAMETRA_VERBOSE=1 cargo test -q -p calametra-example-trigger6-planted --test scenarios -- \
  --exact fresh_frame_into_the_shown_buffer::finds::flip_state_matches_ram
for reg in examples/trigger6-planted/calametra-regressions/scenarios/fresh_frame_into_the_shown_buffer/*.json; do
  step "the saved case: $reg"
  "$tool" show "$reg"
  step "replayed byte-exactly"
  "$tool" replay "$reg"
done

step "Trigger 6 (the example driver, a race planted by feature): a stale status breaks status_matches_connection"
CALAMETRA_VERBOSE=1 cargo test -q -p calametra-example-trigger6 --test scenarios -- \
  --exact stale_status_after_disconnect::finds::status_matches_connection

if [ -f examples/dfu-updater/tests/scenarios.rs ]; then
  step "DFU updater: every fault site of a 64 KiB download and $CALAMETRA_SCHEDULES seeds; the planted bug found"
  CALAMETRA_VERBOSE=1 cargo test -q -p calametra-example-dfu-updater --test scenarios
fi

step "a sweep of the Trigger 6 examples: ${CALAMETRA_SWEEP_RUNS:-300} runs of each scenario on every core, guided (seeds and mutants of runs that reached something new; saved cases to a scratch directory)"
sweep_dir="$(mktemp -d)"
CALAMETRA_SWEEP="${CALAMETRA_SWEEP_RUNS:-300}" CALAMETRA_REGRESSIONS="$sweep_dir" \
  cargo test -q -p calametra-example-trigger6 --test scenarios
rm -rf "$sweep_dir"

step "the real capture against the Trigger 6 model"
"$tool" compare --capture refdata/trace-JCD543-20220514T1928-4k-edid.pcapng.gz --spec specs/trigger6-jcd543.json | tail -n 3
