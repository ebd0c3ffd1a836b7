//! Known findings: the failure signatures a sweep is told about beforehand, each with a plain
//! account of whose bug it is (`CALAMETRA_KNOWN=<file>`, `calametra sweep --known <file>`). A
//! sweep that meets only known signatures (and its `expect` scenarios' bugs) passes, so a CI
//! gate stays green on a bug that is triaged and not yet fixed, and goes red on anything new.
//! A known finding is still found, minimized and saved like any other, and the report names it
//! known with its account.
//!
//! The file is text, one finding a line, four fields separated by `|`:
//!
//! ```text
//! # package | scenario | signature starts with | whose bug
//! my-driver | stale_status | invariant `belief_matches_connection` broke | ours: issue 12, fix pending
//! *         | update      | task `updater` returned an error: GaveUp    | dfu-core 0.11: retries end early
//! ```
//!
//! `*` as the package matches every package. Blank lines and lines starting with `#` are
//! skipped. Every field must be there and not empty: a finding without an account is not
//! triaged. What must not live here: which runs fail (the sweep's) and what a binary does with a
//! known signature (the harness's).

use std::path::{Path, PathBuf};

/// One known finding: a line of the file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KnownFinding {
    /// The Cargo package, or `*` for any.
    pub package: String,
    /// The scenario's path (as its trials are named: `stale_status`, `tests::stale_status`).
    pub scenario: String,
    /// The start of the signature (as the sweep's summary and report print it).
    pub signature: String,
    /// Whose bug it is, in plain words.
    pub account: String,
    /// The line it is on (1-based).
    pub line: usize,
}

/// The known findings of one file.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Known {
    /// The file they were read from.
    pub path: PathBuf,
    /// In the file's order.
    pub findings: Vec<KnownFinding>,
}

/// The form a line must have, for errors.
const FORM: &str = "package | scenario | signature starts with | whose bug";

impl Known {
    /// Reads and parses the file at `path` (a regular file of text); errors name the file and
    /// the line.
    pub fn read(path: &Path) -> Result<Known, crate::Error> {
        let text = crate::input::read_regular(
            path,
            crate::input::MAX_DOCUMENT_BYTES,
            "known findings file",
        )
        .map_err(|message| crate::Error::Input {
            path: path.to_path_buf(),
            message,
        })?;
        Known::parse(path, &text)
    }

    /// Parses the text of a known findings file read from `path` (which errors name, with the
    /// line and the field).
    pub fn parse(path: &Path, text: &str) -> Result<Known, crate::Error> {
        let mut findings = Vec::new();
        for (i, raw) in text.lines().enumerate() {
            let line = i + 1;
            let t = raw.trim();
            if t.is_empty() || t.starts_with('#') {
                continue;
            }
            let err = |field: &str, message: String| crate::Error::File {
                path: path.to_path_buf(),
                field: format!("line {line}: {field}"),
                message,
            };
            let fields: Vec<&str> = t.splitn(4, '|').map(str::trim).collect();
            if fields.len() != 4 {
                return Err(err(
                    "(line)",
                    format!(
                        "expected four fields separated by `|` ({FORM}), found {}",
                        fields.len()
                    ),
                ));
            }
            for (name, value) in ["package", "scenario", "signature", "whose bug"]
                .iter()
                .zip(&fields)
            {
                if value.is_empty() {
                    return Err(err(
                        name,
                        format!("empty; expected {FORM}, every field filled (a finding without an account of whose bug it is is not triaged)"),
                    ));
                }
            }
            findings.push(KnownFinding {
                package: fields[0].into(),
                scenario: fields[1].into(),
                signature: fields[2].into(),
                account: fields[3].into(),
                line,
            });
        }
        Ok(Known {
            path: path.to_path_buf(),
            findings,
        })
    }

    /// The first finding that covers `signature` met by `scenario` of `package`.
    pub fn find(&self, package: &str, scenario: &str, signature: &str) -> Option<&KnownFinding> {
        self.findings.iter().find(|k| {
            (k.package == "*" || k.package == package)
                && k.scenario == scenario
                && signature.starts_with(&k.signature)
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const FILE: &str = "\
# package | scenario | signature starts with | whose bug

pkg | a::b | invariant `x` broke | ours, issue 3
*   | c    | task `t` returned an error: GaveUp | theirs (dfu-core)
";

    #[test]
    fn findings_are_read_and_matched_by_package_scenario_and_prefix() {
        let k = Known::parse(Path::new("k.known"), FILE).unwrap();
        assert_eq!(k.findings.len(), 2);
        assert_eq!(k.findings[0].line, 3);
        let f = k
            .find("pkg", "a::b", "invariant `x` broke: N != N")
            .unwrap();
        assert_eq!(f.account, "ours, issue 3");
        assert!(
            k.find("other", "a::b", "invariant `x` broke").is_none(),
            "another package"
        );
        assert!(
            k.find("pkg", "a", "invariant `x` broke").is_none(),
            "another scenario"
        );
        assert!(
            k.find("pkg", "a::b", "invariant `y` broke").is_none(),
            "another signature"
        );
        assert!(
            k.find("any", "c", "task `t` returned an error: GaveUp")
                .is_some(),
            "`*`"
        );
    }

    #[test]
    fn a_bad_line_is_an_error_naming_the_file_the_line_and_the_field() {
        for (text, says) in [
            ("pkg | a | sig\n", "line 1: (line)`: expected four fields"),
            ("# c\npkg | a | sig | \n", "line 2: whose bug`: empty"),
            ("pkg |  | sig | ours\n", "line 1: scenario`: empty"),
        ] {
            let e = Known::parse(Path::new("k.known"), text)
                .unwrap_err()
                .to_string();
            assert!(e.starts_with("k.known: field `") && e.contains(says), "{e}");
        }
    }

    #[test]
    fn a_missing_file_is_an_error_naming_it() {
        let e = Known::read(Path::new("/nonexistent/k.known"))
            .unwrap_err()
            .to_string();
        assert!(e.contains("/nonexistent/k.known"), "{e}");
    }
}
