//! The world a run drives: clock, event queue, devices on the bus, transfers in flight, the
//! trace, and the tasks. The `Sim` handle (in `sim`) builds it and runs the loop; externals and
//! invariants see it as `&mut World` / `&World`; tasks reach it through a thread-local set only
//! while a simulation is being built or run on this thread.
//!
//! The bus lives here: a transfer is submitted by a driver, arrives at the device after a
//! modelled latency, meets its fault (if any) where it crosses the bus, and completes with a
//! trace record. Nothing here reads the wall clock or iterates a std hash container.

use crate::choices::{site_base, Anchor, Decider, Event};
use crate::clock::{nanos, Nanos};
use crate::exec::Tasks;
use crate::fault::{Fault, FaultPlan, FaultSet, Site, SiteFamily, SiteKind};
use crate::trace::Trace;
use crate::usb::{
    ControlIn, ControlOut, DevCtx, Device, Reply, Setup, TransferError, UsbInterface,
};
use std::any::Any;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::{poll_fn, Future};
use std::marker::PhantomData;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

thread_local! {
    static CURRENT: RefCell<Option<Rc<RefCell<World>>>> = const { RefCell::new(None) };
}

/// Runs `f` on the current world. Panics (with a clear message) outside a simulation.
pub(crate) fn with<R>(f: impl FnOnce(&mut World) -> R) -> R {
    let w = current();
    let mut b = w.borrow_mut();
    f(&mut b)
}

pub(crate) fn current() -> Rc<RefCell<World>> {
    CURRENT.with(|c| c.borrow().clone()).unwrap_or_else(|| {
        panic!("calametra: this needs a running simulation (call it from a scenario or a task it spawned)")
    })
}

/// Whether this thread is building or running a simulation.
pub fn in_simulation() -> bool {
    CURRENT.with(|c| c.borrow().is_some())
}

pub(crate) fn set_current(w: Option<Rc<RefCell<World>>>) -> Option<Rc<RefCell<World>>> {
    CURRENT.with(|c| std::mem::replace(&mut *c.borrow_mut(), w))
}

/// Modelled bus timing: how long a transfer takes to cross, in virtual nanoseconds.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    /// Fixed cost of a control transfer (setup, data and status stages).
    pub control_ns: Nanos,
    /// Fixed cost of a bulk or interrupt transfer.
    pub transfer_ns: Nanos,
    /// Cost per payload byte.
    pub per_byte_ns: Nanos,
}

impl Default for Timing {
    fn default() -> Self {
        // High-speed-like figures: 125 us microframes, ~400 MB/s payload.
        Timing {
            control_ns: 125_000,
            transfer_ns: 20_000,
            per_byte_ns: 2,
        }
    }
}

/// Side effects a device asked for during one call, applied after it returns.
#[derive(Default)]
pub(crate) struct Effects {
    pub(crate) disconnect: bool,
    pub(crate) stall: bool,
    pub(crate) delay: Nanos,
}

/// Queued things that happen at a virtual time.
pub(crate) enum Ev {
    Wake(Waker),
    Arrive(u64),
    Complete(u64),
    DevTimer { dev: usize, token: u64 },
}

#[derive(Clone)]
pub(crate) enum XKind {
    Control { setup: Setup, data: Vec<u8> },
    Out { ep: u8, data: Vec<u8> },
    In { ep: u8, len: usize, intr: bool },
}

impl XKind {
    /// What a transfer holds while its kind is lent to the device call that answers it.
    const TAKEN: XKind = XKind::In {
        ep: 0,
        len: 0,
        intr: false,
    };
}

enum XState {
    InFlight,
    Waiting,
    Swallowed,
    Delayed(Result<Vec<u8>, TransferError>),
    Done(Result<Vec<u8>, TransferError>),
}

struct Xfer {
    dev: usize,
    generation: u32,
    kind: XKind,
    actor: Rc<str>,
    site: String,
    fault: Option<Fault>,
    waker: Option<Waker>,
    state: XState,
    deadline_set: bool,
}

/// The transfers in flight by id: a short vector kept in id order (ids only grow, so a new one
/// goes at the end). Iteration is in submission order, and once grown it allocates nothing per
/// transfer (a `BTreeMap` allocated a node each time it went from empty to one: a hot path).
#[derive(Default)]
struct XferTable(Vec<(u64, Xfer)>);

