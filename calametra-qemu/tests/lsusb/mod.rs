//! Reading `lsusb -v` back into numbers: the fields lsusb prints for each standard descriptor,
//! taken from the descriptor's bytes, and a check that lsusb shows every one of them, in
//! order, with the device's value. Shared by the QEMU tests that compare a device's bytes with
//! what the guest's lsusb made of them.
#![allow(dead_code)]

/// (field, value) pairs lsusb prints for a standard descriptor, from its bytes (device,
/// configuration, interface, endpoint, BOS with its USB 2.0 Extension and SuperSpeed
/// capabilities, SuperSpeed endpoint companion).
pub fn expected_fields(d: &[u8]) -> Vec<(&'static str, u32)> {
    let w = |i: usize| u16::from_le_bytes([d[i], d[i + 1]]) as u32;
    let b = |i: usize| d[i] as u32;
    match d[1] {
        1 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("bcdUSB", w(2)),
            ("bDeviceClass", b(4)),
            ("bDeviceSubClass", b(5)),
            ("bDeviceProtocol", b(6)),
            ("bMaxPacketSize0", b(7)),
            ("idVendor", w(8)),
            ("idProduct", w(10)),
            ("bcdDevice", w(12)),
            ("iManufacturer", b(14)),
            ("iProduct", b(15)),
            ("iSerial", b(16)),
            ("bNumConfigurations", b(17)),
        ],
        2 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("wTotalLength", w(2)),
            ("bNumInterfaces", b(4)),
            ("bConfigurationValue", b(5)),
            ("iConfiguration", b(6)),
            ("bmAttributes", b(7)),
        ],
        4 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("bInterfaceNumber", b(2)),
            ("bAlternateSetting", b(3)),
            ("bNumEndpoints", b(4)),
            ("bInterfaceClass", b(5)),
            ("bInterfaceSubClass", b(6)),
            ("bInterfaceProtocol", b(7)),
            ("iInterface", b(8)),
        ],
        5 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("bEndpointAddress", b(2)),
            ("bmAttributes", b(3)),
            ("wMaxPacketSize", w(4)),
            ("bInterval", b(6)),
        ],
        // BOS.
        15 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("wTotalLength", w(2)),
            ("bNumDeviceCaps", b(4)),
        ],
        // USB 2.0 Extension.
        16 if d[2] == 2 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("bDevCapabilityType", b(2)),
            ("bmAttributes", u32::from_le_bytes([d[3], d[4], d[5], d[6]])),
        ],
        // SuperSpeed USB Device Capability.
        16 if d[2] == 3 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("bDevCapabilityType", b(2)),
            ("bmAttributes", b(3)),
            ("wSpeedsSupported", w(4)),
            ("bFunctionalitySupport", b(6)),
            ("bU1DevExitLat", b(7)),
            ("bU2DevExitLat", w(8)),
        ],
        // SuperSpeed Endpoint Companion: lsusb prints it inside its endpoint, without its
        // length and type.
        48 => vec![("bMaxBurst", b(2))],
        _ => Vec::new(),
    }
}

/// lsusb's value token as a number: `0x1209`, `2.00` (BCD), `255`.
pub fn lsusb_value(tok: &str) -> Option<u32> {
    if let Some(h) = tok.strip_prefix("0x") {
        return u32::from_str_radix(h, 16).ok();
    }
    if let Some((hi, lo)) = tok.split_once('.') {
        let hi = u32::from_str_radix(hi, 16).ok()?;
        let lo = u32::from_str_radix(lo, 16).ok()?;
        return Some((hi << 8) | lo);
    }
    tok.parse().ok()
}

/// Checks that lsusb's output shows every field of `descriptors` with the same value, in order.
pub fn lsusb_matches(lsusb: &[String], descriptors: &[Vec<u8>]) -> Result<usize, String> {
    let fields: Vec<(String, Option<u32>)> = lsusb
        .iter()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?;
            let value = it.next().and_then(lsusb_value);
            Some((name.to_string(), value))
        })
        .collect();
    let mut at = 0;
    let mut checked = 0;
    for d in descriptors {
        for (name, want) in expected_fields(d) {
            let found = fields[at..].iter().position(|(n, _)| n == name);
            let Some(i) = found else {
                return Err(format!("lsusb never shows {name} (wanted {want:#x})"));
            };
            let got = fields[at + i].1;
            if got != Some(want) {
                return Err(format!(
                    "lsusb shows {name} = {got:?}, the device says {want:#x}"
                ));
            }
            at += i + 1;
            checked += 1;
        }
    }
    Ok(checked)
}

/// Splits a configuration's bytes into its descriptors.
pub fn split(raw: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 2 <= raw.len() && raw[at] >= 2 {
        let end = (at + raw[at] as usize).min(raw.len());
        out.push(raw[at..end].to_vec());
        at = end;
    }
    out
}
