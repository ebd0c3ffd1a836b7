//! Saved cases (regression files): minimized failures kept in
//! `calametra-regressions/<test target>/<scenario path>/<id>.json` in the crate under test, meant
//! to be committed, replayed first by the harness.
//!
//! A case belongs to (package, test target, scenario path, signature): the directory names the
//! target and scenario, the id is the signature's, and the file's own `package`/`target`/
//! `scenario` fields are checked before it is run. A file holds the build-independent event list
//! itself (not only a seed), the failure signature, the spec's SHA-256 and the trace hash.
//!
//! One file per signature holds the best case ([`better`]: fewest events, then a fixed order),
//! whichever trial, thread or process offered it first: writers take the directory's lock, read
//! what is there and replace it only with a strictly better case, atomically (a temporary file
//! beside it with the user's umask, then a rename). Only regular files named `<id>.json` are
//! cases; reading one that is corrupt, truncated or of a foreign version is an error naming the
//! file and field, never a panic.

use crate::choices::Event;
use crate::error::Error;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::{Path, PathBuf};

/// The format tag of a regression file.
pub const FORMAT: &str = "calametra.regression";
/// The version this build reads and writes.
pub const VERSION: u64 = 1;

/// One saved failure.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Regression {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`].
    pub version: u64,
    /// The scenario path (`trigger6::stale_status_after_disconnect`).
    pub scenario: String,
    /// Stable for a signature: the first 12 hex digits of SHA-256(scenario, signature).
    pub id: String,
    /// The failure signature (numbers taken out).
    pub signature: String,
    /// The failure as it was printed.
    pub failure: String,
    /// The trial that found it (`seed::0x4f21a9`, `site::ctrl.get_status#3::stall`).
    pub found_by: String,
    /// The base seed of that exploration.
    pub base_seed: String,
    /// SHA-256 of the scenario's spec file, if it has one.
    pub spec_sha256: Option<String>,
    /// The minimal events, replayed in order.
    pub events: Vec<Event>,
    /// The events read aloud: `get_status . unplug . get_status`.
    pub story: String,
    /// The minimal run's last transfers, externals, faults and the broken invariant, read
    /// aloud (`get_status#6 -> 01 . UNPLUG . intr.in#4 . ... BROKE`), for people.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub run_aloud: String,
    /// The trace hash of the minimal run.
    pub trace_hash: String,
    /// The encoding version of `trace_hash` ([`crate::trace::HASH_VERSION`] when this build
    /// wrote it). A file without the field predates it: version 1. A case of an older version
    /// is replayed by its events, checked against its hash under its own version, and
    /// re-hashed ([`Regression::rehashed`]).
    #[serde(default = "hash_version_one")]
    pub hash_version: u64,
    /// The swarm configuration of the run that found it (its seed drew it: which faults,
    /// sites, density, externals and scheduling strategy were on), for people; replay uses the
    /// events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swarm: Option<crate::swarm::Swarm>,
    /// A guest scenario's case: the content hash of the build its runs depend on besides the
    /// code (the QEMU binary, its firmware, the guest's kernel and initramfs, the machine's
    /// arguments), `sha256:` and 64 hex digits. The case replays byte-exactly only with that
    /// build; with another its regression trial reports "made for another build" and does not
    /// replay it. Absent for in-process cases (and guest cases saved before it existed, which
    /// replay as before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_build: Option<String>,
    /// The Cargo package and test target that hold the scenario (for the replay command).
    pub package: String,
    /// The test target.
    pub target: String,
}

/// The hash version of a saved case written before cases recorded it.
fn hash_version_one() -> u64 {
    1
}

/// The id of a signature in a scenario.
pub fn id_for(scenario: &str, signature: &str) -> String {
    let h = crate::trace::sha256_hex(format!("{scenario}\n{signature}").as_bytes());
    h[..12].to_string()
}

/// The directory of a scenario's regressions under `root`.
pub fn scenario_dir(root: &Path, scenario: &str) -> PathBuf {
    let mut p = root.to_path_buf();
    for part in scenario.split("::") {
        p.push(part);
    }
    p
}

impl Regression {
    /// Serializes as pretty JSON with a trailing newline (readable, diff-friendly).
    pub fn to_json(&self) -> String {
        let mut s = serde_json::to_string_pretty(self).unwrap_or_default();
        s.push('\n');
        s
    }

