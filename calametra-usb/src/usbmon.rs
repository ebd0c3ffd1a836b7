//! The Linux usbmon binary packet, as pcap and pcapng carry it under link type 220
//! (`LINKTYPE_USB_LINUX_MMAPPED`): the 64-byte header ([`layout`] is its one definition in
//! the workspace, which `calametra-capture`'s reader uses too), then the data. Feature
//! `record`.
//!
//! [`UrbEvent`] is one submission (`S`) or completion (`C`) of a transfer and
//! [`UrbEvent::encode`] writes it; [`status`] maps a [`TransferError`] to the errno Linux
//! usbmon shows for it. Header fields are little-endian (the files written here are
//! little-endian pcapng sections); the setup packet is in USB wire order. Nothing here does
//! I/O or reads a clock.

use crate::{Setup, TransferError, DIR_IN};
use std::time::Duration;

/// `LINKTYPE_USB_LINUX_MMAPPED`: the 64-byte usbmon header, then the data.
pub const LINKTYPE_USB_LINUX_MMAPPED: u16 = 220;

/// The 64-byte header of link type 220 (`struct usbmon_packet` of Linux
/// `Documentation/usb/usbmon.rst`, `pcap_usb_header_mmapped` of libpcap): each field's byte
/// offset. Link type 189 is the first [`LEGACY_LEN`](layout::LEGACY_LEN) bytes of it.
pub mod layout {
    /// `u64 id`: the URB's id, the same in its `S` and its `C`.
    pub const ID: usize = 0;
    /// `u8 type`: `S` submission, `C` completion, `E` submission error.
    pub const TYPE: usize = 8;
    /// `u8 xfer_type`: 0 isochronous, 1 interrupt, 2 control, 3 bulk.
    pub const XFER_TYPE: usize = 9;
    /// `u8 epnum`: the endpoint number, bit 7 set for IN (0x80 on a control IN).
    pub const EPNUM: usize = 10;
    /// `u8 devnum`: the device's address.
    pub const DEVNUM: usize = 11;
    /// `u16 busnum`.
    pub const BUSNUM: usize = 12;
    /// `u8 flag_setup`: 0 when `setup` holds a setup packet, else a character (`-`).
    pub const FLAG_SETUP: usize = 14;
    /// `u8 flag_data`: 0 when data follows, else a character (`<` IN submission, `>` OUT
    /// completion).
    pub const FLAG_DATA: usize = 15;
    /// `i64 ts_sec`.
    pub const TS_SEC: usize = 16;
    /// `i32 ts_usec`.
    pub const TS_USEC: usize = 24;
    /// `i32 status`: -115 (`EINPROGRESS`) on a submission, 0 or a negative errno on a
    /// completion.
    pub const STATUS: usize = 28;
    /// `u32 length`: bytes asked for (submission) or transferred (completion).
    pub const LENGTH: usize = 32;
    /// `u32 len_cap`: bytes of data in this packet, after the header.
    pub const LEN_CAP: usize = 36;
    /// `u8 setup[8]` (or the isochronous error count and descriptor count).
    pub const SETUP: usize = 40;
    /// Bytes up to here: the legacy header of link type 189.
    pub const LEGACY_LEN: usize = 48;
    /// `i32 interval`: interrupt and isochronous.
    pub const INTERVAL: usize = 48;
    /// `i32 start_frame`: isochronous.
    pub const START_FRAME: usize = 52;
    /// `u32 xfer_flags`: the URB's transfer flags ([`super::URB_DIR_IN`] on an IN).
    pub const XFER_FLAGS: usize = 56;
    /// `u32 ndesc`: isochronous descriptors that follow the header, 16 bytes each.
    pub const NDESC: usize = 60;
    /// The whole header.
    pub const LEN: usize = 64;
}

/// The most data one packet carries, whatever the snap length: its pcapng block (20 bytes of
/// packet header, this header, the data, padding, framing) must stay within a `u32` length.
pub const MAX_CAPTURED: usize = u32::MAX as usize - 1024;

/// `URB_DIR_IN`, the transfer flag Linux sets on an IN URB (seen in `xfer_flags`).
pub const URB_DIR_IN: u32 = 0x200;