impl XferTable {
    fn index(&self, id: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&id, |(k, _)| *k)
    }

    fn get(&self, id: &u64) -> Option<&Xfer> {
        self.index(*id).ok().map(|i| &self.0[i].1)
    }

    fn get_mut(&mut self, id: &u64) -> Option<&mut Xfer> {
        self.index(*id).ok().map(|i| &mut self.0[i].1)
    }

    fn insert(&mut self, id: u64, x: Xfer) {
        match self.index(id) {
            Ok(i) => self.0[i].1 = x,
            Err(i) => self.0.insert(i, (id, x)),
        }
    }

    fn remove(&mut self, id: &u64) -> Option<Xfer> {
        let i = self.index(*id).ok()?;
        Some(self.0.remove(i).1)
    }

    fn iter(&self) -> impl Iterator<Item = (&u64, &Xfer)> {
        self.0.iter().map(|(k, x)| (k, x))
    }

    fn values(&self) -> impl Iterator<Item = &Xfer> {
        self.0.iter().map(|(_, x)| x)
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// The event queue: events by (virtual time, insertion number), kept sorted in a vector. A run
/// has a handful of events queued at once, so a binary search and a short shift beat a
/// `BTreeMap`, which allocated a node each time the queue went from empty to one (every few
/// steps); once grown, the vector allocates nothing.
#[derive(Default)]
pub(crate) struct EventQueue(Vec<((Nanos, u64), Ev)>);

impl EventQueue {
    fn insert(&mut self, key: (Nanos, u64), ev: Ev) {
        let i = self.0.partition_point(|(k, _)| *k < key);
        self.0.insert(i, (key, ev));
    }

    fn get(&self, key: &(Nanos, u64)) -> Option<&Ev> {
        let i = self.0.binary_search_by_key(key, |(k, _)| *k).ok()?;
        Some(&self.0[i].1)
    }

    fn remove(&mut self, key: &(Nanos, u64)) -> Option<Ev> {
        let i = self.0.binary_search_by_key(key, |(k, _)| *k).ok()?;
        Some(self.0.remove(i).1)
    }

    fn first_time(&self) -> Option<Nanos> {
        self.0.first().map(|((t, _), _)| *t)
    }

    /// The events due at `t` (the earliest time), in their stable order.
    fn due_at(&self, t: Nanos) -> impl Iterator<Item = &(Nanos, u64)> {
        self.0
            .iter()
            .take_while(move |((at, _), _)| *at == t)
            .map(|(k, _)| k)
    }

    fn iter(&self) -> impl Iterator<Item = (&(Nanos, u64), &Ev)> {
        self.0.iter().map(|(k, e)| (k, e))
    }

    fn clear(&mut self) {
        self.0.clear();
    }
}

/// Appends the decimal digits of `n` without the formatting machinery (a hot path).
fn push_decimal(out: &mut String, mut n: u32) {
    let mut b = [0u8; 10];
    let mut i = b.len();
    loop {
        i -= 1;
        b[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend(b[i..].iter().map(|&c| c as char));
}

/// A model gap: a request the device had no evidence for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelGap {
    /// The device.
    pub device: String,
    /// The request.
    pub request: String,
    /// The device's state.
    pub state: String,
}

/// Everything of a world except its devices and tasks (so a device call can borrow both).
pub(crate) struct Core {
    pub(crate) now: Nanos,
    pub(crate) trace: Trace,
    pub(crate) decide: Decider,
    pub(crate) point: u64,
    queue: EventQueue,
    next_ev: u64,
    transfers: XferTable,
    next_xfer: u64,
    site_counts: BTreeMap<String, u32>,
    pub(crate) plan: FaultPlan,
    pub(crate) fault_set: FaultSet,
    pub(crate) sites: Vec<Site>,
    pub(crate) marks: BTreeMap<String, u64>,
    pub(crate) gap: Option<ModelGap>,
    pub(crate) actor: Rc<str>,
    /// The actor name `sim`, allocated once.
    pub(crate) sim_actor: Rc<str>,
    /// Sites submitted during the current task poll (to name a schedule choice).
    pub(crate) poll_sites: Vec<String>,
    /// Whether the current poll follows a non-default pick (only then are its sites named).
    pub(crate) label_poll: bool,
    pub(crate) timing: Timing,
    pub(crate) record_sites: bool,
    /// Each site base's crossings when the most recent anchor occurred (a fault's anchor
    /// counts the crossings of its base since).
    counts_at_anchor: BTreeMap<String, u32>,
    /// What the run reached, for a guided sweep (`RunConfig::coverage`): `None` when off.
    pub(crate) coverage: Option<std::collections::BTreeSet<String>>,
    /// The last transition seen (`dock:usb:attached->detached`), for pairs of consecutive
    /// transitions.
    last_transition: Option<String>,
}

/// In a seeded schedule without a swarm that explores faults, one in this many site crossings
/// gets a random fault (drawn from the `faults` stream); a swarm run uses its own density.
const SEEDED_FAULT_ODDS: u64 = 24;

impl Core {
    pub(crate) fn new(decide: Decider, plan: FaultPlan, fault_set: FaultSet, keep: bool) -> Core {
        Core {
            now: 0,
            trace: Trace::new(keep),
            decide,
            point: 0,
            queue: EventQueue::default(),
            next_ev: 0,
            transfers: XferTable::default(),
            next_xfer: 0,
            site_counts: BTreeMap::new(),
            plan,
            fault_set,
            sites: Vec::new(),
            marks: BTreeMap::new(),
            gap: None,
            actor: Rc::from("sim"),
            sim_actor: Rc::from("sim"),
            poll_sites: Vec::new(),
            label_poll: false,
            timing: Timing::default(),
            record_sites: false,
            counts_at_anchor: BTreeMap::new(),
            coverage: None,
            last_transition: None,
        }
    }

    /// Notes a feature the run reached (a guided sweep's coverage).
    pub(crate) fn cover(&mut self, feature: impl FnOnce() -> String) {
        if let Some(c) = &mut self.coverage {
            c.insert(feature());
        }
    }

    /// Notes a transition: the pair it makes with the one before is a feature.
    pub(crate) fn cover_transition(&mut self, actor: &str, machine: &str, from: &str, to: &str) {
        if self.coverage.is_none() {
            return;
        }
        let t = format!("{actor}:{machine}:{from}->{to}");
        let prev = self.last_transition.replace(t.clone());
        self.cover(|| match prev {
            Some(p) => format!("pair {p} | {t}"),
            None => format!("pair start | {t}"),
        });
    }

    /// An anchor occurrence (see [`Anchor`]): a transfer that completed with an error, a USB
    /// transition, an external. The events after it are recorded relative to it; on replay,
    /// the picks, externals and faults anchored to it are placed.
    pub(crate) fn occur(&mut self, key: &str) {
        let n = self.decide.occur(key, self.point);
        self.cover(|| format!("outcome {key}"));
        self.counts_at_anchor.clone_from(&self.site_counts);
        for (a, base, _, armed) in &mut self.decide.pending_faults {
            if armed.is_none() && a.after == key && a.nth == n {
                *armed = Some(self.site_counts.get(base.as_str()).copied().unwrap_or(0));
            }
        }
    }

    pub(crate) fn push(&mut self, t: Nanos, ev: Ev) {
        self.queue.insert((t, self.next_ev), ev);
        self.next_ev += 1;
    }

    /// A queued event for people: `get_status#3 arrives`, `timer`, `device timer`.
    pub(crate) fn describe_event(&self, key: (Nanos, u64)) -> String {
        let site = |xid: &u64| {
            self.transfers
                .get(xid)
                .map(|x| x.site.strip_prefix("ctrl.").unwrap_or(&x.site).to_string())
                .unwrap_or_else(|| "a cancelled transfer".into())
        };
        match self.queue.get(&key) {
            Some(Ev::Arrive(x)) => format!("{} arrives", site(x)),
            Some(Ev::Complete(x)) => format!("{} completes", site(x)),
            Some(Ev::Wake(_)) => "a timer".into(),
            Some(Ev::DevTimer { .. }) => "a device timer".into(),
            None => "an event".into(),
        }
    }

    /// The sites of transfers submitted and not yet completed, short (`get_status#2`).
    pub(crate) fn in_flight(&self) -> Vec<String> {
        self.transfers
            .values()
            .filter(|x| !matches!(x.state, XState::Done(_)))
            .map(|x| x.site.strip_prefix("ctrl.").unwrap_or(&x.site).to_string())
            .collect()
    }

    /// Earliest event time.
    pub(crate) fn next_time(&self) -> Option<Nanos> {
        self.queue.first_time()
    }

    /// The earliest event time and how many events are due then (counted, not collected:
    /// this runs every step).
    pub(crate) fn due_span(&self) -> Option<(Nanos, usize)> {
        let t = self.next_time()?;
        Some((t, self.queue.due_at(t).count()))
    }

    /// The key of the `i`th event due at `t` (the earliest time), in their stable order.
    pub(crate) fn due_nth(&self, t: Nanos, i: usize) -> Option<(Nanos, u64)> {
        self.queue.due_at(t).nth(i).copied()
    }

    pub(crate) fn take_event(&mut self, key: (Nanos, u64)) -> Option<Ev> {
        self.queue.remove(&key)
    }

    pub(crate) fn clear_queue(&mut self) {
        self.queue.clear();
        self.transfers.clear();
    }

    /// Counts an occurrence of `base` and returns `base#n` (`base` grown in place: one
    /// allocation a crossing); remembers it for site discovery.
    fn site(&mut self, base: String, kind: SiteKind) -> String {
        let n = match self.site_counts.get_mut(base.as_str()) {
            Some(n) => {
                *n += 1;
                *n
            }
            None => {
                self.site_counts.insert(base.clone(), 1);
                1
            }
        };
        let mut full = base;
        full.push('#');
        push_decimal(&mut full, n);
        if self.record_sites {
            self.sites.push(Site {
                name: full.clone(),
                kind,
            });
        }
        full
    }

    /// A replayed fault anchored to this crossing: its anchor happened and this is the
    /// `offset`th crossing of its site base since. Taken once.
    fn anchored_fault(&mut self, site: &str) -> Option<(Anchor, Fault)> {
        if self.decide.pending_faults.is_empty() {
            return None;
        }
        let base = site_base(site);
        let now = self.site_counts.get(base).copied().unwrap_or(0);
        let i = self
            .decide
            .pending_faults
            .iter()
            .position(|(a, b, _, armed)| {
                b == base && armed.is_some_and(|at| u64::from(now.saturating_sub(at)) == a.offset)
            })?;
        let (a, _, f, _) = self.decide.pending_faults.remove(i);
        Some((a, f))
    }

    /// The fault for a site: pinned by the plan, or drawn by a seeded schedule. Logged.
    fn fault_at(&mut self, site: &str, kind: &SiteKind) -> Option<Fault> {
        let mut anchor = None;
        let fault = if let Some(f) = self.plan.faults.get(site) {
            Some(f.clone())
        } else if let Some((a, f)) = self.anchored_fault(site) {
            anchor = Some(a);
            Some(f)
        } else if self.decide.is_seeded() && !self.fault_set.is_none() {
            // A swarm narrows the candidates to its primitives and site families, and sets the
            // density; a site it turns off draws nothing.
            let (candidates, odds) = match &self.decide.swarm {
                Some(swarm) => {
                    let family = SiteFamily::of(site, kind);
                    let c = if swarm.reaches(family) {
                        self.fault_set
                            .candidates(kind)
                            .into_iter()
                            .filter(|f| swarm.allows(f, family))
                            .collect()
                    } else {
                        Vec::new()
                    };
                    (c, u64::from(swarm.odds))
                }
                None => (self.fault_set.candidates(kind), SEEDED_FAULT_ODDS),
            };
            if candidates.is_empty() || self.decide.faults_below(odds) != Some(0) {
                None
            } else {
                let i = self
                    .decide
                    .faults_below(candidates.len() as u64)
                    .unwrap_or(0) as usize;
                Some(candidates[i].clone())
            }
        } else {
            None
        };
        if let Some(f) = &fault {
            let anchor = anchor.unwrap_or_else(|| {
                let base = site_base(site);
                let (after, nth) = self.decide.last_anchor();
                let now = self.site_counts.get(base).copied().unwrap_or(0);
                let then = self.counts_at_anchor.get(base).copied().unwrap_or(0);
                Anchor {
                    after: after.to_string(),
                    nth,
                    offset: u64::from(now.saturating_sub(then)),
                }
            });
            self.cover(|| format!("fault {} {}", site_base(site), f.kind()));
            self.decide.log.push(anchor.event());
            self.decide.log.push(Event::Fault {
                site: site.to_string(),
                fault: f.clone(),
            });
            let now = self.now;
            let fs = f.to_string();
            self.trace.emit(now, "fault", "bus", true, |d| {
                d.str("site", site).str("fault", &fs);
            });
        }
        fault
    }
}

pub(crate) struct DeviceSlot {
    pub(crate) name: String,
    pub(crate) dev: Box<dyn Device>,
    pub(crate) attached: bool,
    pub(crate) generation: u32,
}

/// A device attached to a simulation. `Copy`, so scenarios can move it into several closures.
pub struct DeviceHandle<D> {
    pub(crate) id: usize,
    _p: PhantomData<fn() -> D>,
}

impl<D> Clone for DeviceHandle<D> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<D> Copy for DeviceHandle<D> {}

impl<D> std::fmt::Debug for DeviceHandle<D> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceHandle({})", self.id)
    }
}

