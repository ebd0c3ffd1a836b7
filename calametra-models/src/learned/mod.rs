//! The replay model: any learned spec (`calametra.spec.learned`, written by `calametra learn`
//! from real captures) drives it, wherever a model is used: a scenario (`spec = "..."` and
//! [`Learned::from_spec`]), `calametra compare`, `calametra qemu` and guest scenarios.
//!
//! The files follow the data: [`facts`] indexes a spec's keys, answers, events and descriptors
//! (once per process per spec), [`model`] is the [`Learned`] device with one cursor a key.
//! The spec format itself is `calametra_capture::learn::format`, its one reader and writer.
//!
//! A learned model knows only what the capture showed. Input the capture never showed is a
//! model gap naming the request and the nearest known key (a failure, never a pass); state the
//! capture cannot show (a counter, a mode the vendor documents) is added by wrapping the model
//! in a device of one's own, which answers what it knows and hands the rest on:
//!
//! ```
//! use calametra_core::host::DeviceHost;
//! use calametra_core::spec::Spec;
//! use calametra_core::usb::{DevCtx, Device, Reply, Setup};
//! use calametra_core::RunConfig;
//! use calametra_models::learned::Learned;
//!
//! /// The learned device, plus a sleep mode its vendor documents (request 0x40/0x42) and no
//! /// capture shows: asleep, it stalls everything else.
//! struct Sleepy {
//!     inner: Learned,
//!     asleep: bool,
//! }
//!
//! impl Device for Sleepy {
//!     fn name(&self) -> &str {
//!         self.inner.name()
//!     }
//!     fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
//!         if (setup.request_type, setup.request) == (0x40, 0x42) {
//!             let to = setup.value != 0;
//!             let name = |s: bool| if s { "asleep" } else { "awake" };
//!             // A state change of one's own is a transition too: a fault site.
//!             if to != self.asleep && !cx.transition("sleep", name(self.asleep), name(to)) {
//!                 return Reply::Stall;
//!             }
//!             self.asleep = to;
//!             return Reply::Ack;
//!         }
//!         if self.asleep {
//!             return Reply::Stall;
//!         }
//!         self.inner.control(cx, setup, data)
//!     }
//!     fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
//!         self.inner.out(cx, ep, data)
//!     }
//!     fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
//!         self.inner.poll_in(cx, ep, max_len)
//!     }
//!     // Hand timers, resets and unplugging on: the model's delays and events need them.
//!     fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
//!         self.inner.on_timer(cx, token)
//!     }
//!     fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
//!         self.inner.on_reset(cx)
//!     }
//!     fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
//!         self.inner.on_disconnect(cx)
//!     }
//! }
//!
//! // A learned spec of one vendor request, answered twice the same (usually `calametra learn`
//! // writes this file from a capture).
//! let spec = Spec::parse(
//!     "specs/tiny.json",
//!     br#"{"format": "calametra.spec.learned", "version": 1, "name": "tiny",
//!          "source": {"captures": []},
//!          "control": [{"name": "c001.0000.0000.0002", "setup": "c001000000000200",
//!                       "data": "", "latency_ns": 0,
//!                       "outcomes": [{"data": "2a00"}, {"data": "2a00"}]}]}"#,
//! )?;
//! let dev = Sleepy { inner: Learned::try_from_spec(&spec)?, asleep: false };
//! let mut host = DeviceHost::new(dev, &RunConfig::default());
//! let read = Setup { request_type: 0xc0, request: 0x01, value: 0, index: 0, length: 2 };
//! assert_eq!(host.control(read, &[]), Ok(vec![0x2a, 0x00]));
//! let sleep = Setup { request_type: 0x40, request: 0x42, value: 1, index: 0, length: 0 };
//! assert_eq!(host.control(sleep, &[]), Ok(vec![]));
//! assert!(host.control(read, &[]).is_err()); // asleep: a stall
//! # Ok::<(), calametra_core::Error>(())
//! ```

pub mod compare;
pub mod facts;
pub mod model;

// Found by `calametra compare` (which replays the whole capture through `compare`), `calametra
// qemu` and any tool that builds a model from a `calametra.spec.learned` spec.
calametra_core::register_model!(
    "calametra.spec.learned",
    Learned::try_from_spec,
    compare_capture = compare::compare_registered
);

#[cfg(test)]
mod tests;

pub use facts::Facts;
pub use model::Learned;
