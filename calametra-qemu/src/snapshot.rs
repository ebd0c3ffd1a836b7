//! Snapshot starts: a lockstep guest run restores a machine saved once after boot instead of
//! booting SeaBIOS and the kernel every time.
//!
//! The saved machine holds no device: it is booted without `usb-calametra`, with the run's
//! initrd and kernel command line plus `calametra.snapshot=pvpanic`. The guest's `/init` loads
//! the USB modules and writes to the `pvpanic` port; QEMU (`-action panic=pause`) stops on that
//! write, which is the same guest instruction on every boot (the clock is the instruction
//! count), and the host saves the machine to a file (`migrate` to `file:`). A run starts QEMU
//! with the same machine and `-incoming file:...`, plugs the lockstep device in while the
//! machine is still stopped (`device_add`: the model answers its hello), and lets it go on
//! (`cont`): the guest sees the device arrive, enumerates it and runs the probe. Nothing in the
//! saved machine depends on the model, and everything after the restore is as repeatable as a
//! cold boot, so a run restored from a fresh snapshot and one from a reused snapshot hash the
//! same.
//!
//! A snapshot is cached under the lockstep config's snapshot directory
//! (`<target>/guest-snapshots/<key>/`), keyed by the QEMU binary, the firmware it loads, the
//! kernel, the run's initrd (the guest image and the probe) and every QEMU argument (memory,
//! clock, kernel command line): any change makes a new one. It is written into a private
//! temporary directory beside the cache and renamed into place, so a reader never sees half
//! of one and two runs making the same one at once both succeed. A run holds its snapshot's
//! directory (a shared `flock`) while QEMU reads it, and a run that made a new one prunes the
//! stale ones ([`cache`]: another build's, or beyond the [`cache::KEEP`] most recently used).
//! This module reads the wall clock only for its deadlines; nothing it decides enters a
//! deterministic trace record.

use crate::guest::marker;
use crate::guest_run::console_tail;
use crate::lockstep_config::LockstepConfig;
use crate::lockstep_frame::FrameReader;
use crate::lockstep_server::{Served, Server};
use crate::qemu_process::{accept_qemu, io, start_qemu, QemuError, Started};
use crate::qmp::Qmp;
use serde_json::json;
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::io::{ErrorKind, Read, Write};
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub mod cache;
use std::time::{Duration, Instant, SystemTime};

/// What the key's first line says (bump it when what a snapshot holds changes).
const FORMAT: &str = "calametra guest snapshot 1";

/// The kernel command-line word that makes `/init` pause for the snapshot.
pub const APPEND: &str = "calametra.snapshot=pvpanic";

/// Firmware files QEMU loads for this machine (hashed into the key when found).
const FIRMWARE: [&str; 2] = ["bios-256k.bin", "linuxboot_dma.bin"];

/// A saved machine, ready to restore.
#[derive(Clone, Debug)]
pub struct Snapshot {
    /// Its key: the SHA-256 of everything it depends on (hex).
    pub key: String,
    /// Its directory (`<cache>/<first 16 hex digits of the key>`).
    pub dir: PathBuf,
    /// The migration stream QEMU saved.
    pub state: PathBuf,
    /// Whether this run made it (a boot) or found it made.
    pub fresh: bool,
    /// Wall time making it took (zero when reused).
    pub made_in: Duration,
    /// Stale snapshots this run removed from the cache after making this one.
    pub pruned: Vec<PathBuf>,
    /// The shared hold on its directory (no prune removes it while a copy of this lives).
    #[allow(dead_code)]
    hold: Option<Arc<cache::Hold>>,
}

