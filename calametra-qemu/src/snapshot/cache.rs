//! The snapshot cache's housekeeping: holding a snapshot while a run restores it, and pruning
//! the ones no run will want.
//!
//! Three kinds of process touch `<target>/guest-snapshots/`, and each takes a `flock` on the
//! directory it works in (the lock follows the directory through a rename):
//! - a maker boots into `.making-<random>/` and holds it exclusively until it has renamed it
//!   to `<key>/`;
//! - a run holds `<key>/` shared while QEMU reads the saved machine (after it has taken the
//!   lock it checks that the name still leads to the directory it locked);
//! - the pruner takes a directory exclusively without waiting, and skips it when it cannot: a
//!   snapshot in use is never removed. It renames what it removes to `.removing-<name>` first,
//!   so no run finds half of one.
//!
//! Only what the cache made is ever removed: `<16 hex digits>/` directories whose `key.txt`
//! starts with this format's first line, `.making-*` left by a maker that died (older than
//! [`ABANDONED`]) and `.removing-*` left by a pruner that died. A snapshot is stale when it was
//! made for another QEMU build, firmware or kernel than the current one, or when more than
//! `keep` snapshots of the current build are there (the least recently used go first; a run's
//! use touches its `key.txt`).

use super::FORMAT;
use crate::qemu_process::{io, QemuError};
use std::fs::File;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime};

/// How many snapshots of the current build the cache keeps (each is ~100 MB).
pub const KEEP: usize = 16;

/// A `.making-*` directory this old whose maker holds no lock on it was left by a maker that
/// died.
pub const ABANDONED: Duration = Duration::from_secs(600);

/// A shared hold on a snapshot directory for as long as it lives (see the module doc).
#[derive(Debug)]
pub struct Hold(#[allow(dead_code)] File);

/// Takes a shared hold on `dir` when it holds the snapshot `text` describes, and marks it
/// used (its `key.txt`'s modification time). `None` when it does not (absent, another
/// machine's, or removed while this waited for the lock).
pub(crate) fn hold_if_found(dir: &Path, text: &str) -> Option<Hold> {
    for _ in 0..3 {
        let f = File::open(dir).ok()?;
        f.lock_shared().ok()?;
        // The name may have been taken from under us (pruned) while we waited: the lock must
        // be on what the name leads to now.
        let now = std::fs::metadata(dir).ok()?;
        let locked = f.metadata().ok()?;
        if (now.dev(), now.ino()) != (locked.dev(), locked.ino()) {
            continue;
        }
        let key = dir.join("key.txt");
        if std::fs::read_to_string(&key).ok().as_deref() != Some(text)
            || !dir.join("state").is_file()
        {
            return None;
        }
        if let Ok(k) = File::options().write(true).open(&key) {
            let _ = k.set_modified(SystemTime::now());
        }
        return Some(Hold(f));
    }
    None
}

/// An exclusive hold a maker takes on its `.making-*` directory.
pub(crate) fn hold_making(dir: &Path) -> Result<Hold, QemuError> {
    let f = File::open(dir).map_err(io(format!("opening {}", dir.display())))?;
    f.lock().map_err(io(format!("locking {}", dir.display())))?;
    Ok(Hold(f))
}

/// The lines of a key that name the build (QEMU, firmware, kernel), not the run.
fn build_lines(text: &str) -> Vec<&str> {
    text.lines()
        .filter(|l| {
            l.starts_with("qemu ") || l.starts_with("firmware ") || l.starts_with("kernel ")
        })
        .collect()
}

fn is_key_name(name: &str) -> bool {
    name.len() == 16
        && name
            .bytes()
            .all(|b| b.is_ascii_hexdigit() && !b.is_ascii_uppercase())
}

/// Takes `dir` exclusively without waiting, renames it out of the way and removes it. `false`
/// when it is in use (or went away).
fn remove_if_unused(cache: &Path, dir: &Path, name: &str) -> bool {
    let Ok(f) = File::open(dir) else {
        return false;
    };
    if f.try_lock().is_err() {
        return false;
    }
    let gone = if name.starts_with(".removing-") {
        dir.to_path_buf()
    } else {
        let to = cache.join(format!(".removing-{}", name.trim_start_matches('.')));
        if std::fs::rename(dir, &to).is_err() {
            return false;
        }
        to
    };
    std::fs::remove_dir_all(&gone).is_ok()
}

/// What [`prune`] did.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Pruned {
    /// The directories removed (their names in the cache).
    pub removed: Vec<String>,
    /// Stale directories left because a run or a maker holds them.
    pub in_use: Vec<String>,
}

