#!/usr/bin/env bash
# A short bounded run of every fuzz target in fuzz/ (cargo-fuzz, libFuzzer), from the committed
# seeds in fuzz/seeds/<target> with the tokens in fuzz/dicts/<target>.dict. Fails if any target
# crashes, panics, times out or runs out of memory; the input is left in fuzz/artifacts/<target>/
# (reproduce with `RUSTC_BOOTSTRAP=1 cargo fuzz run -s none -a <target> <file>`).
#
# The whole smoke aims at about CALAMETRA_FUZZ_BUDGET seconds (default 220) including the
# build: what the build leaves is split between the targets, at least 5 and at most 20 seconds
# each. Set CALAMETRA_FUZZ_SECONDS to fix the time per target instead.
#
# cargo-fuzz needs nightly compiler flags (-Zsanitizer, sancov passes); on a stable toolchain
# RUSTC_BOOTSTRAP=1 allows them. The code under test is safe Rust, so the targets build
# without AddressSanitizer (-s none, 2-3x the executions) and with debug assertions and
# overflow checks on (-a): an arithmetic overflow on input bytes is a crash.
set -euo pipefail
cd "$(dirname "$0")/.."

export RUSTC_BOOTSTRAP=1
unset CARGO_TARGET_DIR # cargo fuzz builds in fuzz/target (git-ignored)
start=$(date +%s)

if ! cargo fuzz --version >/dev/null 2>&1; then
  echo "==> cargo install cargo-fuzz --locked"
  cargo install cargo-fuzz --locked
fi

flags=(-s none -a)
echo "==> cargo fuzz build ${flags[*]}"
cargo fuzz build "${flags[@]}"

mapfile -t targets < <(cargo fuzz list)
built=$(( $(date +%s) - start ))
if [ -n "${CALAMETRA_FUZZ_SECONDS:-}" ]; then
  per=$CALAMETRA_FUZZ_SECONDS
else
  budget=${CALAMETRA_FUZZ_BUDGET:-220}
  per=$(( (budget - built) / ${#targets[@]} ))
  [ "$per" -lt 5 ] && per=5
  [ "$per" -gt 20 ] && per=20
fi
echo "==> built in ${built}s; ${#targets[@]} targets, ${per}s each"

failed=()
for t in "${targets[@]}"; do
  corpus="fuzz/corpus/$t"
  mkdir -p "$corpus" "fuzz/seeds/$t"
  log="fuzz/artifacts/$t.smoke.log"
  mkdir -p fuzz/artifacts
  dict=()
  [ -f "fuzz/dicts/$t.dict" ] && dict=(-dict="fuzz/dicts/$t.dict")
  if cargo fuzz run "${flags[@]}" "$t" "$corpus" "fuzz/seeds/$t" -- \
      -max_total_time="$per" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
      >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    printf '%-16s ok   %9s runs %7s exec/s\n' "$t" "${runs:-?}" "${rate:-?}"
  else
    printf '%-16s FAIL (log: %s)\n' "$t" "$log"
    grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" | head -5 | sed 's/^/    /'
    failed+=("$t")
  fi
done

echo "==> fuzz smoke: $(( $(date +%s) - start ))s"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "crashed: ${failed[*]}"
  exit 1
fi
