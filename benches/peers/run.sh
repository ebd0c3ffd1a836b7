#!/usr/bin/env bash
# Runs the peers benchmark: builds both binaries in release (the madsim one with
# RUSTFLAGS="--cfg madsim", in its own target dir because that flag rebuilds every crate), then
# runs the main binary, which runs madsim's repetitions through the madsim binary, interleaved
# with the other tools' repetitions, and prints one table.
# Usage: benches/peers/run.sh [--quick] [--only A|B|C|D] [--tsv FILE]
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
target="${CARGO_TARGET_DIR:-$here/../../target/h-peers}"
jobs="${PEERS_JOBS:-2}"
cargo build --release -j "$jobs" --manifest-path "$here/Cargo.toml" -p calametra-peers --bins \
    --target-dir "$target" >&2
RUSTFLAGS="--cfg madsim" cargo build --release -j "$jobs" --manifest-path "$here/Cargo.toml" \
    -p madsim-peer --target-dir "$target-madsim" >&2
exec "$target/release/calametra-peers" --madsim "$target-madsim/release/madsim-peer" "$@"
