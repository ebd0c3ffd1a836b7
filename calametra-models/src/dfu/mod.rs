//! The USB DFU 1.1 model: a device in run-time mode that detaches into DFU mode, takes a
//! firmware image in blocks, manifests it and uploads it back, exactly as the DFU 1.1 state
//! machine (`refdata/dfu11.md`) says, with its bwPollTimeouts on the virtual clock.
//!
//! The data flows through one file per concern:
//! - `spec`: a `calametra.spec.dfu` file (`specs/dfu11-*.json`) read and cross-checked into
//!   [`DfuSpec`];
//! - `state`: the vocabulary ([`State`], [`Status`], [`Request`], [`Cause`], [`Transition`]);
//! - `flash`: two banks, the running image and the staging bank, bounded, with the CRC-32 check;
//! - `device`: [`Dfu`], the state machine and its timers, resets and marks;
//! - `standard`: chapter 9 requests answered from the spec's bytes;
//! - `invariants`: [`never_bricked`], [`state_machine_legal`], [`installed_as_claimed`].
//!
//! ```
//! use calametra_core::spec::Spec;
//! use calametra_models::dfu::{Dfu, State};
//! # let bytes = include_bytes!("../../specs/dfu11-tolerant.json");
//! let spec = Spec::parse("specs/dfu11-tolerant.json", bytes).unwrap();
//! let dfu = Dfu::try_from_spec(&spec).unwrap();
//! assert_eq!(dfu.state(), State::AppIdle);
//! assert_eq!(dfu.attributes().manifestation_tolerant, true);
//! ```
//!
//! Fault sites: class requests are named `ctrl.detach`, `ctrl.dnload`, `ctrl.upload`,
//! `ctrl.getstatus`, `ctrl.clrstatus`, `ctrl.getstate`, `ctrl.abort` (`ctrl.dnload#3`), and
//! state changes `dfu.<from>-><to>` with the short names of [`State::name`]
//! (`dfu.dnload_sync->dnbusy#2`).

mod device;
pub mod flash;
mod image;
mod invariants;
pub mod spec;
mod standard;
mod state;

#[cfg(test)]
mod conformance;
#[cfg(test)]
mod testkit;
#[cfg(test)]
mod tests;

pub use device::{marks, Dfu, Sabotage};
pub use flash::{crc32, seal_image, Flash, ValidImage};
pub use invariants::{
    installed_as_claimed, never_bricked, never_bricked_since, state_machine_legal,
    state_machine_legal_since, watch_never_bricked_and_legal,
};
pub use spec::{Attributes, DescriptorSet, DfuSpec, ImageCheck};
pub use state::{Cause, Request, State, Status, Transition};

// Found by `calametra compare`, `calametra qemu` and any tool that builds a model from a
// `calametra.spec.dfu` spec. A WillDetach device re-enumerates by itself, and its
// bwPollTimeouts are timers a guest polls through.
calametra_core::register_model!(
    "calametra.spec.dfu",
    Dfu::try_from_spec,
    qemu = calametra_core::registry::QemuHints {
        reenumerate_marks: &[marks::WILL_DETACH_TO_DFU, marks::WILL_DETACH_TO_APP],
        warp_after_request: true,
    },
);
