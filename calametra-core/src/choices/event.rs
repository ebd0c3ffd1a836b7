//! The record of a run's choices: [`Event`]s, their [`Anchor`]s, and how a replayed list is
//! compared with what its run took.
//!
//! Owns the event vocabulary (what exploration varied and minimization cuts, as saved in cases),
//! anchors (a stable place an event is recorded relative to), the helpers over event lists
//! (anchored pairs, counts, the story a person reads) and the check of which recorded events a
//! replay applied ([`unapplied`], [`why_unapplied`]). Re-exported by [`crate::choices`], whose
//! `Decider` produces and consumes these lists.

use crate::fault::Fault;
use crate::swarm::Swarm;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;
use std::sync::Arc;

/// `Option<Arc<str>>` as an optional JSON string (serde's own impl needs its `rc` feature,
/// which would rebuild every crate that uses serde).
mod shared_label {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(l: &Option<Arc<str>>, s: S) -> Result<S::Ok, S::Error> {
        match l {
            Some(l) => s.serialize_some(&**l),
            None => s.serialize_none(),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Arc<str>>, D::Error> {
        Ok(Option::<String>::deserialize(d)?.map(Arc::from))
    }
}

/// `Arc<str>` as a JSON string, for an anchor's text (see `shared_label`).
mod shared_text {
    use serde::{Deserialize, Deserializer, Serializer};
    use std::sync::Arc;

    pub fn serialize<S: Serializer>(t: &Arc<str>, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(t)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<Arc<str>, D::Error> {
        Ok(Arc::from(String::deserialize(d)?))
    }
}

/// One entry in the record of a run's choices: what exploration varied, what minimization cuts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case", deny_unknown_fields)]
pub enum Event {
    /// At scheduling point `point`, option `pick` (0-based, of the ready tasks or simultaneous
    /// events in their stable order) was taken instead of the first.
    Schedule {
        /// The scheduling point (step index).
        point: u64,
        /// The option taken.
        pick: u32,
        /// What that option was, for people (ignored on replay). Shared like a client's label:
        /// a task pick's label is the decider's one copy of the task's name.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "shared_label"
        )]
        what: Option<Arc<str>>,
    },
    /// The scenario's external event `name` fired before scheduling point `point` (an
    /// in-process run; a guest run's externals are [`Event::GuestExternal`]).
    External {
        /// The name given to `Sim::external`.
        name: String,
        /// The scheduling point (step index) it fired at.
        point: u64,
    },
    /// A guest scenario's external event `name` fired when the guest's virtual clock read
    /// `at_ns` (a lockstep guest run, where the model's clock is the guest's).
    GuestExternal {
        /// The name given to `Guest::external`.
        name: String,
        /// The guest's virtual clock, in ns since its boot, at which it fired.
        at_ns: u64,
    },
    /// `fault` was injected at `site`.
    Fault {
        /// The fault site (`ctrl.get_status#3`, `flip.pending->shown#1`).
        site: String,
        /// The primitive.
        fault: Fault,
    },
    /// A client draw returned `value`.
    Client {
        /// The value drawn.
        value: u64,
        /// The action's name, for people (ignored on replay). Shared, not copied: a run's
        /// decider hands out one `Arc` per distinct label (a replay's from its events), so
        /// copying an event list copies no label text.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "shared_label"
        )]
        label: Option<Arc<str>>,
    },
    /// A data draw (or a draw from a scenario's own stream) returned `value`.
    Data {
        /// The value drawn.
        value: u64,
        /// The stream it came from (`data/driver`, `user/retries`); a replay answers each stream
        /// from its own queue. `None` in cases saved before draws were per actor: those are
        /// answered in the order they were recorded, whoever draws. Shared like a client's
        /// label: the decider hands out one `Arc` per stream, so a draw copies no name.
        #[serde(
            default,
            skip_serializing_if = "Option::is_none",
            with = "shared_label"
        )]
        stream: Option<Arc<str>>,
    },
    /// The seeded run's swarm configuration (its first record, kind `config`). A replay writes
    /// the same record; the swarm changes nothing else of a replay, whose faults, externals and
    /// picks are its events.
    Swarm {
        /// The configuration (boxed: it is the largest event, and every event list, a replay's
        /// log and each minimizer candidate, is as wide as its largest event; JSON unchanged).
        swarm: Box<Swarm>,
    },
    /// Where the next event (a schedule pick, an external or a fault) happened, relative to a
    /// stable anchor: the `nth` occurrence of `after` (a transfer that completed with an
    /// error, `ctrl.clear_halt stall`; a device's USB transition, `dock usb->attached`; an
    /// external, `external unplug`; or `start`), then `offset` more steps (a pick, an
    /// external) or the `offset`th crossing of the fault's site (`bulk.out`) since it. The
    /// event keeps its raw position (step, site ordinal) as the fallback: a replay places it
    /// by the anchor, and where the anchor never happens, by the raw position. See [`Anchor`].
    Anchor {
        /// What the next event follows (see [`Anchor::after`]); shared, not copied: every
        /// anchor a run logs after the same occurrence holds the decider's one copy of its
        /// text (in JSON a plain string).
        #[serde(with = "shared_text")]
        after: Arc<str>,
        /// Which occurrence of it (1-based).
        nth: u32,
        /// Steps after it, or which crossing of the fault's site since it.
        offset: u64,
    },
}

