//! Choices: every decision a run makes, where it comes from and how it is recorded.
//!
//! A run is driven by one of three sources. A *seeded* source draws from named ChaCha streams,
//! each derived from (seed, stream name) alone, so a new draw in one stream leaves every other
//! stream's draws as they were:
//!
//! - `swarm`: the run's [`Swarm`] configuration, drawn first (see `swarm`);
//! - `schedule`: which ready task runs, which of simultaneous events fires first, picked by the
//!   swarm's scheduling strategy (uniform without a swarm);
//! - `externals`: where each of the scenario's externals lands (one draw each, in declaration
//!   order, whether or not the swarm lets it fire);
//! - `faults`: whether a crossing gets a fault, and which;
//! - `client`: the actions a scenario's client draws (`exec::client_choose`), one stream for the
//!   whole scenario: the client is the scenario's one sequence of user actions, whichever task
//!   draws them (its events carry no stream name);
//! - `data/<actor>`: one stream per actor, for `exec::data_below` in a task (the actor is the
//!   task's name; `sim` during setup) and `DevCtx::data_below` in a device (the device's name),
//!   so a new draw in one task or model leaves the other actors' draws unchanged;
//! - `user/<name>`: streams a scenario names itself (`exec::draw_below("retries", n)`,
//!   `DevCtx::draw_below`), shared by whoever draws from them.
//!
//! The harness's baseline trial is seed 0 with no swarm, no faults and no externals: its
//! schedule, client and data draws are seed 0's draws, not the first option or 0 (see
//! `explore::Probe::Baseline`). A *replay* source answers from a list of [`Event`]s. The
//! *default* source (`RunConfig::default()`, a direct `sim::run`) takes the first option of every
//! decision, draws 0 for data, ends the client at once and places no external event or fault; no
//! trial runs it.
//!
//! Whatever the source, the run logs the events it actually took: its swarm, the non-default
//! schedule choices, the externals it fired, the faults it injected and the values client, data
//! and user draws returned (a data or user draw with its stream's name). Replaying that log
//! reproduces the run: a replay answers each data or user stream from its own queue, so deleting
//! one actor's draw (the minimizer shrinks the record of choices, not generated values) shifts
//! no other actor's. Cases saved before draws carried a stream name (`{"event":"data","value":3}`)
//! still replay: their draws are answered in the global order they were recorded in.
//! Nothing here uses OS randomness.

use crate::fault::Fault;
use crate::swarm::{Priorities, Strategy, Swarm};
use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, VecDeque};
use std::fmt;

/// The named choice streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamName {
    /// Which ready task runs, which simultaneous event fires first.
    Schedule,
    /// Which fault a seeded schedule injects, and where.
    Faults,
    /// Actions a scenario's client draws.
    Client,
    /// The stream data draws came from before they were per actor; runs now draw data from
    /// `data/<actor>` streams ([`stream_named`]). Kept for tools that want a stream of numbers.
    Data,
    /// Where a seeded run's externals land.
    Externals,
    /// A seeded run's swarm configuration.
    Swarm,
}

impl StreamName {
    /// The stream's name as it is hashed and traced.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Schedule => "schedule",
            StreamName::Faults => "faults",
            StreamName::Client => "client",
            StreamName::Data => "data",
            StreamName::Externals => "externals",
            StreamName::Swarm => "swarm",
        }
    }
}

/// A ChaCha8 stream derived from `(seed, name)`.
pub fn stream(seed: u64, name: StreamName) -> ChaCha8Rng {
    stream_named(seed, name.as_str())
}

/// A ChaCha8 stream derived from `(seed, name)` for any name: `data/driver`, `user/retries`.
/// The fixed streams are `stream_named(seed, "schedule")` and so on.
pub fn stream_named(seed: u64, name: &str) -> ChaCha8Rng {
    let mut h = Sha256::new();
    h.update(b"calametra.stream.v1\0");
    h.update(seed.to_le_bytes());
    h.update(name.as_bytes());
    ChaCha8Rng::from_seed(h.finalize().into())
}

