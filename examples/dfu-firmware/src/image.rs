//! The firmware image: usb-device's `UsbDevice` with usbd-dfu's `DFUClass` over the in-memory
//! [`flash`](crate::flash), and a main loop that polls them. This is the code a usbd-dfu
//! bootloader runs on a microcontroller, with [`SimBus`] in place of the chip's USB peripheral.
//!
//! What the simulator observes of it (see `calametra_models::firmware`): usb-device's state, the
//! DFU state the firmware announces in its DFU_GETSTATUS and DFU_GETSTATE answers, and the DFU
//! state read after every event by a DFU_GETSTATE probe (usbd-dfu answers it in every state
//! without changing anything). DFU states and class requests carry the DFU model's names
//! (`dfu.dnload_sync->dnbusy`, `ctrl.dnload#3`), so a fault plan means the same thing on both.

use crate::flash::{Flash, FlashMem};
use calametra_core::usb::{ControlType, Recipient, Setup};
use calametra_models::dfu::{Request, State};
use calametra_models::firmware::{Firmware, FirmwareDevice, SimBus, StateProbe};
use std::cell::RefCell;
use std::rc::Rc;
use usb_device::device::{
    StringDescriptors, UsbDevice, UsbDeviceBuilder, UsbDeviceState, UsbVidPid,
};
use usb_device::LangID;
use usbd_dfu::DFUClass;

/// pid.codes' open-source vendor ID and its test product ID.
pub const VID_PID: (u16, u16) = (0x1209, 0x0001);
/// iManufacturer.
pub const MANUFACTURER: &str = "Calametra";
/// iProduct.
pub const PRODUCT: &str = "Calametra usbd-dfu firmware";
/// iSerialNumber.
pub const SERIAL: &str = "CALAMETRA-FW-0001";

/// The simulated device: the firmware on the simulated bus.
pub type DfuFirmwareDevice = FirmwareDevice<DfuFirmware>;

/// The firmware: usb-device and usbd-dfu, unmodified.
pub struct DfuFirmware {
    usb: UsbDevice<'static, SimBus>,
    dfu: DFUClass<SimBus, FlashMem>,
    flash: Rc<RefCell<Flash>>,
}

impl DfuFirmware {
    /// The flash, as the firmware left it.
    pub fn flash(&self) -> std::cell::Ref<'_, Flash> {
        self.flash.borrow()
    }
}

/// DFU_GETSTATE to interface 0.
const GETSTATE: Setup = Setup {
    request_type: 0xa1,
    request: 5,
    value: 0,
    index: 0,
    length: 1,
};

fn state_name(code: u8) -> Option<&'static str> {
    State::from_code(code).map(State::name)
}

const PROBES: [StateProbe; 1] = [StateProbe {
    machine: "dfu",
    setup: GETSTATE,
    decode: |d| d.first().and_then(|&b| state_name(b)),
}];

fn is_dfu_request(setup: &Setup) -> bool {
    setup.control_type() == Some(ControlType::Class)
        && setup.recipient() == Recipient::Interface
        && setup.index == 0
}

impl Firmware for DfuFirmware {
    fn poll(&mut self) {
        self.usb.poll(&mut [&mut self.dfu]);
    }

    fn usb_state(&self) -> UsbDeviceState {
        self.usb.state()
    }

    fn name(&self) -> &str {
        "usbd-dfu"
    }

    fn request_name(&self, setup: &Setup) -> Option<&'static str> {
        if !is_dfu_request(setup) {
            return None;
        }
        Request::decode(setup.request, setup.is_in()).site_name()
    }

    fn probes(&self) -> &[StateProbe] {
        &PROBES
    }

    fn reply_state(&self, setup: &Setup, data: &[u8]) -> Option<(&'static str, &'static str)> {
        if !is_dfu_request(setup) {
            return None;
        }
        let code = match (Request::decode(setup.request, setup.is_in()), data) {
            (Request::GetStatus, [_, _, _, _, state, _]) => *state,
            (Request::GetState, [state]) => *state,
            _ => return None,
        };
        state_name(code).map(|s| ("dfu", s))
    }
}

/// Builds the firmware on `alloc` with its flash in `flash`.
pub fn build(
    alloc: &'static calametra_models::firmware::Allocator,
    flash: Rc<RefCell<Flash>>,
) -> DfuFirmware {
    let dfu = DFUClass::new(alloc, FlashMem::new(flash.clone()));
    let usb = UsbDeviceBuilder::new(alloc, UsbVidPid(VID_PID.0, VID_PID.1))
        .strings(&[StringDescriptors::new(LangID::EN_US)
            .manufacturer(MANUFACTURER)
            .product(PRODUCT)
            .serial_number(SERIAL)])
        .expect("one language")
        .max_packet_size_0(64)
        .expect("64 is a valid endpoint 0 size")
        .build();
    DfuFirmware { usb, dfu, flash }
}

/// The usbd-dfu firmware as a device on the simulated bus, booted with an erased flash.
pub fn firmware_device() -> DfuFirmwareDevice {
    // Every (re)build starts from power-on: an erased flash of its own.
    FirmwareDevice::new(|alloc| build(alloc, Rc::new(RefCell::new(Flash::default()))))
}