/// Removes the stale snapshots of `cache` (see the module doc): `current` is the key text of
/// the snapshot a run just used (its build is the current one), `keep` how many of the
/// current build's stay, `protect` names that stay whatever their age.
pub fn prune(
    cache: &Path,
    current: &str,
    keep: usize,
    protect: &[&str],
) -> Result<Pruned, QemuError> {
    let build = build_lines(current);
    let mut out = Pruned::default();
    let entries = match std::fs::read_dir(cache) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
        Err(e) => return Err(io(format!("reading {}", cache.display()))(e)),
    };
    let now = SystemTime::now();
    let mut ours: Vec<(SystemTime, String)> = Vec::new();
    let mut stale: Vec<String> = Vec::new();
    for entry in entries.flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        let path = entry.path();
        let Ok(meta) = std::fs::symlink_metadata(&path) else {
            continue;
        };
        if !meta.is_dir() {
            continue;
        }
        if name.starts_with(".making-") {
            let age = meta
                .modified()
                .ok()
                .and_then(|m| now.duration_since(m).ok())
                .unwrap_or_default();
            if age > ABANDONED {
                stale.push(name);
            }
            continue;
        }
        if name.starts_with(".removing-") {
            stale.push(name);
            continue;
        }
        if !is_key_name(&name) || protect.contains(&name.as_str()) {
            continue;
        }
        let key = path.join("key.txt");
        let Ok(text) = std::fs::read_to_string(&key) else {
            continue;
        };
        if text.lines().next() != Some(FORMAT) {
            continue;
        }
        if build_lines(&text) != build {
            stale.push(name);
        } else {
            let used = std::fs::metadata(&key)
                .and_then(|m| m.modified())
                .unwrap_or(SystemTime::UNIX_EPOCH);
            ours.push((used, name));
        }
    }
    // The most recently used first; the protected ones count toward `keep`.
    ours.sort_by(|a, b| b.cmp(a));
    let room = keep.saturating_sub(protect.len());
    stale.extend(ours.into_iter().skip(room).map(|(_, n)| n));
    stale.sort();
    for name in stale {
        if remove_if_unused(cache, &cache.join(&name), &name) {
            out.removed.push(name);
        } else {
            out.in_use.push(name);
        }
    }
    Ok(out)
}

