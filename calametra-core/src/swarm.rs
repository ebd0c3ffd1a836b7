//! Swarm configurations: what a seeded run explores, drawn before it starts.
//!
//! Swarm testing (Groce et al., ISSTA 2012) varies not only the choices of a run but which
//! features a run may use at all: a run with timeouts off reaches deeper than one that times out
//! at every tenth transfer, a run without the unplug explores the plugged driver. So each seeded
//! run (`Source::Seeded` with `RunConfig::swarm`, as the `seed::` trials and sweeps make them)
//! first draws a [`Swarm`] from its own `swarm` stream, a pure function of the seed and the
//! scenario's fault set and external names:
//!
//! - the fault primitives that are on: a non-empty subset of the scenario's fault set (each on
//!   with odds 1/2; when none came up, one of them); the six primitives swarms came with take
//!   one `swarm` draw each whatever the set, a primitive added after them one draw from its
//!   own stream `swarm/<name>` only when the set holds it ([`SWARM_STREAM_PRIMITIVES`]), so
//!   adding a primitive changes no run of a scenario that does not ask for it;
//! - the site families that are on (`ctrl`, `bulk.out`, `bulk.in`, `intr.in`, `transition`): a
//!   non-empty subset of the families where one of those primitives means something, each on
//!   with odds 3/4 (a scenario crosses only some families, often control transfers alone, and
//!   a run whose families are all off injects nothing: at 1/2, half the runs of a DFU update
//!   were fault-free);
//! - the fault density: one crossing of an enabled site in [`DENSITIES`] (32, 48, 64, 96 or
//!   128) faults;
//! - which of the scenario's externals may fire (each with odds 1/2; possibly none);
//! - the scheduling [`Strategy`] and its parameters: uniform, sticky, or priorities with
//!   change points (PCT-like, a yield a scheduling point and not a forced switch) over a
//!   multiple of the scenario's length, one draw for the kind and one for its parameters.
//!
//! A scenario that explores no faults (its fault set is empty) has a swarm without a faults
//! part ([`Swarm::strategy_only`]: no primitives, no families, `odds` 0): its strategy is the
//! `schedule` stream's first two draws (the kind, then its parameters), so such a run derives
//! no `swarm` stream at all unless the scenario declares externals, which are then drawn from
//! the `swarm` stream, one draw each. The menu and its odds are the same, so a fault-free
//! scenario's runs explore the same strategies; what they no longer pay for is a stream and a
//! record of parts they cannot use (on the peers' workload A, a tenth of a run).
//!
//! A seeded run may combine several faults, as before; the swarm only narrows where and how often.
//! The run records its swarm as the first record of its trace (kind `config`) and as an
//! [`Event::Swarm`](crate::choices::Event::Swarm), so a replay writes the same record and
//! reproduces the hash, and [`RunResult::swarm`](crate::sim::RunResult::swarm) carries it for
//! the failure screen. The baseline and `site::` trials draw no swarm. The record's fields are
//! the swarm's: `faults`, `sites`, `odds`, `externals`, `schedule`; a swarm without a faults
//! part whose lists are all empty (as drawn: no external on) records `schedule` alone
//! ([`Swarm::records_schedule_alone`]). Which form is written follows from the swarm itself,
//! so a replay writes the record its case was saved with (a swarm saved before swarms without
//! a faults part existed has its `odds` and so its five fields).
//!
//! The `swarm` stream's layout does not depend on the scenario: every menu takes one 64-bit
//! draw whatever the set offers, and the externals' draws come last, one each in declaration
//! order, so adding an external at the end changes nothing else of the swarm.

use crate::fault::{Fault, FaultKind, FaultSet, SiteFamily};
use crate::stream::{below, stream, stream_named, StreamName};
use rand_chacha::ChaCha8Rng;
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// The fault densities a swarm picks from: one crossing in this many faults.
///
/// Sparser than the fixed 1 in 24 of seeded runs before swarms, on measurement: a swarm
/// concentrates its faults on a few primitives and families (and turns `disconnect`, which used
/// to end most faulted runs early, off in half its runs), so a long run under a dense swarm
/// mostly measures a driver's retry budget. The tolerant DFU update (`examples/dfu-updater`,
/// faults = all, eight attempts of some hundred fault-site crossings) gave up or ran out of
/// virtual time in 111 of 263 swarm runs at 1 in 4, 66/241 at 1 in 8, 28/250 at 1 in 16,
/// 7/246 at 1 in 24, 2/394 at 1 in 32, 0/425 at 1 in 48, 0/404 at 1 in 64, 1/370 at 1 in 96 and
/// 0/407 at 1 in 128 (before swarms: 0 of 2000), each minimized to eight faults that each ended
/// an attempt. A give-up stays possible at any density: it is what a bounded retry does.
pub const DENSITIES: [u32; 5] = [32, 48, 64, 96, 128];

/// The odds (in percent) with which a sticky schedule keeps the first option.
pub const STICKY_PERCENTS: [u8; 3] = [50, 75, 90];

/// The depths a swarm's priority strategy aims at (one or two change points): mostly one, as
/// in preemption-bounded search, where most bugs need a single preemption (see the swarm's
/// strategy menu, `STRATEGY_MENU`, for the measurements).
pub const PRIORITY_DEPTHS: [u8; 4] = [2, 2, 2, 3];

/// The multiples of the scenario's length in task choices
/// ([`RunConfig::change_point_horizon`](crate::RunConfig::change_point_horizon)) over which a swarm's priority
/// strategy draws its change points: mostly the length itself (a change point anywhere in a
/// run like the baseline), sometimes twice it (runs that faults or externals make longer).
pub const PRIORITY_SCALES: [u64; 4] = [1, 1, 1, 2];

/// A strategy's kind in the swarm's menu; its parameters come from one more draw.
#[derive(Clone, Copy)]
enum Kind {
    Uniform,
    Sticky,
    Priority { spawn_order: bool },
}

