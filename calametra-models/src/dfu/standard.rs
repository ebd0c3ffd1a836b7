//! Chapter 9 (standard) requests of the DFU model, answered from the spec's exact bytes: the
//! descriptor set follows the mode (run-time in appIDLE/appDETACH, DFU mode otherwise).
//!
//! Standard requests never change the DFU state. A request the spec gives no evidence for is a
//! model gap (and a stall); requests USB 2.0 tells a full-speed device to refuse (the device
//! qualifier, a descriptor type the spec's descriptor set lacks, remote wakeup on a device
//! without it) are plain stalls, each with its clause.

use super::device::Dfu;
use super::spec::DFU_FUNCTIONAL;
use crate::chapter9::{
    self, string_descriptor, CLEAR_FEATURE, GET_CONFIGURATION, GET_DESCRIPTOR, GET_INTERFACE,
    GET_STATUS, SET_ADDRESS, SET_CONFIGURATION, SET_FEATURE, SET_INTERFACE,
};
use calametra_core::usb::{DevCtx, Reply, Setup};

impl Dfu {
    /// A standard request.
    pub(super) fn standard(&mut self, cx: &mut DevCtx<'_>, setup: &Setup) -> Reply {
        let iface = self.spec.interface as u16;
        match (setup.request_type, setup.request) {
            (0x80 | 0x81, GET_DESCRIPTOR) => self.get_descriptor(cx, setup),
            (0x00, SET_ADDRESS) if setup.value <= 127 && setup.index == 0 => {
                self.address = setup.value as u8;
                Reply::Ack
            }
            (0x80, GET_CONFIGURATION) => Reply::Data(vec![self.configuration]),
            (0x00, SET_CONFIGURATION) if setup.value <= 1 => {
                self.configuration = setup.value as u8;
                Reply::Ack
            }
            // USB 2.0 9.4.7: any other configuration value is a request error.
            (0x00, SET_CONFIGURATION) => Reply::Stall,
            (0x81, GET_INTERFACE) if setup.index == iface => Reply::Data(vec![0]),
            (0x01, SET_INTERFACE) if setup.index == iface && setup.value == 0 => Reply::Ack,
            // One alternate setting: any other is a request error (USB 2.0 9.4.10).
            (0x01, SET_INTERFACE) if setup.index == iface => Reply::Stall,
            // Bus-powered, no remote wakeup: every status word is zero.
            (0x80, GET_STATUS) => Reply::Data(vec![0, 0]),
            (0x81, GET_STATUS) if setup.index == iface => Reply::Data(vec![0, 0]),
            (0x82, GET_STATUS) if setup.index & 0x7f == 0 => Reply::Data(vec![0, 0]),
            // ENDPOINT_HALT on the default pipe: nothing to clear or set.
            (0x02, CLEAR_FEATURE | SET_FEATURE) if setup.value == 0 && setup.index & 0x7f == 0 => {
                Reply::Ack
            }
            // DEVICE_REMOTE_WAKEUP on a device whose configuration does not offer it.
            (0x00, CLEAR_FEATURE | SET_FEATURE) if setup.value == 1 => Reply::Stall,
            _ => chapter9::standard_gap(cx, setup, self.state().spec_name()),
        }
    }

    fn get_descriptor(&mut self, cx: &mut DevCtx<'_>, setup: &Setup) -> Reply {
        let (ty, index) = ((setup.value >> 8) as u8, setup.value as u8);
        let set = self.descriptors();
        let bytes = match (ty, index) {
            (1, 0) => set.device.clone(),
            (2, 0) => set.configuration.clone(),
            (2, _) => return Reply::Stall, // one configuration
            (3, 0) => {
                let ids = &self.spec.language_ids;
                let mut v = vec![(ids.len() + 2) as u8, 3];
                v.extend_from_slice(ids);
                v
            }
            (3, i) => match self.spec.strings.get(&i) {
                Some(text) => string_descriptor(text),
                None => return Reply::Stall,
            },
            // DFU 1.1 4.1.3/4.2.4: the functional descriptor may be read on its own.
            (DFU_FUNCTIONAL, 0) => set.functional.clone(),
            // USB 2.0 §9.6.2: a full-speed-only device (bcdUSB 0x0200) answers GetDescriptor()
            // for a device_qualifier with a Request Error; without one the host must not ask
            // for an other_speed_configuration (§9.6.4), and a device that has none stalls it.
            (6 | 7, _) => return Reply::Stall,
            // bcdUSB 0x0200: no BOS descriptor (it needs 0x0201 or later).
            (0x0f, _) => return Reply::Stall,
            // The other standard types this descriptor set lacks (the debug descriptor `lsusb -v`
            // asks for, interface, endpoint...): a Request Error by USB 2.0 §9.4.3.
            (ty, _) if chapter9::absent_descriptor(ty).is_some() => return Reply::Stall,
            _ => {
                cx.model_gap(
                    &format!("get_descriptor type {ty:#04x} index {index}"),
                    self.state().spec_name(),
                );
                return Reply::Stall;
            }
        };
        let mut bytes = bytes;
        bytes.truncate(setup.length as usize);
        Reply::Data(bytes)
    }
}
