//! The world a run drives: the bus's shared state (`bus::Core`), the devices on the
//! bus and the tasks. The `Sim` handle (in `sim`) builds it and runs the loop; externals and
//! invariants see it as `&mut World` / `&World`. The world is where the bus meets the devices:
//! a transfer is submitted by a driver, arrives at its device after a modelled latency, meets
//! its fault (if any) where it crosses the bus, and completes with a trace record. Nothing here
//! reads the wall clock or iterates a std hash container. A finished run's world is kept for
//! the thread's next run (`take_spare`, `give_back`, in `world/spare.rs`): reset in place,
//! buffers kept, no state.

use crate::bus::{complete, endpoint_bit, Core, Ev, XKind, XState, Xfer};
use crate::clock::Nanos;
use crate::device::{DevCtx, Device, Effects, Reply};
use crate::fault::{Arrival, Dir, Fault, SiteKind};
use crate::tasks::{Tasks, Wakeup};
use calametra_usb::TransferError;
use std::any::Any;
use std::collections::BTreeMap;
use std::marker::PhantomData;
use std::task::{Poll, Waker};

pub use crate::bus::{ModelGap, Timing};

mod hotplug;
mod spare;
pub(crate) use hotplug::{device_id, device_info};
pub(crate) use spare::{give_back, take_spare};

pub(crate) struct DeviceSlot {
    pub(crate) name: String,
    pub(crate) dev: Box<dyn Device>,
    pub(crate) attached: bool,
    pub(crate) generation: u32,
    /// The device's halted bulk and interrupt endpoints (`XKind::halt_bit`): a stall on one
    /// halts it, and every transfer on it stalls without reaching the device until the host
    /// clears the halt (`CLEAR_FEATURE(ENDPOINT_HALT)` or `SET_INTERFACE` acknowledged) or
    /// the device is reset or replugged, as USB 2.0 §9.4.5 has it.
    pub(crate) halted: u32,
    /// The max packet size of each OUT endpoint by number (0: control), from the device's
    /// descriptors at attach ([`crate::fault::packet_fallback`] where they give none): where
    /// a `short` at an OUT transfer may cut ([`SiteKind::Transfer`]'s `packet`).
    pub(crate) out_packet: [u16; 16],
}

/// The max packet size of each OUT endpoint of a device with `descriptors`, by endpoint number
/// (0: control, `bMaxPacketSize0`; else `wMaxPacketSize`), with
/// [`crate::fault::packet_fallback`] where they give none.
fn out_packet_sizes(descriptors: Option<&calametra_usb::Descriptors>) -> [u16; 16] {
    std::array::from_fn(|i| {
        descriptors
            .and_then(|d| d.max_packet_size(i as u8))
            .unwrap_or(crate::fault::packet_fallback(i == 0) as u16)
    })
}

/// The halt a standard control request acknowledged by the device clears: one endpoint's bit
/// (`CLEAR_FEATURE(ENDPOINT_HALT)`), every bit (`SET_INTERFACE`), or none.
fn halt_cleared_by(setup: &calametra_usb::Setup) -> u32 {
    match (setup.request_type, setup.request) {
        (0x02, 1) if setup.value == 0 => endpoint_bit(setup.index as u8),
        (0x01, 11) => u32::MAX,
        _ => 0,
    }
}

/// Appends `<type>_<request>` in lowercase hex (`c0_0a`): a request no name is known for.
fn push_hex_request(name: &mut String, request_type: u8, request: u8) {
    crate::hex::push(name, &[request_type]);
    name.push('_');
    crate::hex::push(name, &[request]);
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
}

/// The state a run drives. Externals get `&mut World`, invariants `&World`.
pub struct World {
    pub(crate) core: Core,
    pub(crate) devices: Vec<DeviceSlot>,
    pub(crate) tasks: Tasks,
    /// Hotplug events for watches ([`crate::discovery`]).
    pub(crate) hotplug: hotplug::Hotplug,
}