/// The swarm's menu of strategies, one draw: uniform 2/16, sticky 1/16, priority 13/16
/// (random initial priorities 3/16, spawn order 10/16).
///
/// Measured on the peers' workload A (`calametra-core/tests/priority.rs`'s probe, 4,000 seeds
/// each, change points over the baseline's task choices: 8 without yields, 12 with), a run
/// finds the race with odds, without yields (with them): uniform 3.7% (1.7%), sticky 4.9%,
/// 1.6%, 0.1% at 50/75/90 (2.7%, 1.4%, 0.1%), priority with random initial priorities 6.1%
/// (8.6%) at depth 2 and 5.0% (6.7%) at depth 3 over the baseline's length, half that over
/// twice it, and in spawn order 12.6% (16.6%) at depth 2 and 7.6% (10.0%) at depth 3. Spawn
/// order with one change point is the default run with one preemption, where most
/// concurrency bugs need no more (as preemption-bounded search found), so most of the menu is
/// there; uniform, sticky and random priorities keep runs far from the default order coming.
/// The whole menu finds the race with odds 8.9% (10.0%), where shuttle's uniformly random
/// scheduler does with 6.4% (2.2%) on the same workload.
const STRATEGY_MENU: [Kind; 16] = [
    Kind::Uniform,
    Kind::Uniform,
    Kind::Sticky,
    Kind::Priority { spawn_order: false },
    Kind::Priority { spawn_order: false },
    Kind::Priority { spawn_order: false },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
    Kind::Priority { spawn_order: true },
];

/// How a seeded run picks among the ready tasks (or simultaneous events) at a scheduling point.
///
/// Each strategy draws from the `schedule` stream only. A strategy is a variant here, its
/// parameters in the variant, its pick in [`Strategy::pick`] (or, for one that needs to know
/// which task an option is, in [`Priorities`]), its name in `Display`/`FromStr`, and an entry
/// in the swarm's menu.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(into = "String", try_from = "String")]
pub enum Strategy {
    /// Every option equally likely (the baseline's and every swarm-less seeded run's).
    Uniform,
    /// The first option (the lowest-numbered ready task, the earliest queued event: what the
    /// default run takes) with odds `keep_percent`/100, otherwise one of the others, uniformly:
    /// runs that stay close to the default order and deviate at a few points.
    Sticky {
        /// The odds of keeping the first option, in percent (1..=99).
        keep_percent: u8,
    },
    /// Priorities in the spirit of PCT (Burckhardt et al., ASPLOS 2010): every task gets a
    /// random priority when it is first among the options of a choice, the highest-priority
    /// ready task runs, and at `depth - 1` change points, drawn among the run's first
    /// `horizon` task choices, the task that would run is lowered below every other. A yield
    /// is a scheduling point like any other, not a forced switch: the yielding task is ready
    /// again with its priority, so it keeps running until a change point lowers it (PCT as
    /// shuttle implements it lowers a yielding thread, and loom does not run it while another
    /// can, so neither makes the orders where a task runs on across its yields). Choices
    /// among simultaneous events are uniform. See [`Priorities`].
    Priority {
        /// The bug depth aimed at: `depth - 1` change points (1..=8).
        depth: u8,
        /// The task choices over which the change points are drawn. A swarm draws it as a
        /// multiple of the scenario's length (`RunConfig::change_point_horizon`: the
        /// baseline's task choices under the harness).
        horizon: u32,
        /// Initial priorities in spawn order (the first-spawned task highest: the default
        /// run's order, with `depth - 1` preemptions at random points, as preemption-bounded
        /// search starts from) instead of random ones.
        spawn_order: bool,
    },
}

impl Strategy {
    /// Picks one of `n` (> 1) options that are not tasks (simultaneous events), or tasks under
    /// a strategy that does not tell them apart. [`Strategy::Priority`] picks tasks through
    /// [`Priorities::pick`]; among events it picks uniformly. Inlined into the decider's
    /// pick (a call was a third of its cost).
    #[inline]
    pub fn pick(self, rng: &mut ChaCha8Rng, n: usize) -> usize {
        match self {
            Strategy::Uniform | Strategy::Priority { .. } => below(rng, n as u64) as usize,
            Strategy::Sticky { keep_percent } => {
                if below(rng, 100) < u64::from(keep_percent) {
                    0
                } else {
                    1 + below(rng, (n as u64).saturating_sub(1).max(1)) as usize
                }
            }
        }
    }
}

impl Strategy {
    /// The priority strategy a swarm draws from one 64-bit `param` for a scenario about
    /// `horizon` task choices long: a depth from [`PRIORITY_DEPTHS`], change points over a
    /// multiple of the horizon from [`PRIORITY_SCALES`] (at least 2 choices).
    pub fn priority_from(param: u64, horizon: u64, spawn_order: bool) -> Strategy {
        let depth = PRIORITY_DEPTHS[(param % PRIORITY_DEPTHS.len() as u64) as usize];
        let scale = PRIORITY_SCALES[((param >> 16) % PRIORITY_SCALES.len() as u64) as usize];
        Strategy::Priority {
            depth,
            horizon: u32::try_from(horizon.max(2).saturating_mul(scale)).unwrap_or(u32::MAX),
            spawn_order,
        }
    }
}

/// A strategy's text ([`Strategy::text`]), kept on the stack: the longest,
/// `priority(d=255,h=4294967295,spawn)`, is 34 bytes.
#[derive(Clone, Copy)]
pub struct StrategyText {
    buf: [u8; 40],
    len: usize,
}

impl StrategyText {
    fn push(&mut self, s: &str) {
        self.buf[self.len..self.len + s.len()].copy_from_slice(s.as_bytes());
        self.len += s.len();
    }

    /// `v` in decimal, at least `width` digits (zero-padded).
    fn push_uint(&mut self, v: u64, width: usize) {
        let mut digits = [0u8; 20];
        let (mut v, mut n) = (v, 0);
        while v > 0 || n < width.max(1) {
            digits[n] = b'0' + (v % 10) as u8;
            v /= 10;
            n += 1;
        }
        for k in (0..n).rev() {
            self.buf[self.len] = digits[k];
            self.len += 1;
        }
    }
}

impl std::ops::Deref for StrategyText {
    type Target = str;
    fn deref(&self) -> &str {
        // Only ASCII is ever pushed.
        std::str::from_utf8(&self.buf[..self.len]).unwrap_or("")
    }
}

impl Strategy {
    /// The strategy's name as `Display` writes it, without the formatting machinery or an
    /// allocation (every swarm run writes it in its `config` record).
    pub fn text(self) -> StrategyText {
        let mut t = StrategyText {
            buf: [0; 40],
            len: 0,
        };
        match self {
            Strategy::Uniform => t.push("uniform"),
            Strategy::Priority {
                depth,
                horizon,
                spawn_order,
            } => {
                t.push("priority(d=");
                t.push_uint(u64::from(depth), 1);
                t.push(",h=");
                t.push_uint(u64::from(horizon), 1);
                t.push(if spawn_order { ",spawn)" } else { ")" });
            }
            Strategy::Sticky { keep_percent } => {
                let p = keep_percent;
                t.push("sticky(0.");
                if p % 10 == 0 {
                    t.push_uint(u64::from(p / 10), 1);
                } else {
                    t.push_uint(u64::from(p), 2);
                }
                t.push(")");
            }
        }
        t
    }
}