    /// Parses a regression file's text; errors name `path`, the field (`events[3].point`) and,
    /// for text that is not JSON or a value of the wrong kind, the line and column.
    pub fn parse(path: &Path, text: &str) -> Result<Regression, Error> {
        let err = |field: &str, message: String| Error::File {
            path: path.to_path_buf(),
            field: field.into(),
            message,
        };
        if text.trim().is_empty() {
            return Err(err(
                "(document)",
                "empty file; expected a calametra.regression JSON object".into(),
            ));
        }
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| err("(document)", crate::input::json_error_words(&e)))?;
        if !v.is_object() {
            return Err(err(
                "(document)",
                format!(
                    "expected a calametra.regression JSON object, found {}",
                    kind_of(&v)
                ),
            ));
        }
        match v.get("format").and_then(|f| f.as_str()) {
            Some(FORMAT) => {}
            other => {
                return Err(err(
                    "format",
                    format!("expected \"{FORMAT}\", found {other:?}"),
                ))
            }
        }
        match v.get("version").and_then(|f| f.as_u64()) {
            Some(VERSION) => {}
            other => {
                return Err(err(
                    "version",
                    format!("expected {VERSION}, found {other:?}; this file was written by another Calametra version"),
                ))
            }
        }
        let hash_version = match v.get("hash_version") {
            None => 1,
            Some(h) => h.as_u64().unwrap_or(0),
        };
        if !crate::trace::HASH_VERSIONS.contains(&hash_version) {
            return Err(err(
                "hash_version",
                format!(
                    "expected one of {:?}, found {}; this file was written by another Calametra version",
                    crate::trace::HASH_VERSIONS,
                    v["hash_version"]
                ),
            ));
        }
        if let Some(b) = v.get("guest_build").filter(|b| !b.is_null()) {
            if let Err(why) = check_build_id(b) {
                return Err(err("guest_build", why));
            }
        }
        let e = match serde_json::from_str::<Regression>(text) {
            Ok(r) => return Ok(r),
            Err(e) => e,
        };
        let at = format!("at line {} column {}", e.line(), e.column());
        match locate(&v) {
            Some((field, msg)) => Err(err(&field, format!("{msg} ({at})"))),
            None => Err(err("(document)", e.to_string())),
        }
    }

    /// Reads a regression file: a regular file of at most
    /// [`crate::input::MAX_DOCUMENT_BYTES`] (a FIFO, a device or a huge file is refused before
    /// it is read).
    pub fn load(path: &Path) -> Result<Regression, Error> {
        let text = crate::input::read_regular(path, crate::input::MAX_DOCUMENT_BYTES, "saved case")
            .map_err(|message| Error::Input {
                path: path.to_path_buf(),
                message,
            })?;
        Self::parse(path, &text)
    }

    /// Writes the file atomically into `dir` as `<id>.json`; returns its path.
    pub fn save(&self, dir: &Path) -> Result<PathBuf, Error> {
        let path = dir.join(format!("{}.json", self.id));
        replace_atomic(&path, self.to_json().as_bytes())?;
        Ok(path)
    }
}

/// Whether a saved case's `guest_build` is a build identity: `sha256:` and 64 lowercase hex
/// digits. `Err` says what it is instead.
fn check_build_id(v: &serde_json::Value) -> Result<(), String> {
    let Some(s) = v.as_str() else {
        return Err(format!(
            "expected a string \"sha256:<64 hex digits>\" (the guest build's content hash), found {}",
            kind_of(v)
        ));
    };
    let hex = s.strip_prefix("sha256:").unwrap_or("");
    if hex.len() == 64 && hex.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
        Ok(())
    } else {
        Err(format!(
            "expected \"sha256:\" and 64 lowercase hex digits (the guest build's content hash), found {s:?}"
        ))
    }
}

