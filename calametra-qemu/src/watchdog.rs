//! The `emulator_blocked` watchdog, judged by the guest: whether a guest run still makes
//! progress, for both transports.
//!
//! Progress is what the guest does (a console line, a USB packet); time is the guest's own
//! clock, read over QMP: its virtual clock (the machine's `rtc-time` under `-rtc clock=vm`,
//! which includes the idle time `sleep=off` skips) and its instruction count (`query-replay`'s
//! `icount`, times 2^shift ns), whichever moved further. Both advance only as the guest runs:
//! a host busy with other work runs the guest slower and these clocks with it, so a slow guest
//! is never taken for a stuck one, and a guest that idles or spins without progress is ended
//! after `no_progress` of its own time, however fast or slow the host. The run gives no
//! verdict when:
//! - the guest's clock advanced `no_progress` without a console line or a USB packet (`boot`
//!   instead until the guest's `/init` printed its first marker: SeaBIOS and a quiet kernel
//!   run about 205 s of guest time without a line);
//! - the guest executed no instruction at all for `stalled` of wall time (QEMU is stuck);
//! - the whole run took longer than `budget` of wall time (generous: a last resort).
//!
//! Sans-I/O: the caller passes the wall clock (`Instant`) and the readings in; nothing here
//! enters a deterministic trace record.

use crate::guest::marker;
use crate::qemu_config::QemuConfig;
use crate::qemu_process::Started;
use crate::qmp::Qmp;
use std::path::Path;
use std::time::{Duration, Instant};

/// Guest time without progress a run is given after its kernel reported a fault (an oops, a
/// hung task): the report's last lines and whatever the probe still prints come in this long,
/// and the run ends as a `kernel_fault` (never `emulator_blocked`) instead of waiting out
/// `no_progress`.
pub const KERNEL_FAULT_GRACE: Duration = Duration::from_secs(5);

/// How often a run asks QEMU for the instruction count.
const POLL: Duration = Duration::from_millis(250);

/// A run's watchdog with its QMP connection (the one the run loops of both transports use).
pub(crate) struct GuestWatch {
    dog: Watchdog,
    qmp: Option<Qmp>,
    polled: Instant,
}

impl GuestWatch {
    /// The budgets of `qemu`, the instruction count read over `qmp` (none: wall time only).
    pub(crate) fn new(qemu: &QemuConfig, qmp: Option<Qmp>, start: Instant) -> GuestWatch {
        GuestWatch {
            dog: Watchdog::new(
                qemu.icount_shift,
                qemu.no_progress,
                qemu.stalled,
                qemu.budget,
                start,
            )
            .with_boot(qemu.boot),
            qmp,
            polled: start,
        }
    }

    /// The guest moved a packet.
    pub(crate) fn progress(&mut self) {
        self.dog.progress(Instant::now());
    }

    /// The guest printed `line` (progress; `/init`'s first marker ends the boot; a kernel
    /// fault's report, [`crate::kernel_log::classify`], leaves the guest
    /// [`KERNEL_FAULT_GRACE`] to finish by itself).
    pub(crate) fn line(&mut self, line: &str) {
        if line.contains(marker::INIT) || line.contains(marker::RESTORED) {
            self.dog.booted();
        }
        if crate::kernel_log::classify(line).is_some() {
            self.dog.kernel_fault();
        }
        self.dog.progress(Instant::now());
    }

    /// Reads the instruction count when due, then: why the run ends without a verdict, if it
    /// does now.
    pub(crate) fn check(&mut self) -> Option<String> {
        let now = Instant::now();
        if now.saturating_duration_since(self.polled) >= POLL {
            self.polled = now;
            if let Some(q) = &mut self.qmp {
                match q.poll_clock() {
                    Ok(Some(r)) => {
                        self.dog.icount(r.icount, now);
                        if let Some(s) = r.rtc_s {
                            self.dog.virtual_clock(s);
                        }
                    }
                    Ok(None) => {}
                    // QEMU is going away (or speaks no QMP): wall time decides from here.
                    Err(_) => self.qmp = None,
                }
            }
        }
        self.dog.verdict(now)
    }
}

/// Opens the QMP socket of the QEMU `q` just started (`-qmp unix:<path>,server=on,wait=off`),
/// without waiting for its greeting; `None` when it does not open (wall time decides then).
pub(crate) fn open_qmp(path: &Path, q: &mut Started) -> Option<Qmp> {
    let guard = &mut q.guard;
    Qmp::open(path, Instant::now() + Duration::from_secs(30), &mut || {
        !matches!(guard.0.as_mut().map(|c| c.try_wait()), Some(Ok(None)))
    })
    .ok()
}

/// The `-qmp` argument for a socket at `path`.
pub(crate) fn qmp_arg(path: &Path) -> String {
    format!("unix:{},server=on,wait=off", path.display())
}