/// The name of an actor's data stream: `data/<actor>`.
pub fn data_stream(actor: &str) -> String {
    format!("data/{actor}")
}

/// The name of a scenario's own stream: `user/<name>`.
pub fn user_stream(name: &str) -> String {
    format!("user/{name}")
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
        /// The action's name, for people (ignored on replay).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        label: Option<String>,
    },
    /// A data draw (or a draw from a scenario's own stream) returned `value`.
    Data {
        /// The value drawn.
        value: u64,
        /// The stream it came from (`data/driver`, `user/retries`); a replay answers each stream
        /// from its own queue. `None` in cases saved before draws were per actor: those are
        /// answered in the order they were recorded, whoever draws.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        stream: Option<String>,
    },
    /// The seeded run's swarm configuration (its first record, kind `config`). A replay writes
    /// the same record; the swarm changes nothing else of a replay, whose faults, externals and
    /// picks are its events.
    Swarm {
        /// The configuration.
        swarm: Swarm,
    },
    /// Where the next event (a schedule pick, an external or a fault) happened, relative to a
    /// stable anchor: the `nth` occurrence of `after` (a transfer that completed with an
    /// error, `ctrl.clear_halt stall`; a device's USB transition, `dock usb->attached`; an
    /// external, `external unplug`; or `start`), then `offset` more steps (a pick, an
    /// external) or the `offset`th crossing of the fault's site (`bulk.out`) since it. The
    /// event keeps its raw position (step, site ordinal) as the fallback: a replay places it
    /// by the anchor, and where the anchor never happens, by the raw position. See [`Anchor`].
    Anchor {
        /// What the next event follows (see [`Anchor::after`]).
        after: String,
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
    /// `external unplug`, `start`.
    pub after: String,
    /// Which occurrence of it (1-based).
    pub nth: u32,
    /// Steps after it (a pick, an external), or which crossing of the fault's site since it
    /// (a fault, 1-based).
    pub offset: u64,
}

impl Anchor {
    /// The run's start: every run has it, once, at step 0.
    pub const START: &'static str = "start";

    /// The event that records this anchor before the event it anchors.
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
    let mut out = Vec::with_capacity(events.len());
    let mut pending: Option<Anchor> = None;
    for (i, e) in events.iter().enumerate() {
        match e {
            Event::Anchor { after, nth, offset } => {
                pending = Some(Anchor {
                    after: after.clone(),
                    nth: *nth,
                    offset: *offset,
                })
            }
            Event::Schedule { .. } | Event::External { .. } | Event::Fault { .. } => {
                out.push((i, pending.take(), e))
            }
            _ => out.push((i, None, e)),
        }
    }
    out
}

/// The events without their anchors (every event at its raw position).
pub fn without_anchors(events: &[Event]) -> Vec<Event> {
    events
        .iter()
        .filter(|e| !matches!(e, Event::Anchor { .. }))
        .cloned()
        .collect()
}

