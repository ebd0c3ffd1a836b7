//! An async USB DFU 1.1 host updater, the driver that ships, tested with Calametra.
//!
//! [`update`] is generic over [`calametra_usb::UsbInterface`], the one dependency the updater
//! has: on the simulator it talks to the DFU model of `calametra-models`; with the `hardware`
//! feature, `hardware::NusbInterface` (`calametra-usb`'s) runs it on a real device through `nusb`. It finds the DFU interface and its functional
//! descriptor from GET_DESCRIPTOR, detaches a run-time device (which must detach itself:
//! bitWillDetach, because `UsbInterface` cannot reset the bus), downloads in wTransferSize
//! blocks polling DFU_GETSTATUS after bwPollTimeout, manifests (tolerant or not), verifies by
//! upload, and recovers from stalls, timeouts and garbled answers by clearing the device back
//! to dfuIDLE and starting again.
//!
//! `scenario()` (feature `scenario`, which the crate's own tests turn on) is the Calametra
//! scenario: the model from an embedded spec, the updater with a 64 KiB image, and the
//! invariants that judge it (see the module `scenario` for the acceptance contract). The
//! feature brings `calametra-core` and `calametra-models`; without it the crate is the driver
//! alone.
//!
//! ```
//! # #[cfg(feature = "scenario")] {
//! use calametra_core::{run, RunConfig};
//! let r = run(RunConfig::default(), &calametra_example_dfu_updater::scenario);
//! assert!(r.failure.is_none(), "{:?}", r.failure);
//! # }
//! ```
//!
//! On hardware (feature `hardware`), with any executor (`pollster`, `futures::executor`,
//! tokio), a real WillDetach device leaves the bus when it detaches, so the update is called
//! again on the re-opened device:
//!
//! ```text
//! let mut iface = NusbInterface::open(0x1209, 0x0001, 0)?;
//! let report = loop {
//!     match pollster::block_on(update(&iface, &image, &Options::default())) {
//!         Err(UpdateError::Reattached { .. }) => iface = reopen_after_enumeration()?,
//!         other => break other?,
//!     }
//! };
//! ```
//!
//! Feature `planted-bug` plants a bug exploration must find: a failed DFU_GETSTATUS after the
//! final block is read as "the device reset into the new firmware" and the update reports
//! success without verifying (see `tests/exploration.rs`).

#![warn(missing_docs)]

pub mod descriptors;
#[cfg(feature = "hardware")]
pub mod hardware;
pub mod protocol;
#[cfg(feature = "scenario")]
pub mod scenario;
pub mod updater;

#[cfg(feature = "scenario")]
pub use scenario::{
    new_image, scenario, scenario_nontolerant, scenario_planted, scenario_with,
    scenario_with_options,
};
pub use updater::{update, Options, Report, UpdateError};