/// The watchdog of one run.
#[derive(Debug)]
pub struct Watchdog {
    shift: u8,
    no_progress: Duration,
    stalled: Duration,
    budget: Duration,
    start: Instant,
    /// The last instruction count read, and when it last changed.
    icount: Option<(u64, Instant)>,
    /// The instruction count at the last progress (`None` until both were seen).
    at_progress: Option<u64>,
    /// Wall time of the last progress (the measure when no instruction count can be read).
    progressed: Instant,
    /// The guest's virtual clock in seconds, last read, and at the last progress.
    vclock: Option<u64>,
    vclock_at_progress: Option<u64>,
    /// The guest-time budget until [`Watchdog::booted`] (the boot prints nothing for long).
    boot: Duration,
    booted: bool,
}

impl Watchdog {
    /// A watchdog from `now` for a guest under `-icount shift=<shift>`.
    pub fn new(
        shift: u8,
        no_progress: Duration,
        stalled: Duration,
        budget: Duration,
        now: Instant,
    ) -> Watchdog {
        Watchdog {
            shift,
            no_progress,
            stalled,
            budget,
            start: now,
            icount: None,
            at_progress: None,
            progressed: now,
            vclock: None,
            vclock_at_progress: None,
            boot: no_progress,
            booted: false,
        }
    }

    /// The guest-time budget without progress until the boot is over (by default
    /// `no_progress`).
    pub fn with_boot(mut self, boot: Duration) -> Watchdog {
        self.boot = boot;
        self
    }

    /// The boot is over (the guest's `/init` printed): `no_progress` applies from now.
    pub fn booted(&mut self) {
        self.booted = true;
    }

    /// The guest's kernel reported a fault: from now, [`KERNEL_FAULT_GRACE`] of guest time
    /// without progress ends the run (the verdict names the fault).
    pub fn kernel_fault(&mut self) {
        self.no_progress = self.no_progress.min(KERNEL_FAULT_GRACE);
        self.booted = true;
    }

    /// The guest's virtual clock, in seconds (its `rtc-time`).
    pub fn virtual_clock(&mut self, s: u64) {
        self.vclock = Some(s);
        match self.vclock_at_progress {
            // A guest that set its clock back: measure from there.
            Some(p) if p <= s => {}
            _ => self.vclock_at_progress = Some(s),
        }
    }

    /// The guest printed a line or moved a packet.
    pub fn progress(&mut self, now: Instant) {
        self.progressed = now;
        self.at_progress = self.icount.map(|(n, _)| n);
        self.vclock_at_progress = self.vclock;
    }

    /// The guest's instruction count, read at `now`.
    pub fn icount(&mut self, n: u64, now: Instant) {
        match self.icount {
            Some((m, _)) if m == n => {}
            _ => self.icount = Some((n, now)),
        }
        if self.at_progress.is_none() {
            self.at_progress = Some(n);
        }
    }

    /// Guest time since the last progress, when known: the virtual clock's advance or the
    /// instructions run (times 2^shift ns), whichever is more.
    pub fn guest_since_progress(&self) -> Option<Duration> {
        let (n, _) = self.icount?;
        let from = self.at_progress?;
        let ns = n
            .saturating_sub(from)
            .saturating_mul(1u64 << self.shift.min(20));
        let by_instructions = Duration::from_nanos(ns);
        let by_clock = match (self.vclock, self.vclock_at_progress) {
            (Some(v), Some(p)) => Duration::from_secs(v.saturating_sub(p)),
            _ => Duration::ZERO,
        };
        Some(by_instructions.max(by_clock))
    }

    /// The guest-time budget without progress now.
    fn limit(&self) -> Duration {
        if self.booted {
            self.no_progress
        } else {
            self.boot
        }
    }