impl World {
    pub(crate) fn new(core: Core) -> World {
        World {
            core,
            devices: Vec::new(),
            tasks: Tasks::new(),
            hotplug: Default::default(),
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
        self.devices[id].halted = 0;
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
        if self.hotplug.watching {
            let info = device_info(self, id);
            self.hotplug_event(calametra_usb::HotplugEvent::Connected(info));
        }
    }

    /// Records a coverage mark.
    pub fn mark(&mut self, name: &str) {
        crate::bus::mark(&mut self.core, "world", name);
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
        if self.hotplug.watching {
            let gone = device_id(id, self.devices[id].generation);
            self.hotplug_event(calametra_usb::HotplugEvent::Disconnected(gone));
        }
        self.devices[id].generation += 1;
        self.devices[id].halted = 0;
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
        let ids = self.core.transfers.ids_where(|x| {
            x.dev == id
                && matches!(
                    x.state,
                    XState::InFlight | XState::Waiting | XState::Swallowed | XState::Delayed(_)
                )
        });
        for x in ids {
            self.complete(x, Err(TransferError::Disconnected));
        }
        self.call(id, |dev, cx| dev.on_disconnect(cx));
    }

    /// Keeps a hotplug event for the watches and wakes those waiting.
    fn hotplug_event(&mut self, e: calametra_usb::HotplugEvent) {
        self.hotplug.events.push(e);
        for w in std::mem::take(&mut self.hotplug.waiting) {
            self.tasks.wake(w);
        }
    }

    /// Completes a transfer ([`complete`]: its trace record) and wakes the task awaiting it.
    fn complete(&mut self, xid: u64, r: Result<Vec<u8>, TransferError>) {
        if let Some(w) = complete(&mut self.core, xid, r) {
            self.tasks.wake(w);
        }
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

    /// Offers waiting transfers of device `id` again until none makes progress. Inlined: when
    /// nothing waits (the usual case after an arrival) it is one compare, no call.
    #[inline(always)]
    pub(crate) fn settle(&mut self, id: usize) {
        if self.core.transfers.any_waiting() {
            self.settle_waiting(id);
        }
    }

    /// [`World::settle`] when a transfer may be waiting.
    #[inline(never)]
    fn settle_waiting(&mut self, id: usize) {
        loop {
            // Nothing waits: no scan of the table.
            if !self.core.transfers.any_waiting() {
                return;
            }
            let waiting = self.core.transfers.waiting_of(id);
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
        self.deliver_to(xid)
            .is_some_and(|(_, progressed)| progressed)
    }

    /// [`World::deliver`], also giving the transfer's device (`None`: no such transfer), found
    /// in the same lookup.
    fn deliver_to(&mut self, xid: u64) -> Option<(usize, bool)> {
        let x = self.core.transfers.get_mut(xid)?;
        let (dev, fault) = (x.dev, x.fault.clone());
        let settles = x.deferred.is_some() || self.core.record_sites; // See `Core::at_reply`.
        let first_arrival = matches!(x.state, XState::InFlight);
        let slot = &self.devices[dev];
        let gone = !slot.attached || slot.generation != x.generation;
        let halt = x.kind.halt_bit();
        let arrival = match &fault {
            // A halted endpoint stalls every transfer without the device seeing it.
            _ if slot.halted & halt != 0 => Arrival::Stall,
            Some(f) if first_arrival => f.on_arrival(),
            _ => Arrival::Deliver,
        };
        // A queued transfer waits for the older ones on its endpoint (they arrive late when
        // delayed, or the schedule picked it first among transfers due at once).
        if x.queued
            && !gone
            && arrival == Arrival::Deliver
            && self.core.transfers.older_unserved(xid, dev, halt)
        {
            let x = self.core.transfers.get_mut(xid)?;
            if !matches!(x.state, XState::Waiting) {
                x.state = XState::Waiting;
                self.core.transfers.note_waiting();
            }
            return Some((dev, first_arrival));
        }
        let x = self.core.transfers.get_mut(xid)?;
        // Bent OUT data is a copy (the trace records what the driver sent); unbent data is
        // lent to the device from the transfer itself, taken out for the call and put back
        // (taken in the same lookup when it is delivered).
        let kind = if gone || arrival != Arrival::Deliver {
            XKind::TAKEN
        } else {
            std::mem::replace(&mut x.kind, XKind::TAKEN)
        };
        if gone {
            self.complete(xid, Err(TransferError::Disconnected));
            return Some((dev, true));
        }
        match arrival {
            Arrival::Stall => {
                self.devices[dev].halted |= halt;
                self.complete(xid, Err(TransferError::Stall));
                return Some((dev, true));
            }
            Arrival::Swallow => {
                if let Some(x) = self.core.transfers.get_mut(xid) {
                    x.state = XState::Swallowed;
                }
                return Some((dev, true));
            }
            Arrival::Disconnect => {
                self.disconnect_id(dev);
                return Some((dev, true));
            }
            Arrival::Deliver => {}
        }
        let bend = |settled: Option<Fault>, data: &mut Vec<u8>| {
            if let Some(f) = settled.as_ref().or(fault.as_ref()) {
                f.bend(data);
            }
        };
        let bends = fault.as_ref().is_some_and(Fault::bends);
        let bent = |data: &Vec<u8>| {
            bends.then(|| {
                let mut d = data.clone();
                bend(None, &mut d);
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
                        bend(self.core.at_reply(settles, xid, d.len()), d);
                    }
                }
                if !setup.is_in() && matches!(r, Reply::Ack) {
                    r = Reply::Data(Vec::new());
                }
                (r, e)
            }
            XKind::Out { ep, data, .. } => {
                let out = bent(data);
                let data = out.as_ref().unwrap_or(data);
                let n = data.len();
                let (r, e) = self.call(dev, |d, cx| d.out(cx, *ep, data));
                // An OUT result carries the accepted length as its "data" (see `finish_out`).
                let r = match r {
                    Reply::Ack | Reply::Data(_) => {
                        Reply::Data(self.core.transfers.spare_bytes(&(n as u64).to_le_bytes()))
                    }
                    other => other,
                };
                (r, e)
            }
            XKind::In { ep, len, .. } => {
                let (mut r, e) = self.call(dev, |d, cx| d.poll_in(cx, *ep, *len));
                if let Reply::Data(d) = &mut r {
                    d.truncate(*len);
                    bend(self.core.at_reply(settles, xid, d.len()), d);
                }
                (r, e)
            }
        };
        let result = match reply {
            _ if effects.stall => Some(Err(TransferError::Stall)),
            Reply::Data(d) => Some(Ok(d)),
            Reply::Ack => Some(Ok(Vec::new())),
            Reply::Stall => Some(Err(TransferError::Stall)),
            Reply::Nak => None,
        };
        match (&result, &kind) {
            (Some(Err(TransferError::Stall)), _) => self.devices[dev].halted |= halt,
            (Some(Ok(_)), XKind::Control { setup, .. }) if self.devices[dev].halted != 0 => {
                self.devices[dev].halted &= !halt_cleared_by(setup);
            }
            _ => {}
        }
        if let Some(x) = self.core.transfers.get_mut(xid) {
            x.kind = kind;
        }
        let done = match result {
            Some(r) => {
                let delay = effects.delay;
                if delay > 0 {
                    if let Some(x) = self.core.transfers.get_mut(xid) {
                        x.state = XState::Delayed(r);
                    }
                    let t = self.core.now.saturating_add(delay);
                    self.core.push(t, Ev::Complete(xid));
                } else {
                    self.complete(xid, r);
                }
                true
            }
            None => {
                if let Some(x) = self.core.transfers.get_mut(xid) {
                    let was_waiting = matches!(x.state, XState::Waiting);
                    x.state = XState::Waiting;
                    if !was_waiting {
                        self.core.transfers.note_waiting();
                    }
                }
                false
            }
        };
        if effects.disconnect {
            self.disconnect_id(dev);
        }
        Some((dev, done || first_arrival))
    }

    /// Fires one queued event.
    pub(crate) fn fire(&mut self, ev: Ev) {
        match ev {
            Ev::Wake(w) => self.tasks.wake(w),
            Ev::Arrive(xid) => {
                if let Some((dev, _)) = self.deliver_to(xid) {
                    self.settle(dev);
                }
            }
            Ev::Complete(xid) => {
                let r = match self.core.transfers.get_mut(xid) {
                    Some(x) => match std::mem::replace(&mut x.state, XState::InFlight) {
                        XState::Delayed(r) => r,
                        other => {
                            x.state = other;
                            return;
                        }
                    },
                    None => return,
                };
                self.complete(xid, r);
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
        let out_packet = out_packet_sizes(dev.descriptors().as_ref());
        self.devices.push(DeviceSlot {
            out_packet,
            name,
            dev,
            attached: true,
            generation: 0,
            halted: 0,
        });
        self.devices.len() - 1
    }

    #[inline(never)]
    pub(crate) fn submit(&mut self, dev: usize, generation: u32, kind: XKind) -> u64 {
        self.submit_waking(dev, generation, kind, None, false, false)
    }

    /// Submits a transfer of a queued endpoint (served after the older ones on its endpoint).
    pub(crate) fn submit_queued(&mut self, dev: usize, generation: u32, kind: XKind) -> u64 {
        self.submit_waking(dev, generation, kind, None, false, true)
    }

    /// Submits a transfer and polls it once, as its future's first poll does (submit, then
    /// [`World::poll_xfer`]): a transfer just submitted is not done, so its waker (and with a
    /// deadline, the deadline's timer) is set as it is written into the table, without looking
    /// it up again. Returns its id and what the poll gives.
    pub(crate) fn submit_polled(
        &mut self,
        dev: usize,
        generation: u32,
        kind: XKind,
        deadline: Option<Nanos>,
        waker: &Waker,
    ) -> (u64, Poll<Result<Vec<u8>, TransferError>>) {
        if deadline.is_some_and(|d| self.core.now >= d) {
            // Due at once (a zero timeout): the poll times it out.
            let xid = self.submit(dev, generation, kind);
            return (xid, self.poll_xfer(xid, deadline, waker));
        }
        let wake = self.tasks.wakeup(waker);
        let timer = deadline.map(|d| (d, wake.clone()));
        let xid = self.submit_waking(dev, generation, kind, Some(wake), timer.is_some(), false);
        if let Some((d, w)) = timer {
            self.core.push(d, Ev::Wake(w));
        }
        (xid, Poll::Pending)
    }

    /// Submits a transfer whose completion wakes `waker`.
    #[inline(always)]
    fn submit_waking(
        &mut self,
        dev: usize,
        generation: u32,
        kind: XKind,
        waker: Option<Wakeup>,
        deadline_set: bool,
        queued: bool,
    ) -> u64 {
        // The site's base is found by its parts where they are (`ctrl.` and the request's
        // name, or a literal), put together only when new; its name `<base>#<n>` only where
        // it is written out as text.
        let (site, site_kind, bytes, ctrl) = match &kind {
            XKind::Control { setup, data } => {
                let slot = &self.devices[dev];
                let device = &slot.dev;
                let (len, dir, packet) = if setup.is_in() {
                    (setup.length as u32, Dir::In, 1)
                } else {
                    (data.len() as u32, Dir::Out, u32::from(slot.out_packet[0]))
                };
                let site_kind = SiteKind::Transfer { len, dir, packet };
                let table = &mut self.core.site_table;
                let base = match device.request_name(setup).or_else(|| setup.standard_name()) {
                    Some(n) => table.intern_prefixed("ctrl.", n),
                    None => {
                        let name = &mut table.scratch;
                        name.clear();
                        name.push_str("ctrl.");
                        push_hex_request(name, setup.request_type, setup.request);
                        table.intern_scratch()
                    }
                };
                let site = self.core.cross(base, &site_kind);
                (site, site_kind, data.len(), true)
            }
            XKind::Out { ep, data, intr } => {
                let site_kind = SiteKind::Transfer {
                    len: data.len() as u32,
                    dir: Dir::Out,
                    packet: u32::from(self.devices[dev].out_packet[usize::from(ep & 0x0f)]),
                };
                let name = if *intr { "intr.out" } else { "bulk.out" };
                let base = self.core.site_table.intern_str(name);
                let site = self.core.cross(base, &site_kind);
                (site, site_kind, data.len(), false)
            }
            XKind::In { len, intr, .. } => {
                let site_kind = SiteKind::Transfer {
                    len: *len as u32,
                    dir: Dir::In,
                    packet: 1,
                };
                let name = if *intr { "intr.in" } else { "bulk.in" };
                let base = self.core.site_table.intern_str(name);
                let site = self.core.cross(base, &site_kind);
                (site, site_kind, 0, false)
            }
        };
        let (fault, deferred) = self.core.fault_at(site, &site_kind, kind.is_in());
        let t = &self.core.timing;
        let mut latency =
            if ctrl { t.control_ns } else { t.transfer_ns } + t.per_byte_ns * bytes as u64;
        if let Some(f) = &fault {
            latency = latency.saturating_add(f.latency());
        }
        let actor = self.core.actor.clone();
        let xid = self.core.transfers.insert(Xfer {
            dev,
            generation,
            kind,
            actor,
            site,
            fault,
            deferred,
            waker,
            state: XState::InFlight,
            deadline_set,
            queued,
        });
        let at = self.core.now.saturating_add(latency);
        self.core.push(at, Ev::Arrive(xid));
        xid
    }

    /// Polls a transfer for completion; cancels it at `deadline`.
    pub(crate) fn poll_xfer(
        &mut self,
        xid: u64,
        deadline: Option<Nanos>,
        waker: &Waker,
    ) -> Poll<Result<Vec<u8>, TransferError>> {
        let now = self.core.now;
        let x = match self.core.transfers.poll(xid) {
            Ok(r) => return Poll::Ready(r),
            Err(Some(x)) => x,
            Err(None) => return Poll::Ready(Err(TransferError::Cancelled)),
        };
        if let Some(d) = deadline {
            if now >= d {
                self.complete(xid, Err(TransferError::Timeout));
                self.core.transfers.remove(xid);
                return Poll::Ready(Err(TransferError::Timeout));
            }
            if !x.deadline_set {
                x.deadline_set = true;
                x.waker = Some(self.tasks.wakeup(waker));
                let wake = self.tasks.wakeup(waker);
                self.core.push(d, Ev::Wake(wake));
                return Poll::Pending;
            }
        }
        let tasks = &self.tasks;
        if !x
            .waker
            .as_ref()
            .and_then(|w| tasks.waker_of(w))
            .is_some_and(|w| w.will_wake(waker))
        {
            x.waker = Some(tasks.wakeup(waker));
        }
        Poll::Pending
    }

    /// A completed transfer's result, removing it.
    pub(crate) fn take_done(&mut self, xid: u64) -> Option<Result<Vec<u8>, TransferError>> {
        self.core.transfers.take_done(xid)
    }

    /// Whether a transfer waits for the device (a NAKed IN) or was swallowed by a fault.
    pub(crate) fn is_waiting(&self, xid: u64) -> bool {
        matches!(
            self.core.transfers.get(xid),
            Some(Xfer {
                state: XState::Waiting | XState::Swallowed,
                ..
            })
        )
    }

    /// Drops a transfer without a trace record (a host poll that found nothing).
    pub(crate) fn cancel_quiet(&mut self, xid: u64) {
        self.core.transfers.remove(xid);
    }

    /// A USB bus reset of device `id`: pending transfers are cancelled, the device is told.
    pub(crate) fn reset_index(&mut self, id: usize) {
        if !self.devices[id].attached {
            return;
        }
        let ids = self
            .core
            .transfers
            .ids_where(|x| x.dev == id && !matches!(x.state, XState::Done(_)));
        for x in ids {
            self.complete(x, Err(TransferError::Cancelled));
        }
        self.devices[id].halted = 0;
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

    /// A queued transfer cancelled by the host (`Endpoint::cancel_all`): completed
    /// `Cancelled` if not done yet, and kept for its completion to be taken.
    pub(crate) fn cancel_keep(&mut self, xid: u64) {
        if let Some(x) = self.core.transfers.get(xid) {
            if !matches!(x.state, XState::Done(_)) {
                self.complete(xid, Err(TransferError::Cancelled));
            }
        }
    }

    /// A future dropped before completion: the host cancels the transfer.
    pub(crate) fn cancel(&mut self, xid: u64) {
        if let Some(x) = self.core.transfers.get(xid) {
            if !matches!(x.state, XState::Done(_)) {
                self.complete(xid, Err(TransferError::Cancelled));
            }
        }
        self.core.transfers.remove(xid);
    }
}

#[cfg(test)]
mod tests {
    /// Where a `short` at an OUT transfer may cut: each OUT endpoint's max packet size from
    /// the descriptors (EP0's `bMaxPacketSize0`), the fallback (64 for EP0, 512 for the
    /// others) where a device gives none.
    #[test]
    fn out_packet_sizes_come_from_the_descriptors_else_the_fallback() {
        let d = calametra_usb::Descriptors {
            device: vec![18, 1, 0, 2, 0, 0, 0, 8, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1],
            configurations: vec![vec![
                9, 2, 32, 0, 1, 1, 0, 0x80, 50, // configuration
                9, 4, 0, 0, 2, 8, 6, 0x50, 0, // interface 0: mass storage, BOT
                7, 5, 0x81, 2, 0, 2, 0, // bulk IN 512
                7, 5, 0x02, 2, 64, 0, 0, // bulk OUT 64
            ]],
            strings: Vec::new(),
        };
        let p = super::out_packet_sizes(Some(&d));
        assert_eq!((p[0], p[1], p[2]), (8, 512, 64));
        let none = super::out_packet_sizes(None);
        assert_eq!((none[0], none[2], none[15]), (64, 512, 512));
    }

    /// A request no name is known for is named by its type and request bytes in lowercase hex.
    #[test]
    fn a_nameless_request_is_named_in_hex() {
        let mut name = String::from("ctrl.");
        super::push_hex_request(&mut name, 0xc0, 0x0a);
        assert_eq!(name, "ctrl.c0_0a");
    }
}
