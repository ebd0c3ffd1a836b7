//! The DFU device's flash: two banks, one holding the running ("valid") image and one staging a
//! download, bounded by the spec's `flash.size`. The old image stays valid until a complete new
//! image is manifested; every image ever marked valid is kept in a history for invariants.
//!
//! Also the CRC-32 that `image_check: "crc32-trailer"` uses (IEEE 802.3, the same as
//! `zlib.crc32`). Nothing here knows about USB or the state machine.

use super::spec::ImageCheck;
use super::state::Status;

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
fn check_image(check: ImageCheck, image: &[u8]) -> Result<(), Status> {
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

/// An image that was marked valid, and when.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidImage {
    /// Virtual time it became valid (0 for the factory image).
    pub at_ns: u64,
    /// Its bytes.
    pub bytes: Vec<u8>,
}

/// Two banks: the running image and the staging bank a download fills.
#[derive(Clone, Debug)]
pub struct Flash {
    size: usize,
    check: ImageCheck,
    valid: Option<Vec<u8>>,
    staging: Vec<u8>,
    history: Vec<ValidImage>,
}

impl Flash {
    /// A flash whose staging bank holds `size` bytes, running `factory` (none when empty).
    pub fn new(size: usize, check: ImageCheck, factory: &[u8]) -> Flash {
        let valid = (!factory.is_empty()).then(|| factory.to_vec());
        let history = valid
            .iter()
            .map(|b| ValidImage {
                at_ns: 0,
                bytes: b.clone(),
            })
            .collect();
        Flash {
            size,
            check,
            valid,
            staging: Vec::new(),
            history,
        }
    }

    /// Bytes one bank holds.
    pub fn size(&self) -> usize {
        self.size
    }

    /// The running image, if the device has a valid one.
    pub fn valid_image(&self) -> Option<&[u8]> {
        self.valid.as_deref()
    }

    /// What the current download has written to the staging bank so far.
    pub fn staged(&self) -> &[u8] {
        &self.staging
    }

    /// Every image marked valid, oldest first (the factory image at time 0).
    pub fn history(&self) -> &[ValidImage] {
        &self.history
    }

    /// Starts a download: the staging bank is erased.
    pub fn begin(&mut self) {
        self.staging.clear();
    }

    /// Whether `len` more bytes fit the staging bank.
    pub fn fits(&self, len: usize) -> bool {
        self.staging.len().saturating_add(len) <= self.size
    }

    /// Programs the next block of the download.
    pub fn program(&mut self, block: &[u8]) -> Result<(), Status> {
        if !self.fits(block.len()) {
            return Err(Status::ErrAddress);
        }
        self.staging.extend_from_slice(block);
        Ok(())
    }

    /// Whether the staged image is complete, or the status the device refuses it with.
    pub fn check_staged(&self) -> Result<(), Status> {
        check_image(self.check, &self.staging)
    }

    /// Makes the staged image the running one (the end of manifestation).
    pub fn commit(&mut self, at_ns: u64) {
        let image = std::mem::take(&mut self.staging);
        self.history.push(ValidImage {
            at_ns,
            bytes: image.clone(),
        });
        self.valid = Some(image);
    }

    /// Drops the staged bytes (an aborted download); the running image is untouched.
    pub fn discard(&mut self) {
        self.staging.clear();
    }

    /// A test-only lie: programs over the running image, so the partial download is what the
    /// device would boot.
    pub(crate) fn sabotage_in_place(&mut self, at_ns: u64) {
        self.valid = Some(self.staging.clone());
        self.history.push(ValidImage {
            at_ns,
            bytes: self.staging.clone(),
        });
    }

    /// Up to `len` bytes of the running image from `offset` (empty past its end).
    pub fn read(&self, offset: usize, len: usize) -> &[u8] {
        let img = self.valid.as_deref().unwrap_or(&[]);
        let start = offset.min(img.len());
        let end = offset.saturating_add(len).min(img.len());
        &img[start..end]
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

    #[test]
    fn the_old_image_stays_until_commit_and_the_bank_is_bounded() {
        let mut f = Flash::new(8, ImageCheck::None, b"old");
        f.begin();
        f.program(b"1234").unwrap();
        assert_eq!(f.valid_image(), Some(&b"old"[..]));
        assert_eq!(f.program(b"56789"), Err(Status::ErrAddress));
        f.program(b"5678").unwrap();
        f.commit(10);
        assert_eq!(f.valid_image(), Some(&b"12345678"[..]));
        assert_eq!(f.read(6, 4), b"78");
        assert_eq!(f.read(9, 4), b"");
        assert_eq!(f.history().len(), 2);
    }
}
