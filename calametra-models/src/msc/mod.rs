//! A small USB mass-storage device (`calametra.spec.msc`, `specs/msc-disk.json`): one interface
//! of class 8, subclass 6 (SCSI transparent command set), protocol 0x50 (Bulk-Only Transport),
//! with a bulk IN and a bulk OUT endpoint, backed by an in-memory disk of `msc.blocks` blocks of
//! 512 bytes that starts zeroed. What Linux's usb-storage and sd_mod bind to as `/dev/sda`.
//!
//! Bulk-Only Transport (USB MSC BOT 1.0): a 31-byte Command Block Wrapper on the OUT endpoint,
//! the data stage in the direction it says, then a 13-byte Command Status Wrapper on the IN
//! endpoint with the residue. The SCSI commands the kernel needs: TEST UNIT READY, REQUEST
//! SENSE, INQUIRY (standard data; a VPD page is an ILLEGAL REQUEST, as for a device that has
//! none), READ CAPACITY(10), READ(10), WRITE(10), MODE SENSE(6) (the header: no pages, not
//! write-protected), PREVENT/ALLOW MEDIUM REMOVAL, START STOP UNIT, SYNCHRONIZE CACHE(10). Any
//! other opcode fails with ILLEGAL REQUEST / INVALID COMMAND OPERATION CODE (SPC-4 §4.5.6 says
//! so for an unsupported command: that is evidence, not a model gap). Class requests: GET MAX
//! LUN (one LUN) and the Bulk-Only Mass Storage Reset.
//!
//! It checks what it receives: a CBW must be 31 bytes with the `USBC` signature and a LUN of
//! 0, and a READ or WRITE must stay on the disk; anything else is recorded
//! ([`Msc::refused`]) and breaks [`bot_well_formed`]. Blocks written are counted per block
//! ([`Msc::writes`]), so a scenario can tell how far a write got when the device was unplugged.

use crate::class_device::StandardDevice;
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};

/// The spec format this model registers.
pub const FORMAT: &str = "calametra.spec.msc";

/// Bytes in a block.
pub const BLOCK: usize = 512;

calametra_core::names! {
    /// Coverage marks of the mass-storage model.
    pub mod marks {
        /// A READ(10) was served.
        READ = "MscRead";
        /// A WRITE(10) reached the disk.
        WRITE = "MscWrite";
        /// A command failed with CHECK CONDITION.
        CHECK_CONDITION = "MscCheckCondition";
        /// A Bulk-Only Mass Storage Reset.
        BOT_RESET = "MscBotReset";
        /// Something was refused (a malformed CBW, a transfer off the disk).
        REFUSED = "MscRefused";
    }
}

/// Where the transport is.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Phase {
    /// Waiting for a CBW.
    Command,
    /// Data to the host, then the CSW.
    DataIn(Vec<u8>),
    /// Data from the host: `left` bytes, written from block `lba` on (`None`: discarded).
    DataOut {
        left: usize,
        lba: Option<u64>,
        at: usize,
    },
    /// The CSW is next.
    Status,
}

/// The mass-storage model.
pub struct Msc {
    std: StandardDevice,
    disk: Vec<u8>,
    blocks: u64,
    inquiry: Vec<u8>,
    phase: Phase,
    tag: u32,
    expected: u32,
    moved: u32,
    status: u8,
    sense: (u8, u8, u8),
    prevent: bool,
    writes: u64,
    refused: Vec<String>,
}

