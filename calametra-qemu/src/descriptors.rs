//! Reading a model's standard descriptors: the device descriptor and each configuration with its
//! interfaces, alternate settings and endpoints, as the bridge needs them for `ep_info`,
//! `interface_info` and `device_connect`. Parsing is bounds-checked: a model's malformed bytes
//! give an error naming the offset, never a panic.

use crate::proto::{ep_index, ep_type, speed, DeviceConnect, EpInfo, InterfaceInfo};

/// One endpoint descriptor.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// `bEndpointAddress`.
    pub address: u8,
    /// Transfer type (`bmAttributes & 3`: 0 control, 1 iso, 2 bulk, 3 interrupt).
    pub transfer: u8,
    /// Max packet size in bytes (with high-bandwidth multiplier applied).
    pub max_packet: u16,
    /// `bInterval`.
    pub interval: u8,
}

/// One interface descriptor (one alternate setting) and its endpoints.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AltSetting {
    /// `bInterfaceNumber`.
    pub number: u8,
    /// `bAlternateSetting`.
    pub alt: u8,
    /// `bInterfaceClass`.
    pub class: u8,
    /// `bInterfaceSubClass`.
    pub subclass: u8,
    /// `bInterfaceProtocol`.
    pub protocol: u8,
    /// Its endpoints.
    pub endpoints: Vec<Endpoint>,
}

/// One configuration: its raw bytes and parsed interfaces.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Configuration {
    /// `bConfigurationValue`.
    pub value: u8,
    /// Every interface descriptor, in order.
    pub alts: Vec<AltSetting>,
    /// The bytes the model returned (`wTotalLength` of them).
    pub raw: Vec<u8>,
}

/// The device descriptor's fields the bridge uses, and every configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The 18 bytes of the device descriptor.
    pub device: Vec<u8>,
    /// Configurations by index.
    pub configs: Vec<Configuration>,
}

impl DeviceInfo {
    /// `bcdUSB`.
    pub fn bcd_usb(&self) -> u16 {
        u16::from_le_bytes([self.device[2], self.device[3]])
    }
    /// `bMaxPacketSize0`.
    pub fn max_packet0(&self) -> u8 {
        self.device[7]
    }
    /// `idVendor`.
    pub fn vendor_id(&self) -> u16 {
        u16::from_le_bytes([self.device[8], self.device[9]])
    }
    /// `idProduct`.
    pub fn product_id(&self) -> u16 {
        u16::from_le_bytes([self.device[10], self.device[11]])
    }
    /// `bcdDevice`.
    pub fn bcd_device(&self) -> u16 {
        u16::from_le_bytes([self.device[12], self.device[13]])
    }

    /// The speed the bridge announces when none is configured: SuperSpeed for USB 3 devices
    /// whose `bMaxPacketSize0` is the SuperSpeed exponent 9 (512 bytes), high speed for USB 2.0
    /// devices whose endpoint 0 takes 64 bytes, else full speed.
    pub fn default_speed(&self) -> u8 {
        if self.bcd_usb() >= 0x0300 && self.max_packet0() == 9 {
            speed::SUPER
        } else if self.bcd_usb() >= 0x0200 && self.max_packet0() == 64 {
            speed::HIGH
        } else {
            speed::FULL
        }
    }

    /// The `device_connect` packet for this device.
    pub fn connect(&self, speed: u8) -> DeviceConnect {
        DeviceConnect {
            speed,
            class: self.device[4],
            subclass: self.device[5],
            protocol: self.device[6],
            vendor_id: self.vendor_id(),
            product_id: self.product_id(),
            device_version_bcd: self.bcd_device(),
        }
    }

    /// The configuration with `bConfigurationValue` = `value`.
    pub fn config(&self, value: u8) -> Option<&Configuration> {
        self.configs.iter().find(|c| c.value == value)
    }

    /// `ep_info` and `interface_info` for configuration `value` (0: unconfigured, endpoint 0
    /// only) with the alternate setting `alt_of(interface)` of each interface.
    pub fn tables(&self, value: u8, alt_of: impl Fn(u8) -> u8) -> (EpInfo, InterfaceInfo) {
        let mut ep = EpInfo::default();
        for addr in [0x00, 0x80] {
            let i = ep_index(addr);
            ep.ty[i] = ep_type::CONTROL;
            ep.max_packet_size[i] = self.max_packet0() as u16;
        }
        let mut ifs = InterfaceInfo::default();
        let Some(cfg) = self.config(value) else {
            return (ep, ifs);
        };
        for a in &cfg.alts {
            if a.alt != alt_of(a.number) {
                continue;
            }
            let n = ifs.count as usize;
            if n < 32 && !ifs.interface[..n].contains(&a.number) {
                ifs.interface[n] = a.number;
                ifs.class[n] = a.class;
                ifs.subclass[n] = a.subclass;
                ifs.protocol[n] = a.protocol;
                ifs.count += 1;
            }
            for e in &a.endpoints {
                let i = ep_index(e.address);
                if i == 0 || i == 16 {
                    continue;
                }
                ep.ty[i] = e.transfer;
                // QEMU refuses an interrupt or iso endpoint whose interval is 0.
                ep.interval[i] = if e.transfer == ep_type::INTERRUPT || e.transfer == ep_type::ISO {
                    e.interval.max(1)
                } else {
                    e.interval
                };
                ep.interface[i] = a.number;
                ep.max_packet_size[i] = e.max_packet;
            }
        }
        (ep, ifs)
    }
}

