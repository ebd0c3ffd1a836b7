//! How commands read their input files: bounded, regular files only (a FIFO or `/dev/zero` is
//! refused before it is read), a capture's first bytes checked before the rest is read, a
//! trace's records. No command lives here, and nothing here imports a command.

use crate::output::{fail, CliError};
use calametra_core::input::open_regular;
use calametra_core::trace::{read_jsonl, Record};
use std::io::Read;
use std::path::Path;

/// Whether a capture's first bytes can begin a capture: gzip, pcapng, pcap (either byte order,
/// micro- or nanoseconds) or usbmon text (no NUL or other control bytes but tab, CR and LF).
pub(crate) fn capture_magic_ok(head: &[u8]) -> bool {
    const MAGIC: [[u8; 4]; 5] = [
        [0x0a, 0x0d, 0x0d, 0x0a],
        [0xd4, 0xc3, 0xb2, 0xa1],
        [0xa1, 0xb2, 0xc3, 0xd4],
        [0x4d, 0x3c, 0xb2, 0xa1],
        [0xa1, 0xb2, 0x3c, 0x4d],
    ];
    head.starts_with(&[0x1f, 0x8b])
        || MAGIC.iter().any(|m| head.starts_with(m))
        || head
            .iter()
            .all(|&b| b >= 0x20 || b == b'\t' || b == b'\n' || b == b'\r')
}

/// Reads a regular file of at most `max` bytes ([`calametra_core::input::open_regular`]: a
/// FIFO or `/dev/zero` is refused before it is read); with `magic`, its first bytes are
/// checked before the rest is read. Errors exit 1, as the other bad inputs of `compare`.
pub(crate) fn read_bounded(
    path: &Path,
    max: u64,
    what: &str,
    magic: Option<fn(&[u8]) -> bool>,
) -> Result<Vec<u8>, CliError> {
    let bad = |e: String| CliError(format!("{}: {e}", path.display()), 1);
    let mut f = open_regular(path, max, what).map_err(bad)?;
    let mut bytes = Vec::new();
    if let Some(ok) = magic {
        (&mut f)
            .take(16)
            .read_to_end(&mut bytes)
            .map_err(|e| bad(format!("cannot read the {what}: {e}")))?;
        if !ok(&bytes) {
            return Err(bad(format!(
                "not a {what}: its first bytes are not gzip, pcapng, pcap or usbmon text"
            )));
        }
    }
    f.take(max + 1 - bytes.len() as u64)
        .read_to_end(&mut bytes)
        .map_err(|e| bad(format!("cannot read the {what}: {e}")))?;
    if bytes.len() as u64 > max {
        return Err(bad(format!(
            "cannot read the {what}: it grew past its limit while it was read"
        )));
    }
    Ok(bytes)
}

/// The records of a trace file (an error names the file and the line).
pub(crate) fn records(path: &Path) -> Result<Vec<Record>, CliError> {
    read_jsonl(path).map_err(|e| fail(e.to_string()))
}
