//! The MCT Trigger 6 graphics function of a j5create JCD543 dock (USB 0711:5601 rev 10.10),
//! modelled from a real capture and a real monitor's EDID (`specs/trigger6-jcd543.json`).
//!
//! The files follow the data: [`facts`] reads the spec, [`timing`] the 32-byte timing records,
//! [`bulk`] the DMA and video framing and the interrupt packets, [`vram`] the sparse video RAM,
//! [`model`] the device itself, [`dock`] the model with its monitor staged as guest scenarios
//! plug and unplug it, [`invariants`] the checks that compare the model's ground
//! truth with a driver's beliefs, [`scanout`] the picture an output shows (RGB, PNG), and
//! [`capture`] the comparison with the real capture.
//!
//! ```no_run
//! use calametra_core::spec::Spec;
//! use calametra_models::trigger6::Trigger6;
//! let bytes = std::fs::read("specs/trigger6-jcd543.json").unwrap();
//! let spec = Spec::parse("specs/trigger6-jcd543.json", &bytes).unwrap();
//! let dock = Trigger6::try_from_spec(&spec).unwrap();
//! assert_eq!(dock.vram_size(), 58 << 20);
//! ```

pub mod bulk;
pub mod capture;
mod describe;
pub mod dock;
pub mod facts;
pub mod invariants;
pub mod model;
pub mod scanout;
pub mod timing;
pub mod vram;

pub use bulk::PixelFormat;
pub use dock::Dock;
pub use invariants::{Connection, DriverView, FlipBelief, RamWrite};
pub use model::{DmaStats, FlipInfo, FlipRecord, FlipState, Frame, Sabotage, Trigger6};
pub use scanout::Scanout;
pub use timing::Timing;

// Found by `calametra compare`, `calametra qemu` and any tool that builds a model from a
// `calametra.spec.trigger6` spec; it replays whole captures itself (bulk, interrupt, frames).
calametra_core::register_model!(
    "calametra.spec.trigger6",
    Trigger6::try_from_spec,
    compare_capture = capture::compare_registered,
);

calametra_core::names! {
    /// Coverage marks the model records (`DevCtx::mark`).
    pub mod marks {
        /// The monitor was unplugged while the last status reply for its output said
        /// connected: whoever holds that reply holds a stale one.
        STALE_STATUS_AFTER_DISCONNECT = "StaleStatusAfterDisconnect";
        /// A flip and a modeset of the same output overlapped (a flip pending or shown between
        /// a `set_mode` and its `finalise`).
        FLIP_DURING_MODESET = "FlipDuringModeset";
        /// A display payload arrived in more than one fragment or bulk transfer.
        FRAGMENTED_FRAME = "FragmentedFrame";
    }
}

calametra_core::names! {
    /// The invariant names, as scenarios declare them.
    pub mod names {
        /// [`Trigger6::flip_state_matches_ram`](super::Trigger6::flip_state_matches_ram).
        FLIP_STATE_MATCHES_RAM = "flip_state_matches_ram";
        /// [`Trigger6::status_matches_connection`](super::Trigger6::status_matches_connection).
        STATUS_MATCHES_CONNECTION = "status_matches_connection";
        /// [`Trigger6::modeset_has_valid_timing`](super::Trigger6::modeset_has_valid_timing).
        MODESET_HAS_VALID_TIMING = "modeset_has_valid_timing";
        /// [`Trigger6::ram_writes_in_bounds`](super::Trigger6::ram_writes_in_bounds).
        RAM_WRITES_IN_BOUNDS = "ram_writes_in_bounds";
    }
}