impl fmt::Display for Strategy {
    /// `uniform`, `sticky(0.75)`, `priority(d=2,h=16)`, `priority(d=3,h=40,spawn)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text())
    }
}

impl FromStr for Strategy {
    type Err = String;
    fn from_str(s: &str) -> Result<Strategy, String> {
        if s == "uniform" {
            return Ok(Strategy::Uniform);
        }
        let bad = || {
            format!(
                "`{s}` is not a schedule strategy; expected uniform, sticky(0.75) or priority(d=2,h=16)"
            )
        };
        if let Some(args) = s
            .strip_prefix("priority(d=")
            .and_then(|r| r.strip_suffix(')'))
        {
            let (args, spawn_order) = match args.strip_suffix(",spawn") {
                Some(a) => (a, true),
                None => (args, false),
            };
            let (d, h) = args.split_once(",h=").ok_or_else(bad)?;
            let digits =
                |x: &str| !x.is_empty() && x.len() <= 9 && x.bytes().all(|b| b.is_ascii_digit());
            if !digits(d) || !digits(h) {
                return Err(bad());
            }
            let depth: u8 = d.parse().map_err(|_| bad())?;
            let horizon: u32 = h.parse().map_err(|_| bad())?;
            if !(1..=8).contains(&depth) || horizon == 0 {
                return Err(bad());
            }
            return Ok(Strategy::Priority {
                depth,
                horizon,
                spawn_order,
            });
        }
        let p = s
            .strip_prefix("sticky(0.")
            .and_then(|r| r.strip_suffix(')'))
            .ok_or_else(bad)?;
        if p.is_empty() || p.len() > 2 || !p.bytes().all(|b| b.is_ascii_digit()) {
            return Err(bad());
        }
        let v: u8 = p.parse().map_err(|_| bad())?;
        let keep_percent = if p.len() == 1 { v * 10 } else { v };
        if keep_percent == 0 {
            return Err(bad());
        }
        Ok(Strategy::Sticky { keep_percent })
    }
}

impl From<Strategy> for String {
    fn from(s: Strategy) -> String {
        s.to_string()
    }
}

impl TryFrom<String> for Strategy {
    type Error = String;
    fn try_from(s: String) -> Result<Strategy, String> {
        s.parse()
    }
}

/// What a [`Strategy::Priority`] run remembers between its choices: each task's priority and
/// the change points. Everything is drawn from the `schedule` stream, in a fixed order: the
/// `depth - 1` change points at the run's first task choice, then a task's priority when it is
/// first among the options of a task choice (options in their stable order, lowest task id
/// first). So the run is a pure function of its seed; its picks are logged and replayed as
/// every strategy's are.
///
/// A change point is the index of a task choice (a scheduling point where two or more tasks
/// are ready) in `0..horizon`: PCT draws its change points over steps, but one at a step where
/// a single task is ready changes nothing there, so counting only the choices spends every
/// change point where it can reorder something (the workload A race of `benches/peers` makes 8
/// task choices in 10 steps). At its choice, the task that would run is lowered below every
/// other (the `j`th change point's task to priority `j + 1`).
#[derive(Clone, Debug, Default)]
pub struct Priorities {
    /// Each task's priority by task id (0: not yet drawn). Drawn priorities lie in
    /// `2^32..2^33`, above every change point's (`1..depth`), so 0 is never one.
    prio: Vec<u64>,
    /// The change points (task choice indices) not yet taken, with their index; drawn at the
    /// first choice (`drawn`).
    changes: Vec<(u64, u64)>,
    /// Whether the change points are drawn.
    drawn: bool,
}

impl Priorities {
    /// As [`Priorities::default`], keeping its buffers (a decider reused by the thread's next
    /// run allocates no table).
    pub(crate) fn reset(&mut self) {
        self.prio.clear();
        self.changes.clear();
        self.drawn = false;
    }

    /// Picks one of `n` (> 1) ready tasks at the run's task choice number `choice` (from 0);
    /// `id_of(i)` is the task id of option `i`.
    pub fn pick(
        &mut self,
        rng: &mut ChaCha8Rng,
        (depth, horizon, spawn_order): (u8, u32, bool),
        choice: u64,
        n: usize,
        id_of: &dyn Fn(usize) -> usize,
    ) -> usize {
        // Each option's task id, asked once (finding the `i`th ready task walks the ready set).
        let mut few = [0usize; 8];
        let many: Vec<usize>;
        let ids: &[usize] = if n <= few.len() {
            for (i, slot) in few[..n].iter_mut().enumerate() {
                *slot = id_of(i);
            }
            &few[..n]
        } else {
            many = (0..n).map(id_of).collect();
            &many
        };
        self.pick_ids(rng, (depth, horizon, spawn_order), choice, ids)
    }

    /// [`Priorities::pick`] among the tasks `ids` (option `i` is task `ids[i]`, more than
    /// one): the run loop's ready list as it is, no id asked for through a closure. Inlined
    /// into the decider's pick, its one caller.
    #[inline]
    pub(crate) fn pick_ids(
        &mut self,
        rng: &mut ChaCha8Rng,
        (depth, horizon, spawn_order): (u8, u32, bool),
        choice: u64,
        ids: &[usize],
    ) -> usize {
        if !self.drawn {
            self.drawn = true;
            self.changes.clear();
            for j in 1..depth.max(1) {
                let at = below(rng, u64::from(horizon.max(1)));
                self.changes.push((at, u64::from(j)));
            }
        }
        // One pass: each option's task gets its priority when it has none (drawn in option
        // order), and the highest so far is kept (the first of equals).
        let (mut best, mut best_p) = (0, 0);
        for (i, &id) in ids.iter().enumerate() {
            if self.prio.len() <= id {
                self.prio.resize(id + 1, 0);
            }
            let p = &mut self.prio[id];
            if *p == 0 {
                *p = if spawn_order {
                    (1 << 32) | (u64::from(u32::MAX) - id as u64)
                } else {
                    (1 << 32) | (rng.next_u64() >> 32)
                };
            }
            if i == 0 || *p > best_p {
                best = i;
                best_p = *p;
            }
        }
        if self.changes.iter().all(|&(at, _)| at > choice) {
            return best;
        }
        // A change point here: the task that would run (`best` first) is lowered below every
        // other, for each change point due (in the order drawn), the top found again after each.
        let top = |prio: &[u64]| {
            let mut best = 0;
            let mut best_p = 0;
            for (i, &id) in ids.iter().enumerate() {
                let p = prio[id];
                if i == 0 || p > best_p {
                    best = i;
                    best_p = p;
                }
            }
            best
        };
        let mut k = 0;
        while k < self.changes.len() {
            if self.changes[k].0 <= choice {
                let (_, j) = self.changes.remove(k);
                self.prio[ids[best]] = j;
                best = top(&self.prio);
            } else {
                k += 1;
            }
        }
        best
    }
}

