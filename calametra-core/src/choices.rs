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

//!
//! This module owns the run's live decision maker (`Decider`: the seeded, replayed and default
//! sources, the anchors a replay resolves, the log of events taken) and [`Source`]. The event
//! vocabulary and the comparison of a replayed list with its run are in `choices/event.rs`; how streams
//! are derived from a seed is in [`crate::stream`]; both are re-exported here. The decider's
//! data and user draws are in `choices/draws.rs`.

mod draws;
mod event;

use draws::Drawn;

pub use crate::stream::{
    below, data_stream, derive_seed, stream, stream_named, user_stream, StreamName,
};
pub(crate) use event::anchored_iter;
pub use event::{
    anchored, count_events, first_unapplied, site_base, story, unapplied, why_unapplied,
    without_anchors, Anchor, Event,
};

use crate::fault::{Fault, FaultKind, FaultSet};
use crate::pool::{self, Pool};
use crate::swarm::{Priorities, Strategy, Swarm};
use rand_chacha::ChaCha8Rng;
use std::cell::Cell;
use std::collections::{BTreeMap, VecDeque};
use std::sync::Arc;

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

/// A seeded run's fixed stream `name`, derived on first use (a pure function of seed and name,
/// so when it is derived changes nothing it draws) and kept in its slot of `slots` (one per
/// [`StreamName`], in the decider's reused state: nothing is allocated or searched for).
fn lazy(
    slots: &mut [Option<ChaCha8Rng>; STREAMS],
    seed: Option<u64>,
    name: StreamName,
) -> Option<&mut ChaCha8Rng> {
    let seed = seed?;
    let s = &mut slots[slot(name)];
    if s.is_none() {
        derive(s, seed, name);
    }
    s.as_mut()
}

/// Derives stream `name` of `seed` into `slot`, once a run: out of line, so a draw from a
/// stream already derived keeps a small frame (the generator is some 300 bytes), and built in
/// its slot (`stream` is inlined).
#[cold]
#[inline(never)]
fn derive(slot: &mut Option<ChaCha8Rng>, seed: u64, name: StreamName) {
    *slot = Some(stream(seed, name));
}

/// The number of fixed streams ([`StreamName`]'s variants).
const STREAMS: usize = 6;

/// The slot of fixed stream `name` in [`DeciderState::streams`].
fn slot(name: StreamName) -> usize {
    match name {
        StreamName::Schedule => 0,
        StreamName::Faults => 1,
        StreamName::Client => 2,
        StreamName::Data => 3,
        StreamName::Externals => 4,
        StreamName::Swarm => 5,
    }
}

/// The events a seeded run's log has room for from the start, at least (see
/// [`DeciderState::take_log`]).
const SEEDED_LOG: usize = 16;

/// The most a seeded run's log reserves from the start, whatever the run before took.
const SEEDED_LOG_MAX: usize = 256;

/// Past this many, the names of data and user streams, client labels and anchor keys a
/// thread's decider keeps from run to run ([`DeciderState::reset`]) are dropped.
const KEPT_NAMES: usize = 64;

/// The live decision maker of one run: its state ([`DeciderState`], which every field and
/// method is read through), boxed and reused by the thread's next decider once this one is
/// dropped.
pub(crate) struct Decider {
    /// Always `Some` but while dropping.
    state: Option<Box<DeciderState>>,
}

impl std::ops::Deref for Decider {
    type Target = DeciderState;
    fn deref(&self) -> &DeciderState {
        match &self.state {
            Some(s) => s,
            None => unreachable!("a decider's state is taken only when it is dropped"),
        }
    }
}

impl std::ops::DerefMut for Decider {
    fn deref_mut(&mut self) -> &mut DeciderState {
        match &mut self.state {
            Some(s) => s,
            None => unreachable!("a decider's state is taken only when it is dropped"),
        }
    }
}

impl Drop for Decider {
    /// Resets the state (dropping the run's events and replay queues, keeping their buffers)
    /// and keeps it for the thread's next decider.
    fn drop(&mut self) {
        let Some(mut s) = self.state.take() else {
            return;
        };
        s.reset();
        // The next run's decider takes it ([`Pool::Decider`]), so a run allocates no decider,
        // no stream slots, no priority table and no stream names it had last time, and moving
        // a decider moves one pointer.
        pool::put(Pool::Decider, s);
    }
}

