//! Driving one device directly, without tasks: the host side for bridges and comparisons.
//!
//! A [`DeviceHost`] owns a world with one device and lets a caller (a usbredir bridge serving a
//! QEMU guest, `calametra compare` replaying a capture) submit transfers one at a time. Each call
//! runs the world's events until that transfer completes, so latency, faults, transitions and
//! trace records are exactly those of an in-process run. Virtual time moves only through those
//! events and [`DeviceHost::advance_to`] (a lockstep bridge passes the guest's clock there).

use crate::bus::{Core, XKind};
use crate::choices::Decider;
use crate::clock::Nanos;
use crate::device::Device;
use crate::sim::RunConfig;
use crate::trace::TraceHash;
use crate::world::World;
use calametra_usb::{Setup, TransferError};
use std::any::Any;

/// The result of an IN poll: data, an error, or nothing yet (NAK).
pub type InResult = Option<Result<Vec<u8>, TransferError>>;

/// One device driven directly by a host.
pub struct DeviceHost {
    world: World,
    dev: usize,
}

impl DeviceHost {
    /// Attaches `device` to a fresh world configured by `config` (its source, fault plan,
    /// trace keeping; task limits do not apply).
    pub fn new(device: impl Device, config: &RunConfig) -> DeviceHost {
        let mut core = Core::new(
            Decider::new(config.source.clone()),
            config.faults.clone(),
            config.fault_set.clone(),
            config.keep_trace,
        );
        core.record_sites = config.record_sites;
        core.actor = std::rc::Rc::from("host");
        let mut world = World::new(core);
        let dev = world.attach(Box::new(device));
        DeviceHost { world, dev }
    }

    /// Virtual time now.
    pub fn now(&self) -> Nanos {
        self.world.core.now
    }

    /// The device, to read its ground truth.
    pub fn device<D: Device>(&self) -> Option<&D> {
        let any: &dyn Any = &*self.world.devices[self.dev].dev;
        any.downcast_ref::<D>()
    }

    /// Acts on the device through its context (a monitor plugged at a capture's time, say);
    /// transfers waiting on it are offered again afterwards. `None` if `D` is not its type.
    pub fn with_device<D: Device, R>(
        &mut self,
        f: impl FnOnce(&mut D, &mut crate::device::DevCtx<'_>) -> R,
    ) -> Option<R> {
        self.device::<D>()?;
        let h = crate::world::DeviceHandle::<D>::new(self.dev);
        Some(self.world.with_model(h, f))
    }

    /// The device's name for a request (as fault sites use it), if it has one.
    pub fn request_name(&self, setup: &Setup) -> Option<String> {
        self.world.devices[self.dev]
            .dev
            .request_name(setup)
            .map(str::to_string)
            .or_else(|| setup.standard_name().map(str::to_string))
    }

    /// The events the run has taken so far, in order: faults injected, schedule picks among
    /// simultaneous events, client and data draws (what `Source::Replay` needs to repeat it).
    pub fn events(&self) -> Vec<crate::choices::Event> {
        self.world.core.decide.log.clone()
    }

    /// The world (for invariants written against `&World`).
    pub fn world(&mut self) -> &mut World {
        &mut self.world
    }

    /// Whether the device is attached.
    pub fn is_attached(&self) -> bool {
        self.world.devices[self.dev].attached
    }

    /// The virtual time of the device's next pending event (a timer, a transfer completing),
    /// so a bridge can jump straight to it.
    pub fn next_event_time(&self) -> Option<Nanos> {
        self.world.core.next_time()
    }

    /// Fires every event due at or before `t`, then sets the clock to `t` (never backwards).
    pub fn advance_to(&mut self, t: Nanos) {
        while let Some(next) = self.world.core.next_time() {
            if next > t {
                break;
            }
            self.fire_next();
        }
        if t > self.world.core.now {
            self.world.core.now = t;
        }
    }

    fn fire_next(&mut self) -> bool {
        let Some((t, n)) = self.world.core.due_span() else {
            return false;
        };
        let point = self.world.core.point;
        let decide = &mut self.world.core.decide;
        let pick = decide.schedule(point, n);
        if pick != 0 {
            decide.label_pick(format!("event {pick}"));
        }
        self.world.core.point += 1;
        self.world.core.now = t.max(self.world.core.now);
        let key = self.world.core.due_nth(t, pick);
        if let Some(ev) = key.and_then(|k| self.world.core.take_event(k)) {
            self.world.fire(ev);
        }
        true
    }

    /// Submits a transfer and runs events until it completes. `None` when it cannot complete
    /// without a later state change (an IN that NAKs, a swallowed request); it is then cancelled.
    fn run_to_completion(&mut self, kind: XKind) -> Option<Result<Vec<u8>, TransferError>> {
        let gen = self.world.devices[self.dev].generation;
        let xid = self.world.submit(self.dev, gen, kind);
        loop {
            if let Some(r) = self.world.take_done(xid) {
                return Some(r);
            }
            if self.world.is_waiting(xid) || !self.fire_next() {
                self.world.cancel_quiet(xid);
                return None;
            }
        }
    }

    /// A control transfer; a request that never completes (a `timeout` fault) is `Timeout`.
    pub fn control(&mut self, setup: Setup, data: &[u8]) -> Result<Vec<u8>, TransferError> {
        let data = if setup.is_in() {
            Vec::new()
        } else {
            data.to_vec()
        };
        self.run_to_completion(XKind::Control { setup, data })
            .unwrap_or(Err(TransferError::Timeout))
    }

    /// A bulk or interrupt OUT transfer; returns the bytes accepted.
    pub fn out(&mut self, ep: u8, data: &[u8]) -> Result<usize, TransferError> {
        self.run_to_completion(XKind::Out {
            ep,
            data: data.to_vec(),
            intr: false,
        })
        .unwrap_or(Err(TransferError::Timeout))
        .map(|v| crate::bus::out_len(&v))
    }

    /// One IN poll of up to `len` bytes on `ep` (`interrupt` picks the site name); `None` = NAK.
    pub fn poll_in(&mut self, ep: u8, len: usize, interrupt: bool) -> InResult {
        self.run_to_completion(XKind::In {
            ep,
            len,
            intr: interrupt,
        })
    }

    /// Unplugs the device.
    pub fn disconnect(&mut self) {
        self.world.disconnect_index(self.dev);
    }

    /// Plugs the device back in after [`DeviceHost::disconnect`]: it sees a bus reset
    /// (`on_reset`), having seen the power go at the disconnect (`on_disconnect`).
    pub fn reconnect(&mut self) {
        self.world.reconnect_index(self.dev);
    }

    /// A USB bus reset.
    pub fn reset(&mut self) {
        self.world.reset_index(self.dev);
    }

    /// The trace hash so far and the number of deterministic records.
    pub fn hash(&self) -> (TraceHash, u64) {
        (self.world.core.trace.hash(), self.world.core.trace.len())
    }

    /// The kept trace lines so far (when the config asked to keep them).
    pub fn lines(&self) -> &[String] {
        self.world.core.trace.lines()
    }

    /// Writes a record of `kind` to the trace (a bridge's `guest` or `emulator` lines).
    pub fn record(
        &mut self,
        kind: &str,
        actor: &str,
        deterministic: bool,
        fill: impl FnOnce(&mut crate::trace::Data<'_>),
    ) {
        let now = self.world.core.now;
        self.world
            .core
            .trace
            .emit(now, kind, actor, deterministic, fill);
    }
}
