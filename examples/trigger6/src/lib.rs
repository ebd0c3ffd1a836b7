//! An async userspace driver for the MCT Trigger 6 display function of a j5create JCD543 dock
//! (USB 0711:5601), and the Calametra scenario that tests it against the model.
//!
//! - [`driver`]: the driver, generic over [`calametra_usb::UsbInterface`]: probe,
//!   interrupt-driven hotplug, EDID, modeset to 1920x1080@60 from the dock's table, an NV12
//!   colour-bar frame over DMA-framed bulk, flips with fences, on either output. Its
//!   [`driver::Beliefs`] are shared (`Rc<RefCell<..>>`) so invariants can compare them with
//!   the model.
//! - [`edid`] and [`frame`]: the EDID reading and the test picture.
//! - [`protocol`]: the wire format as the driver writes it (DMA and flip headers, interrupt
//!   packets, timing records), its own encoding, independent of the model's.
//! - `scenario` (feature `scenario`, which the crate's own tests turn on): the standard
//!   scenario (`scenario()`) the harness wraps, and the second output's
//!   (`scenario_second_output`: a monitor hot-plugged into output 1, the bars shown there). It
//!   brings `calametra-core` and `calametra-models`; without it the library is the driver and
//!   `calametra-usb` alone.
//! - `hardware` (feature `hardware`): the same driver on a real dock through `nusb`.
//!
//! Feature `planted-race` plants a race in [`driver::Driver::poll_connection`]: a status reply
//! obtained before a hotplug notification was processed is stored anyway. Seeded schedules that
//! unplug the monitor at the wrong moment break `status_matches_connection`.
//!
//! ```
//! # #[cfg(feature = "scenario")] {
//! use calametra_core::{run, RunConfig};
//! let r = run(RunConfig::default(), &calametra_example_trigger6::scenario::scenario);
//! assert!(r.failure.is_none(), "{:?}", r.failure);
//! # }
//! ```

#![warn(missing_docs)]

pub mod driver;
pub mod edid;
pub mod frame;
#[cfg(feature = "hardware")]
pub mod hardware;
pub mod protocol;
#[cfg(feature = "scenario")]
pub mod scenario;

pub use driver::{Beliefs, Driver, DriverError, Summary};
#[cfg(feature = "scenario")]
pub use scenario::{
    build, build_second_output, build_with, scenario, scenario_fixed, scenario_planted,
    scenario_second_output, spec, Handles, SecondOutput,
};