/// The SHA-256 of a file's bytes (hex), remembered per path, length and modification time
/// for the life of the process (the QEMU binary is 70 MB and every run needs its hash).
pub fn file_sha256(path: &Path) -> Result<String, QemuError> {
    static SEEN: Mutex<BTreeMap<(PathBuf, u64, SystemTime), String>> = Mutex::new(BTreeMap::new());
    let meta = std::fs::metadata(path).map_err(io(format!("reading {}", path.display())))?;
    let id = (
        path.to_path_buf(),
        meta.len(),
        meta.modified().unwrap_or(SystemTime::UNIX_EPOCH),
    );
    if let Some(h) = SEEN.lock().unwrap_or_else(|e| e.into_inner()).get(&id) {
        return Ok(h.clone());
    }
    let mut f = std::fs::File::open(path).map_err(io(format!("reading {}", path.display())))?;
    let mut h = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = f
            .read(&mut buf)
            .map_err(io(format!("reading {}", path.display())))?;
        if n == 0 {
            break;
        }
        h.update(&buf[..n]);
    }
    let hex: String = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    SEEN.lock()
        .unwrap_or_else(|e| e.into_inner())
        .insert(id, hex.clone());
    Ok(hex)
}

/// The QEMU binary, the firmware it loads and the guest's kernel, one line each with its
/// SHA-256: what both a snapshot's key and the build identity hash.
fn build_lines(lock: &LockstepConfig) -> Result<String, QemuError> {
    let mut text = format!("qemu {}\n", file_sha256(&lock.qemu.qemu)?);
    for name in FIRMWARE {
        if let Some(f) = lock
            .firmware
            .iter()
            .map(|d| d.join(name))
            .find(|f| f.is_file())
        {
            text.push_str(&format!("firmware {name} {}\n", file_sha256(&f)?));
        }
    }
    text.push_str(&format!(
        "kernel {}\n",
        file_sha256(&lock.qemu.guest.kernel)?
    ));
    Ok(text)
}

/// The `arg` lines of `cmd`: every argument, the kernel's and the initrd's paths replaced by
/// `<kernel>` and `<initrd>`.
fn arg_lines(lock: &LockstepConfig, cmd: &std::process::Command, initrd: &Path) -> String {
    let mut text = String::new();
    for a in cmd.get_args() {
        let a = if a == lock.qemu.guest.kernel.as_os_str() {
            "<kernel>".into()
        } else if a == initrd.as_os_str() {
            "<initrd>".into()
        } else {
            a.to_string_lossy().into_owned()
        };
        text.push_str(&format!("arg {a}\n"));
    }
    text
}

/// What a snapshot of `lock`'s machine with `initrd` and `append` depends on, one fact a
/// line: the format, the QEMU binary, the firmware, the kernel, the initrd and every argument
/// (paths of the kernel and the initrd replaced by their hashes' names).
pub fn key_text(lock: &LockstepConfig, initrd: &Path, append: &str) -> Result<String, QemuError> {
    let mut text = format!("{FORMAT}\n");
    text.push_str(&build_lines(lock)?);
    text.push_str(&format!(
        "initrd {}\n",
        sha256_of(&std::fs::read(initrd).map_err(io(format!("reading {}", initrd.display())),)?)
    ));
    text.push_str(&arg_lines(
        lock,
        &lock.snapshot_command(initrd, append),
        initrd,
    ));
    Ok(text)
}

/// What a guest scenario's runs depend on besides its code, one fact a line: the QEMU
/// binary, its firmware, the kernel, the guest's initramfs (`guest/build.sh`'s, before a run's
/// probe files are appended), how a run starts (a snapshot or a cold boot: their runs hash
/// differently) and the machine's arguments (the kernel command line left out: it names the
/// probe and the device, which the scenario decides). The text [`build_id`] hashes.
pub fn build_text(lock: &LockstepConfig) -> Result<String, QemuError> {
    let mut text = String::from("calametra guest build 1\n");
    text.push_str(&build_lines(lock)?);
    text.push_str(&format!(
        "initramfs {}\n",
        file_sha256(&lock.qemu.guest.initramfs)?
    ));
    text.push_str(match lock.start {
        crate::lockstep_config::Start::ColdBoot => "start cold-boot\n",
        crate::lockstep_config::Start::Snapshot { .. } => "start snapshot\n",
    });
    let initrd = Path::new("<initrd>");
    let cmd = lock.snapshot_command(initrd, "<append>");
    text.push_str(&arg_lines(lock, &cmd, initrd));
    Ok(text)
}

