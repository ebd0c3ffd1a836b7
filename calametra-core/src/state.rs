//! The world at a step, for people: what `calametra replay FILE --at STEP` prints.
//!
//! A run with [`RunConfig::stop_at`](crate::sim::RunConfig::stop_at) `= Some(STEP)` stops as it
//! reaches scheduling point STEP, before anything of that step happens (the externals placed
//! at it included: an unplug at step 70 has not happened at 70 and has at 71), and returns a
//! [`StateDump`] in [`RunResult::state`](crate::sim::RunResult::state): virtual time, each task
//! and what it waits on, the transfers in flight, each device model's state (through
//! [`Device::describe`](crate::device::Device::describe), or a [`describe_model!`](crate::describe_model) registration),
//! the choice streams' positions and the marks reached so far. A run that ends before STEP
//! returns the state at its end, saying so. The dump serializes as JSON (what a test binary
//! writes for `CALAMETRA_STATE_OUT`) and renders as text.

use crate::bus::{Core, Ev, XState};
use crate::choices::{Event, Source};
use crate::clock::format_ns;
use crate::clock::Nanos;
use crate::tasks::Tasks;
use crate::world::{DeviceSlot, World};
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::task::Waker;

#[doc(hidden)]
pub use inventory;

/// A task and what it waits on.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TaskState {
    /// Its name.
    pub name: String,
    /// Whether it is a daemon (cancelled when the required tasks are done).
    pub daemon: bool,
    /// `done`, `ready to run`, `transfer ctrl.get_status#3 (...)`, `timer at 1.25 ms`, ...
    pub waits_on: String,
}

/// A transfer submitted and not yet collected by its task.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TransferState {
    /// Its site (`ctrl.get_status#3`).
    pub site: String,
    /// The task that submitted it.
    pub actor: String,
    /// The device it goes to.
    pub device: String,
    /// Where it is: `on the bus`, `waiting for the device (NAK)`, `swallowed by a fault`,
    /// `answered, completion delayed`, `completed (ok|<error>), not yet collected`.
    pub state: String,
    /// The fault it meets, if any.
    pub fault: Option<String>,
    /// When its next bus event is due (arrival or completion), in virtual ns.
    pub due_ns: Option<u64>,
}

/// A device on the bus and its model's own account of its state.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeviceState {
    /// The device's name.
    pub name: String,
    /// Whether it is attached.
    pub attached: bool,
    /// How many times it was (re)attached before this one.
    pub generation: u32,
    /// What the model says of itself ([`crate::device::Device::describe`]).
    pub fields: Vec<(String, String)>,
}

/// A choice stream and how far the run has drawn from it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StreamState {
    /// `schedule`, `client`, `faults`, `externals`, `data/<actor>`, `user/<name>`, `swarm`.
    pub name: String,
    /// Its position, for people (`3 non-default picks so far, at point 41`, `2 of 5 recorded
    /// draws`).
    pub position: String,
}

/// The world at a step.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct StateDump {
    /// The step asked for (`RunConfig::stop_at`).
    pub asked: u64,
    /// The step the run is at.
    pub step: u64,
    /// Whether the run reached the step asked for (else this is the state at its end).
    pub reached: bool,
    /// How the run ended, when it ended before the step asked for.
    pub ended: Option<String>,
    /// Virtual time.
    pub now_ns: u64,
    /// Deterministic trace records written so far.
    pub records: u64,
    /// The last trace record written (when the run keeps its trace).
    pub last_record: Option<String>,
    /// Where the run's choices come from (`seeded 0x7`, `replay of 3 events`, `default`).
    pub source: String,
    /// Every task.
    pub tasks: Vec<TaskState>,
    /// Transfers submitted and not yet collected, in submission order.
    pub transfers: Vec<TransferState>,
    /// Every device, in attach order.
    pub devices: Vec<DeviceState>,
    /// The choice streams drawn from so far.
    pub streams: Vec<StreamState>,
    /// Marks reached so far, with counts.
    pub marks: Vec<(String, u64)>,
    /// Externals fired so far (`unplug at step 70`).
    pub externals: Vec<String>,
}

/// A model's description given from outside its `Device` impl (when that impl lives in a file
/// one cannot touch): registered with [`describe_model!`](crate::describe_model), used when
/// [`Device::describe`](crate::device::Device::describe) returns nothing.
pub struct Describer(pub DescribeFn);

