//! Where QEMU and the guest are and the run's budgets: [`QemuConfig`], with the usb-redir QEMU
//! command line it makes ([`QemuConfig::command`]).
//!
//! Configuration only: nothing here starts QEMU, reads its console or runs a guest (that is
//! [`crate::launcher`], [`crate::runloop`] and [`crate::watchdog`], which all read this), and
//! nothing here imports them.

use crate::bridge::BridgeOptions;
use crate::guest::GuestImage;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

/// Where QEMU and the guest are, and the run's budgets.
#[derive(Clone, Debug)]
pub struct QemuConfig {
    /// The QEMU binary.
    pub qemu: PathBuf,
    /// The guest to boot.
    pub guest: GuestImage,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// `-icount shift=N`: one instruction is 2^N ns of guest time.
    pub icount_shift: u8,
    /// `-rtc base=...`.
    pub rtc_base: String,
    /// The watchdog: guest time (the virtual clock, or the instructions executed times
    /// 2^`icount_shift` ns when more) without console output or USB traffic before the run
    /// ends as `emulator_blocked`, once the guest's `/init` has printed. Guest time, not wall
    /// time: a loaded host slows the guest and this clock alike.
    pub no_progress: Duration,
    /// [`QemuConfig::no_progress`] while the guest boots (until `/init` prints its first
    /// marker): SeaBIOS and a quiet kernel run about 205 s of guest time without a line.
    pub boot: Duration,
    /// The watchdog: wall time without a single guest instruction (QEMU stuck) before the run
    /// ends as `emulator_blocked`.
    pub stalled: Duration,
    /// The whole run's wall-time budget (also `emulator_blocked` when it runs out): a last
    /// resort, generous because a loaded host slows a guest down.
    pub budget: Duration,
    /// Extra kernel command-line words.
    pub extra_append: String,
    /// How the device is presented. With `defer_connect` (the default here) the device is
    /// plugged in when the guest prints `CALAMETRA-INIT`.
    pub bridge: BridgeOptions,
    /// Wall time the socket must be quiet before an idle tick moves the model's clock.
    pub idle_after: Duration,
}

impl QemuConfig {
    /// Defaults for `guest`: `qemu-system-x86_64` from `PATH`, 512 MiB, shift 5, the fixed RTC,
    /// a watchdog of 60 s of guest time without progress (600 s while booting) or 30 s of wall
    /// time without an instruction, and a 600 s wall budget.
    pub fn new(guest: GuestImage) -> QemuConfig {
        QemuConfig {
            qemu: PathBuf::from("qemu-system-x86_64"),
            guest,
            memory_mib: 512,
            icount_shift: 5,
            rtc_base: "2026-01-01T00:00:00".into(),
            // Once /init runs, a minute of the guest's own time without a line or a packet is
            // a guest that waits for nothing (an idle guest's virtual clock runs ~5 s a wall
            // second here: about 12 s of wall time).
            no_progress: Duration::from_secs(60),
            // A boot runs ~205 s of guest time with nothing on the console (SeaBIOS, then a
            // quiet kernel at 2^5 ns an instruction).
            boot: Duration::from_secs(600),
            stalled: Duration::from_secs(30),
            budget: Duration::from_secs(600),
            extra_append: String::new(),
            bridge: BridgeOptions {
                defer_connect: true,
                ..BridgeOptions::default()
            },
            idle_after: Duration::from_millis(20),
        }
    }

    /// The QEMU command for a run whose socket and initrd are `socket` and `initrd`.
    pub fn command(&self, socket: &Path, initrd: &Path, append: &str) -> Command {
        let mut c = Command::new(&self.qemu);
        c.args(["-machine", "q35", "-accel", "tcg"])
            .arg("-icount")
            .arg(format!("shift={},sleep=off,align=off", self.icount_shift))
            .arg("-rtc")
            .arg(format!("base={},clock=vm", self.rtc_base))
            .arg("-m")
            .arg(self.memory_mib.to_string())
            .args(["-smp", "1", "-nographic", "-nodefaults", "-serial", "stdio"])
            .args(["-no-reboot", "-device", "qemu-xhci,id=xhci"])
            .arg("-chardev")
            .arg(format!("socket,id=usbredir0,path={}", socket.display()))
            .args([
                "-device",
                "usb-redir,chardev=usbredir0,id=redir0,bus=xhci.0",
            ])
            .arg("-kernel")
            .arg(&self.guest.kernel)
            .arg("-initrd")
            .arg(initrd)
            .arg("-append")
            .arg(append);
        c
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_command_has_the_deterministic_clock() {
        let g = GuestImage {
            dir: "/g".into(),
            kernel: "/g/vmlinuz".into(),
            initramfs: "/g/initramfs.cpio.gz".into(),
        };
        let c = QemuConfig::new(g).command(Path::new("/s"), Path::new("/i"), "quiet");
        let args: Vec<String> = c
            .get_args()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        let joined = args.join(" ");
        assert!(
            joined.contains("-icount shift=5,sleep=off,align=off"),
            "{joined}"
        );
        assert!(joined.contains("-rtc base=2026-01-01T00:00:00,clock=vm"));
        assert!(joined.contains("-accel tcg"));
        assert!(joined.contains("usb-redir,chardev=usbredir0,id=redir0,bus=xhci.0"));
        assert!(joined.contains("socket,id=usbredir0,path=/s"));
        assert!(joined.contains("-m 512"));
    }
}