/// The URB statuses written here, as Linux numbers them (negative errnos).
pub mod errno {
    /// `-ENOENT`: the URB was killed (`usb_kill_urb`), as the kernel's own timed control
    /// transfer (`usb_control_msg`, usbfs' `USBDEVFS_CONTROL`) does at its timeout.
    pub const ENOENT: i32 = -2;
    /// `-EPIPE`: the endpoint stalled.
    pub const EPIPE: i32 = -32;
    /// `-EPROTO`: a bus or protocol error (bit stuffing, no response, CRC).
    pub const EPROTO: i32 = -71;
    /// `-ECONNRESET`: the URB was unlinked asynchronously (usbfs' `USBDEVFS_DISCARDURB`, what
    /// a program's cancelled transfer gives).
    pub const ECONNRESET: i32 = -104;
    /// `-ESHUTDOWN`: the device went away; the host controller flushed its endpoints.
    pub const ESHUTDOWN: i32 = -108;
    /// `-EINPROGRESS`: every submission's status.
    pub const EINPROGRESS: i32 = -115;
}

/// The status Linux usbmon shows on the completion of a transfer that ended with `r`: 0 when
/// it succeeded (a short transfer included: its length says it), and for a failure:
///
/// | [`TransferError`] | status |
/// |---|---|
/// | `Stall` | -32 `EPIPE` |
/// | `Timeout` | -2 `ENOENT` (the URB killed at its deadline) |
/// | `Cancelled` | -104 `ECONNRESET` (unlinked by the program) |
/// | `Disconnected` | -108 `ESHUTDOWN` (flushed as the device left) |
/// | `Fault` | -71 `EPROTO` |
pub fn status<T>(r: &Result<T, TransferError>) -> i32 {
    match r {
        Ok(_) => 0,
        Err(TransferError::Stall) => errno::EPIPE,
        Err(TransferError::Timeout) => errno::ENOENT,
        Err(TransferError::Cancelled) => errno::ECONNRESET,
        Err(TransferError::Disconnected) => errno::ESHUTDOWN,
        Err(TransferError::Fault) => errno::EPROTO,
    }
}

/// A transfer type, as usbmon numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Xfer {
    /// 1: interrupt.
    Interrupt,
    /// 2: control.
    Control,
    /// 3: bulk.
    Bulk,
}

impl Xfer {
    /// usbmon's `xfer_type` byte.
    pub fn code(self) -> u8 {
        match self {
            Xfer::Interrupt => 1,
            Xfer::Control => 2,
            Xfer::Bulk => 3,
        }
    }
}

/// Whether an event is a transfer's submission or its completion.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stage {
    /// `S`: the host submitted the URB (status -115).
    Submit,
    /// `C`: the URB completed with a status.
    Complete,
}

/// One usbmon event of a transfer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UrbEvent<'a> {
    /// The URB id, the same in the submission and the completion.
    pub id: u64,
    /// Submission or completion.
    pub stage: Stage,
    /// The transfer type.
    pub xfer: Xfer,
    /// The endpoint address, bit 7 set for IN (0x00 or 0x80 for a control transfer, by its
    /// setup's direction).
    pub endpoint: u8,
    /// The device's address.
    pub device: u8,
    /// The bus number.
    pub bus: u16,
    /// The time of the event (since the Unix epoch on hardware; since the run's start in a
    /// simulation).
    pub time: Duration,
    /// 0 or a negative errno ([`status`]); a submission's is -115.
    pub status: i32,
    /// Bytes asked for (submission) or transferred (completion).
    pub length: u32,
    /// The setup packet, on a control submission.
    pub setup: Option<Setup>,
    /// The data carried: OUT data on a submission, IN data on a completion (cut by the
    /// writer's snap length; `length` stays what crossed the bus).
    pub data: &'a [u8],
}

