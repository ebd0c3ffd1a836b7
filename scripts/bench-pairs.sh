#!/usr/bin/env bash
# Alternates two builds of the core bench (issue 20's speed comparison): runs OLD then NEW, N
# times (8 by default), each with `CALAMETRA_BENCH_RUNS_ONLY=1 CALAMETRA_BENCH_NO_CALLGRIND=1
# <binary> --bench`, prints each pair's runs/s and ratio, then the medians and the ratio of
# medians. Build each binary with `cargo bench -p calametra-core --bench core --no-run` at the
# commit wanted and copy it aside (the path it prints).
# Usage: scripts/bench-pairs.sh OLD_BINARY NEW_BINARY [N]
set -euo pipefail
if [ $# -lt 2 ] || [ ! -x "$1" ] || [ ! -x "$2" ]; then
  echo "usage: $0 OLD_BINARY NEW_BINARY [N] (two executable core bench binaries)" >&2
  exit 2
fi
old=$1 new=$2 n=${3:-8}
case $n in ''|*[!0-9]*|0) echo "$0: N must be a positive whole number, got '$n'" >&2; exit 2;; esac
rate() {
  CALAMETRA_BENCH_RUNS_ONLY=1 CALAMETRA_BENCH_NO_CALLGRIND=1 "$1" --bench 2>/dev/null \
    | awk -F': ' '/^runs\/s/ {print $2}'
}
rows=$(mktemp)
trap 'rm -f "$rows"' EXIT
for i in $(seq 1 "$n"); do
  a=$(rate "$old"); b=$(rate "$new")
  if [ -z "$a" ] || [ -z "$b" ]; then echo "$0: a bench run printed no runs/s line" >&2; exit 1; fi
  echo "$i $a $b" | tee -a "$rows"
done
python3 - "$rows" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
old = [float(r[1]) for r in rows]
new = [float(r[2]) for r in rows]
pairs = [b / a for a, b in zip(old, new)]
print(f"pairs: {' '.join(f'{p:.3f}' for p in pairs)}")
print(f"medians old {statistics.median(old):.0f} new {statistics.median(new):.0f}: "
      f"ratio of medians {statistics.median(new) / statistics.median(old):.3f}, "
      f"median pair {statistics.median(pairs):.3f}, pairs {min(pairs):.3f}-{max(pairs):.3f}")
PY
