//! The one result of a guest run, whichever transport served it: [`GuestRun`].
//!
//! Both runs, usb-redir ([`crate::launcher::run_with_host`]) and lockstep
//! ([`crate::lockstep::run_with_extras`]), end in [`crate::runloop`]'s loop and return a
//! [`GuestRun`]: the outcome, the verdict (`verdict`: the invariant that broke, the model gap
//! or the probe's failure), the console, the trace and its hash, the model's events, the
//! timings and QEMU's side. What only one transport has is in [`Via`]: the usbredir bridge's
//! counters, or the frames and guest clock of a lockstep run. How a run ended is its
//! [`Outcome`] (the loop's, then `verdict`'s), with the wall-clock [`Timings`]; the first model
//! gap of a trace (`model_gap`) is read here for the verdict.
//!
//! The result and the verdict only: nothing here starts QEMU, reads a socket or runs the loop,
//! and nothing here imports the launcher, the loop or the lockstep run, which all produce this
//! (of the transports it knows only the bridge's counters, [`crate::bridge::Stats`]).

use crate::bridge::Stats;
use crate::program::ProgramOutput;
use calametra_core::choices::{self, Event};
use calametra_core::clock::Nanos;
use calametra_core::trace::{parse_kept, TraceHash};
use calametra_core::world::ModelGap;
use calametra_core::Failure;
use std::path::Path;
use std::time::Duration;

/// How a guest run ended. `EmulatorBlocked` is neither a pass nor a failure.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The probe ended with `rc=0`.
    Passed,
    /// The probe ended with a non-zero `rc`, or the guest stopped before the probe ended.
    Failed {
        /// The probe's exit code, when it printed one.
        rc: Option<i32>,
        /// What happened.
        reason: String,
    },
    /// The model was asked something it has no evidence for (its own outcome, never a pass).
    ModelGap {
        /// The first `model_gap` trace record: which device was asked what in which state.
        gap: String,
    },
    /// The guest's kernel reported an oops, a `BUG:`, a task hung inside a driver or a panic
    /// ([`crate::kernel_log`]): a failure of its own kind, whatever the probe did after it.
    KernelFault {
        /// `oops`, `bug`, `hung_task` or `panic` ([`crate::kernel_log::KernelFaultKind::name`]).
        kind: &'static str,
        /// The line that reported it.
        line: String,
    },
    /// The guest made no progress (no console output, no USB traffic) within its budget, or
    /// ran past the total budget; QEMU was killed. No verdict.
    EmulatorBlocked {
        /// Which budget ran out and what the guest did last.
        reason: String,
    },
}

impl Outcome {
    /// `passed`, `failed`, `model_gap`, `kernel_fault` or `emulator_blocked`.
    pub fn name(&self) -> &'static str {
        match self {
            Outcome::Passed => "passed",
            Outcome::Failed { .. } => "failed",
            Outcome::ModelGap { .. } => "model_gap",
            Outcome::KernelFault { .. } => "kernel_fault",
            Outcome::EmulatorBlocked { .. } => "emulator_blocked",
        }
    }

    /// Whether this outcome is a verdict (pass or fail) at all.
    pub fn is_verdict(&self) -> bool {
        matches!(
            self,
            Outcome::Passed | Outcome::Failed { .. } | Outcome::KernelFault { .. }
        )
    }
}

impl std::fmt::Display for Outcome {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Outcome::Passed => f.write_str("passed"),
            Outcome::Failed { rc, reason } => match rc {
                Some(rc) => write!(f, "failed (rc={rc}): {reason}"),
                None => write!(f, "failed: {reason}"),
            },
            Outcome::ModelGap { gap } => write!(f, "model gap: {gap}"),
            Outcome::KernelFault { kind, line } => write!(f, "kernel_fault ({kind}): {line}"),
            Outcome::EmulatorBlocked { reason } => write!(f, "emulator_blocked: {reason}"),
        }
    }
}

/// Wall-clock facts of a run, for people and BENCHMARKS.md (never hashed).
#[derive(Clone, Debug, Default)]
pub struct Timings {
    /// From QEMU's start to the guest's `CALAMETRA-ENUMERATED` line.
    pub enumerated: Option<Duration>,
    /// From `CALAMETRA-ENUMERATED` to `CALAMETRA-PROBE-END`.
    pub probe: Option<Duration>,
    /// The whole run.
    pub total: Duration,
    /// Making the guest snapshot this run started from (`None` when it was already made, or
    /// for a cold boot).
    pub snapshot: Option<Duration>,
    /// From starting QEMU on the snapshot to the restored guest running with the device.
    pub restored: Option<Duration>,
}

