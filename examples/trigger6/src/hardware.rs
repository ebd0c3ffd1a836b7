//! The same driver on a real dock (feature `hardware`): [`open_dock`] claims the first Trigger 6
//! as a `calametra_usb::nusb::NusbInterface` (the [`UsbInterface`](calametra_usb::UsbInterface)
//! over `nusb::Interface`, with its minimal executor [`block_on`] and timer), so
//! `hardware::run(open_dock()?)` drives a JCD543 through Linux usbfs, macOS or WinUSB.
//!
//! The wall clock and threads (a timer thread per sleep) are `calametra_usb::nusb`'s; this
//! module is never compiled into a simulation. No dock is in CI: the in-process tests never compile it, and
//! `calametra-qemu/tests/trigger6.rs` runs it (as the static `t6-drive` binary) over usbfs in
//! the Linux guest against the model: `cargo build -p calametra-example-trigger6 --features
//! hardware --bin t6-drive`.
//!
//! A transfer whose future is dropped (the driver's `UsbInterface::timeout` gave up) does not
//! lose the endpoint (see `calametra_usb::nusb`): an interrupt packet that arrives between two
//! reads is not lost.

use crate::driver::{Driver, DriverError, Summary};
pub use calametra_usb::nusb::{block_on, NusbInterface};
use nusb::MaybeFuture;
use std::future::Future;
use std::pin::pin;

/// USB vendor id of MCT.
pub const VENDOR_ID: u16 = 0x0711;
/// Product ids of Trigger 6 display functions (MCT's udev rule matches 0x5600-0x561f).
pub const PRODUCT_IDS: std::ops::RangeInclusive<u16> = 0x5600..=0x561f;

/// Finds the first Trigger 6 display function, opens it and claims interface 0 (detaching a
/// kernel driver if one is bound).
pub fn open_dock() -> Result<NusbInterface, String> {
    let info = nusb::list_devices()
        .wait()
        .map_err(|e| format!("listing USB devices: {e}"))?
        .find(|d| d.vendor_id() == VENDOR_ID && PRODUCT_IDS.contains(&d.product_id()))
        .ok_or("no MCT Trigger 6 (0711:5600-561f) is connected")?;
    let dev = info.open().wait().map_err(|e| {
        format!(
            "opening {:04x}:{:04x}: {e}",
            info.vendor_id(),
            info.product_id()
        )
    })?;
    let iface = dev
        .detach_and_claim_interface(0)
        .wait()
        .map_err(|e| format!("claiming interface 0: {e}"))?;
    Ok(NusbInterface::new(dev, iface))
}

/// Runs the driver on a dock: the main sequence and the interrupt listener together, until
/// the main sequence ends.
pub fn run(iface: NusbInterface) -> Result<Summary, DriverError> {
    run_driver(Driver::new(iface))
}

/// [`run`] for a driver made by the caller, who keeps its [`Driver::beliefs`] to report what
/// the driver did.
pub fn run_driver(driver: Driver<NusbInterface>) -> Result<Summary, DriverError> {
    let irq = driver.clone().irq_loop();
    let main = driver.run();
    block_on(async move {
        let mut irq = pin!(irq);
        let mut main = pin!(main);
        let mut irq_done = false;
        std::future::poll_fn(|cx| {
            if !irq_done {
                // The listener ends only when the dock goes away; its result is not the run's.
                irq_done = irq.as_mut().poll(cx).is_ready();
            }
            main.as_mut().poll(cx)
        })
        .await
    })
}
