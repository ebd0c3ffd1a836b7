//! A small QMP client: QEMU's machine protocol over a unix socket, one JSON object per line.
//!
//! What a run asks QEMU through it: whether an incoming machine state has loaded, to plug the
//! lockstep device in (`device_add`), to go on (`cont`), to save the machine (`migrate` to a
//! file), and the guest's clocks the watchdog reads: how many guest instructions have run
//! (`query-replay`'s `icount`) and the guest's real-time clock (`rtc-time`, on the virtual clock). Asynchronous events (`GUEST_PANICKED`, `STOP`, ...) are kept by name as they arrive.
//! This module waits on the wall clock (its deadlines are about the host); nothing it returns
//! enters a deterministic trace record.

use serde_json::{json, Value};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::{Duration, Instant};

/// A QMP connection, past the capabilities handshake.
pub struct Qmp {
    stream: UnixStream,
    buf: Vec<u8>,
    events: Vec<String>,
    phase: Phase,
    /// Whether [`Qmp::poll_clock`] asks for `rtc-time` (cleared when the machine has none).
    rtc: bool,
}

/// Where a connection is in [`Qmp::poll_clock`]'s exchange.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for QEMU's greeting.
    Greeting,
    /// `qmp_capabilities` sent.
    Capabilities,
    /// Nothing asked.
    Ready,
    /// `query-replay` sent.
    Asked,
    /// `qom-get` of the machine's `rtc-time` sent (the instruction count is in hand).
    AskedRtc(u64),
}

/// What [`Qmp::poll_clock`] reads of the guest's clocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClockReading {
    /// Guest instructions executed (`query-replay`'s `icount`).
    pub icount: u64,
    /// The guest's real-time clock in seconds since 1970 (`qom-get /machine rtc-time`): under
    /// `-rtc clock=vm` it follows the virtual clock, idle time skipped by `sleep=off` included.
    /// `None` when the machine has no such property.
    pub rtc_s: Option<u64>,
}

/// Seconds since 1970 of a `struct tm` as QEMU's `rtc-time` gives it (`tm_year` since 1900,
/// `tm_mon` from 0).
pub fn tm_seconds(tm: &Value) -> Option<u64> {
    let f = |k: &str| tm.get(k).and_then(Value::as_i64);
    let (y, m, d) = (f("tm_year")? + 1900, f("tm_mon")? + 1, f("tm_mday")?);
    // Days from the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + f("tm_hour")? * 3600 + f("tm_min")? * 60 + f("tm_sec")?;
    u64::try_from(secs).ok()
}

impl Qmp {
    /// Connects to the QMP socket at `path` (QEMU creates it as it starts: retried until
    /// `deadline`, or until `exited` says QEMU is gone) and negotiates capabilities.
    pub fn connect(
        path: &Path,
        deadline: Instant,
        exited: &mut dyn FnMut() -> bool,
    ) -> Result<Qmp, String> {
        let mut q = Qmp::open(path, deadline, exited)?;
        let greeting = q.next_message(deadline)?;
        if greeting.get("QMP").is_none() {
            return Err(format!("QMP: expected the greeting, found {greeting}"));
        }
        q.execute("qmp_capabilities", json!({}), deadline)?;
        q.phase = Phase::Ready;
        Ok(q)
    }