/// The stream a seeded run draws a primitive's parameters from: `fault/<name>`.
pub fn fault_param_stream(kind: FaultKind) -> String {
    format!("fault/{}", kind.as_str())
}

/// The state of a run's [`Decider`].
pub(crate) struct DeciderState {
    pub(crate) source: Source,
    /// The seed of a seeded source; its streams are derived on first use.
    seed: Option<u64>,
    /// The run's swarm: drawn for a seeded run that uses one, or read from a replayed list.
    pub(crate) swarm: Option<Swarm>,
    /// The fixed streams this seeded run drew from so far (`schedule`, `externals`, `faults`,
    /// `client`; `swarm` once the swarm is drawn), each derived on first use, by [`slot`].
    streams: [Option<ChaCha8Rng>; STREAMS],
    /// Data and user streams drawn from (`data/driver`, `user/retries`), each named once and
    /// found by actor or user name, so a draw builds no name. Kept from run to run (names
    /// only: a stream is `live`, and (seeded) derived, on its first draw in a run).
    draws: Vec<Drawn>,
    /// The index in `draws` of the stream drawn last (a task's draws usually come in a row).
    last_draw: usize,
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
    /// The most recent anchor occurrence: (what, nth, step); `start` at first. Its text is
    /// the key's shared copy in `anchor_counts` (or `start`), which every anchor logged after
    /// it shares.
    last_anchor: (Arc<str>, u32, u64),
    /// [`Anchor::START`], made once a thread.
    start: Arc<str>,
    /// Occurrences of each anchor so far (keys kept from run to run, at 0: an anchor key
    /// allocates once a thread, and is the text every anchor to it shares).
    anchor_counts: BTreeMap<Arc<str>, Cell<u32>>,
    replay_client: VecDeque<u64>,
    /// Replay: draws by stream name.
    replay_draws: BTreeMap<String, VecDeque<u64>>,
    /// Replay: data draws recorded without a stream name (old cases), in global order.
    replay_data: VecDeque<u64>,
    /// The events this run actually took, in order.
    pub(crate) log: Vec<Event>,
    /// The client labels and the task names of logged task picks handed out, one shared copy
    /// each ([`DeciderState::shared_label`]); kept from run to run (a replay starts with its
    /// own events' client labels).
    labels: Vec<Arc<str>>,
    /// A priority-scheduled run's task priorities and change points.
    priorities: Priorities,
    /// Task choices so far: scheduling points where two or more tasks were ready.
    pub(crate) task_choices: u64,
    /// `RunConfig::strategy`: a seeded run's strategy, whatever its swarm says.
    pub(crate) forced: Option<Strategy>,
    /// The texts of the strategies swarms drew ([`DeciderState::strategy_text`]), each
    /// written once a thread (a scenario's swarms draw a dozen or so); kept from run to run.
    /// By [`text_key`]: one word to compare per entry, not a variant and its fields.
    texts: Vec<(u64, Box<str>)>,
    /// The buffer a pick's label is written in ([`DeciderState::take_scratch`]).
    scratch: String,
    /// How many events the thread's last seeded run logged ([`DeciderState::take_log`]).
    last_log: usize,
    /// The streams a seeded run drew fault parameters from (`fault/short`,
    /// `fault/corrupt`), each derived on its first draw in the run.
    fault_params: Vec<(FaultKind, ChaCha8Rng)>,
}

impl DeciderState {
    /// A state as a new decider starts with.
    fn empty() -> DeciderState {
        let start: Arc<str> = Arc::from(Anchor::START);
        DeciderState {
            source: Source::Default,
            seed: None,
            swarm: None,
            streams: Default::default(),
            draws: Vec::new(),
            last_draw: 0,
            replay_schedule: Default::default(),
            pending_picks: Vec::new(),
            pending_externals: Vec::new(),
            resolved_externals: Vec::new(),
            pending_faults: Vec::new(),
            last_anchor: (start.clone(), 1, 0),
            start,
            anchor_counts: BTreeMap::new(),
            replay_client: Default::default(),
            replay_draws: Default::default(),
            replay_data: Default::default(),
            log: Vec::new(),
            labels: Vec::new(),
            priorities: Priorities::default(),
            task_choices: 0,
            forced: None,
            texts: Vec::new(),
            scratch: String::new(),
            last_log: 0,
            fault_params: Vec::new(),
        }
    }

