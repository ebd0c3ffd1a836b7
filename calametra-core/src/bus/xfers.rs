//! The transfer table ([`XferTable`]): the run's transfers in a slab whose entries never
//! move, freed slots reused through a free list, iterated in submission order; what a transfer
//! is ([`Xfer`], [`XKind`], [`XState`]) and the spare buffers collected transfers leave for the
//! next ones.

use super::SiteId;
use crate::fault::Fault;
use crate::tasks::Wakeup;
use calametra_usb::{Setup, TransferError};
use std::rc::Rc;

#[derive(Clone)]
pub(crate) enum XKind {
    Control {
        setup: Setup,
        data: Vec<u8>,
    },
    /// A bulk OUT (`intr` false) or interrupt OUT transfer.
    Out {
        ep: u8,
        data: Vec<u8>,
        intr: bool,
    },
    In {
        ep: u8,
        len: usize,
        intr: bool,
    },
}

impl XKind {
    /// Whether the device sends this transfer's payload (a control IN, a bulk or interrupt
    /// IN): its length is known only at the reply.
    pub(crate) fn is_in(&self) -> bool {
        match self {
            XKind::Control { setup, .. } => setup.is_in(),
            XKind::In { .. } => true,
            XKind::Out { .. } => false,
        }
    }

    /// The bit of a bulk or interrupt endpoint in a device's halted set
    /// (`DeviceSlot::halted`: OUT endpoints in bits 0..15, IN endpoints in bits 16..31); 0 for a
    /// control transfer (a control stall is a protocol stall: the next setup clears it).
    #[inline(always)]
    pub(crate) fn halt_bit(&self) -> u32 {
        match self {
            XKind::Control { .. } => 0,
            XKind::Out { ep, .. } | XKind::In { ep, .. } => endpoint_bit(*ep),
        }
    }

    /// What a transfer holds while its kind is lent to the device call that answers it.
    pub(crate) const TAKEN: XKind = XKind::In {
        ep: 0,
        len: 0,
        intr: false,
    };
}

/// Endpoint `ep`'s bit in a device's halted set (see [`XKind::halt_bit`]).
#[inline(always)]
pub(crate) fn endpoint_bit(ep: u8) -> u32 {
    1u32 << ((ep & 0x0f) + if ep & 0x80 != 0 { 16 } else { 0 })
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
    pub(crate) site: SiteId,
    pub(crate) fault: Option<Fault>,
    /// Its fault's record and parameters, waiting for the reply ([`super::Core::fault_at`]).
    pub(crate) deferred: Option<super::Deferred>,
    /// Whom its completion wakes: the polling task by id when it is one of the run's (no
    /// waker cloned, woken without atomics), or a waker.
    pub(crate) waker: Option<Wakeup>,
    pub(crate) state: XState,
    pub(crate) deadline_set: bool,
    /// Submitted on a queued endpoint (`calametra_usb::Endpoint`): served by its device
    /// only after every older queued transfer on the same endpoint, as a host controller
    /// serves an endpoint's queue ([`XferTable::older_unserved`]).
    pub(crate) queued: bool,
}

/// Bits of a transfer id that name its slot in the [`XferTable`]; the bits above count
/// submissions. An id is unique in a run (the count only grows) and ids compare in submission
/// order; 2^24 slots (transfers in flight at once) and 2^40 submissions a run are far beyond
/// what a run holds.
const SLOT_BITS: u32 = 24;
const SLOT_MASK: u64 = (1 << SLOT_BITS) - 1;

/// One slot of the [`XferTable`]: the id of the transfer it holds ([`FREE`] while it holds
/// none), the transfer, and while it is free, the next free slot (the free list runs through
/// the slots: no vector of its own to grow). A free slot keeps an emptied transfer (no payload,
/// no result, no waker; its kind without its payload), so a new transfer is written into it
/// field by field and collected from it by its result alone: a transfer (~150 bytes) is not
/// moved into or out of the table.
struct Slot {
    id: u64,
    next_free: u32,
    x: Xfer,
}

/// The id of a free slot: no transfer has it (a run submits far fewer than 2^64 transfers).
const FREE: u64 = u64::MAX;

/// The end of the free list.
const NO_SLOT: u32 = u32::MAX;