    /// Why the run ends without a verdict, if it does at `now`.
    pub fn verdict(&self, now: Instant) -> Option<String> {
        if now.saturating_duration_since(self.start) > self.budget {
            return Some(format!(
                "the run's wall budget of {:?} ran out",
                self.budget
            ));
        }
        match self.icount {
            Some((n, changed)) => {
                if now.saturating_duration_since(changed) > self.stalled {
                    return Some(format!(
                        "the guest executed no instruction for {:?} of wall time (instruction count {n})",
                        self.stalled
                    ));
                }
                let idle = self.guest_since_progress()?;
                let limit = self.limit();
                (idle > limit).then(|| {
                    format!(
                        "no console output and no USB traffic while the guest's clock advanced {:.1} s (budget {:?} of guest time{})",
                        idle.as_secs_f64(),
                        limit,
                        if self.booted { "" } else { ", booting" }
                    )
                })
            }
            // No instruction count (QMP unanswered): wall time since the last progress.
            None => (now.saturating_duration_since(self.progressed) > self.stalled).then(|| {
                format!(
                    "no console output, no USB traffic and no instruction count for {:?} of wall time",
                    self.stalled
                )
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const S: Duration = Duration::from_secs(1);

    fn dog(t0: Instant) -> Watchdog {
        // shift 5: 32 ns an instruction; 10 s of guest time is 312,500,000 instructions.
        Watchdog::new(5, S * 10, S * 30, S * 600, t0)
    }

    #[test]
    fn a_slow_guest_is_not_blocked_however_long_the_wall_clock_runs() {
        let t0 = Instant::now();
        let mut w = dog(t0);
        // A loaded host: 100 s of wall time, the guest crawls (1 s of guest time) and prints.
        let mut n = 0u64;
        for s in 1..=100u32 {
            n += 312_500; // 10 ms of guest time a wall second
            w.icount(n, t0 + S * s);
            if s % 50 == 0 {
                w.progress(t0 + S * s);
            }
            assert_eq!(w.verdict(t0 + S * s), None, "at {s} s");
        }
    }

    #[test]
    fn a_guest_that_runs_without_progress_is_blocked_by_guest_time() {
        let t0 = Instant::now();
        let mut w = dog(t0);
        w.icount(1_000, t0);
        w.progress(t0);
        w.icount(1_000 + 312_500_000, t0 + S * 5);
        assert_eq!(w.verdict(t0 + S * 5), None, "exactly 10 s of guest time");
        w.icount(1_000 + 312_500_001, t0 + S * 6);
        let v = w.verdict(t0 + S * 6).expect("blocked");
        assert!(v.contains("no console output"), "{v}");
        // Progress resets the measure.
        w.progress(t0 + S * 6);
        assert_eq!(w.verdict(t0 + S * 6), None);
    }

    #[test]
    fn a_guest_whose_instruction_count_stops_is_blocked_after_the_stall_time() {
        let t0 = Instant::now();
        let mut w = dog(t0);
        w.icount(7, t0 + S);
        w.icount(7, t0 + S * 20);
        assert_eq!(w.verdict(t0 + S * 31), None, "30 s since it last moved");
        let v = w.verdict(t0 + S * 32).expect("blocked");
        assert!(v.contains("no instruction"), "{v}");
    }

    #[test]
    fn the_wall_budget_is_a_last_resort_and_no_reading_falls_back_to_wall_time() {
        let t0 = Instant::now();
        let mut w = dog(t0);
        for s in 1..=601u32 {
            w.icount(u64::from(s) * 1_000_000, t0 + S * s);
            w.progress(t0 + S * s);
        }
        assert!(w.verdict(t0 + S * 601).unwrap().contains("budget"));
        let w = dog(t0);
        assert_eq!(w.verdict(t0 + S * 30), None);
        assert!(w
            .verdict(t0 + S * 31)
            .unwrap()
            .contains("no instruction count"));
    }

    #[test]
    fn an_idle_guest_is_blocked_by_its_virtual_clock_once_booted_not_while_booting() {
        let t0 = Instant::now();
        // 10 s without progress after boot, 600 s while booting.
        let mut w = dog(t0).with_boot(S * 600);
        w.icount(1_000, t0);
        w.virtual_clock(1_000);
        w.progress(t0);
        // Idle: a few instructions (0.03 s of guest time a wall second) while the virtual
        // clock skips ahead 5 s a wall second.
        let mut blocked_at = None;
        for s in 1..=200u32 {
            w.icount(1_000 + u64::from(s) * 1_000_000, t0 + S * s);
            w.virtual_clock(1_000 + 5 * u64::from(s));
            if let Some(v) = w.verdict(t0 + S * s) {
                assert!(v.contains("booting"), "{v}");
                blocked_at = Some(s);
                break;
            }
        }
        assert_eq!(blocked_at, Some(121), "600 s of guest time while booting");
        // Booted (/init printed): 10 s of its clock.
        let mut w = dog(t0).with_boot(S * 600);
        w.icount(1_000, t0);
        w.virtual_clock(1_000);
        w.booted();
        w.progress(t0);
        w.icount(2_000_000, t0 + S * 2);
        w.virtual_clock(1_010);
        assert_eq!(w.verdict(t0 + S * 2), None, "exactly 10 s of guest time");
        w.virtual_clock(1_011);
        let v = w.verdict(t0 + S * 3).expect("blocked");
        assert!(
            v.contains("advanced 11.0 s") && !v.contains("booting"),
            "{v}"
        );
        // Progress resets it; a clock set back by the guest is measured from there.
        w.progress(t0 + S * 3);
        w.virtual_clock(500);
        w.virtual_clock(509);
        assert_eq!(w.verdict(t0 + S * 4), None);
    }

    #[test]
    fn a_slow_guest_on_a_loaded_host_is_not_blocked_by_either_clock() {
        let t0 = Instant::now();
        let mut w = dog(t0);
        w.booted();
        // The host runs the guest at a twentieth of its speed: both clocks crawl, the guest
        // prints every 5 s of its time (100 s of wall time), until the wall budget.
        let mut n = 0u64;
        for s in 1..=600u32 {
            n += 1_562_500; // 50 ms of guest time a wall second
            w.icount(n, t0 + S * s);
            w.virtual_clock(u64::from(s) / 20);
            if s % 100 == 0 {
                w.progress(t0 + S * s);
            }
            assert_eq!(w.verdict(t0 + S * s), None, "at {s} s");
        }
    }
}
