#!/usr/bin/env bash
# A long run of one fuzz target: scripts/fuzz-long.sh TARGET [SECONDS] [-- LIBFUZZER FLAGS...]
# (SECONDS defaults to 3600). New inputs go to fuzz/corpus/TARGET (git-ignored), a crash to
# fuzz/artifacts/TARGET/. The targets: `RUSTC_BOOTSTRAP=1 cargo fuzz list`; how they are built
# and why: scripts/fuzz-smoke.sh.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ $# -lt 1 ]; then
  echo "usage: $0 TARGET [SECONDS] [-- LIBFUZZER FLAGS...]" >&2
  exit 2
fi
target=$1
shift
seconds=3600
if [ $# -gt 0 ] && [ "$1" != "--" ]; then
  seconds=$1
  shift
fi
[ "${1:-}" = "--" ] && shift

export RUSTC_BOOTSTRAP=1
unset CARGO_TARGET_DIR # cargo fuzz builds in fuzz/target (git-ignored)
if ! cargo fuzz --version >/dev/null 2>&1; then
  cargo install cargo-fuzz --locked
fi
mkdir -p "fuzz/corpus/$target" "fuzz/seeds/$target"
dict=()
[ -f "fuzz/dicts/$target.dict" ] && dict=(-dict="fuzz/dicts/$target.dict")
exec cargo fuzz run -s none -a "$target" "fuzz/corpus/$target" "fuzz/seeds/$target" -- \
  -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" "$@"
