//! What every command shares for its outputs and failures: [`CliError`] and the exit codes
//! (`usage` 2, `fail` 1), [`clean`] for every string read from a file before it reaches a
//! terminal, and the one way outputs are written ([`write_output`], [`note_written`],
//! [`is_stream`], [`not_an_input`]). No command lives here, and nothing here imports a command.

use std::path::Path;

/// A CLI failure: the message, and the exit code (2 for usage, 1 for a failed check).
pub struct CliError(pub String, pub u8);

/// A usage error (exit 2): the message, and where to read how the command is used.
pub(crate) fn usage(msg: &str) -> CliError {
    CliError(
        format!("{msg}\n\nFor more information, try `calametra help <COMMAND>`."),
        2,
    )
}

/// A failed check or an unusable file (exit 1).
pub(crate) fn fail(msg: impl Into<String>) -> CliError {
    CliError(msg.into(), 1)
}

/// Where cargo is: `--cargo`, else `$CARGO`, else `cargo`.
pub(crate) fn cargo_or_default(cargo: &Option<String>) -> String {
    cargo
        .clone()
        .unwrap_or_else(|| std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

/// A string read from a file made safe for a terminal: every control character but newline
/// and tab (ESC, BEL, the C1 controls, DEL: what clears the screen, sets the title or writes
/// the clipboard) becomes a visible `\u{..}` escape. Every command prints what it read from a
/// file through this.
pub(crate) fn clean(s: &str) -> String {
    calametra::report::printable(s)
}

/// Whether an output path is a stream (`-`, a character device, a FIFO): what was written is
/// then on it, and notes about the writing go to standard error.
pub(crate) fn is_stream(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    path.as_os_str() == "-"
        || std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.file_type().is_char_device() || m.file_type().is_fifo())
}

/// Says `wrote OUT` (and `extra`): on standard output, or on standard error when OUT is a
/// stream (so that `--html -` writes the page alone).
pub(crate) fn note_written(path: &Path, extra: &str) {
    if is_stream(path) {
        eprintln!("wrote {}{extra}", path.display());
    } else {
        println!("wrote {}{extra}", path.display());
    }
}

/// Refuses an output path that is one of the inputs (the same file, by any name): writing it
/// would destroy what was read. Exit 2.
pub(crate) fn not_an_input(out: &Path, inputs: &[&Path]) -> Result<(), CliError> {
    use std::os::unix::fs::MetadataExt;
    if out.as_os_str() == "-" {
        return Ok(());
    }
    let Ok(o) = std::fs::metadata(out) else {
        return Ok(());
    };
    for i in inputs {
        if let Ok(m) = std::fs::metadata(i) {
            if m.dev() == o.dev() && m.ino() == o.ino() {
                return Err(CliError(
                    format!(
                        "the output {} is the input {}: refusing to overwrite it",
                        out.display(),
                        i.display()
                    ),
                    2,
                ));
            }
        }
    }
    Ok(())
}

/// Writes an output file: `-` is standard output; a character device (`/dev/stdout`) or a FIFO
/// is opened and written through, never replaced; a symlink, a directory, a socket or a block
/// device is refused (exit 2) and left as it is; a regular file or a new path is written
/// atomically (a temporary file renamed over it). Every command's outputs go through here.
pub(crate) fn write_output(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write;
    use std::os::unix::fs::FileTypeExt;
    let stream_err = |e: std::io::Error| fail(format!("{}: cannot write: {e}", path.display()));
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|_| out.flush())
            .map_err(stream_err);
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            let ft = m.file_type();
            if ft.is_symlink() {
                return Err(CliError(
                    format!(
                        "{}: is a symbolic link: refusing to write through or replace it (name its target, or `-` for standard output)",
                        path.display()
                    ),
                    2,
                ));
            }
            if ft.is_char_device() || ft.is_fifo() {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(stream_err)?;
                return f
                    .write_all(bytes)
                    .and_then(|_| f.flush())
                    .map_err(stream_err);
            }
            if !ft.is_file() {
                let what = if ft.is_dir() {
                    "a directory"
                } else if ft.is_socket() {
                    "a socket"
                } else if ft.is_block_device() {
                    "a block device"
                } else {
                    "not a regular file"
                };
                return Err(CliError(
                    format!("{}: is {what}: refusing to write over it", path.display()),
                    2,
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(format!("{}: cannot write: {e}", path.display()))),
    }
    calametra_core::regress::write_atomic(path, bytes).map_err(|e| fail(e.to_string()))
}
