//! The bus and the run's shared state ([`Core`]: everything of a world but its devices and
//! tasks): the clock, the event queue, the transfer table, site counting and fault choice,
//! transfer completion (its trace record and its waker), coverage marks, model gaps and device
//! timers. It calls no device: delivering a transfer to one is the world's ([`crate::world`]).
//! Nothing here reads the wall clock or iterates a std hash container.

use crate::choices::{site_base, Anchor, Decider, Event};
use crate::clock::Nanos;
use crate::fault::{Fault, FaultPlan, FaultSet, Site, SiteFamily, SiteKind};
use crate::tasks::Wakeup;
use crate::trace::Trace;
use calametra_usb::{Setup, TransferError};
use std::collections::BTreeMap;
use std::rc::Rc;
use std::task::Waker;

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

/// Queued things that happen at a virtual time.
pub(crate) enum Ev {
    /// A timer: wakes a task of this run (by id) or any waker ([`Wakeup`]).
    Wake(Wakeup),
    Arrive(u64),
    Complete(u64),
    DevTimer {
        dev: usize,
        token: u64,
    },
}

#[derive(Clone)]
pub(crate) enum XKind {
    Control { setup: Setup, data: Vec<u8> },
    Out { ep: u8, data: Vec<u8> },
    In { ep: u8, len: usize, intr: bool },
}

impl XKind {
    /// What a transfer holds while its kind is lent to the device call that answers it.
    pub(crate) const TAKEN: XKind = XKind::In {
        ep: 0,
        len: 0,
        intr: false,
    };
}

pub(crate) enum XState {
    InFlight,
    Waiting,
    Swallowed,
    Delayed(Result<Vec<u8>, TransferError>),
    Done(Result<Vec<u8>, TransferError>),
}

pub(crate) struct Xfer {
    pub(crate) dev: usize,
    pub(crate) generation: u32,
    pub(crate) kind: XKind,
    pub(crate) actor: Rc<str>,
    pub(crate) site: String,
    pub(crate) fault: Option<Fault>,
    pub(crate) waker: Option<Waker>,
    pub(crate) state: XState,
    pub(crate) deadline_set: bool,
}

/// The transfers in flight by id: a short vector kept in id order (ids only grow, so a new one
/// goes at the end). Iteration is in submission order, and once grown it allocates nothing per
/// transfer (a `BTreeMap` allocated a node each time it went from empty to one: a hot path).
/// The site names of removed transfers are kept as spare buffers for the names of the next
/// ones ([`XferTable::spare_name`]), so naming a transfer allocates nothing once warm.
#[derive(Default)]
pub(crate) struct XferTable(Vec<(u64, Xfer)>, Vec<String>);

impl XferTable {
    pub(crate) fn index(&self, id: u64) -> Result<usize, usize> {
        self.0.binary_search_by_key(&id, |(k, _)| *k)
    }

    pub(crate) fn get(&self, id: &u64) -> Option<&Xfer> {
        self.index(*id).ok().map(|i| &self.0[i].1)
    }

    pub(crate) fn get_mut(&mut self, id: &u64) -> Option<&mut Xfer> {
        self.index(*id).ok().map(|i| &mut self.0[i].1)
    }

    pub(crate) fn insert(&mut self, id: u64, x: Xfer) {
        match self.index(id) {
            Ok(i) => self.0[i].1 = x,
            Err(i) => self.0.insert(i, (id, x)),
        }
    }

    /// Removes a transfer; its site name's buffer is kept as a spare (the returned transfer's
    /// `site` is empty).
    pub(crate) fn remove(&mut self, id: &u64) -> Option<Xfer> {
        let i = self.index(*id).ok()?;
        let mut x = self.0.remove(i).1;
        self.1.push(std::mem::take(&mut x.site));
        Some(x)
    }

    /// An empty string to build a site name in: a spare buffer of a removed transfer's name,
    /// or a new one with room for a usual name and its `#n` (`ctrl.get_descriptor#12`), so it
    /// is not grown while the name is built.
    pub(crate) fn spare_name(&mut self) -> String {
        let mut s = self.1.pop().unwrap_or_else(|| String::with_capacity(32));
        s.clear();
        s
    }

    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &Xfer)> {
        self.0.iter().map(|(k, x)| (k, x))
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Xfer> {
        self.0.iter().map(|(_, x)| x)
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
}

/// The event queue: events by (virtual time, insertion number), kept sorted in a vector, latest
/// first, so the earliest event (the one usually taken) is the last element and taking it
/// shifts nothing, and a near-term event is inserted near the end, past later ones. (In
/// ascending order every take shifted the whole queue: the core bench's queue `memmove`s were
/// ~9,400 callgrind instructions a run, now ~4,700; issue 20.) A binary search and a short
/// shift beat a `BTreeMap`, which allocated a node each time the queue went from empty to one;
/// once grown, the vector allocates nothing.
#[derive(Default)]
pub(crate) struct EventQueue(Vec<((Nanos, u64), Ev)>);

impl EventQueue {
    pub(crate) fn insert(&mut self, key: (Nanos, u64), ev: Ev) {
        let i = self.0.partition_point(|(k, _)| *k > key);
        self.0.insert(i, (key, ev));
    }

    /// Where `key` is (the vector is in descending key order).
    fn index(&self, key: &(Nanos, u64)) -> Option<usize> {
        self.0.binary_search_by(|(k, _)| key.cmp(k)).ok()
    }

    pub(crate) fn get(&self, key: &(Nanos, u64)) -> Option<&Ev> {
        Some(&self.0[self.index(key)?].1)
    }

    pub(crate) fn remove(&mut self, key: &(Nanos, u64)) -> Option<Ev> {
        let i = self.index(key)?;
        Some(self.0.remove(i).1)
    }

    pub(crate) fn first_time(&self) -> Option<Nanos> {
        self.0.last().map(|((t, _), _)| *t)
    }

    /// The events due at `t` (the earliest time), in their stable order.
    pub(crate) fn due_at(&self, t: Nanos) -> impl Iterator<Item = &(Nanos, u64)> {
        self.0
            .iter()
            .rev()
            .take_while(move |((at, _), _)| *at == t)
            .map(|(k, _)| k)
    }

    /// The events in (time, insertion) order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&(Nanos, u64), &Ev)> {
        self.0.iter().rev().map(|(k, e)| (k, e))
    }

    pub(crate) fn clear(&mut self) {
        self.0.clear();
    }
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
    pub(crate) queue: EventQueue,
    pub(crate) next_ev: u64,
    pub(crate) transfers: XferTable,
    pub(crate) next_xfer: u64,
    pub(crate) site_counts: BTreeMap<String, u32>,
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
    pub(crate) counts_at_anchor: BTreeMap<String, u32>,
    /// What the run reached, for a guided sweep (`RunConfig::coverage`): `None` when off.
    pub(crate) coverage: Option<std::collections::BTreeSet<String>>,
    /// The last transition seen (`dock:usb:attached->detached`), for pairs of consecutive
    /// transitions.
    pub(crate) last_transition: Option<String>,
}

