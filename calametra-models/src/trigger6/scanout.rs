//! The picture a monitor on a Trigger 6 output sees: the shown flip's planes ([`Frame`]) turned
//! into 8-bit RGB ([`Scanout`]), and that picture as a PNG a person can open.
//!
//! How each format the model shows becomes RGB, and the evidence:
//!
//! - **RGB24 (code 9)**: three bytes a pixel in memory order B, G, R. JingYenLoh/trigger6
//!   (`trigger6.h`, commit c07698f) names code 9 `BGR24` and fills it with DRM's
//!   XRGB8888-to-RGB888 conversion, whose bytes are B, G, R (the capture's three RGB24 frames
//!   cannot settle the order: two are black and the third carries NV12 bytes, see below).
//! - **RGB32 (code 8)**: four bytes a pixel, B, G, R, X (XRGB8888 little-endian, what the guest
//!   DRM driver uploads).
//! - **NV12 (code 6)**: the Y plane, one byte a pixel, and the interleaved Cb Cr plane at half
//!   width and height; each 2x2 block of pixels takes its block's chroma. Decoded with the
//!   BT.601 full-range (JFIF) equations. Evidence: the capture's NV12 frame (fence 4, 3840x2160,
//!   the Windows 10 wallpaper) stays in gamut under them (0.025 % of samples outside
//!   [-4, 259]) and not under BT.709 full range (80 %) or either limited range (over 99 %), so
//!   the Windows driver encodes JFIF-range BT.601; MCT's JPEG path (turbojpeg, JFIF) lands in
//!   the same NV12 planes.
//!
//! Nothing here keeps state; the arithmetic is integer, so a picture's bytes are the same on
//! every machine. PNG files are encoded by the `png` crate: their bytes depend on its version,
//! the decoded pixels ([`Scanout::rgb`], [`Scanout::sha256`]) do not.

use super::bulk::PixelFormat;
use super::model::{Frame, Trigger6};
use calametra_core::picture::Picture;
use std::path::Path;

/// An output's picture as a monitor sees it: 8-bit RGB, row after row, no padding.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Scanout {
    /// The output (0 primary, 1 secondary).
    pub output: u8,
    /// Pixels per line.
    pub width: u32,
    /// Lines.
    pub height: u32,
    /// The format the dock decoded.
    pub format: PixelFormat,
    /// The fence of the flip shown.
    pub fence: u32,
    /// `width * height * 3` bytes: R, G, B of each pixel.
    pub rgb: Vec<u8>,
}

impl Scanout {
    /// The picture of `frame`, shown on `output` by the flip with `fence`.
    pub fn from_frame(frame: &Frame, output: u8, fence: u32) -> Scanout {
        Scanout {
            output,
            width: frame.width,
            height: frame.height,
            format: frame.format,
            fence,
            rgb: frame_rgb(frame),
        }
    }

    /// The R, G, B of a pixel; `None` outside the picture.
    pub fn pixel(&self, x: u32, y: u32) -> Option<[u8; 3]> {
        if x >= self.width || y >= self.height {
            return None;
        }
        let i = (y as usize * self.width as usize + x as usize) * 3;
        let p = self.rgb.get(i..i + 3)?;
        Some([p[0], p[1], p[2]])
    }

    /// SHA-256 of the decoded pixels ([`Scanout::rgb`]), lowercase hex: what tests pin (PNG
    /// bytes depend on the encoder's version, the pixels do not).
    pub fn sha256(&self) -> String {
        calametra_core::trace::sha256_hex(&self.rgb)
    }

    /// The picture as PNG bytes (8-bit RGB, not interlaced).
    pub fn png(&self) -> Vec<u8> {
        encode_png(self.width, self.height, &self.rgb)
    }

    /// Writes the picture as a PNG file; the error names the file.
    pub fn write_png(&self, path: &Path) -> Result<(), String> {
        std::fs::write(path, self.png())
            .map_err(|e| format!("{}: cannot write the PNG: {e}", path.display()))
    }

    /// A file name for the picture: `out0-fence1-rgb24-3840x2160.png`.
    pub fn file_name(&self) -> String {
        format!(
            "out{}-fence{}-{}-{}x{}.png",
            self.output,
            self.fence,
            self.format.name(),
            self.width,
            self.height
        )
    }
}

impl Trigger6 {
    /// The picture on `output` now: the shown flip's planes at the output's mode size, as a
    /// monitor sees them. `None` when nothing is shown or no mode is set (see
    /// [`Trigger6::shown_frame`]). Reads and converts the whole frame.
    pub fn scanout(&self, output: usize) -> Option<Scanout> {
        let flip = self.flip_state(output).shown?;
        let frame = self.shown_frame(output)?;
        Some(Scanout::from_frame(&frame, flip.output, flip.fence))
    }

