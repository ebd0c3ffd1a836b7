//! Which device of a capture `learn` learns: the only one, the one at a bus and address, or the
//! one whose device descriptor carries a vendor and product id. An error lists every device
//! the capture shows (bus, address, ids when a device descriptor was captured, transfer counts).

use crate::{Capture, ControlTransfer, Status};
use calametra_core::error::Error;
use std::collections::BTreeMap;
use std::fmt::Write;

/// Which device of each capture to learn.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Selection {
    /// The capture's only device (an error when it has none or several).
    Only,
    /// The device at this bus and address.
    Address {
        /// Bus number.
        bus: u16,
        /// Device address.
        address: u8,
    },
    /// The device whose device descriptor has these ids.
    Id {
        /// idVendor.
        vendor: u16,
        /// idProduct.
        product: u16,
    },
}

impl Selection {
    /// Parses `BUS.ADDR` (or `BUS:ADDR`), decimal.
    pub fn parse_device(s: &str) -> Result<Selection, String> {
        let (b, a) = s
            .split_once(['.', ':'])
            .ok_or_else(|| format!("`{s}`: expected BUS.ADDR (decimal, `6.25`)"))?;
        let bus = b
            .parse()
            .map_err(|_| format!("`{s}`: the bus `{b}` is not a decimal number up to 65535"))?;
        let address: u8 = a
            .parse()
            .map_err(|_| format!("`{s}`: the address `{a}` is not a decimal number up to 255"))?;
        Ok(Selection::Address { bus, address })
    }

    /// Parses `VID:PID`, four hex digits each (`0711:5601`).
    pub fn parse_id(s: &str) -> Result<Selection, String> {
        let hex16 = |t: &str| {
            let t = t.trim_start_matches("0x");
            (!t.is_empty() && t.len() <= 4)
                .then(|| u16::from_str_radix(t, 16).ok())
                .flatten()
        };
        match s.split_once(':').map(|(v, p)| (hex16(v), hex16(p))) {
            Some((Some(vendor), Some(product))) => Ok(Selection::Id { vendor, product }),
            _ => Err(format!(
                "`{s}`: expected VID:PID, up to four hex digits each (`0711:5601`)"
            )),
        }
    }
}

/// The vendor and product id in the first device descriptor a capture shows for each device.
pub(crate) fn ids(control: &[ControlTransfer]) -> BTreeMap<(u16, u8), (u16, u16)> {
    let mut out = BTreeMap::new();
    for t in control {
        let s = &t.setup;
        if s.request_type == 0x80 && s.request == 6 && s.value >> 8 == 1 && t.status == Status::Ok {
            if let (Some(v), Some(p)) = (t.data.get(8..10), t.data.get(10..12)) {
                out.entry((t.bus, t.device)).or_insert((
                    u16::from_le_bytes([v[0], v[1]]),
                    u16::from_le_bytes([p[0], p[1]]),
                ));
            }
        }
    }
    out
}

/// The devices a capture shows, one a line, for messages.
pub(crate) fn listing(capture: &Capture, control: &[ControlTransfer]) -> String {
    let ids = ids(control);
    let devices = capture.devices();
    if devices.is_empty() {
        return "it shows no device (no transfer was submitted)".into();
    }
    let mut s = String::from("the devices it shows:");
    for d in devices {
        let id = ids
            .get(&(d.bus, d.device))
            .map_or("id unknown".to_string(), |(v, p)| {
                format!("{v:04x}:{p:04x}")
            });
        let _ = write!(
            s,
            "\n  --device {}.{}  ({id}): {} control and {} other transfers submitted",
            d.bus, d.device, d.control, d.other
        );
    }
    s
}

/// The `(bus, address)` `selection` picks in `capture`.
pub(crate) fn select(
    capture: &Capture,
    control: &[ControlTransfer],
    selection: &Selection,
) -> Result<(u16, u8), Error> {
    let err = |message: String| Error::File {
        path: capture.path.clone(),
        field: "(devices)".into(),
        message,
    };
    let devices = capture.devices();
    let list = || listing(capture, control);
    match *selection {
        Selection::Only => match devices.as_slice() {
            [] => Err(err(format!(
                "the capture shows no device: nothing to learn ({} usbmon events)",
                capture.events.len()
            ))),
            [d] => Ok((d.bus, d.device)),
            _ => Err(err(format!(
                "the capture shows {} devices; choose one with --device BUS.ADDR or --id \
                 VID:PID; {}",
                devices.len(),
                list()
            ))),
        },
        Selection::Address { bus, address } => {
            if devices.iter().any(|d| (d.bus, d.device) == (bus, address)) {
                Ok((bus, address))
            } else {
                Err(err(format!(
                    "no transfer of bus {bus} device {address} is in the capture; {}",
                    list()
                )))
            }
        }
        Selection::Id { vendor, product } => {
            let found: Vec<(u16, u8)> = ids(control)
                .into_iter()
                .filter(|(_, id)| *id == (vendor, product))
                .map(|(k, _)| k)
                .collect();
            match found.as_slice() {
                [one] => Ok(*one),
                [] => Err(err(format!(
                    "no device descriptor in the capture has id {vendor:04x}:{product:04x} (a \
                     capture started after enumeration shows none: choose by --device); {}",
                    list()
                ))),
                _ => Err(err(format!(
                    "{} devices have id {vendor:04x}:{product:04x}; choose one with --device \
                     BUS.ADDR; {}",
                    found.len(),
                    list()
                ))),
            }
        }
    }
}
