//! A pcapng writer for usbmon packets (feature `record`): one little-endian section, one
//! interface of link type 220 with nanosecond timestamps (`if_tsresol` 9), then an enhanced
//! packet block per packet. Every block is whole when it is handed to the writer, so a file cut
//! after any block is a valid capture. What is written here, `calametra-capture` reads back
//! (its round-trip tests) and Wireshark decodes.
//!
//! Framing (IETF draft-ietf-opsawg-pcapng): every block is `{u32 type, u32 total_len, body
//! padded to 4 bytes, u32 total_len}`. Nothing here reads a clock.

use crate::usbmon::LINKTYPE_USB_LINUX_MMAPPED;
use std::io::{self, Write};
use std::time::Duration;

/// Section header block.
const SHB: u32 = 0x0a0d_0d0a;
/// Interface description block.
const IDB: u32 = 1;
/// Enhanced packet block.
const EPB: u32 = 6;
/// The byte-order magic.
const BOM: u32 = 0x1a2b_3c4d;
/// Option codes.
const OPT_END: u16 = 0;
const SHB_USERAPPL: u16 = 4;
const IF_NAME: u16 = 2;
const IF_TSRESOL: u16 = 9;

/// Appends one block of `btype` with `body` (padded) to `out`.
fn block(out: &mut Vec<u8>, btype: u32, body: &[u8]) {
    let pad = (4 - body.len() % 4) % 4;
    let total = (12 + body.len() + pad) as u32;
    out.extend_from_slice(&btype.to_le_bytes());
    out.extend_from_slice(&total.to_le_bytes());
    out.extend_from_slice(body);
    out.extend(std::iter::repeat_n(0u8, pad));
    out.extend_from_slice(&total.to_le_bytes());
}

/// Appends option `code` with `value` (padded) to a block body.
fn option(body: &mut Vec<u8>, code: u16, value: &[u8]) {
    body.extend_from_slice(&code.to_le_bytes());
    body.extend_from_slice(&(value.len() as u16).to_le_bytes());
    body.extend_from_slice(value);
    body.extend(std::iter::repeat_n(0u8, (4 - value.len() % 4) % 4));
}

/// The section header and the interface description that start a file: `application` is the
/// section's `shb_userappl` (who wrote it), `interface` the interface's `if_name`.
pub fn header(application: &str, interface: &str) -> Vec<u8> {
    let mut out = Vec::new();
    let mut shb = Vec::new();
    shb.extend_from_slice(&BOM.to_le_bytes());
    shb.extend_from_slice(&1u16.to_le_bytes());
    shb.extend_from_slice(&0u16.to_le_bytes());
    shb.extend_from_slice(&u64::MAX.to_le_bytes()); // section length: not given
    option(&mut shb, SHB_USERAPPL, application.as_bytes());
    option(&mut shb, OPT_END, &[]);
    block(&mut out, SHB, &shb);
    let mut idb = Vec::new();
    idb.extend_from_slice(&LINKTYPE_USB_LINUX_MMAPPED.to_le_bytes());
    idb.extend_from_slice(&0u16.to_le_bytes());
    idb.extend_from_slice(&0u32.to_le_bytes()); // snaplen: none
    option(&mut idb, IF_NAME, interface.as_bytes());
    option(&mut idb, IF_TSRESOL, &[9]);
    option(&mut idb, OPT_END, &[]);
    block(&mut out, IDB, &idb);
    out
}

/// Appends one enhanced packet block holding `packet` at `time` (nanoseconds, as the
/// interface's `if_tsresol` says) to `out`.
pub fn packet(out: &mut Vec<u8>, time: Duration, packet: &[u8]) {
    let ns = time.as_nanos().min(u128::from(u64::MAX)) as u64;
    let len = packet.len() as u32;
    let mut body = Vec::with_capacity(20 + packet.len());
    body.extend_from_slice(&0u32.to_le_bytes()); // interface 0
    body.extend_from_slice(&((ns >> 32) as u32).to_le_bytes());
    body.extend_from_slice(&(ns as u32).to_le_bytes());
    body.extend_from_slice(&len.to_le_bytes());
    body.extend_from_slice(&len.to_le_bytes());
    body.extend_from_slice(packet);
    block(out, EPB, &body);
}

/// A pcapng file being written to `W`: the header is written when it is made, then each
/// packet as a block.
pub struct Writer<W: Write> {
    out: W,
    buf: Vec<u8>,
}

impl<W: Write> Writer<W> {
    /// Writes the section and interface header ([`header`]) to `out`.
    pub fn new(mut out: W, application: &str, interface: &str) -> io::Result<Self> {
        out.write_all(&header(application, interface))?;
        Ok(Writer {
            out,
            buf: Vec::new(),
        })
    }

    /// Writes one packet at `time`.
    pub fn write(&mut self, time: Duration, data: &[u8]) -> io::Result<()> {
        self.buf.clear();
        packet(&mut self.buf, time, data);
        self.out.write_all(&self.buf)
    }

    /// The writer underneath.
    pub fn get_mut(&mut self) -> &mut W {
        &mut self.out
    }

    /// Gives the writer underneath back.
    pub fn into_inner(self) -> W {
        self.out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Blocks are 4-byte aligned, their two lengths agree, and the interface says 220 with
    /// nanoseconds.
    #[test]
    fn blocks_are_framed_and_aligned() {
        let mut w = Writer::new(Vec::new(), "calametra", "usbmon1").unwrap();
        w.write(Duration::from_nanos((7 << 32) + 5), &[1, 2, 3])
            .unwrap();
        let b = w.into_inner();
        let mut off = 0;
        let mut types = Vec::new();
        while off < b.len() {
            let t = u32::from_le_bytes(b[off..off + 4].try_into().unwrap());
            let n = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap()) as usize;
            assert_eq!(n % 4, 0);
            assert_eq!(&b[off + n - 4..off + n], &(n as u32).to_le_bytes());
            types.push(t);
            if t == IDB {
                assert_eq!(&b[off + 8..off + 10], &220u16.to_le_bytes());
                let opts = &b[off + 16..off + n - 4];
                assert!(
                    opts.windows(5).any(|w| w == [9, 0, 1, 0, 9]),
                    "if_tsresol 9"
                );
            }
            if t == EPB {
                assert_eq!(&b[off + 12..off + 20], &[7, 0, 0, 0, 5, 0, 0, 0]);
                assert_eq!(&b[off + 28..off + 31], &[1, 2, 3]);
            }
            off += n;
        }
        assert_eq!(types, [SHB, IDB, EPB]);
    }
}
