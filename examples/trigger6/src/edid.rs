//! EDID reading for the driver: block checks, detailed timing descriptors, standard timings and
//! the CTA-861 video data block, enough to find the full timing of a wanted mode.
//!
//! The HP X27q's EDID (the monitor of the standard scenario) has no 1920x1080 detailed timing
//! descriptor: it advertises 1080p60 as standard timing DMT 0x52 and as CTA VIC 16. Both name
//! the same timing (148.5 MHz, 2200/1125 totals), which this module knows, as a DRM driver does
//! from its CEA/DMT tables. Pure functions; no I/O.

/// Bytes in one EDID block.
pub const BLOCK: usize = 128;

/// A complete video timing, in the terms of the dock's timing records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DetailedTiming {
    /// Pixel clock, kHz.
    pub pclk_khz: u32,
    /// Visible pixels per line.
    pub hactive: u16,
    /// First pixel of horizontal sync.
    pub hsync_start: u16,
    /// Horizontal sync width.
    pub hsync_width: u16,
    /// Pixels per line.
    pub htotal: u16,
    /// Visible lines.
    pub vactive: u16,
    /// First line of vertical sync.
    pub vsync_start: u16,
    /// Vertical sync width.
    pub vsync_width: u16,
    /// Lines per frame.
    pub vtotal: u16,
    /// Horizontal sync positive.
    pub hsync_positive: bool,
    /// Vertical sync positive.
    pub vsync_positive: bool,
}

impl DetailedTiming {
    /// Refresh rate rounded to whole Hz.
    pub fn refresh_hz(&self) -> u32 {
        let total = self.htotal as u64 * self.vtotal as u64;
        if total == 0 {
            return 0;
        }
        ((self.pclk_khz as u64 * 1000 + total / 2) / total) as u32
    }
}

/// Where in the EDID a mode was found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Found {
    /// A detailed timing descriptor at this byte offset.
    Detailed(usize),
    /// CTA-861 VIC in the video data block.
    Vic(u8),
    /// A standard timing (DMT) in the base block.
    Standard,
}

/// CEA-861 VIC 16 (= DMT 0x52), 1920x1080@60: the values of Linux `drm_edid.c`.
pub const CEA_1080P60: DetailedTiming = DetailedTiming {
    pclk_khz: 148_500,
    hactive: 1920,
    hsync_start: 2008,
    hsync_width: 44,
    htotal: 2200,
    vactive: 1080,
    vsync_start: 1084,
    vsync_width: 5,
    vtotal: 1125,
    hsync_positive: true,
    vsync_positive: true,
};

/// Checks the header, the block count and every block's checksum.
pub fn validate(edid: &[u8]) -> Result<(), String> {
    if edid.len() < BLOCK || edid.len() % BLOCK != 0 {
        return Err(format!("EDID of {} bytes is not whole blocks", edid.len()));
    }
    if edid[..8] != [0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0] {
        return Err("EDID header is not 00ffffffffffff00".into());
    }
    for (i, b) in edid.chunks(BLOCK).enumerate() {
        if b.iter().fold(0u8, |a, x| a.wrapping_add(*x)) != 0 {
            return Err(format!("EDID block {i} checksum is wrong"));
        }
    }
    Ok(())
}

/// Extension blocks the base block announces (byte 126).
pub fn extension_count(base: &[u8]) -> usize {
    base.get(126).copied().unwrap_or(0) as usize
}

/// Decodes an 18-byte detailed timing descriptor (`None` for a display descriptor).
pub fn detailed(d: &[u8]) -> Option<DetailedTiming> {
    if d.len() < 18 || (d[0] == 0 && d[1] == 0) {
        return None;
    }
    let pclk = u16::from_le_bytes([d[0], d[1]]) as u32 * 10;
    let hactive = d[2] as u16 | ((d[4] as u16 >> 4) << 8);
    let hblank = d[3] as u16 | ((d[4] as u16 & 0xf) << 8);
    let vactive = d[5] as u16 | ((d[7] as u16 >> 4) << 8);
    let vblank = d[6] as u16 | ((d[7] as u16 & 0xf) << 8);
    let hfront = d[8] as u16 | (((d[11] as u16 >> 6) & 3) << 8);
    let hsync = d[9] as u16 | (((d[11] as u16 >> 4) & 3) << 8);
    let vfront = (d[10] as u16 >> 4) | (((d[11] as u16 >> 2) & 3) << 4);
    let vsync = (d[10] as u16 & 0xf) | ((d[11] as u16 & 3) << 4);
    let digital_separate = d[17] & 0x18 == 0x18;
    Some(DetailedTiming {
        pclk_khz: pclk,
        hactive,
        hsync_start: hactive + hfront,
        hsync_width: hsync,
        htotal: hactive + hblank,
        vactive,
        vsync_start: vactive + vfront,
        vsync_width: vsync,
        vtotal: vactive + vblank,
        hsync_positive: digital_separate && d[17] & 0x02 != 0,
        vsync_positive: digital_separate && d[17] & 0x04 != 0,
    })
}

