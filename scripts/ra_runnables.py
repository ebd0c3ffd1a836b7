#!/usr/bin/env python3
"""Ask rust-analyzer (over LSP, `experimental/runnables`) which runnables, the IDE's run
buttons, it offers in one file, as an editor would after opening it.

usage: scripts/ra_runnables.py [--json] CRATE_DIR REL_FILE [TIMEOUT_S]

Starts `rust-analyzer` (from PATH) on CRATE_DIR (it loads the whole Cargo workspace around it,
builds its proc macros and build scripts with cargo check, then expands the file), waits until
the server reports itself quiescent or TIMEOUT_S (default 300) has passed, opens REL_FILE and
prints one line per runnable: `label | cargoArgs -- executableArgs`. With --json it prints the
runnables rust-analyzer answered, as JSON (each with `label`, `kind` and `args`: `cargoArgs`,
`executableArgs`, `cwd`, ...), the form scripts/ide-runnables.sh reads.

Exit status: 0 with an answer; 1 when rust-analyzer gave none (it exited or timed out), with
the tail of its log on stderr. A line on stderr says how long it took and whether the server was
quiescent when asked (when not, macro-made runnables may be missing). RA_RUNNABLES_LOG=FILE keeps
rust-analyzer's log (more of it with RA_LOG=info).

Origin: a copy of the session tool tools/ra_runnables.py from the shared workspace (the project reads
nothing outside the repository), changed for the project: --json, an exit status, the timing
line, rust-analyzer's log kept for failures, the server shut down and waited for.
"""
import json
import os
import select
import subprocess
import sys
import tempfile
import time


def main():
    argv = sys.argv[1:]
    as_json = "--json" in argv
    argv = [a for a in argv if a != "--json"]
    if len(argv) not in (2, 3):
        print(__doc__.strip().splitlines()[3], file=sys.stderr)
        return 2
    root = os.path.abspath(argv[0])
    rel = argv[1]
    limit = float(argv[2]) if len(argv) > 2 else 300.0
    path = os.path.join(root, rel)
    started = time.time()
    keep = os.environ.get("RA_RUNNABLES_LOG")  # a file for rust-analyzer's log (RA_LOG=info)
    log = open(keep, "w+b") if keep else tempfile.TemporaryFile()
    p = subprocess.Popen(["rust-analyzer"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=log)
    buf = b""

    def send(msg):
        b = json.dumps(msg).encode()
        p.stdin.write(b"Content-Length: %d\r\n\r\n" % len(b) + b)
        p.stdin.flush()

    def recv(deadline):
        nonlocal buf
        while True:
            if b"\r\n\r\n" in buf:
                head, rest = buf.split(b"\r\n\r\n", 1)
                n = int([l for l in head.split(b"\r\n") if l.lower().startswith(b"content-length")][0].split(b":")[1])
                if len(rest) >= n:
                    buf = rest[n:]
                    return json.loads(rest[:n])
            r, _, _ = select.select([p.stdout], [], [], max(0.1, deadline - time.time()))
            if not r:
                return None
            chunk = os.read(p.stdout.fileno(), 65536)
            if not chunk:
                return None
            buf += chunk

    def answer_requests(m):
        # The server's own requests (workspace/configuration, progress tokens): answer null.
        if "id" in m and "method" in m:
            send({"jsonrpc": "2.0", "id": m["id"], "result": None})

    result = None
    quiescent = False
    try:
        send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "processId": None, "rootUri": "file://" + root,
            "capabilities": {"experimental": {"serverStatusNotification": True}},
            "initializationOptions": {"cargo": {"allTargets": True}, "procMacro": {"enable": True}}}})
        deadline = started + limit
        while time.time() < deadline:
            m = recv(deadline)
            if m is None:
                break
            if m.get("id") == 1:
                send({"jsonrpc": "2.0", "method": "initialized", "params": {}})
                with open(path) as f:
                    text = f.read()
                send({"jsonrpc": "2.0", "method": "textDocument/didOpen", "params": {"textDocument": {
                    "uri": "file://" + path, "languageId": "rust", "version": 1, "text": text}}})
            if m.get("method") == "experimental/serverStatus" and m["params"].get("quiescent"):
                quiescent = True
                break
            answer_requests(m)
        send({"jsonrpc": "2.0", "id": 2, "method": "experimental/runnables",
              "params": {"textDocument": {"uri": "file://" + path}}})
        while True:
            m = recv(time.time() + 60)
            if m is None:
                break
            if m.get("id") == 2:
                result = m.get("result") or []
                break
            answer_requests(m)
    except (BrokenPipeError, ConnectionResetError):
        pass
    finally:
        try:
            send({"jsonrpc": "2.0", "id": 3, "method": "shutdown"})
            send({"jsonrpc": "2.0", "method": "exit"})
            p.wait(timeout=10)
        except Exception:
            p.kill()
            p.wait()

    print("ra_runnables: %.0fs, quiescent when asked: %s" % (time.time() - started, quiescent), file=sys.stderr)
    if result is None:
        log.seek(0)
        tail = log.read().decode(errors="replace").splitlines()[-30:]
        print("ra_runnables: no answer from rust-analyzer; the end of its log:", file=sys.stderr)
        for line in tail:
            print("  " + line, file=sys.stderr)
        return 1
    if as_json:
        print(json.dumps(result, indent=1))
    else:
        for r in result:
            a = r.get("args", {})
            print(r.get("label"), "|", " ".join(a.get("cargoArgs", [])), "--", " ".join(a.get("executableArgs", [])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