impl<D: Device> DeviceHandle<D> {
    pub(crate) fn new(id: usize) -> Self {
        DeviceHandle {
            id,
            _p: PhantomData,
        }
    }

    /// The driver-facing interface of this device (interface 0 claimed), valid until the
    /// device is disconnected. Call it while building a scenario or from a task.
    pub fn interface(&self) -> Interface {
        let world = current();
        let generation = world.borrow().devices[self.id].generation;
        Interface {
            world,
            dev: self.id,
            generation,
        }
    }
}

/// The state a run drives. Externals get `&mut World`, invariants `&World`.
pub struct World {
    pub(crate) core: Core,
    pub(crate) devices: Vec<DeviceSlot>,
    pub(crate) tasks: Tasks,
}

impl World {
    pub(crate) fn new(core: Core) -> World {
        World {
            core,
            devices: Vec::new(),
            tasks: Tasks::new(),
        }
    }

    /// Virtual time now.
    pub fn now(&self) -> Nanos {
        self.core.now
    }

    /// The scheduling point (step) the run is at.
    pub fn step(&self) -> u64 {
        self.core.point
    }

    /// The model behind a handle, to read its ground truth.
    pub fn model<D: Device>(&self, h: DeviceHandle<D>) -> &D {
        let any: &dyn Any = &*self.devices[h.id].dev;
        any.downcast_ref::<D>()
            .unwrap_or_else(|| panic!("calametra: device handle {} has another type", h.id))
    }