/// In a seeded schedule without a swarm that explores faults, one in this many site crossings
/// gets a random fault (drawn from the `faults` stream); a swarm run uses its own density.
const SEEDED_FAULT_ODDS: u64 = 24;

impl Core {
    pub(crate) fn new(decide: Decider, plan: FaultPlan, fault_set: FaultSet, keep: bool) -> Core {
        let sim: Rc<str> = Rc::from("sim");
        Core {
            now: 0,
            trace: Trace::new(keep),
            decide,
            point: 0,
            // Room for the events a run usually has queued at once (transfer deadlines stay
            // queued until due; the core bench's queue grew 16 -> 32 -> 64 every run): no
            // growth step by step.
            queue: EventQueue(Vec::with_capacity(64)),
            next_ev: 0,
            transfers: XferTable::default(),
            next_xfer: 0,
            site_counts: BTreeMap::new(),
            plan,
            fault_set,
            sites: Vec::new(),
            marks: BTreeMap::new(),
            gap: None,
            actor: sim.clone(),
            sim_actor: sim,
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

    /// Appends a queued event for people: `get_status#3 arrives`, `a timer`, `a device timer`
    /// (written into `out`: a logged pick's label is built every time one is taken).
    pub(crate) fn describe_event(&self, key: (Nanos, u64), out: &mut String) {
        let mut site = |xid: &u64, what: &str| {
            match self.transfers.get(xid) {
                Some(x) => out.push_str(x.site.strip_prefix("ctrl.").unwrap_or(&x.site)),
                None => out.push_str("a cancelled transfer"),
            }
            out.push_str(what);
        };
        match self.queue.get(&key) {
            Some(Ev::Arrive(x)) => site(x, " arrives"),
            Some(Ev::Complete(x)) => site(x, " completes"),
            Some(Ev::Wake(_)) => out.push_str("a timer"),
            Some(Ev::DevTimer { .. }) => out.push_str("a device timer"),
            None => out.push_str("an event"),
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
    pub(crate) fn site(&mut self, base: String, kind: SiteKind) -> String {
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
        let mut tmp = [0; 20];
        let digits = crate::trace::decimal(u64::from(n), &mut tmp);
        full.extend(digits.iter().map(|&c| char::from(c)));
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
    pub(crate) fn fault_at(&mut self, site: &str, kind: &SiteKind) -> Option<Fault> {
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

/// Completes a transfer: writes its trace record and wakes its task.
pub(crate) fn complete(core: &mut Core, xid: u64, r: Result<Vec<u8>, TransferError>) {
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

#[cfg(test)]
mod tests {
    use super::*;

    /// The queue against a sorted list: inserts in any order, removals from anywhere, always
    /// in (time, insertion) order.
    #[test]
    fn the_event_queue_stays_in_time_and_insertion_order() {
        use rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut q = EventQueue::default();
        let mut want: Vec<(Nanos, u64)> = Vec::new();
        for n in 0..2_000u64 {
            if want.is_empty() || rng.next_u32() % 3 != 0 {
                let key = (u64::from(rng.next_u32() % 8), n);
                q.insert(key, Ev::Arrive(n));
                want.push(key);
                want.sort();
            } else {
                let i = rng.next_u32() as usize % want.len();
                let key = want.remove(i);
                assert!(matches!(q.remove(&key), Some(Ev::Arrive(x)) if x == key.1));
                assert!(q.remove(&key).is_none());
            }
            let keys: Vec<(Nanos, u64)> = q.iter().map(|(k, _)| *k).collect();
            assert_eq!(keys, want);
            assert_eq!(q.first_time(), want.first().map(|k| k.0));
            if let Some(&(t, _)) = want.first() {
                let due: Vec<(Nanos, u64)> = q.due_at(t).copied().collect();
                let want_due: Vec<(Nanos, u64)> =
                    want.iter().copied().take_while(|k| k.0 == t).collect();
                assert_eq!(due, want_due);
                assert!(want.iter().all(|k| q.get(k).is_some()));
            }
        }
    }
}