/// The identity of `lock`'s QEMU build and guest image: `sha256:` and the SHA-256 of
/// [`build_text`]. A guest scenario's saved case records it (`guest_build`) and replays only
/// with the same.
pub fn build_id(lock: &LockstepConfig) -> Result<String, QemuError> {
    Ok(format!(
        "sha256:{}",
        sha256_of(build_text(lock)?.as_bytes())
    ))
}

fn sha256_of(bytes: &[u8]) -> String {
    calametra_core::trace::sha256_hex(bytes)
}

/// The snapshot of `lock`'s machine with `initrd` and `append` (the run's kernel command line,
/// without [`APPEND`]): found in `cache`, or made now (one boot).
pub fn ensure(
    lock: &LockstepConfig,
    cache: &Path,
    initrd: &Path,
    append: &str,
) -> Result<Snapshot, QemuError> {
    let append = format!("{append} {APPEND}");
    let text = key_text(lock, initrd, &append)?;
    let key = sha256_of(text.as_bytes());
    let dir = cache.join(&key[..16]);
    let state = dir.join("state");
    if let Some(hold) = cache::hold_if_found(&dir, &text) {
        return Ok(Snapshot {
            key,
            dir,
            state,
            fresh: false,
            made_in: Duration::ZERO,
            pruned: Vec::new(),
            hold: Some(Arc::new(hold)),
        });
    }
    let started = Instant::now();
    make(lock, cache, &dir, &text, initrd, &append)?;
    let Some(hold) = cache::hold_if_found(&dir, &text) else {
        return Err(QemuError::Qemu(format!(
            "{} holds a snapshot of another machine (its key.txt differs); remove it",
            dir.display()
        )));
    };
    let made_in = started.elapsed();
    // A new key: the cache may hold snapshots no run will want again.
    let pruned = cache::prune_quietly(cache, &text, &key[..16]);
    Ok(Snapshot {
        key,
        dir,
        state,
        fresh: true,
        made_in,
        pruned,
        hold: Some(Arc::new(hold)),
    })
}

/// Boots the machine without the device, waits for the guest's pause, saves it into a private
/// directory in `cache` and renames that to `dir`.
fn make(
    lock: &LockstepConfig,
    cache: &Path,
    dir: &Path,
    text: &str,
    initrd: &Path,
    append: &str,
) -> Result<(), QemuError> {
    std::fs::create_dir_all(cache).map_err(io(format!("creating {}", cache.display())))?;
    let work = tempfile::Builder::new()
        .prefix(".making-")
        .tempdir_in(cache)
        .map_err(io(format!("creating a directory in {}", cache.display())))?;
    // Held until the rename: a prune never takes a directory a maker works in.
    let _making = cache::hold_making(work.path())?;
    let sockets = tempfile::Builder::new()
        .prefix("calametra-snapshot-")
        .tempdir()
        .map_err(io("creating a scratch directory"))?;
    let qmp_path = sockets.path().join("qmp.sock");
    let mut cmd = lock.snapshot_command(initrd, append);
    cmd.arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", qmp_path.display()));
    let mut q = start_qemu(cmd, &lock.qemu.qemu)?;
    let deadline = Instant::now() + lock.qemu.budget;
    let result = save(&mut q, &qmp_path, &work.path().join("state"), deadline);
    if let Err(e) = result {
        q.guard.kill();
        let console: Vec<String> = q.console_rx.iter().flat_map(|r| r.try_iter()).collect();
        let stderr: Vec<String> = q.stderr_rx.iter().flat_map(|r| r.try_iter()).collect();
        let mut s = format!("making the guest snapshot ({}): {e}\n", q.command);
        console_tail(&mut s, &console, &stderr.join("\n"));
        return Err(QemuError::Qemu(s));
    }
    q.guard.kill();
    std::fs::write(work.path().join("key.txt"), text).map_err(io(format!(
        "writing {}",
        work.path().join("key.txt").display()
    )))?;
    let made = work.keep();
    if let Err(e) = std::fs::rename(&made, dir) {
        let _ = std::fs::remove_dir_all(&made);
        // Another run made it meanwhile: theirs is as good.
        if !dir.join("key.txt").is_file() {
            return Err(io(format!(
                "renaming {} to {}",
                made.display(),
                dir.display()
            ))(e));
        }
    }
    Ok(())
}

