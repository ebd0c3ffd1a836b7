//! One run loop for both transports: the socket to QEMU's USB device, the console, the
//! watchdog and how a run ends.
//!
//! A [`Transport`] is what answers QEMU's USB device, sans I/O: the loop feeds it the bytes
//! QEMU sent and writes back the bytes it gives; it reads no socket and no clock. Two
//! implement it: the usbredir [`crate::bridge::Bridge`] (QEMU's `usb-redir`, for users' own
//! QEMU; not byte-exact) and the lockstep transport ([`crate::lockstep::LockstepTransport`],
//! the `usb-calametra` device answered frame by frame on the guest's clock). The loop owns
//! everything else: reading QEMU's socket, the console lines (timings, the probe's exit code),
//! the [`crate::watchdog`], stopping QEMU and reading the rest of its console, and the run's
//! end (`LoopEnd`, which each run turns into its [`crate::GuestRun`] with
//! `guest_run::verdict`). It reads the wall clock for the watchdog and the timings only; nothing
//! it decides enters a deterministic trace record.

use crate::guest::{self, marker};
use crate::guest_run::{Outcome, Timings};
use crate::qemu_process::Guard;
pub use crate::transport::Transport;
use crate::watchdog::GuestWatch;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::UnixStream;
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::{Duration, Instant};

/// How the loop treats a transport.
#[derive(Clone, Debug)]
pub(crate) struct LoopOptions {
    /// How long one read of QEMU's socket waits.
    pub(crate) read_timeout: Duration,
    /// Quiet time on the socket after which [`Transport::idle`] is called (`None`: never).
    pub(crate) idle_after: Option<Duration>,
    /// After the probe's end line, how long QEMU may take to power off before it is stopped
    /// (`None`: wait for it, the watchdog decides).
    pub(crate) power_off_grace: Option<Duration>,
    /// How long the console is read after QEMU exited.
    pub(crate) exit_drain: Duration,
}

/// How a run's loop ended.
pub(crate) struct LoopEnd {
    /// The outcome from the probe's exit code, a stop, an exit or the watchdog.
    pub(crate) outcome: Outcome,
    /// The console, line by line.
    pub(crate) console: Vec<String>,
    /// When each line arrived (wall time since the run started).
    pub(crate) console_at: Vec<Duration>,
    /// Enumeration and probe timings.
    pub(crate) timings: Timings,
    /// QEMU's exit code (`None` when stopped).
    pub(crate) exit: Option<i32>,
    /// QEMU exited by itself with the stream intact, or was stopped on a frame: the console is
    /// complete and, in lockstep, the same on every run.
    pub(crate) deterministic_end: bool,
}

/// Every line still to come from `rx`, until its writer ends (QEMU exited) or `patience`.
pub(crate) fn drain(rx: &Receiver<String>, patience: Duration) -> Vec<String> {
    let deadline = Instant::now() + patience;
    let mut out = Vec::new();
    loop {
        match rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
            Ok(l) => out.push(l),
            Err(RecvTimeoutError::Disconnected) | Err(RecvTimeoutError::Timeout) => return out,
        }
    }
}

/// The console as the loop keeps it.
struct Console {
    start: Instant,
    lines: Vec<String>,
    at: Vec<Duration>,
    timings: Timings,
    enumerated_at: Option<Instant>,
    probe_rc: Option<i32>,
    probe_ended_at: Option<Instant>,
}

impl Console {
    fn push(&mut self, t: &mut dyn Transport, line: String) {
        t.console_line(&line);
        self.at.push(self.start.elapsed());
        if line.contains(marker::ENUMERATED) && self.enumerated_at.is_none() {
            self.enumerated_at = Some(Instant::now());
            self.timings.enumerated = Some(self.start.elapsed());
        }
        if let Some(rc) = guest::probe_end_rc(&line) {
            if self.probe_rc.is_none() {
                self.timings.probe = self.enumerated_at.map(|t| t.elapsed());
                self.probe_ended_at = Some(Instant::now());
            }
            self.probe_rc = Some(rc);
        }
        self.lines.push(line);
    }

    fn drain(&mut self, t: &mut dyn Transport, rx: &Option<Receiver<String>>, patience: Duration) {
        if let Some(rx) = rx {
            for line in drain(rx, patience) {
                self.push(t, line);
            }
        }
    }

    fn end(self, outcome: Outcome, exit: Option<i32>, deterministic_end: bool) -> LoopEnd {
        LoopEnd {
            outcome,
            console: self.lines,
            console_at: self.at,
            timings: self.timings,
            exit,
            deterministic_end,
        }
    }
}