impl Msc {
    /// The device `spec` describes; errors name the field.
    pub fn try_from_spec(spec: &Spec) -> Result<Msc, calametra_core::Error> {
        let std = StandardDevice::from_spec(spec)?;
        let blocks = spec
            .u64("msc.blocks")
            .ok()
            .filter(|b| (64..=16384).contains(b))
            .ok_or_else(|| spec.error("msc.blocks", "expected 64..=16384 blocks of 512 bytes"))?;
        let text = |field: &str, len: usize| -> Result<Vec<u8>, calametra_core::Error> {
            let s = spec.str(field)?;
            if !s.is_ascii() || s.len() > len {
                return Err(spec.error(field, format!("expected at most {len} ASCII characters")));
            }
            Ok(format!("{s:<len$}").into_bytes())
        };
        // Standard INQUIRY data (SPC-4 §6.4.2): a direct-access block device, removable,
        // SPC-2, response format 2, 31 more bytes.
        let mut inquiry = vec![0x00, 0x80, 0x04, 0x02, 31, 0, 0, 0];
        inquiry.extend(text("msc.vendor", 8)?);
        inquiry.extend(text("msc.product", 16)?);
        inquiry.extend(text("msc.revision", 4)?);
        Ok(Msc {
            std,
            disk: vec![0; blocks as usize * BLOCK],
            blocks,
            inquiry,
            phase: Phase::Command,
            tag: 0,
            expected: 0,
            moved: 0,
            status: 0,
            sense: (0, 0, 0),
            prevent: false,
            writes: 0,
            refused: Vec::new(),
        })
    }

    /// The device `spec` describes. Panics with the spec's error (for scenarios).
    pub fn from_spec(spec: &Spec) -> Msc {
        match Msc::try_from_spec(spec) {
            Ok(m) => m,
            Err(e) => panic!("calametra: {e}"),
        }
    }

    /// The disk's bytes.
    pub fn disk(&self) -> &[u8] {
        &self.disk
    }

    /// Blocks written so far.
    pub fn writes(&self) -> u64 {
        self.writes
    }

