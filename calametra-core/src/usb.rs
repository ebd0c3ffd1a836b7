//! The USB vocabulary of the simulator, in one place: `calametra-usb`'s types and the
//! [`UsbInterface`] trait production drivers are generic over (re-exported from that crate),
//! with the simulator's device side ([`Device`], [`DevCtx`], [`Reply`], [`Loopback`], from
//! [`crate::device`]) and the driver's [`Interface`] (from [`crate::interface`]) re-exported
//! beside them, so a model or a scenario imports `calametra_core::usb::*`. Nothing is defined
//! here; nothing inside the crate imports through this module.

pub use crate::device::{DevCtx, Device, Loopback, Reply};
pub use crate::discovery::{SimHost, SimWatch};
pub use crate::interface::Interface;
pub use calametra_usb::{
    Buffer, Completion, ControlIn, ControlOut, ControlType, Descriptors, DeviceId, DeviceInfo,
    Endpoint, EndpointInfo, EndpointKind, HotplugEvent, HotplugWatch, Recipient, Setup,
    TransferError, TransferType, UsbHost, UsbInterface, DIR_IN,
};
