//! Firmware in the loop: real `usb-device` firmware (its `UsbDevice`, its class objects and its
//! poll loop, unmodified) running as a [`calametra_core::usb::Device`] on the simulator's bus.
//!
//! The data flows through two files:
//! - `bus`: [`SimBus`], the `usb_device::bus::UsbBus` the firmware is built on, a device
//!   controller whose packet buffers the simulator fills and drains;
//! - `device`: [`FirmwareDevice`], which turns each bus event (a control transfer with its data
//!   stage, a bulk or interrupt transfer, a reset, a suspend) into the packets the firmware
//!   expects, runs its poll loop until it settles, collects what it wrote, and reports the state
//!   changes it can observe as transitions (fault sites), rolling the firmware back by replay
//!   when a fault refuses one.
//!
//! A firmware image implements [`Firmware`]: its main loop, usb-device's state, and optionally
//! request names for fault sites and side-effect-free probes of its class state.
//!
//! ```
//! use calametra_core::usb::Setup;
//! use calametra_models::firmware::{Firmware, FirmwareDevice};
//! use usb_device::device::{UsbDevice, UsbDeviceBuilder, UsbDeviceState, UsbVidPid};
//! use calametra_models::firmware::SimBus;
//!
//! struct Bare(UsbDevice<'static, SimBus>);
//! impl Firmware for Bare {
//!     fn poll(&mut self) {
//!         self.0.poll(&mut []);
//!     }
//!     fn usb_state(&self) -> UsbDeviceState {
//!         self.0.state()
//!     }
//! }
//! let dev = FirmwareDevice::new(|alloc| Bare(UsbDeviceBuilder::new(alloc, UsbVidPid(0x1209, 0x0001)).build()));
//! assert_eq!(dev.state("usb"), Some("default"));
//! ```

mod bus;
mod device;

#[cfg(test)]
mod tests;

pub use bus::SimBus;
pub use device::{usb_state_name, Allocator, Firmware, FirmwareDevice, StateProbe};
