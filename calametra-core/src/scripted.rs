//! A device with events off the bus at set virtual times ([`Scripted`]): a monitor plugged in
//! at +34.6 s, a button pressed at 2 ms. A capture comparison replays with it what the capture
//! shows happening outside the bus; a scenario scripts a hot-plug with it.

use crate::clock::Nanos;
use crate::device::{DevCtx, Device, Reply};
use calametra_usb::Setup;

/// An event off the bus that a capture shows (a monitor plugged in): applied to the model
/// through its context at a virtual time.
type Action<D> = Box<dyn FnMut(&mut D, &mut DevCtx<'_>)>;

/// Marks the timer tokens [`Scripted`] uses, so they do not reach the wrapped device.
const SCRIPT_TOKEN: u64 = 0x5c41_7000_0000_0000;

/// A device with events off the bus at set virtual times: how a comparison replays what the
/// capture shows happening outside the bus (a monitor plugged in at +34.6 s), so the model is
/// in the state the real device was in when the next request arrives.
///
/// The wrapper delegates every bus event to the device. On the first one it asks for a timer
/// per scripted event (an event already due runs at once); when a timer fires it writes an
/// `external` trace record with the event's name and runs the action with the device's
/// context. Timer tokens with the high bits `0x5c417` are the wrapper's; the device's own
/// tokens pass through unchanged.
pub struct Scripted<D> {
    inner: D,
    events: Vec<(Nanos, String, Option<Action<D>>)>,
    armed: bool,
}

impl<D: Device> Scripted<D> {
    /// Wraps `device` with no events yet.
    pub fn new(device: D) -> Scripted<D> {
        Scripted {
            inner: device,
            events: Vec::new(),
            armed: false,
        }
    }

    /// Adds an event named `name` at virtual time `t` (a capture's time maps onto it with
    /// `calametra_capture::compare::capture_to_virtual`).
    pub fn at(
        mut self,
        t: Nanos,
        name: impl Into<String>,
        action: impl FnMut(&mut D, &mut DevCtx<'_>) + 'static,
    ) -> Scripted<D> {
        self.events.push((t, name.into(), Some(Box::new(action))));
        self
    }

    /// The wrapped device, to read its ground truth.
    pub fn inner(&self) -> &D {
        &self.inner
    }

    /// The events that have run, by name, in order of their times.
    pub fn done(&self) -> Vec<&str> {
        let mut v: Vec<(Nanos, &str)> = self
            .events
            .iter()
            .filter(|e| e.2.is_none())
            .map(|e| (e.0, e.1.as_str()))
            .collect();
        v.sort();
        v.into_iter().map(|e| e.1).collect()
    }

    fn arm(&mut self, cx: &mut DevCtx<'_>) {
        if self.armed {
            return;
        }
        self.armed = true;
        for i in 0..self.events.len() {
            let t = self.events.get(i).map_or(0, |e| e.0);
            if t <= cx.now() {
                self.run(cx, i);
            } else {
                cx.wake_after(t - cx.now(), SCRIPT_TOKEN | i as u64);
            }
        }
    }

    fn run(&mut self, cx: &mut DevCtx<'_>, i: usize) {
        let Some((_, name, action)) = self.events.get_mut(i) else {
            return;
        };
        if let Some(mut f) = action.take() {
            let name = name.clone();
            cx.record("external", |d| {
                d.str("name", &name);
            });
            f(&mut self.inner, cx);
        }
    }
}

impl<D: Device> Device for Scripted<D> {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        self.arm(cx);
        self.inner.control(cx, setup, data)
    }

    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        self.arm(cx);
        self.inner.out(cx, ep, data)
    }

    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        self.arm(cx);
        self.inner.poll_in(cx, ep, max_len)
    }

    fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
        if token & !0xffff_ffff == SCRIPT_TOKEN {
            self.run(cx, (token & 0xffff_ffff) as usize);
        } else {
            self.inner.on_timer(cx, token);
        }
    }

    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        self.arm(cx);
        self.inner.on_reset(cx);
    }

    fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
        self.inner.on_disconnect(cx);
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        self.inner.request_name(setup)
    }

    fn describe(&self) -> Vec<(String, String)> {
        crate::state::describe_device(&self.inner)
    }

    fn pictures(&self) -> Vec<String> {
        self.inner.pictures()
    }

    fn picture(&self, name: &str) -> Option<crate::picture::Picture> {
        self.inner.picture(name)
    }
}
