#!/usr/bin/env bash
# The IDE's run button for scenarios: rust-analyzer must offer a test runnable for every
# #[calametra::scenario] function of a file, and the command it gives for one must run that
# scenario's trials.
#
# usage: scripts/ide-runnables.sh [CRATE_DIR REL_FILE SCENARIO]
#   default: examples/trigger6 tests/scenarios.rs fixed_driver (315 trials, a few seconds)
#
# Asks rust-analyzer (scripts/ra_runnables.py, LSP experimental/runnables) for the file's
# runnables; fails unless each scenario function found by grep in the file has a test runnable
# whose path ends in its name. Then runs the cargo command rust-analyzer gives for SCENARIO as an
# editor does (its cwd, environment, cargoArgs -- executableArgs) and fails unless it ran that
# scenario's trials and only them: `test <path>::baseline ... ok`, as many passed or ignored as
# `--list` shows trials under `<path>::`, none failed.
#
# Needs rust-analyzer on PATH (`rustup component add rust-analyzer`). Loading the workspace (cargo
# check of its proc macros and build scripts) and answering took 10-35 s on 2 cores, from a clean
# target/ too; it is bounded by CALAMETRA_RA_TIMEOUT seconds (default 900).
set -euo pipefail
cd "$(dirname "$0")/.."
crate=${1:-examples/trigger6}
file=${2:-tests/scenarios.rs}
pick=${3:-fixed_driver}
limit=${CALAMETRA_RA_TIMEOUT:-900}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
fail() {
  echo "ide-runnables: FAIL: $*" >&2
  exit 1
}

rust-analyzer --version >/dev/null 2>&1 \
  || fail "rust-analyzer is not installed (rustup component add rust-analyzer)"
echo "ide-runnables: $(rust-analyzer --version), $crate/$file"

# The scenario functions: the first `fn name` after each #[calametra::scenario line.
awk '/^[ \t]*#\[calametra::scenario/ { want = 1 }
     want && match($0, /fn[ \t]+[A-Za-z_][A-Za-z0-9_]*/) {
       s = substr($0, RSTART, RLENGTH); sub(/^fn[ \t]+/, "", s); print s; want = 0 }' \
  "$crate/$file" >"$work/scenarios"
[ -s "$work/scenarios" ] || fail "no #[calametra::scenario] function in $crate/$file"
grep -qx "$pick" "$work/scenarios" || fail "$pick is not a scenario function of $crate/$file"

started=$(date +%s)
python3 scripts/ra_runnables.py --json "$crate" "$file" "$limit" >"$work/runnables.json" \
  || fail "rust-analyzer gave no runnables for $crate/$file within ${limit}s"
echo "ide-runnables: rust-analyzer answered in $(($(date +%s) - started))s"

# The check, then the command for $pick as an editor builds it: its test path, cwd, environment
# (KEY=VALUE), the command and the same command listing the trials; one item a line.
python3 - "$work/runnables.json" "$work/scenarios" "$pick" "$work" <<'PY'
import json, os, sys
runnables = json.load(open(sys.argv[1]))
names = open(sys.argv[2]).read().split()
pick, work = sys.argv[3], sys.argv[4]
tests = {}  # test path -> args, for the single-test runnables (`<path> --exact`)
print("ide-runnables: rust-analyzer offers:")
for r in runnables:
    a = r.get("args", {})
    ex = a.get("executableArgs", [])
    print("  %-40s cargo %s -- %s" % (r.get("label"), " ".join(a.get("cargoArgs", [])), " ".join(ex)))
    if "test" in a.get("cargoArgs", []) and len(ex) >= 2 and ex[1] == "--exact":
        tests[ex[0]] = a
missing = [n for n in names if not any(p == n or p.endswith("::" + n) for p in tests)]
if missing:
    sys.exit("ide-runnables: FAIL: no test runnable for the scenario function(s) %s (the file's: %s)"
             % (", ".join(missing), ", ".join(names)))
print("ide-runnables: a test runnable for each scenario function: %s" % ", ".join(names))
path = next(p for p in tests if p == pick or p.endswith("::" + pick))
a = tests[path]
cargo = [a.get("overrideCargo") or "cargo"] + a["cargoArgs"] + a.get("cargoExtraArgs", [])
def put(name, lines):
    with open(os.path.join(work, name), "w") as f:
        f.write("".join(l + "\n" for l in lines))
put("path", [path])
put("cwd", [a.get("cwd") or a["workspaceRoot"]])
put("env", ["%s=%s" % kv for kv in (a.get("environment") or {}).items()])
put("cmd", cargo + ["--"] + a["executableArgs"])
put("list", cargo + ["--", "--list"])
PY

# Run it as the editor would.
path=$(cat "$work/path")
cwd=$(cat "$work/cwd")
mapfile -t envs <"$work/env"
mapfile -t cmd <"$work/cmd"
mapfile -t list <"$work/list"
echo "ide-runnables: running, in $cwd: ${cmd[*]}"
ran=$(date +%s)
status=0
(cd "$cwd" && env "${envs[@]}" "${cmd[@]}") >"$work/out" 2>"$work/err" || status=$?
echo "ide-runnables: it took $(($(date +%s) - ran))s, exit status $status"
if [ $status != 0 ]; then
  tail -n 40 "$work/err" "$work/out" >&2
  fail "the command rust-analyzer gives for $pick failed"
fi

# What it ran: $path's trials, all of them, the baseline among them, and no other trial.
listed=$(cd "$cwd" && env "${envs[@]}" "${list[@]}" 2>/dev/null | grep -c "^$path::.*: test$" || true)
trials=$(grep -c '^test .* \.\.\. ' "$work/out" || true)
own=$(grep -c "^test $path::.* \.\.\. " "$work/out" || true)
result=$(grep '^test result: ' "$work/out" | tail -n 1 || true)
counts=$(sed -n 's/^test result: [a-zA-Z]*\. \([0-9]*\) passed; \([0-9]*\) failed; \([0-9]*\) ignored.*/\1 \2 \3/p' <<<"$result")
read -r passed failed ignored <<<"${counts:-0 0 0}"
echo "ide-runnables: $result"
grep -q "^test $path::baseline *\.\.\. ok" "$work/out" || fail "no 'test $path::baseline ... ok' in its output"
[ "$passed" -ge 1 ] || fail "no trial passed"
[ "$failed" = 0 ] || fail "$failed trial(s) failed"
[ "$trials" = "$own" ] || fail "it ran $trials trials, only $own of them $path's"
[ "$((passed + ignored))" = "$listed" ] \
  || fail "$passed passed + $ignored ignored, but --list shows $listed trials of $path"
echo "ide-runnables: ok: rust-analyzer's command for $pick ran the $listed trials of $path ($passed passed)"