/// Checks a device descriptor.
pub fn parse_device(bytes: &[u8]) -> Result<Vec<u8>, String> {
    if bytes.len() < 18 {
        return Err(format!(
            "device descriptor: expected 18 bytes, the model returned {}",
            bytes.len()
        ));
    }
    if bytes[0] < 18 || bytes[1] != 1 {
        return Err(format!(
            "device descriptor: expected bLength 18 and bDescriptorType 1, found {} and {}",
            bytes[0], bytes[1]
        ));
    }
    Ok(bytes[..18].to_vec())
}

/// Parses a whole configuration descriptor (`wTotalLength` bytes).
pub fn parse_config(raw: &[u8]) -> Result<Configuration, String> {
    if raw.len() < 9 || raw[1] != 2 {
        return Err(format!(
            "configuration descriptor: expected at least 9 bytes of type 2, found {} bytes",
            raw.len()
        ));
    }
    let mut cfg = Configuration {
        value: raw[5],
        alts: Vec::new(),
        raw: raw.to_vec(),
    };
    let mut at = 0usize;
    while at + 2 <= raw.len() {
        let len = raw[at] as usize;
        let ty = raw[at + 1];
        if len < 2 || at + len > raw.len() {
            return Err(format!(
                "configuration {}: descriptor at offset {at} has bLength {len}, which does not fit the {} bytes",
                cfg.value,
                raw.len()
            ));
        }
        let d = &raw[at..at + len];
        match ty {
            4 if len >= 9 => cfg.alts.push(AltSetting {
                number: d[2],
                alt: d[3],
                class: d[5],
                subclass: d[6],
                protocol: d[7],
                endpoints: Vec::new(),
            }),
            5 if len >= 7 => {
                let w = u16::from_le_bytes([d[4], d[5]]);
                let e = Endpoint {
                    address: d[2],
                    transfer: d[3] & 3,
                    max_packet: (w & 0x7ff).saturating_mul(1 + ((w >> 11) & 3)),
                    interval: d[6],
                };
                match cfg.alts.last_mut() {
                    Some(a) => a.endpoints.push(e),
                    None => {
                        return Err(format!(
                        "configuration {}: endpoint {:#04x} at offset {at} before any interface",
                        cfg.value, e.address
                    ))
                    }
                }
            }
            _ => {}
        }
        at += len;
    }
    Ok(cfg)
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEV: [u8; 18] = [
        18, 1, 0, 2, 0, 0, 0, 64, 0x34, 0x12, 0x78, 0x56, 0x00, 0x01, 1, 2, 0, 1,
    ];
    const CFG: [u8; 32] = [
        9, 2, 32, 0, 1, 1, 0, 0x80, 50, // configuration 1
        9, 4, 0, 0, 2, 0xff, 0, 0, 0, // interface 0
        7, 5, 0x81, 2, 0, 2, 0, // bulk IN 512
        7, 5, 0x82, 3, 8, 0, 4, // interrupt IN 8, interval 4
    ];

    #[test]
    fn tables_follow_the_configuration() {
        let info = DeviceInfo {
            device: parse_device(&DEV).unwrap(),
            configs: vec![parse_config(&CFG).unwrap()],
        };
        assert_eq!(info.vendor_id(), 0x1234);
        assert_eq!(info.default_speed(), speed::HIGH);
        let (ep, ifs) = info.tables(0, |_| 0);
        assert_eq!(ifs.count, 0);
        assert_eq!(ep.ty[0], ep_type::CONTROL);
        assert_eq!(ep.ty[17], ep_type::INVALID);
        let (ep, ifs) = info.tables(1, |_| 0);
        assert_eq!(ifs.count, 1);
        assert_eq!(ifs.class[0], 0xff);
        assert_eq!(ep.ty[17], ep_type::BULK);
        assert_eq!(ep.max_packet_size[17], 512);
        assert_eq!(ep.ty[18], ep_type::INTERRUPT);
        assert_eq!(ep.interval[18], 4);
    }

    #[test]
    fn a_usb3_device_with_a_512_byte_ep0_is_superspeed() {
        // The Trigger 6's device descriptor: bcdUSB 0x0310, bMaxPacketSize0 9.
        let mut d = DEV;
        (d[2], d[3], d[7]) = (0x10, 0x03, 9);
        let ss = DeviceInfo {
            device: parse_device(&d).unwrap(),
            configs: Vec::new(),
        };
        assert_eq!(ss.default_speed(), speed::SUPER);
        d[7] = 64; // a USB 3 device seen over a USB 2 port
        let hs = DeviceInfo {
            device: parse_device(&d).unwrap(),
            configs: Vec::new(),
        };
        assert_eq!(hs.default_speed(), speed::HIGH);
    }

    #[test]
    fn malformed_descriptors_are_errors() {
        assert!(parse_device(&DEV[..10]).is_err());
        let mut bad = CFG;
        bad[9] = 0;
        assert!(parse_config(&bad).unwrap_err().contains("offset 9"));
        assert!(parse_config(&[9, 2]).is_err());
        let mut e = CFG.to_vec();
        e.drain(9..18);
        assert!(parse_config(&e)
            .unwrap_err()
            .contains("before any interface"));
    }
}