    /// Makes this state what [`DeciderState::empty`] gives, but for what it keeps: its
    /// buffers, and the names a next run may meet again (data and user streams, not live;
    /// client labels; anchor keys, at 0 occurrences), up to [`KEPT_NAMES`] each. Every field
    /// is named, so a field added must be reset here too.
    fn reset(&mut self) {
        let DeciderState {
            source,
            seed,
            swarm,
            streams,
            draws,
            last_draw,
            replay_schedule,
            pending_picks,
            pending_externals,
            resolved_externals,
            pending_faults,
            last_anchor,
            start,
            anchor_counts,
            replay_client,
            replay_draws,
            replay_data,
            log,
            labels,
            priorities,
            task_choices,
            forced,
            texts,
            scratch: _,
            last_log: _,
            fault_params,
        } = self;
        fault_params.clear();
        *source = Source::Default;
        *seed = None;
        *swarm = None;
        for s in streams.iter_mut() {
            *s = None;
        }
        if draws.len() > KEPT_NAMES {
            draws.clear();
        }
        for d in draws.iter_mut() {
            d.reset();
        }
        *last_draw = 0;
        // An empty map's `clear` still builds and drops an iterator: skipped when empty.
        if !replay_schedule.is_empty() {
            replay_schedule.clear();
        }
        pending_picks.clear();
        pending_externals.clear();
        resolved_externals.clear();
        pending_faults.clear();
        last_anchor.0 = start.clone();
        last_anchor.1 = 1;
        last_anchor.2 = 0;
        if anchor_counts.len() > KEPT_NAMES {
            anchor_counts.clear();
        } else if !anchor_counts.is_empty() {
            for n in anchor_counts.values_mut() {
                n.set(0);
            }
        }
        replay_client.clear();
        if !replay_draws.is_empty() {
            replay_draws.clear();
        }
        replay_data.clear();
        log.clear();
        if labels.len() > KEPT_NAMES {
            labels.clear();
        }
        priorities.reset();
        *task_choices = 0;
        *forced = None;
        if texts.len() > KEPT_NAMES {
            texts.clear();
        }
    }
}

