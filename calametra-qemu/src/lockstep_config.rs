//! Where the lockstep QEMU and the guest are and how a run starts: [`LockstepConfig`] (the
//! budgets and the server's options beside them), [`Start`] (a snapshot or a cold boot), the
//! QEMU command lines for a run and for saving a snapshot.
//!
//! Configuration only (its items are also [`crate::lockstep`]'s): nothing here starts QEMU or
//! runs a guest. The run ([`crate::lockstep`]) and the snapshot ([`crate::snapshot`]) both
//! read it, so neither may be imported here.

use crate::guest::GuestImage;
use crate::lockstep_server::LockstepOptions;
use crate::qemu_config::QemuConfig;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Where the lockstep QEMU and the guest are, the run's budgets and the server's options.
#[derive(Clone, Debug)]
pub struct LockstepConfig {
    /// The guest, the clock and the budgets; `qemu.qemu` is the lockstep binary (`bridge` and
    /// `idle_after` are the usb-redir path's and unused here).
    pub qemu: QemuConfig,
    /// Firmware directories (`-L`): Debian's seabios and qemu-system-data files.
    pub firmware: Vec<PathBuf>,
    /// How the device is presented.
    pub options: LockstepOptions,
    /// How a run starts: from a saved machine (the default of [`LockstepConfig::find`]) or
    /// by booting.
    pub start: Start,
}

/// How a lockstep run starts.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Start {
    /// Boot SeaBIOS and the kernel with the device plugged in at power-on (13-50 s here).
    ColdBoot,
    /// Restore the machine saved after boot, before the device was plugged in, from this cache
    /// directory (made there on first use; see [`crate::snapshot`]).
    Snapshot {
        /// The cache (`<target>/guest-snapshots`).
        cache: PathBuf,
    },
}

/// The directories of Debian's `seabios` and `qemu-system-data` files that exist here (the
/// lockstep build installs no firmware of its own).
pub fn firmware_dirs() -> Vec<PathBuf> {
    ["/usr/share/seabios", "/usr/share/qemu"]
        .iter()
        .map(PathBuf::from)
        .filter(|p| p.is_dir())
        .collect()
}

/// The lockstep QEMU `calametra-qemu/qemu/build.sh` last built under `target_dir`
/// (`<target_dir>/qemu-lockstep/current/qemu-system-x86_64`), or `CALAMETRA_LOCKSTEP_QEMU`.
pub fn find_qemu(target_dir: &Path) -> Result<PathBuf, String> {
    let p = match std::env::var_os("CALAMETRA_LOCKSTEP_QEMU") {
        Some(p) => PathBuf::from(p),
        None => target_dir.join("qemu-lockstep/current/qemu-system-x86_64"),
    };
    if p.is_file() {
        Ok(p)
    } else {
        Err(format!(
            "{} is missing; build it with calametra-qemu/qemu/build.sh",
            p.display()
        ))
    }
}

impl LockstepConfig {
    /// Defaults for `guest` with the lockstep `qemu` binary: `QemuConfig::new`'s clock and
    /// budgets, Debian's firmware, the default options, a cold boot.
    pub fn new(qemu: PathBuf, guest: GuestImage) -> LockstepConfig {
        let mut q = QemuConfig::new(guest);
        q.qemu = qemu;
        LockstepConfig {
            qemu: q,
            firmware: firmware_dirs(),
            options: LockstepOptions::default(),
            start: Start::ColdBoot,
        }
    }

    /// The lockstep QEMU and the guest built under `target_dir`, starting from snapshots cached
    /// in `<target_dir>/guest-snapshots`.
    pub fn find(target_dir: &Path) -> Result<LockstepConfig, String> {
        let qemu = find_qemu(target_dir)?;
        let guest = GuestImage::find(target_dir)?;
        let mut lock = LockstepConfig::new(qemu, guest);
        lock.start = Start::Snapshot {
            cache: target_dir.join("guest-snapshots"),
        };
        Ok(lock)
    }

    /// The QEMU command of a snapshot start (see [`crate::snapshot`]): the machine of
    /// [`LockstepConfig::command`] without the lockstep device (plugged in after the restore)
    /// and with the `pvpanic` port the guest pauses on.
    pub fn snapshot_command(&self, initrd: &Path, append: &str) -> Command {
        let mut c = self.machine(initrd, append);
        c.args(["-device", "pvpanic", "-action", "panic=pause"]);
        c
    }

    /// The QEMU command for a run whose socket and initrd are `socket` and `initrd`.
    pub fn command(&self, socket: &Path, initrd: &Path, append: &str) -> Command {
        let mut c = self.machine(initrd, append);
        c.arg("-device").arg(format!(
            "usb-calametra,socket={},id=calametra0,bus=xhci.0",
            socket.display()
        ));
        c
    }

    /// The machine: firmware, clock, memory, console, the xHCI controller, the kernel.
    fn machine(&self, initrd: &Path, append: &str) -> Command {
        let q = &self.qemu;
        let mut c = Command::new(&q.qemu);
        for dir in &self.firmware {
            c.arg("-L").arg(dir);
        }
        c.args(["-machine", "q35", "-accel", "tcg"])
            .arg("-icount")
            .arg(format!("shift={},sleep=off,align=off", q.icount_shift))
            .arg("-rtc")
            .arg(format!("base={},clock=vm", q.rtc_base))
            .arg("-m")
            .arg(q.memory_mib.to_string())
            .args(["-smp", "1", "-nographic", "-nodefaults", "-serial", "stdio"])
            .args(["-no-reboot", "-device", "qemu-xhci,id=xhci"])
            .arg("-kernel")
            .arg(&q.guest.kernel)
            .arg("-initrd")
            .arg(initrd)
            .arg("-append")
            .arg(append);
        c
    }
}
