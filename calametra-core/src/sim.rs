//! `Sim`, the one handle a scenario talks to, and the run loop.
//!
//! A scenario function receives `&mut Sim`, attaches devices, spawns tasks, declares externals
//! and invariants. [`run`] then drives the world: at each scheduling point it fires the
//! externals placed there, runs one ready task (which one is a traced choice) or, when none is
//! ready, advances virtual time to the earliest event (simultaneous events are a traced choice
//! too), and checks every invariant. The run ends when the required tasks are done, or at the
//! first failure. Nothing here reads the wall clock, spawns a thread or uses OS randomness.

use crate::choices::{unapplied, Decider, Event, Source};
use crate::clock::push_ns;
use crate::device::Device;
use crate::exec::{self, JoinHandle, TaskExit, TaskOutput};
use crate::picture::PictureLog;
use crate::pool::{self, Pool};
use crate::spec::Spec;
use crate::state::StateDump;
use crate::world::{self, DeviceHandle, World};
use std::cell::RefCell;
use std::future::Future;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

mod config;
mod externals;
use externals::{fire_external, next_anchored_external, place_externals};
mod failure;
pub use config::{RunConfig, RunResult};
pub use failure::{strip_numbers, Failure};

type ExternalFn = Box<dyn FnMut(&mut World)>;
type InvariantFn = Box<dyn Fn(&World) -> Result<(), String>>;

/// What an invariant returns: `Result<(), String>`, `Result<(), &str>` or `bool`.
pub trait Verdict {
    /// `Err(message)` when the invariant broke.
    fn verdict(self) -> Result<(), String>;
}

impl Verdict for Result<(), String> {
    #[inline]
    fn verdict(self) -> Result<(), String> {
        self
    }
}

impl Verdict for Result<(), &str> {
    #[inline]
    fn verdict(self) -> Result<(), String> {
        self.map_err(str::to_string)
    }
}

impl Verdict for bool {
    #[inline]
    fn verdict(self) -> Result<(), String> {
        if self {
            Ok(())
        } else {
            Err("returned false".into())
        }
    }
}

/// The handle a scenario builds its world with.
pub struct Sim {
    world: Rc<RefCell<World>>,
    externals: Vec<(String, ExternalFn)>,
    invariants: Vec<(String, InvariantFn)>,
    config: RunConfig,
    /// The world at `config.stop_at`, once taken.
    state: Option<StateDump>,
    /// The pictures seen, with `config.pictures`.
    pictures: Option<PictureLog>,
    /// The invariant names the previous run on this thread declared, by position: a name
    /// declared again at the same position is reused, not allocated again (see [`SimSpare`]).
    names: Vec<String>,
}

/// What a run's `Sim` leaves to the next run on its thread: its (emptied) lists of externals and
/// invariants and its invariant names. A scenario declares the same ones every run, so a run
/// allocates neither the lists nor the names again. None of it decides anything.
#[derive(Default)]
struct SimSpare {
    externals: Vec<(String, ExternalFn)>,
    invariants: Vec<(String, InvariantFn)>,
    names: Vec<String>,
}

impl Sim {
    /// Gives the lists and names to the thread's next run; the closures are dropped here.
    fn recycle(&mut self) {
        let mut names = std::mem::take(&mut self.names);
        names.clear();
        names.extend(self.invariants.drain(..).map(|(n, _)| n));
        self.externals.clear();
        let externals = std::mem::take(&mut self.externals);
        let invariants = std::mem::take(&mut self.invariants);
        pool::put(
            Pool::Sim,
            SimSpare {
                externals,
                invariants,
                names,
            },
        );
    }
}

impl Sim {
    /// The scenario's spec. Panics when the scenario has none (the attribute's `spec = ...`).
    pub fn spec(&self) -> &Spec {
        self.config
            .spec
            .as_deref()
            .expect("calametra: this scenario has no spec; add `spec = \"specs/....json\"` to its attribute")
    }