    /// The model behind a handle, mutably, without a context (test-only lies and setup).
    pub fn model_mut<D: Device>(&mut self, h: DeviceHandle<D>) -> &mut D {
        let any: &mut dyn Any = &mut *self.devices[h.id].dev;
        any.downcast_mut::<D>()
            .unwrap_or_else(|| panic!("calametra: device handle {} has another type", h.id))
    }

    /// Acts on a model through its context (an external plugging a monitor, say). Transfers
    /// waiting on the device are offered again afterwards.
    pub fn with_model<D: Device, R>(
        &mut self,
        h: DeviceHandle<D>,
        f: impl FnOnce(&mut D, &mut DevCtx<'_>) -> R,
    ) -> R {
        let slot = &mut self.devices[h.id];
        let any: &mut dyn Any = &mut *slot.dev;
        let dev = any
            .downcast_mut::<D>()
            .unwrap_or_else(|| panic!("calametra: device handle {} has another type", h.id));
        let mut cx = DevCtx {
            core: &mut self.core,
            dev: h.id,
            name: &slot.name,
            effects: Effects::default(),
        };
        let r = f(dev, &mut cx);
        let effects = cx.effects;
        if effects.disconnect {
            self.disconnect_id(h.id);
        }
        self.settle(h.id);
        r
    }

    /// Whether the device is on the bus.
    pub fn is_attached<D>(&self, h: DeviceHandle<D>) -> bool {
        self.devices[h.id].attached
    }

    /// Unplugs a device: every transfer to it fails `Disconnected`, and so will later ones on
    /// interfaces taken before.
    pub fn disconnect<D>(&mut self, h: DeviceHandle<D>) {
        self.disconnect_id(h.id);
    }

    /// Plugs a disconnected device back in (a bus reset); drivers must take a new interface.
    pub fn reconnect<D>(&mut self, h: DeviceHandle<D>) {
        self.reconnect_index(h.id);
    }

    pub(crate) fn reconnect_index(&mut self, id: usize) {
        if self.devices[id].attached {
            return;
        }
        self.devices[id].attached = true;
        let now = self.core.now;
        let name = self.devices[id].name.clone();
        self.core.trace.emit(now, "transition", &name, true, |d| {
            d.str("machine", "usb")
                .str("from", "detached")
                .str("to", "attached");
        });
        self.core.occur(&format!("{name} usb->attached"));
        self.core
            .cover_transition(&name, "usb", "detached", "attached");
        self.call(id, |dev, cx| dev.on_reset(cx));
    }

    /// Records a coverage mark.
    pub fn mark(&mut self, name: &str) {
        mark(&mut self.core, "world", name);
    }

    /// How many faults were injected so far in this run.
    pub fn faults_injected(&self) -> usize {
        self.core
            .decide
            .log
            .iter()
            .filter(|e| matches!(e, crate::choices::Event::Fault { .. }))
            .count()
    }

    /// How many external events fired so far in this run.
    pub fn externals_fired(&self) -> usize {
        self.core
            .decide
            .log
            .iter()
            .filter(|e| matches!(e, crate::choices::Event::External { .. }))
            .count()
    }

    /// Coverage marks reached so far, with counts.
    pub fn marks(&self) -> &BTreeMap<String, u64> {
        &self.core.marks
    }

    /// Sets the bus timing model.
    pub fn set_timing(&mut self, timing: Timing) {
        self.core.timing = timing;
    }

    pub(crate) fn disconnect_index(&mut self, id: usize) {
        self.disconnect_id(id);
    }

    fn disconnect_id(&mut self, id: usize) {
        if !self.devices[id].attached {
            return;
        }
        self.devices[id].attached = false;
        self.devices[id].generation += 1;
        let now = self.core.now;
        let name = self.devices[id].name.clone();
        self.core.trace.emit(now, "transition", &name, true, |d| {
            d.str("machine", "usb")
                .str("from", "attached")
                .str("to", "detached");
        });
        self.core.occur(&format!("{name} usb->detached"));
        self.core
            .cover_transition(&name, "usb", "attached", "detached");
        let ids: Vec<u64> = self
            .core
            .transfers
            .iter()
            .filter(|(_, x)| {
                x.dev == id
                    && matches!(
                        x.state,
                        XState::InFlight | XState::Waiting | XState::Swallowed | XState::Delayed(_)
                    )
            })
            .map(|(k, _)| *k)
            .collect();
        for x in ids {
            complete(&mut self.core, x, Err(TransferError::Disconnected));
        }
        self.call(id, |dev, cx| dev.on_disconnect(cx));
    }

    /// Calls into a device with a context; applies the effects it asked for.
    fn call<R>(
        &mut self,
        id: usize,
        f: impl FnOnce(&mut dyn Device, &mut DevCtx<'_>) -> R,
    ) -> (R, Effects) {
        let slot = &mut self.devices[id];
        let mut cx = DevCtx {
            core: &mut self.core,
            dev: id,
            name: &slot.name,
            effects: Effects::default(),
        };
        let r = f(&mut *slot.dev, &mut cx);
        let effects = std::mem::take(&mut cx.effects);
        (r, effects)
    }

    /// Offers waiting transfers of device `id` again until none makes progress.
    pub(crate) fn settle(&mut self, id: usize) {
        loop {
            let waiting: Vec<u64> = self
                .core
                .transfers
                .iter()
                .filter(|(_, x)| x.dev == id && matches!(x.state, XState::Waiting))
                .map(|(k, _)| *k)
                .collect();
            if waiting.is_empty() || !self.devices[id].attached {
                return;
            }
            let mut progressed = false;
            for x in waiting {
                if self.deliver(x) {
                    progressed = true;
                }
            }
            if !progressed {
                return;
            }
        }
    }

    /// Offers waiting transfers of every device again (after an external event).
    pub(crate) fn settle_all(&mut self) {
        for id in 0..self.devices.len() {
            self.settle(id);
        }
    }

    /// A transfer arrives at its device. Returns whether it completed (or left the waiting set).
    fn deliver(&mut self, xid: u64) -> bool {
        let Some(x) = self.core.transfers.get(&xid) else {
            return false;
        };
        let (dev, fault) = (x.dev, x.fault.clone());
        let first_arrival = matches!(x.state, XState::InFlight);
        if !self.devices[dev].attached || self.devices[dev].generation != x.generation {
            complete(&mut self.core, xid, Err(TransferError::Disconnected));
            return true;
        }
        if first_arrival {
            match fault {
                Some(Fault::Stall) => {
                    complete(&mut self.core, xid, Err(TransferError::Stall));
                    return true;
                }
                Some(Fault::Timeout) => {
                    if let Some(x) = self.core.transfers.get_mut(&xid) {
                        x.state = XState::Swallowed;
                    }
                    return true;
                }
                Some(Fault::Disconnect) => {
                    self.disconnect_id(dev);
                    return true;
                }
                _ => {}
            }
        }
        let bend = |data: &mut Vec<u8>| match fault {
            Some(Fault::Short(n)) => data.truncate(n as usize),
            Some(Fault::Corrupt { offset, xor }) if !data.is_empty() => {
                let i = offset as usize % data.len();
                data[i] ^= xor;
            }
            _ => {}
        };
        // Bent OUT data is a copy (the trace records what the driver sent); unbent data is
        // lent to the device from the transfer itself, taken out for the call and put back.
        let bends = matches!(fault, Some(Fault::Short(_) | Fault::Corrupt { .. }));
        let kind = match self.core.transfers.get_mut(&xid) {
            Some(x) => std::mem::replace(&mut x.kind, XKind::TAKEN),
            None => return false,
        };
        let bent = |data: &Vec<u8>| {
            bends.then(|| {
                let mut d = data.clone();
                bend(&mut d);
                d
            })
        };
        let (reply, effects) = match &kind {
            XKind::Control { setup, data } => {
                let out = if setup.is_in() { None } else { bent(data) };
                let data = out.as_ref().unwrap_or(data);
                let (mut r, e) = self.call(dev, |d, cx| d.control(cx, setup, data));
                if let Reply::Data(d) = &mut r {
                    d.truncate(setup.length as usize);
                    if setup.is_in() {
                        bend(d);
                    }
                }
                if !setup.is_in() && r == Reply::Ack {
                    r = Reply::Data(Vec::new());
                }
                (r, e)
            }
            XKind::Out { ep, data } => {
                let out = bent(data);
                let data = out.as_ref().unwrap_or(data);
                let n = data.len();
                let (r, e) = self.call(dev, |d, cx| d.out(cx, *ep, data));
                // An OUT result carries the accepted length as its "data" (see `finish_out`).
                let r = match r {
                    Reply::Ack | Reply::Data(_) => Reply::Data((n as u64).to_le_bytes().to_vec()),
                    other => other,
                };
                (r, e)
            }
            XKind::In { ep, len, .. } => {
                let (mut r, e) = self.call(dev, |d, cx| d.poll_in(cx, *ep, *len));
                if let Reply::Data(d) = &mut r {
                    d.truncate(*len);
                    bend(d);
                }
                (r, e)
            }
        };
        if let Some(x) = self.core.transfers.get_mut(&xid) {
            x.kind = kind;
        }
        let result = match reply {
            _ if effects.stall => Some(Err(TransferError::Stall)),
            Reply::Data(d) => Some(Ok(d)),
            Reply::Ack => Some(Ok(Vec::new())),
            Reply::Stall => Some(Err(TransferError::Stall)),
            Reply::Nak => None,
        };
        let done = match result {
            Some(r) => {
                let delay = effects.delay;
                if delay > 0 {
                    if let Some(x) = self.core.transfers.get_mut(&xid) {
                        x.state = XState::Delayed(r);
                    }
                    let t = self.core.now.saturating_add(delay);
                    self.core.push(t, Ev::Complete(xid));
                } else {
                    complete(&mut self.core, xid, r);
                }
                true
            }
            None => {
                if let Some(x) = self.core.transfers.get_mut(&xid) {
                    x.state = XState::Waiting;
                }
                false
            }
        };
        if effects.disconnect {
            self.disconnect_id(dev);
        }
        done || first_arrival
    }

    /// Fires one queued event.
    pub(crate) fn fire(&mut self, ev: Ev) {
        match ev {
            Ev::Wake(w) => w.wake(),
            Ev::Arrive(xid) => {
                let dev = self.core.transfers.get(&xid).map(|x| x.dev);
                self.deliver(xid);
                if let Some(dev) = dev {
                    self.settle(dev);
                }
            }
            Ev::Complete(xid) => {
                let r = match self.core.transfers.get_mut(&xid) {
                    Some(x) => match std::mem::replace(&mut x.state, XState::InFlight) {
                        XState::Delayed(r) => r,
                        other => {
                            x.state = other;
                            return;
                        }
                    },
                    None => return,
                };
                complete(&mut self.core, xid, r);
            }
            Ev::DevTimer { dev, token } => {
                if self.devices[dev].attached {
                    let ((), e) = self.call(dev, |d, cx| d.on_timer(cx, token));
                    if e.disconnect {
                        self.disconnect_id(dev);
                    }
                    self.settle(dev);
                }
            }
        }
    }

    pub(crate) fn attach(&mut self, dev: Box<dyn Device>) -> usize {
        let name = dev.name().to_string();
        self.devices.push(DeviceSlot {
            name,
            dev,
            attached: true,
            generation: 0,
        });
        self.devices.len() - 1
    }

    pub(crate) fn submit(&mut self, dev: usize, generation: u32, kind: XKind) -> u64 {
        let (base, site_kind, bytes, ctrl) = match &kind {
            XKind::Control { setup, data } => {
                let mut name = String::with_capacity(32);
                name.push_str("ctrl.");
                match self.devices[dev].dev.request_name(setup) {
                    Some(n) => name.push_str(n),
                    None => match setup.standard_name() {
                        Some(n) => name.push_str(n),
                        None => name
                            .push_str(&format!("{:02x}_{:02x}", setup.request_type, setup.request)),
                    },
                }
                let len = if setup.is_in() {
                    setup.length as u32
                } else {
                    data.len() as u32
                };
                (name, SiteKind::Transfer { len }, data.len(), true)
            }
            XKind::Out { data, .. } => (
                "bulk.out".to_string(),
                SiteKind::Transfer {
                    len: data.len() as u32,
                },
                data.len(),
                false,
            ),
            XKind::In { len, intr, .. } => {
                let base = if *intr { "intr.in" } else { "bulk.in" };
                (
                    base.to_string(),
                    SiteKind::Transfer { len: *len as u32 },
                    0,
                    false,
                )
            }
        };
        let site = self.core.site(base, site_kind.clone());
        if self.core.label_poll {
            self.core
                .poll_sites
                .push(site.strip_prefix("ctrl.").unwrap_or(&site).to_string());
        }
        let fault = self.core.fault_at(&site, &site_kind);
        let t = &self.core.timing;
        let mut latency =
            if ctrl { t.control_ns } else { t.transfer_ns } + t.per_byte_ns * bytes as u64;
        if let Some(Fault::Delay(d)) = fault {
            latency = latency.saturating_add(d);
        }
        let xid = self.core.next_xfer;
        self.core.next_xfer += 1;
        let actor = self.core.actor.clone();
        self.core.transfers.insert(
            xid,
            Xfer {
                dev,
                generation,
                kind,
                actor,
                site,
                fault,
                waker: None,
                state: XState::InFlight,
                deadline_set: false,
            },
        );
        let at = self.core.now.saturating_add(latency);
        self.core.push(at, Ev::Arrive(xid));
        xid
    }

    /// Polls a transfer for completion; cancels it at `deadline`.
    fn poll_xfer(
        &mut self,
        xid: u64,
        deadline: Option<Nanos>,
        waker: &Waker,
    ) -> Poll<Result<Vec<u8>, TransferError>> {
        let now = self.core.now;
        match self.core.transfers.get(&xid) {
            None => return Poll::Ready(Err(TransferError::Cancelled)),
            Some(Xfer {
                state: XState::Done(_),
                ..
            }) => {
                if let Some(Xfer {
                    state: XState::Done(r),
                    ..
                }) = self.core.transfers.remove(&xid)
                {
                    return Poll::Ready(r);
                }
            }
            Some(_) => {}
        }
        let Some(x) = self.core.transfers.get_mut(&xid) else {
            return Poll::Ready(Err(TransferError::Cancelled));
        };
        if let Some(d) = deadline {
            if now >= d {
                complete(&mut self.core, xid, Err(TransferError::Timeout));
                self.core.transfers.remove(&xid);
                return Poll::Ready(Err(TransferError::Timeout));
            }
            if !x.deadline_set {
                x.deadline_set = true;
                x.waker = Some(waker.clone());
                self.core.push(d, Ev::Wake(waker.clone()));
                return Poll::Pending;
            }
        }
        if !x.waker.as_ref().is_some_and(|w| w.will_wake(waker)) {
            x.waker = Some(waker.clone());
        }
        Poll::Pending
    }

    /// A completed transfer's result, removing it.
    pub(crate) fn take_done(&mut self, xid: u64) -> Option<Result<Vec<u8>, TransferError>> {
        if !matches!(
            self.core.transfers.get(&xid),
            Some(Xfer {
                state: XState::Done(_),
                ..
            })
        ) {
            return None;
        }
        match self.core.transfers.remove(&xid) {
            Some(Xfer {
                state: XState::Done(r),
                ..
            }) => Some(r),
            _ => None,
        }
    }

    /// Whether a transfer waits for the device (a NAKed IN) or was swallowed by a fault.
    pub(crate) fn is_waiting(&self, xid: u64) -> bool {
        matches!(
            self.core.transfers.get(&xid),
            Some(Xfer {
                state: XState::Waiting | XState::Swallowed,
                ..
            })
        )
    }

    /// Drops a transfer without a trace record (a host poll that found nothing).
    pub(crate) fn cancel_quiet(&mut self, xid: u64) {
        self.core.transfers.remove(&xid);
    }

    /// A USB bus reset of device `id`: pending transfers are cancelled, the device is told.
    pub(crate) fn reset_index(&mut self, id: usize) {
        if !self.devices[id].attached {
            return;
        }
        let ids: Vec<u64> = self
            .core
            .transfers
            .iter()
            .filter(|(_, x)| x.dev == id && !matches!(x.state, XState::Done(_)))
            .map(|(k, _)| *k)
            .collect();
        for x in ids {
            complete(&mut self.core, x, Err(TransferError::Cancelled));
        }
        let now = self.core.now;
        let name = self.devices[id].name.clone();
        self.core.trace.emit(now, "transition", &name, true, |d| {
            d.str("machine", "usb")
                .str("from", "attached")
                .str("to", "reset");
        });
        self.core.occur(&format!("{name} usb->reset"));
        self.core
            .cover_transition(&name, "usb", "attached", "reset");
        let ((), e) = self.call(id, |dev, cx| dev.on_reset(cx));
        if e.disconnect {
            self.disconnect_id(id);
        }
        self.settle(id);
    }

    /// A future dropped before completion: the host cancels the transfer.
    fn cancel(&mut self, xid: u64) {
        if let Some(x) = self.core.transfers.get(&xid) {
            if !matches!(x.state, XState::Done(_)) {
                complete(&mut self.core, xid, Err(TransferError::Cancelled));
            }
        }
        self.core.transfers.remove(&xid);
    }
}

/// Completes a transfer: writes its trace record and wakes its task.
fn complete(core: &mut Core, xid: u64, r: Result<Vec<u8>, TransferError>) {
    let now = core.now;
    let Some(x) = core.transfers.get_mut(&xid) else {
        return;
    };
    if matches!(x.state, XState::Done(_)) {
        return;
    }
    // A transfer that failed is an anchor (`ctrl.clear_halt stall`).
    let failed = r
        .as_ref()
        .err()
        .map(|e| format!("{} {}", site_base(&x.site), e.as_str()));
    let trace = &mut core.trace;
    trace.emit(now, "transfer", &x.actor, true, |d| {
        d.str("site", &x.site);
        match &x.kind {
            XKind::Control { setup, data } => {
                d.hex("setup", &setup.to_bytes());
                if !setup.is_in() && !data.is_empty() {
                    d.payload("out", data);
                }
            }
            XKind::Out { ep, data } => {
                d.u64("ep", *ep as u64).payload("out", data);
            }
            XKind::In { ep, len, .. } => {
                d.u64("ep", *ep as u64).u64("max", *len as u64);
            }
        }
        match &r {
            Ok(v) => {
                d.str("status", "ok");
                match &x.kind {
                    XKind::Out { .. } => {
                        d.u64("len", out_len(v) as u64);
                    }
                    XKind::Control { setup, .. } if !setup.is_in() => {}
                    _ => {
                        d.u64("len", v.len() as u64).payload("in", v);
                    }
                }
            }
            Err(e) => {
                d.str("status", e.as_str());
            }
        }
    });
    x.state = XState::Done(r);
    if let Some(w) = x.waker.take() {
        w.wake();
    }
    if let Some(key) = failed {
        core.occur(&key);
    }
}

pub(crate) fn out_len(v: &[u8]) -> usize {
    let mut b = [0u8; 8];
    let n = v.len().min(8);
    b[..n].copy_from_slice(&v[..n]);
    u64::from_le_bytes(b) as usize
}

/// `DevCtx::transition`.
pub(crate) fn transition(cx: &mut DevCtx<'_>, machine: &str, from: &str, to: &str) -> bool {
    let base = format!("{machine}.{from}->{to}");
    let site = cx.core.site(base, SiteKind::Transition);
    let now = cx.core.now;
    cx.core.trace.emit(now, "transition", cx.name, true, |d| {
        d.str("machine", machine)
            .str("from", from)
            .str("to", to)
            .str("site", &site);
    });
    cx.core.cover_transition(cx.name, machine, from, to);
    match cx.core.fault_at(&site, &SiteKind::Transition) {
        Some(Fault::Stall) => {
            cx.effects.stall = true;
            false
        }
        Some(Fault::Disconnect) => {
            cx.effects.disconnect = true;
            true
        }
        Some(Fault::Delay(d)) => {
            cx.effects.delay = cx.effects.delay.saturating_add(d);
            true
        }
        _ => true,
    }
}

pub(crate) fn mark(core: &mut Core, actor: &str, name: &str) {
    *core.marks.entry(name.to_string()).or_insert(0) += 1;
    let now = core.now;
    core.trace.emit(now, "mark", actor, true, |d| {
        d.str("mark", name);
    });
}

pub(crate) fn model_gap(core: &mut Core, device: &str, request: &str, state: &str) {
    let now = core.now;
    core.trace.emit(now, "model_gap", device, true, |d| {
        d.str("request", request).str("state", state);
    });
    if core.gap.is_none() {
        core.gap = Some(ModelGap {
            device: device.to_string(),
            request: request.to_string(),
            state: state.to_string(),
        });
    }
}

pub(crate) fn device_timer(core: &mut Core, dev: usize, ns: Nanos, token: u64) {
    let t = core.now.saturating_add(ns);
    core.push(t, Ev::DevTimer { dev, token });
}

/// The simulator's interface to a device: the `nusb`-shaped API a driver receives.
#[derive(Clone)]
pub struct Interface {
    world: Rc<RefCell<World>>,
    dev: usize,
    generation: u32,
}

struct CancelGuard<'a> {
    world: &'a Rc<RefCell<World>>,
    xid: u64,
    armed: bool,
}

impl Drop for CancelGuard<'_> {
    fn drop(&mut self) {
        if self.armed {
            if let Ok(mut w) = self.world.try_borrow_mut() {
                w.cancel(self.xid);
            }
        }
    }
}

