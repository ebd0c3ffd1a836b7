//! Choices: every decision a run makes, where it comes from and how it is recorded.
//!
//! A run is driven by one of three sources. A *seeded* source draws from four named ChaCha
//! streams (`schedule`, `faults`, `client`, `data`), each derived from (seed, stream name), so a
//! new choice in one area does not perturb the others. The harness's baseline trial is seed 0
//! with no faults and no externals: its schedule, client and data draws are seed 0's draws, not
//! the first option or 0 (see `explore::Probe::Baseline`). A *replay* source answers from a list
//! of [`Event`]s. The *default* source (`RunConfig::default()`, a direct `sim::run`) takes the
//! first option of every decision, draws 0 for data, ends the client at once and places no
//! external event or fault; no trial runs it.
//!
//! Whatever the source, the run logs the events it actually took: the non-default schedule
//! choices, the externals it fired, the faults it injected and the values client and data
//! draws returned. Replaying that log reproduces the run; deleting entries from it is how the
//! minimizer shrinks a failure (the record of choices, not the generated values, is shrunk).
//! Nothing here uses OS randomness.

use crate::fault::Fault;
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::fmt;

/// The named choice streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamName {
    /// Which ready task runs, which simultaneous event fires first, where externals land.
    Schedule,
    /// Which fault a seeded schedule injects, and where.
    Faults,
    /// Actions a scenario's client draws.
    Client,
    /// Data a model or scenario draws.
    Data,
}

impl StreamName {
    /// The stream's name as it is hashed and traced.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Schedule => "schedule",
            StreamName::Faults => "faults",
            StreamName::Client => "client",
            StreamName::Data => "data",
        }
    }
}

/// A ChaCha8 stream derived from `(seed, name)`.
pub fn stream(seed: u64, name: StreamName) -> ChaCha8Rng {
    let mut h = Sha256::new();
    h.update(b"calametra.stream.v1\0");
    h.update(seed.to_le_bytes());
    h.update(name.as_str().as_bytes());
    ChaCha8Rng::from_seed(h.finalize().into())
}

/// Uniform in `0..n` (n > 0) without modulo bias.
pub fn below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    debug_assert!(n > 0);
    if n <= 1 {
        return 0;
    }
    let zone = u64::MAX - (u64::MAX % n) - 1;
    loop {
        let v = rng.next_u64();
        if v <= zone {
            return v % n;
        }
    }
}

/// Derives the `i`th seed of a scenario from a base seed and the scenario's path, so seeds are
/// stable across runs and builds and differ between scenarios.
pub fn derive_seed(base: u64, scenario: &str, i: u64) -> u64 {
    let mut h = Sha256::new();
    h.update(b"calametra.seed.v1\0");
    h.update(base.to_le_bytes());
    h.update(scenario.as_bytes());
    h.update([0]);
    h.update(i.to_le_bytes());
    let d = h.finalize();
    // 48 bits keep trial names short (`seed::0x4f21a93c0d11`) and are plenty per scenario.
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], 0, 0])
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
        /// What that option was, for people (ignored on replay).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        what: Option<String>,
    },
    /// The scenario's external event `name` fired before scheduling point `point`.
    External {
        /// The name given to `Sim::external`.
        name: String,
        /// The scheduling point it fired at.
        point: u64,
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
        /// The action's name, for people (ignored on replay).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// A data draw returned `value`.
    Data {
        /// The value drawn.
        value: u64,
    },
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
            Event::Fault { site, fault } => write!(f, "{fault} at {site}"),
            Event::Client { value, label } => match label {
                Some(l) => f.write_str(l),
                None => write!(f, "client {value}"),
            },
            Event::Data { value } => write!(f, "data {value}"),
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
        .map(|e| e.to_string())
        .collect::<Vec<_>>()
        .join(" . ")
}

