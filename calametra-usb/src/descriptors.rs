//! A device's cached descriptors ([`Descriptors`]: the device descriptor, each configuration's
//! full descriptor set, the strings), as nusb keeps them after opening a device
//! (`Device::device_descriptor`, `Device::configurations`, `DeviceInfo::serial_number`), and
//! the reading a driver does of them: ids, strings, an interface's endpoints.
//! Parsing never panics: a short or malformed descriptor ends the walk.

/// The type of an endpoint as its descriptor's `bmAttributes` says.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum EndpointKind {
    /// Control.
    Control,
    /// Isochronous.
    Isochronous,
    /// Bulk.
    Bulk,
    /// Interrupt.
    Interrupt,
}

/// One endpoint descriptor of an interface's alternate setting.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct EndpointInfo {
    /// `bEndpointAddress` (bit 7: IN).
    pub address: u8,
    /// From `bmAttributes`.
    pub kind: EndpointKind,
    /// `wMaxPacketSize` (packet size bits only).
    pub max_packet_size: u16,
}

/// A device's descriptors, read once (at open on hardware, from the model in a simulation).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Descriptors {
    /// The 18-byte device descriptor.
    pub device: Vec<u8>,
    /// Each configuration's descriptor followed by its interfaces, endpoints and the rest
    /// (`wTotalLength` bytes), in configuration order.
    pub configurations: Vec<Vec<u8>>,
    /// String descriptors by index (language: the device's first).
    pub strings: Vec<(u8, String)>,
}

impl Descriptors {
    fn device_u16(&self, at: usize) -> Option<u16> {
        Some(u16::from_le_bytes([
            *self.device.get(at)?,
            *self.device.get(at + 1)?,
        ]))
    }

    /// `idVendor`.
    pub fn vendor_id(&self) -> Option<u16> {
        self.device_u16(8)
    }

    /// `idProduct`.
    pub fn product_id(&self) -> Option<u16> {
        self.device_u16(10)
    }

    /// The string at `index`, if the device gave one.
    pub fn string(&self, index: u8) -> Option<&str> {
        self.strings
            .iter()
            .find(|(i, _)| *i == index && index != 0)
            .map(|(_, s)| s.as_str())
    }

    /// The serial number string (`iSerialNumber`).
    pub fn serial_number(&self) -> Option<&str> {
        self.string(*self.device.get(16)?)
    }

    /// The product string (`iProduct`).
    pub fn product_string(&self) -> Option<&str> {
        self.string(*self.device.get(15)?)
    }

    /// The maximum packet size of the endpoint at `address` (`bEndpointAddress`, bit 7: IN):
    /// for endpoint 0 (either way) the device descriptor's `bMaxPacketSize0` (an exponent from
    /// `bcdUSB` 3.0 on: 9 is 512), for another the
    /// packet size bits of `wMaxPacketSize` of the first endpoint descriptor with that address
    /// in any configuration; `None` where the descriptors give none (or give 0).
    pub fn max_packet_size(&self, address: u8) -> Option<u16> {
        if address & 0x7f == 0 {
            let b = *self.device.get(7)?;
            let super_speed = self.device_u16(2).is_some_and(|bcd| bcd >= 0x0300);
            let n = match super_speed {
                true => 1u16.checked_shl(u32::from(b)).filter(|&n| n <= 1024)?,
                false => u16::from(b),
            };
            return (n > 0).then_some(n);
        }
        let d = self
            .configurations
            .iter()
            .flat_map(|c| each_descriptor(c))
            .find(|d| d[1] == 5 && d.len() >= 6 && d[2] == address)?;
        let n = u16::from_le_bytes([d[4], d[5]]) & 0x07ff;
        (n > 0).then_some(n)
    }

