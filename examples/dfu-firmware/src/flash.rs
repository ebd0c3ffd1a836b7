//! The firmware's flash: a 64 KiB region at 0x0800_0000 kept in memory, behind usbd-dfu's
//! [`DFUMemIO`] trait, exactly the calls a bootloader on a microcontroller would implement.
//!
//! The region is erased (0xFF) at power-on: the device holds no application yet. Programming
//! writes the block usbd-dfu buffered at the address it computed (the DfuSe address pointer plus
//! `(wBlockNum - 2) * wTransferSize`); erase fills a 1 KiB page with 0xFF; manifestation marks
//! the region up to the end of the highest block programmed as the image the device would
//! boot, and records its length, as a bootloader keeps its application's size. Reads (uploads)
//! return that image, from its start to its end, so an upload ends on a short frame at the
//! end of the installed image and is empty before the first manifestation, as in the DFU 1.1
//! model; a download in progress is not visible to an upload.
//!
//! A simplification, stated: programming overwrites bytes as RAM would, where NOR flash could
//! only clear bits of an erased page. Hosts that follow DfuSe (dfu-util) erase before they
//! write; the DFU 1.1 updater does not, and on real flash would need to.
//!
//! The state lives in a [`Flash`] shared with the firmware image (`Rc<RefCell<_>>`, one thread)
//! so tests and invariants read the ground truth without asking the firmware.

use std::cell::RefCell;
use std::rc::Rc;
use usbd_dfu::{DFUManifestationError, DFUMemError, DFUMemIO};

/// Where the region starts (an STM32-style flash base).
pub const BASE: u32 = 0x0800_0000;
/// Bytes in the region.
pub const SIZE: usize = 64 * 1024;
/// The erase unit.
pub const PAGE: usize = 1024;
/// Bytes per DFU_DNLOAD / DFU_UPLOAD: usb-device's control buffer holds 128 bytes.
pub const TRANSFER_SIZE: u16 = 128;

/// The flash's contents and what happened to it.
#[derive(Clone, Debug)]
pub struct Flash {
    /// The region's bytes.
    pub bytes: Vec<u8>,
    /// The block usbd-dfu stored for the next `program`.
    pub buffer: Vec<u8>,
    /// The contents manifestation last marked as the image to boot.
    pub manifested: Option<Vec<u8>>,
    /// The end of the highest block programmed since power-on (bytes from the base).
    pub written_end: usize,
    /// Blocks programmed.
    pub programs: u32,
    /// Pages erased (a mass erase counts every page).
    pub erases: u32,
    /// Manifestations.
    pub manifestations: u32,
}

impl Default for Flash {
    fn default() -> Self {
        Flash {
            bytes: vec![0xff; SIZE],
            buffer: Vec::new(),
            manifested: None,
            written_end: 0,
            programs: 0,
            erases: 0,
            manifestations: 0,
        }
    }
}

/// The [`DFUMemIO`] usbd-dfu drives.
pub struct FlashMem {
    flash: Rc<RefCell<Flash>>,
    /// What `read` returns, copied out of the shared state (usbd-dfu borrows it).
    read_buf: Vec<u8>,
}

impl FlashMem {
    /// Memory over a shared flash.
    pub fn new(flash: Rc<RefCell<Flash>>) -> FlashMem {
        FlashMem {
            flash,
            read_buf: Vec::new(),
        }
    }
}

/// The offset of `address` in the region, when `len` bytes from it fit.
fn offset(address: u32, len: usize) -> Result<usize, DFUMemError> {
    let off = address.checked_sub(BASE).ok_or(DFUMemError::Address)? as usize;
    if off.checked_add(len).is_none_or(|end| end > SIZE) {
        return Err(DFUMemError::Address);
    }
    Ok(off)
}

impl DFUMemIO for FlashMem {
    const INITIAL_ADDRESS_POINTER: u32 = BASE;
    const MEM_INFO_STRING: &'static str = "@Flash/0x08000000/64*1Kg";
    const PROGRAM_TIME_MS: u32 = 4;
    const ERASE_TIME_MS: u32 = 4;
    const FULL_ERASE_TIME_MS: u32 = 64;
    const MANIFESTATION_TIME_MS: u32 = 30;
    const TRANSFER_SIZE: u16 = TRANSFER_SIZE;

    fn read(&mut self, address: u32, length: usize) -> Result<&[u8], DFUMemError> {
        // Reads return the installed image and stop at its end: the frame there is short.
        let off = offset(address, 0)?;
        let f = self.flash.borrow();
        let image = f.manifested.as_deref().unwrap_or(&[]);
        let start = off.min(image.len());
        let end = off.saturating_add(length).min(image.len());
        self.read_buf.clear();
        self.read_buf.extend_from_slice(&image[start..end]);
        Ok(&self.read_buf)
    }

    fn erase(&mut self, address: u32) -> Result<(), DFUMemError> {
        let off = offset(address, 0)?;
        if off >= SIZE {
            return Err(DFUMemError::Address);
        }
        let page = off / PAGE * PAGE;
        let mut f = self.flash.borrow_mut();
        f.bytes[page..page + PAGE].fill(0xff);
        f.erases += 1;
        Ok(())
    }

    fn erase_all(&mut self) -> Result<(), DFUMemError> {
        let mut f = self.flash.borrow_mut();
        f.bytes.fill(0xff);
        f.erases += (SIZE / PAGE) as u32;
        Ok(())
    }

    fn store_write_buffer(&mut self, src: &[u8]) -> Result<(), ()> {
        if src.len() > TRANSFER_SIZE as usize {
            return Err(());
        }
        let mut f = self.flash.borrow_mut();
        f.buffer.clear();
        f.buffer.extend_from_slice(src);
        Ok(())
    }

    fn program(&mut self, address: u32, length: usize) -> Result<(), DFUMemError> {
        let mut f = self.flash.borrow_mut();
        if length > f.buffer.len() {
            return Err(DFUMemError::Prog);
        }
        let off = offset(address, length)?;
        let Flash { bytes, buffer, .. } = &mut *f;
        bytes[off..off + length].copy_from_slice(&buffer[..length]);
        f.written_end = f.written_end.max(off + length);
        f.programs += 1;
        Ok(())
    }

    fn manifestation(&mut self) -> Result<(), DFUManifestationError> {
        let mut f = self.flash.borrow_mut();
        f.manifested = Some(f.bytes[..f.written_end].to_vec());
        f.manifestations += 1;
        Ok(())
    }
}
