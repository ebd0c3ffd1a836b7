//! The chapter 9 half of the small class models (`hid`, `cdc_acm`): a fixed descriptor set
//! read from the spec's exact bytes (`usb.device`, `usb.configuration`, `usb.strings`) and the
//! standard requests a Linux host enumerates such a device with, answered from it.
//!
//! What lives here is only what every one of those models answers alike: descriptors,
//! addresses, the configuration, interface and endpoint status, halts. Class requests and
//! endpoints stay in each model's folder. A standard request the spec gives no evidence for is
//! a model gap (and a stall); what chapter 9 itself settles is a plain stall
//! ([`crate::chapter9::absent_descriptor`]).

use crate::chapter9::{
    self, string_descriptor, CLEAR_FEATURE, GET_CONFIGURATION, GET_DESCRIPTOR, GET_INTERFACE,
    GET_STATUS, SET_ADDRESS, SET_CONFIGURATION, SET_FEATURE, SET_INTERFACE,
};
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Reply, Setup};
use std::collections::BTreeMap;

/// A device's descriptor set and its chapter 9 state.
#[derive(Clone, Debug)]
pub struct StandardDevice {
    /// The device descriptor (18 bytes).
    pub device: Vec<u8>,
    /// The configuration descriptor with everything under it (one configuration, value 1).
    pub configuration: Vec<u8>,
    /// String descriptors by index (1..), as text.
    pub strings: BTreeMap<u8, String>,
    /// Interface numbers of the configuration.
    interfaces: Vec<u8>,
    /// Endpoint addresses of the configuration (`0x81`, `0x02`...).
    endpoints: Vec<u8>,
    /// The address SET_ADDRESS gave.
    pub address: u8,
    /// The configuration selected (0: none).
    pub configuration_value: u8,
    /// Endpoints halted by SET_FEATURE(ENDPOINT_HALT) and not cleared.
    halted: Vec<u8>,
    /// Endpoints a host cleared a halt on (CLEAR_FEATURE(ENDPOINT_HALT)), in order: a host's
    /// recovery from a stalled transfer, for scenarios to read.
    pub cleared: Vec<u8>,
}

impl StandardDevice {
    /// The descriptor set of `spec` (`usb.device`: 18 bytes, `usb.configuration`: its own
    /// wTotalLength, `usb.strings`: index to text), checked; errors name the field.
    pub fn from_spec(spec: &Spec) -> Result<StandardDevice, calametra_core::Error> {
        let device = spec.hex("usb.device", Some(18))?;
        if device[0] != 18 || device[1] != 1 {
            return Err(spec.error("usb.device", "expected bLength 18 and bDescriptorType 1"));
        }
        let configuration = spec.hex("usb.configuration", None)?;
        let total = configuration
            .get(2..4)
            .map(|b| usize::from(u16::from_le_bytes([b[0], b[1]])));
        if configuration.get(1) != Some(&2) || total != Some(configuration.len()) {
            return Err(spec.error(
                "usb.configuration",
                format!(
                    "expected a configuration descriptor (type 2) whose wTotalLength is its {} bytes",
                    configuration.len()
                ),
            ));
        }
        let (mut interfaces, mut endpoints) = (Vec::new(), Vec::new());
        let mut at = 0;
        while at < configuration.len() {
            let len = usize::from(configuration[at]);
            if len < 2 || at + len > configuration.len() {
                return Err(spec.error(
                    "usb.configuration",
                    format!("a descriptor at byte {at} has bLength {len}, past the end or below 2"),
                ));
            }
            match configuration[at + 1] {
                4 if len >= 9 => interfaces.push(configuration[at + 2]),
                5 if len >= 7 => endpoints.push(configuration[at + 2]),
                _ => {}
            }
            at += len;
        }
        let mut strings = BTreeMap::new();
        if let Ok(v) = spec.at("usb.strings") {
            let map = v
                .as_object()
                .ok_or_else(|| spec.error("usb.strings", "expected an object of index to text"))?;
            for (k, text) in map {
                let field = format!("usb.strings.{k}");
                let i: u8 =
                    k.parse().ok().filter(|i| *i > 0).ok_or_else(|| {
                        spec.error(&field, "expected an index 1..=255 as the key")
                    })?;
                let text = text
                    .as_str()
                    .ok_or_else(|| spec.error(&field, "expected a string"))?;
                strings.insert(i, text.to_string());
            }
        }
        Ok(StandardDevice {
            device,
            configuration,
            strings,
            interfaces,
            endpoints,
            address: 0,
            configuration_value: 0,
            halted: Vec::new(),
            cleared: Vec::new(),
        })
    }

    /// Vendor and product id from the device descriptor.
    pub fn vid_pid(&self) -> (u16, u16) {
        (
            u16::from_le_bytes([self.device[8], self.device[9]]),
            u16::from_le_bytes([self.device[10], self.device[11]]),
        )
    }