/// The configuration a seeded run draws before it starts (see the module doc).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Swarm {
    /// The fault primitives that are on, in [`FaultKind::ALL`] order; empty when the scenario
    /// explores no faults.
    pub faults: Vec<FaultKind>,
    /// The site families where they may be injected, in [`SiteFamily::ALL`] order.
    pub sites: Vec<SiteFamily>,
    /// One crossing of an enabled site in `odds` gets a fault; 0 for a swarm without a faults
    /// part ([`Swarm::strategy_only`]).
    pub odds: u32,
    /// The scenario's externals that may fire, in declaration order.
    pub externals: Vec<String>,
    /// How the run schedules.
    pub schedule: Strategy,
}

/// One 64-bit draw mapped onto `0..n`: every menu takes exactly one draw, so the stream's
/// layout does not depend on the menu's size (the bias for menus this small is below 2^-59).
fn menu(rng: &mut ChaCha8Rng, n: usize) -> usize {
    (rng.next_u64() % n.max(1) as u64) as usize
}

/// Each of `all` members on with odds `on_in_4`/4 (one draw each); when none of `allowed` (a
/// set of members, bit `i` for `all[i]`) came up, one of them: the `k`th allowed member in
/// `all` order for one more draw `k` (taken whatever came up). Sets as bits: no list is built
/// for the draws, the set given or the members in between (the menus have 5 and 6).
fn subset(rng: &mut ChaCha8Rng, all: usize, allowed: u64, on_in_4: u64) -> u64 {
    debug_assert!(all <= 64);
    let mut bits = 0u64;
    for i in 0..all {
        if rng.next_u64() % 4 < on_in_4 {
            bits |= 1 << i;
        }
    }
    // The fallback's draw is taken whatever came up; mapped onto the allowed members (a
    // division) only when it is used.
    let fallback = rng.next_u64();
    let on = bits & allowed;
    if on == 0 && allowed != 0 {
        nth_bit(
            allowed,
            (fallback % u64::from(allowed.count_ones())) as usize,
        )
    } else {
        on
    }
}

/// The `k`th set bit of `bits` (from the lowest), alone.
fn nth_bit(mut bits: u64, k: usize) -> u64 {
    for _ in 0..k {
        bits &= bits - 1;
    }
    bits & bits.wrapping_neg()
}

/// How many fault primitives take their on/off draw from the `swarm` stream: the six that
/// existed when swarms came (the table's first six, `stall` to `corrupt`), one draw each in
/// table order whatever the scenario explores. Each primitive after them takes its draw from
/// its own stream, `swarm/<name>` ([`own_stream`]), and only when the scenario's set holds
/// it: a primitive added to the table moves no draw, so no run, of a scenario that does not
/// ask for it.
pub const SWARM_STREAM_PRIMITIVES: usize = 6;

/// The stream a primitive after the first [`SWARM_STREAM_PRIMITIVES`] draws its swarm
/// on/off from: `swarm/<name>`.
pub fn own_stream(kind: FaultKind) -> String {
    format!("swarm/{}", kind.as_str())
}

/// The fault primitives that are on (bits over [`FaultKind::ALL`]): as [`subset`] with odds
/// 2/4 over the first [`SWARM_STREAM_PRIMITIVES`] (their draws and the fallback's from the
/// `swarm` stream `rng`, taken whatever the scenario explores), each later primitive that
/// `allowed` holds on with odds 2/4 by one draw from its own stream of `seed`.
fn primitive_subset(rng: &mut ChaCha8Rng, seed: u64, allowed: u64) -> u64 {
    let mut bits = 0u64;
    for i in 0..SWARM_STREAM_PRIMITIVES.min(FaultKind::COUNT) {
        if rng.next_u64() % 4 < 2 {
            bits |= 1 << i;
        }
    }
    let fallback = rng.next_u64();
    for (i, kind) in FaultKind::ALL
        .iter()
        .enumerate()
        .skip(SWARM_STREAM_PRIMITIVES)
    {
        if allowed & (1 << i) != 0 && stream_named(seed, &own_stream(*kind)).next_u64() % 4 < 2 {
            bits |= 1 << i;
        }
    }
    let on = bits & allowed;
    if on == 0 && allowed != 0 {
        nth_bit(
            allowed,
            (fallback % u64::from(allowed.count_ones())) as usize,
        )
    } else {
        on
    }
}

/// The members of `all` whose bit is set in `bits`, in `all` order (one allocation, none
/// when empty).
fn members<T: Copy>(all: &[T], bits: u64) -> Vec<T> {
    let mut v = Vec::with_capacity(bits.count_ones() as usize);
    v.extend(
        all.iter()
            .enumerate()
            .filter(|&(i, _)| bits & (1 << i) != 0)
            .map(|(_, x)| *x),
    );
    v
}

/// Bit `i` set where `keep(all[i])`.
fn bits_of<T>(all: &[T], keep: impl Fn(&T) -> bool) -> u64 {
    all.iter()
        .enumerate()
        .filter(|(_, x)| keep(x))
        .fold(0, |b, (i, _)| b | 1 << i)
}

impl Swarm {
    /// The swarm of `seed` for a scenario exploring `fault_set` with these externals (names in
    /// declaration order) whose runs make about `horizon` task choices
    /// (`RunConfig::change_point_horizon`: the harness sets the baseline's; a priority
    /// strategy's change points are drawn over a multiple of it). A pure function: the same
    /// arguments give the same swarm. An empty `fault_set` gives a swarm without a faults part
    /// (see the module doc).
    pub fn draw(seed: u64, fault_set: &FaultSet, externals: &[&str], horizon: u64) -> Swarm {
        if fault_set.kind_bits() == 0 {
            let mut swarm = Swarm::strategy_only(Swarm::draw_strategy(
                &mut stream(seed, StreamName::Schedule),
                horizon,
            ));
            if !externals.is_empty() {
                swarm.draw_externals(&mut stream(seed, StreamName::Swarm), externals);
            }
            return swarm;
        }
        let (mut swarm, mut rng) = Swarm::draw_open(seed, fault_set, horizon);
        swarm.draw_externals(&mut rng, externals);
        swarm
    }