    /// The endpoints of `interface`'s alternate setting `alt` in the first configuration,
    /// in descriptor order; empty when there is no such setting.
    pub fn endpoints(&self, interface: u8, alt: u8) -> Vec<EndpointInfo> {
        let Some(config) = self.configurations.first() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        let mut inside = false;
        for d in each_descriptor(config) {
            match d[1] {
                4 if d.len() >= 4 => inside = d[2] == interface && d[3] == alt,
                5 if inside && d.len() >= 6 => out.push(EndpointInfo {
                    address: d[2],
                    kind: match d[3] & 3 {
                        0 => EndpointKind::Control,
                        1 => EndpointKind::Isochronous,
                        2 => EndpointKind::Bulk,
                        _ => EndpointKind::Interrupt,
                    },
                    max_packet_size: u16::from_le_bytes([d[4], d[5]]) & 0x07ff,
                }),
                _ => {}
            }
        }
        out
    }
}

/// The descriptors of a configuration's bytes, each whole (`bLength` bytes, at least 2); the
/// walk stops at one whose length is below 2 or runs past the end (a truncated configuration).
fn each_descriptor(config: &[u8]) -> impl Iterator<Item = &[u8]> {
    let mut at = 0usize;
    std::iter::from_fn(move || {
        let len = *config.get(at)? as usize;
        if len < 2 || at + len > config.len() {
            return None;
        }
        let d = &config[at..at + len];
        at += len;
        Some(d)
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A device descriptor, one configuration with two alternate settings, and strings: ids,
    /// serial and each setting's endpoints read; a truncated configuration stops the walk.
    #[test]
    fn descriptors_give_ids_strings_and_an_alt_settings_endpoints() {
        let mut device = vec![
            18, 1, 0, 2, 0, 0, 0, 64, 0x09, 0x12, 0x01, 0x00, 0, 1, 1, 2, 3, 1,
        ];
        device.truncate(18);
        let config = vec![
            9, 2, 39, 0, 1, 1, 0, 0x80, 50, // configuration
            9, 4, 0, 0, 1, 0xff, 0, 0, 0, // interface 0 alt 0
            7, 5, 0x81, 2, 64, 0, 0, // bulk IN
            9, 4, 0, 1, 2, 0xff, 0, 0, 0, // interface 0 alt 1
            7, 5, 0x02, 3, 8, 0, 1, // interrupt OUT
        ];
        let mut d = Descriptors {
            device,
            configurations: vec![config.clone()],
            strings: vec![(2, "Probe".into()), (3, "SN42".into())],
        };
        assert_eq!((d.vendor_id(), d.product_id()), (Some(0x1209), Some(1)));
        assert_eq!(d.serial_number(), Some("SN42"));
        assert_eq!(d.product_string(), Some("Probe"));
        let ep = |address, kind, max_packet_size| EndpointInfo {
            address,
            kind,
            max_packet_size,
        };
        assert_eq!(d.endpoints(0, 0), [ep(0x81, EndpointKind::Bulk, 64)]);
        assert_eq!(d.endpoints(0, 1), [ep(0x02, EndpointKind::Interrupt, 8)]);
        assert!(d.endpoints(1, 0).is_empty());
        assert_eq!(d.max_packet_size(0), Some(64));
        assert_eq!(d.max_packet_size(0x80), Some(64));
        assert_eq!(d.max_packet_size(0x81), Some(64));
        assert_eq!(d.max_packet_size(0x02), Some(8));
        assert_eq!(d.max_packet_size(0x03), None);
        // From USB 3.0 on, bMaxPacketSize0 is an exponent.
        let mut ss = d.clone();
        ss.device[2..4].copy_from_slice(&[0x10, 0x03]);
        ss.device[7] = 9;
        assert_eq!(ss.max_packet_size(0), Some(512));
        d.configurations = vec![config[..30].to_vec()];
        assert_eq!(d.endpoints(0, 0), [ep(0x81, EndpointKind::Bulk, 64)]);
        d.device.truncate(9);
        assert_eq!((d.product_id(), d.serial_number()), (None, None));
    }
}
