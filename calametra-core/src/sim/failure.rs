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
        strip_numbers(&self.text())
    }

    /// The failure's text (its `Display`), built without the formatting machinery: a run that
    /// fails writes it in its `end` record, and a minimizer compares every failing replay's
    /// signature.
    pub fn text(&self) -> String {
        let mut len = 0;
        self.pieces(&mut |p| {
            len += p.len();
            Ok::<(), std::convert::Infallible>(())
        })
        .ok();
        let mut out = String::with_capacity(len);
        self.pieces(&mut |p| {
            out.push_str(p);
            Ok::<(), std::convert::Infallible>(())
        })
        .ok();
        out
    }

    /// The failure's text, a piece at a time.
    fn pieces<E>(&self, put: &mut dyn FnMut(&str) -> Result<(), E>) -> Result<(), E> {
        let list = |put: &mut dyn FnMut(&str) -> Result<(), E>, items: &[String]| {
            for (i, x) in items.iter().enumerate() {
                if i > 0 {
                    put(", ")?;
                }
                put(x)?;
            }
            Ok(())
        };
        match self {
            Failure::Invariant { name, message } => {
                put("invariant `")?;
                put(name)?;
                put("` broke: ")?;
                put(message)
            }
            Failure::Panic { task, message } => {
                put("`")?;
                put(task)?;
                put("` panicked: ")?;
                put(message)
            }
            Failure::TaskError { task, message } => {
                put("task `")?;
                put(task)?;
                put("` returned an error: ")?;
                put(message)
            }
            Failure::Deadlock { blocked } => {
                put("deadlock: nothing can run and nothing is scheduled; blocked: ")?;
                list(put, blocked)
            }
            Failure::VirtualTimeout { limit, pending } => {
                put("virtual timeout after ")?;
                put(&format_ns(*limit))?;
                put(": still running: ")?;
                list(put, pending)
            }
            Failure::StepLimit { steps } => {
                put("step limit of ")?;
                put(&steps.to_string())?;
                put(" reached (a livelock?)")
            }
            Failure::ModelGap(g) => {
                put("model gap: `")?;
                put(&g.device)?;
                put("` was asked `")?;
                put(&g.request)?;
                put("` in state `")?;
                put(&g.state)?;
                put("` and has no evidence for it")
            }
        }
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.pieces(&mut |p| f.write_str(p))
    }
}

/// Replaces every run of digits (and `0x` hex numbers) with `N`.
pub fn strip_numbers(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let b = s.as_bytes();
    // The text between numbers is copied a span at a time: a number starts and ends at an
    // ASCII byte, so every span is whole characters.
    let mut from = 0;
    let mut i = 0;
    while i < b.len() {
        if b[i].is_ascii_digit() {
            out.push_str(&s[from..i]);
            let hex = b[i] == b'0' && i + 1 < b.len() && b[i + 1] == b'x';
            i += if hex { 2 } else { 0 };
            while i < b.len() && (b[i].is_ascii_digit() || (hex && b[i].is_ascii_hexdigit())) {
                i += 1;
            }
            out.push('N');
            from = i;
        } else {
            i += 1;
        }
    }
    out.push_str(&s[from..]);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What `Display` wrote with `write!` before the failure's text was built a piece at a time.
    fn formatted(f: &Failure) -> String {
        match f {
            Failure::Invariant { name, message } => format!("invariant `{name}` broke: {message}"),
            Failure::Panic { task, message } => format!("`{task}` panicked: {message}"),
            Failure::TaskError { task, message } => {
                format!("task `{task}` returned an error: {message}")
            }
            Failure::Deadlock { blocked } => format!(
                "deadlock: nothing can run and nothing is scheduled; blocked: {}",
                blocked.join(", ")
            ),
            Failure::VirtualTimeout { limit, pending } => format!(
                "virtual timeout after {}: still running: {}",
                format_ns(*limit),
                pending.join(", ")
            ),
            Failure::StepLimit { steps } => format!("step limit of {steps} reached (a livelock?)"),
            Failure::ModelGap(g) => format!(
                "model gap: `{}` was asked `{}` in state `{}` and has no evidence for it",
                g.device, g.request, g.state
            ),
        }
    }

    #[test]
    fn the_text_is_what_formatting_wrote() {
        let s = |x: &str| x.to_string();
        let all = [
            Failure::Invariant {
                name: s("belief_matches_connection"),
                message: s("believes 0x5a, device says 0 (é)"),
            },
            Failure::Panic {
                task: s("driver"),
                message: s("index out of bounds at src/lib.rs:12:5"),
            },
            Failure::TaskError {
                task: s("poller"),
                message: s(""),
            },
            Failure::Deadlock { blocked: vec![] },
            Failure::Deadlock {
                blocked: vec![s("a"), s("b"), s("c")],
            },
            Failure::VirtualTimeout {
                limit: 60_000_000_000,
                pending: vec![s("driver")],
            },
            Failure::VirtualTimeout {
                limit: 1_250_001,
                pending: vec![],
            },
            Failure::StepLimit { steps: 0 },
            Failure::StepLimit { steps: 100_000 },
            Failure::ModelGap(ModelGap {
                device: s("dock"),
                request: s("get_status"),
                state: s("detached"),
            }),
        ];
        for f in &all {
            assert_eq!(f.text(), formatted(f), "{f:?}");
            assert_eq!(f.to_string(), formatted(f), "{f:?}");
            assert_eq!(f.signature(), strip_numbers(&formatted(f)), "{f:?}");
            assert_eq!(
                format!("{f:>200}"),
                formatted(f),
                "padding was never applied"
            );
        }
    }
}
