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
        }
    }
}

impl std::error::Error for Error {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            Error::Io { source, .. } => Some(source),
            Error::File { .. } => None,
        }
    }
}