/// `an array`, `a string`, ... for messages.
fn kind_of(v: &serde_json::Value) -> &'static str {
    use serde_json::Value;
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// The field of a saved case's JSON that does not deserialize (`events[3].point`, `swarm`,
/// `story`) and serde's message, or `None` when it deserializes.
fn locate(v: &serde_json::Value) -> Option<(String, String)> {
    if let Some(events) = v.get("events").and_then(|e| e.as_array()) {
        for (i, e) in events.iter().enumerate() {
            if let Some((key, msg)) = culprit::<Event>(e, Some("event")) {
                let field = match key {
                    Some(k) => format!("events[{i}].{k}"),
                    None => format!("events[{i}]"),
                };
                return Some((field, msg));
            }
        }
    }
    if let Some(s) = v.get("swarm").filter(|s| !s.is_null()) {
        if let Some((key, msg)) = culprit::<crate::swarm::Swarm>(s, None) {
            let field = match key {
                Some(k) => format!("swarm.{k}"),
                None => "swarm".into(),
            };
            return Some((field, msg));
        }
    }
    let (key, msg) = culprit::<Regression>(v, None)?;
    Some((key.unwrap_or_else(|| "(document)".into()), msg))
}

/// The key of `v` (an object) that keeps it from deserializing as a `T`, when it can be told
/// (see [`culprit`]); `tag` is an internally tagged enum's tag key (`event`).
pub(crate) fn culprit_field<T: serde::de::DeserializeOwned>(
    v: &serde_json::Value,
    tag: Option<&str>,
) -> Option<String> {
    culprit::<T>(v, tag).and_then(|(k, _)| k)
}

/// Whether `v` deserializes as a `T`; when not, serde's message and the key of `v` (an object)
/// that is wrong, when it can be told: the one the message names (`missing field `x``,
/// `unknown field `x``), the tag `tag` of an unknown variant, or the one whose removal changes
/// the error (serde stops at the first wrong value, so removing any other key leaves the
/// error as it is).
fn culprit<T: serde::de::DeserializeOwned>(
    v: &serde_json::Value,
    tag: Option<&str>,
) -> Option<(Option<String>, String)> {
    let msg = serde_json::from_value::<T>(v.clone()).err()?.to_string();
    let named = || msg.split('`').nth(1).map(str::to_string);
    for words in ["missing field", "unknown field", "duplicate field"] {
        if msg.starts_with(words) {
            return Some((named(), msg));
        }
    }
    let Some(obj) = v.as_object() else {
        return Some((None, msg));
    };
    if let Some(tag) = tag {
        let tag_value = obj.get(tag).and_then(|t| t.as_str());
        if msg.starts_with("unknown variant") && named().as_deref() == tag_value {
            return Some((Some(tag.to_string()), msg));
        }
    }
    for k in obj.keys().filter(|k| Some(k.as_str()) != tag) {
        let mut rest = obj.clone();
        rest.remove(k);
        let now = serde_json::from_value::<T>(serde_json::Value::Object(rest))
            .err()
            .map(|e| e.to_string());
        if now.as_deref() != Some(msg.as_str()) {
            return Some((Some(k.clone()), msg));
        }
    }
    Some((None, msg))
}

/// Where the failure chain keeps saved cases: a directory ([`Dir`]) or nowhere ([`Off`]).
/// proptest's `FailurePersistence` in spirit: the chain decides what to keep, the store keeps it.
pub trait Store: Send + Sync {
    /// Offers `case`; the store keeps the best case of its signature. `Err` says why it could
    /// not be kept.
    fn save(&self, case: &Regression) -> Result<Saved, String>;

    /// The case the store keeps as `<id>.json`, if it keeps one that reads back (`None` for
    /// a store that keeps nothing).
    fn find(&self, id: &str) -> Option<Regression> {
        let _ = id;
        None
    }
}

/// What a store did with a case.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Saved {
    /// The case was written to this file.
    Written(PathBuf),
    /// This file already held exactly this case.
    Unchanged(PathBuf),
    /// This file holds a better case of the same signature (fewer events, or as few and first
    /// in the fixed order), which is kept; the offered case is not saved.
    KeptBetter {
        /// The file.
        path: PathBuf,
        /// The case it holds.
        kept: Box<Regression>,
    },
    /// Saving is turned off (`CALAMETRA_REGRESSIONS=off`).
    Off,
}

impl Saved {
    /// The file that holds the signature's case, if one does.
    pub fn path(&self) -> Option<&Path> {
        match self {
            Saved::Written(p) | Saved::Unchanged(p) => Some(p),
            Saved::KeptBetter { path, .. } => Some(path),
            Saved::Off => None,
        }
    }
}

