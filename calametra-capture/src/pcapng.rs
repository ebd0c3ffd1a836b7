//! pcapng: section header blocks (either byte order), interface description blocks with their
//! link types, enhanced, simple and obsolete packet blocks; every other block is skipped by
//! its length. Each section starts afresh (its own byte order, its own interfaces).
//!
//! Framing (IETF draft-ietf-opsawg-pcapng): every block is `{u32 type, u32 total_len, body,
//! u32 total_len}`, `total_len` a multiple of 4 covering the whole block.

use super::usbmon_bin::{self, header_len};
use super::{Event, Order, Src};
use calametra_core::error::Error;

/// The section header block's type, a palindrome readable in either byte order.
pub const SHB_TYPE: [u8; 4] = [0x0a, 0x0d, 0x0d, 0x0a];
/// Interface description block.
pub const IDB: u32 = 1;
/// Obsolete packet block.
pub const OPB: u32 = 2;
/// Simple packet block.
pub const SPB: u32 = 3;
/// Enhanced packet block.
pub const EPB: u32 = 6;
/// The byte-order magic as it reads in the section's own order.
const BOM: u32 = 0x1a2b_3c4d;
/// The smallest section header block: type, length, magic, versions, section length, length.
const SHB_MIN: usize = 28;

struct Iface {
    link_type: u32,
    snaplen: u32,
}

/// Parses a whole pcapng file into `events`; records the link types of interfaces that carried
/// packets in `link_types`.
pub(crate) fn parse(
    src: &Src<'_>,
    b: &[u8],
    events: &mut Vec<Event>,
    link_types: &mut Vec<u32>,
) -> Result<(), Error> {
    let mut off = 0usize;
    let mut order = Order::Little;
    let mut ifaces: Vec<Iface> = Vec::new();
    let mut packet = 0usize;
    let mut blocks = 0usize;
    while off < b.len() {
        blocks += 1;
        let rest = b.get(off..).unwrap_or(&[]);
        let is_shb = rest.starts_with(&SHB_TYPE);
        let what = if is_shb {
            "section header block".to_string()
        } else {
            format!("block {blocks}")
        };
        if rest.len() < 12 {
            return Err(src.at(
                off,
                &what,
                format!(
                    "truncated: {} bytes left; expected a block header of at least 12 bytes",
                    rest.len()
                ),
            ));
        }
        if is_shb {
            order = if Order::Little.u32(rest, 8) == Some(BOM) {
                Order::Little
            } else if Order::Big.u32(rest, 8) == Some(BOM) {
                Order::Big
            } else {
                return Err(src.at(
                    off + 8,
                    "section header block, byte-order magic",
                    format!(
                        "found {}; expected 1a2b3c4d in either byte order",
                        super::spaced_hex(rest.get(8..12).unwrap_or(&[]))
                    ),
                ));
            };
            ifaces.clear();
        }
        let btype = order.u32(rest, 0).unwrap_or(0);
        let total = order.u32(rest, 4).unwrap_or(0) as usize;
        let min = if is_shb { SHB_MIN } else { 12 };
        if total < min || total % 4 != 0 {
            return Err(src.at(
                off + 4,
                &format!("{what}, total length"),
                format!(
                    "total length {total} is impossible; expected a multiple of 4 of at least \
                     {min}"
                ),
            ));
        }
        if total > rest.len() {
            return Err(src.at(
                off + 4,
                &format!("{what}, total length"),
                format!(
                    "truncated: the block claims {total} bytes but only {} remain in the file",
                    rest.len()
                ),
            ));
        }
        let trailer = order.u32(rest, total - 4).unwrap_or(0) as usize;
        if trailer != total {
            return Err(src.at(
                off + total - 4,
                &format!("{what}, trailing total length"),
                format!("found {trailer}; expected {total}, the length at the block's start"),
            ));
        }
        let body = rest.get(8..total - 4).unwrap_or(&[]);
        let body_off = off + 8;
        match btype {
            _ if is_shb => {
                let major = order.u16(body, 4).unwrap_or(0);
                if major != 1 {
                    return Err(src.at(
                        body_off + 4,
                        "section header block, major version",
                        format!("version {major}; expected 1"),
                    ));
                }
            }
            IDB => {
                let (Some(link), Some(snaplen)) = (order.u16(body, 0), order.u32(body, 4)) else {
                    return Err(src.at(
                        body_off,
                        &format!("{what}, interface description"),
                        format!("the body has {} bytes; expected at least 8", body.len()),
                    ));
                };
                ifaces.push(Iface {
                    link_type: u32::from(link),
                    snaplen,
                });
            }
            EPB | OPB | SPB => {
                packet += 1;
                let (iface, data, data_off) =
                    packet_body(src, &what, btype, order, body, body_off)?;
                let Some(ifc) = ifaces.get(iface) else {
                    return Err(src.at(
                        body_off,
                        &format!("{what}, interface id"),
                        format!(
                            "packet {packet} names interface {iface} but the section has {} \
                             interface description block(s) before it",
                            ifaces.len()
                        ),
                    ));
                };
                let data = match btype {
                    // A simple packet block's data is cut only by the interface's snap length.
                    SPB if ifc.snaplen != 0 => data.get(..ifc.snaplen as usize).unwrap_or(data),
                    _ => data,
                };
                if let Err(m) = header_len(ifc.link_type) {
                    return Err(src.at(
                        body_off,
                        &format!("{what}, interface {iface} link type"),
                        format!("packet {packet}: {m}"),
                    ));
                }
                if !link_types.contains(&ifc.link_type) {
                    link_types.push(ifc.link_type);
                }
                let ev =
                    usbmon_bin::parse_packet(data, ifc.link_type, order, packet).map_err(|e| {
                        src.at(
                            data_off + e.offset,
                            &format!("packet {packet}, usbmon {}", e.field),
                            e.message,
                        )
                    })?;
                events.push(ev);
            }
            _ => {}
        }
        off += total;
    }
    Ok(())
}