    /// Attaches a device to the bus.
    pub fn attach<D: Device>(&mut self, dev: D) -> DeviceHandle<D> {
        DeviceHandle::new(self.world.borrow_mut().attach(Box::new(dev)))
    }

    /// Spawns a task the run waits for (the driver).
    pub fn spawn<F>(&mut self, name: &str, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: TaskOutput,
    {
        exec::spawn(name, fut)
    }

    /// Spawns a background task that is cancelled when the required tasks are done.
    pub fn spawn_daemon<F>(&mut self, name: &str, fut: F) -> JoinHandle<F::Output>
    where
        F: Future + 'static,
        F::Output: TaskOutput,
    {
        exec::spawn_daemon(name, fut)
    }

    /// Declares an external event (an unplug, a hotplug) that exploration may place at any
    /// scheduling point. The baseline never fires it; a seeded run fires it at most once (when
    /// its swarm lets it), at a point drawn from the `externals` stream.
    pub fn external(&mut self, name: &str, f: impl FnMut(&mut World) + 'static) {
        self.externals.push((name.to_string(), Box::new(f)));
    }

    /// Declares an invariant, checked after every step. It should compare independent facts
    /// (the model's ground truth against what the driver believes), never call the code whose
    /// result it checks.
    pub fn invariant<V: Verdict>(&mut self, name: &str, f: impl Fn(&World) -> V + 'static) {
        let name = match self.names.get_mut(self.invariants.len()) {
            Some(kept) if kept == name => std::mem::take(kept),
            _ => name.to_string(),
        };
        self.invariants
            .push((name, Box::new(move |w| f(w).verdict())));
    }

    /// Sets the bus timing model.
    pub fn set_timing(&mut self, timing: world::Timing) {
        self.world.borrow_mut().set_timing(timing);
    }

    /// Runs `f` with the world (setup-time access to models).
    pub fn with_world<R>(&mut self, f: impl FnOnce(&mut World) -> R) -> R {
        f(&mut self.world.borrow_mut())
    }
}

thread_local! {
    static PANIC_MESSAGE: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Installs (once) a panic hook that keeps panics inside a simulation quiet and captured, so a
/// panicking task is one failed trial with its message, not noise on stderr.
fn install_panic_hook() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    ONCE.call_once(|| {
        let prev = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if crate::context::in_simulation() {
                let msg = if let Some(s) = info.payload().downcast_ref::<&str>() {
                    s.to_string()
                } else if let Some(s) = info.payload().downcast_ref::<String>() {
                    s.clone()
                } else {
                    "(non-string panic payload)".to_string()
                };
                let loc = info
                    .location()
                    .map(|l| format!(" at {}:{}", l.file(), l.line()))
                    .unwrap_or_default();
                PANIC_MESSAGE.with(|p| *p.borrow_mut() = Some(format!("{msg}{loc}")));
            } else {
                prev(info);
            }
        }));
    });
}

fn take_panic() -> String {
    PANIC_MESSAGE
        .with(|p| p.borrow_mut().take())
        .unwrap_or_else(|| "(no message)".into())
}

/// Restores the previous thread-local world even when a run unwinds.
struct Current(Option<Rc<RefCell<World>>>);

impl Drop for Current {
    fn drop(&mut self) {
        crate::context::set_current(self.0.take());
    }
}