    /// The first part of [`Swarm::draw`]: everything but the externals (none yet), and the
    /// `swarm` stream where it stopped, for [`Swarm::draw_externals`] once the scenario has
    /// declared them. The two together draw exactly what [`Swarm::draw`] draws.
    pub(crate) fn draw_open(seed: u64, fault_set: &FaultSet, horizon: u64) -> (Swarm, ChaCha8Rng) {
        let mut rng = stream(seed, StreamName::Swarm);
        let swarm = Swarm::draw_open_from(&mut rng, seed, fault_set, horizon);
        (swarm, rng)
    }

    /// [`Swarm::draw_open`] from the `swarm` stream `rng` of `seed` where it is kept (a
    /// decider's slot, [`crate::choices::DeciderState::open_swarm`]: the stream is not moved),
    /// left where the draw stopped.
    pub(crate) fn draw_open_from(
        rng: &mut ChaCha8Rng,
        seed: u64,
        fault_set: &FaultSet,
        horizon: u64,
    ) -> Swarm {
        // As bits until the two lists are made: what `FaultSet::kinds` and
        // `FaultSet::reaches` answer, without a list for each question.
        let kinds = fault_set.kind_bits();
        let faults = primitive_subset(rng, seed, kinds);
        let families = bits_of(&SiteFamily::ALL, |f| {
            f.takes_any(faults) && fault_set.reaches_with(*f, kinds)
        });
        let mut sites = subset(rng, SiteFamily::ALL.len(), families, 3);
        if faults == 0 {
            sites = 0;
        }
        let (faults, sites) = (
            members(&FaultKind::ALL, faults),
            members(&SiteFamily::ALL, sites),
        );
        let odds = DENSITIES[menu(rng, DENSITIES.len())];
        Swarm {
            faults,
            sites,
            odds,
            externals: Vec::new(),
            schedule: Swarm::draw_strategy(rng, horizon),
        }
    }

    /// A scheduling strategy from the swarm's menu, two draws from `rng` (the kind, then its
    /// parameters), for a scenario about `horizon` task choices long: the last two draws of
    /// [`Swarm::draw_open_from`], and all a [`Swarm::strategy_only`] swarm draws but its
    /// externals.
    pub(crate) fn draw_strategy(rng: &mut ChaCha8Rng, horizon: u64) -> Strategy {
        let kind = STRATEGY_MENU[menu(rng, STRATEGY_MENU.len())];
        let param = rng.next_u64();
        match kind {
            Kind::Uniform => Strategy::Uniform,
            Kind::Sticky => Strategy::Sticky {
                keep_percent: STICKY_PERCENTS[(param % STICKY_PERCENTS.len() as u64) as usize],
            },
            Kind::Priority { spawn_order } => Strategy::priority_from(param, horizon, spawn_order),
        }
    }

    /// The swarm of a scenario that explores no faults: no faults part (`odds` 0, no
    /// primitives, no families), no externals yet, and `schedule`.
    pub fn strategy_only(schedule: Strategy) -> Swarm {
        Swarm {
            faults: Vec::new(),
            sites: Vec::new(),
            odds: 0,
            externals: Vec::new(),
            schedule,
        }
    }

    /// Whether this swarm has a faults part (`odds` above 0): every swarm drawn for a
    /// scenario that explores faults, and those drawn before swarms without one existed.
    pub fn has_faults_part(&self) -> bool {
        self.odds != 0
    }

    /// Whether the `config` record of this swarm is its schedule alone: a swarm without a
    /// faults part whose lists are all empty, externals included (see the module doc). A
    /// swarm read from an edited file with primitives but `odds` 0 records all five fields,
    /// so nothing it holds is left out of the trace.
    pub fn records_schedule_alone(&self) -> bool {
        !self.has_faults_part()
            && self.faults.is_empty()
            && self.sites.is_empty()
            && self.externals.is_empty()
    }

    /// The last part of [`Swarm::draw`]: which of the scenario's externals (names in declaration
    /// order) may fire, one draw each from the `swarm` stream where [`Swarm::draw_open`] left it.
    pub(crate) fn draw_externals(&mut self, rng: &mut ChaCha8Rng, externals: &[&str]) {
        self.externals = externals
            .iter()
            .filter(|_| rng.next_u64() & 1 == 1)
            .map(|s| s.to_string())
            .collect();
    }

    /// Whether `fault` may be injected at a site of `family`.
    pub fn allows(&self, fault: &Fault, family: SiteFamily) -> bool {
        self.sites.contains(&family) && self.faults.contains(&fault.kind())
    }

    /// Whether `family` is on (and some primitive with it).
    pub fn reaches(&self, family: SiteFamily) -> bool {
        !self.faults.is_empty() && self.sites.contains(&family)
    }

    /// Whether the external `name` may fire.
    pub fn allows_external(&self, name: &str) -> bool {
        self.externals.iter().any(|e| e == name)
    }
}

fn list<T: fmt::Display>(f: &mut fmt::Formatter<'_>, items: &[T]) -> fmt::Result {
    for (i, x) in items.iter().enumerate() {
        if i > 0 {
            f.write_str(", ")?;
        }
        write!(f, "{x}")?;
    }
    Ok(())
}

impl fmt::Display for Swarm {
    /// One line: `swarm: faults [stall, timeout] at ctrl, bulk.out; 1 in 32 crossings;
    /// externals [unplug]; schedule sticky(0.75)`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("swarm: ")?;
        if self.faults.is_empty() {
            f.write_str("no faults")?;
        } else {
            f.write_str("faults [")?;
            list(f, &self.faults)?;
            f.write_str("] at ")?;
            list(f, &self.sites)?;
            write!(f, "; 1 in {} crossings", self.odds)?;
        }
        if self.externals.is_empty() {
            f.write_str("; no externals")?;
        } else {
            f.write_str("; externals [")?;
            list(f, &self.externals)?;
            f.write_str("]")?;
        }
        write!(f, "; schedule {}", self.schedule)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_swarm_is_a_pure_function_of_its_seed() {
        for seed in 0..50 {
            let a = Swarm::draw(seed, &FaultSet::All, &["unplug", "replug"], 64);
            let b = Swarm::draw(seed, &FaultSet::All, &["unplug", "replug"], 64);
            assert_eq!(a, b);
        }
    }