/// The order of cases of one signature: fewer events first, then the case's JSON text, a total
/// order, so the kept case does not depend on which trial, thread or process offered it first.
pub fn better(a: &Regression, b: &Regression) -> bool {
    (a.events.len(), a.to_json()) < (b.events.len(), b.to_json())
}

/// Saving turned off (`CALAMETRA_REGRESSIONS=off`).
pub struct Off;

impl Store for Off {
    fn save(&self, _: &Regression) -> Result<Saved, String> {
        Ok(Saved::Off)
    }
}

/// A scenario's regression directory.
pub struct Dir(pub PathBuf);

impl Store for Dir {
    fn save(&self, case: &Regression) -> Result<Saved, String> {
        case.save_best(&self.0).map_err(|e| e.to_string())
    }

    fn find(&self, id: &str) -> Option<Regression> {
        let path = self.0.join(format!("{id}.json"));
        let text =
            crate::input::read_regular(&path, crate::input::MAX_DOCUMENT_BYTES, "saved case")
                .ok()?;
        Regression::parse(&path, &text).ok()
    }
}

/// Holds the directory's lock: writers of one directory, threads or processes, take turns.
/// On Unix the directory itself is locked (no lock file for users to commit); elsewhere a
/// `.calametra.lock` file in it.
struct DirLock(#[allow(dead_code)] std::fs::File);

impl DirLock {
    fn take(dir: &Path) -> Result<DirLock, Error> {
        let io = |action: &'static str| {
            let path = dir.to_path_buf();
            move |source| Error::Io {
                path,
                action,
                source,
            }
        };
        #[cfg(unix)]
        let f = std::fs::File::open(dir).map_err(io("open the regression directory to lock"))?;
        #[cfg(not(unix))]
        let f = std::fs::OpenOptions::new()
            .create(true)
            .write(true)
            .open(dir.join(".calametra.lock"))
            .map_err(io("open the lock file in"))?;
        f.lock().map_err(io("lock"))?;
        Ok(DirLock(f))
    }
}

impl Regression {
    /// Writes the case into `dir` as `<id>.json` unless the file already holds this case or a
    /// better one of the signature (see [`better`]); under the directory's lock, so concurrent
    /// writers keep the best case. Orphaned temporary files (a writer killed mid-write) are
    /// removed on the way.
    pub fn save_best(&self, dir: &Path) -> Result<Saved, Error> {
        std::fs::create_dir_all(dir).map_err(|source| Error::Io {
            path: dir.to_path_buf(),
            action: "create the regression directory",
            source,
        })?;
        let _lock = DirLock::take(dir)?;
        remove_orphans(dir);
        let path = dir.join(format!("{}.json", self.id));
        // A FIFO or a device named as the case is not read (it would block or never end).
        if let Ok(text) =
            crate::input::read_regular(&path, crate::input::MAX_DOCUMENT_BYTES, "saved case")
        {
            if let Ok(old) = Regression::parse(&path, &text) {
                if old == *self {
                    return Ok(Saved::Unchanged(path));
                }
                let same_case_kind = old.signature == self.signature
                    && old.scenario == self.scenario
                    && old.package == self.package
                    && old.target == self.target;
                if same_case_kind && better(&old, self) {
                    return Ok(Saved::KeptBetter {
                        path,
                        kept: Box::new(old),
                    });
                }
            }
        }
        replace_atomic(&path, self.to_json().as_bytes())?;
        Ok(Saved::Written(path))
    }
}

impl Regression {
    /// This case with its trace hash in the current encoding ([`crate::trace::HASH_VERSION`]):
    /// `hash` is the hash of a replay of its events that reproduced its recorded hash under the
    /// case's own version. Everything else is kept.
    pub fn rehashed(&self, hash: crate::trace::TraceHash) -> Regression {
        Regression {
            trace_hash: hash.to_string(),
            hash_version: crate::trace::HASH_VERSION,
            ..self.clone()
        }
    }

    /// Replaces the case file at `path` with `self` if it still holds `old` (under its
    /// directory's lock, atomically), so a better case another writer saved meanwhile is kept.
    /// `Ok(true)` when written.
    pub fn replace(&self, path: &Path, old: &Regression) -> Result<bool, Error> {
        let dir = match path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d,
            _ => Path::new("."),
        };
        let _lock = DirLock::take(dir)?;
        let text = crate::input::read_regular(path, crate::input::MAX_DOCUMENT_BYTES, "saved case")
            .map_err(|message| Error::Input {
                path: path.to_path_buf(),
                message,
            })?;
        if Regression::parse(path, &text)? != *old {
            return Ok(false);
        }
        replace_atomic(path, self.to_json().as_bytes())?;
        Ok(true)
    }
}

