//! Bulk OUT framing of the Trigger 6: the 32-byte DMA header (`T6BULKDMAHDR`) that precedes
//! every data packet, the 48-byte video command header (`VIDEO_FLIP_HEADER`) at the start of a
//! display payload, the pixel formats the model decodes, and the interrupt packets (hotplug,
//! fence done) on endpoint 0x83.
//!
//! Layouts from MCT's `t6bulkdef.h` / `t6.h` and the capture (`refdata/mct-trigger6.md`,
//! `refdata/jcd543-4k-edid-bulk-and-interrupt.txt`). Pure encoding and decoding: the receiver
//! state lives in the model. Drivers may use the encoders too, so the two sides cannot drift.

/// Bytes in a DMA header.
pub const DMA_HEADER_LEN: usize = 32;
/// Bytes in a video command header.
pub const VIDEO_HEADER_LEN: usize = 48;
/// DMA session: display / video.
pub const SESSION_DISPLAY: u32 = 0;
/// DMA session: audio PCM (accepted and discarded by the model).
pub const SESSION_AUDIO: u32 = 3;
/// PacketFlags bit: more fragments of this payload follow.
pub const FLAG_CONTINUE: u8 = 1;
/// Video command: flip the primary output (output 0).
pub const CMD_FLIP_PRIMARY: u32 = 3;
/// Video command: flip the secondary output (output 1).
pub const CMD_FLIP_SECONDARY: u32 = 4;
/// Bytes in an interrupt packet.
pub const INTERRUPT_LEN: usize = 64;
/// Interrupt FuncMask bit: a display event.
pub const FUNC_DISPLAY: u8 = 0x04;
/// Interrupt offset of the u32 DisplayData.
pub const DISPLAY_DATA_AT: usize = 0x0c;
/// Interrupt offset of the DisplayEvent byte.
pub const DISPLAY_EVENT_AT: usize = 0x13;
/// DisplayEvent: output 0 (HDMI) connection changed.
pub const EVENT_HOTPLUG_0: u8 = 0x01;
/// DisplayEvent: output 1 connection changed.
pub const EVENT_HOTPLUG_1: u8 = 0x02;
/// DisplayEvent: a fence is done (DisplayData = fence id).
pub const EVENT_FENCE_DONE: u8 = 0x04;

fn u32_at(b: &[u8], i: usize) -> u32 {
    u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]])
}

/// A pixel format of the video header (TargetFormat / SourceFormat).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PixelFormat {
    /// 6: a Y plane (one byte a pixel) then an interleaved CbCr plane at half height,
    /// BT.601 full range (see [`super::scanout`] for the evidence).
    Nv12,
    /// 8: four bytes a pixel (B, G, R, X).
    Rgb32,
    /// 9: three bytes a pixel (B, G, R; JingYenLoh/trigger6 names it BGR24).
    Rgb24,
}

impl PixelFormat {
    /// The format with this code, among those the model decodes.
    pub fn from_code(code: u32) -> Option<PixelFormat> {
        match code {
            6 => Some(PixelFormat::Nv12),
            8 => Some(PixelFormat::Rgb32),
            9 => Some(PixelFormat::Rgb24),
            _ => None,
        }
    }

    /// The format's code.
    pub fn code(self) -> u32 {
        match self {
            PixelFormat::Nv12 => 6,
            PixelFormat::Rgb32 => 8,
            PixelFormat::Rgb24 => 9,
        }
    }

    /// The format's short name (`nv12`, `rgb32`, `rgb24`).
    pub fn name(self) -> &'static str {
        match self {
            PixelFormat::Nv12 => "nv12",
            PixelFormat::Rgb32 => "rgb32",
            PixelFormat::Rgb24 => "rgb24",
        }
    }

    /// Visible bytes of one line of the first plane.
    pub fn line_bytes(self, width: u32) -> u32 {
        match self {
            PixelFormat::Nv12 => width,
            PixelFormat::Rgb32 => width * 4,
            PixelFormat::Rgb24 => width * 3,
        }
    }
}

/// A decoded `T6BULKDMAHDR`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DmaHeader {
    /// Session: 0 display, 3 audio, 5 ROM, 7 NV12 DMA.
    pub signature: u32,
    /// Total payload bytes of the command (all fragments).
    pub payload_len: u32,
    /// VRAM address the payload goes to.
    pub payload_addr: u32,
    /// Data bytes that follow this header.
    pub packet_size: u32,
    /// Offset of this fragment inside the payload.
    pub packet_offset: u32,
    /// `FLAG_CONTINUE` when more fragments follow.
    pub flags: u8,
    /// Session-specific bytes.
    pub func: [u8; 8],
}

impl DmaHeader {
    /// Decodes the 32 header bytes.
    pub fn parse(b: &[u8; DMA_HEADER_LEN]) -> DmaHeader {
        let mut func = [0u8; 8];
        func.copy_from_slice(&b[24..32]);
        DmaHeader {
            signature: u32_at(b, 0),
            payload_len: u32_at(b, 4),
            payload_addr: u32_at(b, 8),
            packet_size: u32_at(b, 12),
            packet_offset: u32_at(b, 16),
            flags: b[20],
            func,
        }
    }

    /// Encodes the header.
    pub fn to_bytes(&self) -> [u8; DMA_HEADER_LEN] {
        let mut b = [0u8; DMA_HEADER_LEN];
        b[0..4].copy_from_slice(&self.signature.to_le_bytes());
        b[4..8].copy_from_slice(&self.payload_len.to_le_bytes());
        b[8..12].copy_from_slice(&self.payload_addr.to_le_bytes());
        b[12..16].copy_from_slice(&self.packet_size.to_le_bytes());
        b[16..20].copy_from_slice(&self.packet_offset.to_le_bytes());
        b[20] = self.flags;
        b[24..32].copy_from_slice(&self.func);
        b
    }
}

