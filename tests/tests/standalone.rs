//! The repository stands alone: a clone is all a test, a script or a note needs. Two checks over
//! the files git tracks (`git ls-files`, from the repository root):
//!
//! - no text file names a place outside the checkout: the old shared reference folder beside it
//!   (by its relative or absolute path) or the absolute path of one particular checkout;
//! - every `refdata/<name>` a tracked file mentions is itself tracked (a file or a folder).
//!
//! `refdata/` itself is not searched for the first check (its files are third-party data and
//! notes), nor are binary files. Without git or a `.git` (a packaged crate, an exported tree)
//! the test says so and checks nothing.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The tracked files, or why they cannot be listed (then the test is skipped).
fn tracked(root: &Path) -> Result<Vec<String>, String> {
    if !root.join(".git").exists() {
        return Err(format!("{} has no .git", root.display()));
    }
    // safe.directory: a checkout owned by another user (a CI container) is still listed.
    let out = Command::new("git")
        .arg("-c")
        .arg(format!("safe.directory={}", root.display()))
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .map_err(|e| format!("git could not be run: {e}"))?;
    assert!(
        out.status.success(),
        "git ls-files failed in {}: {}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out
        .stdout
        .split(|&b| b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// The text of a tracked file, or None for a binary file (a NUL byte or not UTF-8) or one
/// that is gone from the working tree.
fn text(root: &Path, path: &str) -> Option<String> {
    let bytes = std::fs::read(root.join(path)).ok()?;
    if bytes.contains(&0) {
        return None;
    }
    String::from_utf8(bytes).ok()
}

/// What no tracked file may contain, built from pieces so that this file does not contain them.
fn forbidden() -> Vec<String> {
    let shared = "shared";
    let work = ["", "work"].join("/");
    vec![
        ["..", shared].join("/"),
        [work.as_str(), shared].join("/"),
        [work.as_str(), "main"].join("/"),
        [shared, "refdata"].join("/"),
    ]
}

fn skip(why: &str) {
    println!("standalone: SKIPPED, the tracked files cannot be listed ({why}); nothing checked");
}

#[test]
fn no_tracked_file_points_outside_the_repository() {
    let root = root();
    let files = match tracked(&root) {
        Ok(f) => f,
        Err(why) => return skip(&why),
    };
    let patterns = forbidden();
    let mut found = Vec::new();
    let mut searched = 0;
    for path in files.iter().filter(|p| !p.starts_with("refdata/")) {
        let Some(text) = text(&root, path) else {
            continue;
        };
        searched += 1;
        for (n, line) in text.lines().enumerate() {
            for pat in &patterns {
                if line.contains(pat.as_str()) {
                    let shown: String = line.trim().chars().take(160).collect();
                    found.push(format!("{path}:{}: `{pat}` in: {shown}", n + 1));
                }
            }
        }
    }
    assert!(searched > 50, "only {searched} text files searched");
    assert!(
        found.is_empty(),
        "{} line(s) point outside the repository (reference data belongs in refdata/, \
         paths are relative to the repository):\n{}",
        found.len(),
        found.join("\n")
    );
}

/// Every `refdata/<name>` in `text`: the name runs over `[A-Za-z0-9._-]` (trailing dots are
/// punctuation); a name followed by a glob or placeholder character is a pattern, not a path.
fn refdata_mentions(text: &str) -> Vec<String> {
    const KEY: &str = "refdata/";
    let name_char = |c: char| c.is_ascii_alphanumeric() || "._-".contains(c);
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(at) = text[from..].find(KEY) {
        let start = from + at;
        from = start + KEY.len();
        let before = text[..start].chars().next_back();
        if before.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') {
            continue;
        }
        let rest = &text[from..];
        let end = rest.find(|c: char| !name_char(c)).unwrap_or(rest.len());
        if rest[end..].starts_with(['*', '?', '{', '<', '[', '$']) {
            continue;
        }
        let name = rest[..end].trim_end_matches('.');
        if !name.is_empty() {
            names.push(name.to_string());
        }
    }
    names
}

#[test]
fn every_refdata_file_a_tracked_file_names_is_in_the_repository() {
    let root = root();
    let files = match tracked(&root) {
        Ok(f) => f,
        Err(why) => return skip(&why),
    };
    let tracked: BTreeSet<&str> = files.iter().map(String::as_str).collect();
    let is_tracked = |name: &str| {
        let path = format!("refdata/{name}");
        let dir = format!("{path}/");
        tracked.contains(path.as_str()) || files.iter().any(|f| f.starts_with(&dir))
    };
    assert!(
        is_tracked("trace-JCD543-20220514T1928-4k-edid.pcapng.gz") && is_tracked("README.md"),
        "refdata/ is not tracked: the capture and refdata/README.md must be committed"
    );
    let mut missing = Vec::new();
    let mut mentions = 0;
    for path in &files {
        let Some(text) = text(&root, path) else {
            continue;
        };
        for (n, line) in text.lines().enumerate() {
            for name in refdata_mentions(line) {
                mentions += 1;
                if !is_tracked(&name) {
                    missing.push(format!("{path}:{}: refdata/{name}", n + 1));
                }
            }
        }
    }
    assert!(mentions > 10, "only {mentions} refdata/ mentions found");
    assert!(
        missing.is_empty(),
        "{} mention(s) of refdata/ files the repository does not track:\n{}",
        missing.len(),
        missing.join("\n")
    );
}

#[test]
fn refdata_mentions_are_read_as_paths() {
    let got = refdata_mentions(
        "see refdata/dfu11.md. and `refdata/hp-x27q.edid.hex`, join(\"../refdata\"), \
         refdata/<name>, refdata/hp-x27q-*.txt, myrefdata/x, (refdata/usbmon.md)",
    );
    assert_eq!(got, ["dfu11.md", "hp-x27q.edid.hex", "usbmon.md"]);
}