impl Decider {
    pub(crate) fn new(source: Source) -> Self {
        let state = pool::take::<Box<DeciderState>>(Pool::Decider)
            .unwrap_or_else(|| Box::new(DeciderState::empty()));
        let mut d = Decider { state: Some(state) };
        match &source {
            Source::Default => {}
            Source::Seeded(seed) => {
                d.seed = Some(*seed);
                // Room for a short run's events (its swarm and a few anchored picks), or for as
                // many as the thread's previous seeded run took (a scenario's runs take about
                // as many): the log does not grow 1 -> 4 -> 8 -> 16 -> 32 as the run goes.
                let room = d.last_log.clamp(SEEDED_LOG, SEEDED_LOG_MAX);
                d.log.reserve_exact(room);
            }
            Source::Replay(events) => {
                // A replay shares its events' labels (not those of runs before).
                d.labels.clear();
                // A replay takes about the events it is given.
                d.log.reserve_exact(events.len());
                for (_, anchor, e) in anchored_iter(events) {
                    let Some(a) = anchor.and_then(Anchor::of) else {
                        continue;
                    };
                    match e {
                        Event::Schedule { pick, .. } => d.pending_picks.push((a, *pick)),
                        Event::External { name, .. } => d.pending_externals.push((a, name.clone())),
                        Event::Fault { site, fault } => d.pending_faults.push((
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
                    if &*a.after == Anchor::START && a.nth == 1 {
                        *armed = Some(0);
                    }
                }
                // The events recorded without an anchor (and every draw and swarm), in order:
                // what the replay places by raw position.
                let clients = events
                    .iter()
                    .filter(|e| matches!(e, Event::Client { .. }))
                    .count();
                d.replay_client.reserve_exact(clients);
                let s = &mut *d;
                for (_, _, e) in anchored_iter(events).filter(|(_, a, _)| a.is_none()) {
                    match e {
                        Event::Schedule { point, pick, .. } => {
                            s.replay_schedule.entry(*point).or_insert((*pick, None));
                        }
                        Event::Client { value, label } => {
                            s.replay_client.push_back(*value);
                            if let Some(l) = label {
                                if !s.labels.iter().any(|k| Arc::ptr_eq(k, l) || k == l) {
                                    s.labels.push(l.clone());
                                }
                            }
                        }
                        Event::Data {
                            value,
                            stream: None,
                        } => s.replay_data.push_back(*value),
                        Event::Data {
                            value,
                            stream: Some(st),
                        } => match s.replay_draws.get_mut(&**st) {
                            Some(q) => q.push_back(*value),
                            None => {
                                s.replay_draws
                                    .insert(st.to_string(), VecDeque::from([*value]));
                            }
                        },
                        Event::Swarm { swarm } => s.swarm = Some((**swarm).clone()),
                        // Guest externals are placed by the lockstep loop, from the events.
                        Event::External { .. }
                        | Event::GuestExternal { .. }
                        | Event::Fault { .. }
                        | Event::Anchor { .. } => {}
                    }
                }
            }
        }
        d.source = source;
        d
    }
}

impl DeciderState {
    pub(crate) fn is_seeded(&self) -> bool {
        matches!(self.source, Source::Seeded(_))
    }

    /// The events this run took, taken out of the decider (the run's result), the count kept
    /// for the thread's next seeded run to reserve.
    pub(crate) fn take_log(&mut self) -> Vec<Event> {
        if self.seed.is_some() {
            self.last_log = self.log.len();
        }
        std::mem::take(&mut self.log)
    }

    /// The seed of a seeded source.
    pub(crate) fn seed(&self) -> Option<u64> {
        self.seed
    }

    /// Draws a seeded run's swarm but its externals ([`Swarm::draw_open`], for a scenario
    /// exploring `fault_set` about `horizon` task choices long) from the `swarm` stream in its
    /// slot, and keeps both: the stream where the draw left it, for
    /// [`DeciderState::swarm_stream`]. For an empty `fault_set`, a swarm without a faults part
    /// instead: its strategy from the `schedule` stream's first two draws, no `swarm` stream
    /// derived ([`Swarm::draw`]). Nothing when not seeded.
    pub(crate) fn open_swarm(&mut self, fault_set: &FaultSet, horizon: u64) {
        if fault_set.kind_bits() == 0 {
            if let Some(rng) = lazy(&mut self.streams, self.seed, StreamName::Schedule) {
                self.swarm = Some(Swarm::strategy_only(Swarm::draw_strategy(rng, horizon)));
            }
        } else if let (Some(seed), Some(rng)) = (
            self.seed,
            lazy(&mut self.streams, self.seed, StreamName::Swarm),
        ) {
            self.swarm = Some(Swarm::draw_open_from(rng, seed, fault_set, horizon));
        }
    }

    /// Where the text of strategy `s` (what [`Strategy::text`] writes) is kept, for
    /// [`DeciderState::text_at`]: written on its first use on this thread, not once a run
    /// (every swarm run writes its strategy in its `config` record).
    pub(crate) fn strategy_text(&mut self, s: Strategy) -> usize {
        let key = text_key(s);
        match self.texts.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                self.texts.push((key, Box::from(&*s.text())));
                self.texts.len() - 1
            }
        }
    }

    /// The strategy text kept at `i` ([`DeciderState::strategy_text`]).
    pub(crate) fn text_at(&self, i: usize) -> &str {
        self.texts.get(i).map_or("", |(_, t)| t)
    }

    /// The `swarm` stream where [`DeciderState::open_swarm`] left it, derived now when it did
    /// not derive it (a swarm without a faults part draws its externals from it); `None`
    /// when not seeded.
    pub(crate) fn swarm_stream(&mut self) -> Option<&mut ChaCha8Rng> {
        lazy(&mut self.streams, self.seed, StreamName::Swarm)
    }

    /// Picks one of `n` options (simultaneous events) at scheduling point `point`; logs a
    /// non-default pick, which the caller describes ([`DeciderState::label_pick`]). Inlined:
    /// most points offer one option, and take it without a call.
    #[inline(always)]
    pub(crate) fn schedule(&mut self, point: u64, n: usize) -> usize {
        if n <= 1 {
            return 0;
        }
        self.schedule_among(point, n, None, |_, _| None)
    }

    /// An empty buffer (the decider's own, kept from run to run) to write a pick's label in.
    pub(crate) fn take_scratch(&mut self) -> String {
        let mut s = std::mem::take(&mut self.scratch);
        s.clear();
        s.reserve(48); // a label's usual length, not grown step by step
        s
    }

    /// Describes the pick just logged (the last event, when it is a schedule pick) with the
    /// text `label`, copied once; keeps `label` as the decider's buffer.
    pub(crate) fn label_pick(&mut self, label: String) {
        if let Some(Event::Schedule { what, .. }) = self.log.last_mut() {
            *what = Some(Arc::from(&*label));
        }
        self.scratch = label;
    }

    /// Picks one of the ready tasks `ids` (option `i` is task `ids[i]`) at scheduling point
    /// `point`; logs a non-default pick, described by the task's name `name(i)` (the
    /// decider's one shared copy of it, [`DeciderState::shared_label`]). Inlined as
    /// [`DeciderState::schedule`] is.
    #[inline(always)]
    pub(crate) fn schedule_task<'n>(
        &mut self,
        point: u64,
        ids: &[usize],
        name: impl FnOnce(usize) -> &'n str,
    ) -> usize {
        if ids.len() <= 1 {
            return 0;
        }
        self.schedule_among(point, ids.len(), Some(ids), |d, i| {
            Some(d.shared_label(name(i)))
        })
    }

