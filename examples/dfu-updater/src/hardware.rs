//! [`UsbInterface`](calametra_usb::UsbInterface) over a claimed `nusb::Interface`, so the updater
//! that Calametra tests is the one that runs against a real device (feature `hardware`): the
//! driver-facing crate's implementation, `calametra_usb::nusb`.
//!
//! `NusbInterface::open(vid, pid, interface)` finds and claims the device;
//! [`NusbInterface::device`] is there for what `UsbInterface` does not cover. `sleep` uses a
//! helper thread per call: this module never runs inside a simulation.

pub use calametra_usb::nusb::{block_on, NusbInterface};
