//! The Trigger 6 wire format as the driver writes and reads it: the 32-byte DMA header that
//! frames every bulk OUT command, the 48-byte video (flip) header, the 64-byte interrupt packet
//! and the dock's 32-byte timing records. Field names follow MCT's `t6.h`; layouts are checked
//! against the real capture (`refdata/`).
//!
//! The driver keeps its own encoding instead of borrowing the model's (`calametra-models`
//! decodes the same bytes on the device side), so the production driver depends on
//! `calametra-usb` alone and a mistake in either encoding shows up as a difference between them
//! (`tests/protocol.rs` compares the two).

/// Bytes in a DMA header.
pub const DMA_HEADER_LEN: usize = 32;
/// Bytes in a video (flip) header.
pub const VIDEO_HEADER_LEN: usize = 48;
/// The DMA header's `signature` of a display session.
pub const SESSION_DISPLAY: u32 = 0;
/// A flip on the primary output (`VideoHeader::command`).
pub const CMD_FLIP_PRIMARY: u32 = 3;
/// A flip on the secondary output.
pub const CMD_FLIP_SECONDARY: u32 = 4;
/// Bytes in an interrupt packet (endpoint 0x83).
pub const INTERRUPT_LEN: usize = 64;
/// Bytes in a timing record (GET_TIMING, 0x89).
pub const RECORD_LEN: usize = 32;

/// The interrupt packet's function bits: display.
const FUNC_DISPLAY: u8 = 0x04;
/// Where a display event's 32-bit datum (a fence id) sits.
const DISPLAY_DATA_AT: usize = 0x0c;
/// Where a display event's bits sit.
const DISPLAY_EVENT_AT: usize = 0x13;
const EVENT_HOTPLUG_0: u8 = 0x01;
const EVENT_HOTPLUG_1: u8 = 0x02;
const EVENT_FENCE_DONE: u8 = 0x04;

/// The header in front of every DMA command on bulk OUT 0x02 (little-endian words).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaHeader {
    /// The session ([`SESSION_DISPLAY`]).
    pub signature: u32,
    /// Bytes of payload the command carries in all.
    pub payload_len: u32,
    /// VRAM address the payload goes to.
    pub payload_addr: u32,
    /// Bytes of payload in this packet.
    pub packet_size: u32,
    /// Offset of this packet in the payload.
    pub packet_offset: u32,
    /// Bit 0: more packets of this payload follow.
    pub flags: u8,
    /// Function-specific bytes.
    pub func: [u8; 8],
}

impl DmaHeader {
    /// The 32 wire bytes.
    pub fn to_bytes(&self) -> [u8; DMA_HEADER_LEN] {
        let mut b = [0u8; DMA_HEADER_LEN];
        for (i, w) in [
            self.signature,
            self.payload_len,
            self.payload_addr,
            self.packet_size,
            self.packet_offset,
        ]
        .iter()
        .enumerate()
        {
            b[4 * i..4 * i + 4].copy_from_slice(&w.to_le_bytes());
        }
        b[20] = self.flags;
        b[24..32].copy_from_slice(&self.func);
        b
    }
}

/// The header of a flip: written into VRAM in front of the frame it shows, or alone into the
/// output's command ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VideoHeader {
    /// [`CMD_FLIP_PRIMARY`] or [`CMD_FLIP_SECONDARY`].
    pub command: u32,
    /// Bytes of frame following the header (0 for a flip of a frame already in VRAM).
    pub payload_size: u32,
    /// The fence the dock reports done when the frame is shown.
    pub fence: u32,
    /// TargetFormat (6 = NV12).
    pub target_format: u32,
    /// Y (or RGB) line pitch.
    pub y_pitch: u16,
    /// UV line pitch.
    pub uv_pitch: u16,
    /// VRAM address of the Y (or RGB) plane.
    pub y_offset: u32,
    /// VRAM address of the UV plane.
    pub uv_offset: u32,
    /// VRAM address of the V plane (planar formats; the Y plane's otherwise).
    pub v_offset: u32,
    /// SourceFormat.
    pub source_format: u32,
    /// The last byte's flags.
    pub flag: u8,
}

impl VideoHeader {
    /// The 48 wire bytes.
    pub fn to_bytes(&self) -> [u8; VIDEO_HEADER_LEN] {
        let mut b = [0u8; VIDEO_HEADER_LEN];
        b[0..4].copy_from_slice(&self.command.to_le_bytes());
        b[4..8].copy_from_slice(&self.payload_size.to_le_bytes());
        b[8..12].copy_from_slice(&self.fence.to_le_bytes());
        b[12..16].copy_from_slice(&self.target_format.to_le_bytes());
        b[16..18].copy_from_slice(&self.y_pitch.to_le_bytes());
        b[18..20].copy_from_slice(&self.uv_pitch.to_le_bytes());
        b[20..24].copy_from_slice(&self.y_offset.to_le_bytes());
        b[24..28].copy_from_slice(&self.uv_offset.to_le_bytes());
        b[28..32].copy_from_slice(&self.v_offset.to_le_bytes());
        b[32..36].copy_from_slice(&self.source_format.to_le_bytes());
        b[47] = self.flag;
        b
    }
}

