#!/usr/bin/env bash
# Runs the peers benchmark: builds both binaries in release (the madsim one with
# RUSTFLAGS="--cfg madsim", in its own target dir because that flag rebuilds every crate), runs
# the madsim workload, then the main binary, which merges the madsim rows into one table.
# Usage: benches/peers/run.sh [--quick] [--only A|B|C]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../target/h-peers}"
jobs="${PEERS_JOBS:-2}"
cd "$here"
cargo build --release -j "$jobs" --manifest-path "$here/Cargo.toml" -p calametra-peers --bins \
    --target-dir "$target" >&2
RUSTFLAGS="--cfg madsim" cargo build --release -j "$jobs" --manifest-path "$here/Cargo.toml" \
    -p madsim-peer --target-dir "$target-madsim" >&2
rows="$(mktemp)"
trap 'rm -f "$rows"' EXIT
only_c=1
for a in "$@"; do
    case "$a" in A | B) only_c=0 ;; esac
done
if [ "$only_c" = 1 ]; then
    quick=()
    for a in "$@"; do [ "$a" = "--quick" ] && quick=(--quick); done
    echo "peers: C (madsim)" >&2
    "$target-madsim/release/madsim-peer" "${quick[@]}" >"$rows"
fi
"$target/release/calametra-peers" "$@" --merge "$rows"
