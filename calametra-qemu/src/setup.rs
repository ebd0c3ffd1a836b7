//! Setting up the guest for a crate outside this repository: `calametra guest-setup` writes the
//! scripts this crate carries ([`SOURCES`]: `scripts/install-qemu.sh`, `guest/`,
//! `calametra-qemu/qemu/`, the same files the repository's test command runs) into the user's
//! cache ([`user_cache`]: `$CALAMETRA_CACHE`, else `$XDG_CACHE_HOME/calametra`, else
//! `~/.cache/calametra`), runs them there, and leaves the lockstep QEMU and the guest image
//! under it, where every guest scenario and `calametra qemu` look
//! ([`crate::scenario::runner`]). One cache per user, not per workspace.
//!
//! The pinning is the scripts': the lockstep QEMU is built from Debian's source package checked
//! against the SHA-256 `qemu/build.sh` pins and apt's signed index, and each build is kept
//! under the key of everything it was built from (`--print-key`), so a second setup returns at
//! once and a changed script builds anew beside the old. A build of the same key made
//! elsewhere (this repository's `target/`, a CI cache) can seed the cache ([`Setup::reuse`]):
//! equal keys mean the same pinned inputs.
//!
//! Nothing here runs at test time; this module only writes files and runs the scripts.

use std::path::{Path, PathBuf};
use std::process::Command;

/// The scripts and sources a setup runs, by their path in this repository (embedded in the
/// crate, so a published `calametra-qemu` carries them).
pub const SOURCES: &[(&str, &[u8])] = &[
    (
        "scripts/install-qemu.sh",
        include_bytes!("../setup/install-qemu.sh"),
    ),
    ("guest/build.sh", include_bytes!("../setup/guest/build.sh")),
    ("guest/init.sh", include_bytes!("../setup/guest/init.sh")),
    (
        "guest/build-drm.sh",
        include_bytes!("../setup/guest/build-drm.sh"),
    ),
    (
        "guest/trigger6-drm/Kbuild",
        include_bytes!("../setup/guest/trigger6-drm/Kbuild"),
    ),
    (
        "guest/trigger6-drm/t6probe.c",
        include_bytes!("../setup/guest/trigger6-drm/t6probe.c"),
    ),
    (
        "guest/trigger6-drm/trigger6_drm.c",
        include_bytes!("../setup/guest/trigger6-drm/trigger6_drm.c"),
    ),
    (
        "calametra-qemu/qemu/build.sh",
        include_bytes!("../qemu/build.sh"),
    ),
    (
        "calametra-qemu/qemu/patches/0001-build-no-edk2-blobs-in-the-ds-tarball.patch",
        include_bytes!("../qemu/patches/0001-build-no-edk2-blobs-in-the-ds-tarball.patch"),
    ),
    (
        "calametra-qemu/qemu/patches/0002-hw-usb-usb-calametra-lockstep-device.patch",
        include_bytes!("../qemu/patches/0002-hw-usb-usb-calametra-lockstep-device.patch"),
    ),
    (
        "calametra-qemu/qemu/patches/0003-icount-no-warp-while-a-vm-stop-is-pending.patch",
        include_bytes!("../qemu/patches/0003-icount-no-warp-while-a-vm-stop-is-pending.patch"),
    ),
];

/// The user's Calametra cache: `$CALAMETRA_CACHE`, else `$XDG_CACHE_HOME/calametra`, else
/// `$HOME/.cache/calametra`; `None` when none of them is set.
pub fn user_cache() -> Option<PathBuf> {
    let var = |k: &str| {
        std::env::var_os(k)
            .filter(|v| !v.is_empty())
            .map(PathBuf::from)
    };
    var("CALAMETRA_CACHE")
        .or_else(|| var("XDG_CACHE_HOME").map(|d| d.join("calametra")))
        .or_else(|| var("HOME").map(|d| d.join(".cache/calametra")))
}