/// Every detailed timing in the EDID with its byte offset: the base block's four slots, then
/// each CTA extension's descriptors.
pub fn detailed_timings(edid: &[u8]) -> Vec<(usize, DetailedTiming)> {
    let mut v = Vec::new();
    for i in 0..4 {
        let at = 0x36 + 18 * i;
        if let Some(t) = edid.get(at..at + 18).and_then(detailed) {
            v.push((at, t));
        }
    }
    for (n, b) in edid.chunks(BLOCK).enumerate().skip(1) {
        if b.len() < BLOCK || b[0] != 0x02 {
            continue;
        }
        let mut at = (b[2] as usize).max(4);
        while at + 18 < BLOCK {
            match detailed(&b[at..at + 18]) {
                Some(t) => v.push((n * BLOCK + at, t)),
                None => break,
            }
            at += 18;
        }
    }
    v
}

/// The VICs of every CTA extension's video data block.
pub fn vics(edid: &[u8]) -> Vec<u8> {
    let mut v = Vec::new();
    for b in edid.chunks(BLOCK).skip(1) {
        if b.len() < BLOCK || b[0] != 0x02 {
            continue;
        }
        let end = (b[2] as usize).min(BLOCK - 1);
        let mut at = 4;
        while at < end {
            let (tag, len) = (b[at] >> 5, (b[at] & 0x1f) as usize);
            if tag == 2 {
                for &svd in b.get(at + 1..(at + 1 + len).min(end)).unwrap_or(&[]) {
                    // CTA-861-F: 129..=192 carry a native flag on VICs 1..=64.
                    v.push(if (129..=192).contains(&svd) {
                        svd & 0x7f
                    } else {
                        svd
                    });
                }
            }
            at += 1 + len;
        }
    }
    v
}

/// The standard timings of the base block as (width, height, refresh).
pub fn standard_timings(edid: &[u8]) -> Vec<(u16, u16, u8)> {
    let mut v = Vec::new();
    for i in 0..8 {
        let (b0, b1) = match (edid.get(0x26 + 2 * i), edid.get(0x27 + 2 * i)) {
            (Some(a), Some(b)) => (*a, *b),
            _ => continue,
        };
        if b0 == 0x01 && b1 == 0x01 || b0 == 0 {
            continue;
        }
        let w = (b0 as u16 + 31) * 8;
        let h = match b1 >> 6 {
            0 => w * 10 / 16,
            1 => w * 3 / 4,
            2 => w * 4 / 5,
            _ => w * 9 / 16,
        };
        v.push((w, h, (b1 & 0x3f) + 60));
    }
    v
}

/// Finds the full timing of 1920x1080@60 in a (validated) EDID: a detailed timing first, then
/// CTA VIC 16, then the DMT standard timing 0x52.
pub fn find_1080p60(edid: &[u8]) -> Option<(DetailedTiming, Found)> {
    if let Some((at, t)) = detailed_timings(edid)
        .into_iter()
        .find(|(_, t)| t.hactive == 1920 && t.vactive == 1080 && t.refresh_hz() == 60)
    {
        return Some((t, Found::Detailed(at)));
    }
    if vics(edid).contains(&16) {
        return Some((CEA_1080P60, Found::Vic(16)));
    }
    if standard_timings(edid).contains(&(1920, 1080, 60)) {
        return Some((CEA_1080P60, Found::Standard));
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn x27q() -> Vec<u8> {
        let spec = crate::spec();
        spec.hex("edid.hp_x27q.bytes", Some(256)).unwrap()
    }

    #[test]
    fn the_x27q_advertises_1080p60_as_vic_16_and_a_standard_timing() {
        let e = x27q();
        validate(&e).unwrap();
        assert_eq!(extension_count(&e), 1);
        let dtds = detailed_timings(&e);
        assert_eq!(dtds.len(), 4, "one base DTD and three CTA DTDs");
        let (_, first) = dtds[0];
        assert_eq!(
            (first.hactive, first.vactive, first.pclk_khz),
            (2560, 1440, 241_500)
        );
        assert_eq!(
            (first.hsync_start, first.htotal, first.vtotal),
            (2608, 2720, 1481)
        );
        assert!(first.hsync_positive && !first.vsync_positive);
        assert_eq!(vics(&e), vec![16, 4, 3, 2, 1, 63, 64, 90]);
        assert!(standard_timings(&e).contains(&(1920, 1080, 60)));
        assert_eq!(find_1080p60(&e), Some((CEA_1080P60, Found::Vic(16))));
        assert_eq!(CEA_1080P60.refresh_hz(), 60);
        let mut bad = e.clone();
        bad[200] ^= 1;
        assert!(validate(&bad).unwrap_err().contains("block 1"));
    }
}