    #[test]
    fn swarms_vary_across_seeds_and_stay_in_the_fault_set() {
        let (mut on, mut off) = (
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
        );
        let (mut fam_on, mut fam_off) = (
            std::collections::BTreeSet::new(),
            std::collections::BTreeSet::new(),
        );
        let mut densities = std::collections::BTreeSet::new();
        let mut strategies = std::collections::BTreeSet::new();
        let (mut ext_on, mut ext_off) = (0, 0);
        for seed in 0..200 {
            let s = Swarm::draw(seed, &FaultSet::All, &["unplug"], 64);
            assert!(!s.faults.is_empty() && !s.sites.is_empty(), "{s}");
            for k in FaultKind::ALL {
                if s.faults.contains(&k) {
                    on.insert(k);
                } else {
                    off.insert(k);
                }
            }
            for f in SiteFamily::ALL {
                if s.sites.contains(&f) {
                    fam_on.insert(f);
                } else {
                    fam_off.insert(f);
                }
            }
            densities.insert(s.odds);
            strategies.insert(s.schedule.to_string());
            if s.externals.is_empty() {
                ext_off += 1;
            } else {
                ext_on += 1;
            }
            // A transport set never turns on transitions; a stall-only set only stalls.
            let t = Swarm::draw(seed, &FaultSet::Transport, &[], 64);
            assert!(!t.sites.contains(&SiteFamily::Transition), "{t}");
            let o = Swarm::draw(seed, &FaultSet::Only(vec![FaultKind::Timeout]), &[], 64);
            assert_eq!(o.faults, vec![FaultKind::Timeout]);
            assert!(!o.sites.is_empty() && !o.sites.contains(&SiteFamily::Transition));
            let n = Swarm::draw(seed, &FaultSet::None, &[], 64);
            assert!(n.faults.is_empty() && n.sites.is_empty());
        }
        // `all` turns on the primitives in it (not the test build's added one).
        assert_eq!(
            on.len(),
            FaultKind::IN_ALL_BITS.count_ones() as usize,
            "every primitive of `all` on somewhere"
        );
        assert_eq!(off.len(), FaultKind::COUNT, "every primitive off somewhere");
        assert_eq!(fam_on.len(), 5);
        assert_eq!(fam_off.len(), 5);
        assert_eq!(
            densities.into_iter().collect::<Vec<_>>(),
            DENSITIES.to_vec()
        );
        // Uniform, three sticky odds, and priorities of two depths (2 and 3), two horizons
        // (1 and 2 times 64) and two initial orders.
        assert_eq!(
            strategies.len(),
            1 + STICKY_PERCENTS.len() + 2 * 2 * 2,
            "{strategies:?}"
        );
        assert!(
            strategies.contains("priority(d=2,h=64,spawn)"),
            "{strategies:?}"
        );
        assert!(strategies.contains("priority(d=3,h=128)"), "{strategies:?}");
        assert!(ext_on > 50 && ext_off > 50, "{ext_on} on, {ext_off} off");
    }

    #[test]
    fn an_added_external_changes_nothing_else() {
        for seed in 0..100 {
            let a = Swarm::draw(seed, &FaultSet::Transport, &["unplug"], 64);
            let b = Swarm::draw(seed, &FaultSet::Transport, &["unplug", "replug"], 64);
            assert_eq!(a.faults, b.faults);
            assert_eq!(a.sites, b.sites);
            assert_eq!(a.odds, b.odds);
            assert_eq!(a.schedule, b.schedule);
            assert_eq!(a.allows_external("unplug"), b.allows_external("unplug"));
        }
    }

    #[test]
    fn a_swarm_reads_as_one_line_and_round_trips() {
        let s = Swarm {
            faults: vec![FaultKind::Stall, FaultKind::Timeout],
            sites: vec![SiteFamily::Ctrl, SiteFamily::BulkOut],
            odds: 32,
            externals: vec!["unplug".into()],
            schedule: Strategy::Sticky { keep_percent: 75 },
        };
        assert_eq!(
            s.to_string(),
            "swarm: faults [stall, timeout] at ctrl, bulk.out; 1 in 32 crossings; externals [unplug]; schedule sticky(0.75)"
        );
        let j = serde_json::to_string(&s).unwrap();
        assert_eq!(
            j,
            r#"{"faults":["stall","timeout"],"sites":["ctrl","bulk.out"],"odds":32,"externals":["unplug"],"schedule":"sticky(0.75)"}"#
        );
        assert_eq!(serde_json::from_str::<Swarm>(&j).unwrap(), s);
        let none = Swarm {
            faults: vec![],
            sites: vec![],
            odds: 4,
            externals: vec![],
            schedule: Strategy::Uniform,
        };
        assert_eq!(
            none.to_string(),
            "swarm: no faults; no externals; schedule uniform"
        );
        for p in STICKY_PERCENTS {
            let st = Strategy::Sticky { keep_percent: p };
            assert_eq!(st.to_string().parse::<Strategy>(), Ok(st));
        }
        assert_eq!(
            "sticky(0.05)".parse(),
            Ok(Strategy::Sticky { keep_percent: 5 })
        );
        for bad in [
            "",
            "sticky",
            "sticky(0.)",
            "sticky(1.0)",
            "sticky(0.0)",
            "pct",
        ] {
            assert!(bad.parse::<Strategy>().is_err(), "{bad}");
        }
    }

    /// What `Display` wrote with `write!` before [`Strategy::text`]: the text of every
    /// strategy must stay byte for byte (it is in every swarm run's `config` record and hash).
    fn text_as_formatted(st: Strategy) -> String {
        match st {
            Strategy::Uniform => "uniform".to_string(),
            Strategy::Priority {
                depth,
                horizon,
                spawn_order,
            } => format!(
                "priority(d={depth},h={horizon}{}",
                if spawn_order { ",spawn)" } else { ")" }
            ),
            Strategy::Sticky { keep_percent: p } if p % 10 == 0 => format!("sticky(0.{})", p / 10),
            Strategy::Sticky { keep_percent: p } => format!("sticky(0.{p:02})"),
        }
    }