/// The transfers in flight, by id: a slab. A transfer stays in its slot from submission to
/// removal (nothing is shifted when another comes or goes: the sorted vector before moved
/// ~200-byte entries on every insert and remove, ~5,400 callgrind instructions of `memcpy` a
/// core-bench run, issue 20), a freed slot is reused through a free list, and an id names its
/// slot, so a lookup is an index and a check of the id. Every iteration is in id order (the
/// order of submission), whatever slots the transfers sit in, so what is derived from one
/// (completion order at a disconnect, the waiting transfers offered again) is as before.
/// Once grown it allocates nothing per transfer (a transfer's site is a [`SiteId`], no name);
/// the payload buffers of collected transfers are kept as spares for the next OUT payloads and
/// OUT results ([`XferTable::spare_bytes`]).
pub(crate) struct XferTable {
    slots: Vec<Slot>,
    /// The most recently freed slot (reused first), or [`NO_SLOT`].
    free: u32,
    submitted: u64,
    /// At least the number of transfers waiting for their device ([`XState::Waiting`]): counted
    /// up when one starts waiting ([`XferTable::note_waiting`]), recounted when they are looked
    /// for ([`XferTable::waiting_of`]). While it is 0, offering waiting transfers again (after
    /// every arrival) scans nothing.
    waiting: u32,
    /// Spare payload buffers (emptied), at most [`MAX_SPARE_BYTES`].
    bytes: Vec<Vec<u8>>,
}

/// The most spare payload buffers the table keeps.
const MAX_SPARE_BYTES: usize = 16;

/// The largest spare payload buffer kept (a bigger one is freed).
const MAX_SPARE_CAPACITY: usize = 4096;

impl Default for XferTable {
    fn default() -> Self {
        XferTable {
            slots: Vec::new(),
            free: NO_SLOT,
            submitted: 0,
            waiting: 0,
            bytes: Vec::new(),
        }
    }
}

impl XferTable {
    /// Empties the table for a new run, keeping its memory: the same
    /// state as `XferTable::default()` gives (ids start again at 0).
    pub(crate) fn reset(&mut self) {
        self.clear();
        self.submitted = 0;
    }

    #[inline]
    pub(crate) fn get(&self, id: u64) -> Option<&Xfer> {
        self.slots
            .get((id & SLOT_MASK) as usize)
            .filter(|s| s.id == id)
            .map(|s| &s.x)
    }

    #[inline]
    pub(crate) fn get_mut(&mut self, id: u64) -> Option<&mut Xfer> {
        self.slots
            .get_mut((id & SLOT_MASK) as usize)
            .filter(|s| s.id == id)
            .map(|s| &mut s.x)
    }

    /// Puts a new transfer in a free slot; returns its id (greater than every id before).
    /// Inlined into `World::submit`, and a reused slot's transfer is written field by field, so
    /// the transfer is built in its slot, not built and then copied there.
    #[inline(always)]
    pub(crate) fn insert(&mut self, x: Xfer) -> u64 {
        let seq = self.submitted;
        self.submitted += 1;
        match self.slots.get_mut(self.free as usize) {
            Some(slot) => {
                let id = (seq << SLOT_BITS) | u64::from(self.free);
                self.free = slot.next_free;
                slot.id = id;
                let Xfer {
                    dev,
                    generation,
                    kind,
                    actor,
                    site,
                    fault,
                    deferred,
                    waker,
                    state,
                    deadline_set,
                    queued,
                } = x;
                let to = &mut slot.x;
                to.dev = dev;
                to.generation = generation;
                to.kind = kind;
                to.actor = actor;
                to.site = site;
                to.fault = fault;
                to.deferred = deferred;
                to.waker = waker;
                to.state = state;
                to.deadline_set = deadline_set;
                to.queued = queued;
                id
            }
            None => {
                let i = self.slots.len() as u64;
                assert!(i < SLOT_MASK, "calametra: 2^24 transfers in flight");
                let id = (seq << SLOT_BITS) | i;
                self.slots.push(Slot {
                    id,
                    next_free: NO_SLOT,
                    x,
                });
                id
            }
        }
    }

    /// Frees slot `i` (which holds a transfer): its result is returned, its payload buffer kept
    /// as a spare, its waker dropped.
    #[inline]
    fn free_slot(&mut self, i: usize) -> XState {
        let slot = &mut self.slots[i];
        slot.id = FREE;
        slot.next_free = self.free;
        self.free = i as u32;
        let x = &mut slot.x;
        x.waker = None;
        x.fault = None;
        x.deferred = None;
        // The payload is taken out of the kind where it is (the kind stays, emptied): the whole
        // kind copied out to reach it read its buffer back across two just-written halves, a
        // store-forwarding stall natively (~1% of workload C's time).
        let data = match &mut x.kind {
            XKind::Control { data, .. } | XKind::Out { data, .. } => std::mem::take(data),
            XKind::In { .. } => Vec::new(),
        };
        let state = std::mem::replace(&mut x.state, XState::InFlight);
        self.keep_bytes(data);
        state
    }