impl Interface {
    async fn transfer(
        &self,
        kind: XKind,
        timeout: Option<Duration>,
    ) -> Result<Vec<u8>, TransferError> {
        let (xid, deadline) = {
            let mut w = self.world.borrow_mut();
            let deadline = timeout.map(|d| w.core.now.saturating_add(nanos(d)));
            (w.submit(self.dev, self.generation, kind), deadline)
        };
        let mut guard = CancelGuard {
            world: &self.world,
            xid,
            armed: true,
        };
        let r = poll_fn(|cx| self.world.borrow_mut().poll_xfer(xid, deadline, cx.waker())).await;
        guard.armed = false;
        r
    }

    /// A control IN transfer.
    pub async fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransferError> {
        self.transfer(
            XKind::Control {
                setup: req.setup(),
                data: Vec::new(),
            },
            Some(timeout),
        )
        .await
    }

    /// A control OUT transfer.
    pub async fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> Result<(), TransferError> {
        self.transfer(
            XKind::Control {
                setup: req.setup(),
                data: req.data.to_vec(),
            },
            Some(timeout),
        )
        .await
        .map(|_| ())
    }

    /// A control transfer from raw setup bytes (bridges and replays).
    pub async fn control_raw(
        &self,
        setup: Setup,
        data: Vec<u8>,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransferError> {
        self.transfer(XKind::Control { setup, data }, Some(timeout))
            .await
    }

    /// A bulk OUT transfer; returns the bytes accepted.
    pub async fn bulk_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        self.transfer(XKind::Out { ep, data }, None)
            .await
            .map(|v| out_len(&v))
    }

