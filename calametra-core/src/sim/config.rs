//! What a run is given ([`RunConfig`]: where its choices come from, its faults, its limits) and
//! what it gives back ([`RunResult`]: the hash, the failure, the events that replay it). Plain
//! data; the run itself is [`crate::sim::run`].

use super::Failure;
use crate::choices::{Event, Source};
use crate::clock::Nanos;
use crate::fault::{FaultPlan, FaultSet, Site};
use crate::spec::Spec;
use crate::state::StateDump;
use crate::swarm::{Strategy, Swarm};
use crate::trace::TraceHash;
use std::collections::BTreeMap;
use std::sync::Arc;

/// What one run is: where its choices come from, its faults, its limits.
#[derive(Clone, Debug)]
pub struct RunConfig {
    /// Default (first option everywhere), seeded (the baseline trial is seed 0), or replayed
    /// choices.
    pub source: Source,
    /// Faults pinned to sites.
    pub faults: FaultPlan,
    /// Faults a seeded schedule may draw.
    pub fault_set: FaultSet,
    /// Step limit (a livelock guard).
    pub max_steps: u64,
    /// Virtual time limit.
    pub virtual_timeout: Nanos,
    /// Keep the trace lines (for files and divergence reports).
    pub keep_trace: bool,
    /// Record every fault site the run crosses (site discovery).
    pub record_sites: bool,
    /// Scheduling points over which a seeded run places externals.
    pub horizon: u64,
    /// Task choices (scheduling points with two or more ready tasks) a run of the scenario
    /// makes: a priority strategy's change points are drawn over a multiple of it, since a
    /// change point where only one task is ready changes nothing then. The harness sets the
    /// baseline's ([`RunResult::choices`]); 0 (the default): use `horizon`.
    pub choices: u64,
    /// Whether a seeded run places the scenario's externals (the baseline does not).
    pub place_externals: bool,
    /// Whether a seeded run first draws its [`Swarm`] configuration (which faults, sites,
    /// density, externals and scheduling strategy it explores) from its `swarm` stream. On by
    /// default; the baseline and `site::` probes turn it off (`Seeded(0)` then runs as it
    /// always did: uniform schedule, no faults, no externals). Without a swarm a seeded run
    /// schedules uniformly, may place every external and faults one crossing in 24.
    pub swarm: bool,
    /// The scenario's spec.
    pub spec: Option<Arc<Spec>>,
    /// Stop the run as it reaches this scheduling point, before anything of it happens (the
    /// externals placed at it included), and return the world then in [`RunResult::state`]
    /// (`calametra replay FILE --at STEP`). A stopped run writes a `stop` record and ends with
    /// outcome `stopped`; one that ends first returns its state at the end.
    pub stop_at: Option<u64>,
    /// The scheduling strategy of a seeded run, instead of the one its swarm draws (with a
    /// swarm, the swarm's `schedule` reads this one, so the `config` record shows it; without
    /// one, it replaces the uniform default). `None` (the default): the swarm's, or uniform.
    /// For benchmarks and for pinning a strategy; replays ignore it (their picks are events).
    pub strategy: Option<Strategy>,
    /// Record what the run reached for a guided sweep ([`RunResult::coverage`]): marks,
    /// faults by site and primitive, outcomes (transfers that failed, by request and status;
    /// USB transitions; externals), pairs of consecutive transitions, each device's end state.
    pub coverage: bool,
    /// Watch the pictures devices show ([`crate::picture`]): each one that appears is rendered
    /// and the log in [`RunResult::pictures`]. Changes no record and no hash.
    pub pictures: bool,
}

impl RunConfig {
    /// The length a swarm's priority strategy draws its change points over: `choices`, or
    /// `horizon` when that is unknown.
    pub fn change_point_horizon(&self) -> u64 {
        if self.choices > 0 {
            self.choices
        } else {
            self.horizon
        }
    }
}

impl Default for RunConfig {
    fn default() -> Self {
        RunConfig {
            source: Source::Default,
            faults: FaultPlan::default(),
            fault_set: FaultSet::None,
            max_steps: 100_000,
            virtual_timeout: 60_000_000_000,
            keep_trace: false,
            record_sites: false,
            horizon: 64,
            choices: 0,
            place_externals: true,
            swarm: true,
            spec: None,
            stop_at: None,
            strategy: None,
            coverage: false,
            pictures: false,
        }
    }
}

/// What a run produced.
#[derive(Clone, Debug)]
pub struct RunResult {
    /// The trace hash.
    pub hash: TraceHash,
    /// Deterministic records written.
    pub records: u64,
    /// The events the run took (replaying them reproduces it).
    pub events: Vec<Event>,
    /// The failure, if any.
    pub failure: Option<Failure>,
    /// The kept trace lines (when asked).
    pub lines: Vec<String>,
    /// Sites crossed (when asked).
    pub sites: Vec<Site>,
    /// Coverage marks reached, with counts.
    pub marks: BTreeMap<String, u64>,
    /// Scheduling points taken.
    pub steps: u64,
    /// Task choices made: scheduling points where two or more tasks were ready (what
    /// [`RunConfig::choices`] takes from the baseline).
    pub choices: u64,
    /// Virtual time at the end.
    pub end_ns: Nanos,
    /// The run's swarm configuration: drawn by a seeded run with `RunConfig::swarm`, or read
    /// from a replayed event list that records one; `None` otherwise (the baseline, `site::`
    /// probes, replays without one). Its `Display` is one line for a failure screen
    /// (`swarm: faults [stall] at ctrl; 1 in 32 crossings; externals [unplug]; schedule
    /// uniform`); it serializes as JSON.
    pub swarm: Option<Swarm>,
    /// The world at [`RunConfig::stop_at`] (or at the end of a run that ended before it);
    /// `None` when no stop was asked for.
    pub state: Option<StateDump>,
    /// The names of the externals the scenario declared (`Sim::external`), in declaration
    /// order: what a replayed event may name. `None` when the runner does not say (a guest
    /// run).
    pub externals: Option<Vec<String>>,
    /// What the run reached, with [`RunConfig::coverage`] (empty otherwise): the features a
    /// guided sweep keeps a corpus by.
    pub coverage: std::collections::BTreeSet<String>,
    /// What the run saw of the devices' pictures, with [`RunConfig::pictures`] (`None`
    /// otherwise).
    pub pictures: Option<crate::picture::PictureLog>,
}
