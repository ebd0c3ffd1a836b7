//! How a run fails: the [`Failure`] kinds (an invariant, a panic, a task's error, a deadlock,
//! limits, a model gap), how each prints, and its signature (the message with the numbers taken
//! out) by which failures are grouped. Nothing here runs anything.

use crate::bus::ModelGap;
use crate::clock::{format_ns, Nanos};

/// Why a run failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Failure {
    /// An invariant broke.
    Invariant {
        /// Its name.
        name: String,
        /// Its message.
        message: String,
    },
    /// A task (or the scenario's setup, an external or an invariant) panicked.
    Panic {
        /// Who panicked.
        task: String,
        /// The panic message and location.
        message: String,
    },
    /// A task returned an error.
    TaskError {
        /// The task.
        task: String,
        /// The error.
        message: String,
    },
    /// No task could run and nothing was scheduled, but required tasks were unfinished.
    Deadlock {
        /// The unfinished tasks.
        blocked: Vec<String>,
    },
    /// Virtual time passed the scenario's limit.
    VirtualTimeout {
        /// The limit.
        limit: Nanos,
        /// The unfinished tasks.
        pending: Vec<String>,
    },
    /// The step limit was reached.
    StepLimit {
        /// The limit.
        steps: u64,
    },
    /// A device was asked something it has no evidence for.
    ModelGap(ModelGap),
}

impl Failure {
    /// The invariant's name, for invariant failures.
    pub fn invariant(&self) -> Option<&str> {
        match self {
            Failure::Invariant { name, .. } => Some(name),
            _ => None,
        }
    }

    /// Whether this is a model gap (its own outcome, never a pass, not a driver failure).
    pub fn is_model_gap(&self) -> bool {
        matches!(self, Failure::ModelGap(_))
    }

    /// The failure signature: what failed and its message with the numbers taken out, so runs
    /// that fail the same way group together.
    pub fn signature(&self) -> String {
        strip_numbers(&self.to_string())
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Invariant { name, message } => {
                write!(f, "invariant `{name}` broke: {message}")
            }
            Failure::Panic { task, message } => write!(f, "`{task}` panicked: {message}"),
            Failure::TaskError { task, message } => {
                write!(f, "task `{task}` returned an error: {message}")
            }
            Failure::Deadlock { blocked } => write!(
                f,
                "deadlock: nothing can run and nothing is scheduled; blocked: {}",
                blocked.join(", ")
            ),
            Failure::VirtualTimeout { limit, pending } => write!(
                f,
                "virtual timeout after {}: still running: {}",
                format_ns(*limit),
                pending.join(", ")
            ),
            Failure::StepLimit { steps } => {
                write!(f, "step limit of {steps} reached (a livelock?)")
            }
            Failure::ModelGap(g) => write!(
                f,
                "model gap: `{}` was asked `{}` in state `{}` and has no evidence for it",
                g.device, g.request, g.state
            ),
        }
    }
}

/// Replaces every run of digits (and `0x` hex numbers) with `N`.
pub fn strip_numbers(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            let hex = b[i] == b'0' && i + 1 < b.len() && b[i + 1] == b'x';
            i += if hex { 2 } else { 0 };
            while i < b.len() && (b[i].is_ascii_digit() || (hex && b[i].is_ascii_hexdigit())) {
                i += 1;
            }
            out.push('N');
        } else {
            let c = s[i..].chars().next().unwrap_or(' ');
            out.push(c);
            i += c.len_utf8();
        }
    }
    out
}