/// Removes `.calametra-*.tmp` files left by a writer that died between creating and renaming
/// them. Called with the directory's lock held, when no writer of ours is mid-write.
fn remove_orphans(dir: &Path) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let name = e.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".calametra-") && name.ends_with(".tmp") {
            let _ = std::fs::remove_file(e.path());
        }
    }
}

/// Whether an output may be written at `path`: nothing there yet, or a regular file (which
/// is replaced). A symlink, a directory, a FIFO, a socket or a device is refused with an error
/// saying what it is: an output never replaces what it should not.
pub fn check_replaceable(path: &Path) -> Result<(), Error> {
    let Ok(m) = std::fs::symlink_metadata(path) else {
        return Ok(());
    };
    let t = m.file_type();
    if t.is_file() {
        return Ok(());
    }
    let what = if t.is_symlink() {
        "a symlink"
    } else if t.is_dir() {
        "a directory"
    } else {
        "a FIFO, socket or device"
    };
    Err(Error::Input {
        path: path.to_path_buf(),
        message: format!(
            "it is {what}, which an output never replaces; expected a regular file or no file there"
        ),
    })
}

/// Writes `bytes` to `path` atomically: a temporary file beside it (created with mode 0666 less
/// the user's umask, as any new file), synced, then renamed. Refuses to replace anything but a
/// regular file ([`check_replaceable`]).
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    check_replaceable(path)?;
    replace_atomic(path, bytes)
}

/// [`write_atomic`] for a saved case, which replaces whatever has the case's own name (a FIFO
/// named `<id>.json` must not cost the find: the directory is the case store's).
fn replace_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let dir = match path.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    };
    let io = |action: &'static str| {
        let path = path.to_path_buf();
        move |source| Error::Io {
            path,
            action,
            source,
        }
    };
    std::fs::create_dir_all(dir).map_err(io("create the directory for"))?;
    let mut b = tempfile::Builder::new();
    b.prefix(".calametra-").suffix(".tmp");
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        b.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let mut tmp = b
        .tempfile_in(dir)
        .map_err(io("create a temporary file beside"))?;
    tmp.write_all(bytes).map_err(io("write"))?;
    tmp.as_file().sync_all().map_err(io("sync"))?;
    tmp.persist(path).map_err(|e| Error::Io {
        path: path.to_path_buf(),
        action: "rename the temporary file onto",
        source: e.error,
    })?;
    Ok(())
}

/// Whether `name` is a saved case's file name: `<id>.json`, the id 12 lowercase hex digits.
pub fn is_case_file_name(name: &str) -> bool {
    name.strip_suffix(".json").is_some_and(|id| {
        id.len() == 12 && id.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
    })
}

/// A scenario's regression directory, read.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Listing {
    /// The saved cases' files (`<id>.json`, regular files), sorted.
    pub cases: Vec<PathBuf>,
    /// Other entries, skipped (a `.gitkeep`, `x.json.orig`, a FIFO, a symlink).
    pub skipped: Vec<PathBuf>,
}