    #[test]
    fn strategy_text_is_what_formatting_wrote() {
        let mut all = vec![Strategy::Uniform];
        for p in [1u8, 5, 9, 10, 11, 50, 75, 90, 99, 100, 255] {
            all.push(Strategy::Sticky { keep_percent: p });
        }
        for depth in [0u8, 1, 2, 3, 8, 9, 10, 99, 100, 255] {
            for horizon in [
                0u32,
                1,
                2,
                9,
                10,
                16,
                99,
                4096,
                65_536,
                u32::MAX - 1,
                u32::MAX,
            ] {
                for spawn_order in [false, true] {
                    all.push(Strategy::Priority {
                        depth,
                        horizon,
                        spawn_order,
                    });
                }
            }
        }
        for st in all {
            assert_eq!(&*st.text(), text_as_formatted(st), "{st:?}");
            assert_eq!(st.to_string(), text_as_formatted(st), "{st:?}");
        }
    }

    #[test]
    fn priority_strategies_read_back() {
        for st in [
            Strategy::Priority {
                depth: 2,
                horizon: 16,
                spawn_order: false,
            },
            Strategy::Priority {
                depth: 3,
                horizon: 4096,
                spawn_order: true,
            },
        ] {
            assert_eq!(st.to_string().parse::<Strategy>(), Ok(st));
            let j = serde_json::to_string(&st).unwrap();
            assert_eq!(serde_json::from_str::<Strategy>(&j).unwrap(), st);
        }
        assert_eq!(
            Strategy::Priority {
                depth: 2,
                horizon: 9,
                spawn_order: true
            }
            .to_string(),
            "priority(d=2,h=9,spawn)"
        );
        for bad in [
            "priority(d=0,h=4)",
            "priority(d=2,h=0)",
            "priority(d=2)",
            "priority(d=9,h=4)",
            "priority(d=2,h=4,random)",
            "priority(d=2,h=-4)",
        ] {
            assert!(bad.parse::<Strategy>().is_err(), "{bad}");
        }
    }

    #[test]
    fn the_highest_priority_task_runs_on_until_a_change_point() {
        // Three tasks always ready (each yields and is ready again): without change points the
        // same task runs at every choice; with one, it runs until the change point, then
        // another runs on.
        let ids = |i: usize| i;
        let mut rng = stream(3, StreamName::Schedule);
        let mut p = Priorities::default();
        let picks: Vec<usize> = (0..20)
            .map(|c| p.pick(&mut rng, (1, 20, false), c, 3, &ids))
            .collect();
        assert!(picks.iter().all(|&x| x == picks[0]), "{picks:?}");
        let mut switched = 0;
        for seed in 0..50 {
            let mut rng = stream(seed, StreamName::Schedule);
            let mut p = Priorities::default();
            let picks: Vec<usize> = (0..20)
                .map(|c| p.pick(&mut rng, (2, 20, true), c, 3, &ids))
                .collect();
            // Spawn order: the first task first, unless the change point is the first choice.
            assert!(picks[0] == 0 || picks.iter().all(|&x| x == 1), "{picks:?}");
            let changes = picks.windows(2).filter(|w| w[0] != w[1]).count();
            assert!(changes <= 1, "{picks:?}");
            switched += changes;
        }
        assert!(
            switched > 40,
            "most change points fall inside 20 choices: {switched}"
        );
    }

    /// [`Priorities::pick_ids`] as it was written before its one pass: priorities first, then
    /// the change points due, then the top. The reference the one pass must match.
    fn pick_ids_in_passes(
        p: &mut Priorities,
        rng: &mut ChaCha8Rng,
        (depth, horizon, spawn_order): (u8, u32, bool),
        choice: u64,
        ids: &[usize],
    ) -> usize {
        if !p.drawn {
            p.drawn = true;
            p.changes.clear();
            for j in 1..depth.max(1) {
                let at = below(rng, u64::from(horizon.max(1)));
                p.changes.push((at, u64::from(j)));
            }
        }
        for &id in ids {
            if p.prio.len() <= id {
                p.prio.resize(id + 1, 0);
            }
            if p.prio[id] == 0 {
                p.prio[id] = if spawn_order {
                    (1 << 32) | (u64::from(u32::MAX) - id as u64)
                } else {
                    (1 << 32) | (rng.next_u64() >> 32)
                };
            }
        }
        let top = |prio: &[u64]| {
            let mut best = 0;
            let mut best_p = 0;
            for (i, &id) in ids.iter().enumerate() {
                let p = prio[id];
                if i == 0 || p > best_p {
                    best = i;
                    best_p = p;
                }
            }
            best
        };
        let mut k = 0;
        while k < p.changes.len() {
            if p.changes[k].0 <= choice {
                let (_, j) = p.changes.remove(k);
                let t = ids[top(&p.prio)];
                p.prio[t] = j;
            } else {
                k += 1;
            }
        }
        top(&p.prio)
    }

    #[test]
    fn a_priority_pick_in_one_pass_picks_as_in_passes() {
        // Ready sets that grow, shrink and reorder (tasks spawned late, ids past the table),
        // every depth and both initial orders: the same picks, draws and priorities.
        for seed in 0..200 {
            let mut sets = stream(seed, StreamName::Data);
            for depth in 1..=4u8 {
                for spawn_order in [false, true] {
                    let params = (depth, 12, spawn_order);
                    let (mut a, mut b) = (Priorities::default(), Priorities::default());
                    let (mut ra, mut rb) = (
                        stream(seed, StreamName::Schedule),
                        stream(seed, StreamName::Schedule),
                    );
                    for choice in 0..16 {
                        let mut ids: Vec<usize> =
                            (0..9).filter(|_| below(&mut sets, 3) > 0).collect();
                        if ids.len() < 2 {
                            ids = vec![1, 7];
                        }
                        let got = a.pick_ids(&mut ra, params, choice, &ids);
                        let want = pick_ids_in_passes(&mut b, &mut rb, params, choice, &ids);
                        assert_eq!(got, want, "seed {seed} {params:?} choice {choice} {ids:?}");
                        assert_eq!((&a.prio, &a.changes), (&b.prio, &b.changes));
                        assert_eq!(ra.next_u32(), rb.next_u32(), "the same draws");
                    }
                }
            }
        }
    }

