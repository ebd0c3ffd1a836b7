//! The core's error type: every message names the file, the field and what was expected.

use std::fmt;
use std::path::PathBuf;

/// An error at the core's boundary (files, specs, regressions, traces).
#[derive(Debug)]
pub enum Error {
    /// A file whose content is wrong: which file, which field, what was expected.
    File {
        /// The file.
        path: PathBuf,
        /// The field (`descriptors.device`, `faults[2].site`, or `(document)`).
        field: String,
        /// What is wrong and what was expected.
        message: String,
    },
    /// An I/O failure on a file.
    Io {
        /// The file.
        path: PathBuf,
        /// What was being done.
        action: &'static str,
        /// The OS error.
        source: std::io::Error,
    },
    /// A file that is not read at all: a FIFO, a device or a directory where a regular file
    /// was expected, or one past a reader's size limit ([`crate::input`]).
    Input {
        /// The file.
        path: PathBuf,
        /// What is wrong (`cannot read the saved case: it is a FIFO (named pipe), not a
        /// regular file`).
        message: String,
    },
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Error::File {
                path,
                field,
                message,
            } => write!(f, "{}: field `{field}`: {message}", path.display()),
            Error::Io {
                path,
                action,
                source,
            } => write!(f, "{}: cannot {action}: {source}", path.display()),
            Error::Input { path, message } => write!(f, "{}: {message}", path.display()),
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::File { .. } | Error::Input { .. } => None,
        }
    }
}