/// A description by a model's type: `None` when `&dyn Any` is not that type.
pub type DescribeFn = fn(&dyn Any) -> Option<Vec<(String, String)>>;

inventory::collect!(Describer);

/// Registers `$f: fn(&$ty) -> Vec<(String, String)>` as the description of model `$ty` in
/// state dumps, for a model whose [`Device`](crate::device::Device) impl does not override
/// `describe`: `calametra_core::describe_model!(Trigger6, Trigger6::describe_fields);`.
#[macro_export]
macro_rules! describe_model {
    ($ty:ty, $f:path) => {
        $crate::state::inventory::submit! {
            $crate::state::Describer(|d| d.downcast_ref::<$ty>().map($f))
        }
    };
}

/// What a device says of itself: its `describe`, else a registered [`Describer`].
pub(crate) fn describe_device(dev: &dyn crate::device::Device) -> Vec<(String, String)> {
    let own = dev.describe();
    if !own.is_empty() {
        return own;
    }
    let any: &dyn Any = dev;
    inventory::iter::<Describer>
        .into_iter()
        .find_map(|d| (d.0)(any))
        .unwrap_or_default()
}

/// `n noun(s)`.
fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

impl World {
    /// The world now, as [`StateDump`] says (`asked` is the step a stop was asked for).
    pub fn state_dump(&self, asked: u64) -> StateDump {
        let core = &self.core;
        let (transfers, timers) = bus_parts(core, &self.devices, &self.tasks);
        let tasks = self
            .tasks
            .slots
            .iter()
            .enumerate()
            .map(|(id, slot)| {
                let waits_on = if slot.done {
                    "done".to_string()
                } else if self.tasks.is_ready(id) {
                    "ready to run".to_string()
                } else {
                    let mut what: Vec<String> = transfers
                        .iter()
                        .filter(|(_, w)| w.is_some_and(|w| w.will_wake(&slot.waker)))
                        .map(|(t, _)| format!("transfer {} ({})", t.site, t.state))
                        .collect();
                    if what.is_empty() {
                        what = transfers
                            .iter()
                            .filter(|(t, _)| t.actor == *slot.name)
                            .map(|(t, _)| format!("transfer {} ({})", t.site, t.state))
                            .collect();
                    }
                    let timer = timers
                        .iter()
                        .filter(|(_, w)| w.will_wake(&slot.waker))
                        .map(|(t, _)| *t)
                        .min();
                    match (what.is_empty(), timer) {
                        (false, Some(t)) => {
                            format!("{} or its deadline at {}", what.join(", "), format_ns(t))
                        }
                        (false, None) => what.join(", "),
                        (true, Some(t)) => format!("a timer at {}", format_ns(t)),
                        (true, None) => {
                            "a wake from another task (a join, a channel, a lock)".to_string()
                        }
                    }
                };
                TaskState {
                    name: slot.name.to_string(),
                    daemon: slot.daemon,
                    waits_on,
                }
            })
            .collect();
        let devices = self
            .devices
            .iter()
            .map(|d| DeviceState {
                name: d.name.clone(),
                attached: d.attached,
                generation: d.generation,
                fields: describe_device(&*d.dev),
            })
            .collect();
        let log = &core.decide.log;
        let externals = log
            .iter()
            .filter_map(|e| match e {
                Event::External { name, point } => Some(format!("{name} at step {point}")),
                _ => None,
            })
            .collect();
        StateDump {
            asked,
            step: core.point,
            reached: core.point >= asked,
            ended: None,
            now_ns: core.now,
            records: core.trace.len(),
            last_record: core.trace.lines().last().map(|l| l.trim_end().to_string()),
            source: match &core.decide.source {
                Source::Default => "default (first option everywhere)".into(),
                Source::Seeded(s) => format!("seeded {s:#x}"),
                Source::Replay(ev) => format!("replay of {}", count(ev.len(), "event")),
            },
            tasks,
            transfers: transfers.into_iter().map(|(t, _)| t).collect(),
            devices,
            streams: streams(
                &core.decide.source,
                log,
                core.point,
                core.decide.swarm.as_ref(),
            ),
            marks: core.marks.iter().map(|(k, v)| (k.clone(), *v)).collect(),
            externals,
        }
    }
}