/// Reads a scenario's regression directory. A directory that does not exist has no cases;
/// sub-directories (other scenarios under this path) are not listed; orphaned temporary files
/// are removed (under the directory's lock).
pub fn list(dir: &Path) -> Result<Listing, Error> {
    let rd = match std::fs::read_dir(dir) {
        Ok(rd) => rd,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Listing::default()),
        Err(source) => {
            return Err(Error::Io {
                path: dir.to_path_buf(),
                action: "list the regression directory",
                source,
            })
        }
    };
    let mut out = Listing::default();
    let mut orphans = false;
    for entry in rd.flatten() {
        let p = entry.path();
        // Never follow a symlink or open a special file: a FIFO would hang the test binary.
        let Ok(ft) = entry.file_type() else { continue };
        if ft.is_dir() {
            continue;
        }
        let name = entry.file_name();
        let name = name.to_string_lossy();
        if name.starts_with(".calametra-") && name.ends_with(".tmp") {
            orphans = true;
            continue;
        }
        if name == ".calametra.lock" {
            continue;
        }
        if ft.is_file() && is_case_file_name(&name) {
            out.cases.push(p);
        } else {
            out.skipped.push(p);
        }
    }
    if orphans {
        if let Ok(_lock) = DirLock::take(dir) {
            remove_orphans(dir);
        }
    }
    out.cases.sort();
    out.skipped.sort();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fault::Fault;

    fn sample() -> Regression {
        Regression {
            format: FORMAT.into(),
            version: VERSION,
            scenario: "t6::stale".into(),
            id: id_for("t6::stale", "invariant `x` broke"),
            signature: "invariant `x` broke".into(),
            failure: "invariant `x` broke".into(),
            found_by: "seed::0x1".into(),
            base_seed: "0x0".into(),
            spec_sha256: None,
            events: vec![
                Event::Client {
                    value: 1,
                    label: Some("get_status".into()),
                },
                Event::Fault {
                    site: "ctrl.x#1".into(),
                    fault: Fault::Stall,
                },
            ],
            story: "get_status . stall at ctrl.x#1".into(),
            run_aloud: String::new(),
            swarm: None,
            guest_build: None,
            trace_hash: "sha256:00".into(),
            hash_version: crate::trace::HASH_VERSION,
            package: "p".into(),
            target: "t".into(),
        }
    }

    /// Issue 18: a guest case records its build; an in-process case's file has no such key
    /// (its bytes are as before); a wrong value is an error naming the file and the field.
    #[test]
    fn a_guest_case_records_its_build_and_a_bad_one_is_named() {
        let plain = sample();
        assert!(
            !plain.to_json().contains("guest_build"),
            "{}",
            plain.to_json()
        );
        let build = format!("sha256:{}", "0a".repeat(32));
        let pinned = Regression {
            guest_build: Some(build.clone()),
            ..sample()
        };
        let json = pinned.to_json();
        assert!(
            json.contains(&format!("\"guest_build\": \"{build}\"")),
            "{json}"
        );
        let dir = tempfile::tempdir().unwrap();
        let p = pinned.save(dir.path()).unwrap();
        assert_eq!(Regression::load(&p).unwrap(), pinned);
        let bad = |value: &str| {
            let text = json.replace(&format!("\"{build}\""), value);
            Regression::parse(Path::new("x.json"), &text)
                .unwrap_err()
                .to_string()
        };
        for (value, says) in [
            ("7", "found a number"),
            ("\"abc\"", "found \"abc\""),
            (
                &format!("\"sha256:{}\"", "0a".repeat(31)),
                "64 lowercase hex digits",
            ),
            (
                &format!("\"sha256:{}\"", "0A".repeat(32)),
                "64 lowercase hex digits",
            ),
            (
                &format!("\"md5:{}\"", "0a".repeat(32)),
                "expected \"sha256:\"",
            ),
        ] {
            let e = bad(value);
            assert!(
                e.contains("x.json") && e.contains("field `guest_build`") && e.contains(says),
                "{value}: {e}"
            );
        }
        // null is the same as absent.
        let null = json.replace(&format!("\"{build}\""), "null");
        assert_eq!(
            Regression::parse(Path::new("x.json"), &null).unwrap(),
            plain
        );
    }

    #[test]
    fn round_trips_and_rejects_bad_files() {
        let dir = tempfile::tempdir().unwrap();
        let r = sample();
        let p = r.save(dir.path()).unwrap();
        assert_eq!(Regression::load(&p).unwrap(), r);
        let bad = |text: &str| {
            Regression::parse(Path::new("x.json"), text)
                .unwrap_err()
                .to_string()
        };
        assert!(bad("").contains("empty"));
        assert!(bad(&r.to_json()[..40]).contains("truncated"));
        assert!(bad(&r.to_json().replace("\"version\": 1", "\"version\": 9")).contains("version"));
        assert!(bad("{\"format\":\"other\"}").contains("format"));
        let e = bad(&r.to_json().replace("\"story\"", "\"stroy\""));
        assert!(e.contains("x.json"), "{e}");
        assert_eq!(list(dir.path()).unwrap().cases, vec![p]);
        assert!(list(&dir.path().join("none")).unwrap().cases.is_empty());
    }

    /// Issue 19: each wrong file is named with its field and, where the text is at fault, the
    /// line and column; "truncated" only for a file that ends early.
    #[test]
    fn errors_name_the_field_and_the_place() {
        let bad = |text: &str| {
            Regression::parse(Path::new("x.json"), text)
                .unwrap_err()
                .to_string()
        };
        let json = sample().to_json();
        // A trailing comma: not valid JSON, at its line; not "truncated".
        let trailing = json.replacen("\n}", ",\n}", 1);
        let e = bad(&trailing);
        let last = trailing.lines().count();
        assert!(
            e.contains("x.json: field `(document)`: not valid JSON: trailing comma")
                && e.contains(&format!("at line {last} column 1")),
            "{e}"
        );
        assert!(!e.contains("truncated"), "{e}");
        // Deep nesting: "nested too deeply".
        let deep = format!("{}{}", "[".repeat(5000), "]".repeat(5000));
        let e = bad(&deep);
        assert!(e.contains("nested too deeply"), "{e}");
        let e = bad(&json.replace("\"story\": ", &format!("\"story\": {}", "[".repeat(300))));
        assert!(
            e.contains("nested too deeply") && !e.contains("truncated"),
            "{e}"
        );
        // An array where the object should be.
        assert!(bad("[1]").contains("found an array"), "{}", bad("[1]"));
        // A wrong value in an event: the event's index and field, and the place.
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["events"][1]["site"] = serde_json::json!(7);
        let e = bad(&serde_json::to_string_pretty(&v).unwrap());
        assert!(
            e.contains("field `events[1].site`: invalid type: integer `7`"),
            "{e}"
        );
        assert!(e.contains("at line "), "{e}");
        // A missing field, an unknown field and an unknown kind of event.
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["events"][0].as_object_mut().unwrap().remove("value");
        let e = bad(&v.to_string());
        assert!(
            e.contains("field `events[0].value`: missing field `value`"),
            "{e}"
        );
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["events"][1]["sight"] = serde_json::json!("x");
        let e = bad(&v.to_string());
        assert!(
            e.contains("field `events[1].sight`: unknown field `sight`"),
            "{e}"
        );
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["events"][0]["event"] = serde_json::json!("clint");
        let e = bad(&v.to_string());
        assert!(
            e.contains("field `events[0].event`: unknown variant `clint`"),
            "{e}"
        );
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["events"][1]["fault"] = serde_json::json!("stal");
        let e = bad(&v.to_string());
        assert!(
            e.contains("field `events[1].fault`: unknown variant `stal`"),
            "{e}"
        );
        // A wrong top-level value.
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v["story"] = serde_json::json!(5);
        let e = bad(&v.to_string());
        assert!(
            e.contains("field `story`: invalid type: integer `5`"),
            "{e}"
        );
        let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
        v.as_object_mut().unwrap().remove("trace_hash");
        let e = bad(&v.to_string());
        assert!(e.contains("field `trace_hash`: missing field"), "{e}");
    }

    /// Issue 19: special files are refused without being opened for reading (a FIFO would
    /// block), and so are files past the limit.
    #[cfg(unix)]
    #[test]
    fn special_and_huge_files_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("abcdefabcdef.json");
        assert!(std::process::Command::new("mkfifo")
            .arg(&fifo)
            .status()
            .unwrap()
            .success());
        let e = Regression::load(&fifo).unwrap_err().to_string();
        assert!(e.contains("a FIFO (named pipe), not a regular file"), "{e}");
        let e = Regression::load(Path::new("/dev/zero"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("/dev/zero: cannot read the saved case: it is a character device"),
            "{e}"
        );
        let e = Regression::load(dir.path()).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        // A 1 GB sparse file: refused by its size, nothing read.
        let big = dir.path().join("big.json");
        std::fs::File::create(&big)
            .unwrap()
            .set_len(1 << 30)
            .unwrap();
        let e = Regression::load(&big).unwrap_err().to_string();
        assert!(
            e.contains("1 GiB") && e.contains("more than the 16 MiB"),
            "{e}"
        );
        // Saving over a FIFO named as the case does not block either.
        let mut r = sample();
        r.id = "abcdefabcdef".into();
        assert!(matches!(r.save_best(dir.path()), Ok(Saved::Written(_))));
        assert_eq!(Regression::load(&fifo).unwrap(), r);
    }
}
