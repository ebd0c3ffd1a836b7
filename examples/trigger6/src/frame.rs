//! The test picture: eight vertical colour bars at 1920x1080 in NV12.
//!
//! NV12 (T6 format code 6) is what the capture's last raw frame uses (TargetFormat and
//! SourceFormat 6, pitch = width, the UV plane right after the Y plane), and at 1.5 bytes a
//! pixel it is the smallest raw format the dock takes. The bars are the 100% colour bars in
//! 8-bit BT.601 limited-range Y'CbCr: white, yellow, cyan, green, magenta, red, blue, black.
//! 1920 / 8 = 240 pixels a bar keeps every 2x2 chroma sample inside one bar, so the picture is
//! exact. One line is built and copied, so building a frame is a few memcpys, not per-pixel
//! work.
//!
//! The dock decodes NV12 with the full-range equations (the capture's own NV12 frame settles
//! it, see `calametra_models::trigger6::scanout`), so these limited-range bars show at 16..=235
//! per channel: white is (235, 235, 235), black (16, 16, 16). The tests pin that picture.

/// (Y, Cb, Cr) of the eight bars, left to right.
pub const BARS: [(u8, u8, u8); 8] = [
    (235, 128, 128), // white
    (210, 16, 146),  // yellow
    (170, 166, 16),  // cyan
    (145, 54, 34),   // green
    (106, 202, 222), // magenta
    (81, 90, 240),   // red
    (41, 240, 110),  // blue
    (16, 128, 128),  // black
];

/// NV12 colour bars: the Y plane (`width * height` bytes, pitch `width`) followed by the UV
/// plane (`width * height / 2` bytes). `width` must be a multiple of 16 and `height` even.
pub fn colour_bars_nv12(width: usize, height: usize) -> Vec<u8> {
    let bar = width / BARS.len();
    let mut y_line = Vec::with_capacity(width);
    let mut uv_line = Vec::with_capacity(width);
    for &(y, cb, cr) in &BARS {
        y_line.resize(y_line.len() + bar, y);
        for _ in 0..bar / 2 {
            uv_line.push(cb);
            uv_line.push(cr);
        }
    }
    let mut v = Vec::with_capacity(width * height * 3 / 2);
    for _ in 0..height {
        v.extend_from_slice(&y_line);
    }
    for _ in 0..height / 2 {
        v.extend_from_slice(&uv_line);
    }
    v
}

/// FNV-1a 64 over bytes: the checksum the tests assert for a decoded frame.
pub fn fnv1a64(parts: &[&[u8]]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for p in parts {
        for &b in *p {
            h = (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bars_are_where_they_belong() {
        let f = colour_bars_nv12(1920, 1080);
        assert_eq!(f.len(), 1920 * 1080 * 3 / 2);
        assert_eq!(f[0], 235);
        assert_eq!(f[1079 * 1920 + 1919], 16);
        let uv = &f[1920 * 1080..];
        assert_eq!((uv[240], uv[241]), (16, 146));
        assert_eq!((uv[539 * 1920 + 1918], uv[539 * 1920 + 1919]), (128, 128));
    }
}