/// The first of `recorded` (a replayed event list) that the replayed run did not apply, by
/// its index: a fault whose site was never reached, an external never placed (its name unknown
/// or the run over before its point), a schedule pick at a point with no such choice, a client
/// or data draw that no longer happens or returned another value. `log` is the replayed run's
/// own record of the events it took. `None`: every recorded event applied.
pub fn first_unapplied(recorded: &[Event], log: &[Event]) -> Option<usize> {
    let mut clients = log.iter().filter_map(|e| match e {
        Event::Client { value, .. } => Some(*value),
        _ => None,
    });
    let mut datas = log.iter().filter_map(|e| match e {
        Event::Data { value } => Some(*value),
        _ => None,
    });
    for (i, e) in recorded.iter().enumerate() {
        let applied = match e {
            Event::Schedule { point, pick, .. } => log.iter().any(|l| {
                matches!(l, Event::Schedule { point: p, pick: k, .. } if p == point && k == pick)
            }),
            Event::External { name, point } => log.iter().any(|l| {
                matches!(l, Event::External { name: n, point: p } if n == name && p == point)
            }),
            Event::Fault { site, fault } => log.iter().any(|l| {
                matches!(l, Event::Fault { site: s, fault: f } if s == site && f == fault)
            }),
            Event::Client { value, .. } => clients.next() == Some(*value),
            Event::Data { value } => datas.next() == Some(*value),
        };
        if !applied {
            return Some(i);
        }
    }
    None
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
        Event::Fault { site, .. } => format!(
            "the fault site `{site}` was never reached (a renamed request or a changed driver?)"
        ),
        Event::Client { value, .. } => {
            format!("the client draw of {value} no longer happens (or is out of range)")
        }
        Event::Data { value } => {
            format!("the data draw of {value} no longer happens (or is out of range)")
        }
    }
}

/// Where a run's decisions come from.
#[derive(Clone, Debug)]
pub enum Source {
    /// First option everywhere, data draws 0, no client actions, no externals, no faults. Not
    /// the harness's baseline trial, which is `Seeded(0)` without faults or externals.
    Default,
    /// Drawn from the streams of this seed.
    Seeded(u64),
    /// Answered from a recorded event list.
    Replay(Vec<Event>),
}

/// A seeded run's stream, derived on first use (a pure function of seed and name, so when it
/// is derived changes nothing it draws).
fn lazy(
    slot: &mut Option<ChaCha8Rng>,
    seed: Option<u64>,
    name: StreamName,
) -> Option<&mut ChaCha8Rng> {
    let seed = seed?;
    Some(slot.get_or_insert_with(|| stream(seed, name)))
}

/// The live decision maker of one run.
pub(crate) struct Decider {
    pub(crate) source: Source,
    /// The seed of a seeded source; its streams are derived on first use.
    seed: Option<u64>,
    schedule: Option<ChaCha8Rng>,
    faults: Option<ChaCha8Rng>,
    client: Option<ChaCha8Rng>,
    data: Option<ChaCha8Rng>,
    /// Replay: schedule picks by point, in point order.
    replay_schedule: std::collections::BTreeMap<u64, u32>,
    replay_client: std::collections::VecDeque<u64>,
    replay_data: std::collections::VecDeque<u64>,
    /// The events this run actually took, in order.
    pub(crate) log: Vec<Event>,
}

impl Decider {
    pub(crate) fn new(source: Source) -> Self {
        let mut d = Decider {
            source: source.clone(),
            seed: None,
            schedule: None,
            faults: None,
            client: None,
            data: None,
            replay_schedule: Default::default(),
            replay_client: Default::default(),
            replay_data: Default::default(),
            log: Vec::new(),
        };
        match source {
            Source::Default => {}
            Source::Seeded(seed) => d.seed = Some(seed),
            Source::Replay(events) => {
                for e in events {
                    match e {
                        Event::Schedule { point, pick, .. } => {
                            d.replay_schedule.insert(point, pick);
                        }
                        Event::Client { value, .. } => d.replay_client.push_back(value),
                        Event::Data { value } => d.replay_data.push_back(value),
                        Event::External { .. } | Event::Fault { .. } => {}
                    }
                }
            }
        }
        d
    }

