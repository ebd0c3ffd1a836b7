#!/usr/bin/env bash
# A short bounded run of every fuzz target in fuzz/ (cargo-fuzz, libFuzzer), from the committed
# seeds in fuzz/seeds/<target> with the tokens in fuzz/dicts/<target>.dict. Fails if any target
# crashes, panics, times out or runs out of memory; the input is left in fuzz/artifacts/<target>/
# (reproduce with `RUSTC_BOOTSTRAP=1 cargo fuzz run -s none -a <target> <file>`).
#
# The smoke is deterministic: every target runs a fixed number of inputs (the table below, about
# ten seconds each on a 2-core machine) from libFuzzer seed CALAMETRA_FUZZ_SEED (default 1), so
# a given commit passes or fails the same way on every machine; finding new bugs is the job of
# scripts/fuzz-long.sh. Set CALAMETRA_FUZZ_SECONDS to run each target for a time instead, or
# CALAMETRA_FUZZ_RUNS to multiply every count (a whole number, default 1).
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

# Inputs per target, about ten seconds each at the rates a loaded 2-core machine gives.
declare -A runs_of=(
  [capture]=150000
  [faults]=150000
  [regression]=1000000
  [setup]=8000
  [spec]=200000
  [spec_fields]=15000
  [trace]=100000
  [usbredir]=800000
  [usbredir_bridge]=25000
)
factor=${CALAMETRA_FUZZ_RUNS:-1}
seed=${CALAMETRA_FUZZ_SEED:-1}

mapfile -t targets < <(cargo fuzz list)
built=$(( $(date +%s) - start ))
if [ -n "${CALAMETRA_FUZZ_SECONDS:-}" ]; then
  echo "==> built in ${built}s; ${#targets[@]} targets, ${CALAMETRA_FUZZ_SECONDS}s each"
else
  echo "==> built in ${built}s; ${#targets[@]} targets, fixed runs from seed $seed"
fi

failed=()
for t in "${targets[@]}"; do
  # A fresh corpus each time (what libFuzzer finds is thrown away) keeps the run the same
  # everywhere; long runs keep theirs in fuzz/corpus/.
  corpus=$(mktemp -d "${TMPDIR:-/tmp}/calametra-fuzz-$t.XXXXXX")
  mkdir -p "fuzz/seeds/$t"
  log="fuzz/artifacts/$t.smoke.log"
  mkdir -p fuzz/artifacts
  dict=()
  [ -f "fuzz/dicts/$t.dict" ] && dict=(-dict="fuzz/dicts/$t.dict")
  if [ -n "${CALAMETRA_FUZZ_SECONDS:-}" ]; then
    bound=(-max_total_time="$CALAMETRA_FUZZ_SECONDS")
  else
    bound=(-seed="$seed" -runs=$(( ${runs_of[$t]:-20000} * factor )))
  fi
  if cargo fuzz run "${flags[@]}" "$t" "$corpus" "fuzz/seeds/$t" -- \
      "${bound[@]}" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 "${dict[@]}" \
      >"$log" 2>&1; then
    runs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log")
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log")
    printf '%-16s ok   %9s runs %7s exec/s\n' "$t" "${runs:-?}" "${rate:-?}"
  else
    printf '%-16s FAIL (log: %s)\n' "$t" "$log"
    grep -E 'panicked at|ERROR: libFuzzer|SUMMARY|Test unit written' "$log" | head -5 | sed 's/^/    /'
    failed+=("$t")
  fi
  rm -rf "$corpus"
done

echo "==> fuzz smoke: $(( $(date +%s) - start ))s"
if [ "${#failed[@]}" -gt 0 ]; then
  echo "crashed: ${failed[*]}"
  exit 1
fi
