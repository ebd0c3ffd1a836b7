//! The 32-byte RESOLUTIONTIMING record of the Trigger 6: the unit of the firmware timing table
//! (read with `get_timing`, 0x89) and the payload of a modeset (`set_mode`, 0x12).
//!
//! Layout (little-endian, MCT `t6.h`, see `refdata/mct-trigger6.md`): `u32 pclk_khz; u8 refresh;
//! u8 rsvd; u16 htotal, hactive, hsync_start, hsync_width, vtotal, vactive, vsync_start,
//! vsync_width, fnum, fden; u8 idiv, output_select, hsync_pol, vsync_pol, reduced, flag`.
//! Nothing here keeps state.

/// Bytes in one record.
pub const RECORD_LEN: usize = 32;

/// A decoded RESOLUTIONTIMING record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Timing {
    /// Pixel clock in kHz.
    pub pclk_khz: u32,
    /// Refresh rate in Hz.
    pub refresh_hz: u8,
    /// Reserved byte (kept so a record round-trips).
    pub rsvd: u8,
    /// Total pixels per line.
    pub htotal: u16,
    /// Visible pixels per line.
    pub hactive: u16,
    /// First pixel of horizontal sync (active + front porch).
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
    /// PLL numerator (the host may recompute it).
    pub fnum: u16,
    /// PLL denominator (the host may recompute it).
    pub fden: u16,
    /// PLL input divider (the host may recompute it).
    pub idiv: u8,
    /// Output select (the host may recompute it).
    pub output_select: u8,
    /// Horizontal sync polarity, 1 = positive.
    pub hsync_pol: u8,
    /// Vertical sync polarity, 1 = positive.
    pub vsync_pol: u8,
    /// Reduced blanking flag (the Windows driver clears it in its modeset).
    pub reduced: u8,
    /// Flags; bit 0 = customer timing.
    pub flag: u8,
}

fn u16_at(b: &[u8], i: usize) -> u16 {
    u16::from_le_bytes([b[i], b[i + 1]])
}

impl Timing {
    /// Decodes a record; `None` unless `b` is exactly [`RECORD_LEN`] bytes.
    pub fn parse(b: &[u8]) -> Option<Timing> {
        if b.len() != RECORD_LEN {
            return None;
        }
        Some(Timing {
            pclk_khz: u32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            refresh_hz: b[4],
            rsvd: b[5],
            htotal: u16_at(b, 6),
            hactive: u16_at(b, 8),
            hsync_start: u16_at(b, 10),
            hsync_width: u16_at(b, 12),
            vtotal: u16_at(b, 14),
            vactive: u16_at(b, 16),
            vsync_start: u16_at(b, 18),
            vsync_width: u16_at(b, 20),
            fnum: u16_at(b, 22),
            fden: u16_at(b, 24),
            idiv: b[26],
            output_select: b[27],
            hsync_pol: b[28],
            vsync_pol: b[29],
            reduced: b[30],
            flag: b[31],
        })
    }

    /// Encodes the record.
    pub fn to_bytes(&self) -> [u8; RECORD_LEN] {
        let mut b = [0u8; RECORD_LEN];
        b[0..4].copy_from_slice(&self.pclk_khz.to_le_bytes());
        b[4] = self.refresh_hz;
        b[5] = self.rsvd;
        let words = [
            self.htotal,
            self.hactive,
            self.hsync_start,
            self.hsync_width,
            self.vtotal,
            self.vactive,
            self.vsync_start,
            self.vsync_width,
            self.fnum,
            self.fden,
        ];
        for (i, w) in words.iter().enumerate() {
            b[6 + 2 * i..8 + 2 * i].copy_from_slice(&w.to_le_bytes());
        }
        b[26] = self.idiv;
        b[27] = self.output_select;
        b[28] = self.hsync_pol;
        b[29] = self.vsync_pol;
        b[30] = self.reduced;
        b[31] = self.flag;
        b
    }

    /// Whether two records describe the same video mode: every field a monitor sees (clock,
    /// refresh, totals, active, sync start and width, polarities). The PLL fields, Reduced and
    /// Flag may differ: the MCT host recomputes the PLL and the Windows driver clears Reduced.
    pub fn same_geometry(&self, other: &Timing) -> bool {
        self.pclk_khz == other.pclk_khz
            && self.refresh_hz == other.refresh_hz
            && self.htotal == other.htotal
            && self.hactive == other.hactive
            && self.hsync_start == other.hsync_start
            && self.hsync_width == other.hsync_width
            && self.vtotal == other.vtotal
            && self.vactive == other.vactive
            && self.vsync_start == other.vsync_start
            && self.vsync_width == other.vsync_width
            && self.hsync_pol == other.hsync_pol
            && self.vsync_pol == other.vsync_pol
    }
}

impl std::fmt::Display for Timing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}x{}@{} ({} kHz, htotal {}, vtotal {})",
            self.hactive, self.vactive, self.refresh_hz, self.pclk_khz, self.htotal, self.vtotal
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_26_is_cea_1080p60_and_round_trips() {
        let raw = calametra_core::hex::decode(
            "144402003c0098088007d8072c00650438043c040500bb02e8031d0101010000",
        )
        .unwrap();
        let t = Timing::parse(&raw).unwrap();
        assert_eq!(
            (
                t.pclk_khz,
                t.hactive,
                t.vactive,
                t.refresh_hz,
                t.htotal,
                t.vtotal
            ),
            (148_500, 1920, 1080, 60, 2200, 1125)
        );
        assert_eq!(t.to_bytes().to_vec(), raw);
        let mut other = t;
        other.reduced = 1;
        other.fnum = 1;
        assert!(t.same_geometry(&other));
        other.vtotal += 1;
        assert!(!t.same_geometry(&other));
        assert!(Timing::parse(&raw[..31]).is_none());
    }
}
