//! The binary usbmon packet inside pcap and pcapng records: link type 189
//! (`LINKTYPE_USB_LINUX`, the 48-byte legacy header) and 220 (`LINKTYPE_USB_LINUX_MMAPPED`, the
//! 64-byte header, then isochronous descriptors, then data).
//!
//! Header fields are in the byte order of the file (the pcap magic or the pcapng section); the
//! setup packet is always in USB wire order. Layout: Linux `Documentation/usb/usbmon.rst`,
//! libpcap `pcap/usb.h` (summarised in the project's `refdata/usbmon.md`); the field offsets
//! are `calametra_usb::usbmon::layout`, the one definition the recorder writes with too.

use super::{EventKind, Order, XferType};
use crate::Event;
use calametra_core::usb::Setup;
use calametra_usb::usbmon::layout as l;

/// `LINKTYPE_USB_LINUX`: the 48-byte header.
pub const LINKTYPE_USB_LINUX: u32 = 189;
/// `LINKTYPE_USB_LINUX_MMAPPED`: the 64-byte header.
pub const LINKTYPE_USB_LINUX_MMAPPED: u32 =
    calametra_usb::usbmon::LINKTYPE_USB_LINUX_MMAPPED as u32;
/// `LINKTYPE_USBPCAP` (Windows USBPcap): named in errors, not read.
pub const LINKTYPE_USBPCAP: u32 = 249;

/// Size of one isochronous descriptor after a link-type-220 header.
const ISO_DESC: usize = 16;

/// The header length for a supported link type, or a message saying what is expected.
pub fn header_len(link_type: u32) -> Result<usize, String> {
    match link_type {
        LINKTYPE_USB_LINUX => Ok(l::LEGACY_LEN),
        LINKTYPE_USB_LINUX_MMAPPED => Ok(l::LEN),
        LINKTYPE_USBPCAP => Err(format!(
            "link type {link_type} (LINKTYPE_USBPCAP, Windows USBPcap) is not supported; expected \
             189 (LINKTYPE_USB_LINUX) or 220 (LINKTYPE_USB_LINUX_MMAPPED) from Linux usbmon"
        )),
        _ => Err(format!(
            "link type {link_type} is not supported; expected 189 (LINKTYPE_USB_LINUX) or 220 \
             (LINKTYPE_USB_LINUX_MMAPPED) from Linux usbmon"
        )),
    }
}

/// A problem inside one packet: the offset within the packet, the field, and the message.
#[derive(Debug)]
pub struct PacketError {
    /// Offset of the field within the packet.
    pub offset: usize,
    /// The field's name (`type`, `ndesc`).
    pub field: &'static str,
    /// What is wrong and what was expected.
    pub message: String,
}