    /// The decision behind [`DeciderState::schedule`] and [`DeciderState::schedule_task`],
    /// which take a single option themselves: `n` is more than one.
    fn schedule_among(
        &mut self,
        point: u64,
        n: usize,
        ids: Option<&[usize]>,
        what: impl FnOnce(&mut Self, usize) -> Option<Arc<str>>,
    ) -> usize {
        debug_assert!(n > 1, "a point with one option takes it without a decision");
        if ids.is_some() {
            self.task_choices += 1;
        }
        let strategy = match (&self.swarm, self.forced) {
            (_, Some(s)) => s,
            (Some(s), None) if self.seed.is_some() => s.schedule,
            _ => Strategy::Uniform,
        };
        let mut replayed_anchor = None;
        let pick = match lazy(&mut self.streams, self.seed, StreamName::Schedule) {
            Some(rng) => match (strategy, ids) {
                (
                    Strategy::Priority {
                        depth,
                        horizon,
                        spawn_order,
                    },
                    Some(ids),
                ) => self.priorities.pick_ids(
                    rng,
                    (depth, horizon, spawn_order),
                    self.task_choices - 1,
                    ids,
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
            self.log.push(anchor.into_event());
            let what = what(self, pick);
            self.log.push(Event::Schedule {
                point,
                pick: pick as u32,
                what,
            });
        }
        pick
    }

    /// The anchor of an event at step `point`: the most recent anchor occurrence (its text
    /// shared) and the steps since.
    pub(crate) fn anchor_at(&self, point: u64) -> Anchor {
        let (after, nth, at) = &self.last_anchor;
        Anchor {
            after: after.clone(),
            nth: *nth,
            offset: point.saturating_sub(*at),
        }
    }

    /// The most recent anchor occurrence (what, nth); its text is shared (cloning it copies
    /// no text).
    pub(crate) fn last_anchor(&self) -> (&Arc<str>, u32) {
        (&self.last_anchor.0, self.last_anchor.1)
    }

    /// An anchor occurrence at step `point` (`ctrl.clear_halt stall`, `dock usb->detached`,
    /// `external unplug`): counted, made the most recent, and, on replay, the picks and
    /// externals anchored to it placed. Returns its occurrence number (the caller arms the
    /// faults anchored to it).
    pub(crate) fn occur(&mut self, key: &str, point: u64) -> u32 {
        let (text, n) = match self.anchor_counts.get_key_value(key) {
            Some((k, n)) => {
                n.set(n.get() + 1);
                (k.clone(), n.get())
            }
            None => {
                let k: Arc<str> = Arc::from(key);
                self.anchor_counts.insert(k.clone(), Cell::new(1));
                (k, 1)
            }
        };
        self.last_anchor.0 = text;
        self.last_anchor.1 = n;
        self.last_anchor.2 = point;
        self.resolve(key, n, point);
        n
    }

    fn resolve(&mut self, key: &str, n: u32, point: u64) {
        if self.pending_picks.is_empty() && self.pending_externals.is_empty() {
            return;
        }
        let hit = |a: &Anchor| &*a.after == key && a.nth == n;
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
        lazy(&mut self.streams, self.seed, StreamName::Externals).map(|r| below(r, n.max(1)))
    }

    /// `f`, drawn by a seeded run at a transfer of `len` payload bytes (or, for a primitive
    /// settled at the reply, `len` reply bytes) that can end early at multiples of `packet`
    /// bytes (`SiteKind::Transfer`'s `packet`), with its parameters drawn from the
    /// primitive's own stream `fault/<name>` ([`fault_param_stream`]; derived on its first
    /// draw in the run, so no other stream moves); `f` as it is when not seeded or when the
    /// primitive has no parameters to draw. The drawn fault is what the run logs and traces,
    /// so a replay injects the same values.
    pub(crate) fn draw_params(&mut self, f: Fault, len: u32, packet: u32) -> Fault {
        let Some(seed) = self.seed else {
            return f;
        };
        let kind = f.kind();
        let params = &mut self.fault_params;
        crate::fault::Fault::drawn(kind, len, packet, &mut |n| {
            let i = match params.iter().position(|(k, _)| *k == kind) {
                Some(i) => i,
                None => {
                    params.push((kind, stream_named(seed, &fault_param_stream(kind))));
                    params.len() - 1
                }
            };
            below(&mut params[i].1, n.max(1))
        })
        .unwrap_or(f)
    }

    /// A raw draw from the faults stream; None when not seeded.
    pub(crate) fn faults_below(&mut self, n: u64) -> Option<u64> {
        lazy(&mut self.streams, self.seed, StreamName::Faults).map(|r| below(r, n.max(1)))
    }

    /// A client draw in `0..n`; None when a replayed list is exhausted (the client stops).
    pub(crate) fn client<'l>(
        &mut self,
        n: u64,
        label: impl FnOnce(u64) -> Option<&'l str>,
    ) -> Option<u64> {
        let v = match lazy(&mut self.streams, self.seed, StreamName::Client) {
            Some(rng) => below(rng, n.max(1)),
            None => match self.source {
                Source::Default => return None,
                _ => self.replay_client.pop_front()?.min(n.saturating_sub(1)),
            },
        };
        let label = label(v).map(|l| self.shared_label(l));
        self.log.push(Event::Client { value: v, label });
        Some(v)
    }

    /// `l` as the run's one shared copy of it (made on first use; a replay starts with its
    /// events' labels), so logging a client action or a task pick allocates no label text it
    /// already has.
    fn shared_label(&mut self, l: &str) -> Arc<str> {
        // A label is usually the same static text each time: its address answers first.
        if let Some(s) = self
            .labels
            .iter()
            .find(|s| std::ptr::eq(&***s, l) || ***s == *l)
        {
            return s.clone();
        }
        let s: Arc<str> = Arc::from(l);
        self.labels.push(s.clone());
        s
    }
}

/// Strategy `s` as one word, distinct for distinct strategies (the variant in the top byte,
/// its fields below), for [`DeciderState::strategy_text`]'s look-up.
fn text_key(s: Strategy) -> u64 {
    match s {
        Strategy::Uniform => 0,
        Strategy::Sticky { keep_percent } => 1 << 56 | u64::from(keep_percent),
        Strategy::Priority {
            depth,
            horizon,
            spawn_order,
        } => 2 << 56 | u64::from(spawn_order) << 48 | u64::from(depth) << 32 | u64::from(horizon),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
        assert!(unapplied(std::slice::from_ref(&g), &log).is_empty());
        let other = Event::GuestExternal {
            name: "unplug".into(),
            at_ns: 6_000,
        };
        assert_eq!(unapplied(&[other], &log), vec![0]);
    }

    #[test]
    fn an_event_is_small_to_copy() {
        // Event lists are copied and dropped a lot (a replay's log, each minimizer candidate);
        // the swarm, far the largest payload, is boxed so an event is 40 bytes, not 88.
        assert!(
            std::mem::size_of::<Event>() <= 48,
            "{}",
            std::mem::size_of::<Event>()
        );
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
            stream: stream.map(Arc::from),
        }
    }