/// Where a prune is reported (never fatal to a run).
pub(crate) fn prune_quietly(cache: &Path, current: &str, protect: &str) -> Vec<PathBuf> {
    prune(cache, current, KEEP, &[protect])
        .map(|p| p.removed.iter().map(|n| cache.join(n)).collect())
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(build: &str, run: &str) -> String {
        format!("{FORMAT}\nqemu {build}\nkernel k1\ninitrd {run}\narg -m\n")
    }

    /// A snapshot directory the cache would have made, used `ago` seconds back.
    fn made(cache: &Path, name: &str, text: &str, ago: u64) {
        let d = cache.join(name);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::write(d.join("state"), b"machine").unwrap();
        std::fs::write(d.join("key.txt"), text).unwrap();
        let f = File::options().write(true).open(d.join("key.txt")).unwrap();
        f.set_modified(SystemTime::now() - Duration::from_secs(ago))
            .unwrap();
    }

    fn names(cache: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(cache)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn stale_snapshots_go_the_current_and_what_the_cache_did_not_make_stay() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path();
        let current = key("q2", "probe-a");
        made(cache, "aaaaaaaaaaaaaaaa", &current, 0);
        made(cache, "bbbbbbbbbbbbbbbb", &key("q1", "probe-a"), 0); // another build
        made(cache, "cccccccccccccccc", &key("q2", "probe-b"), 10);
        made(cache, "dddddddddddddddd", &key("q2", "probe-c"), 20);
        made(cache, "eeeeeeeeeeeeeeee", &key("q2", "probe-d"), 30); // least recently used
                                                                    // Not the cache's: another format, no key, another name, a file.
        made(cache, "ffffffffffffffff", "some other format\nqemu q1\n", 0);
        std::fs::create_dir_all(cache.join("0123456789abcdef")).unwrap();
        made(cache, "notes", &key("q1", "x"), 0);
        std::fs::write(cache.join("README"), b"mine").unwrap();
        // A maker that died long ago, and one at work.
        std::fs::create_dir_all(cache.join(".making-old")).unwrap();
        File::open(cache.join(".making-old"))
            .unwrap()
            .set_modified(SystemTime::now() - ABANDONED * 2)
            .unwrap();
        std::fs::create_dir_all(cache.join(".making-now")).unwrap();

        let p = prune(cache, &current, 3, &["aaaaaaaaaaaaaaaa"]).unwrap();
        assert_eq!(
            p.removed,
            [".making-old", "bbbbbbbbbbbbbbbb", "eeeeeeeeeeeeeeee"],
            "{p:?}"
        );
        assert!(p.in_use.is_empty());
        assert_eq!(
            names(cache),
            [
                ".making-now",
                "0123456789abcdef",
                "README",
                "aaaaaaaaaaaaaaaa",
                "cccccccccccccccc",
                "dddddddddddddddd",
                "ffffffffffffffff",
                "notes"
            ]
        );
        // Nothing more to do; a missing cache is no error.
        assert_eq!(
            prune(cache, &current, 3, &["aaaaaaaaaaaaaaaa"]).unwrap(),
            Pruned::default()
        );
        assert_eq!(
            prune(&cache.join("none"), &current, 3, &[]).unwrap(),
            Pruned::default()
        );
    }

    #[test]
    fn a_snapshot_a_run_holds_or_a_maker_works_in_is_never_removed() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path();
        let current = key("q2", "probe-a");
        let old = key("q1", "probe-a");
        made(cache, "bbbbbbbbbbbbbbbb", &old, 0);
        let held = hold_if_found(&cache.join("bbbbbbbbbbbbbbbb"), &old).expect("found");
        std::fs::create_dir_all(cache.join(".making-x")).unwrap();
        let making = hold_making(&cache.join(".making-x")).unwrap();
        File::open(cache.join(".making-x"))
            .unwrap()
            .set_modified(SystemTime::now() - ABANDONED * 2)
            .unwrap();
        let p = prune(cache, &current, 3, &[]).unwrap();
        assert!(p.removed.is_empty(), "{p:?}");
        assert_eq!(p.in_use, [".making-x", "bbbbbbbbbbbbbbbb"]);
        assert!(cache.join("bbbbbbbbbbbbbbbb/state").is_file());
        drop((held, making));
        let p = prune(cache, &current, 3, &[]).unwrap();
        assert_eq!(p.removed, [".making-x", "bbbbbbbbbbbbbbbb"]);
        assert_eq!(names(cache), Vec::<String>::new());
    }

    #[test]
    fn a_hold_is_only_on_the_snapshot_its_key_names() {
        let dir = tempfile::tempdir().unwrap();
        let cache = dir.path();
        let text = key("q2", "probe-a");
        made(cache, "aaaaaaaaaaaaaaaa", &text, 3600);
        let d = cache.join("aaaaaaaaaaaaaaaa");
        assert!(hold_if_found(&d, &key("q2", "probe-b")).is_none());
        assert!(hold_if_found(&cache.join("none"), &text).is_none());
        let before = std::fs::metadata(d.join("key.txt"))
            .unwrap()
            .modified()
            .unwrap();
        let h = hold_if_found(&d, &text).expect("found");
        let after = std::fs::metadata(d.join("key.txt"))
            .unwrap()
            .modified()
            .unwrap();
        assert!(after > before, "its use is marked");
        // Two runs hold it at once (shared).
        let h2 = hold_if_found(&d, &text).expect("found again");
        drop((h, h2));
        std::fs::remove_file(d.join("state")).unwrap();
        assert!(hold_if_found(&d, &text).is_none(), "no saved machine");
    }
}