/// The events recorded without an anchor (and every draw and swarm), in order: what a replay
/// places by raw position.
fn without_anchored(events: Vec<Event>) -> Vec<Event> {
    let keep: Vec<usize> = anchored(&events)
        .into_iter()
        .filter(|(_, a, _)| a.is_none())
        .map(|(i, _, _)| i)
        .collect();
    let mut out = Vec::with_capacity(keep.len());
    let mut k = keep.iter().peekable();
    for (i, e) in events.into_iter().enumerate() {
        if k.peek() == Some(&&i) {
            k.next();
            out.push(e);
        }
    }
    out
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
            per_stream.entry(s).or_default().push_back(*value);
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
            } => per_stream.get_mut(s.as_str()).and_then(|q| q.pop_front()) == Some(*value),
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
    /// The run's swarm: drawn for a seeded run that uses one, or read from a replayed list.
    pub(crate) swarm: Option<Swarm>,
    schedule: Option<ChaCha8Rng>,
    externals: Option<ChaCha8Rng>,
    faults: Option<ChaCha8Rng>,
    client: Option<ChaCha8Rng>,
    /// Data and user streams by name (`data/driver`, `user/retries`), derived on first use.
    draws: BTreeMap<String, ChaCha8Rng>,
    /// Replay: schedule picks by point, in point order (with the anchor they were recorded
    /// with, once resolved by it).
    replay_schedule: BTreeMap<u64, (u32, Option<Anchor>)>,
    /// Replay: anchored picks whose anchor has not happened yet.
    pending_picks: Vec<(Anchor, u32)>,
    /// Replay: anchored externals whose anchor has not happened yet (anchor, name).
    pending_externals: Vec<(Anchor, String)>,
    /// Replay: anchored externals placed by their anchor: (step, name, anchor), not yet fired.
    pub(crate) resolved_externals: Vec<(u64, String, Anchor)>,
    /// Replay: anchored faults: (anchor, site base, fault, the base's crossings when the anchor
    /// happened), taken once.
    pub(crate) pending_faults: Vec<(Anchor, String, Fault, Option<u32>)>,
    /// The most recent anchor occurrence: (what, nth, step); `start` at first.
    last_anchor: (std::borrow::Cow<'static, str>, u32, u64),
    /// Occurrences of each anchor so far.
    anchor_counts: BTreeMap<String, u32>,
    replay_client: VecDeque<u64>,
    /// Replay: draws by stream name.
    replay_draws: BTreeMap<String, VecDeque<u64>>,
    /// Replay: data draws recorded without a stream name (old cases), in global order.
    replay_data: VecDeque<u64>,
    /// The events this run actually took, in order.
    pub(crate) log: Vec<Event>,
    /// A priority-scheduled run's task priorities and change points.
    priorities: Priorities,
    /// Task choices so far: scheduling points where two or more tasks were ready.
    pub(crate) task_choices: u64,
    /// `RunConfig::strategy`: a seeded run's strategy, whatever its swarm says.
    pub(crate) forced: Option<Strategy>,
}

impl Decider {
    pub(crate) fn new(source: Source) -> Self {
        let mut d = Decider {
            source: source.clone(),
            seed: None,
            swarm: None,
            schedule: None,
            externals: None,
            faults: None,
            client: None,
            draws: BTreeMap::new(),
            replay_schedule: Default::default(),
            pending_picks: Vec::new(),
            pending_externals: Vec::new(),
            resolved_externals: Vec::new(),
            pending_faults: Vec::new(),
            last_anchor: (std::borrow::Cow::Borrowed(Anchor::START), 1, 0),
            anchor_counts: BTreeMap::new(),
            replay_client: Default::default(),
            replay_draws: Default::default(),
            replay_data: Default::default(),
            log: Vec::new(),
            priorities: Priorities::default(),
            task_choices: 0,
            forced: None,
        };
        match source {
            Source::Default => {}
            Source::Seeded(seed) => d.seed = Some(seed),
            Source::Replay(events) => {
                for (_, anchor, e) in anchored(&events) {
                    match (anchor, e) {
                        (Some(a), Event::Schedule { pick, .. }) => d.pending_picks.push((a, *pick)),
                        (Some(a), Event::External { name, .. }) => {
                            d.pending_externals.push((a, name.clone()))
                        }
                        (Some(a), Event::Fault { site, fault }) => d.pending_faults.push((
                            a,
                            site_base(site).to_string(),
                            fault.clone(),
                            None,
                        )),
                        _ => {}
                    }
                }
                d.resolve(Anchor::START, 1, 0);
                for (a, _, _, armed) in &mut d.pending_faults {
                    if a.after == Anchor::START && a.nth == 1 {
                        *armed = Some(0);
                    }
                }
                for e in without_anchored(events) {
                    match e {
                        Event::Schedule { point, pick, .. } => {
                            d.replay_schedule.entry(point).or_insert((pick, None));
                        }
                        Event::Client { value, .. } => d.replay_client.push_back(value),
                        Event::Data {
                            value,
                            stream: None,
                        } => d.replay_data.push_back(value),
                        Event::Data {
                            value,
                            stream: Some(s),
                        } => d.replay_draws.entry(s).or_default().push_back(value),
                        Event::Swarm { swarm } => d.swarm = Some(swarm),
                        // Guest externals are placed by the lockstep loop, from the events.
                        Event::External { .. }
                        | Event::GuestExternal { .. }
                        | Event::Fault { .. }
                        | Event::Anchor { .. } => {}
                    }
                }
            }
        }
        d
    }

