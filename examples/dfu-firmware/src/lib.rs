//! Firmware in the loop: a real usbd-dfu firmware image (usb-device 0.3 and usbd-dfu 0.4,
//! unmodified) running on Calametra's simulated bus through `calametra_models::firmware`, with
//! its flash in memory behind usbd-dfu's `DFUMemIO`.
//!
//! The data flows through one file per stage: [`flash`] is the memory; [`image`] the firmware
//! (the `UsbDevice`, the `DFUClass` and the main loop) and [`firmware_device`], the firmware as a
//! simulated device; [`dfuse`] the DfuSe block addressing a DFU 1.1 host needs for it;
//! [`scenario`](mod@scenario) the example DFU updater updating it.
//!
//! ```
//! use calametra_core::{run, RunConfig};
//! let r = run(RunConfig::default(), &calametra_example_dfu_firmware::scenario);
//! assert!(r.failure.is_none(), "{:?}", r.failure);
//! ```
//!
//! The same firmware is served to a Linux guest under QEMU and updated by dfu-util
//! (`tests/qemu.rs`), and compared with the DFU 1.1 model under the same host campaigns
//! (`tests/differential.rs`).

pub mod dfuse;
pub mod flash;
pub mod image;
pub mod scenario;

pub use image::{firmware_device, DfuFirmware, DfuFirmwareDevice};
pub use scenario::{host_campaign, image as update_image, scenario};