/// Builds the world with `scenario` and runs it to its end under `config`.
///
/// A replay places its anchored events by their anchors ([`Event::Anchor`]); when one of them
/// did not apply (its anchor never happened, or happened where the event could not), the
/// events are replayed once more with those events at their raw positions (step, site), the
/// fallback, and that run is the replay's. Both passes are pure functions of the events.
pub fn run(config: RunConfig, scenario: &dyn Fn(&mut Sim)) -> RunResult {
    let anchored = match &config.source {
        Source::Replay(events) => events.iter().any(|e| matches!(e, Event::Anchor { .. })),
        _ => false,
    };
    if !anchored {
        return run_once(config, scenario);
    }
    let r = run_once(config.clone(), scenario);
    let Source::Replay(events) = &config.source else {
        return r;
    };
    let missed: Vec<usize> = unapplied(events, &r.events)
        .into_iter()
        .filter(|&i| i > 0 && matches!(events[i - 1], Event::Anchor { .. }))
        .collect();
    if missed.is_empty() {
        return r;
    }
    // The fallback: drop the anchors of the events that missed.
    let raw: Vec<Event> = events
        .iter()
        .enumerate()
        .filter(|(k, _)| !missed.contains(&(k + 1)))
        .map(|(_, e)| e.clone())
        .collect();
    let mut faults = config.faults.clone();
    for &i in &missed {
        if let Event::Fault { site, fault } = &events[i] {
            faults.faults.entry(site.clone()).or_insert(fault.clone());
        }
    }
    run_once(
        RunConfig {
            source: Source::Replay(raw),
            faults,
            ..config
        },
        scenario,
    )
}

fn run_once(mut config: RunConfig, scenario: &dyn Fn(&mut Sim)) -> RunResult {
    install_panic_hook();
    // The decider owns the source (a replay's events are not copied); the run reads it there.
    let seeded = match config.source {
        Source::Seeded(seed) => Some(seed),
        _ => None,
    };
    let mut decide = Decider::new(std::mem::replace(&mut config.source, Source::Default));
    if seeded.is_some() && config.swarm {
        // Its faults part is in force from the start (a setup may cross a fault site); the
        // externals part is drawn once the setup has declared them, from where this draw left
        // the `swarm` stream (see `record_swarm`).
        decide.open_swarm(&config.fault_set, config.change_point_horizon());
    }
    if seeded.is_some() {
        decide.forced = config.strategy;
    }
    // Built in place: the thread's spare world, reset (see `world::take_spare`).
    // The plan is the world's from here on (nothing reads `config.faults` again): moved, not
    // cloned.
    let world = crate::world::take_spare(
        decide,
        std::mem::take(&mut config.faults),
        config.fault_set.clone(),
        config.keep_trace,
    );
    {
        let core = &mut world.borrow_mut().core;
        core.record_sites = config.record_sites;
        if config.coverage {
            core.coverage = Some(Default::default());
        }
    }
    let _restore = Current(crate::context::set_current(Some(world.clone())));
    let spare = pool::take::<SimSpare>(Pool::Sim).unwrap_or_default();
    let mut sim = Sim {
        world: world.clone(),
        externals: spare.externals,
        invariants: spare.invariants,
        pictures: config.pictures.then(PictureLog::default),
        config,
        state: None,
        names: spare.names,
    };
    let mut failure = catch_unwind(AssertUnwindSafe(|| scenario(&mut sim)))
        .err()
        .map(|_| Failure::Panic {
            task: "scenario setup".into(),
            message: take_panic(),
        });
    if failure.is_none() {
        failure = drive(&mut sim);
    }
    state_at_end(&mut sim, &failure);
    if sim.state.as_ref().is_none_or(|s| !s.reached) {
        look_at_pictures(&mut sim);
    }
    let pictures = sim.pictures.take();
    let mut r = finish(&mut sim, failure);
    r.pictures = pictures;
    sim.recycle();
    drop(_restore);
    drop(sim);
    crate::world::give_back(world);
    r
}

/// [`RunConfig::pictures`]: looks at what each device shows now.
fn look_at_pictures(sim: &mut Sim) {
    let Some(log) = &mut sim.pictures else {
        return;
    };
    let w = sim.world.borrow();
    let devices = w.devices.iter().map(|d| (d.name.as_str(), &*d.dev));
    log.look(
        devices,
        |d| d.pictures(),
        |d, n| d.picture(n),
        (w.core.point, w.core.now, w.core.trace.len()),
    );
}