    pub(crate) fn is_seeded(&self) -> bool {
        matches!(self.source, Source::Seeded(_))
    }

    /// Picks one of `n` options at scheduling point `point`; logs a non-default pick.
    pub(crate) fn schedule(
        &mut self,
        point: u64,
        n: usize,
        what: impl FnOnce(usize) -> String,
    ) -> usize {
        if n <= 1 {
            return 0;
        }
        let pick = match lazy(&mut self.schedule, self.seed, StreamName::Schedule) {
            Some(rng) => below(rng, n as u64) as usize,
            None => self
                .replay_schedule
                .get(&point)
                .map(|&p| (p as usize).min(n - 1))
                .unwrap_or(0),
        };
        if pick != 0 {
            self.log.push(Event::Schedule {
                point,
                pick: pick as u32,
                what: Some(what(pick)),
            });
        }
        pick
    }

    /// A raw draw from the schedule stream (external placement); None when not seeded.
    pub(crate) fn schedule_below(&mut self, n: u64) -> Option<u64> {
        lazy(&mut self.schedule, self.seed, StreamName::Schedule).map(|r| below(r, n.max(1)))
    }

    /// A raw draw from the faults stream; None when not seeded.
    pub(crate) fn faults_below(&mut self, n: u64) -> Option<u64> {
        lazy(&mut self.faults, self.seed, StreamName::Faults).map(|r| below(r, n.max(1)))
    }

    /// A client draw in `0..n`; None when a replayed list is exhausted (the client stops).
    pub(crate) fn client(
        &mut self,
        n: u64,
        label: impl FnOnce(u64) -> Option<String>,
    ) -> Option<u64> {
        let v = match lazy(&mut self.client, self.seed, StreamName::Client) {
            Some(rng) => below(rng, n.max(1)),
            None => match self.source {
                Source::Default => return None,
                _ => self.replay_client.pop_front()?.min(n.saturating_sub(1)),
            },
        };
        self.log.push(Event::Client {
            value: v,
            label: label(v),
        });
        Some(v)
    }

    /// A data draw in `0..n`; 0 for the default source and past the end of a replayed list.
    pub(crate) fn data(&mut self, n: u64) -> u64 {
        let v = match lazy(&mut self.data, self.seed, StreamName::Data) {
            Some(rng) => below(rng, n.max(1)),
            None => self
                .replay_data
                .pop_front()
                .unwrap_or(0)
                .min(n.saturating_sub(1)),
        };
        if !matches!(self.source, Source::Default) {
            self.log.push(Event::Data { value: v });
        }
        v
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_independent_and_stable() {
        let mut a = stream(7, StreamName::Schedule);
        let mut b = stream(7, StreamName::Schedule);
        let mut c = stream(7, StreamName::Client);
        let xa: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert_ne!(derive_seed(0, "a::b", 0), derive_seed(0, "a::b", 1));
        assert_ne!(derive_seed(0, "a::b", 0), derive_seed(1, "a::b", 0));
        assert!(derive_seed(0, "a::b", 0) < 1 << 48);
    }

    #[test]
    fn below_is_in_range() {
        let mut r = stream(1, StreamName::Data);
        for n in 1..50 {
            assert!(below(&mut r, n) < n);
        }
    }

    #[test]
    fn events_serialize_readably() {
        let e = Event::Fault {
            site: "ctrl.get_status#3".into(),
            fault: Fault::Stall,
        };
        let j = serde_json::to_string(&e).unwrap();
        assert_eq!(
            j,
            r#"{"event":"fault","site":"ctrl.get_status#3","fault":"stall"}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&j).unwrap(), e);
        assert_eq!(e.to_string(), "stall at ctrl.get_status#3");
        assert!(serde_json::from_str::<Event>(r#"{"event":"nope"}"#).is_err());
    }
}