/// A stable place in a run that an event is recorded relative to (see [`Event::Anchor`]).
///
/// Anchors are occurrences that do not move when unrelated events come and go: a transfer
/// that completed with an error (by its request and status, not its ordinal among all
/// transfers), a USB transition of a device, an external firing. An event is anchored to the
/// most recent one before it, so dropping an earlier event that moved every step (a delay
/// fault, a retry) leaves the later events where they were relative to what they follow, and a
/// driver that makes one more unrelated transfer at start-up still meets its saved case's
/// faults and externals where they belong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Anchor {
    /// What the event follows: `ctrl.clear_halt stall`, `dock usb->attached`,
    /// `external unplug`, `start`. Shared (see [`Event::Anchor`]): copying an anchor copies
    /// no text.
    pub after: Arc<str>,
    /// Which occurrence of it (1-based).
    pub nth: u32,
    /// Steps after it (a pick, an external), or which crossing of the fault's site since it
    /// (a fault, 1-based).
    pub offset: u64,
}

impl Anchor {
    /// The run's start: every run has it, once, at step 0.
    pub const START: &'static str = "start";

    /// The anchor an [`Event::Anchor`] records; `None` for any other event.
    pub fn of(e: &Event) -> Option<Anchor> {
        match e {
            Event::Anchor { after, nth, offset } => Some(Anchor {
                after: after.clone(),
                nth: *nth,
                offset: *offset,
            }),
            _ => None,
        }
    }

    /// [`Anchor::event`], taking the anchor.
    pub fn into_event(self) -> Event {
        Event::Anchor {
            after: self.after,
            nth: self.nth,
            offset: self.offset,
        }
    }

    /// The event that records this anchor before the event it anchors (its text shared).
    pub fn event(&self) -> Event {
        Event::Anchor {
            after: self.after.clone(),
            nth: self.nth,
            offset: self.offset,
        }
    }
}

impl fmt::Display for Anchor {
    /// `+2 after the 1st ctrl.clear_halt stall`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let th = match (self.nth % 100, self.nth % 10) {
            (11..=13, _) => "th",
            (_, 1) => "st",
            (_, 2) => "nd",
            (_, 3) => "rd",
            _ => "th",
        };
        write!(
            f,
            "+{} after the {}{th} {}",
            self.offset, self.nth, self.after
        )
    }
}