    /// What was refused, each with why.
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    fn state(&self) -> &'static str {
        match self.phase {
            Phase::Command => "command",
            Phase::DataIn(_) => "data_in",
            Phase::DataOut { .. } => "data_out",
            Phase::Status => "status",
        }
    }

    fn refuse(&mut self, cx: &mut DevCtx<'_>, why: String) {
        cx.mark(marks::REFUSED);
        self.refused.push(why);
    }

    /// A failed command: CHECK CONDITION with `sense` (key, ASC, ASCQ).
    fn check(&mut self, cx: &mut DevCtx<'_>, sense: (u8, u8, u8)) {
        cx.mark(marks::CHECK_CONDITION);
        self.status = 1;
        self.sense = sense;
    }

    /// The LBA and block count of a READ(10)/WRITE(10), if they stay on the disk.
    fn extent(&mut self, cx: &mut DevCtx<'_>, cdb: &[u8]) -> Option<(u64, usize)> {
        let lba = u64::from(u32::from_be_bytes([cdb[2], cdb[3], cdb[4], cdb[5]]));
        let n = usize::from(u16::from_be_bytes([cdb[7], cdb[8]]));
        if lba + n as u64 > self.blocks {
            self.refuse(
                cx,
                format!(
                    "{:#04x} of {n} blocks at {lba} past the disk's {}",
                    cdb[0], self.blocks
                ),
            );
            // LOGICAL BLOCK ADDRESS OUT OF RANGE.
            self.check(cx, (0x05, 0x21, 0x00));
            return None;
        }
        Some((lba, n))
    }

    /// A CBW: decode it and set up the data stage.
    fn command(&mut self, cx: &mut DevCtx<'_>, cbw: &[u8]) -> Reply {
        if cbw.len() != 31 || cbw[..4] != *b"USBC" || cbw[13] != 0 || !(1..=16).contains(&cbw[14]) {
            self.refuse(
                cx,
                format!(
                    "a CBW of {} bytes: {}",
                    cbw.len(),
                    calametra_core::hex::encode(cbw)
                ),
            );
            // BOT 6.6.1: an invalid CBW stalls both bulk endpoints until a reset recovery.
            return Reply::Stall;
        }
        self.tag = u32::from_le_bytes([cbw[4], cbw[5], cbw[6], cbw[7]]);
        self.expected = u32::from_le_bytes([cbw[8], cbw[9], cbw[10], cbw[11]]);
        let to_host = cbw[12] & 0x80 != 0;
        self.moved = 0;
        self.status = 0;
        let cdb = cbw[15..15 + usize::from(cbw[14])].to_vec();
        let mut cdb16 = cdb.clone();
        cdb16.resize(16, 0);
        let alloc = |n: usize| n.min(self.expected as usize);
        let data_in = |v: Vec<u8>| Phase::DataIn(v);
        self.phase = match cdb16[0] {
            // TEST UNIT READY, PREVENT/ALLOW MEDIUM REMOVAL, START STOP UNIT, SYNCHRONIZE CACHE.
            0x00 | 0x1b | 0x35 => Phase::Status,
            0x1e => {
                self.prevent = cdb16[4] & 1 != 0;
                Phase::Status
            }
            // REQUEST SENSE: fixed format, 18 bytes.
            0x03 => {
                let (key, asc, ascq) = self.sense;
                let mut s = vec![
                    0x70, 0, key, 0, 0, 0, 0, 10, 0, 0, 0, 0, asc, ascq, 0, 0, 0, 0,
                ];
                s.truncate(alloc(usize::from(cdb16[4])));
                self.sense = (0, 0, 0);
                data_in(s)
            }
            // INQUIRY: standard data; no VPD pages.
            0x12 if cdb16[1] & 1 == 0 => {
                let mut v = self.inquiry.clone();
                v.truncate(alloc(usize::from(u16::from_be_bytes([cdb16[3], cdb16[4]]))));
                data_in(v)
            }
            // READ CAPACITY(10): the last LBA and the block size.
            0x25 => {
                let mut v = ((self.blocks - 1) as u32).to_be_bytes().to_vec();
                v.extend((BLOCK as u32).to_be_bytes());
                v.truncate(alloc(8));
                data_in(v)
            }
            // MODE SENSE(6): the header only (no pages, not write-protected).
            0x1a => {
                let mut v = vec![3, 0, 0, 0];
                v.truncate(alloc(usize::from(cdb16[4])));
                data_in(v)
            }
            0x28 => match self.extent(cx, &cdb16) {
                Some((lba, n)) => {
                    cx.mark(marks::READ);
                    let from = lba as usize * BLOCK;
                    let mut v = self.disk[from..from + n * BLOCK].to_vec();
                    v.truncate(self.expected as usize);
                    data_in(v)
                }
                None => data_in(Vec::new()),
            },
            0x2a => {
                let lba = self.extent(cx, &cdb16).map(|(lba, n)| {
                    if n * BLOCK != self.expected as usize {
                        self.refuse(
                            cx,
                            format!(
                                "WRITE(10) of {n} blocks with {} bytes to transfer",
                                self.expected
                            ),
                        );
                    }
                    lba
                });
                Phase::DataOut {
                    left: self.expected as usize,
                    lba,
                    at: 0,
                }
            }
            _ => {
                // INVALID COMMAND OPERATION CODE (or a VPD page this device lacks: INVALID
                // FIELD IN CDB).
                let asc = if cdb16[0] == 0x12 { 0x24 } else { 0x20 };
                self.check(cx, (0x05, asc, 0x00));
                if to_host {
                    data_in(Vec::new())
                } else {
                    Phase::DataOut {
                        left: self.expected as usize,
                        lba: None,
                        at: 0,
                    }
                }
            }
        };
        // A data-out command with nothing to transfer goes straight to its status.
        if matches!(self.phase, Phase::DataOut { left: 0, .. }) {
            self.phase = Phase::Status;
        }
        Reply::Ack
    }

    /// The CSW of the command just done.
    fn csw(&mut self) -> Vec<u8> {
        let mut v = b"USBS".to_vec();
        v.extend(self.tag.to_le_bytes());
        v.extend(self.expected.saturating_sub(self.moved).to_le_bytes());
        v.push(self.status);
        self.phase = Phase::Command;
        v
    }
}