/// A setup of the guest in a cache directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Setup {
    /// The cache (`<cache>/guest`, `<cache>/qemu-lockstep`, `<cache>/guest-snapshots`, and the
    /// scripts in `<cache>/src/<hash>`).
    pub cache: PathBuf,
    /// Run `scripts/install-qemu.sh` first (QEMU's firmware, the tools and headers the builds
    /// need, from apt; root when something is missing).
    pub install: bool,
    /// A target directory whose guest and lockstep QEMU of the same keys seed the cache (hard
    /// links, or copies across file systems).
    pub reuse: Option<PathBuf>,
}

/// What a setup left.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SetupDone {
    /// The guest image's directory (`<cache>/guest/<key>`).
    pub guest: PathBuf,
    /// The lockstep QEMU binary.
    pub qemu: PathBuf,
    /// Where the scripts were written.
    pub sources: PathBuf,
}

/// The hex SHA-256 of every embedded source, their paths included: the sources' directory name.
fn sources_hash() -> String {
    use sha2::{Digest, Sha256};
    let mut h = Sha256::new();
    for (path, bytes) in SOURCES {
        h.update(path.as_bytes());
        h.update([0]);
        h.update((bytes.len() as u64).to_le_bytes());
        h.update(bytes);
    }
    h.finalize()[..8]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// Writes [`SOURCES`] under `dir` (scripts executable); `Err` names the file.
pub fn write_sources(dir: &Path) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    for (path, bytes) in SOURCES {
        let to = dir.join(path);
        if let Some(parent) = to.parent() {
            std::fs::create_dir_all(parent).map_err(|e| format!("{}: {e}", parent.display()))?;
        }
        calametra_core::regress::write_atomic(&to, bytes)
            .map_err(|e| format!("{}: {e}", to.display()))?;
        if path.ends_with(".sh") {
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o755))
                .map_err(|e| format!("{}: {e}", to.display()))?;
        }
    }
    Ok(())
}