/// The interface id, the packet data and the data's offset in the file.
fn packet_body<'b>(
    src: &Src<'_>,
    what: &str,
    btype: u32,
    order: Order,
    body: &'b [u8],
    body_off: usize,
) -> Result<(usize, &'b [u8], usize), Error> {
    let too_short = |need: usize, name: &str| {
        src.at(
            body_off,
            &format!("{what}, {name}"),
            format!(
                "the block body has {} bytes; expected at least {need}",
                body.len()
            ),
        )
    };
    match btype {
        SPB => {
            let orig = order
                .u32(body, 0)
                .ok_or_else(|| too_short(4, "simple packet block"))?;
            let room = body.len() - 4;
            let len = (orig as usize).min(room);
            Ok((0, body.get(4..4 + len).unwrap_or(&[]), body_off + 4))
        }
        _ => {
            let name = if btype == EPB {
                "enhanced packet block"
            } else {
                "obsolete packet block"
            };
            let (iface, cap_at) = if btype == EPB {
                (order.u32(body, 0).map(|v| v as usize), 12)
            } else {
                (order.u16(body, 0).map(usize::from), 12)
            };
            let (Some(iface), Some(caplen)) = (iface, order.u32(body, cap_at)) else {
                return Err(too_short(20, name));
            };
            if body.len() < 20 {
                return Err(too_short(20, name));
            }
            let room = body.len() - 20;
            if caplen as usize > room {
                return Err(src.at(
                    body_off + cap_at,
                    &format!("{what}, {name}, captured length"),
                    format!(
                        "captured length {caplen} exceeds the {room} bytes of packet data the \
                         block holds; expected a length within the block"
                    ),
                ));
            }
            Ok((
                iface,
                body.get(20..20 + caplen as usize).unwrap_or(&[]),
                body_off + 20,
            ))
        }
    }
}

/// Writes a one-section pcapng file with one interface of `link_type` and `packets` as enhanced
/// packet blocks, in `order`; for tests and synthetic captures.
pub fn build(link_type: u16, order: Order, packets: &[Vec<u8>]) -> Vec<u8> {
    let u16b = |v: u16| match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    };
    let u32b = |v: u32| match order {
        Order::Little => v.to_le_bytes(),
        Order::Big => v.to_be_bytes(),
    };
    let block = |out: &mut Vec<u8>, btype: u32, body: &[u8]| {
        let pad = (4 - body.len() % 4) % 4;
        let total = (12 + body.len() + pad) as u32;
        out.extend_from_slice(&u32b(btype));
        out.extend_from_slice(&u32b(total));
        out.extend_from_slice(body);
        out.extend(std::iter::repeat_n(0u8, pad));
        out.extend_from_slice(&u32b(total));
    };
    let mut out = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&u32b(BOM));
    shb.extend_from_slice(&u16b(1));
    shb.extend_from_slice(&u16b(0));
    shb.extend_from_slice(&u32b(u32::MAX));
    shb.extend_from_slice(&u32b(u32::MAX));
    block(&mut out, 0x0a0d_0d0a, &shb);
    let mut idb = Vec::new();
    idb.extend_from_slice(&u16b(link_type));
    idb.extend_from_slice(&u16b(0));
    idb.extend_from_slice(&u32b(0));
    block(&mut out, IDB, &idb);
    for p in packets {
        let mut epb = Vec::new();
        epb.extend_from_slice(&u32b(0));
        epb.extend_from_slice(&u32b(0));
        epb.extend_from_slice(&u32b(0));
        epb.extend_from_slice(&u32b(p.len() as u32));
        epb.extend_from_slice(&u32b(p.len() as u32));
        epb.extend_from_slice(p);
        block(&mut out, EPB, &epb);
    }
    out
}