/// What an interrupt packet reports.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisplayEvent {
    /// A monitor was plugged into or pulled from output 0 or 1.
    Hotplug(u8),
    /// The flip with this fence is shown.
    FenceDone(u32),
}

/// The display events of an interrupt packet (none for another function's packet or a short
/// one), hotplugs before the fence.
pub fn parse_interrupt(p: &[u8]) -> Vec<DisplayEvent> {
    let mut v = Vec::new();
    let Some(&ev) = p.get(DISPLAY_EVENT_AT) else {
        return v;
    };
    if p[0] & FUNC_DISPLAY == 0 {
        return v;
    }
    if ev & EVENT_HOTPLUG_0 != 0 {
        v.push(DisplayEvent::Hotplug(0));
    }
    if ev & EVENT_HOTPLUG_1 != 0 {
        v.push(DisplayEvent::Hotplug(1));
    }
    if ev & EVENT_FENCE_DONE != 0 {
        let d = &p[DISPLAY_DATA_AT..DISPLAY_DATA_AT + 4];
        v.push(DisplayEvent::FenceDone(u32::from_le_bytes([
            d[0], d[1], d[2], d[3],
        ])));
    }
    v
}

/// The video timing of one of the dock's records (RESOLUTIONTIMING), the fields the driver
/// matches a monitor's mode against.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Pixel clock in kHz.
    pub pclk_khz: u32,
    /// Refresh rate in Hz.
    pub refresh_hz: u8,
    /// Total pixels per line.
    pub htotal: u16,
    /// Visible pixels per line.
    pub hactive: u16,
    /// First pixel of horizontal sync.
    pub hsync_start: u16,
    /// Horizontal sync width.
    pub hsync_width: u16,
    /// Total lines per frame.
    pub vtotal: u16,
    /// Visible lines per frame.
    pub vactive: u16,
    /// First line of vertical sync.
    pub vsync_start: u16,
    /// Vertical sync width.
    pub vsync_width: u16,
    /// Horizontal sync polarity, 1 = positive.
    pub hsync_pol: u8,
    /// Vertical sync polarity, 1 = positive.
    pub vsync_pol: u8,
}

impl Timing {
    /// Decodes a record; `None` unless `b` is exactly [`RECORD_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Option<Timing> {
        if b.len() != RECORD_LEN {
            return None;
        }
        let w = |i: usize| u16::from_le_bytes([b[i], b[i + 1]]);
        Some(Timing {
            pclk_khz: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            refresh_hz: b[4],
            htotal: w(6),
            hactive: w(8),
            hsync_start: w(10),
            hsync_width: w(12),
            vtotal: w(14),
            vactive: w(16),
            vsync_start: w(18),
            vsync_width: w(20),
            hsync_pol: b[28],
            vsync_pol: b[29],
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hex(s: &str) -> Vec<u8> {
        (0..s.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
            .collect()
    }

    /// Headers and interrupt packets from the real capture.
    #[test]
    fn the_captures_bytes_encode_and_decode() {
        let flip = VideoHeader {
            command: CMD_FLIP_PRIMARY,
            payload_size: 3840 * 2160 * 3,
            fence: 1,
            target_format: 9,
            y_pitch: 11520,
            uv_pitch: 0,
            y_offset: 0x60,
            uv_offset: 0x60,
            v_offset: 0,
            source_format: 9,
            flag: 0,
        };
        assert_eq!(
            flip.to_bytes().to_vec(),
            hex("0300000000b07b010100000009000000002d00006000000060000000000000000900000000000000000000000000000000000000000000000000000000000000")[..VIDEO_HEADER_LEN]
        );
        let dma = DmaHeader {
            signature: 0,
            payload_len: 0x17bb030,
            payload_addr: 0x30,
            packet_size: 0x19000,
            packet_offset: 0x19000,
            flags: 1,
            func: [0; 8],
        };
        let b = dma.to_bytes();
        assert_eq!(&b[4..8], &0x17bb030u32.to_le_bytes());
        assert_eq!(b[20], 1);
        let fence = hex("04000000000000000000000001000000000000040000000000000000000000000000000000000000000000000000000000000000000000000000000000000000");
        assert_eq!(parse_interrupt(&fence), vec![DisplayEvent::FenceDone(1)]);
        let hot = hex("04000000000000000000000000000000000000010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000");
        assert_eq!(parse_interrupt(&hot), vec![DisplayEvent::Hotplug(0)]);
        let audio = hex("20000000000000000000000000000000000000000000000000000000000000000000000200000000000000000000000000000000000000000000000000000000");
        assert!(parse_interrupt(&audio).is_empty());
        assert!(parse_interrupt(&[0x04; 5]).is_empty());
        assert_eq!(Timing::parse(&[0; 31]), None);
    }
}