    /// The picture on `output` now, as PNG bytes (see [`Trigger6::scanout`]).
    pub fn scanout_png(&self, output: usize) -> Option<Vec<u8>> {
        self.scanout(output).map(|s| s.png())
    }

    /// The name of the picture on `output` now, without reading VRAM:
    /// `out1-flip2-fence2-rgb32-1920x1080` (the output, the flip's serial in this run, its
    /// fence, the format and the mode's size). A new flip shown, or a new mode, is a new name;
    /// a write into the frame shown is not. `None` when [`Trigger6::scanout`] would be.
    pub fn scanout_name(&self, output: usize) -> Option<String> {
        let flip = self.flip_state(output).shown?;
        let mode = self.mode(output)?;
        let format = PixelFormat::from_code(flip.format)?;
        Some(format!(
            "out{output}-flip{}-fence{}-{}-{}x{}",
            flip.serial,
            flip.fence,
            format.name(),
            mode.hactive,
            mode.vactive
        ))
    }

    /// [`Device::pictures`](calametra_core::usb::Device::pictures): the name of each output's
    /// picture ([`Trigger6::scanout_name`]), output 0 first.
    pub fn picture_names(&self) -> Vec<String> {
        (0..2).filter_map(|o| self.scanout_name(o)).collect()
    }

    /// [`Device::picture`](calametra_core::usb::Device::picture): the scanout of the output
    /// whose picture is named `name` now, as a PNG.
    pub fn render_picture(&self, name: &str) -> Option<Picture> {
        let output = (0..2).find(|&o| self.scanout_name(o).as_deref() == Some(name))?;
        let s = self.scanout(output)?;
        Some(Picture {
            width: s.width,
            height: s.height,
            png: s.png(),
            about: format!(
                "output {output}, {} {}x{}, fence {}, pixels sha256:{}",
                s.format.name(),
                s.width,
                s.height,
                s.fence,
                s.sha256()
            ),
        })
    }
}

/// 8-bit RGB of a decoded frame, `width * height * 3` bytes.
pub fn frame_rgb(frame: &Frame) -> Vec<u8> {
    let (w, h) = (frame.width as usize, frame.height as usize);
    let mut out = vec![0u8; w * h * 3];
    let plane = |i: usize| frame.planes.get(i).map(Vec::as_slice).unwrap_or(&[]);
    match frame.format {
        PixelFormat::Rgb24 | PixelFormat::Rgb32 => {
            let bpp = if frame.format == PixelFormat::Rgb24 {
                3
            } else {
                4
            };
            for (px, src) in out.chunks_exact_mut(3).zip(plane(0).chunks_exact(bpp)) {
                px[0] = src[2];
                px[1] = src[1];
                px[2] = src[0];
            }
        }
        PixelFormat::Nv12 => {
            let (y_plane, uv_plane) = (plane(0), plane(1));
            let lut = Jfif::new();
            for row in 0..h {
                let y_line = y_plane.get(row * w..(row + 1) * w).unwrap_or(&[]);
                let uv_line = uv_plane
                    .get((row / 2) * w..(row / 2 + 1) * w)
                    .unwrap_or(&[]);
                let out_line = &mut out[row * w * 3..(row + 1) * w * 3];
                for (x, (px, &luma)) in out_line.chunks_exact_mut(3).zip(y_line).enumerate() {
                    let c = x & !1;
                    let (cb, cr) = match (uv_line.get(c), uv_line.get(c + 1)) {
                        (Some(&cb), Some(&cr)) => (cb, cr),
                        _ => (128, 128),
                    };
                    px.copy_from_slice(&lut.rgb(luma, cb, cr));
                }
            }
        }
    }
    out
}

/// The BT.601 full-range (JFIF) YCbCr-to-RGB equations in 16.16 fixed point, tabulated by
/// chroma value:
/// `R = Y + 1.402 (Cr - 128)`, `G = Y - 0.344136 (Cb - 128) - 0.714136 (Cr - 128)`,
/// `B = Y + 1.772 (Cb - 128)`, each rounded and clamped to 0..=255.
struct Jfif {
    r_cr: [i32; 256],
    g_cb: [i32; 256],
    g_cr: [i32; 256],
    b_cb: [i32; 256],
}

impl Jfif {
    fn new() -> Jfif {
        let mut t = Jfif {
            r_cr: [0; 256],
            g_cb: [0; 256],
            g_cr: [0; 256],
            b_cb: [0; 256],
        };
        for v in 0..256usize {
            let d = v as i32 - 128;
            t.r_cr[v] = 91_881 * d;
            t.g_cb[v] = -22_554 * d;
            t.g_cr[v] = -46_802 * d;
            t.b_cb[v] = 116_130 * d;
        }
        t
    }