/// [`RunConfig::stop_at`]: at that point, keeps the world's state, writes a `stop` record and
/// says the run stops.
fn stop_here(sim: &mut Sim) -> bool {
    let Some(at) = sim.config.stop_at else {
        return false;
    };
    let mut w = sim.world.borrow_mut();
    if w.core.point < at {
        return false;
    }
    // What the loop would do next: tasks woken since the last step are ready.
    w.tasks.drain_wakes();
    sim.state = Some(w.state_dump(at));
    let now = w.core.now;
    w.core.trace.emit(now, "stop", "sim", true, |d| {
        d.u64("step", at);
    });
    true
}

/// A run asked to stop at a step it never reached: its state at the end, and how it ended.
fn state_at_end(sim: &mut Sim, failure: &Option<Failure>) {
    let Some(at) = sim.config.stop_at else {
        return;
    };
    if sim.state.is_some() {
        return;
    }
    let mut s = sim.world.borrow().state_dump(at);
    s.reached = false;
    s.ended = Some(match failure {
        None => "it passed".to_string(),
        Some(f) => f.text(),
    });
    sim.state = Some(s);
}

/// A swarm run's first record: draws the externals part of its swarm now that the setup has
/// declared them (the rest is unchanged: the externals' draws come last in the stream), logs
/// the swarm as an event and writes the `config` record (the schedule alone for a swarm
/// without a faults part and no external on:
/// [`crate::swarm::Swarm::records_schedule_alone`]). A replay of a list holding a swarm writes
/// the same record.
fn record_swarm(sim: &Sim) {
    let mut w = sim.world.borrow_mut();
    if w.core.decide.swarm.is_none() {
        return;
    }
    if w.core.decide.seed().is_some() {
        // The externals' names on the stack (a scenario declares a few), collected past 8.
        let (mut few, mut many) = ([""; 8], Vec::new());
        let all: &[(String, ExternalFn)] = if sim.config.place_externals {
            &sim.externals
        } else {
            &[]
        };
        let names = names_of(all, |(n, _)| n.as_str(), &mut few, &mut many);
        let decide = &mut w.core.decide;
        if let Some(mut swarm) = decide.swarm.take() {
            // No external declared, no draw: a swarm without a faults part derives no stream.
            if !names.is_empty() {
                if let Some(rng) = decide.swarm_stream() {
                    swarm.draw_externals(rng, names);
                }
            }
            if let Some(s) = sim.config.strategy {
                swarm.schedule = s;
            }
            decide.swarm = Some(swarm);
        }
    }
    // The record is written from the decider's swarm where it is (no copy but the log's),
    // each list's names on the stack (a swarm has at most six primitives and five families;
    // a longer list, read from a file, is collected).
    let core = &mut w.core;
    let Some(strategy) = core.decide.swarm.as_ref().map(|s| s.schedule) else {
        return;
    };
    // The strategy's text, written once a thread, not once a run.
    let text = core.decide.strategy_text(strategy);
    let decide = &core.decide;
    let Some(swarm) = decide.swarm.as_ref() else {
        return;
    };
    let schedule = decide.text_at(text);
    if swarm.records_schedule_alone() {
        core.trace.emit(core.now, "config", "swarm", true, |d| {
            d.str("schedule", schedule);
        });
    } else {
        // The lists' names, only for the record that writes them.
        let (mut kinds, mut many_kinds) = ([""; 6], Vec::new());
        let faults = names_of(&swarm.faults, |k| k.as_str(), &mut kinds, &mut many_kinds);
        let (mut families, mut many_families) = ([""; 5], Vec::new());
        let sites = names_of(
            &swarm.sites,
            |f| f.as_str(),
            &mut families,
            &mut many_families,
        );
        core.trace.emit(core.now, "config", "swarm", true, |d| {
            d.strs("faults", faults)
                .strs("sites", sites)
                .u64("odds", u64::from(swarm.odds))
                .strs("externals", &swarm.externals)
                .str("schedule", schedule);
        });
    }
    let logged = Box::new(swarm.clone());
    core.decide.log.push(Event::Swarm { swarm: logged });
}

