//! The bus and the run's shared state ([`Core`]: everything of a world but its devices and
//! tasks): the clock, the event queue, the transfer table, site counting and fault choice,
//! transfer completion (its trace record and its waker), coverage marks, model gaps and device
//! timers. It calls no device: delivering a transfer to one is the world's ([`crate::world`]).
//! Nothing here reads the wall clock or iterates a std hash container.
//!
//! Two parts live in their own files: the transfer table ([`xfers`]) and site counting
//! ([`sites`]).

use crate::choices::{Anchor, Decider, Event};
use crate::clock::Nanos;
use crate::fault::{Fault, FaultPlan, FaultSet, Site, SiteFamily, SiteKind};
use crate::tasks::Wakeup;
use crate::trace::Trace;
use calametra_usb::TransferError;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

mod sites;
mod xfers;

pub(crate) use sites::{SiteId, SiteTable};
pub(crate) use xfers::{endpoint_bit, XKind, XState, Xfer, XferTable};

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

/// The event queue: events by (virtual time, insertion number), one sorted sequence kept in
/// two parts: its start in `near`, a vector in descending order (the earliest event last), and
/// the rest in `far`, a ring buffer in ascending order; every event of `near` comes before
/// every event of `far`. The events a run queues are of two sorts: near-term ones (a
/// transfer's arrival, a short sleep) and far ones (a transfer's deadline, `now` + its timeout,
/// later than everything queued before it). A far one is appended to `far` (nothing shifts); a
/// near one goes into `near` at its place, which is at or near its end (few shift); a step
/// takes its event from the end of `near`, or when that is empty from the front of `far`.
/// (A single descending vector shifted the whole queue for every deadline; a binary heap paid
/// a sift through all its levels for every near event and every take; a `VecDeque` alone paid
/// its wrap-around handling at every insert: with ~60 deadlines queued at once, the core bench
/// ran 303,174 / 301,450 / 309,712 callgrind instructions a run with them; issue 20.) Once
/// grown, nothing allocates.
#[derive(Default)]
pub(crate) struct EventQueue {
    near: Vec<((Nanos, u64), Ev)>,
    far: VecDeque<((Nanos, u64), Ev)>,
}

impl EventQueue {
    fn with_capacity(near: usize, far: usize) -> EventQueue {
        EventQueue {
            near: Vec::with_capacity(near),
            far: VecDeque::with_capacity(far),
        }
    }

    /// Inlined into [`Core::push`]'s callers: the usual cases (a deadline later than every
    /// event queued, a near-term event) take a few compares; a key inside `far` is placed out
    /// of line.
    #[inline(always)]
    pub(crate) fn insert(&mut self, key: (Nanos, u64), ev: Ev) {
        let later_than_all = match self.far.back() {
            Some((b, _)) => key > *b,
            // Later than everything queued: the start of `far`.
            None => self.near.first().is_some_and(|(m, _)| key > *m),
        };
        if later_than_all {
            self.far.push_back((key, ev));
        } else if self.far.front().is_some_and(|(f, _)| key > *f) {
            self.insert_far(key, ev);
        } else {
            let i = self.near.partition_point(|(k, _)| *k > key);
            self.near.insert(i, (key, ev));
        }
    }

    /// A key between `far`'s first and last: put at its place there.
    #[inline(never)]
    fn insert_far(&mut self, key: (Nanos, u64), ev: Ev) {
        let i = self.far.partition_point(|(k, _)| *k < key);
        self.far.insert(i, (key, ev));
    }

