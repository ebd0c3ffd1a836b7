//! The DFU device's flash: two banks, one holding the running ("valid") image and one staging a
//! download, bounded by the spec's `flash.size`. The old image stays valid until a complete new
//! image is manifested; every image ever marked valid is kept in a history for invariants.
//! Whether an image is complete is `image.rs`'s (re-exported here, where it used to live).
//! Nothing here knows about USB or the state machine.

use super::image::{check_image, ImageCheck};
pub use super::image::{crc32, image_complete, seal_image};
use super::state::Status;

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
