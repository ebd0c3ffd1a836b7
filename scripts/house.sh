#!/usr/bin/env bash
# The house rules of the sources (issue 39): no import circle between the files of a crate, no
# non-test file over 900 lines. scripts/house.rs says what counts (a module split over its own
# submodule files is one place; a binary's main.rs is the root, and a command that imports back
# from it closes a circle; #[cfg(test)] modules and files are tests).
#
#   bash scripts/house.sh              the sabotage test, then every workspace member
#   bash scripts/house.sh --self-test  the sabotage test alone
#   bash scripts/house.sh DIR..        the sabotage test, then these crate directories
#
# The checker is std-only Rust, built here with rustc into target/house/ (no Cargo project, no
# dependency). The sabotage test writes scratch crates into a temporary directory: a clean one
# the checker must pass, and one with a circle, a command importing from main.rs and a
# 901-line file, which it must reject, naming each. Exit 0 clean, 1 a finding (or a failed
# sabotage test), 2 unusable.
set -euo pipefail
cd "$(dirname "$0")/.."

out=target/house
bin=$out/house
mkdir -p "$out"
if [ ! -x "$bin" ] || [ scripts/house.rs -nt "$bin" ]; then
  rustc --edition 2021 -O scripts/house.rs -o "$bin.tmp"
  mv "$bin.tmp" "$bin"
fi

self_test() {
  local tmp
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' RETURN
  # A clean crate: a library whose module `c` is split over c.rs and c/d.rs (d uses its
  # parent's items, c uses d), a one-way use a -> b, a 950-line file of which 100 lines are
  # tests, and a binary whose commands share a module and never import from main.rs.
  local ok=$tmp/clean
  mkdir -p "$ok/src/c" "$ok/src/bin/tool"
  printf 'mod a;\nmod b;\npub mod c;\nmod long;\n#[cfg(test)]\nmod tests;\n' >"$ok/src/lib.rs"
  printf 'use crate::b::B;\npub fn a() -> B { B }\n' >"$ok/src/a.rs"
  printf '/// "crate::a::a" in a string, and in a comment: crate::a::a\npub struct B;\nconst S: &str = "super::a";\n' >"$ok/src/b.rs"
  printf 'mod d;\npub use d::D;\npub struct C;\n' >"$ok/src/c.rs"
  printf 'use super::C;\npub struct D(pub C);\n' >"$ok/src/c/d.rs"
  printf 'use crate::a::a;\n#[test]\nfn t() { a(); }\n' >"$ok/src/tests.rs"
  { for i in $(seq 1 850); do echo "pub const L$i: u32 = $i;"; done
    echo '#[cfg(test)]'; echo 'mod tests {'; echo '    use super::*;'
    for i in $(seq 1 96); do echo "    const T$i: u32 = L1;"; done
    echo '}'; } >"$ok/src/long.rs"
  printf 'mod output;\nmod run;\nfn main() { run::run(); }\n' >"$ok/src/bin/tool/main.rs"
  printf 'pub fn say() {}\n' >"$ok/src/bin/tool/output.rs"
  printf 'use crate::output::say;\npub fn run() { say() }\n' >"$ok/src/bin/tool/run.rs"
  if ! "$bin" "$ok" >"$tmp/clean.out" 2>&1; then
    echo "house.sh: sabotage test: the clean scratch crate was rejected:" >&2
    cat "$tmp/clean.out" >&2
    return 1
  fi
  # The sabotaged copy: b uses a (a circle a <-> b), the command run.rs uses main.rs's item,
  # and long.rs has 901 non-test lines.
  local bad=$tmp/sabotaged
  cp -r "$ok" "$bad"
  printf 'use super::a;\npub struct B;\npub fn b() { let _ = a::a; }\n' >"$bad/src/b.rs"
  printf 'mod output;\nmod run;\npub struct Shared;\nfn main() { run::run(); }\n' >"$bad/src/bin/tool/main.rs"
  printf 'use crate::output::say;\nuse crate::Shared;\npub fn run() { say(); let _ = Shared; }\n' >"$bad/src/bin/tool/run.rs"
  { for i in $(seq 1 901); do echo "pub const L$i: u32 = $i;"; done; } >"$bad/src/long.rs"
  local rc=0
  "$bin" "$bad" >"$tmp/bad.out" 2>&1 || rc=$?
  local missing=()
  [ "$rc" = 1 ] || missing+=("exit status 1 (got $rc)")
  grep -q 'import circle between src/a.rs, src/b.rs' "$tmp/bad.out" || missing+=("the circle a.rs <-> b.rs")
  grep -q 'import circle between src/bin/tool/main.rs, src/bin/tool/run.rs' "$tmp/bad.out" \
    || missing+=("the command run.rs importing from main.rs")
  grep -q 'src/long.rs: 901 non-test lines' "$tmp/bad.out" || missing+=("long.rs over 900 lines")
  if [ ${#missing[@]} -gt 0 ]; then
    echo "house.sh: sabotage test: the checker missed: ${missing[*]}; it said:" >&2
    cat "$tmp/bad.out" >&2
    return 1
  fi
  echo "house.sh: sabotage test passed (a clean crate passes; a circle, a command importing from main.rs and a 901-line file are each rejected)"
}

self_test
[ "${1:-}" = --self-test ] && exit 0

if [ $# -gt 0 ]; then
  dirs=("$@")
else
  # The workspace's members, as Cargo.toml lists them.
  mapfile -t dirs < <(sed -n '/^members = \[/,/^\]/p' Cargo.toml | grep -o '"[^"]*"' | tr -d '"')
fi
"$bin" "${dirs[@]}"
