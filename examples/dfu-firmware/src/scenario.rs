//! The scenario: the usbd-dfu firmware on the simulated bus, enumerated by the host stack, then
//! updated by the example DFU updater (`calametra-example-dfu-updater`, unchanged) through the
//! [`DfuSe`] addressing wrapper, with the 64 KiB image of the updater's own scenario.
//!
//! What a run must show, checked after every step:
//! - `installed_as_claimed`: once the updater reports success, the image the firmware manifested
//!   is the image the updater sent;
//! - the updater ends with `Ok` (downloaded, manifested, verified by upload) or with
//!   `Disconnected` (the device left the bus and, in this simulator, never returns).

use crate::dfuse::DfuSe;
use crate::image::{firmware_device, DfuFirmwareDevice};
use calametra_core::interface::Interface;
use calametra_core::usb::{ControlIn, ControlOut, ControlType, Recipient, TransferError};
use calametra_core::{DeviceHandle, Sim};
use calametra_example_dfu_updater::scenario::Outcome;
use calametra_example_dfu_updater::{new_image, update, Options, UpdateError};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// The image the scenario installs (64 KiB: the whole flash region).
pub fn image() -> Vec<u8> {
    new_image()
}

const T: Duration = Duration::from_millis(500);

fn get_descriptor(ty: u8, length: u16) -> ControlIn {
    ControlIn {
        control_type: ControlType::Standard,
        recipient: Recipient::Device,
        request: 6,
        value: (ty as u16) << 8,
        index: 0,
        length,
    }
}

fn set(request: u8, value: u16) -> ControlOut<'static> {
    ControlOut {
        control_type: ControlType::Standard,
        recipient: Recipient::Device,
        request,
        value,
        index: 0,
        data: &[],
    }
}

/// What a host stack does before a driver sees the device: the first 64 bytes of the device
/// descriptor, SET_ADDRESS, the whole device and configuration descriptors, SET_CONFIGURATION.
/// Each step is tried three times, as Linux does; only a device that left the bus ends it.
pub async fn enumerate(iface: &Interface) -> Result<(), TransferError> {
    for step in 0..6 {
        let mut last = Ok(());
        for _ in 0..3 {
            last = match step {
                0 => iface.control_in(get_descriptor(1, 64), T).await.map(drop),
                1 => iface.control_out(set(5, 1), T).await,
                2 => iface.control_in(get_descriptor(1, 18), T).await.map(drop),
                3 => iface.control_in(get_descriptor(2, 9), T).await.map(drop),
                4 => iface.control_in(get_descriptor(2, 27), T).await.map(drop),
                _ => iface.control_out(set(9, 1), T).await,
            };
            match last {
                Ok(()) => break,
                Err(TransferError::Disconnected) => return last,
                Err(_) => {}
            }
        }
        let _ = last;
    }
    Ok(())
}

/// The host side of every run: enumeration, then the example updater through [`DfuSe`] with
/// [`image`]; returns the cell its result lands in. The task ends `Ok` for an update or a
/// device that left the bus, and with the updater's error otherwise.
pub fn host_campaign(sim: &mut Sim, iface: Interface) -> Outcome {
    host_campaign_with(sim, iface, image(), true)
}

/// [`host_campaign`] with another image, and with or without the [`DfuSe`] wrapper (without
/// it, the updater speaks plain DFU 1.1 block numbers to whatever device it meets).
pub fn host_campaign_with(sim: &mut Sim, iface: Interface, img: Vec<u8>, dfuse: bool) -> Outcome {
    let outcome: Outcome = Rc::new(RefCell::new(None));
    let cell = outcome.clone();
    sim.spawn("updater", async move {
        let r = match enumerate(&iface).await {
            Err(_) => Err(UpdateError::Disconnected),
            Ok(()) if dfuse => update(&DfuSe::new(iface), &img, &Options::default()).await,
            Ok(()) => update(&iface, &img, &Options::default()).await,
        };
        *cell.borrow_mut() = Some(r.clone());
        match r {
            Ok(_) | Err(UpdateError::Disconnected) => Ok(()),
            Err(e) => Err(e),
        }
    });
    outcome
}

/// The firmware attached and updated; returns its handle and the updater's result cell.
pub fn scenario_with_outcome(sim: &mut Sim) -> (DeviceHandle<DfuFirmwareDevice>, Outcome) {
    let dev = sim.attach(firmware_device());
    let outcome = host_campaign(sim, dev.interface());
    let claimed = outcome.clone();
    let img = image();
    sim.invariant("installed_as_claimed", move |w| {
        if !matches!(&*claimed.borrow(), Some(Ok(_))) {
            return Ok(());
        }
        let fw = w.model(dev).firmware();
        let flash = fw.flash();
        match &flash.manifested {
            Some(m) if *m == img => Ok(()),
            Some(m) => Err(format!(
                "the updater reports the image installed, but the firmware manifested other contents ({} of {} bytes differ)",
                m.iter().zip(&img).filter(|(a, b)| a != b).count(),
                img.len()
            )),
            None => Err("the updater reports the image installed, but the firmware never manifested".into()),
        }
    });
    (dev, outcome)
}

/// The scenario: the example DFU updater updates the usbd-dfu firmware (see the module docs).
pub fn scenario(sim: &mut Sim) {
    scenario_with_outcome(sim);
}
