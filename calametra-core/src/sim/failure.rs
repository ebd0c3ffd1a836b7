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

    /// The failure signature: what failed and its message with the numbers taken out (a hash
    /// or any word of hex digits one `N`) and a list of labelled items (each attempt's error)
    /// collapsed, so runs that fail the same way group together ([`signature_of`]).
    pub fn signature(&self) -> String {
        signature_of(&self.text())
    }

    /// The signature as it was before hex words and lists were normalized: the message with
    /// each run of digits taken out ([`strip_numbers`]). A saved case made then records it;
    /// [`Failure::has_signature`] still matches it.
    pub fn legacy_signature(&self) -> String {
        strip_numbers(&self.text())
    }

    /// Whether `recorded` (a saved case's signature) is this failure's: its
    /// [`Failure::signature`], or the [`Failure::legacy_signature`] a case saved before
    /// records. A committed case keeps replaying as the same failure.
    pub fn has_signature(&self, recorded: &str) -> bool {
        let text = self.text();
        // The legacy form only when the current one differs (a case saved before).
        signature_of(&text) == recorded || strip_numbers(&text) == recorded
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

/// A failure text's signature: every number as `N` ([`strip_words`]: a run of digits, a `0x`
/// number, a word of hex digits with a digit in it such as a hash, `e62e2321e187`), then every
/// list of two or more items under one label ([`collapse_lists`]: `attempt N: stall; attempt
/// N: timeout`) as the label and `…`. Messages that list each attempt's error, or print a
/// hash, are one signature whatever the attempts met or the hash was.
pub fn signature_of(s: &str) -> String {
    collapse_lists(&strip_words(s))
}

/// Replaces each ASCII word that is a number with `N`: all hex digits with at least one digit
/// (`42`, `1f`, `e62e2321e187`), or `0x` and hex digits; in any other word each run of digits
/// (`sha256` is `shaN`, `10s` is `Ns`).
pub fn strip_words(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = String::with_capacity(s.len());
    // Words start and end at ASCII bytes, so every span copied is whole characters.
    let mut from = 0;
    let mut i = 0;
    while i < b.len() {
        if !b[i].is_ascii_alphanumeric() {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_alphanumeric() {
            j += 1;
        }
        let w = &b[i..j];
        let hex_word = w.iter().all(u8::is_ascii_hexdigit) && w.iter().any(u8::is_ascii_digit);
        let ox =
            w.len() > 2 && w[0] == b'0' && w[1] == b'x' && w[2..].iter().all(u8::is_ascii_hexdigit);
        if hex_word || ox {
            out.push_str(&s[from..i]);
            out.push('N');
            from = j;
        } else {
            let mut k = i;
            while k < j {
                if b[k].is_ascii_digit() {
                    out.push_str(&s[from..k]);
                    while k < j && b[k].is_ascii_digit() {
                        k += 1;
                    }
                    out.push('N');
                    from = k;
                } else {
                    k += 1;
                }
            }
        }
        i = j;
    }
    out.push_str(&s[from..]);
    out
}

/// Collapses each list of items under one label: where a label `<word> N: ` (after
/// [`strip_words`]: `attempt N: `) starts two or more items, the text from its first item to
/// the end of its last (the next `;`, `,`, `)`, `]` or line end after it) becomes the label and
/// `…`. Text without a repeated label is returned as it is.
pub fn collapse_lists(s: &str) -> String {
    let mut out = s.to_string();
    // Each pass collapses one label's list; a message has few.
    for _ in 0..8 {
        match repeated_label(&out) {
            Some((label, first, last)) => {
                let end = out[last + label.len()..]
                    .find([';', ',', ')', ']', '\n'])
                    .map_or(out.len(), |e| last + label.len() + e);
                let mut next = String::with_capacity(out.len());
                next.push_str(&out[..first]);
                next.push_str(&label);
                next.push('…');
                next.push_str(&out[end..]);
                out = next;
            }
            None => break,
        }
    }
    out
}

/// The first label `<letters> N: ` that starts two or more items in `s`, with where its first
/// and last occurrences start.
fn repeated_label(s: &str) -> Option<(String, usize, usize)> {
    let b = s.as_bytes();
    let mut labels: Vec<(String, usize, usize, usize)> = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let starts = b[i].is_ascii_alphabetic() && (i == 0 || !b[i - 1].is_ascii_alphanumeric());
        if !starts {
            i += 1;
            continue;
        }
        let mut j = i;
        while j < b.len() && b[j].is_ascii_alphabetic() {
            j += 1;
        }
        if s[j..].starts_with(" N: ") {
            let label = &s[i..j + 4];
            match labels.iter_mut().find(|(l, ..)| l == label) {
                Some(e) => {
                    e.2 = i;
                    e.3 += 1;
                }
                None => labels.push((label.to_string(), i, i, 1)),
            }
        }
        i = j.max(i + 1);
    }
    labels
        .into_iter()
        .filter(|(.., n)| *n >= 2)
        .min_by_key(|(_, first, ..)| *first)
        .map(|(l, first, last, _)| (l, first, last))
}

/// Replaces every run of digits (and `0x` hex numbers) with `N`: the signature before hex
/// words and lists were normalized ([`Failure::legacy_signature`]).
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
            assert_eq!(f.legacy_signature(), strip_numbers(&formatted(f)), "{f:?}");
            assert_eq!(f.signature(), signature_of(&formatted(f)), "{f:?}");
            assert!(f.has_signature(&f.signature()) && f.has_signature(&f.legacy_signature()));
            assert_eq!(
                format!("{f:>200}"),
                formatted(f),
                "padding was never applied"
            );
        }
    }

    /// Issue 41: a hash came out as `shaN NddfNcNa...`, and listing each attempt's error split
    /// one bug into as many signatures as the attempts' errors had orders.
    #[test]
    fn signatures_take_a_hash_as_one_number_and_collapse_attempt_lists() {
        assert_eq!(
            signature_of("image sha256 9ddf3c4a1b.. differs, sha256:0d629047a4995d68"),
            "image shaN N.. differs, shaN:N"
        );
        assert_eq!(
            signature_of("status 0x1f after 12 reads, v1.2, 10s"),
            "status N after N reads, vN.N, Ns"
        );
        // Words of hex letters alone are words.
        assert_eq!(signature_of("bad cafe face"), "bad cafe face");
        let gave_up = |errors: &[&str]| {
            let list: Vec<String> = errors
                .iter()
                .enumerate()
                .map(|(i, e)| format!("attempt {}: {e}", i + 1))
                .collect();
            let f = Failure::TaskError {
                task: "updater".into(),
                message: format!(
                    "gave up after {} attempts: {}",
                    errors.len(),
                    list.join("; ")
                ),
            };
            f.signature()
        };
        let one = gave_up(&["stall at block 3", "timeout", "stall at block 9"]);
        assert_eq!(
            one,
            "task `updater` returned an error: gave up after N attempts: attempt N: …"
        );
        for other in [
            gave_up(&["timeout", "timeout"]),
            gave_up(&[
                "disconnected",
                "stall at block 1",
                "timeout",
                "crc 0x1f2e",
                "timeout",
            ]),
        ] {
            assert_eq!(other, one);
        }
        // What follows the list stays; one labelled item is not a list.
        assert_eq!(
            collapse_lists("failed (try N: a; try N: b) then stopped; last N: c"),
            "failed (try N: …) then stopped; last N: c"
        );
        assert_eq!(collapse_lists("attempt N: stall"), "attempt N: stall");
    }

    /// A case saved before records the old signature, which still matches.
    #[test]
    fn a_legacy_signature_still_matches_its_failure() {
        let f = Failure::Invariant {
            name: "installed_as_claimed".into(),
            message: "the host reports 16384 bytes, sha256 e62e2321e187.. installed".into(),
        };
        let legacy = "invariant `installed_as_claimed` broke: the host reports N bytes, shaN eNeNeN.. installed";
        assert_eq!(f.legacy_signature(), legacy);
        assert_ne!(f.signature(), legacy);
        assert!(f.has_signature(legacy) && f.has_signature(&f.signature()));
        assert!(!f.has_signature("invariant `other` broke"));
    }
}