/// The QMP half of [`make`]: the pause, the save, QEMU's exit.
fn save(q: &mut Started, qmp_path: &Path, state: &Path, deadline: Instant) -> Result<(), String> {
    let (guard, console_rx) = (&mut q.guard, &q.console_rx);
    let mut lines: Vec<String> = Vec::new();
    let mut watch = || -> Result<(), String> {
        if let Some(rx) = console_rx {
            lines.extend(rx.try_iter());
        }
        if lines.iter().any(|l| l.contains(marker::PROBE_BEGIN)) {
            return Err(format!(
                "the guest ran its probe instead of pausing at {}: the guest image predates snapshot starts; rebuild it with guest/build.sh",
                marker::SNAPSHOT
            ));
        }
        match guard.0.as_mut().map(|c| c.try_wait()) {
            Some(Ok(None)) => Ok(()),
            _ => Err("QEMU exited before the guest paused".into()),
        }
    };
    let mut qmp = Qmp::connect(qmp_path, deadline, &mut || watch().is_err())?;
    qmp.wait_event("GUEST_PANICKED", deadline, &mut watch)?;
    // The event leaves before QEMU has stopped the machine: a migration begun in between is
    // a live one whose saved clock depends on when it began. Wait for the stop.
    loop {
        let st = qmp.execute("query-status", json!({}), deadline)?;
        if st.get("running").and_then(serde_json::Value::as_bool) == Some(false) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("the guest paused but QEMU still runs: {st}"));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    qmp.execute(
        "migrate",
        json!({ "uri": format!("file:{}", state.display()) }),
        deadline,
    )?;
    qmp.wait_migration(deadline, "saving the snapshot")?;
    let _ = qmp.execute("quit", json!({}), deadline);
    Ok(())
}

/// Starts QEMU on `snap`, plugs the lockstep device in on `socket` (the model answers its hello
/// through `server` while QEMU waits) and lets the machine go on. `stopped` tells whether an
/// invariant broke on the hello (the run loop then ends the run on that frame).
pub(crate) struct Restored {
    /// QEMU, its console and stderr.
    pub(crate) started: Started,
    /// The lockstep connection.
    pub(crate) stream: UnixStream,
    /// The QMP connection (the watchdog asks it for the instruction count).
    pub(crate) qmp: Qmp,
    /// An invariant broke on the hello.
    pub(crate) stopped: bool,
}

