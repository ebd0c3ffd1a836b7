//! How a DFU device decides that a downloaded image is complete before it manifests it
//! (`image_check` in the spec): none, or a CRC-32 trailer (IEEE 802.3, the same as
//! `zlib.crc32`), and the status it reports when it refuses. Nothing here knows about the flash
//! banks, USB or the state machine; the spec (`spec.rs`) and the flash (`flash.rs`) both use it.

use super::state::Status;

/// How the device decides that a downloaded image is complete before manifesting it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ImageCheck {
    /// Any non-empty image is accepted.
    None,
    /// The last 4 bytes are the CRC-32 (IEEE, as `zlib.crc32`) of the rest, little-endian.
    Crc32Trailer,
}

/// CRC-32 (IEEE 802.3, reflected polynomial 0xEDB88320, initial value and final XOR 0xFFFFFFFF):
/// the value `zlib.crc32` and `crc32(1)` print.
pub fn crc32(data: &[u8]) -> u32 {
    // Slicing-by-8: eight table lookups per 8 bytes (a 64 KiB image is checked on every
    // manifestation, thousands of times in an exploration).
    let t = &CRC_TABLES;
    let mut c = 0xffff_ffffu32;
    let mut chunks = data.chunks_exact(8);
    for b in &mut chunks {
        let lo = c ^ u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let hi = u32::from_le_bytes([b[4], b[5], b[6], b[7]]);
        c = t[7][(lo & 0xff) as usize]
            ^ t[6][((lo >> 8) & 0xff) as usize]
            ^ t[5][((lo >> 16) & 0xff) as usize]
            ^ t[4][(lo >> 24) as usize]
            ^ t[3][(hi & 0xff) as usize]
            ^ t[2][((hi >> 8) & 0xff) as usize]
            ^ t[1][((hi >> 16) & 0xff) as usize]
            ^ t[0][(hi >> 24) as usize];
    }
    for &b in chunks.remainder() {
        c = t[0][((c ^ b as u32) & 0xff) as usize] ^ (c >> 8);
    }
    !c
}

/// `CRC_TABLES[0]` is the classic byte table; `CRC_TABLES[k][i]` is the CRC of byte `i`
/// followed by `k` zero bytes.
const CRC_TABLES: [[u32; 256]; 8] = {
    let mut t = [[0u32; 256]; 8];
    let mut i = 0;
    while i < 256 {
        let mut c = i as u32;
        let mut k = 0;
        while k < 8 {
            c = if c & 1 != 0 {
                0xedb8_8320 ^ (c >> 1)
            } else {
                c >> 1
            };
            k += 1;
        }
        t[0][i] = c;
        i += 1;
    }
    let mut k = 1;
    while k < 8 {
        let mut i = 0;
        while i < 256 {
            let prev = t[k - 1][i];
            t[k][i] = t[0][(prev & 0xff) as usize] ^ (prev >> 8);
            i += 1;
        }
        k += 1;
    }
    t
};

/// Appends the CRC-32 trailer `image_check: "crc32-trailer"` expects: `body` followed by
/// `crc32(body)` little-endian.
pub fn seal_image(body: &[u8]) -> Vec<u8> {
    let mut v = body.to_vec();
    v.extend_from_slice(&crc32(body).to_le_bytes());
    v
}

/// Whether `image` passes `check` (a complete image the device agrees to manifest).
pub fn image_complete(check: ImageCheck, image: &[u8]) -> bool {
    check_image(check, image).is_ok()
}

/// The status a device reports when it refuses to manifest `image`.
pub(super) fn check_image(check: ImageCheck, image: &[u8]) -> Result<(), Status> {
    match check {
        ImageCheck::None if image.is_empty() => Err(Status::ErrNotDone),
        ImageCheck::None => Ok(()),
        ImageCheck::Crc32Trailer => {
            if image.len() < 4 {
                return Err(Status::ErrNotDone);
            }
            let (body, tail) = image.split_at(image.len() - 4);
            if crc32(body).to_le_bytes() == tail {
                Ok(())
            } else {
                Err(Status::ErrFile)
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc32_matches_zlib() {
        assert_eq!(crc32(b""), 0);
        assert_eq!(crc32(b"123456789"), 0xcbf4_3926);
        assert_eq!(
            crc32(b"The quick brown fox jumps over the lazy dog"),
            0x414f_a339
        );
        // Every length around the 8-byte stride agrees with the bytewise definition.
        let data: Vec<u8> = (0..40u32).map(|i| (i * 37 + 11) as u8).collect();
        for n in 0..data.len() {
            let mut c = 0xffff_ffffu32;
            for &b in &data[..n] {
                c ^= b as u32;
                for _ in 0..8 {
                    c = if c & 1 != 0 {
                        0xedb8_8320 ^ (c >> 1)
                    } else {
                        c >> 1
                    };
                }
            }
            assert_eq!(crc32(&data[..n]), !c, "length {n}");
        }
        let sealed = seal_image(b"abc");
        assert!(image_complete(ImageCheck::Crc32Trailer, &sealed));
        let mut bad = sealed.clone();
        bad[0] ^= 1;
        assert_eq!(
            check_image(ImageCheck::Crc32Trailer, &bad),
            Err(Status::ErrFile)
        );
        assert_eq!(
            check_image(ImageCheck::Crc32Trailer, &[1, 2]),
            Err(Status::ErrNotDone)
        );
        assert!(image_complete(ImageCheck::None, &[1]));
        assert!(!image_complete(ImageCheck::None, &[]));
    }
}