/// `items`' names, in `buf` when they fit (no allocation), else collected into `spill`.
fn names_of<'a, T, const N: usize>(
    items: &'a [T],
    name: fn(&'a T) -> &'a str,
    buf: &'a mut [&'a str; N],
    spill: &'a mut Vec<&'a str>,
) -> &'a [&'a str] {
    if items.len() <= N {
        for (n, item) in buf.iter_mut().zip(items) {
            *n = name(item);
        }
        &buf[..items.len()]
    } else {
        spill.extend(items.iter().map(name));
        spill
    }
}

fn drive(sim: &mut Sim) -> Option<Failure> {
    let world = sim.world.clone();
    let mut wakers = world.borrow_mut().tasks.poll_wakers();
    let r = steps(sim, &mut wakers);
    if let Ok(mut w) = world.try_borrow_mut() {
        w.tasks.keep_poll_wakers(wakers);
    }
    r
}

/// The run loop's steps, to the run's end; `wakers` holds each task's waker to poll with.
fn steps(sim: &mut Sim, wakers: &mut Vec<Waker>) -> Option<Failure> {
    record_swarm(sim);
    // What a step checks only when the run asked for it: pictures, a stop, externals (none
    // declared: none is placed, drawn or anchored, so their checks are skipped, not run).
    let watch = sim.pictures.is_some();
    let stops = sim.config.stop_at.is_some();
    let externals = !sim.externals.is_empty();
    let placed = if externals {
        place_externals(sim)
    } else {
        Vec::new()
    };
    let mut next_external = 0;
    let world = sim.world.clone();
    loop {
        if watch {
            look_at_pictures(sim);
        }
        if stops && stop_here(sim) {
            return None;
        }
        // Externals placed at this point fire before its decision: those at a raw step, then
        // (on replay) those placed by their anchor.
        if externals {
            let point = world.borrow().core.point;
            while next_external < placed.len() && placed[next_external].0 <= point {
                let (p, i) = placed[next_external];
                next_external += 1;
                if let Some(fail) = fire_external(sim, i, p, None) {
                    return Some(fail);
                }
            }
            while let Some((i, p, anchor)) = next_anchored_external(sim, point) {
                if let Some(fail) = fire_external(sim, i, p, Some(anchor)) {
                    return Some(fail);
                }
            }
        }

        let mut w = world.borrow_mut();
        w.tasks.drain_wakes();
        if w.tasks.all_required_done() {
            return None;
        }
        if w.core.point >= sim.config.max_steps {
            return Some(Failure::StepLimit {
                steps: sim.config.max_steps,
            });
        }
        let n = w.tasks.list_ready();
        if n > 0 {
            let point = w.core.point;
            let pick = {
                let World { core, tasks, .. } = &mut *w;
                // A logged pick's label is the task's name, shared by the decider.
                let ids = tasks.ready_ids();
                core.decide.schedule_task(point, ids, |i| {
                    ids.get(i).map_or("", |&id| &*tasks.slots[id].name)
                })
            };
            let Some(&id) = w.tasks.ready_ids().get(pick) else {
                continue;
            };
            w.tasks.unready(id);
            w.core.point += 1;
            // Each task's waker, cloned once a run (a clone a step was two atomic operations).
            while wakers.len() < w.tasks.slots.len() {
                let waker = w.tasks.slots[wakers.len()].waker.clone();
                wakers.push(waker);
            }
            let slot = &mut w.tasks.slots[id];
            let name = slot.name.clone();
            let fut = slot.fut.take();
            let now = w.core.now;
            w.core.trace.emit(now, "task", &name, true, |d| {
                if n > 1 {
                    d.u64("pick", pick as u64).u64("of", n as u64);
                }
            });
            w.tasks.polled = Some(id);
            // The task is the actor while it runs: its name moves in, and back out after the
            // poll (one count of the name a poll, not three).
            w.core.actor = name;
            let Some(mut fut) = fut else { continue };
            drop(w);
            let mut cx = Context::from_waker(&wakers[id]);
            let polled = catch_unwind(AssertUnwindSafe(|| fut.as_mut().poll(&mut cx)));
            let mut w = world.borrow_mut();
            w.tasks.polled = None;
            let sim_actor = w.core.sim_actor.clone();
            let name = std::mem::replace(&mut w.core.actor, sim_actor);
            match polled {
                Err(_) => {
                    w.tasks.finish(id);
                    return Some(Failure::Panic {
                        task: name.to_string(),
                        message: take_panic(),
                    });
                }
                Ok(Poll::Pending) => {
                    w.tasks.slots[id].fut = Some(fut);
                }
                Ok(Poll::Ready(exit)) => {
                    w.tasks.finish(id);
                    let now = w.core.now;
                    w.core.trace.emit(now, "task", &name, true, |d| {
                        d.str("task", &name).bool("done", true);
                    });
                    drop(w);
                    drop(fut);
                    if let TaskExit::Err(message) = exit {
                        return Some(Failure::TaskError {
                            task: name.to_string(),
                            message,
                        });
                    }
                }
            }
        } else {
            let Some((t, n)) = w.core.due_span() else {
                return Some(Failure::Deadlock {
                    blocked: w.tasks.unfinished(),
                });
            };
            if t > sim.config.virtual_timeout {
                return Some(Failure::VirtualTimeout {
                    limit: sim.config.virtual_timeout,
                    pending: w.tasks.unfinished(),
                });
            }
            let point = w.core.point;
            let pick = {
                let core = &mut w.core;
                let pick = core.decide.schedule(point, n);
                // Only a logged (non-default) pick is described: describing every due event
                // was allocations a step.
                if pick != 0 {
                    // `get_status#3 arrives first, at 1.25ms`, written without the formatting
                    // machinery (a seeded run logs a pick every few steps), in the decider's
                    // kept buffer: the event gets one copy of it.
                    let mut label = core.decide.take_scratch();
                    if let Some(k) = core.due_nth(t, pick) {
                        core.describe_event(k, &mut label);
                    }
                    label.push_str(" first, at ");
                    push_ns(&mut label, t);
                    core.decide.label_pick(label);
                }
                pick
            };
            w.core.point += 1;
            w.core.now = t;
            let key = w.core.due_nth(t, pick);
            if let Some(ev) = key.and_then(|k| w.core.take_event(k)) {
                let r = catch_unwind(AssertUnwindSafe(|| w.fire(ev)));
                if r.is_err() {
                    return Some(Failure::Panic {
                        task: "device".into(),
                        message: take_panic(),
                    });
                }
            }
            drop(w);
        }
        if let Some(fail) = check(sim) {
            return Some(fail);
        }
    }
}