/// Each stream's position, from the events the run took (and, on replay, those recorded).
fn streams(
    source: &Source,
    log: &[Event],
    point: u64,
    swarm: Option<&crate::swarm::Swarm>,
) -> Vec<StreamState> {
    let recorded: &[Event] = match source {
        Source::Replay(ev) => ev,
        _ => &[],
    };
    let replay = matches!(source, Source::Replay(_));
    let key = |e: &Event| -> Option<String> {
        Some(match e {
            Event::Schedule { .. } => "schedule".into(),
            Event::External { .. } | Event::GuestExternal { .. } => "externals".into(),
            Event::Fault { .. } => "faults".into(),
            Event::Client { .. } => "client".into(),
            Event::Data {
                stream: Some(s), ..
            } => s.to_string(),
            Event::Data { stream: None, .. } => "data".into(),
            Event::Swarm { .. } | Event::Anchor { .. } => return None,
        })
    };
    let mut taken: BTreeMap<String, usize> = BTreeMap::new();
    for e in log {
        if let Some(k) = key(e) {
            *taken.entry(k).or_insert(0) += 1;
        }
    }
    let mut of: BTreeMap<String, usize> = BTreeMap::new();
    for e in recorded {
        if let Some(k) = key(e) {
            *of.entry(k).or_insert(0) += 1;
        }
    }
    let mut names: Vec<String> = taken.keys().chain(of.keys()).cloned().collect();
    names.push("schedule".into());
    names.sort();
    names.dedup();
    let mut out: Vec<StreamState> = names
        .into_iter()
        .map(|name| {
            let n = taken.get(&name).copied().unwrap_or(0);
            let (one, many) = match name.as_str() {
                "schedule" => ("non-default pick", "non-default picks"),
                "externals" => ("external fired", "externals fired"),
                "faults" => ("fault injected", "faults injected"),
                _ => ("draw", "draws"),
            };
            let mut position = format!("{n} {}", if n == 1 { one } else { many });
            if name == "schedule" {
                position.push_str(&format!(", at point {point}"));
            }
            if replay {
                position.push_str(&format!(
                    " ({} of {} recorded)",
                    n,
                    of.get(&name).copied().unwrap_or(0)
                ));
            }
            StreamState { name, position }
        })
        .collect();
    if let Some(swarm) = swarm {
        // A swarm without a faults part draws its strategy from `schedule`, and from `swarm`
        // only its externals' draws.
        let position = if swarm.has_faults_part() {
            "drawn (the run's first record, kind `config`)"
        } else {
            "strategy drawn from `schedule`, no faults part (the run's first record, kind `config`)"
        };
        out.push(StreamState {
            name: "swarm".into(),
            position: position.into(),
        });
    }
    out
}