/// Runs `bash script args..` in `dir`; its last line of standard output. Its standard error
/// goes to ours (the builds say what they do).
fn run_script(dir: &Path, script: &str, args: &[&str]) -> Result<String, String> {
    let out = Command::new("bash")
        .arg(dir.join(script))
        .args(args)
        .current_dir(dir)
        .stderr(std::process::Stdio::inherit())
        .output()
        .map_err(|e| format!("cannot run bash {script}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "{script} {} failed ({}); its messages are above",
            args.join(" "),
            out.status
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .last()
        .unwrap_or("")
        .trim()
        .to_string())
}

/// Links (or copies) every file under `from` to the same place under `to`, which must not
/// exist; a symlink is made again as a symlink.
fn link_tree(from: &Path, to: &Path) -> Result<(), String> {
    let err = |p: &Path, e: std::io::Error| format!("{}: {e}", p.display());
    std::fs::create_dir_all(to).map_err(|e| err(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| err(from, e))? {
        let entry = entry.map_err(|e| err(from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| err(&src, e))?;
        if kind.is_dir() {
            link_tree(&src, &dst)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| err(&src, e))?;
            std::os::unix::fs::symlink(target, &dst).map_err(|e| err(&dst, e))?;
        } else if std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(|e| err(&dst, e))?;
        }
    }
    Ok(())
}

/// Seeds `<cache>/<kind>/<key>` from `<reuse>/<kind>/<key>` when the cache has none and the
/// other has one (whole: `done` is among its files). Copied beside and renamed into place.
fn seed(cache: &Path, reuse: &Path, kind: &str, key: &str, done: &str) -> Result<bool, String> {
    let (from, to) = (reuse.join(kind).join(key), cache.join(kind).join(key));
    if to.exists() || !from.join(done).is_file() {
        return Ok(false);
    }
    let part = cache.join(kind).join(format!(".seed-{key}"));
    let _ = std::fs::remove_dir_all(&part);
    link_tree(&from, &part)?;
    std::fs::rename(&part, &to).map_err(|e| format!("{}: {e}", to.display()))?;
    Ok(true)
}

impl Setup {
    /// Writes the scripts, installs what they need (with `install`), seeds the cache from
    /// `reuse`, and builds the guest and the lockstep QEMU in the cache (each returns at once
    /// when its key is built). `Err` names the step that failed.
    pub fn run(&self) -> Result<SetupDone, String> {
        std::fs::create_dir_all(&self.cache)
            .map_err(|e| format!("{}: {e}", self.cache.display()))?;
        let cache = std::fs::canonicalize(&self.cache)
            .map_err(|e| format!("{}: {e}", self.cache.display()))?;
        let sources = cache.join("src").join(sources_hash());
        if !sources.join(SOURCES[SOURCES.len() - 1].0).is_file() {
            write_sources(&sources)?;
        }
        let target = cache.to_str().ok_or("the cache's path is not UTF-8")?;
        if self.install {
            run_script(&sources, "scripts/install-qemu.sh", &[])?;
        }
        if let Some(reuse) = &self.reuse {
            let key = run_script(&sources, "guest/build.sh", &["--print-key"])?;
            seed(&cache, reuse, "guest", &key, "initramfs.cpio.gz")?;
            let key = run_script(&sources, "calametra-qemu/qemu/build.sh", &["--print-key"])?;
            seed(&cache, reuse, "qemu-lockstep", &key, "qemu-system-x86_64")?;
        }
        let guest = run_script(&sources, "guest/build.sh", &["--target-dir", target])?;
        let qemu = run_script(
            &sources,
            "calametra-qemu/qemu/build.sh",
            &["--target-dir", target],
        )?;
        Ok(SetupDone {
            guest: PathBuf::from(guest),
            qemu: PathBuf::from(qemu),
            sources,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_embedded_sources_are_the_repositorys_files() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        if !repo.join("guest/build.sh").is_file() {
            return; // a packaged crate: no repository around it
        }
        for (path, bytes) in SOURCES {
            let on_disk = std::fs::read(repo.join(path)).unwrap();
            assert!(on_disk == *bytes, "{path} differs from the embedded copy");
        }
        // Every file the guest's key hashes is embedded (build.sh hashes its directory's
        // scripts and driver sources; the QEMU key its patches).
        for dir in ["guest", "guest/trigger6-drm", "calametra-qemu/qemu/patches"] {
            for e in std::fs::read_dir(repo.join(dir)).unwrap() {
                let e = e.unwrap();
                if e.file_type().unwrap().is_file() {
                    let rel = format!("{dir}/{}", e.file_name().to_string_lossy());
                    assert!(
                        SOURCES.iter().any(|(p, _)| *p == rel),
                        "{rel} is not embedded in calametra_qemu::setup::SOURCES"
                    );
                }
            }
        }
    }

    #[test]
    fn sources_are_written_executable_and_seeding_links_a_whole_build() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        write_sources(dir.path()).unwrap();
        let mode = std::fs::metadata(dir.path().join("guest/build.sh"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o111, 0o111);
        let (reuse, cache) = (dir.path().join("reuse"), dir.path().join("cache"));
        std::fs::create_dir_all(reuse.join("guest/k1")).unwrap();
        std::fs::write(reuse.join("guest/k1/initramfs.cpio.gz"), b"x").unwrap();
        std::os::unix::fs::symlink("k1", reuse.join("guest/current")).unwrap();
        std::fs::create_dir_all(cache.join("guest")).unwrap();
        assert_eq!(
            seed(&cache, &reuse, "guest", "k2", "initramfs.cpio.gz"),
            Ok(false)
        );
        assert_eq!(
            seed(&cache, &reuse, "guest", "k1", "initramfs.cpio.gz"),
            Ok(true)
        );
        assert_eq!(
            std::fs::read(cache.join("guest/k1/initramfs.cpio.gz")).unwrap(),
            b"x"
        );
        assert_eq!(
            seed(&cache, &reuse, "guest", "k1", "initramfs.cpio.gz"),
            Ok(false)
        );
    }
}