    /// Removes a transfer; whether there was one.
    pub(crate) fn remove(&mut self, id: u64) -> bool {
        let i = (id & SLOT_MASK) as usize;
        if self.slots.get(i).is_none_or(|s| s.id != id) {
            return false;
        }
        self.free_slot(i);
        true
    }

    /// Removes a completed transfer and returns its result; `None` (and nothing removed) if
    /// it is not done.
    pub(crate) fn take_done(&mut self, id: u64) -> Option<Result<Vec<u8>, TransferError>> {
        let i = (id & SLOT_MASK) as usize;
        let slot = self.slots.get(i).filter(|s| s.id == id)?;
        if !matches!(slot.x.state, XState::Done(_)) {
            return None;
        }
        match self.free_slot(i) {
            XState::Done(r) => Some(r),
            _ => None,
        }
    }

    /// A transfer polled by its future: `Ok` with its result, removed, when it is done;
    /// `Err(Some(x))` while it is not (the transfer, to note the waker in); `Err(None)` when
    /// there is no such transfer. One lookup ([`XferTable::take_done`] then
    /// [`XferTable::get_mut`] looked the slot up twice).
    #[inline]
    pub(crate) fn poll(
        &mut self,
        id: u64,
    ) -> Result<Result<Vec<u8>, TransferError>, Option<&mut Xfer>> {
        let i = (id & SLOT_MASK) as usize;
        let done = match self.slots.get(i).filter(|s| s.id == id) {
            Some(slot) => matches!(slot.x.state, XState::Done(_)),
            None => return Err(None),
        };
        if !done {
            return Err(Some(&mut self.slots[i].x));
        }
        match self.free_slot(i) {
            XState::Done(r) => Ok(r),
            _ => Err(None),
        }
    }

    /// Whether a queued transfer older than `id` on the same device and endpoint (`halt`, its
    /// [`XKind::halt_bit`]) has not been served yet: still crossing the bus, waiting for its
    /// device, or swallowed. Only queued transfers are looked at.
    pub(crate) fn older_unserved(&self, id: u64, dev: usize, halt: u32) -> bool {
        self.slots.iter().any(|s| {
            s.id != FREE
                && s.id < id
                && s.x.queued
                && s.x.dev == dev
                && s.x.kind.halt_bit() == halt
                && matches!(
                    s.x.state,
                    XState::InFlight | XState::Waiting | XState::Swallowed
                )
        })
    }

    /// Notes that a transfer started waiting for its device.
    #[inline]
    pub(crate) fn note_waiting(&mut self) {
        self.waiting = self.waiting.saturating_add(1);
    }

    /// Whether a transfer may be waiting for its device (none is while this is false).
    #[inline]
    pub(crate) fn any_waiting(&self) -> bool {
        self.waiting > 0
    }

    /// The ids of device `dev`'s transfers waiting for it, in id order; recounts the waiting
    /// transfers of every device.
    pub(crate) fn waiting_of(&mut self, dev: usize) -> Vec<u64> {
        let mut all = 0u32;
        let mut ids = Vec::new();
        for s in &self.slots {
            if s.id != FREE && matches!(s.x.state, XState::Waiting) {
                all += 1;
                if s.x.dev == dev {
                    ids.push(s.id);
                }
            }
        }
        self.waiting = all;
        ids.sort_unstable();
        ids
    }

    /// A buffer holding `data`: a spare one (no allocation once the table has spares), or a
    /// new one.
    pub(crate) fn spare_bytes(&mut self, data: &[u8]) -> Vec<u8> {
        match self.bytes.pop() {
            Some(mut v) => {
                v.extend_from_slice(data);
                v
            }
            None => data.to_vec(),
        }
    }

    /// Keeps a collected transfer's payload buffer as a spare.
    pub(super) fn keep_bytes(&mut self, mut data: Vec<u8>) {
        if data.capacity() > 0
            && data.capacity() <= MAX_SPARE_CAPACITY
            && self.bytes.len() < MAX_SPARE_BYTES
        {
            data.clear();
            self.bytes.push(data);
        }
    }

    /// The ids of the transfers `keep` selects, in id order (a vector: the caller goes on to
    /// change the table). Allocates only when one is selected.
    pub(crate) fn ids_where(&self, keep: impl Fn(&Xfer) -> bool) -> Vec<u64> {
        let mut ids: Vec<u64> = self
            .slots
            .iter()
            .filter(|s| s.id != FREE && keep(&s.x))
            .map(|s| s.id)
            .collect();
        ids.sort_unstable();
        ids
    }