    /// A bulk IN transfer of up to `len` bytes.
    pub async fn bulk_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        self.transfer(
            XKind::In {
                ep,
                len,
                intr: false,
            },
            None,
        )
        .await
    }

    /// An interrupt IN transfer of up to `len` bytes.
    pub async fn interrupt_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        self.transfer(
            XKind::In {
                ep,
                len,
                intr: true,
            },
            None,
        )
        .await
    }

    /// Resets the device (a USB bus reset, as `nusb::Device::reset`); this interface stays
    /// valid. Takes the bus's control-transfer time.
    pub async fn reset(&self) -> Result<(), TransferError> {
        let at = {
            let w = self.world.borrow();
            if !w.devices[self.dev].attached || w.devices[self.dev].generation != self.generation {
                return Err(TransferError::Disconnected);
            }
            w.core.now.saturating_add(w.core.timing.control_ns)
        };
        crate::exec::sleep_until(at).await;
        let mut w = self.world.borrow_mut();
        if w.devices[self.dev].generation != self.generation {
            return Err(TransferError::Disconnected);
        }
        w.reset_index(self.dev);
        Ok(())
    }
}

impl UsbInterface for Interface {
    fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        Interface::control_in(self, req, timeout)
    }
    fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> impl Future<Output = Result<(), TransferError>> {
        let data = req.data.to_vec();
        let setup = req.setup();
        async move {
            self.transfer(XKind::Control { setup, data }, Some(timeout))
                .await
                .map(|_| ())
        }
    }
    fn bulk_out(
        &self,
        ep: u8,
        data: Vec<u8>,
    ) -> impl Future<Output = Result<usize, TransferError>> {
        Interface::bulk_out(self, ep, data)
    }
    fn bulk_in(&self, ep: u8, len: usize) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        Interface::bulk_in(self, ep, len)
    }
    fn interrupt_in(
        &self,
        ep: u8,
        len: usize,
    ) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        Interface::interrupt_in(self, ep, len)
    }
    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        crate::exec::sleep(d)
    }
    fn reset(&self) -> impl Future<Output = Result<(), TransferError>> {
        Interface::reset(self)
    }
}