    #[test]
    fn client_labels_are_shared_not_copied() {
        let get: Arc<str> = Arc::from("get_status");
        let client = |value, label: &Arc<str>| Event::Client {
            value,
            label: Some(label.clone()),
        };
        let mut d = Decider::new(Source::Replay(vec![client(1, &get), client(1, &get)]));
        let labels = ["reset", "get_status"];
        for _ in 0..2 {
            assert_eq!(d.client(2, |v| labels.get(v as usize).copied()), Some(1));
        }
        // A seeded run makes one copy of a label, whatever the number of actions logging it.
        let mut s = Decider::new(Source::Seeded(7));
        for _ in 0..8 {
            s.client(2, |v| labels.get(v as usize).copied());
        }
        let shared = |log: &[Event], want: &Arc<str>| {
            log.iter().all(|e| match e {
                Event::Client { label: Some(l), .. } => Arc::ptr_eq(l, want),
                _ => false,
            })
        };
        assert_eq!(d.log, vec![client(1, &get), client(1, &get)]);
        assert!(shared(&d.log, &get), "the replay's own label: {:?}", d.log);
        for (k, e) in s.log.iter().enumerate() {
            let Event::Client { label: Some(l), .. } = e else {
                panic!("{e:?}");
            };
            let first = s.log.iter().find(|f| f == &e).unwrap();
            assert!(shared(&s.log[k..=k], first_label(first)), "{:?}", s.log);
            assert!(labels.contains(&&**l));
        }
        // And in JSON a label is still a plain string.
        let json = serde_json::to_string(&client(1, &get)).unwrap();
        assert_eq!(json, r#"{"event":"client","value":1,"label":"get_status"}"#);
        assert_eq!(
            serde_json::from_str::<Event>(&json).unwrap(),
            client(1, &get)
        );
    }

    #[test]
    fn anchors_and_pick_labels_are_shared_not_copied() {
        let mut d = Decider::new(Source::Seeded(3));
        assert_eq!(&*d.anchor_at(4).after, Anchor::START);
        assert_eq!(d.occur("dock usb->attached", 5), 1);
        let (a, b) = (d.anchor_at(7), d.anchor_at(9));
        assert!(
            Arc::ptr_eq(&a.after, &b.after),
            "one copy of the anchor's text"
        );
        assert_eq!((a.nth, a.offset, b.offset), (1, 2, 4));
        let Event::Anchor { after, .. } = a.event() else {
            unreachable!()
        };
        assert!(Arc::ptr_eq(&after, &a.after), "its event shares it too");
        // A second occurrence of the same anchor shares the first one's text.
        d.occur("external unplug", 10);
        assert_eq!(d.occur("dock usb->attached", 11), 2);
        assert!(Arc::ptr_eq(&d.anchor_at(12).after, &a.after));
        // Task picks: each task's name is one shared label, whatever the number of picks.
        let names = ["a", "b", "c"];
        for point in 0..64 {
            d.schedule_task(point, &[0, 1, 2], |i| names[i]);
        }
        let mut seen: Vec<Arc<str>> = Vec::new();
        for e in &d.log {
            if let Event::Schedule { what, pick, .. } = e {
                let w = what.as_ref().expect("a task pick is labelled");
                assert_eq!(&**w, names[*pick as usize]);
                match seen.iter().find(|s| ***s == **w) {
                    Some(s) => assert!(Arc::ptr_eq(s, w)),
                    None => seen.push(w.clone()),
                }
            }
        }
        assert_eq!(seen.len(), 2, "picks b and c were logged: {:?}", d.log);
        // In JSON both are plain strings, as before.
        let e = a.event();
        let j = serde_json::to_string(&e).unwrap();
        assert_eq!(
            j,
            r#"{"event":"anchor","after":"dock usb->attached","nth":1,"offset":2}"#
        );
        assert_eq!(serde_json::from_str::<Event>(&j).unwrap(), e);
        let s = Event::Schedule {
            point: 3,
            pick: 1,
            what: Some("b".into()),
        };
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(j, r#"{"event":"schedule","point":3,"pick":1,"what":"b"}"#);
        assert_eq!(serde_json::from_str::<Event>(&j).unwrap(), s);
        let bare = r#"{"event":"schedule","point":3,"pick":1}"#;
        let Event::Schedule { what: None, .. } = serde_json::from_str::<Event>(bare).unwrap()
        else {
            panic!("a pick without a label reads as one");
        };
    }

    #[test]
    fn a_seeded_log_has_room_for_what_the_last_seeded_run_took() {
        let run = |source: Source, events: usize| {
            let mut d = Decider::new(source);
            let room = d.log.capacity();
            for _ in 0..events {
                d.client(3, |_| None);
            }
            let log = d.take_log();
            (room, log)
        };
        let (room, log) = run(Source::Seeded(1), 40);
        assert!(room >= SEEDED_LOG);
        assert_eq!(log.len(), 40);
        // A replay in between leaves the count as it was; its log takes the replayed events'.
        let (room, _) = run(Source::Replay(log.clone()), 40);
        assert!(room >= 40);
        let (room, _) = run(Source::Seeded(2), 3);
        assert!(room >= 40, "{room}");
        let (room, _) = run(Source::Seeded(3), 0);
        assert!((SEEDED_LOG..40).contains(&room), "{room}");
        // However long the last run, the first reservation stays bounded.
        run(Source::Seeded(4), 10_000);
        let (room, _) = run(Source::Seeded(5), 0);
        assert!(
            (SEEDED_LOG_MAX..2 * SEEDED_LOG_MAX).contains(&room),
            "{room}"
        );
    }

    fn first_label(e: &Event) -> &Arc<str> {
        match e {
            Event::Client { label: Some(l), .. } => l,
            _ => panic!("{e:?}"),
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
    fn a_reused_decider_decides_as_a_new_one() {
        // The thread's decider state is reused run to run (names, buffers): a run on it takes
        // the same decisions, logs the same events and counts its anchors from 1 again.
        let take = |d: &mut Decider| {
            let mut v = Vec::new();
            for k in 0..3 {
                assert_eq!(d.occur("dock usb->attached", k), k as u32 + 1);
                v.push(d.data("a", 1000));
                v.push(d.user("r", 7));
                v.push(d.client(5, |_| Some("get")).unwrap_or(99));
                v.push(d.faults_below(24).unwrap_or(99));
                v.push(d.externals_below(64).unwrap_or(99));
                let pick = d.schedule(k, 4);
                if pick != 0 {
                    d.label_pick(format!("event {pick}"));
                }
                v.push(pick as u64);
                v.push(d.data("b", 1000));
            }
            v
        };
        let fresh = {
            let mut d = Decider::new(Source::Seeded(9));
            (take(&mut d), d.log.clone())
        };
        // A replay in between (it answers no fault or external draw: those are its events).
        let mut r = Decider::new(Source::Replay(fresh.1.clone()));
        take(&mut r);
        assert_eq!(r.log, fresh.1);
        drop(r);
        for _ in 0..2 {
            let mut d = Decider::new(Source::Seeded(9));
            assert_eq!((take(&mut d), d.log.clone()), fresh);
            let mut other = Decider::new(Source::Seeded(10));
            assert_ne!(take(&mut other), fresh.0);
        }
        let mut d = Decider::new(Source::Default);
        assert_eq!(d.data("a", 10), 0);
        let (after, nth) = d.last_anchor();
        assert_eq!((&**after, nth), (Anchor::START, 1));
        assert!(d.log.is_empty());
    }

    #[test]
    fn a_kept_strategy_text_is_the_strategys_text() {
        let mut all = vec![Strategy::Uniform];
        for keep_percent in [1, 5, 50, 75, 90, 99] {
            all.push(Strategy::Sticky { keep_percent });
        }
        for depth in 1..=8 {
            for horizon in [1, 2, 16, 40, 255, 256, 65_536, u32::MAX] {
                for spawn_order in [false, true] {
                    all.push(Strategy::Priority {
                        depth,
                        horizon,
                        spawn_order,
                    });
                }
            }
        }
        // Twice, in two orders, on the decider the thread keeps: each text is its own.
        for _ in 0..2 {
            let mut d = Decider::new(Source::Seeded(1));
            for s in all.iter().chain(all.iter().rev()) {
                let i = d.strategy_text(*s);
                assert_eq!(d.text_at(i), s.to_string(), "{s:?}");
            }
        }
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