    /// The transfers in id order (collected and sorted: for state dumps and failure reports).
    pub(crate) fn iter(&self) -> impl Iterator<Item = (&u64, &Xfer)> {
        let mut v: Vec<(&u64, &Xfer)> = self
            .slots
            .iter()
            .filter(|s| s.id != FREE)
            .map(|s| (&s.id, &s.x))
            .collect();
        v.sort_unstable_by_key(|(id, _)| **id);
        v.into_iter()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Xfer> {
        self.iter().map(|(_, x)| x)
    }

    pub(crate) fn clear(&mut self) {
        self.slots.clear();
        self.free = NO_SLOT;
        self.waiting = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn xfer(dev: usize, state: XState) -> Xfer {
        Xfer {
            dev,
            generation: 0,
            kind: XKind::TAKEN,
            actor: Rc::from("t"),
            site: SiteId { base: 0, n: 1 },
            fault: None,
            deferred: None,
            waker: None,
            state,
            deadline_set: false,
            queued: false,
        }
    }

    /// The slab against a list in submission order: ids grow, freed slots are reused, and
    /// every iteration is in submission order whatever slot a transfer sits in; a removed
    /// transfer's id finds nothing, even once its slot holds another.
    #[test]
    fn the_transfer_table_keeps_submission_order_and_reuses_slots() {
        use rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(5);
        let mut t = XferTable::default();
        let mut want: Vec<(u64, usize)> = Vec::new();
        let mut gone: Vec<u64> = Vec::new();
        let mut last = None;
        for n in 0..3_000usize {
            if want.is_empty() || rng.next_u32() % 2 == 0 {
                let id = t.insert(xfer(n, XState::InFlight));
                assert!(last.is_none_or(|l| id > l), "ids grow");
                last = Some(id);
                want.push((id, n));
            } else {
                let i = rng.next_u32() as usize % want.len();
                let (id, dev) = want.remove(i);
                if rng.next_u32() % 2 == 0 {
                    t.get_mut(id).expect("in").state = XState::Done(Ok(vec![dev as u8]));
                    assert_eq!(t.take_done(id), Some(Ok(vec![dev as u8])));
                } else {
                    assert!(t.take_done(id).is_none(), "not done");
                    assert_eq!(t.get(id).map(|x| x.dev), Some(dev));
                    assert!(t.remove(id));
                }
                assert!(t.get(id).is_none() && !t.remove(id));
                gone.push(id);
            }
            let got: Vec<(u64, usize)> = t.iter().map(|(id, x)| (*id, x.dev)).collect();
            assert_eq!(got, want);
            let odd: Vec<u64> = want.iter().filter(|w| w.1 % 2 == 1).map(|w| w.0).collect();
            assert_eq!(t.ids_where(|x| x.dev % 2 == 1), odd);
            assert!(want
                .iter()
                .all(|(id, dev)| t.get(*id).map(|x| x.dev) == Some(*dev)));
        }
        assert!(gone.iter().all(|id| t.get(*id).is_none()));
        // Slots were reused: far fewer than the transfers submitted.
        assert!(t.slots.len() < 200, "{}", t.slots.len());
    }

    /// A collected transfer's payload buffer becomes a spare (its kind keeps no payload), and
    /// the transfer put in its slot next has its own kind and payload.
    #[test]
    fn a_collected_payload_is_a_spare_and_its_slot_takes_the_next_transfer_whole() {
        let mut t = XferTable::default();
        let setup = Setup {
            request_type: 0x40,
            request: 1,
            value: 0,
            index: 0,
            length: 3,
        };
        let data = t.spare_bytes(&[1, 2, 3]);
        let ptr = data.as_ptr();
        let mut x = xfer(0, XState::Done(Ok(Vec::new())));
        x.kind = XKind::Control { setup, data };
        let id = t.insert(x);
        assert_eq!(t.take_done(id), Some(Ok(Vec::new())));
        let i = (id & SLOT_MASK) as usize;
        assert!(
            matches!(&t.slots[i].x.kind, XKind::Control { data, .. } if data.capacity() == 0),
            "the freed slot keeps no payload"
        );
        let again = t.spare_bytes(&[4, 5]);
        assert_eq!((again.as_ptr(), again.as_slice()), (ptr, &[4u8, 5][..]));
        let mut y = xfer(1, XState::InFlight);
        y.kind = XKind::Out {
            ep: 1,
            data: again,
            intr: false,
        };
        let id2 = t.insert(y);
        assert_eq!(id2 & SLOT_MASK, id & SLOT_MASK, "the slot is reused");
        let got = t.get(id2).expect("in");
        assert!(matches!(&got.kind, XKind::Out { ep: 1, data, .. } if data == &[4, 5]));
        assert_eq!(got.dev, 1);
        assert!(t.remove(id2));
        assert_eq!(
            t.spare_bytes(&[]).capacity(),
            3,
            "the OUT payload is a spare again"
        );
    }
}