/// A decoded `VIDEO_FLIP_HEADER`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct VideoHeader {
    /// 3 flip primary, 4 flip secondary, others unmodelled.
    pub command: u32,
    /// Data bytes after this header.
    pub payload_size: u32,
    /// The fence signalled (interrupt event 0x04) when the flip is done.
    pub fence: u32,
    /// Format shown.
    pub target_format: u32,
    /// Bytes from one line of the Y (or RGB) plane to the next.
    pub y_pitch: u16,
    /// Bytes from one line of the UV plane to the next.
    pub uv_pitch: u16,
    /// VRAM address of the Y (or RGB) plane.
    pub y_offset: u32,
    /// VRAM address of the U or UV plane.
    pub uv_offset: u32,
    /// VRAM address of the V plane.
    pub v_offset: u32,
    /// Format of the data sent.
    pub source_format: u32,
    /// 0x80 = reset the JPEG engine.
    pub flag: u8,
}

impl VideoHeader {
    /// Decodes the 48 header bytes.
    pub fn parse(b: &[u8; VIDEO_HEADER_LEN]) -> VideoHeader {
        VideoHeader {
            command: u32_at(b, 0),
            payload_size: u32_at(b, 4),
            fence: u32_at(b, 8),
            target_format: u32_at(b, 12),
            y_pitch: u16::from_le_bytes([b[16], b[17]]),
            uv_pitch: u16::from_le_bytes([b[18], b[19]]),
            y_offset: u32_at(b, 20),
            uv_offset: u32_at(b, 24),
            v_offset: u32_at(b, 28),
            source_format: u32_at(b, 32),
            flag: b[47],
        }
    }

    /// Encodes the header.
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

/// An interrupt packet with one display event.
pub fn display_interrupt(event: u8, data: u32) -> [u8; INTERRUPT_LEN] {
    let mut p = [0u8; INTERRUPT_LEN];
    p[0] = FUNC_DISPLAY;
    p[DISPLAY_DATA_AT..DISPLAY_DATA_AT + 4].copy_from_slice(&data.to_le_bytes());
    p[DISPLAY_EVENT_AT] = event;
    p
}

/// A display event decoded from an interrupt packet.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum DisplayEvent {
    /// The monitor on this output was plugged or unplugged.
    Hotplug(u8),
    /// This fence is done.
    FenceDone(u32),
}

/// The display events in an interrupt packet (none when it is not a display packet or too
/// short to carry one).
pub fn parse_interrupt(p: &[u8]) -> Vec<DisplayEvent> {
    let mut v = Vec::new();
    if p.len() <= DISPLAY_EVENT_AT || p[0] & FUNC_DISPLAY == 0 {
        return v;
    }
    let ev = p[DISPLAY_EVENT_AT];
    if ev & EVENT_HOTPLUG_0 != 0 {
        v.push(DisplayEvent::Hotplug(0));
    }
    if ev & EVENT_HOTPLUG_1 != 0 {
        v.push(DisplayEvent::Hotplug(1));
    }
    if ev & EVENT_FENCE_DONE != 0 {
        v.push(DisplayEvent::FenceDone(u32_at(p, DISPLAY_DATA_AT)));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use calametra_core::hex::decode;

    #[test]
    fn captured_headers_decode() {
        // The first video header of the capture: FLIP_PRIMARY, fence 1, RGB24, pitch 11520.
        let raw = decode("0300000000b07b010100000009000000002d00006000000060000000000000000900000000000000000000000000000000000000000000000000000000000000").unwrap();
        let mut b = [0u8; VIDEO_HEADER_LEN];
        b.copy_from_slice(&raw[..VIDEO_HEADER_LEN]);
        let h = VideoHeader::parse(&b);
        assert_eq!(
            (
                h.command,
                h.payload_size,
                h.fence,
                h.target_format,
                h.y_pitch,
                h.y_offset
            ),
            (CMD_FLIP_PRIMARY, 3840 * 2160 * 3, 1, 9, 11520, 0x60)
        );
        assert_eq!(h.to_bytes(), b);
        let d = DmaHeader {
            signature: 0,
            payload_len: 0x17bb030,
            payload_addr: 0x30,
            packet_size: 0x19000,
            packet_offset: 0x19000,
            flags: FLAG_CONTINUE,
            func: [0; 8],
        };
        assert_eq!(DmaHeader::parse(&d.to_bytes()), d);
        let fence = decode("04000000000000000000000001000000000000040000000000000000000000000000000000000000000000000000000000000000000000000000000000000000").unwrap();
        assert_eq!(parse_interrupt(&fence), vec![DisplayEvent::FenceDone(1)]);
        assert_eq!(display_interrupt(EVENT_FENCE_DONE, 1).to_vec(), fence);
        let hot = decode("04000000000000000000000000000000000000010000000000000000000000000000000000000000000000000000000000000000000000000000000000000000").unwrap();
        assert_eq!(parse_interrupt(&hot), vec![DisplayEvent::Hotplug(0)]);
        let audio = decode("20000000000000000000000000000000000000000000000000000000000000000000000200000000000000000000000000000000000000000000000000000000").unwrap();
        assert!(parse_interrupt(&audio).is_empty());
    }
}