    pub(crate) fn is_seeded(&self) -> bool {
        matches!(self.source, Source::Seeded(_))
    }

    /// The seed of a seeded source.
    pub(crate) fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// Picks one of `n` options (simultaneous events) at scheduling point `point`; logs a
    /// non-default pick.
    pub(crate) fn schedule(
        &mut self,
        point: u64,
        n: usize,
        what: impl FnOnce(usize) -> String,
    ) -> usize {
        self.schedule_among(point, n, None, what)
    }

    /// Picks one of `n` ready tasks at scheduling point `point` (`id_of(i)`: the task id of
    /// option `i`); logs a non-default pick.
    pub(crate) fn schedule_task(
        &mut self,
        point: u64,
        n: usize,
        id_of: &dyn Fn(usize) -> usize,
        what: impl FnOnce(usize) -> String,
    ) -> usize {
        self.schedule_among(point, n, Some(id_of), what)
    }

    fn schedule_among(
        &mut self,
        point: u64,
        n: usize,
        id_of: Option<&dyn Fn(usize) -> usize>,
        what: impl FnOnce(usize) -> String,
    ) -> usize {
        if n <= 1 {
            return 0;
        }
        if id_of.is_some() {
            self.task_choices += 1;
        }
        let strategy = match (&self.swarm, self.forced) {
            (_, Some(s)) => s,
            (Some(s), None) if self.seed.is_some() => s.schedule,
            _ => Strategy::Uniform,
        };
        let mut replayed_anchor = None;
        let pick = match lazy(&mut self.schedule, self.seed, StreamName::Schedule) {
            Some(rng) => match (strategy, id_of) {
                (
                    Strategy::Priority {
                        depth,
                        horizon,
                        spawn_order,
                    },
                    Some(id_of),
                ) => self.priorities.pick(
                    rng,
                    (depth, horizon, spawn_order),
                    self.task_choices - 1,
                    n,
                    id_of,
                ),
                _ => strategy.pick(rng, n),
            },
            None => match self.replay_schedule.get(&point) {
                Some((p, a)) => {
                    replayed_anchor = a.clone();
                    (*p as usize).min(n - 1)
                }
                None => 0,
            },
        };
        if pick != 0 {
            let anchor = replayed_anchor.unwrap_or_else(|| self.anchor_at(point));
            self.log.push(anchor.event());
            self.log.push(Event::Schedule {
                point,
                pick: pick as u32,
                what: Some(what(pick)),
            });
        }
        pick
    }

    /// The anchor of an event at step `point`: the most recent anchor occurrence and the
    /// steps since.
    pub(crate) fn anchor_at(&self, point: u64) -> Anchor {
        let (after, nth, at) = &self.last_anchor;
        Anchor {
            after: after.to_string(),
            nth: *nth,
            offset: point.saturating_sub(*at),
        }
    }

    /// The most recent anchor occurrence (what, nth).
    pub(crate) fn last_anchor(&self) -> (&str, u32) {
        (&self.last_anchor.0, self.last_anchor.1)
    }

    /// An anchor occurrence at step `point` (`ctrl.clear_halt stall`, `dock usb->detached`,
    /// `external unplug`): counted, made the most recent, and, on replay, the picks and
    /// externals anchored to it placed. Returns its occurrence number (the caller arms the
    /// faults anchored to it).
    pub(crate) fn occur(&mut self, key: &str, point: u64) -> u32 {
        let n = match self.anchor_counts.get_mut(key) {
            Some(n) => {
                *n += 1;
                *n
            }
            None => {
                self.anchor_counts.insert(key.to_string(), 1);
                1
            }
        };
        self.last_anchor = (std::borrow::Cow::Owned(key.to_string()), n, point);
        self.resolve(key, n, point);
        n
    }