/// What [`crate::state`] reads of the bus: the transfers not yet collected (each with the waker
/// of the task awaiting it) and the timers queued (each with the waker it wakes).
#[allow(clippy::type_complexity)]
impl Core {
    pub(crate) fn state_parts<'a>(
        &'a self,
        devices: &[DeviceSlot],
    ) -> (
        Vec<(crate::state::TransferState, Option<&'a Waker>)>,
        Vec<(Nanos, &'a Waker)>,
    ) {
        let due = |xid: u64| {
            self.queue
                .iter()
                .find(|(_, ev)| matches!(ev, Ev::Arrive(x) | Ev::Complete(x) if *x == xid))
                .map(|((t, _), _)| *t)
        };
        let transfers = self
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
                let t = crate::state::TransferState {
                    site: x.site.clone(),
                    actor: x.actor.to_string(),
                    device: devices
                        .get(x.dev)
                        .map(|d| d.name.clone())
                        .unwrap_or_default(),
                    state,
                    fault: x.fault.as_ref().map(|f| f.to_string()),
                    due_ns: due(*xid),
                };
                (t, x.waker.as_ref())
            })
            .collect();
        let timers = self
            .queue
            .iter()
            .filter_map(|((t, _), ev)| match ev {
                Ev::Wake(w) => Some((*t, w)),
                _ => None,
            })
            .collect();
        (transfers, timers)
    }
}
