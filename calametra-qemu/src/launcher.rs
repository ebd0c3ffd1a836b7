//! The QEMU launcher: boots the guest under TCG with the instruction-count clock, starts QEMU
//! with its console and stderr read line by line (`start_qemu`), accepts its connection
//! (`accept_qemu`; both in [`crate::qemu_process`], with its configuration in
//! [`crate::qemu_config`]), and runs the usb-redir transport: the [`Bridge`] served through
//! [`crate::runloop`]'s loop (the console, the `emulator_blocked` watchdog), returning a
//! [`GuestRun`] served [`Via::Usbredir`]. The lockstep run ([`crate::lockstep`]) uses the same
//! pieces and returns the same type.
//!
//! This module reads the wall clock, on purpose and only here: the watchdog and the benchmark
//! timings are about the host. Wall-clock facts never enter a deterministic trace record.
//!
//! Why console lines are `deterministic:false`: with `-icount` and a fixed `-rtc` a guest alone
//! prints the same bytes run after run, but usb-redir replies reach the guest at points that
//! depend on host scheduling (the socket is serviced by QEMU's main loop, not by the
//! instruction count), so kernel timestamps and the interleaving of messages vary.

use crate::bridge::Bridge;
use crate::guest::{self, Probe};
use crate::guest_run::{verdict, GuestRun, Via};
pub use crate::guest_run::{Outcome, Timings};
pub use crate::qemu_config::QemuConfig;
use crate::qemu_process::{accept_qemu, io, start_qemu, Started};
pub use crate::qemu_process::{clean_line, QemuError};
use crate::runloop::{run_loop, LoopOptions};
use crate::watchdog::{self, GuestWatch};
use calametra_core::host::DeviceHost;
use calametra_core::usb::Device;
use calametra_core::RunConfig;
use std::os::unix::net::UnixListener;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// The usb-redir run's result: a [`GuestRun`] served [`crate::guest_run::Via::Usbredir`] (the
/// former name, kept for users' code; the bridge's counters are [`GuestRun::stats`]).
pub type QemuRun = GuestRun;

/// A run's private scratch space: a temporary directory only this run can enter (removed when
/// the run ends), the socket QEMU's USB device connects to (listening, non-blocking) and the
/// run's initrd (the guest's initramfs with the probe's files appended).
pub(crate) struct Scratch {
    /// The directory (dropped last).
    pub(crate) dir: tempfile::TempDir,
    /// `<dir>/<transport>.sock`.
    pub(crate) socket: PathBuf,
    /// `<dir>/initrd.img`.
    pub(crate) initrd: PathBuf,
    /// Listening on `socket`.
    pub(crate) listener: UnixListener,
}

impl Scratch {
    /// Scratch space for a `transport` run (`usbredir`, `lockstep`) of `probe` on the guest
    /// whose initramfs is `initramfs`.
    pub(crate) fn new(
        transport: &str,
        initramfs: &Path,
        probe: &Probe,
    ) -> Result<Scratch, QemuError> {
        let dir = tempfile::Builder::new()
            .prefix(&format!("calametra-{transport}-"))
            .tempdir()
            .map_err(io("creating a scratch directory"))?;
        let socket = dir.path().join(format!("{transport}.sock"));
        let initrd = dir.path().join("initrd.img");
        guest::write_initrd(initramfs, probe, &initrd)
            .map_err(io(format!("writing {}", initrd.display())))?;
        let listener =
            UnixListener::bind(&socket).map_err(io(format!("binding {}", socket.display())))?;
        listener
            .set_nonblocking(true)
            .map_err(io("making the socket non-blocking"))?;
        Ok(Scratch {
            dir,
            socket,
            initrd,
            listener,
        })
    }

    /// The directory's path.
    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }
}

/// The guest kernel's command line for `probe` and the device `vid:pid`, with `extra` words.
pub(crate) fn kernel_append(probe: &Probe, vid: u16, pid: u16, extra: &str) -> String {
    format!(
        "console=ttyS0 quiet panic=-1 usbcore.autosuspend=-1 calametra.probe={} calametra.dev={vid:04x}:{pid:04x} {extra}",
        probe.name(),
    )
    .trim()
    .to_string()
}

/// Boots the guest with `device` on its USB bus, runs `probe`, and returns the run and the
/// device host (to read the model's ground truth afterwards). `config` gives the fault plan
/// and choice source of the model's side; its trace is always kept.
pub fn run_with_host<D: Device>(
    device: D,
    config: &RunConfig,
    probe: &Probe,
    qemu: &QemuConfig,
) -> Result<(GuestRun, DeviceHost), QemuError> {
    let start = Instant::now();
    let cfg = RunConfig {
        keep_trace: true,
        ..config.clone()
    };
    let host = DeviceHost::new(device, &cfg);
    let mut bridge = Bridge::new(host, qemu.bridge.clone()).map_err(QemuError::Bridge)?;

    let scratch = Scratch::new("usbredir", &qemu.guest.initramfs, probe)?;
    let (vid, pid) = (bridge.info().vendor_id(), bridge.info().product_id());
    let append = kernel_append(probe, vid, pid, &qemu.extra_append);
    let qmp_path = scratch.path().join("qmp.sock");
    let mut cmd = qemu.command(&scratch.socket, &scratch.initrd, &append);
    cmd.arg("-qmp").arg(watchdog::qmp_arg(&qmp_path));
    let mut q = start_qemu(cmd, &qemu.qemu)?;
    let qmp = watchdog::open_qmp(&qmp_path, &mut q);
    let command = q.command.clone();
    bridge.host_mut().record("emulator", "qemu", false, |r| {
        r.str("event", "start").str("command", &command);
    });

    // QEMU connects to us while it starts.
    let stream = accept_qemu(&scratch.listener, &mut q, start, "usbredir")?;
    let Started {
        console_rx,
        stderr_rx,
        mut guard,
        ..
    } = q;
    let watch = GuestWatch::new(qemu, qmp, start);
    bridge.start();
    let end = run_loop(
        &mut bridge,
        stream,
        &mut guard,
        console_rx,
        watch,
        start,
        &LoopOptions {
            read_timeout: Duration::from_millis(2),
            idle_after: Some(qemu.idle_after),
            power_off_grace: Some(Duration::from_secs(20)),
            exit_drain: Duration::from_millis(500),
        },
    );
    let stderr: Vec<String> = stderr_rx.iter().flat_map(|r| r.try_iter()).collect();
    drop(scratch);

    let host = bridge.host();
    let trace: Vec<String> = host.lines().to_vec();
    let (outcome, failure) = verdict(end.outcome, None, &trace, &end.console);
    let (hash, records) = host.hash();
    let run = GuestRun {
        outcome,
        failure,
        console: end.console,
        console_at: end.console_at,
        events: host.events(),
        trace,
        hash,
        records,
        via: Via::Usbredir(bridge.stats().clone()),
        timings: Timings {
            total: start.elapsed(),
            ..end.timings
        },
        exit: end.exit,
        qemu_stderr: stderr.join("\n"),
        command,
    };
    Ok((run, bridge.into_host()))
}

/// Boots the guest with `device`, runs `probe` and returns what happened.
pub fn run<D: Device>(
    device: D,
    config: &RunConfig,
    probe: &Probe,
    qemu: &QemuConfig,
) -> Result<GuestRun, QemuError> {
    run_with_host(device, config, probe, qemu).map(|(r, _)| r)
}
