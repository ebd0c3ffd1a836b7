//! The dock as guest scenarios stage it: the [`Trigger6`] model with its monitor plugged in
//! when a driver starts talking to it and, if asked, unplugged after a page flip.
//!
//! The model powers up with no monitor (the capture's enumeration shows none), but the real
//! dock powers up with the HP X27q on HDMI. A [`Dock`] plugs the spec's monitor into output 0
//! at the driver's first vendor request (the kernel's enumeration sends none), and with
//! [`Dock::unplug_after_fence`] unplugs it at the first status query of output 0 (vendor IN
//! request `0x87`, value 0) once the model shows a flip with that fence or a later one. Both
//! are model-side events taken inside a call the bus delivers, so they land at the same point
//! of every run, guest or in process; each is traced as an `external` record
//! (`{"event":"plug_monitor","output":0}`, then `unplug_monitor`). Every other [`Device`]
//! call goes to the model unchanged, so a dock behaves as the model does.

use super::model::Trigger6;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};

/// The status query of output 0 the unplug waits for: (request type, request, value).
const STATUS_QUERY_OUT0: (u8, u8, u16) = (0xc0, 0x87, 0);

/// The [`Trigger6`] model with the monitor staged: plugged into output 0 at the first vendor
/// request and, with [`Dock::unplug_after_fence`], unplugged at the first status query of
/// output 0 after the model shows that fence. See the [module](self) docs.
pub struct Dock {
    model: Trigger6,
    unplug_after_fence: Option<u32>,
    plugged: bool,
    unplugged: bool,
}

impl Dock {
    /// The dock around `model`: the monitor plugged at the first vendor request, never
    /// unplugged.
    pub fn new(model: Trigger6) -> Dock {
        Dock {
            model,
            unplug_after_fence: None,
            plugged: false,
            unplugged: false,
        }
    }

    /// Unplugs the monitor at the first status query of output 0 once the model shows a flip
    /// on output 0 with fence `fence` or later.
    pub fn unplug_after_fence(mut self, fence: u32) -> Dock {
        self.unplug_after_fence = Some(fence);
        self
    }

    /// The model.
    pub fn model(&self) -> &Trigger6 {
        &self.model
    }

    /// The model, to change (a test's sabotage, say).
    pub fn model_mut(&mut self) -> &mut Trigger6 {
        &mut self.model
    }

    /// Whether the monitor was plugged in (the model took the plug).
    pub fn plugged(&self) -> bool {
        self.plugged
    }

    /// Whether the monitor was unplugged (the model took the unplug).
    pub fn unplugged(&self) -> bool {
        self.unplugged
    }
}

impl std::fmt::Debug for Dock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Dock")
            .field("model", &self.model)
            .field("unplug_after_fence", &self.unplug_after_fence)
            .field("plugged", &self.plugged)
            .field("unplugged", &self.unplugged)
            .finish()
    }
}

impl Device for Dock {
    fn name(&self) -> &str {
        self.model.name()
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        if !self.plugged && setup.request_type & 0x60 == 0x40 {
            self.plugged = self.model.plug_monitor(cx, 0);
            cx.record("external", |d| {
                d.str("event", "plug_monitor").u64("output", 0);
            });
        }
        if let Some(fence) = self.unplug_after_fence {
            let shown = self.model.flip_state(0).shown.map_or(0, |f| f.fence);
            if !self.unplugged
                && (setup.request_type, setup.request, setup.value) == STATUS_QUERY_OUT0
                && shown >= fence
            {
                self.unplugged = self.model.unplug_monitor(cx, 0);
                cx.record("external", |d| {
                    d.str("event", "unplug_monitor").u64("output", 0);
                });
            }
        }
        self.model.control(cx, setup, data)
    }

    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        self.model.out(cx, ep, data)
    }

    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        self.model.poll_in(cx, ep, max_len)
    }

    fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
        self.model.on_timer(cx, token)
    }

    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        self.model.on_reset(cx)
    }

    fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
        self.model.on_disconnect(cx)
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        self.model.request_name(setup)
    }

    /// The model's own `describe`, else its state-dump fields (the model registers those with
    /// `describe_model!`, which matches the model's type, not the dock's).
    fn describe(&self) -> Vec<(String, String)> {
        let own = self.model.describe();
        if own.is_empty() {
            self.model.describe_fields()
        } else {
            own
        }
    }

    fn pictures(&self) -> Vec<String> {
        self.model.pictures()
    }

    fn picture(&self, name: &str) -> Option<calametra_core::picture::Picture> {
        self.model.picture(name)
    }
}