/// Checks model gaps and every invariant, in declaration order. Inlined into the run loop (it
/// runs after every step); what a failure builds is out of line.
#[inline(always)]
fn check(sim: &Sim) -> Option<Failure> {
    let w = sim.world.borrow();
    if w.core.gap.is_some() {
        return model_gap(&w);
    }
    for (name, inv) in &sim.invariants {
        match catch_unwind(AssertUnwindSafe(|| inv(&w))) {
            Ok(Ok(())) => {}
            broke => return Some(broken(name, broke)),
        }
    }
    None
}

#[cold]
#[inline(never)]
fn model_gap(w: &World) -> Option<Failure> {
    w.core.gap.clone().map(Failure::ModelGap)
}

/// The failure of invariant `name` that returned an error or panicked.
#[cold]
#[inline(never)]
fn broken(name: &str, r: std::thread::Result<Result<(), String>>) -> Failure {
    match r {
        Ok(r) => Failure::Invariant {
            name: name.to_string(),
            message: r.err().unwrap_or_default(),
        },
        Err(_) => Failure::Panic {
            task: format!("invariant {name}"),
            message: take_panic(),
        },
    }
}

fn finish(sim: &mut Sim, failure: Option<Failure>) -> RunResult {
    let externals = Some(sim.externals.iter().map(|(n, _)| n.clone()).collect());
    let world = &sim.world;
    let state = sim.state.take();
    let stopped = state.as_ref().is_some_and(|s| s.reached);
    if let Some(Failure::Invariant { name, message }) = &failure {
        let mut w = world.borrow_mut();
        let now = w.core.now;
        w.core.trace.emit(now, "invariant", name, true, |d| {
            d.str("invariant", name)
                .bool("holds", false)
                .str("message", message);
        });
    }
    // Cancel what is left: drop task futures (they hold the world) with the world reachable.
    let futs: Vec<_> = {
        let mut w = world.borrow_mut();
        w.tasks
            .slots
            .iter_mut()
            .filter_map(|s| s.fut.take())
            .collect()
    };
    let _ = catch_unwind(AssertUnwindSafe(move || drop(futs)));
    let mut w = world.borrow_mut();
    w.core.clear_queue();
    let now = w.core.now;
    let steps = w.core.point;
    w.core.trace.emit(now, "end", "sim", true, |d| {
        d.u64("steps", steps);
        match &failure {
            None if stopped => {
                d.str("outcome", "stopped");
            }
            None => {
                d.str("outcome", "pass");
            }
            Some(f) => {
                let kind = if f.is_model_gap() {
                    "model_gap"
                } else {
                    "fail"
                };
                d.str("outcome", kind).str("failure", &f.text());
                if let Failure::Invariant { name, .. } = f {
                    d.str("invariant", name);
                }
            }
        }
    });
    if w.core.coverage.is_some() {
        let mut states = Vec::new();
        for d in &w.devices {
            let fields = d.dev.describe();
            if !fields.is_empty() {
                let text: String = fields.iter().map(|(k, v)| format!("{k}={v};")).collect();
                let h = crate::trace::sha256_hex(text.as_bytes());
                states.push(format!("state {} {}", d.name, &h[..12]));
            }
        }
        let marks: Vec<String> = w.core.marks.keys().map(|m| format!("mark {m}")).collect();
        let c = w.core.coverage.get_or_insert_with(Default::default);
        c.extend(states);
        c.extend(marks);
    }
    let core = &mut w.core;
    let coverage = core.coverage.take().unwrap_or_default();
    let hash = core.trace.hash();
    let records = core.trace.len();
    // The kept lines are taken out with the trace; a run that keeps none (every explored run)
    // builds no second trace (a new one reserves its hash buffer) only to drop it.
    let lines = if core.trace.keeps() {
        std::mem::replace(&mut core.trace, crate::trace::Trace::new(false)).into_lines()
    } else {
        Vec::new()
    };
    RunResult {
        hash,
        records,
        events: core.decide.take_log(),
        failure,
        lines,
        sites: std::mem::take(&mut core.sites),
        marks: std::mem::take(&mut core.marks),
        steps,
        choices: core.decide.task_choices,
        end_ns: now,
        swarm: core.decide.swarm.take(),
        state,
        externals,
        coverage,
        pictures: None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_are_stripped_from_signatures() {
        assert_eq!(
            strip_numbers("status 0x1f after 12 reads"),
            "status N after N reads"
        );
        assert_eq!(strip_numbers("v1.2"), "vN.N");
    }

    /// The character-at-a-time stripping `strip_numbers` did before it copied spans.
    fn strip_by_chars(s: &str) -> String {
        let mut out = String::new();
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
                let c = s[i..].chars().next().unwrap();
                out.push(c);
                i += c.len_utf8();
            }
        }
        out
    }

    #[test]
    fn signatures_strip_as_they_did_character_by_character() {
        for s in [
            "",
            "0",
            "0x",
            "0xg",
            "x0x1fz",
            "12",
            "a0x1F9 b",
            "état 0x5a ≠ 0 après 3 lectures",
            "invariant `no_stale_status_after_disconnect` broke: status 0x5a cached",
            "日本0x1f語42",
            "trailing 7",
            "é",
        ] {
            assert_eq!(strip_numbers(s), strip_by_chars(s), "{s:?}");
        }
    }
}
