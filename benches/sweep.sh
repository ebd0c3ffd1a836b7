#!/usr/bin/env bash
# Sweep scaling: runs/s of one sweep on every core against the same sweep on one thread, in one
# run, alternated (1, N, 1, N, ...) so the machine's load falls on both alike.
#
#   benches/sweep.sh [RUNS] [ROUNDS]     (defaults: 3000 runs of fixed_driver, 3 rounds)
#
# Prints each round's runs/s and the median ratio. The scenario is the Trigger 6 example's
# fixed_driver (every transport fault drawn by seeded swarms); release build; seeds alone
# (CALAMETRA_SWEEP_GUIDE=0: the figures are of the uniform sweep, as before guidance became
# the default).
set -euo pipefail
cd "$(dirname "$0")/.."
runs="${1:-3000}"
rounds="${2:-3}"
cores="$(nproc)"
cargo test -q --release -p calametra-example-trigger6 --test scenarios --no-run 2>/dev/null
bin="$(cargo test --release -p calametra-example-trigger6 --test scenarios --no-run --message-format=json 2>/dev/null \
  | python3 -c 'import json,sys
for l in sys.stdin:
    m=json.loads(l)
    if m.get("reason")=="compiler-artifact" and m.get("executable") and m["target"]["name"]=="scenarios":
        print(m["executable"])' | tail -n 1)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
rate() { # THREADS -> runs/s from the sweep's own summary (wall time of the sweep alone)
  CALAMETRA_REGRESSIONS=off CALAMETRA_SWEEP_GUIDE=0 CALAMETRA_SWEEP="$runs" CALAMETRA_SWEEP_THREADS="$1" \
    CALAMETRA_SWEEP_SUMMARY="$tmp/s.json" "$bin" --exact fixed_driver::sweep >/dev/null 2>&1 || true
  python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); print("%.1f" % (sum(x["tally"]["runs"] for x in s["scenarios"]) / s["wall_s"]))' "$tmp/s.json"
}
ratios=()
for i in $(seq 1 "$rounds"); do
  one="$(rate 1)"; many="$(rate "$cores")"
  r="$(python3 -c "print('%.2f' % ($many / $one))")"
  ratios+=("$r")
  echo "round $i: 1 thread $one runs/s, $cores threads $many runs/s, ratio $r"
done
printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR]=$1} END {print "median ratio (" NR " rounds): " a[int((NR+1)/2)]}'