/// The base of a site name: `ctrl.clear_halt#2` -> `ctrl.clear_halt`.
pub fn site_base(site: &str) -> &str {
    site.rsplit_once('#').map(|(b, _)| b).unwrap_or(site)
}

/// Events paired with the anchor recorded before each (`None`: raw position only, as in cases
/// saved before anchors); the [`Event::Anchor`] entries themselves are folded in.
pub fn anchored(events: &[Event]) -> Vec<(usize, Option<Anchor>, &Event)> {
    anchored_iter(events)
        .map(|(i, a, e)| (i, a.and_then(Anchor::of), e))
        .collect()
}

/// [`anchored`] as it goes, building no list and copying no anchor: each event (not an
/// anchor) with the [`Event::Anchor`] recorded before it, borrowed (a replay reads its list
/// this way several times before its first step).
pub(crate) fn anchored_iter(
    events: &[Event],
) -> impl Iterator<Item = (usize, Option<&Event>, &Event)> {
    let mut pending: Option<&Event> = None;
    events.iter().enumerate().filter_map(move |(i, e)| match e {
        Event::Anchor { .. } => {
            pending = Some(e);
            None
        }
        Event::Schedule { .. } | Event::External { .. } | Event::Fault { .. } => {
            Some((i, pending.take(), e))
        }
        _ => Some((i, None, e)),
    })
}

/// The events without their anchors (every event at its raw position).
pub fn without_anchors(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .filter(|e| !matches!(e, Event::Anchor { .. }))
        .cloned()
        .collect()
}

/// How many events a list holds, not counting anchors (the count minimization reports).
pub fn count_events(events: &[Event]) -> usize {
    events
        .iter()
        .filter(|e| !matches!(e, Event::Anchor { .. }))
        .count()
}

impl fmt::Display for Event {
    /// Words a person can read aloud: `get_status`, `unplug`, `stall at ctrl.get_edid#2`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Event::Schedule { point, pick, what } => match what {
                Some(w) => write!(f, "{w} (step {point})"),
                None => write!(f, "switch to option {pick} (step {point})"),
            },
            Event::External { name, .. } => f.write_str(name),
            Event::GuestExternal { name, at_ns } => write!(f, "{name} (guest clock {at_ns} ns)"),
            Event::Fault { site, fault } => write!(f, "{fault} at {site}"),
            Event::Client { value, label } => match label {
                Some(l) => f.write_str(l),
                None => write!(f, "client {value}"),
            },
            Event::Data {
                value,
                stream: None,
            } => write!(f, "data {value}"),
            Event::Data {
                value,
                stream: Some(s),
            } => write!(f, "{s}: {value}"),
            Event::Swarm { swarm } => write!(f, "{swarm}"),
            Event::Anchor { after, nth, offset } => write!(
                f,
                "({})",
                Anchor {
                    after: after.clone(),
                    nth: *nth,
                    offset: *offset
                }
            ),
        }
    }
}

/// The minimal story of a run: its events joined by ` . `.
pub fn story(events: &[Event]) -> String {
    if events.is_empty() {
        return "(no events: the default run)".into();
    }
    events
        .iter()
        .filter(|e| !matches!(e, Event::Anchor { .. }))
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(" . ")
}

/// The first of `recorded` (a replayed event list) that the replayed run did not apply, by
/// its index: a fault whose site was never reached, an external never placed (its name unknown
/// or the run over before its point), a schedule pick at a point with no such choice, a client
/// or data draw that no longer happens or returned another value. Draws are matched per stream:
/// the `k`th recorded draw of `data/driver` against the `k`th draw of `data/driver` the run
/// took; draws recorded without a stream name (old cases) against the run's draws in global
/// order. An anchored event (one recorded after an [`Event::Anchor`]) applied when the run took
/// it by its anchor (the run logs the same anchor before it) or at its raw position (step,
/// site); anchors themselves always apply. `log` is the replayed run's own record of the events
/// it took. `None`: every recorded event applied.
pub fn first_unapplied(recorded: &[Event], log: &[Event]) -> Option<usize> {
    unapplied(recorded, log).first().copied()
}