/// Which transport served a run, with what only it knows.
#[derive(Clone, Debug)]
pub enum Via {
    /// QEMU's `usb-redir` served by the usbredir [`crate::bridge::Bridge`]: its counters.
    Usbredir(Stats),
    /// The lockstep `usb-calametra` device, answered frame by frame.
    Lockstep {
        /// Frames served.
        frames: u64,
        /// The guest clock of the last frame.
        end_clock_ns: Nanos,
    },
}

/// Everything a guest run produced.
#[derive(Clone, Debug)]
pub struct GuestRun {
    /// How it ended.
    pub outcome: Outcome,
    /// The invariant that broke, the model gap or the probe's failure (`None` for a pass and
    /// for `emulator_blocked`, which is no verdict).
    pub failure: Option<Failure>,
    /// The guest's console, line by line (escape sequences and `\r` removed).
    pub console: Vec<String>,
    /// When each console line arrived (wall time since QEMU started; for people, never hashed).
    pub console_at: Vec<Duration>,
    /// The trace (JSON Lines, each ending in `\n`).
    pub trace: Vec<String>,
    /// The trace hash: the deterministic records (the model's transfers and what the
    /// transport derived from them; in lockstep also every frame and the console).
    pub hash: TraceHash,
    /// Deterministic records hashed.
    pub records: u64,
    /// The faults and other choices the model took, and in lockstep the externals fired
    /// (what a regression file keeps).
    pub events: Vec<Event>,
    /// What only the transport that served the run knows.
    pub via: Via,
    /// Wall-clock timings (never hashed).
    pub timings: Timings,
    /// QEMU's exit code (`None` when killed).
    pub exit: Option<i32>,
    /// QEMU's stderr.
    pub qemu_stderr: String,
    /// The QEMU command line.
    pub command: String,
}

impl GuestRun {
    /// A one-screen summary: outcome, timings, hash, the transport's facts, the verdict, the
    /// events, the last console lines.
    pub fn summary(&self) -> String {
        let via = match &self.via {
            Via::Usbredir(stats) => format!("usbredir: {stats:?}"),
            Via::Lockstep {
                frames,
                end_clock_ns,
            } => format!("lockstep: {frames} frames, guest clock {end_clock_ns} ns"),
        };
        let mut s = format!(
            "outcome: {}\ntrace hash: {} ({} records)\nenumerated after: {:?}, probe: {:?}, total: {:.1?}\n{via}\n",
            self.outcome,
            self.hash,
            self.records,
            self.timings.enumerated,
            self.timings.probe,
            self.timings.total
        );
        if let Some(f) = &self.failure {
            s.push_str(&format!("failure: {f}\n"));
        }
        if !self.events.is_empty() {
            s.push_str(&format!("events: {}\n", choices::story(&self.events)));
        }
        if let Some(p) = self.program() {
            s.push_str(&format!("program: exit status {}\n", p.status));
            for (what, lines) in [("stdout", &p.stdout), ("stderr", &p.stderr)] {
                for l in lines {
                    s.push_str(&format!("  {what}| {l}\n"));
                }
            }
        }
        console_tail(&mut s, &self.console, &self.qemu_stderr);
        s
    }

    /// Writes the trace as JSON Lines to `path` (creating its directory), atomically, with the
    /// user's umask (the core's writer: a private temporary file beside it, renamed).
    pub fn write_trace(&self, path: &Path) -> std::io::Result<()> {
        calametra_core::regress::write_atomic(path, self.trace.concat().as_bytes())
            .map_err(|e| std::io::Error::other(e.to_string()))
    }

    /// Console lines between `begin` and the next line starting with `end` (exclusive).
    pub fn console_block(&self, begin: &str, end: &str) -> Vec<String> {
        let Some(i) = self.console.iter().position(|l| l.starts_with(begin)) else {
            return Vec::new();
        };
        self.console[i + 1..]
            .iter()
            .take_while(|l| !l.starts_with(end))
            .cloned()
            .collect()
    }

    /// Wall time between the first console lines starting with `begin` and `end` (a step of
    /// the probe, for benchmarks).
    pub fn wall_between(&self, begin: &str, end: &str) -> Option<Duration> {
        let at = |m: &str| {
            let i = self.console.iter().position(|l| l.starts_with(m))?;
            self.console_at.get(i).copied()
        };
        Some(at(end)?.saturating_sub(at(begin)?))
    }

    /// What the program the guest ran ([`crate::program::Program`]) did: its exit status,
    /// standard output and error; `None` when the run ran none or it did not end.
    pub fn program(&self) -> Option<ProgramOutput> {
        ProgramOutput::of(&self.console)
    }

    /// Frames served, for a lockstep run.
    pub fn frames(&self) -> Option<u64> {
        match self.via {
            Via::Lockstep { frames, .. } => Some(frames),
            Via::Usbredir(_) => None,
        }
    }