/// Serves QEMU through `t` on `stream` until the run ends: QEMU exits (the probe's exit code
/// decides), the transport stops it on a frame, the probe ended and QEMU did not power off in
/// time, or the watchdog gives up (`emulator_blocked`, recorded in the trace).
pub(crate) fn run_loop(
    t: &mut dyn Transport,
    mut stream: UnixStream,
    guard: &mut Guard,
    console_rx: Option<Receiver<String>>,
    mut watch: GuestWatch,
    start: Instant,
    opts: &LoopOptions,
) -> LoopEnd {
    let _ = stream.set_read_timeout(Some(opts.read_timeout));
    let _ = stream.set_write_timeout(Some(Duration::from_secs(10)));
    let mut c = Console {
        start,
        lines: Vec::new(),
        at: Vec::new(),
        timings: Timings::default(),
        enumerated_at: None,
        probe_rc: None,
        probe_ended_at: None,
    };
    let mut buf = vec![0u8; 256 * 1024];
    let mut socket_open = true;
    let mut lost: Option<String> = None;
    let mut last_traffic = Instant::now();
    let mut last_activity = t.activity();
    let send = |t: &mut dyn Transport, stream: &mut UnixStream, open: &mut bool| {
        let out = t.take_output();
        if !out.is_empty() && stream.write_all(&out).is_err() {
            *open = false;
        }
    };
    loop {
        if socket_open && t.stop().is_none() {
            send(t, &mut stream, &mut socket_open);
            match stream.read(&mut buf) {
                Ok(0) => socket_open = false,
                Ok(n) => {
                    last_traffic = Instant::now();
                    if let Err(e) = t.feed(&buf[..n]) {
                        lost = Some(e);
                    }
                }
                Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                    if let Some(idle) = opts.idle_after {
                        if last_traffic.elapsed() >= idle && t.idle() {
                            last_traffic = Instant::now();
                        }
                    }
                }
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => socket_open = false,
            }
            // What was answered before a lost frame still goes out.
            send(t, &mut stream, &mut socket_open);
            if lost.is_some() {
                socket_open = false;
            }
        } else {
            std::thread::sleep(Duration::from_millis(5));
        }
        if t.activity() != last_activity {
            last_activity = t.activity();
            watch.progress();
        }
        if let Some(rx) = &console_rx {
            for line in rx.try_iter() {
                watch.line(&line);
                c.push(t, line);
            }
        }
        if let Some(reason) = t.stop() {
            // QEMU waits on the frame not answered: everything the guest printed before it
            // is in the pipe. Stop QEMU and read the rest.
            guard.kill();
            c.drain(t, &console_rx, Duration::from_secs(5));
            return c.end(Outcome::Failed { rc: None, reason }, None, true);
        }
        let status = guard.0.as_mut().and_then(|q| q.try_wait().ok().flatten());
        if let Some(status) = status {
            guard.0 = None;
            c.drain(t, &console_rx, opts.exit_drain);
            let code = status.code();
            t.exited(code);
            let outcome = match c.probe_rc {
                Some(0) => Outcome::Passed,
                Some(rc) => Outcome::Failed {
                    rc: Some(rc),
                    reason: format!("the probe exited with {rc}"),
                },
                None => Outcome::Failed {
                    rc: None,
                    reason: match &lost {
                        Some(e) => format!("QEMU exited ({status}) before the probe ended; {e}"),
                        None => format!("QEMU exited ({status}) before the probe ended"),
                    },
                },
            };
            let deterministic = lost.is_none();
            return c.end(outcome, code, deterministic);
        }
        if let (Some(grace), Some(ended)) = (opts.power_off_grace, c.probe_ended_at) {
            // The probe ended and the guest powers off; give it a moment.
            if ended.elapsed() > grace {
                guard.kill();
                let rc = c.probe_rc.unwrap_or(-1);
                let outcome = if rc == 0 {
                    Outcome::Passed
                } else {
                    Outcome::Failed {
                        rc: Some(rc),
                        reason: format!("the probe exited with {rc} (QEMU did not power off)"),
                    }
                };
                return c.end(outcome, None, false);
            }
            continue;
        }
        if let Some(why) = watch.check() {
            let reason = format!(
                "{why} (last line: {:?}; {})",
                c.lines.last().cloned().unwrap_or_default(),
                t.describe()
            );
            t.host_mut().record("emulator", "watchdog", false, |d| {
                d.str("event", "emulator_blocked").str("reason", &reason);
            });
            guard.kill();
            c.drain(t, &console_rx, Duration::from_secs(2));
            return c.end(Outcome::EmulatorBlocked { reason }, None, false);
        }
    }
}