    fn rgb(&self, y: u8, cb: u8, cr: u8) -> [u8; 3] {
        let y = (y as i32) << 16;
        let clamp = |v: i32| ((v + 0x8000) >> 16).clamp(0, 255) as u8;
        [
            clamp(y + self.r_cr[cr as usize]),
            clamp(y + self.g_cb[cb as usize] + self.g_cr[cr as usize]),
            clamp(y + self.b_cb[cb as usize]),
        ]
    }
}

/// PNG bytes of an 8-bit RGB picture.
pub fn encode_png(width: u32, height: u32, rgb: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, width, height);
    enc.set_color(png::ColorType::Rgb);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_compression(png::Compression::Fast);
    // Writing into a Vec fails only on a size mismatch, which `Scanout` rules out.
    match enc
        .write_header()
        .and_then(|mut w| w.write_image_data(rgb).and_then(|()| w.finish()))
    {
        Ok(()) => out,
        Err(e) => panic!("PNG of {width}x{height} with {} bytes: {e}", rgb.len()),
    }
}

/// Decodes an 8-bit RGB PNG into `(width, height, pixels)`; anything else is an error.
pub fn decode_png(bytes: &[u8]) -> Result<(u32, u32, Vec<u8>), String> {
    let dec = png::Decoder::new(std::io::Cursor::new(bytes));
    let mut reader = dec.read_info().map_err(|e| format!("PNG: {e}"))?;
    let mut buf = vec![0u8; reader.output_buffer_size().ok_or("PNG: too large")?];
    let info = reader
        .next_frame(&mut buf)
        .map_err(|e| format!("PNG: {e}"))?;
    if info.color_type != png::ColorType::Rgb || info.bit_depth != png::BitDepth::Eight {
        return Err(format!(
            "PNG: {:?} {:?}, expected 8-bit RGB",
            info.color_type, info.bit_depth
        ));
    }
    buf.truncate(info.buffer_size());
    Ok((info.width, info.height, buf))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jfif_decodes_the_corners_of_the_range() {
        let t = Jfif::new();
        assert_eq!(t.rgb(0, 128, 128), [0, 0, 0]);
        assert_eq!(t.rgb(255, 128, 128), [255, 255, 255]);
        assert_eq!(t.rgb(235, 128, 128), [235, 235, 235]);
        // JFIF red (255, 0, 0) is Y 76, Cb 85, Cr 255 (255.5 clamped), blue (0, 0, 255) is
        // Y 29, Cb 255 (255.5 clamped), Cr 107: back within one step of quantisation.
        assert_eq!(t.rgb(76, 85, 255), [254, 0, 0]);
        assert_eq!(t.rgb(29, 255, 107), [0, 0, 254]);
    }

    #[test]
    fn rgb_formats_are_bgr_in_memory_and_pngs_round_trip() {
        let f = Frame {
            width: 2,
            height: 1,
            format: PixelFormat::Rgb24,
            planes: vec![vec![1, 2, 3, 4, 5, 6]],
        };
        let s = Scanout::from_frame(&f, 0, 7);
        assert_eq!(s.rgb, [3, 2, 1, 6, 5, 4]);
        assert_eq!(s.pixel(1, 0), Some([6, 5, 4]));
        assert_eq!(s.pixel(2, 0), None);
        let f32 = Frame {
            format: PixelFormat::Rgb32,
            planes: vec![vec![1, 2, 3, 0xff, 4, 5, 6, 0xff]],
            ..f
        };
        assert_eq!(frame_rgb(&f32), [3, 2, 1, 6, 5, 4]);
        let (w, h, px) = decode_png(&s.png()).unwrap();
        assert_eq!((w, h, px), (2, 1, s.rgb.clone()));
        assert_eq!(s.file_name(), "out0-fence7-rgb24-2x1.png");
        assert!(decode_png(b"not a png").is_err());
    }

    #[test]
    fn nv12_shares_chroma_over_two_by_two_blocks() {
        let f = Frame {
            width: 4,
            height: 2,
            format: PixelFormat::Nv12,
            planes: vec![
                vec![76, 76, 29, 29, 76, 76, 29, 29],
                vec![85, 255, 255, 107],
            ],
        };
        let s = Scanout::from_frame(&f, 1, 1);
        assert_eq!(s.pixel(0, 1), Some([254, 0, 0]));
        assert_eq!(s.pixel(3, 0), Some([0, 0, 254]));
    }
}