    /// Connects to the QMP socket at `path` without waiting for QEMU to greet (a QEMU whose
    /// vCPU waits on the lockstep socket answers nothing until that is served; see
    /// [`Qmp::poll_clock`]).
    pub fn open(
        path: &Path,
        deadline: Instant,
        exited: &mut dyn FnMut() -> bool,
    ) -> Result<Qmp, String> {
        let stream = loop {
            match UnixStream::connect(path) {
                Ok(s) => break s,
                Err(e) => {
                    if exited() {
                        return Err(format!(
                            "QEMU exited before its QMP socket {} opened",
                            path.display()
                        ));
                    }
                    if Instant::now() > deadline {
                        return Err(format!(
                            "QEMU's QMP socket {} did not open: {e}",
                            path.display()
                        ));
                    }
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        };
        stream
            .set_nonblocking(true)
            .map_err(|e| format!("QMP socket: {e}"))?;
        Ok(Qmp {
            stream,
            buf: Vec::new(),
            events: Vec::new(),
            phase: Phase::Greeting,
            rtc: true,
        })
    }

    /// Moves the clock exchange on without waiting: greets, negotiates, asks `query-replay`
    /// and then the machine's `rtc-time`, and returns both when the answers have arrived
    /// (`None` meanwhile).
    pub fn poll_clock(&mut self) -> Result<Option<ClockReading>, String> {
        while let Some(m) = self.try_message()? {
            match self.phase {
                Phase::Greeting if m.get("QMP").is_some() => {
                    self.send("qmp_capabilities", json!({}))?;
                    self.phase = Phase::Capabilities;
                }
                Phase::Capabilities if m.get("return").is_some() => self.phase = Phase::Ready,
                Phase::Asked if m.get("return").is_some() => {
                    let n = m["return"]
                        .get("icount")
                        .and_then(Value::as_u64)
                        .ok_or_else(|| format!("QMP query-replay: no icount in {m}"))?;
                    if !self.rtc {
                        self.phase = Phase::Ready;
                        return Ok(Some(ClockReading {
                            icount: n,
                            rtc_s: None,
                        }));
                    }
                    self.send(
                        "qom-get",
                        json!({ "path": "/machine", "property": "rtc-time" }),
                    )?;
                    self.phase = Phase::AskedRtc(n);
                }
                Phase::AskedRtc(n) if m.get("return").is_some() || m.get("error").is_some() => {
                    self.phase = Phase::Ready;
                    let rtc_s = m.get("return").and_then(tm_seconds);
                    // A machine without the property: the instruction count alone from now on.
                    self.rtc = rtc_s.is_some();
                    return Ok(Some(ClockReading { icount: n, rtc_s }));
                }
                _ if m.get("error").is_some() => return Err(format!("QMP: {m}")),
                _ => {}
            }
        }
        if self.phase == Phase::Ready {
            self.send("query-replay", json!({}))?;
            self.phase = Phase::Asked;
        }
        Ok(None)
    }

    /// Sends a command without waiting for its answer (see [`Qmp::answer`]).
    pub fn send(&mut self, command: &str, arguments: Value) -> Result<(), String> {
        let mut line = json!({ "execute": command, "arguments": arguments }).to_string();
        line.push('\n');
        self.stream
            .write_all(line.as_bytes())
            .map_err(|e| format!("QMP {command}: {e}"))
    }

    /// The answer to the command sent last: its `return`, or its `error` as an error.
    pub fn answer(&mut self, command: &str, deadline: Instant) -> Result<Value, String> {
        loop {
            let m = self.next_message(deadline)?;
            if let Some(r) = m.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = m.get("error") {
                return Err(format!("QMP {command}: {e}"));
            }
        }
    }

    /// Sends a command and waits for its answer.
    pub fn execute(
        &mut self,
        command: &str,
        arguments: Value,
        deadline: Instant,
    ) -> Result<Value, String> {
        self.send(command, arguments)?;
        self.answer(command, deadline)
    }

    /// Waits until the event `name` has arrived (at any time since the connection); `watch` is
    /// asked every 200 ms whether to go on waiting (an error ends the wait with it).
    pub fn wait_event(
        &mut self,
        name: &str,
        deadline: Instant,
        watch: &mut dyn FnMut() -> Result<(), String>,
    ) -> Result<(), String> {
        while !self.events.iter().any(|e| e == name) {
            match self.next_message(Instant::now() + Duration::from_millis(200)) {
                Ok(_) => {}
                Err(e) if e.starts_with(TIMED_OUT) => {
                    watch()?;
                    if Instant::now() > deadline {
                        return Err(format!("no {name} event in time"));
                    }
                }
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }

    /// The events seen so far, by name, in order.
    pub fn events(&self) -> &[String] {
        &self.events
    }

    /// Guest instructions executed so far (`query-replay`'s `icount`, under `-icount`).
    pub fn icount(&mut self, deadline: Instant) -> Result<u64, String> {
        let r = self.execute("query-replay", json!({}), deadline)?;
        r.get("icount")
            .and_then(Value::as_u64)
            .ok_or_else(|| format!("QMP query-replay: no icount in {r}"))
    }

    /// Waits for an incoming migration (`-incoming`) to end: `Ok` when completed.
    pub fn wait_incoming(&mut self, deadline: Instant) -> Result<(), String> {
        self.wait_migration(deadline, "loading the snapshot")
    }

    /// Waits for a migration (incoming or outgoing) to complete.
    pub fn wait_migration(&mut self, deadline: Instant, what: &str) -> Result<(), String> {
        loop {
            let r = self.execute("query-migrate", json!({}), deadline)?;
            match r.get("status").and_then(Value::as_str) {
                Some("completed") => return Ok(()),
                Some(s @ ("failed" | "cancelled")) => {
                    let why = r
                        .get("error-desc")
                        .and_then(Value::as_str)
                        .unwrap_or("no reason given");
                    return Err(format!("{what}: migration {s}: {why}"));
                }
                _ => {}
            }
            if Instant::now() > deadline {
                return Err(format!("{what}: the migration did not complete in time"));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// The next message (an answer, or an event, which is also recorded), waiting until
    /// `deadline`.
    fn next_message(&mut self, deadline: Instant) -> Result<Value, String> {
        loop {
            if let Some(m) = self.try_message()? {
                return Ok(m);
            }
            if Instant::now() > deadline {
                return Err(format!("{TIMED_OUT} waiting for QEMU"));
            }
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// The next message if one has arrived.
    fn try_message(&mut self) -> Result<Option<Value>, String> {
        loop {
            if let Some(i) = self.buf.iter().position(|&b| b == b'\n') {
                let line: Vec<u8> = self.buf.drain(..=i).collect();
                let v: Value = serde_json::from_slice(&line).map_err(|e| {
                    format!(
                        "QMP: not JSON ({e}): {}",
                        String::from_utf8_lossy(&line).trim_end()
                    )
                })?;
                if let Some(name) = v.get("event").and_then(Value::as_str) {
                    self.events.push(name.to_string());
                }
                return Ok(Some(v));
            }
            let mut chunk = [0u8; 4096];
            match self.stream.read(&mut chunk) {
                Ok(0) => return Err("QMP: QEMU closed the connection".into()),
                Ok(n) => self.buf.extend_from_slice(&chunk[..n]),
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    return Ok(None)
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(e) => return Err(format!("QMP: {e}")),
            }
        }
    }
}

const TIMED_OUT: &str = "QMP: timed out";

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::net::UnixListener;

    /// A fake QEMU on the other end: the greeting, then canned lines for each command.
    #[test]
    fn answers_skip_events_and_errors_name_the_command() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let server = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            s.write_all(b"{\"QMP\": {\"version\": {}}}\n").unwrap();
            let mut got = Vec::new();
            let mut b = [0u8; 1];
            let mut lines = 0;
            while lines < 3 {
                s.read_exact(&mut b).unwrap();
                got.push(b[0]);
                if b[0] == b'\n' {
                    lines += 1;
                    match lines {
                        1 => s.write_all(b"{\"return\": {}}\n").unwrap(),
                        2 => s
                            .write_all(
                                b"{\"event\": \"STOP\"}\n{\"return\": {\"icount\": 42, \"mode\": \"none\"}}\n",
                            )
                            .unwrap(),
                        _ => s
                            .write_all(b"{\"error\": {\"class\": \"GenericError\", \"desc\": \"no\"}}\n")
                            .unwrap(),
                    }
                }
            }
            String::from_utf8(got).unwrap()
        });
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut q = Qmp::connect(&path, deadline, &mut || false).unwrap();
        assert_eq!(q.icount(deadline).unwrap(), 42);
        assert_eq!(q.events(), ["STOP".to_string()]);
        let e = q.execute("cont", json!({}), deadline).unwrap_err();
        assert!(e.contains("QMP cont") && e.contains("GenericError"), "{e}");
        let sent = server.join().unwrap();
        assert!(sent.contains("\"execute\":\"qmp_capabilities\""), "{sent}");
        assert!(sent.contains("\"execute\":\"query-replay\""), "{sent}");
    }

    #[test]
    fn a_socket_that_never_opens_is_an_error_not_a_hang() {
        let dir = tempfile::tempdir().unwrap();
        let e = Qmp::connect(
            &dir.path().join("none.sock"),
            Instant::now() + Duration::from_millis(100),
            &mut || false,
        )
        .err()
        .unwrap();
        assert!(e.contains("did not open"), "{e}");
        let e = Qmp::connect(
            &dir.path().join("none.sock"),
            Instant::now() + Duration::from_secs(10),
            &mut || true,
        )
        .err()
        .unwrap();
        assert!(e.contains("exited"), "{e}");
    }

    #[test]
    fn the_instruction_count_is_polled_without_waiting() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut q = Qmp::open(&path, Instant::now() + Duration::from_secs(10), &mut || {
            false
        })
        .unwrap();
        let (mut s, _) = listener.accept().unwrap();
        // Nothing from QEMU yet (its vCPU may wait on the lockstep socket): no answer, no wait.
        assert_eq!(q.poll_clock().unwrap(), None);
        s.write_all(b"{\"QMP\": {}}\n").unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut replies = 0;
        let n = loop {
            if let Some(n) = q.poll_clock().unwrap() {
                break n;
            }
            assert!(Instant::now() < deadline, "no icount");
            // Answer each command QEMU would have received.
            let mut b = [0u8; 256];
            s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
            if let Ok(k) = s.read(&mut b) {
                for _ in b[..k].iter().filter(|&&c| c == b'\n') {
                    replies += 1;
                    let r: &[u8] = match replies {
                        1 => b"{\"return\": {}}\n",
                        2 => b"{\"return\": {\"icount\": 99, \"mode\": \"none\"}}\n",
                        _ => b"{\"return\": {\"tm_year\": 126, \"tm_mon\": 0, \"tm_mday\": 2, \"tm_hour\": 0, \"tm_min\": 1, \"tm_sec\": 5}}\n",
                    };
                    s.write_all(r).unwrap();
                }
            }
        };
        let rtc_s = 1_767_225_600 + 86_400 + 65; // 2026-01-02T00:01:05Z
        assert_eq!(
            (n, replies),
            (
                ClockReading {
                    icount: 99,
                    rtc_s: Some(rtc_s)
                },
                3
            ),
            "capabilities, query-replay, then rtc-time"
        );
    }

    #[test]
    fn rtc_time_reads_as_seconds_since_1970() {
        let tm = |y: i64, mo: i64, d: i64, h: i64, mi: i64, se: i64| json!({"tm_year": y - 1900, "tm_mon": mo - 1, "tm_mday": d, "tm_hour": h, "tm_min": mi, "tm_sec": se});
        assert_eq!(tm_seconds(&tm(1970, 1, 1, 0, 0, 0)), Some(0));
        assert_eq!(tm_seconds(&tm(2026, 1, 1, 0, 0, 0)), Some(1_767_225_600));
        assert_eq!(tm_seconds(&tm(2000, 3, 1, 1, 2, 3)), Some(951_872_523));
        assert_eq!(tm_seconds(&tm(1969, 12, 31, 23, 59, 59)), None);
        assert_eq!(tm_seconds(&json!({"tm_year": 126})), None);
    }

    #[test]
    fn a_machine_without_rtc_time_gives_the_instruction_count_alone() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let listener = UnixListener::bind(&path).unwrap();
        let mut q = Qmp::open(&path, Instant::now() + Duration::from_secs(10), &mut || {
            false
        })
        .unwrap();
        let (mut s, _) = listener.accept().unwrap();
        s.write_all(b"{\"QMP\": {}}\n").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        let mut sent = String::new();
        let mut readings = Vec::new();
        while readings.len() < 2 {
            if let Some(r) = q.poll_clock().unwrap() {
                readings.push(r);
            }
            assert!(Instant::now() < deadline, "no reading");
            let mut b = [0u8; 512];
            if let Ok(k) = s.read(&mut b) {
                for line in String::from_utf8_lossy(&b[..k]).lines() {
                    sent.push_str(line);
                    sent.push('\n');
                    let r: &[u8] = if line.contains("qmp_capabilities") {
                        b"{\"return\": {}}\n"
                    } else if line.contains("query-replay") {
                        b"{\"return\": {\"icount\": 7, \"mode\": \"none\"}}\n"
                    } else {
                        b"{\"error\": {\"class\": \"GenericError\", \"desc\": \"no rtc-time\"}}\n"
                    };
                    s.write_all(r).unwrap();
                }
            }
        }
        let none = ClockReading {
            icount: 7,
            rtc_s: None,
        };
        assert_eq!(readings, [none, none]);
        assert_eq!(sent.matches("rtc-time").count(), 1, "asked once: {sent}");
    }
}
