//! A QEMU process: starting it with its console and stderr read line by line, cleaned
//! (`start_qemu`, [`clean_line`]), the `Guard` that kills it if a run unwinds, waiting for
//! it to connect to a run's socket (`accept_qemu`), and [`QemuError`], what goes wrong before
//! a run can give an outcome.
//!
//! Process handling only: no command line (that is [`crate::qemu_config`] and
//! [`crate::lockstep`]), no transport, no run loop, no verdict; nothing here imports the
//! launcher, the loop or the watchdog, which all use it. It reads the wall clock (the 30 s
//! connection wait) and runs reader threads, on purpose: both are about the host, never traced.

use crate::bridge::BridgeError;
use std::io::{BufRead, BufReader, ErrorKind, Read};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::time::{Duration, Instant};

/// What went wrong before a run could give an outcome.
#[derive(Debug)]
pub enum QemuError {
    /// Preparing the run's files or socket failed.
    Io {
        /// What was being done.
        what: String,
        /// The error.
        error: std::io::Error,
    },
    /// QEMU did not start, or exited before connecting to the socket.
    Qemu(String),
    /// The bridge could not serve the device.
    Bridge(BridgeError),
}

impl std::fmt::Display for QemuError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            QemuError::Io { what, error } => write!(f, "{what}: {error}"),
            QemuError::Qemu(m) => write!(f, "QEMU: {m}"),
            QemuError::Bridge(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for QemuError {}

pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> QemuError {
    let what = what.into();
    move |error| QemuError::Io { what, error }
}

/// Removes ANSI escape sequences and carriage returns from a console line.
pub fn clean_line(raw: &[u8]) -> String {
    let s = String::from_utf8_lossy(raw);
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\u{1b}' => {
                // ESC [ ... final byte, or ESC + one char.
                if chars.peek() == Some(&'[') {
                    chars.next();
                    for c in chars.by_ref() {
                        if ('@'..='~').contains(&c) {
                            break;
                        }
                    }
                } else {
                    chars.next();
                }
            }
            '\r' => {}
            c if (c as u32) < 0x20 && c != '\t' => {}
            c => out.push(c),
        }
    }
    out
}

/// The lines `src` gives (a QEMU's console or stderr), cleaned, from a reader thread.
pub(crate) fn read_lines(src: impl Read + Send + 'static) -> Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let mut r = BufReader::new(src);
        let mut buf = Vec::new();
        loop {
            buf.clear();
            match r.read_until(b'\n', &mut buf) {
                Ok(0) | Err(_) => return,
                Ok(_) => {
                    if tx.send(clean_line(&buf)).is_err() {
                        return;
                    }
                }
            }
        }
    });
    rx
}

/// Kills QEMU if the run unwinds.
pub(crate) struct Guard(pub(crate) Option<Child>);

impl Guard {
    /// Kills QEMU now (and waits for it).
    pub(crate) fn kill(&mut self) {
        if let Some(mut c) = self.0.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A QEMU started with its console and stderr read line by line.
pub(crate) struct Started {
    /// The command line, for the trace and errors.
    pub(crate) command: String,
    pub(crate) console_rx: Option<Receiver<String>>,
    pub(crate) stderr_rx: Option<Receiver<String>>,
    pub(crate) guard: Guard,
}

/// Starts `cmd` (the QEMU at `binary`) with piped console and stderr.
pub(crate) fn start_qemu(mut cmd: Command, binary: &Path) -> Result<Started, QemuError> {
    let command = format!("{cmd:?}");
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd
        .spawn()
        .map_err(|e| QemuError::Qemu(format!("cannot start {}: {e}", binary.display())))?;
    Ok(Started {
        command,
        console_rx: child.stdout.take().map(read_lines),
        stderr_rx: child.stderr.take().map(read_lines),
        guard: Guard(Some(child)),
    })
}

/// Waits (at most 30 s from `start`) for QEMU to connect to `listener` (the `what` socket);
/// a QEMU that exits first is an error with its stderr.
pub(crate) fn accept_qemu(
    listener: &UnixListener,
    q: &mut Started,
    start: Instant,
    what: &str,
) -> Result<UnixStream, QemuError> {
    loop {
        match listener.accept() {
            Ok((s, _)) => return Ok(s),
            Err(e) if e.kind() == ErrorKind::WouldBlock => {}
            Err(e) => return Err(io("accepting QEMU's connection")(e)),
        }
        let exited = q.guard.0.as_mut().and_then(|c| c.try_wait().ok().flatten());
        if exited.is_some() || start.elapsed() > Duration::from_secs(30) {
            let err: Vec<String> = q.stderr_rx.iter().flat_map(|r| r.try_iter()).collect();
            return Err(QemuError::Qemu(format!(
                "did not connect to the {what} socket ({}): {}",
                match exited {
                    Some(s) => format!("exited with {s}"),
                    None => "30 s passed".into(),
                },
                err.join("\n")
            )));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn console_lines_lose_escapes() {
        assert_eq!(
            clean_line(b"\x1bc\x1b[?7l\x1b[2JCALAMETRA-INIT\r\n"),
            "CALAMETRA-INIT"
        );
        assert_eq!(
            clean_line(b"[    1.0] usb 1-1: new\r\n"),
            "[    1.0] usb 1-1: new"
        );
    }
}
