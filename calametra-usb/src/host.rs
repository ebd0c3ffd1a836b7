//! The host side of a driver: finding its device ([`UsbHost::list_devices`]), opening it by id
//! or serial ([`UsbHost::open`], [`UsbHost::open_matching`]) and watching devices come and go
//! ([`UsbHost::watch_devices`], [`HotplugEvent`]), as `nusb::list_devices`,
//! `DeviceInfo::open` and `nusb::watch_devices` do. Implemented by the simulator's host
//! (`calametra_core::discovery::SimHost`) and, with the feature `nusb`, by
//! [`crate::nusb::NusbHost`], so a driver's own discovery and reopen-after-replug code runs in
//! scenarios. Nothing here blocks.

use crate::{TransferError, UsbInterface};
use std::future::Future;

/// A device's identity while it stays plugged in (a replugged device gets a new one), as
/// `nusb::DeviceId`. Compare ids; do not read meaning into the number.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct DeviceId(pub u64);

/// What is known of a device without opening it, as `nusb::DeviceInfo`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// Its identity while plugged in.
    pub id: DeviceId,
    /// `idVendor`.
    pub vendor_id: u16,
    /// `idProduct`.
    pub product_id: u16,
    /// The serial number string, if the device has one.
    pub serial_number: Option<String>,
    /// The product string, if the device has one.
    pub product_string: Option<String>,
}

/// A device came or went, as `nusb::hotplug::HotplugEvent`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum HotplugEvent {
    /// A device was plugged in.
    Connected(DeviceInfo),
    /// The device with this id was unplugged.
    Disconnected(DeviceId),
}

/// A stream of hotplug events, from [`UsbHost::watch_devices`]: events after the watch began,
/// in the order they happened.
pub trait HotplugWatch {
    /// The next event, once there is one.
    fn next_event(&mut self) -> impl Future<Output = HotplugEvent>;
}

/// The host's view of the bus: the devices on it, opening one (its first interface claimed as
/// `interface`), and a watch for hotplug events.
pub trait UsbHost {
    /// The interface an opened device gives.
    type Interface: UsbInterface;
    /// The hotplug stream.
    type Watch: HotplugWatch;

    /// The devices plugged in now.
    fn list_devices(&self) -> impl Future<Output = Result<Vec<DeviceInfo>, TransferError>>;

    /// Opens the device `id` and claims `interface`; `Disconnected` if it is gone.
    fn open(
        &self,
        id: DeviceId,
        interface: u8,
    ) -> impl Future<Output = Result<Self::Interface, TransferError>>;

    /// Starts watching hotplug events.
    fn watch_devices(&self) -> Result<Self::Watch, TransferError>;

    /// Opens the first device with `vendor_id:product_id` (and `serial`, when given), claiming
    /// `interface`; `Disconnected` when none is plugged in.
    fn open_matching(
        &self,
        vendor_id: u16,
        product_id: u16,
        serial: Option<&str>,
        interface: u8,
    ) -> impl Future<Output = Result<(DeviceInfo, Self::Interface), TransferError>> {
        async move {
            let found = self.list_devices().await?.into_iter().find(|d| {
                d.vendor_id == vendor_id
                    && d.product_id == product_id
                    && serial.is_none_or(|s| d.serial_number.as_deref() == Some(s))
            });
            let info = found.ok_or(TransferError::Disconnected)?;
            let iface = self.open(info.id, interface).await?;
            Ok((info, iface))
        }
    }
}