    /// The guest clock of the last frame, for a lockstep run.
    pub fn end_clock_ns(&self) -> Option<Nanos> {
        match self.via {
            Via::Lockstep { end_clock_ns, .. } => Some(end_clock_ns),
            Via::Usbredir(_) => None,
        }
    }

    /// The usbredir bridge's counters, for a usb-redir run.
    pub fn stats(&self) -> Option<&Stats> {
        match &self.via {
            Via::Usbredir(stats) => Some(stats),
            Via::Lockstep { .. } => None,
        }
    }
}

/// The first model gap of a trace.
pub(crate) fn model_gap(lines: &[String]) -> Option<ModelGap> {
    let r = parse_kept(lines)
        .into_iter()
        .find(|r| r.kind == "model_gap")?;
    let text = |k: &str| {
        r.data
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or_default()
            .to_string()
    };
    Some(ModelGap {
        device: r.actor.clone(),
        request: text("request"),
        state: text("state"),
    })
}

/// The run's outcome and verdict from how its loop `ended`, the invariant that `broke` (if
/// any), the first model gap of its `trace` and the first kernel fault on its `console`
/// ([`crate::kernel_log::first_fault`]): an invariant, then a kernel fault, then a model gap,
/// then the probe's failure is the failure. A kernel fault is its own outcome
/// (`kernel_fault`, the failure's task [`KERNEL_TASK`], with the kernel's last lines), even
/// when the watchdog ended the run: a task hung inside a driver is reported as such, not as
/// `emulator_blocked`, which stays (no verdict) only when the kernel reported nothing. A model
/// gap is its own outcome and a broken invariant a failed one. A probe that ran a
/// [`crate::program`] fails as `guest program`, with its exit status and the last lines of its
/// output (from the `console`).
pub(crate) fn verdict(
    ended: Outcome,
    broke: Option<&Failure>,
    trace: &[String],
    console: &[String],
) -> (Outcome, Option<Failure>) {
    let blocked = matches!(ended, Outcome::EmulatorBlocked { .. });
    let gap = model_gap(trace);
    let kernel = crate::kernel_log::first_fault(console);
    let failure = match (broke, &kernel, &gap, &ended) {
        (Some(f), _, _, _) if !blocked => Some(f.clone()),
        (_, Some(k), _, _) => Some(Failure::TaskError {
            task: KERNEL_TASK.into(),
            message: k.message(),
        }),
        _ if blocked => None,
        (_, None, Some(g), _) => Some(Failure::ModelGap(g.clone())),
        (_, None, None, Outcome::Failed { reason, .. }) => Some(match ProgramOutput::of(console) {
            Some(p) if p.status != 0 => Failure::TaskError {
                task: "guest program".into(),
                message: p.describe(PROGRAM_LINES),
            },
            _ => Failure::TaskError {
                task: "guest probe".into(),
                message: reason.clone(),
            },
        }),
        _ => None,
    };
    let outcome = match (ended, &failure, &kernel) {
        (_, Some(Failure::TaskError { task, .. }), Some(k)) if task == KERNEL_TASK => {
            Outcome::KernelFault {
                kind: k.kind.name(),
                line: k.line.clone(),
            }
        }
        (o @ Outcome::EmulatorBlocked { .. }, _, _) => o,
        (_, Some(Failure::ModelGap(g)), _) => Outcome::ModelGap {
            gap: format!("{} asked `{}` in state `{}`", g.device, g.request, g.state),
        },
        (_, Some(f @ Failure::Invariant { .. }), _) => Outcome::Failed {
            rc: None,
            reason: f.to_string(),
        },
        (o, _, _) => o,
    };
    (outcome, failure)
}

/// The task a kernel fault's failure names (`task `guest kernel` returned an error: a kernel
/// oops (kernel_fault oops): ...`).
pub const KERNEL_TASK: &str = "guest kernel";

/// Lines of a failed program's stderr and stdout its failure's text shows (the text is the
/// failure's signature, numbers aside; the whole output is in the trace).
pub const PROGRAM_LINES: usize = 5;