calametra_core::register_model!(FORMAT, Msc::try_from_spec);

/// Every command block the model received was well formed and stayed on the disk.
pub fn bot_well_formed(d: &Msc) -> Result<(), String> {
    match d.refused() {
        [] => Ok(()),
        r => Err(format!(
            "the mass-storage model refused {}: {}",
            r.len(),
            r.join("; ")
        )),
    }
}

impl Device for Msc {
    fn name(&self) -> &str {
        "msc"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, _data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            // GET MAX LUN (BOT 3.2): one LUN.
            (0xa1, 0xfe) => Reply::Data(vec![0]),
            // Bulk-Only Mass Storage Reset (BOT 3.1).
            (0x21, 0xff) => {
                cx.mark(marks::BOT_RESET);
                self.phase = Phase::Command;
                Reply::Ack
            }
            (t, _) if t & 0x60 == 0x20 => {
                cx.model_gap(
                    &format!(
                        "class request {:#04x}/{:#04x}",
                        setup.request_type, setup.request
                    ),
                    self.state(),
                );
                Reply::Stall
            }
            _ => {
                let state = self.state();
                self.std.standard(cx, setup, state, |_, _, _| None)
            }
        }
    }

    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        if ep != 0x02 || self.std.halted(ep) {
            return Reply::Stall;
        }
        match self.phase.clone() {
            Phase::Command => self.command(cx, data),
            Phase::DataOut { left, lba, at } => {
                let n = data.len().min(left);
                if let Some(lba) = lba {
                    let from = lba as usize * BLOCK + at;
                    let end = (from + n).min(self.disk.len());
                    self.disk[from..end].copy_from_slice(&data[..end - from]);
                    let before = at / BLOCK;
                    let after = (at + n) / BLOCK;
                    if after > before {
                        cx.mark(marks::WRITE);
                        self.writes += (after - before) as u64;
                    }
                }
                self.moved += n as u32;
                self.phase = if left - n == 0 {
                    Phase::Status
                } else {
                    Phase::DataOut {
                        left: left - n,
                        lba,
                        at: at + n,
                    }
                };
                Reply::Ack
            }
            _ => {
                self.refuse(
                    cx,
                    format!("{} bytes on bulk OUT in phase {}", data.len(), self.state()),
                );
                Reply::Stall
            }
        }
    }

    fn poll_in(&mut self, _cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        if ep != 0x81 || self.std.halted(ep) {
            return Reply::Stall;
        }
        match &mut self.phase {
            Phase::DataIn(v) => {
                let n = v.len().min(max_len);
                let chunk: Vec<u8> = v.drain(..n).collect();
                self.moved += n as u32;
                // A short (or empty) packet ends the data stage; a full one may be followed
                // by more.
                if v.is_empty() && (n < max_len || self.moved >= self.expected) {
                    self.phase = Phase::Status;
                }
                Reply::Data(chunk)
            }
            Phase::Status => Reply::Data(self.csw()),
            _ => Reply::Nak,
        }
    }

    fn on_reset(&mut self, _cx: &mut DevCtx<'_>) {
        self.std.reset();
        self.phase = Phase::Command;
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        match (setup.request_type, setup.request) {
            (0xa1, 0xfe) => Some("get_max_lun"),
            (0x21, 0xff) => Some("bot_reset"),
            _ => None,
        }
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("phase".into(), self.state().into()),
            ("blocks".into(), self.blocks.to_string()),
            ("blocks written".into(), self.writes.to_string()),
            ("medium removal prevented".into(), self.prevent.to_string()),
            ("refused".into(), self.refused.len().to_string()),
        ]
    }
}

#[cfg(test)]
mod tests;