/// Every event of `recorded` that the replayed run did not apply, by index (see
/// [`first_unapplied`]).
pub fn unapplied(recorded: &[Event], log: &[Event]) -> Vec<usize> {
    let mut clients = log.iter().filter_map(|e| match e {
        Event::Client { value, .. } => Some(*value),
        _ => None,
    });
    let mut datas = log.iter().filter_map(|e| match e {
        Event::Data { value, .. } => Some(*value),
        _ => None,
    });
    let mut per_stream: BTreeMap<&str, VecDeque<u64>> = BTreeMap::new();
    for e in log {
        if let Event::Data {
            value,
            stream: Some(s),
        } = e
        {
            per_stream.entry(&**s).or_default().push_back(*value);
        }
    }
    let taken = anchored(log);
    let by_anchor = |anchor: &Option<Anchor>, la: &Option<Anchor>| anchor.is_some() && la == anchor;
    let mut out = Vec::new();
    for (i, anchor, e) in anchored(recorded) {
        let applied = match e {
            Event::Schedule { point, pick, .. } => taken.iter().any(|(_, la, l)| {
                matches!(l, Event::Schedule { point: p, pick: k, .. }
                    if k == pick && (p == point || by_anchor(&anchor, la)))
            }),
            Event::External { name, point } => taken.iter().any(|(_, la, l)| {
                matches!(l, Event::External { name: n, point: p }
                    if n == name && (p == point || by_anchor(&anchor, la)))
            }),
            Event::GuestExternal { name, at_ns } => taken.iter().any(|(_, _, l)| {
                matches!(l, Event::GuestExternal { name: n, at_ns: t } if n == name && t == at_ns)
            }),
            Event::Fault { site, fault } => taken.iter().any(|(_, la, l)| {
                matches!(l, Event::Fault { site: s, fault: f }
                    if f == fault && (s == site || by_anchor(&anchor, la)))
            }),
            Event::Client { value, .. } => clients.next() == Some(*value),
            Event::Data {
                value,
                stream: None,
            } => datas.next() == Some(*value),
            Event::Data {
                value,
                stream: Some(s),
            } => per_stream.get_mut(&**s).and_then(|q| q.pop_front()) == Some(*value),
            Event::Swarm { swarm } => log
                .iter()
                .any(|l| matches!(l, Event::Swarm { swarm: w } if w == swarm)),
            Event::Anchor { .. } => true,
        };
        if !applied {
            out.push(i);
        }
    }
    out
}

/// Why an event did not apply, in words for the `stale` verdict.
pub fn why_unapplied(e: &Event) -> String {
    match e {
        Event::Schedule { point, pick, .. } => format!(
            "no scheduling choice with option {pick} happened at step {point}"
        ),
        Event::External { name, point } => format!(
            "the external `{name}` was not placed at step {point} (no such external, or the run ended before)"
        ),
        Event::GuestExternal { name, at_ns } => format!(
            "the guest external `{name}` was not placed at guest clock {at_ns} ns (no such external, or the run ended before)"
        ),
        Event::Fault { site, .. } => format!(
            "the fault site `{site}` was never reached (a renamed request or a changed driver?)"
        ),
        Event::Client { value, .. } => {
            format!("the client draw of {value} no longer happens (or is out of range)")
        }
        Event::Data {
            value,
            stream: None,
        } => {
            format!("the data draw of {value} no longer happens (or is out of range)")
        }
        Event::Data {
            value,
            stream: Some(s),
        } => {
            format!("the draw of {value} from `{s}` no longer happens (or is out of range)")
        }
        Event::Swarm { .. } => "the swarm configuration was not recorded".to_string(),
        Event::Anchor { .. } => "an anchor always applies".to_string(),
    }
}