impl UrbEvent<'_> {
    /// Appends the event's packet (the 64-byte header, then at most `snaplen` bytes of
    /// `data`) to `out`, as Linux's `mon_bin` fills it: `flag_setup` 0 with the setup on a
    /// control submission, `-` otherwise; `flag_data` `<` on an IN submission, `>` on an OUT
    /// completion, 0 otherwise; `xfer_flags` [`URB_DIR_IN`] on an IN.
    pub fn encode(&self, snaplen: usize, out: &mut Vec<u8>) {
        use layout as l;
        let is_in = self.endpoint & DIR_IN != 0;
        let cap = self.data.len().min(snaplen).min(MAX_CAPTURED);
        let start = out.len();
        out.resize(start + l::LEN, 0);
        let h = &mut out[start..];
        h[l::ID..l::ID + 8].copy_from_slice(&self.id.to_le_bytes());
        h[l::TYPE] = match self.stage {
            Stage::Submit => b'S',
            Stage::Complete => b'C',
        };
        h[l::XFER_TYPE] = self.xfer.code();
        h[l::EPNUM] = self.endpoint;
        h[l::DEVNUM] = self.device;
        h[l::BUSNUM..l::BUSNUM + 2].copy_from_slice(&self.bus.to_le_bytes());
        let setup = self.setup.filter(|_| self.stage == Stage::Submit);
        h[l::FLAG_SETUP] = if setup.is_some() { 0 } else { b'-' };
        h[l::FLAG_DATA] = match (self.stage, is_in) {
            (Stage::Submit, true) => b'<',
            (Stage::Complete, false) => b'>',
            _ => 0,
        };
        let sec = self.time.as_secs().min(i64::MAX as u64) as i64;
        h[l::TS_SEC..l::TS_SEC + 8].copy_from_slice(&sec.to_le_bytes());
        let usec = self.time.subsec_micros() as i32;
        h[l::TS_USEC..l::TS_USEC + 4].copy_from_slice(&usec.to_le_bytes());
        h[l::STATUS..l::STATUS + 4].copy_from_slice(&self.status.to_le_bytes());
        h[l::LENGTH..l::LENGTH + 4].copy_from_slice(&self.length.to_le_bytes());
        h[l::LEN_CAP..l::LEN_CAP + 4].copy_from_slice(&(cap as u32).to_le_bytes());
        if let Some(s) = setup {
            h[l::SETUP..l::SETUP + 8].copy_from_slice(&s.to_bytes());
        }
        let flags = if is_in { URB_DIR_IN } else { 0 };
        h[l::XFER_FLAGS..l::XFER_FLAGS + 4].copy_from_slice(&flags.to_le_bytes());
        out.extend_from_slice(&self.data[..cap]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control IN submission encodes as packet 137 of the real capture does
    /// (`refdata/usbmon-linktype220-samples.txt`), field for field, time and id aside.
    #[test]
    fn a_control_in_submission_has_the_real_captures_header() {
        let real = "00863e49e89dffff530280190600003cda488062000000001c9a00008dffffff800000000000\
                    0000c08000000000800000000000000000000002000000000000";
        let real: Vec<u8> = (0..real.len())
            .step_by(2)
            .map(|i| u8::from_str_radix(&real[i..i + 2], 16).unwrap())
            .collect();
        let setup = Setup::from_bytes(&real[40..48]).unwrap();
        let e = UrbEvent {
            id: u64::from_le_bytes(real[..8].try_into().unwrap()),
            stage: Stage::Submit,
            xfer: Xfer::Control,
            endpoint: 0x80,
            device: 0x19,
            bus: 6,
            time: Duration::new(0x6280_48da, 0x9a1c * 1000),
            status: errno::EINPROGRESS,
            length: 128,
            setup: Some(setup),
            data: &[],
        };
        let mut out = Vec::new();
        e.encode(usize::MAX, &mut out);
        assert_eq!(out, real);
    }

    /// Data is cut by the snap length while `length` keeps what crossed the bus; an OUT
    /// completion carries no data and says so.
    #[test]
    fn the_snap_length_cuts_data_and_not_length() {
        let e = UrbEvent {
            id: 7,
            stage: Stage::Submit,
            xfer: Xfer::Bulk,
            endpoint: 0x01,
            device: 2,
            bus: 1,
            time: Duration::from_micros(1_500_001),
            status: errno::EINPROGRESS,
            length: 10,
            setup: None,
            data: &[1, 2, 3, 4, 5, 6, 7, 8, 9, 10],
        };
        let mut out = Vec::new();
        e.encode(4, &mut out);
        assert_eq!(out.len(), layout::LEN + 4);
        assert_eq!(
            &out[layout::LENGTH..layout::LENGTH + 4],
            &10u32.to_le_bytes()
        );
        assert_eq!(
            &out[layout::LEN_CAP..layout::LEN_CAP + 4],
            &4u32.to_le_bytes()
        );
        assert_eq!(out[layout::FLAG_SETUP], b'-');
        assert_eq!(
            &out[layout::TS_USEC..layout::TS_USEC + 4],
            &500_001i32.to_le_bytes()
        );
        let c = UrbEvent {
            stage: Stage::Complete,
            status: status(&Err::<(), _>(TransferError::Stall)),
            data: &[],
            ..e
        };
        let mut out = Vec::new();
        c.encode(usize::MAX, &mut out);
        assert_eq!(out[layout::FLAG_DATA], b'>');
        assert_eq!(
            &out[layout::STATUS..layout::STATUS + 4],
            &(-32i32).to_le_bytes()
        );
    }

    #[test]
    fn every_transfer_error_has_the_status_linux_shows() {
        let s = |e| status(&Err::<(), _>(e));
        assert_eq!(s(TransferError::Stall), -32);
        assert_eq!(s(TransferError::Timeout), -2);
        assert_eq!(s(TransferError::Cancelled), -104);
        assert_eq!(s(TransferError::Disconnected), -108);
        assert_eq!(s(TransferError::Fault), -71);
        assert_eq!(status(&Ok::<_, TransferError>(())), 0);
    }
}
