//! Classic pcap: a 24-byte global header whose magic gives the byte order and the timestamp
//! unit (`a1b2c3d4` microseconds, `a1b23c4d` nanoseconds, either byte order), then records of
//! `{u32 ts_sec, u32 ts_frac, u32 incl_len, u32 orig_len}` and `incl_len` bytes.
//!
//! Timestamps come from the usbmon header inside each packet, so the record's own are only
//! checked for presence.

use super::usbmon_bin::{self, header_len};
use super::{Event, Order, Src};
use calametra_core::error::Error;

/// The largest record accepted: past this a length is taken to be corrupt, not a packet.
pub const MAX_RECORD: u32 = 256 << 20;

/// The byte order and whether timestamps are nanoseconds, from the first four bytes.
pub fn magic(b: &[u8]) -> Option<(Order, bool)> {
    match b {
        [0xd4, 0xc3, 0xb2, 0xa1] => Some((Order::Little, false)),
        [0xa1, 0xb2, 0xc3, 0xd4] => Some((Order::Big, false)),
        [0x4d, 0x3c, 0xb2, 0xa1] => Some((Order::Little, true)),
        [0xa1, 0xb2, 0x3c, 0x4d] => Some((Order::Big, true)),
        _ => None,
    }
}

/// Parses a whole pcap file into `events`; returns whether timestamps were nanoseconds.
pub(crate) fn parse(
    src: &Src<'_>,
    b: &[u8],
    events: &mut Vec<Event>,
    link_types: &mut Vec<u32>,
) -> Result<bool, Error> {
    let Some((order, nanos)) = b.get(..4).and_then(magic) else {
        return Err(src.at(
            0,
            "pcap magic",
            format!(
                "found {}; expected d4c3b2a1, a1b2c3d4, 4d3cb2a1 or a1b23c4d",
                super::spaced_hex(b.get(..4).unwrap_or(b))
            ),
        ));
    };
    if b.len() < 24 {
        return Err(src.at(
            0,
            "pcap global header",
            format!(
                "truncated: {} bytes; expected a 24-byte global header",
                b.len()
            ),
        ));
    }
    let major = order.u16(b, 4).unwrap_or(0);
    if major != 2 {
        return Err(src.at(
            4,
            "pcap global header, version_major",
            format!("version {major}; expected 2"),
        ));
    }
    // The low 16 bits are the link type; the high bits may carry FCS information.
    let link_type = order.u32(b, 20).unwrap_or(0) & 0xffff;
    if let Err(m) = header_len(link_type) {
        return Err(src.at(20, "pcap global header, link type", m));
    }
    link_types.push(link_type);
    let mut off = 24usize;
    let mut record = 0usize;
    while off < b.len() {
        record += 1;
        let what = format!("record {record}");
        let rest = b.get(off..).unwrap_or(&[]);
        let (Some(incl), Some(_orig)) = (order.u32(rest, 8), order.u32(rest, 12)) else {
            return Err(src.at(
                off,
                &format!("{what}, record header"),
                format!(
                    "truncated: {} bytes left; expected a 16-byte record header",
                    rest.len()
                ),
            ));
        };
        if incl > MAX_RECORD {
            return Err(src.at(
                off + 8,
                &format!("{what}, incl_len"),
                format!("length {incl} is absurd; expected a packet of at most {MAX_RECORD} bytes"),
            ));
        }
        let room = rest.len() - 16;
        if incl as usize > room {
            return Err(src.at(
                off + 8,
                &format!("{what}, incl_len"),
                format!(
                    "truncated: the record claims {incl} bytes but only {room} remain in the file"
                ),
            ));
        }
        let data = rest.get(16..16 + incl as usize).unwrap_or(&[]);
        let ev = usbmon_bin::parse_packet(data, link_type, order, record).map_err(|e| {
            src.at(
                off + 16 + e.offset,
                &format!("{what}, usbmon {}", e.field),
                e.message,
            )
        })?;
        events.push(ev);
        off += 16 + incl as usize;
    }
    Ok(nanos)
}

/// Writes a pcap file (microsecond timestamps) holding `packets` of `link_type`, for tests and
/// synthetic captures; the record timestamps are taken from nothing (zero).
pub fn build(link_type: u32, order: Order, packets: &[Vec<u8>]) -> Vec<u8> {
    let u16b = |v: u16| match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    };
    let u32b = |v: u32| match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    };
    let mut out = Vec::new();
    out.extend_from_slice(&u32b(0xa1b2_c3d4));
    out.extend_from_slice(&u16b(2));
    out.extend_from_slice(&u16b(4));
    out.extend_from_slice(&u32b(0));
    out.extend_from_slice(&u32b(0));
    out.extend_from_slice(&u32b(262_144));
    out.extend_from_slice(&u32b(link_type));
    for p in packets {
        out.extend_from_slice(&u32b(0));
        out.extend_from_slice(&u32b(0));
        out.extend_from_slice(&u32b(p.len() as u32));
        out.extend_from_slice(&u32b(p.len() as u32));
        out.extend_from_slice(p);
    }
    out
}