    /// Whether endpoint `ep` is halted (its transfers stall until a host clears it).
    pub fn halted(&self, ep: u8) -> bool {
        self.halted.contains(&ep)
    }

    /// A USB reset: address 0, unconfigured, no halts.
    pub fn reset(&mut self) {
        self.address = 0;
        self.configuration_value = 0;
        self.halted.clear();
    }

    /// A standard request (type bits 0), answered for a device in `state` (the model's state
    /// name, for a model gap). `class_descriptor` answers a GET_DESCRIPTOR of a class type
    /// (`(type, index, interface)`), `None` when the model has none.
    pub fn standard(
        &mut self,
        cx: &mut DevCtx<'_>,
        setup: &Setup,
        state: &str,
        class_descriptor: impl Fn(u8, u8, u16) -> Option<Vec<u8>>,
    ) -> Reply {
        let has_iface = |i: u16| self.interfaces.iter().any(|n| u16::from(*n) == i);
        let has_ep = |e: u16| e & 0x7f == 0 || self.endpoints.iter().any(|n| u16::from(*n) == e);
        match (setup.request_type, setup.request) {
            (0x80 | 0x81, GET_DESCRIPTOR) => {
                let (ty, index) = ((setup.value >> 8) as u8, setup.value as u8);
                let bytes = match (ty, index) {
                    (1, 0) => self.device.clone(),
                    (2, 0) => self.configuration.clone(),
                    (3, 0) => vec![4, 3, 0x09, 0x04],
                    (3, i) => match self.strings.get(&i) {
                        Some(t) => string_descriptor(t),
                        None => return Reply::Stall,
                    },
                    // USB 2.0 §9.6.2: a high-speed device that works only at high speed has
                    // no other speed; the qualifier and other-speed configuration stall.
                    // bcdUSB 0x0200: no BOS.
                    (2 | 6 | 7 | 0x0f, _) => return Reply::Stall,
                    (ty, _) if chapter9::absent_descriptor(ty).is_some() => return Reply::Stall,
                    (ty, index) => match class_descriptor(ty, index, setup.index) {
                        Some(b) => b,
                        None => {
                            cx.model_gap(
                                &format!(
                                    "get_descriptor type {ty:#04x} index {index} wIndex {:#06x}",
                                    setup.index
                                ),
                                state,
                            );
                            return Reply::Stall;
                        }
                    },
                };
                let mut bytes = bytes;
                bytes.truncate(usize::from(setup.length));
                Reply::Data(bytes)
            }
            (0x00, SET_ADDRESS) if setup.value <= 127 => {
                self.address = setup.value as u8;
                Reply::Ack
            }
            (0x80, GET_CONFIGURATION) => Reply::Data(vec![self.configuration_value]),
            (0x00, SET_CONFIGURATION) if setup.value <= 1 => {
                self.configuration_value = setup.value as u8;
                self.halted.clear();
                Reply::Ack
            }
            // USB 2.0 §9.4.7: any other configuration value is a request error.
            (0x00, SET_CONFIGURATION) => Reply::Stall,
            (0x81, GET_INTERFACE) if has_iface(setup.index) => Reply::Data(vec![0]),
            (0x01, SET_INTERFACE) if has_iface(setup.index) && setup.value == 0 => Reply::Ack,
            // One alternate setting each (USB 2.0 §9.4.10).
            (0x01, SET_INTERFACE) if has_iface(setup.index) => Reply::Stall,
            // Bus-powered, no remote wakeup.
            (0x80, GET_STATUS) => Reply::Data(vec![0, 0]),
            (0x81, GET_STATUS) if has_iface(setup.index) => Reply::Data(vec![0, 0]),
            (0x82, GET_STATUS) if has_ep(setup.index) => {
                let ep = setup.index as u8;
                Reply::Data(vec![u8::from(self.halted(ep)), 0])
            }
            (0x02, CLEAR_FEATURE) if setup.value == 0 && has_ep(setup.index) => {
                let ep = setup.index as u8;
                self.halted.retain(|e| *e != ep);
                if ep & 0x7f != 0 {
                    self.cleared.push(ep);
                }
                Reply::Ack
            }
            (0x02, SET_FEATURE) if setup.value == 0 && has_ep(setup.index) => {
                let ep = setup.index as u8;
                if ep & 0x7f != 0 && !self.halted(ep) {
                    self.halted.push(ep);
                }
                Reply::Ack
            }
            // DEVICE_REMOTE_WAKEUP on a device whose configuration does not offer it.
            (0x00, CLEAR_FEATURE | SET_FEATURE) if setup.value == 1 => Reply::Stall,
            _ => chapter9::standard_gap(cx, setup, state),
        }
    }
}