/// The last 25 console lines and QEMU's stderr, for a run's summary.
pub(crate) fn console_tail(s: &mut String, console: &[String], qemu_stderr: &str) {
    let from = console.len().saturating_sub(25);
    for l in &console[from..] {
        s.push_str("  | ");
        s.push_str(l);
        s.push('\n');
    }
    if !qemu_stderr.trim().is_empty() {
        s.push_str("qemu stderr:\n");
        s.push_str(qemu_stderr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gap_line() -> String {
        r#"{"seq":2,"t_ns":3,"kind":"model_gap","actor":"dock","deterministic":true,"data":{"request":"vendor 0x40/0x12","state":"streaming"}}"#.to_string() + "\n"
    }

    #[test]
    fn the_verdict_puts_blocked_before_invariants_before_gaps_before_the_probe() {
        let failed = || Outcome::Failed {
            rc: Some(1),
            reason: "the probe exited with 1".into(),
        };
        let blocked = Outcome::EmulatorBlocked { reason: "x".into() };
        assert_eq!(
            verdict(blocked.clone(), None, &[gap_line()], &[]),
            (blocked, None)
        );
        let (o, f) = verdict(failed(), None, &[gap_line()], &[]);
        assert_eq!(o.name(), "model_gap");
        assert!(matches!(f, Some(Failure::ModelGap(_))), "{f:?}");
        let (o, f) = verdict(failed(), None, &[], &[]);
        assert_eq!(o, failed());
        assert!(matches!(f, Some(Failure::TaskError { .. })), "{f:?}");
        assert_eq!(
            verdict(Outcome::Passed, None, &[], &[]),
            (Outcome::Passed, None)
        );
    }

    #[test]
    fn a_kernel_fault_is_its_own_kind_even_when_the_watchdog_ended_the_run() {
        let console: Vec<String> = [
            "[   10.000000] usb 1-1: new high-speed USB device number 2 using xhci_hcd",
            "[   70.000000] INFO: task cat:91 blocked for more than 40 seconds.",
        ]
        .map(String::from)
        .to_vec();
        let blocked = Outcome::EmulatorBlocked { reason: "x".into() };
        let (o, f) = verdict(blocked.clone(), None, &[gap_line()], &console);
        assert_eq!(o.name(), "kernel_fault");
        assert_eq!(
            o.to_string(),
            "kernel_fault (hung_task): INFO: task cat:91 blocked for more than 40 seconds."
        );
        let text = f.expect("a failure").to_string();
        assert!(
            text.starts_with(
                "task `guest kernel` returned an error: a task hung inside the kernel"
            ),
            "{text}"
        );
        assert!(text.contains("new high-speed USB device"), "{text}");
        // A passed probe with an oops on the console fails too.
        let (o, _) = verdict(Outcome::Passed, None, &[], &console);
        assert_eq!(o.name(), "kernel_fault");
        assert!(o.is_verdict());
        // Without a kernel fault the watchdog's end is still no verdict.
        assert_eq!(
            verdict(blocked.clone(), None, &[], &console[..1]),
            (blocked, None)
        );
    }

    #[test]
    fn only_the_serving_transport_s_facts_are_given() {
        let run = |via| GuestRun {
            outcome: Outcome::Passed,
            failure: None,
            console: vec!["A".into(), "b".into(), "B".into()],
            console_at: vec![
                Duration::from_millis(1),
                Duration::ZERO,
                Duration::from_millis(4),
            ],
            trace: Vec::new(),
            hash: TraceHash([0; 32]),
            records: 0,
            events: Vec::new(),
            via,
            timings: Timings::default(),
            exit: Some(0),
            qemu_stderr: String::new(),
            command: String::new(),
        };
        let l = run(Via::Lockstep {
            frames: 9,
            end_clock_ns: 77,
        });
        assert_eq!((l.frames(), l.end_clock_ns()), (Some(9), Some(77)));
        assert!(l.stats().is_none());
        assert!(l
            .summary()
            .contains("lockstep: 9 frames, guest clock 77 ns"));
        let u = run(Via::Usbredir(Stats::default()));
        assert_eq!((u.frames(), u.end_clock_ns()), (None, None));
        assert!(u.stats().is_some());
        assert!(u.summary().contains("usbredir: Stats"));
        assert_eq!(u.console_block("A", "B"), vec!["b".to_string()]);
        assert_eq!(u.wall_between("A", "B"), Some(Duration::from_millis(3)));
    }

    #[test]
    fn the_first_model_gap_is_read_with_the_cores_parser() {
        let lines = [
            r#"{"seq":1,"t_ns":2,"kind":"transfer","actor":"dock","deterministic":true,"data":{"site":"ctrl.get_status#1"}}"#,
            r#"{"seq":2,"t_ns":3,"kind":"model_gap","actor":"dock","deterministic":true,"data":{"request":"vendor 0x40/0x12","state":"streaming","note":"a } in it"}}"#,
            r#"{"seq":3,"t_ns":4,"kind":"model_gap","actor":"other","deterministic":true,"data":{"request":"x","state":"y"}}"#,
        ]
        .map(|l| format!("{l}\n"));
        let g = model_gap(&lines).expect("a gap");
        assert_eq!(
            (g.device.as_str(), g.request.as_str(), g.state.as_str()),
            ("dock", "vendor 0x40/0x12", "streaming")
        );
        assert!(model_gap(&lines[..1]).is_none());
        assert!(model_gap(&["not json\n".to_string()]).is_none());
    }
}