    /// The events in (time, insertion) order.
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&(Nanos, u64), &Ev)> {
        self.near
            .iter()
            .rev()
            .chain(self.far.iter())
            .map(|(k, e)| (k, e))
    }

    pub(crate) fn get(&self, key: &(Nanos, u64)) -> Option<&Ev> {
        if let Ok(i) = self.near.binary_search_by(|(k, _)| key.cmp(k)) {
            return Some(&self.near[i].1);
        }
        let i = self.far.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        Some(&self.far[i].1)
    }

    /// Inlined into its caller: a step takes the first due event, usually (the end of `near`
    /// or the front of `far`); another one is found out of line.
    #[inline(always)]
    pub(crate) fn remove(&mut self, key: &(Nanos, u64)) -> Option<Ev> {
        if self.near.last().is_some_and(|(k, _)| k == key) {
            return self.near.pop().map(|(_, e)| e);
        }
        if self.near.is_empty() && self.far.front().is_some_and(|(k, _)| k == key) {
            return self.far.pop_front().map(|(_, e)| e);
        }
        self.remove_inside(key)
    }

    /// [`EventQueue::remove`] of an event that is not the first.
    #[inline(never)]
    fn remove_inside(&mut self, key: &(Nanos, u64)) -> Option<Ev> {
        if let Ok(i) = self.near.binary_search_by(|(k, _)| key.cmp(k)) {
            return Some(self.near.remove(i).1);
        }
        let i = self.far.binary_search_by(|(k, _)| k.cmp(key)).ok()?;
        self.far.remove(i).map(|(_, e)| e)
    }

    pub(crate) fn first_time(&self) -> Option<Nanos> {
        self.near
            .last()
            .or_else(|| self.far.front())
            .map(|((t, _), _)| *t)
    }

    /// The events due at `t` (the earliest time), in their stable order: the tests' reference
    /// for `due_count` and `due_nth`.
    #[cfg(test)]
    pub(crate) fn due_at(&self, t: Nanos) -> impl Iterator<Item = &(Nanos, u64)> {
        self.iter()
            .take_while(move |((at, _), _)| *at == t)
            .map(|(k, _)| k)
    }

    /// How many events are due at the earliest time (counted in place: this runs every step;
    /// `far` is read by index, no iterator over its two halves set up, as its first event is
    /// usually not due).
    #[inline(always)]
    pub(crate) fn due_count(&self) -> usize {
        let Some(t) = self.first_time() else {
            return 0;
        };
        let n = self
            .near
            .iter()
            .rev()
            .take_while(|((at, _), _)| *at == t)
            .count();
        if n < self.near.len() {
            return n;
        }
        let mut i = 0;
        while self.far.get(i).is_some_and(|((at, _), _)| *at == t) {
            i += 1;
        }
        n + i
    }

    /// The key of the `i`th event due at `t` when `t` is the earliest time (as
    /// `due_at(t).nth(i)`, by index: in a sorted sequence, the `i`th event is due at the
    /// earliest time exactly when it is at that time).
    pub(crate) fn due_nth(&self, t: Nanos, i: usize) -> Option<(Nanos, u64)> {
        if self.first_time() != Some(t) {
            return None;
        }
        let n = self.near.len();
        let (key, _) = if i < n {
            &self.near[n - 1 - i]
        } else {
            self.far.get(i - n)?
        };
        (key.0 == t).then_some(*key)
    }

    pub(crate) fn clear(&mut self) {
        self.near.clear();
        self.far.clear();
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
    /// The site bases, interned, with this run's crossings of each and the crossings at the
    /// most recent anchor (a fault's anchor counts the crossings of its base since).
    pub(crate) site_table: SiteTable,
    pub(crate) plan: FaultPlan,
    pub(crate) fault_set: FaultSet,
    pub(crate) sites: Vec<Site>,
    pub(crate) marks: BTreeMap<String, u64>,
    pub(crate) gap: Option<ModelGap>,
    pub(crate) actor: Rc<str>,
    /// The actor name `sim`, allocated once.
    pub(crate) sim_actor: Rc<str>,
    pub(crate) timing: Timing,
    pub(crate) record_sites: bool,
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
    /// A new core; `Core::reset` (in `world`, every field named) gives the same state in place.
    pub(crate) fn new(decide: Decider, plan: FaultPlan, fault_set: FaultSet, keep: bool) -> Core {
        let sim: Rc<str> = Rc::from("sim");
        Core {
            now: 0,
            trace: Trace::new(keep),
            decide,
            point: 0,
            // Room for the events a run usually has queued at once (transfer deadlines stay
            // queued until due: ~60 in the core bench's `far`, a few near-term ones): no
            // growth step by step.
            queue: EventQueue::with_capacity(16, 64),
            next_ev: 0,
            transfers: XferTable::default(),
            site_table: SiteTable::default(),
            plan,
            fault_set,
            sites: Vec::new(),
            marks: BTreeMap::new(),
            gap: None,
            actor: sim.clone(),
            sim_actor: sim,
            timing: Timing::default(),
            record_sites: false,
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
        self.site_table.note_anchor();
        for (a, base, _, armed) in &mut self.decide.pending_faults {
            if armed.is_none() && &*a.after == key && a.nth == n {
                *armed = Some(self.site_table.count_of(base));
            }
        }
    }

    #[inline]
    pub(crate) fn push(&mut self, t: Nanos, ev: Ev) {
        let key = (t, self.next_ev);
        self.next_ev += 1;
        self.queue.insert(key, ev);
    }

    /// Appends a queued event for people: `get_status#3 arrives`, `a timer`, `a device timer`
    /// (written into `out`: a logged pick's label is built every time one is taken).
    pub(crate) fn describe_event(&self, key: (Nanos, u64), out: &mut String) {
        let mut site = |xid: &u64, what: &str| {
            match self.transfers.get(*xid) {
                Some(x) => self.site_table.push_short_name(x.site, out),
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
            .map(|x| self.short_site_name(x.site))
            .collect()
    }

    /// A site's name without a control transfer's `ctrl.` (`get_status#2`).
    pub(crate) fn short_site_name(&self, site: SiteId) -> String {
        let mut name = String::with_capacity(self.site_table.base(site.base).len() + 4);
        self.site_table.push_short_name(site, &mut name);
        name
    }

    /// Earliest event time.
    pub(crate) fn next_time(&self) -> Option<Nanos> {
        self.queue.first_time()
    }

    /// The earliest event time and how many events are due then (counted, not collected:
    /// this runs every step).
    #[inline]
    pub(crate) fn due_span(&self) -> Option<(Nanos, usize)> {
        let t = self.next_time()?;
        Some((t, self.queue.due_count()))
    }

    /// The key of the `i`th event due at `t` (the earliest time), in their stable order.
    pub(crate) fn due_nth(&self, t: Nanos, i: usize) -> Option<(Nanos, u64)> {
        self.queue.due_nth(t, i)
    }

    #[inline]
    pub(crate) fn take_event(&mut self, key: (Nanos, u64)) -> Option<Ev> {
        self.queue.remove(&key)
    }

    pub(crate) fn clear_queue(&mut self) {
        self.queue.clear();
        self.transfers.clear();
    }

    /// Counts an occurrence of the base put together in `self.site_table.scratch` (by `name`,
    /// given the emptied buffer: no allocation) and returns the crossing; remembers it for site
    /// discovery (only then is its name built).
    #[inline(always)]
    pub(crate) fn site(&mut self, name: impl FnOnce(&mut String), kind: &SiteKind) -> SiteId {
        let scratch = &mut self.site_table.scratch;
        scratch.clear();
        name(scratch);
        let base = self.site_table.intern_scratch();
        self.cross(base, kind)
    }

    /// Counts an occurrence of an interned base and returns the crossing; remembers it for site
    /// discovery (only then is its name built).
    #[inline(always)]
    pub(crate) fn cross(&mut self, base: u32, kind: &SiteKind) -> SiteId {
        let n = self.site_table.cross(base);
        let site = SiteId { base, n };
        if self.record_sites {
            self.sites.push(Site {
                name: self.site_table.name(site),
                kind: kind.clone(),
            });
        }
        site
    }

    /// A replayed fault anchored to this crossing: its anchor happened and this is the
    /// `offset`th crossing of its site base since. Taken once.
    fn anchored_fault(&mut self, site: SiteId) -> Option<(Anchor, Fault)> {
        if self.decide.pending_faults.is_empty() {
            return None;
        }
        let base = self.site_table.base(site.base);
        let (now, _) = self.site_table.counts(site.base);
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

    /// The fault for a site: pinned by the plan, or drawn by a seeded schedule. Logged (only
    /// then is the site's name built). Inlined into its callers: a crossing where nothing could
    /// give a fault (no plan entry at this crossing, no replayed fault pending, no seeded draw)
    /// answers `None` in a few compares, without the call ([`Core::find_fault`] builds a large
    /// frame). A run under a fault plan crosses mostly sites the plan does not name: those
    /// take this path too ([`SiteTable::may_plan`]).
    ///
    /// `at_reply`: the site is an IN transfer, whose reply is not known yet. A fault there
    /// whose parameters the reply settles ([`Fault::at_reply`]: `short`) is logged now but
    /// written to the trace, and (drawn by a seeded run) given its parameters, when the reply
    /// is known: the [`Deferred`] returned, which the transfer keeps
    /// ([`Core::at_reply`] settles it).
    #[inline(always)]
    pub(crate) fn fault_at(
        &mut self,
        site: SiteId,
        kind: &SiteKind,
        at_reply: bool,
    ) -> (Option<Fault>, Option<Deferred>) {
        if self.decide.pending_faults.is_empty()
            && (!self.decide.is_seeded() || self.fault_set.is_none())
            && !self.site_table.may_plan(&self.plan, site)
        {
            return (None, None);
        }
        self.find_fault(site, kind, at_reply)
    }

    /// [`Core::fault_at`] where a fault may be found.
    #[inline(never)]
    fn find_fault(
        &mut self,
        site: SiteId,
        kind: &SiteKind,
        at_reply: bool,
    ) -> (Option<Fault>, Option<Deferred>) {
        // Whether the fault came from this run's own draw (its parameters drawn then).
        let mut drawn = false;
        let mut anchor = None;
        let fault = if let Some(f) = self.site_table.planned(&self.plan, site) {
            Some(f)
        } else if let Some((a, f)) = self.anchored_fault(site) {
            anchor = Some(a);
            Some(f)
        } else if self.decide.is_seeded() && !self.fault_set.is_none() {
            // A swarm narrows the candidates to its primitives and site families, and sets the
            // density; a site it turns off draws nothing. The candidates are counted, and the
            // chosen one found, without building a list (this runs at every crossing).
            let family = self
                .decide
                .swarm
                .as_ref()
                .map(|_| SiteFamily::of(self.site_table.base(site.base), kind));
            let count =
                seeded_candidates(&self.fault_set, self.decide.swarm.as_ref(), family, kind)
                    .count();
            let odds = self
                .decide
                .swarm
                .as_ref()
                .map_or(SEEDED_FAULT_ODDS, |s| u64::from(s.odds.max(1)));
            if count == 0 || self.decide.faults_below(odds) != Some(0) {
                None
            } else {
                let i = self.decide.faults_below(count as u64).unwrap_or(0) as usize;
                drawn = true;
                seeded_candidates(&self.fault_set, self.decide.swarm.as_ref(), family, kind).nth(i)
            }
        } else {
            None
        };
        let later = at_reply && fault.as_ref().is_some_and(|f| Fault::at_reply(f.kind()));
        // A drawn fault's parameters: from the primitive's own stream, over the payload's
        // length (or, settled at the reply, over the reply's, then).
        let fault = match fault {
            Some(f) if drawn && !later => {
                let (len, packet) = match kind {
                    SiteKind::Transfer { len, packet, .. } => (*len, *packet),
                    SiteKind::Transition => (0, 1),
                };
                Some(self.decide.draw_params(f, len, packet))
            }
            f => f,
        };
        if let Some(f) = &fault {
            let anchor = anchor.unwrap_or_else(|| {
                let (after, nth) = self.decide.last_anchor();
                let (now, then) = self.site_table.counts(site.base);
                Anchor {
                    after: after.clone(),
                    nth,
                    offset: u64::from(now.saturating_sub(then)),
                }
            });
            let base = self.site_table.base(site.base);
            if let Some(c) = &mut self.coverage {
                c.insert(format!("fault {} {}", base, f.kind()));
            }
            self.decide.log.push(anchor.event());
            self.decide.log.push(Event::Fault {
                site: self.site_table.name(site),
                fault: f.clone(),
            });
            if later {
                let deferred = Deferred {
                    log_at: self.decide.log.len() - 1,
                    draw: drawn,
                };
                return (fault, Some(deferred));
            }
            self.write_fault(site, f);
        }
        (fault, None)
    }

    /// Writes the trace record of fault `f` at `site`, now.
    pub(crate) fn write_fault(&mut self, site: SiteId, f: &Fault) {
        let now = self.now;
        let fs = f.to_string();
        let base = self.site_table.base(site.base);
        self.trace.emit(now, "fault", "bus", true, |d| {
            d.site("site", base, u64::from(site.n)).str("fault", &fs);
        });
    }

    /// Settles a fault [`Core::fault_at`] deferred to the reply (`fault`, at `site`, the reply
    /// `reply_len` bytes): a drawn one gets its parameters from the primitive's stream over
    /// the reply's length, the logged event is made the fault injected, and its record is
    /// written now. Returns the fault to apply.
    pub(crate) fn settle_fault(
        &mut self,
        site: SiteId,
        fault: Fault,
        deferred: Deferred,
        reply_len: usize,
    ) -> Fault {
        let f = if deferred.draw {
            let len = u32::try_from(reply_len).unwrap_or(u32::MAX);
            // An IN reply: a device may end it anywhere (packet step 1).
            self.decide.draw_params(fault, len, 1)
        } else {
            fault
        };
        if let Some(Event::Fault { fault, .. }) = self.decide.log.get_mut(deferred.log_at) {
            *fault = f.clone();
        }
        self.write_fault(site, &f);
        f
    }

    /// An IN transfer's reply is known (`reply_len` bytes, before any fault): the baseline's
    /// recorded site takes its length ([`Core::record_reply_len`]), and a fault deferred to
    /// the reply is settled ([`Core::settle_fault`]) and returned, to bend the reply with (the
    /// transfer's own fault otherwise). `settles`: whether there can be anything to settle (a
    /// deferred fault, or sites recorded), read by the caller in its own look-up of the
    /// transfer, so a reply with nothing to settle costs no second look-up.
    #[inline(always)]
    pub(crate) fn at_reply(&mut self, settles: bool, xid: u64, reply_len: usize) -> Option<Fault> {
        if settles {
            self.settle_reply(xid, reply_len)
        } else {
            None
        }
    }

    /// [`Core::at_reply`] where there is something to settle.
    #[inline(never)]
    fn settle_reply(&mut self, xid: u64, reply_len: usize) -> Option<Fault> {
        let x = self.transfers.get_mut(xid)?;
        let site = x.site;
        let settle = match x.deferred.take() {
            Some(d) => x.fault.clone().map(|f| (f, d)),
            None => None,
        };
        self.record_reply_len(site, reply_len);
        let (fault, deferred) = settle?;
        let f = self.settle_fault(site, fault, deferred, reply_len);
        if let Some(x) = self.transfers.get_mut(xid) {
            x.fault = Some(f.clone());
        }
        Some(f)
    }

    /// Makes the recorded site of this crossing (a baseline's, `RunConfig::record_sites`)
    /// the IN transfer's reply length, once it is known: what `site::` trials then cut
    /// (`short(len/2)`), not the length asked for.
    pub(crate) fn record_reply_len(&mut self, site: SiteId, reply_len: usize) {
        if !self.record_sites {
            return;
        }
        let name = self.site_table.name(site);
        if let Some(s) = self.sites.iter_mut().rev().find(|s| s.name == name) {
            s.kind = SiteKind::Transfer {
                len: u32::try_from(reply_len).unwrap_or(u32::MAX),
                dir: crate::fault::Dir::In,
                packet: 1,
            };
        }
    }
}

/// A fault whose record and parameters wait for its IN transfer's reply
/// ([`Core::fault_at`]): where its event is in the run's log, and whether its parameters are
/// still to be drawn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Deferred {
    /// The index of its [`Event::Fault`] in the run's log.
    pub(crate) log_at: usize,
    /// Whether the run drew it (its parameters are drawn at the reply).
    pub(crate) draw: bool,
}

/// The faults a seeded run may draw at a site of `kind` (in [`FaultSet::candidates`] order):
/// the set's, narrowed by a swarm to its primitives at a family it reaches (`family` is the
/// site's, given when there is a swarm).
fn seeded_candidates<'a>(
    set: &'a FaultSet,
    swarm: Option<&'a crate::swarm::Swarm>,
    family: Option<SiteFamily>,
    kind: &'a SiteKind,
) -> impl Iterator<Item = Fault> + 'a {
    let reach = match (swarm, family) {
        (Some(s), Some(fam)) => s.reaches(fam),
        _ => true,
    };
    set.each_candidate(kind)
        .filter(move |f| reach && swarm.zip(family).is_none_or(|(s, fam)| s.allows(f, fam)))
}

/// Completes a transfer: writes its trace record; returns whom to wake (the world wakes its
/// task: `World::complete`).
#[must_use]
pub(crate) fn complete(
    core: &mut Core,
    xid: u64,
    r: Result<Vec<u8>, TransferError>,
) -> Option<Wakeup> {
    let now = core.now;
    let x = core.transfers.get_mut(xid)?;
    if matches!(x.state, XState::Done(_)) {
        return None;
    }
    let base = core.site_table.base(x.site.base);
    let trace = &mut core.trace;
    trace.emit(now, "transfer", &x.actor, true, |d| {
        d.site("site", base, u64::from(x.site.n));
        match &x.kind {
            XKind::Control { setup, data } => {
                d.hex("setup", &setup.to_bytes());
                if !setup.is_in() && !data.is_empty() {
                    d.payload("out", data);
                }
            }
            XKind::Out { ep, data, .. } => {
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
    // A transfer that failed is an anchor (`ctrl.clear_halt stall`): its key is put together
    // in the site table's buffer (free between crossings), not allocated.
    let failed = r.as_ref().err().copied();
    let site = x.site;
    x.state = XState::Done(r);
    let wake = x.waker.take();
    if let Some(e) = failed {
        let mut key = std::mem::take(&mut core.site_table.scratch);
        key.clear();
        key.push_str(core.site_table.base(site.base));
        key.push(' ');
        key.push_str(e.as_str());
        core.occur(&key);
        core.site_table.scratch = key;
    }
    wake
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

    /// The queue against a sorted list: inserts at any time (before, at and after the
    /// earliest), removals of a due event (as a step takes one) and from anywhere, always in
    /// (time, insertion) order: the earliest time, the events due then and their order.
    #[test]
    fn the_event_queue_stays_in_time_and_insertion_order() {
        use rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let mut q = EventQueue::default();
        let mut want: Vec<(Nanos, u64)> = Vec::new();
        let mut taken = Vec::new();
        let mut popped = Vec::new();
        for n in 0..5_000u64 {
            let r = rng.next_u32();
            if want.is_empty() || (r % 3 != 0 && want.len() < 48) {
                let base = want.first().map_or(0, |k| k.0);
                let key = (base + u64::from(rng.next_u32() % 8), n);
                let key = if r % 17 == 0 {
                    (base.saturating_sub(1), n)
                } else {
                    key
                };
                q.insert(key, Ev::Arrive(n));
                want.push(key);
                want.sort();
            } else if r % 5 != 0 {
                // A step: the `i`th of the events due at the earliest time.
                let t = want[0].0;
                let due = want.iter().take_while(|k| k.0 == t).count();
                let i = rng.next_u32() as usize % due;
                let key = want.remove(i);
                assert_eq!(q.due_count(), due);
                let got = q.due_at(t).nth(i).copied();
                assert_eq!(got, Some(key));
                assert_eq!(q.due_nth(t, i), Some(key));
                assert_eq!(q.due_nth(t, due), None);
                assert_eq!(q.due_nth(t + 1, 0), None);
                assert!(matches!(q.remove(&key), Some(Ev::Arrive(x)) if x == key.1));
                taken.push(key);
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
                assert_eq!(q.due_count(), want_due.len());
                assert!(want.iter().all(|k| q.get(k).is_some()));
            }
        }
        assert!(taken.len() > 1_000, "{}", taken.len());
        // Emptied by always taking the first due event: exactly the sorted order.
        let mut rest = want.clone();
        rest.sort();
        while let Some(t) = q.first_time() {
            let key = q.due_at(t).next().copied().expect("due");
            q.remove(&key);
            popped.push(key);
        }
        assert_eq!(popped, rest);
    }
}
