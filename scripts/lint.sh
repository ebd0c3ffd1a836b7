#!/usr/bin/env bash
# Lints: determinism hazards refused at compile time, then formatting (reported only).
#
# clippy.toml lists what simulated code may not call or hold (wall clock, threads, OS
# randomness, std hash maps); calametra-qemu/clippy.toml lifts it for the host-side bridge.
# A test or bench that times or leaks something on purpose carries a narrow #[allow] saying why.
set -euo pipefail
cd "$(dirname "$0")/.."

printf '==> %s\n' "cargo clippy --workspace --all-targets -- -D clippy::disallowed_methods -D clippy::disallowed_types"
cargo clippy --workspace --all-targets -- -D clippy::disallowed_methods -D clippy::disallowed_types

printf '\n==> %s\n' "cargo fmt --all -- --check (reported, not failing)"
if ! unformatted=$(cargo fmt --all -- --check -l); then
  echo "not rustfmt-formatted (run cargo fmt on them; not a failure here):"
  echo "$unformatted" | sed "s|^$PWD/|  |"
fi