    /// The swarm's first part as it was drawn with lists (the set's kinds, its families, each
    /// subset), before the draw kept its sets as bits: the reference the bits must match.
    fn draw_open_with_lists(seed: u64, fault_set: &FaultSet, horizon: u64) -> Swarm {
        fn subset<T: Copy + PartialEq>(
            rng: &mut ChaCha8Rng,
            all: &[T],
            allowed: &[T],
            on_in_4: u64,
        ) -> Vec<T> {
            let bits: Vec<bool> = all.iter().map(|_| rng.next_u64() % 4 < on_in_4).collect();
            let fallback = menu(rng, allowed.len());
            let on: Vec<T> = all
                .iter()
                .zip(&bits)
                .filter(|&(x, &b)| b && allowed.contains(x))
                .map(|(x, _)| *x)
                .collect();
            if on.is_empty() && !allowed.is_empty() {
                vec![allowed[fallback]]
            } else {
                on
            }
        }
        let mut rng = stream(seed, StreamName::Swarm);
        // The primitives drawn from the `swarm` stream (every set here holds only those).
        assert!(fault_set
            .kinds()
            .iter()
            .all(|k| FaultKind::ALL[..SWARM_STREAM_PRIMITIVES].contains(k)));
        let faults = subset(
            &mut rng,
            &FaultKind::ALL[..SWARM_STREAM_PRIMITIVES],
            &fault_set.kinds(),
            2,
        );
        let families: Vec<SiteFamily> = SiteFamily::ALL
            .into_iter()
            .filter(|f| faults.iter().any(|k| f.takes(*k)) && fault_set.reaches(*f))
            .collect();
        let mut sites = subset(&mut rng, &SiteFamily::ALL, &families, 3);
        if faults.is_empty() {
            sites.clear();
        }
        let mut s = Swarm::draw_open_from(
            &mut stream(seed, StreamName::Swarm),
            seed,
            &FaultSet::None,
            0,
        );
        s.faults = faults;
        s.sites = sites;
        let odds = DENSITIES[menu(&mut rng, DENSITIES.len())];
        let kind = STRATEGY_MENU[menu(&mut rng, STRATEGY_MENU.len())];
        let param = rng.next_u64();
        s.odds = odds;
        s.schedule = match kind {
            Kind::Uniform => Strategy::Uniform,
            Kind::Sticky => Strategy::Sticky {
                keep_percent: STICKY_PERCENTS[(param % STICKY_PERCENTS.len() as u64) as usize],
            },
            Kind::Priority { spawn_order } => Strategy::priority_from(param, horizon, spawn_order),
        };
        s
    }

    #[test]
    fn a_swarm_drawn_with_bits_is_the_swarm_drawn_with_lists() {
        use FaultKind::*;
        let sets = [
            FaultSet::None,
            FaultSet::Transport,
            FaultSet::All,
            FaultSet::Only(vec![]),
            FaultSet::Only(vec![Stall]),
            FaultSet::Only(vec![Delay, Stall, Delay]),
            FaultSet::Only(vec![Timeout, Short, Corrupt]),
            FaultSet::Only(vec![Disconnect, Delay]),
        ];
        for set in &sets {
            for seed in 0..300 {
                let (got, _) = Swarm::draw_open(seed, set, 24);
                assert_eq!(
                    got,
                    draw_open_with_lists(seed, set, 24),
                    "{set:?} seed {seed}"
                );
            }
        }
    }

    /// The strategy the documented menu gives for the draws `kind` and `param` (uniform 2/16,
    /// sticky 1/16, random priorities 3/16, spawn order 10/16), written out from the doc, not
    /// through the menu's table: the reference a swarm without a faults part must match.
    fn documented_strategy(kind: u64, param: u64, horizon: u64) -> Strategy {
        let priority = |spawn_order| Strategy::Priority {
            depth: [2, 2, 2, 3][(param % 4) as usize],
            horizon: (horizon.max(2) * [1, 1, 1, 2][((param >> 16) % 4) as usize]) as u32,
            spawn_order,
        };
        match kind % 16 {
            0 | 1 => Strategy::Uniform,
            2 => Strategy::Sticky {
                keep_percent: [50, 75, 90][(param % 3) as usize],
            },
            3..=5 => priority(false),
            _ => priority(true),
        }
    }

    #[test]
    fn a_swarm_without_faults_is_the_schedule_streams_first_two_draws() {
        let mut seen = std::collections::BTreeSet::new();
        for set in [FaultSet::None, FaultSet::Only(vec![])] {
            for seed in 0..400 {
                let s = Swarm::draw(seed, &set, &[], 24);
                let mut rng = stream(seed, StreamName::Schedule);
                let (kind, param) = (rng.next_u64(), rng.next_u64());
                assert_eq!(
                    s,
                    Swarm {
                        faults: vec![],
                        sites: vec![],
                        odds: 0,
                        externals: vec![],
                        schedule: documented_strategy(kind, param, 24),
                    },
                    "{set:?} seed {seed}"
                );
                assert!(!s.has_faults_part() && s.records_schedule_alone());
                seen.insert(s.schedule.to_string());
                // Externals come from the `swarm` stream, one draw each, the strategy unmoved.
                let e = Swarm::draw(seed, &set, &["unplug", "replug"], 24);
                let mut sw = stream(seed, StreamName::Swarm);
                let on: Vec<String> = ["unplug", "replug"]
                    .into_iter()
                    .filter(|_| sw.next_u64() & 1 == 1)
                    .map(String::from)
                    .collect();
                assert_eq!((e.schedule, &e.externals), (s.schedule, &on));
                assert_eq!(e.records_schedule_alone(), on.is_empty());
            }
        }
        // The whole menu: uniform, three sticky odds, priorities of two depths, two horizons
        // and two initial orders.
        assert_eq!(
            seen.len(),
            1 + STICKY_PERCENTS.len() + 2 * 2 * 2,
            "{seen:?}"
        );
        // A swarm with a faults part records its five fields, even with no faults on (one
        // saved before swarms without a faults part existed).
        let old = Swarm {
            odds: 64,
            ..Swarm::strategy_only(Strategy::Uniform)
        };
        assert!(old.has_faults_part() && !old.records_schedule_alone());
        // An edited one with primitives but no density keeps them in its record.
        let edited = Swarm {
            faults: vec![FaultKind::Stall],
            ..Swarm::strategy_only(Strategy::Uniform)
        };
        assert!(!edited.has_faults_part() && !edited.records_schedule_alone());
    }

    #[test]
    fn a_sticky_schedule_mostly_keeps_the_first_option() {
        let mut rng = stream(5, StreamName::Schedule);
        let st = Strategy::Sticky { keep_percent: 90 };
        let picks: Vec<usize> = (0..1000).map(|_| st.pick(&mut rng, 3)).collect();
        let kept = picks.iter().filter(|&&p| p == 0).count();
        assert!((850..950).contains(&kept), "{kept}");
        assert!(picks.contains(&1) && picks.contains(&2) && picks.iter().all(|&p| p < 3));
    }
}