/// See [`Restored`].
#[allow(clippy::too_many_arguments)]
pub(crate) fn restore(
    lock: &LockstepConfig,
    snap: &Snapshot,
    initrd: &Path,
    append: &str,
    scratch: &Path,
    socket: &Path,
    listener: &UnixListener,
    server: &mut Server,
) -> Result<Restored, QemuError> {
    let start = Instant::now();
    let qmp_path = scratch.join("qmp.sock");
    let append = format!("{append} {APPEND}");
    let mut cmd = lock.snapshot_command(initrd, &append);
    cmd.arg("-qmp")
        .arg(format!("unix:{},server=on,wait=off", qmp_path.display()))
        .arg("-S")
        .arg("-incoming")
        .arg(format!("file:{}", snap.state.display()));
    let mut q = start_qemu(cmd, &lock.qemu.qemu)?;
    let deadline = start + Duration::from_secs(120);
    let fail = |q: &mut Started, e: String| {
        q.guard.kill();
        let stderr: Vec<String> = q.stderr_rx.iter().flat_map(|r| r.try_iter()).collect();
        QemuError::Qemu(format!(
            "restoring the guest snapshot {}: {e}\n{}",
            snap.dir.display(),
            stderr.join("\n")
        ))
    };
    let qmp = {
        let guard = &mut q.guard;
        Qmp::connect(&qmp_path, deadline, &mut || {
            !matches!(guard.0.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
        })
    };
    let mut qmp = match qmp {
        Ok(m) => m,
        Err(e) => return Err(fail(&mut q, e)),
    };
    if let Err(e) = qmp
        .wait_incoming(deadline)
        .and_then(|_| wait_loaded(&mut qmp, deadline))
    {
        return Err(fail(&mut q, e));
    }
    let add = json!({
        "driver": "usb-calametra",
        "socket": socket.display().to_string(),
        "id": "calametra0",
        "bus": "xhci.0",
    });
    if let Err(e) = qmp.send("device_add", add) {
        return Err(fail(&mut q, e));
    }
    let mut stream = accept_qemu(listener, &mut q, start, "lockstep")?;
    let stopped = match serve_first(server, &mut stream, deadline) {
        Ok(s) => s,
        Err(e) => return Err(fail(&mut q, e)),
    };
    if stopped {
        return Ok(Restored {
            started: q,
            stream,
            qmp,
            stopped,
        });
    }
    if let Err(e) = qmp
        .answer("device_add", deadline)
        .and_then(|_| qmp.execute("cont", json!({}), deadline))
    {
        return Err(fail(&mut q, e));
    }

    Ok(Restored {
        started: q,
        stream,
        qmp,
        stopped,
    })
}

/// Waits until QEMU has left `inmigrate`: it reports the incoming migration completed before
/// the bottom half that sets the saved run state has run, and a `cont` in between only marks
/// the machine to start then, which the saved state (`guest-panicked`) overrides: the machine
/// would never run.
fn wait_loaded(qmp: &mut Qmp, deadline: Instant) -> Result<(), String> {
    loop {
        let st = qmp.execute("query-status", json!({}), deadline)?;
        match st.get("status").and_then(serde_json::Value::as_str) {
            Some("inmigrate") | None => {}
            Some(_) => return Ok(()),
        }
        if Instant::now() > deadline {
            return Err(format!("the snapshot loaded but QEMU stays in {st}"));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// Reads and serves the first request (the hello `device_add` waits on). `Ok(true)` when an
/// invariant broke on it.
fn serve_first(
    server: &mut Server,
    stream: &mut UnixStream,
    deadline: Instant,
) -> Result<bool, String> {
    stream
        .set_read_timeout(Some(Duration::from_millis(20)))
        .map_err(|e| format!("lockstep socket: {e}"))?;
    let mut reader = FrameReader::new();
    let mut buf = [0u8; 4096];
    loop {
        if let Some(r) = reader.next_request() {
            let req = r.map_err(|e| format!("the lockstep stream from QEMU is lost: {e}"))?;
            return match server.serve(&req) {
                Ok(Served::Reply(bytes)) => stream
                    .write_all(&bytes)
                    .map(|_| false)
                    .map_err(|e| format!("answering the hello: {e}")),
                Ok(Served::Stop) => Ok(true),
                Err(e) => Err(format!("the lockstep stream from QEMU is lost: {e}")),
            };
        }
        match stream.read(&mut buf) {
            Ok(0) => return Err("QEMU closed the lockstep socket before its hello".into()),
            Ok(n) => reader.push(&buf[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                if Instant::now() > deadline {
                    return Err("no hello from the lockstep device in time".into());
                }
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("lockstep socket: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::GuestImage;

    fn fake(dir: &Path) -> (LockstepConfig, PathBuf) {
        for (name, bytes) in [
            ("qemu", &b"qemu 1"[..]),
            ("vmlinuz", b"kernel"),
            ("initramfs.cpio.gz", b"base"),
            ("initrd.img", b"base+probe"),
        ] {
            std::fs::write(dir.join(name), bytes).unwrap();
        }
        let guest = GuestImage::at(dir).unwrap();
        let mut lock = LockstepConfig::new(dir.join("qemu"), guest);
        lock.firmware = vec![dir.to_path_buf()];
        (lock, dir.join("initrd.img"))
    }

    /// Issue 18: the build a guest case records follows the QEMU binary, the kernel, the
    /// guest's initramfs, the machine's options and the start, and not a run's probe files.
    #[test]
    fn the_build_id_follows_qemu_the_guest_image_and_the_machine() {
        let dir = tempfile::tempdir().unwrap();
        let (lock, initrd) = fake(dir.path());
        let id = build_id(&lock).unwrap();
        assert!(id.starts_with("sha256:") && id.len() == 7 + 64, "{id}");
        assert_eq!(id, build_id(&lock).unwrap());
        let text = build_text(&lock).unwrap();
        assert!(
            text.contains("\ninitramfs ") && text.contains("start cold-boot\n"),
            "{text}"
        );
        // A run's probe files do not change it.
        std::fs::write(&initrd, b"base+another probe").unwrap();
        assert_eq!(id, build_id(&lock).unwrap());
        let mut snap = lock.clone();
        snap.start = crate::lockstep_config::Start::Snapshot {
            cache: dir.path().join("cache"),
        };
        assert_ne!(id, build_id(&snap).unwrap());
        let mut more = lock.clone();
        more.qemu.memory_mib = 1024;
        assert_ne!(id, build_id(&more).unwrap());
        std::fs::write(dir.path().join("initramfs.cpio.gz"), b"rebuilt base").unwrap();
        let rebuilt_guest = build_id(&lock).unwrap();
        assert_ne!(id, rebuilt_guest);
        std::fs::write(dir.path().join("vmlinuz"), b"another kernel").unwrap();
        let other_kernel = build_id(&lock).unwrap();
        assert_ne!(rebuilt_guest, other_kernel);
        std::fs::write(dir.path().join("qemu"), b"qemu 2 rebuilt").unwrap();
        assert_ne!(other_kernel, build_id(&lock).unwrap());
        std::fs::remove_file(dir.path().join("qemu")).unwrap();
        assert!(
            build_id(&lock).is_err(),
            "a missing binary is an error, not an identity"
        );
    }

    #[test]
    fn the_key_follows_the_binary_the_kernel_the_initrd_and_every_option() {
        let dir = tempfile::tempdir().unwrap();
        let (lock, initrd) = fake(dir.path());
        let base = key_text(&lock, &initrd, "quiet").unwrap();
        assert_eq!(base, key_text(&lock, &initrd, "quiet").unwrap());
        assert!(base.starts_with(FORMAT));
        assert!(base.contains("arg <kernel>\n") && base.contains("arg <initrd>\n"));
        assert_ne!(base, key_text(&lock, &initrd, "quiet loglevel=7").unwrap());
        let mut more = lock.clone();
        more.qemu.memory_mib = 1024;
        assert_ne!(base, key_text(&more, &initrd, "quiet").unwrap());
        // A rebuilt binary (another length: the per-process memo is keyed by it too).
        std::fs::write(dir.path().join("qemu"), b"qemu 2 rebuilt").unwrap();
        assert_ne!(base, key_text(&lock, &initrd, "quiet").unwrap());
        std::fs::write(&initrd, b"base+other probe").unwrap();
        let other = key_text(&lock, &initrd, "quiet").unwrap();
        std::fs::write(dir.path().join("bios-256k.bin"), b"seabios").unwrap();
        let with_bios = key_text(&lock, &initrd, "quiet").unwrap();
        assert_ne!(other, with_bios);
        assert!(with_bios.contains("firmware bios-256k.bin "));
    }

    #[test]
    fn a_missing_binary_is_an_error_naming_it() {
        let dir = tempfile::tempdir().unwrap();
        let (mut lock, initrd) = fake(dir.path());
        lock.qemu.qemu = dir.path().join("no-such-qemu");
        let e = key_text(&lock, &initrd, "quiet").unwrap_err().to_string();
        assert!(e.contains("no-such-qemu"), "{e}");
    }
}