/// Parses one usbmon packet of `link_type` with header fields in `order`; `record` is the
/// packet's number in its file.
pub fn parse_packet(
    p: &[u8],
    link_type: u32,
    order: Order,
    record: usize,
) -> Result<Event, PacketError> {
    let hdr = header_len(link_type).map_err(|message| PacketError {
        offset: 0,
        field: "link type",
        message,
    })?;
    let short = |offset: usize, field: &'static str| PacketError {
        offset,
        field,
        message: format!(
            "the packet has {} bytes, shorter than the {hdr}-byte usbmon header of link type \
             {link_type}",
            p.len()
        ),
    };
    if p.len() < hdr {
        return Err(short(0, "usbmon header"));
    }
    let id = order.u64(p, l::ID).ok_or_else(|| short(l::ID, "id"))?;
    let kind = match p.get(l::TYPE) {
        Some(b'S') => EventKind::Submit,
        Some(b'C') => EventKind::Complete,
        Some(b'E') => EventKind::Error,
        other => {
            return Err(PacketError {
                offset: l::TYPE,
                field: "type",
                message: format!(
                    "event type {}; expected 'S' (0x53), 'C' (0x43) or 'E' (0x45)",
                    other.map_or("missing".to_string(), |b| format!("{b:#04x}"))
                ),
            })
        }
    };
    let xfer_byte = p.get(l::XFER_TYPE).copied().unwrap_or(0xff);
    let xfer = XferType::from_u8(xfer_byte).ok_or_else(|| PacketError {
        offset: l::XFER_TYPE,
        field: "xfer_type",
        message: format!(
            "transfer type {xfer_byte}; expected 0 (iso), 1 (interrupt), 2 (control) or 3 (bulk)"
        ),
    })?;
    let endpoint = p.get(l::EPNUM).copied().unwrap_or(0);
    let device = p.get(l::DEVNUM).copied().unwrap_or(0);
    let bus = order
        .u16(p, l::BUSNUM)
        .ok_or_else(|| short(l::BUSNUM, "busnum"))?;
    let flag_setup = p.get(l::FLAG_SETUP).copied().unwrap_or(0xff);
    let ts_sec = order
        .u64(p, l::TS_SEC)
        .ok_or_else(|| short(l::TS_SEC, "ts_sec"))? as i64;
    let ts_usec = order
        .u32(p, l::TS_USEC)
        .ok_or_else(|| short(l::TS_USEC, "ts_usec"))? as i32;
    let status = order
        .u32(p, l::STATUS)
        .ok_or_else(|| short(l::STATUS, "status"))? as i32;
    let length = order
        .u32(p, l::LENGTH)
        .ok_or_else(|| short(l::LENGTH, "length"))?;
    let len_cap = order
        .u32(p, l::LEN_CAP)
        .ok_or_else(|| short(l::LEN_CAP, "len_cap"))?;
    let setup = if xfer == XferType::Control && kind == EventKind::Submit && flag_setup == 0 {
        p.get(l::SETUP..l::SETUP + 8)
            .and_then(|s| Setup::from_bytes(s).ok())
    } else {
        None
    };
    let mut data_start = hdr;
    if link_type == LINKTYPE_USB_LINUX_MMAPPED && xfer == XferType::Isochronous {
        let ndesc = order
            .u32(p, l::NDESC)
            .ok_or_else(|| short(l::NDESC, "ndesc"))?;
        let room = p.len() - hdr;
        let need = (ndesc as usize).saturating_mul(ISO_DESC);
        if need > room {
            return Err(PacketError {
                offset: l::NDESC,
                field: "ndesc",
                message: format!(
                    "{ndesc} isochronous descriptors need {need} bytes but the packet has {room} \
                     after the header; expected ndesc * 16 to fit in the packet"
                ),
            });
        }
        data_start += need;
    }
    let rest = p.get(data_start..).unwrap_or(&[]);
    let take = rest.len().min(len_cap as usize);
    let data = rest.get(..take).unwrap_or(&[]).to_vec();
    Ok(Event {
        record,
        id,
        kind,
        xfer,
        endpoint,
        device,
        bus,
        t_us: ts_sec
            .saturating_mul(1_000_000)
            .saturating_add(i64::from(ts_usec)),
        status,
        length,
        setup,
        data,
    })
}

/// Builds a usbmon packet (the inverse of [`parse_packet`]), for tests and synthetic captures.
/// `link_type` 189 writes the 48-byte header, anything else the 64-byte one; `len_cap` is the
/// length of `data`.
pub fn build_packet(e: &Event, link_type: u32, order: Order) -> Vec<u8> {
    let hdr = if link_type == LINKTYPE_USB_LINUX {
        48
    } else {
        64
    };
    let mut p = Vec::with_capacity(hdr + e.data.len());
    let u16b = |v: u16| match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    };
    let u32b = |v: u32| match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    };
    let u64b = |v: u64| match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    };
    p.extend_from_slice(&u64b(e.id));
    p.push(match e.kind {
        EventKind::Submit => b'S',
        EventKind::Complete => b'C',
        EventKind::Error => b'E',
    });
    p.push(match e.xfer {
        XferType::Isochronous => 0,
        XferType::Interrupt => 1,
        XferType::Control => 2,
        XferType::Bulk => 3,
    });
    p.push(e.endpoint);
    p.push(e.device);
    p.extend_from_slice(&u16b(e.bus));
    p.push(if e.setup.is_some() { 0 } else { b'-' });
    p.push(if e.data.is_empty() {
        if e.endpoint & 0x80 != 0 {
            b'<'
        } else {
            b'>'
        }
    } else {
        0
    });
    let sec = e.t_us.div_euclid(1_000_000);
    let usec = e.t_us.rem_euclid(1_000_000) as u32;
    p.extend_from_slice(&u64b(sec as u64));
    p.extend_from_slice(&u32b(usec));
    p.extend_from_slice(&u32b(e.status as u32));
    p.extend_from_slice(&u32b(e.length));
    p.extend_from_slice(&u32b(e.data.len() as u32));
    p.extend_from_slice(&e.setup.map_or([0; 8], |s| s.to_bytes()));
    if hdr == 64 {
        p.extend_from_slice(&[0; 16]);
    }
    p.extend_from_slice(&e.data);
    p
}