    fn resolve(&mut self, key: &str, n: u32, point: u64) {
        if self.pending_picks.is_empty() && self.pending_externals.is_empty() {
            return;
        }
        let hit = |a: &Anchor| a.after == key && a.nth == n;
        let mut i = 0;
        while i < self.pending_picks.len() {
            if hit(&self.pending_picks[i].0) {
                let (a, pick) = self.pending_picks.remove(i);
                self.replay_schedule
                    .entry(point + a.offset)
                    .or_insert((pick, Some(a)));
            } else {
                i += 1;
            }
        }
        let mut i = 0;
        while i < self.pending_externals.len() {
            if hit(&self.pending_externals[i].0) {
                let (a, name) = self.pending_externals.remove(i);
                self.resolved_externals.push((point + a.offset, name, a));
            } else {
                i += 1;
            }
        }
    }

    /// A raw draw from the externals stream (where an external lands); None when not seeded.
    pub(crate) fn externals_below(&mut self, n: u64) -> Option<u64> {
        lazy(&mut self.externals, self.seed, StreamName::Externals).map(|r| below(r, n.max(1)))
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

    /// A data draw in `0..n` by `actor` (a task or device name), from its `data/<actor>`
    /// stream; 0 for the default source and past the end of a replayed stream.
    pub(crate) fn data(&mut self, actor: &str, n: u64) -> u64 {
        if matches!(self.source, Source::Default) {
            return 0;
        }
        self.draw(data_stream(actor), true, n)
    }

    /// A draw in `0..n` from the scenario's own stream `user/<name>`.
    pub(crate) fn user(&mut self, name: &str, n: u64) -> u64 {
        if matches!(self.source, Source::Default) {
            return 0;
        }
        self.draw(user_stream(name), false, n)
    }

    /// A draw from the stream `name` (seeded), or its replayed queue; a data stream falls back
    /// on the draws recorded without a stream name (`legacy`). Logged.
    fn draw(&mut self, name: String, legacy: bool, n: u64) -> u64 {
        let v = match self.seed {
            Some(seed) => {
                let rng = match self.draws.get_mut(&name) {
                    Some(r) => r,
                    None => self
                        .draws
                        .entry(name.clone())
                        .or_insert_with(|| stream_named(seed, &name)),
                };
                below(rng, n.max(1))
            }
            None => {
                let queued = self.replay_draws.get_mut(&name).and_then(|q| q.pop_front());
                let v = match queued {
                    Some(v) => v,
                    None if legacy => self.replay_data.pop_front().unwrap_or(0),
                    None => 0,
                };
                v.min(n.saturating_sub(1))
            }
        };
        self.log.push(Event::Data {
            value: v,
            stream: Some(name),
        });
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
    fn an_external_says_its_unit_and_an_in_process_one_reads_and_writes_as_before() {
        // In process: a scheduling point, the bytes of every saved case unchanged.
        let e = Event::External {
            name: "unplug".into(),
            point: 7,
        };
        let j = serde_json::to_string(&e).unwrap();
        assert_eq!(j, r#"{"event":"external","name":"unplug","point":7}"#);
        assert_eq!(serde_json::from_str::<Event>(&j).unwrap(), e);
        // In a guest: the guest clock, in its own variant.
        let g = Event::GuestExternal {
            name: "unplug".into(),
            at_ns: 5_000,
        };
        let j = serde_json::to_string(&g).unwrap();
        assert_eq!(
            j,
            r#"{"event":"guest_external","name":"unplug","at_ns":5000}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&j).unwrap(), g);
        assert_eq!(g.to_string(), "unplug (guest clock 5000 ns)");
        // Neither reads as the other.
        assert!(serde_json::from_str::<Event>(
            r#"{"event":"external","name":"unplug","at_ns":5000}"#
        )
        .is_err());
        assert!(serde_json::from_str::<Event>(
            r#"{"event":"guest_external","name":"unplug","point":7}"#
        )
        .is_err());
        // A guest external applies only where it was taken.
        let log = vec![g.clone()];
        assert!(unapplied(&[g.clone()], &log).is_empty());
        let other = Event::GuestExternal {
            name: "unplug".into(),
            at_ns: 6_000,
        };
        assert_eq!(unapplied(&[other], &log), vec![0]);
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
        // A draw names its stream; one saved before draws were per actor still reads.
        let d = Event::Data {
            value: 3,
            stream: Some("data/driver".into()),
        };
        let j = serde_json::to_string(&d).unwrap();
        assert_eq!(j, r#"{"event":"data","value":3,"stream":"data/driver"}"#);
        assert_eq!(serde_json::from_str::<Event>(&j).unwrap(), d);
        assert_eq!(d.to_string(), "data/driver: 3");
        assert_eq!(
            serde_json::from_str::<Event>(r#"{"event":"data","value":3}"#).unwrap(),
            Event::Data {
                value: 3,
                stream: None
            }
        );
    }

    fn data(value: u64, stream: Option<&str>) -> Event {
        Event::Data {
            value,
            stream: stream.map(str::to_string),
        }
    }

    #[test]
    fn draws_replay_per_stream_and_old_draws_in_global_order() {
        let mut d = Decider::new(Source::Replay(vec![
            data(1, Some("data/a")),
            data(2, Some("data/b")),
            data(3, Some("data/a")),
            data(4, Some("user/r")),
        ]));
        // b draws first: it gets its own value, not a's.
        assert_eq!(d.data("b", 10), 2);
        assert_eq!(d.data("a", 10), 1);
        assert_eq!(d.user("r", 10), 4);
        assert_eq!(d.data("a", 10), 3);
        assert_eq!(d.data("a", 10), 0, "past the end of a's draws");
        assert_eq!(d.user("r", 10), 0);
        // An old case: draws answered in the recorded order, whoever draws.
        let mut old = Decider::new(Source::Replay(vec![data(5, None), data(6, None)]));
        assert_eq!(old.data("b", 10), 5);
        assert_eq!(old.data("a", 10), 6);
        assert_eq!(old.data("a", 10), 0);
        assert_eq!(
            first_unapplied(&[data(5, None), data(6, None)], &old.log),
            None
        );
        assert_eq!(
            old.log[0],
            data(5, Some("data/b")),
            "the replay logs the stream it drew for"
        );
    }

    #[test]
    fn unapplied_draws_are_matched_per_stream() {
        let log = vec![data(1, Some("data/a")), data(2, Some("data/b"))];
        let rec = vec![data(2, Some("data/b")), data(1, Some("data/a"))];
        assert_eq!(
            first_unapplied(&rec, &log),
            None,
            "order across streams is free"
        );
        let rec = vec![data(1, Some("data/a")), data(3, Some("data/b"))];
        assert_eq!(first_unapplied(&rec, &log), Some(1));
        let rec = vec![data(1, Some("data/a")), data(1, Some("data/a"))];
        assert_eq!(
            first_unapplied(&rec, &log),
            Some(1),
            "a's second draw is gone"
        );
        assert_eq!(first_unapplied(&[data(1, None), data(2, None)], &log), None);
        assert_eq!(first_unapplied(&[data(2, None)], &log), Some(0));
    }

    #[test]
    fn seeded_draws_come_from_each_actors_own_stream() {
        let mut one = Decider::new(Source::Seeded(11));
        let a1: Vec<u64> = (0..5).map(|_| one.data("a", 1000)).collect();
        // The same run with b drawing in between: a's values do not move.
        let mut two = Decider::new(Source::Seeded(11));
        let mut a2 = Vec::new();
        for _ in 0..5 {
            two.data("b", 1000);
            a2.push(two.data("a", 1000));
            two.user("r", 7);
        }
        assert_eq!(a1, a2);
        let mut direct = stream_named(11, "data/a");
        let want: Vec<u64> = (0..5).map(|_| below(&mut direct, 1000)).collect();
        assert_eq!(a1, want);
        let mut default = Decider::new(Source::Default);
        assert_eq!(default.data("a", 10), 0);
        assert!(default.log.is_empty());
    }
}