impl StateDump {
    /// As JSON (one object).
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default()
    }

    /// Reads [`Self::to_json`] back.
    pub fn from_json(text: &str) -> Result<StateDump, String> {
        serde_json::from_str(text).map_err(|e| format!("not a state dump: {e}"))
    }

    /// The value of `field` of device `device`, if it describes one.
    pub fn device_field(&self, device: &str, field: &str) -> Option<&str> {
        self.devices
            .iter()
            .find(|d| d.name == device)?
            .fields
            .iter()
            .find(|(k, _)| k == field)
            .map(|(_, v)| v.as_str())
    }

    /// For people.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if self.reached {
            let _ = writeln!(
                s,
                "state at step {} (before anything of it happens), virtual time {} ({} ns)",
                self.step,
                format_ns(self.now_ns),
                self.now_ns
            );
        } else {
            let _ = writeln!(
                s,
                "the run ended at step {} before step {}{}; its state at the end, virtual time {} ({} ns)",
                self.step,
                self.asked,
                self.ended
                    .as_ref()
                    .map(|e| format!(" ({e})"))
                    .unwrap_or_default(),
                format_ns(self.now_ns),
                self.now_ns
            );
        }
        let _ = writeln!(s, "choices: {}", self.source);
        let _ = writeln!(s, "trace: {} deterministic records so far", self.records);
        if let Some(l) = &self.last_record {
            let _ = writeln!(s, "  last: {l}");
        }
        let _ = writeln!(s, "tasks:");
        let w = self.tasks.iter().map(|t| t.name.len()).max().unwrap_or(4);
        for t in &self.tasks {
            let _ = writeln!(
                s,
                "  {:<w$}{}  {}",
                t.name,
                if t.daemon { " (daemon)" } else { "         " },
                t.waits_on
            );
        }
        if self.transfers.is_empty() {
            let _ = writeln!(s, "transfers in flight: none");
        } else {
            let _ = writeln!(s, "transfers in flight:");
            for t in &self.transfers {
                let _ = writeln!(
                    s,
                    "  {} from {} to {}: {}{}{}",
                    t.site,
                    t.actor,
                    t.device,
                    t.state,
                    t.due_ns
                        .map(|d| format!(", due at {}", format_ns(d)))
                        .unwrap_or_default(),
                    t.fault
                        .as_ref()
                        .map(|f| format!(", meets {f}"))
                        .unwrap_or_default()
                );
            }
        }
        let _ = writeln!(s, "devices:");
        for d in &self.devices {
            let _ = writeln!(
                s,
                "  {} ({}{})",
                d.name,
                if d.attached { "attached" } else { "detached" },
                if d.generation > 0 {
                    format!(", generation {}", d.generation)
                } else {
                    String::new()
                }
            );
            if d.fields.is_empty() {
                let _ = writeln!(s, "    (the model does not describe itself)");
            }
            let w = d.fields.iter().map(|(k, _)| k.len()).max().unwrap_or(0);
            for (k, v) in &d.fields {
                let _ = writeln!(s, "    {k:<w$}  {v}");
            }
        }
        let _ = writeln!(s, "choice streams:");
        for st in &self.streams {
            let _ = writeln!(s, "  {:<16} {}", st.name, st.position);
        }
        if self.marks.is_empty() {
            let _ = writeln!(s, "marks reached: none");
        } else {
            let marks: Vec<String> = self
                .marks
                .iter()
                .map(|(m, n)| format!("{m} x{n}"))
                .collect();
            let _ = writeln!(s, "marks reached: {}", marks.join(", "));
        }
        if !self.externals.is_empty() {
            let _ = writeln!(s, "externals fired: {}", self.externals.join(", "));
        }
        s
    }
}

/// What a state dump reads of the bus: the transfers not yet collected (each with the waker of
/// the task awaiting it) and the timers queued (each with the waker it wakes).
#[allow(clippy::type_complexity)]
fn bus_parts<'a>(
    core: &'a Core,
    devices: &[DeviceSlot],
    tasks: &'a Tasks,
) -> (
    Vec<(TransferState, Option<&'a Waker>)>,
    Vec<(Nanos, &'a Waker)>,
) {
    let due = |xid: u64| {
        core.queue
            .iter()
            .find(|(_, ev)| matches!(ev, Ev::Arrive(x) | Ev::Complete(x) if *x == xid))
            .map(|((t, _), _)| *t)
    };
    let transfers = core
        .transfers
        .iter()
        .map(|(xid, x)| {
            let state = match &x.state {
                XState::InFlight => "on the bus".to_string(),
                XState::Waiting => "waiting for the device (NAK)".to_string(),
                XState::Swallowed => "swallowed by a fault".to_string(),
                XState::Delayed(_) => "answered, completion delayed".to_string(),
                XState::Done(Ok(_)) => "completed ok, not yet collected".to_string(),
                XState::Done(Err(e)) => format!("completed {e}, not yet collected"),
            };
            let t = TransferState {
                site: core.site_table.name(x.site),
                actor: x.actor.to_string(),
                device: devices
                    .get(x.dev)
                    .map(|d| d.name.clone())
                    .unwrap_or_default(),
                state,
                fault: x.fault.as_ref().map(|f| f.to_string()),
                due_ns: due(*xid),
            };
            (t, x.waker.as_ref().and_then(|w| tasks.waker_of(w)))
        })
        .collect();
    let timers = core
        .queue
        .iter()
        .filter_map(|((t, _), ev)| match ev {
            Ev::Wake(w) => tasks.waker_of(w).map(|w| (*t, w)),
            _ => None,
        })
        .collect();
    (transfers, timers)
}
