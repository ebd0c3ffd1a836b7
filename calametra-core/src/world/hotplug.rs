//! The world's record of hotplug: the events of a run kept for watches ([`Hotplug`]) and what
//! the bus shows of a device (its id, [`device_id`], and its listing, [`device_info`]), used
//! by the world when a device comes or goes and by the simulated host (`crate::discovery`)
//! when a driver lists or opens devices. The host's side (`SimHost`, its watches) must not
//! live here: this file is the world's, and the world never imports the host.

use super::World;
use crate::tasks::Wakeup;
use calametra_usb::{DeviceId, DeviceInfo, HotplugEvent};

/// The hotplug events of a run and the watchers waiting for the next one.
#[derive(Default)]
pub(crate) struct Hotplug {
    /// Whether a watch started (events are kept only then).
    pub(crate) watching: bool,
    pub(crate) events: Vec<HotplugEvent>,
    pub(crate) waiting: Vec<Wakeup>,
}

impl Hotplug {
    pub(crate) fn clear(&mut self) {
        self.watching = false;
        self.events.clear();
        self.waiting.clear();
    }
}

/// A device's id: its index on the bus and its plug generation.
pub(crate) fn device_id(index: usize, generation: u32) -> DeviceId {
    DeviceId(((index as u64) << 32) | u64::from(generation))
}

/// What a listing shows of device `index` (its ids and strings from its descriptors; zeros
/// when the model has none).
pub(crate) fn device_info(world: &World, index: usize) -> DeviceInfo {
    let slot = &world.devices[index];
    let d = slot.dev.descriptors().unwrap_or_default();
    DeviceInfo {
        id: device_id(index, slot.generation),
        vendor_id: d.vendor_id().unwrap_or(0),
        product_id: d.product_id().unwrap_or(0),
        serial_number: d.serial_number().map(str::to_string),
        product_string: d.product_string().map(str::to_string),
    }
}
