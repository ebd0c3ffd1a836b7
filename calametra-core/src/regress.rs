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
    /// The swarm configuration of the run that found it (its seed drew it: which faults,
    /// sites, density, externals and scheduling strategy were on), for people; replay uses the
    /// events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub swarm: Option<crate::swarm::Swarm>,
    /// The Cargo package and test target that hold the scenario (for the replay command).
    pub package: String,
    /// The test target.
    pub target: String,
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

    /// Parses a regression file's text; errors name `path` and the field.
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
            .map_err(|e| err("(document)", format!("not valid JSON (truncated?): {e}")))?;
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
        serde_json::from_value(v).map_err(|e| {
            let msg = e.to_string();
            let field = msg
                .split('`')
                .nth(1)
                .filter(|_| msg.contains("field"))
                .unwrap_or("(document)")
                .to_string();
            err(&field, msg)
        })
    }

    /// Reads a regression file.
    pub fn load(path: &Path) -> Result<Regression, Error> {
        let text = std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            action: "read the regression file",
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Writes the file atomically into `dir` as `<id>.json`; returns its path.
    pub fn save(&self, dir: &Path) -> Result<PathBuf, Error> {
        let path = dir.join(format!("{}.json", self.id));
        write_atomic(&path, self.to_json().as_bytes())?;
        Ok(path)
    }
}

/// Where the failure chain keeps saved cases: a directory ([`Dir`]) or nowhere ([`Off`]).
/// proptest's `FailurePersistence` in spirit: the chain decides what to keep, the store keeps it.
pub trait Store: Send + Sync {
    /// Offers `case`; the store keeps the best case of its signature. `Err` says why it could
    /// not be kept.
    fn save(&self, case: &Regression) -> Result<Saved, String>;
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
        if let Ok(text) = std::fs::read_to_string(&path) {
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
        write_atomic(&path, self.to_json().as_bytes())?;
        Ok(Saved::Written(path))
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

/// Writes `bytes` to `path` atomically: a temporary file beside it (created with mode 0666 less
/// the user's umask, as any new file), synced, then renamed.
pub fn write_atomic(path: &Path, bytes: &[u8]) -> Result<(), Error> {
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
            trace_hash: "sha256:00".into(),
            package: "p".into(),
            target: "t".into(),
        }
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
}
