//! The DFU 1.1 requests as a host sends them, over any [`UsbInterface`]: DFU_DETACH,
//! DFU_DNLOAD, DFU_UPLOAD, DFU_GETSTATUS, DFU_CLRSTATUS, DFU_GETSTATE, DFU_ABORT, and the
//! GET_DESCRIPTOR reads the updater needs. One request, one transfer: no retries here.
//!
//! The updater's own copy of the DFU vocabulary: it does not share code with the model it is
//! tested against.

use calametra_usb::{ControlIn, ControlOut, ControlType, Recipient, TransferError, UsbInterface};
use std::fmt;
use std::time::Duration;

const DETACH: u8 = 0;
const DNLOAD: u8 = 1;
const UPLOAD: u8 = 2;
const GETSTATUS: u8 = 3;
const CLRSTATUS: u8 = 4;
const GETSTATE: u8 = 5;
const ABORT: u8 = 6;

/// `bState` values (DFU 1.1 section 6.1.2).
pub mod state {
    /// appIDLE.
    pub const APP_IDLE: u8 = 0;
    /// appDETACH.
    pub const APP_DETACH: u8 = 1;
    /// dfuIDLE.
    pub const IDLE: u8 = 2;
    /// dfuDNLOAD-SYNC.
    pub const DNLOAD_SYNC: u8 = 3;
    /// dfuDNBUSY.
    pub const DNBUSY: u8 = 4;
    /// dfuDNLOAD-IDLE.
    pub const DNLOAD_IDLE: u8 = 5;
    /// dfuMANIFEST-SYNC.
    pub const MANIFEST_SYNC: u8 = 6;
    /// dfuMANIFEST.
    pub const MANIFEST: u8 = 7;
    /// dfuMANIFEST-WAIT-RESET.
    pub const MANIFEST_WAIT_RESET: u8 = 8;
    /// dfuUPLOAD-IDLE.
    pub const UPLOAD_IDLE: u8 = 9;
    /// dfuERROR.
    pub const ERROR: u8 = 10;

    /// The spec's name of a state.
    pub fn name(s: u8) -> &'static str {
        match s {
            APP_IDLE => "appIDLE",
            APP_DETACH => "appDETACH",
            IDLE => "dfuIDLE",
            DNLOAD_SYNC => "dfuDNLOAD-SYNC",
            DNBUSY => "dfuDNBUSY",
            DNLOAD_IDLE => "dfuDNLOAD-IDLE",
            MANIFEST_SYNC => "dfuMANIFEST-SYNC",
            MANIFEST => "dfuMANIFEST",
            MANIFEST_WAIT_RESET => "dfuMANIFEST-WAIT-RESET",
            UPLOAD_IDLE => "dfuUPLOAD-IDLE",
            ERROR => "dfuERROR",
            _ => "(unknown state)",
        }
    }
}

/// `bStatus` names (DFU 1.1 section 6.1.2), index = code.
pub const STATUS_NAMES: [&str; 16] = [
    "OK",
    "errTARGET",
    "errFILE",
    "errWRITE",
    "errERASE",
    "errCHECK_ERASED",
    "errPROG",
    "errVERIFY",
    "errADDRESS",
    "errNOTDONE",
    "errFIRMWARE",
    "errVENDOR",
    "errUSBR",
    "errPOR",
    "errUNKNOWN",
    "errSTALLEDPKT",
];

/// A DFU_GETSTATUS answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Status {
    /// bStatus (0 = OK).
    pub status: u8,
    /// bwPollTimeout: how long to wait before the next DFU_GETSTATUS.
    pub poll_timeout: Duration,
    /// bState.
    pub state: u8,
    /// iString.
    pub istring: u8,
}

impl Status {
    /// Decodes the 6 bytes; anything else, or a code DFU 1.1 does not define, is an error.
    pub fn parse(b: &[u8]) -> Result<Status, String> {
        if b.len() != 6 {
            return Err(format!(
                "DFU_GETSTATUS returned {} bytes, expected 6",
                b.len()
            ));
        }
        if b[0] as usize >= STATUS_NAMES.len() || b[4] > state::ERROR {
            return Err(format!(
                "DFU_GETSTATUS returned bStatus {:#04x} bState {}, outside DFU 1.1",
                b[0], b[4]
            ));
        }
        let ms = u32::from_le_bytes([b[1], b[2], b[3], 0]);
        Ok(Status {
            status: b[0],
            poll_timeout: Duration::from_millis(ms as u64),
            state: b[4],
            istring: b[5],
        })
    }

    /// Whether bStatus is OK.
    pub fn ok(&self) -> bool {
        self.status == 0
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} in {} (poll {} ms)",
            STATUS_NAMES[self.status as usize % 16],
            state::name(self.state),
            self.poll_timeout.as_millis()
        )
    }
}

/// Why one request failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReqError {
    /// The transfer failed.
    Transfer(TransferError),
    /// The transfer succeeded but its answer makes no sense.
    Protocol(String),
}

impl ReqError {
    /// Whether the device is gone (nothing more can be done on this interface).
    pub fn is_disconnect(&self) -> bool {
        matches!(self, ReqError::Transfer(TransferError::Disconnected))
    }
}

impl fmt::Display for ReqError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReqError::Transfer(e) => write!(f, "transfer {e}"),
            ReqError::Protocol(m) => f.write_str(m),
        }
    }
}

impl From<TransferError> for ReqError {
    fn from(e: TransferError) -> Self {
        ReqError::Transfer(e)
    }
}

/// Sends DFU requests to one interface.
pub struct Client<'a, I> {
    iface: &'a I,
    /// bInterfaceNumber: `wIndex` of every DFU request.
    pub interface: u16,
    /// Timeout of each control transfer.
    pub timeout: Duration,
}

impl<'a, I: UsbInterface> Client<'a, I> {
    /// A client for DFU interface `interface`.
    pub fn new(iface: &'a I, interface: u8, timeout: Duration) -> Self {
        Client {
            iface,
            interface: interface as u16,
            timeout,
        }
    }

    /// The underlying interface.
    pub fn iface(&self) -> &'a I {
        self.iface
    }

    async fn class_out(&self, request: u8, value: u16, data: &[u8]) -> Result<(), ReqError> {
        let req = ControlOut {
            control_type: ControlType::Class,
            recipient: Recipient::Interface,
            request,
            value,
            index: self.interface,
            data,
        };
        Ok(self.iface.control_out(req, self.timeout).await?)
    }

    async fn class_in(&self, request: u8, value: u16, length: u16) -> Result<Vec<u8>, ReqError> {
        let req = ControlIn {
            control_type: ControlType::Class,
            recipient: Recipient::Interface,
            request,
            value,
            index: self.interface,
            length,
        };
        Ok(self.iface.control_in(req, self.timeout).await?)
    }

    /// DFU_DETACH: wait up to `timeout_ms` for a reset.
    pub async fn detach(&self, timeout_ms: u16) -> Result<(), ReqError> {
        self.class_out(DETACH, timeout_ms, &[]).await
    }

    /// DFU_DNLOAD of block `n` (`data` empty: the end of the image).
    pub async fn dnload(&self, n: u16, data: &[u8]) -> Result<(), ReqError> {
        self.class_out(DNLOAD, n, data).await
    }

    /// DFU_UPLOAD of block `n`, up to `len` bytes.
    pub async fn upload(&self, n: u16, len: u16) -> Result<Vec<u8>, ReqError> {
        self.class_in(UPLOAD, n, len).await
    }

    /// DFU_GETSTATUS.
    pub async fn get_status(&self) -> Result<Status, ReqError> {
        let b = self.class_in(GETSTATUS, 0, 6).await?;
        Status::parse(&b).map_err(ReqError::Protocol)
    }

    /// DFU_CLRSTATUS.
    pub async fn clr_status(&self) -> Result<(), ReqError> {
        self.class_out(CLRSTATUS, 0, &[]).await
    }

    /// DFU_GETSTATE.
    pub async fn get_state(&self) -> Result<u8, ReqError> {
        let b = self.class_in(GETSTATE, 0, 1).await?;
        match b.as_slice() {
            [s] if *s <= state::ERROR => Ok(*s),
            other => Err(ReqError::Protocol(format!(
                "DFU_GETSTATE returned {other:02x?}, expected one bState byte"
            ))),
        }
    }

    /// DFU_ABORT.
    pub async fn abort(&self) -> Result<(), ReqError> {
        self.class_out(ABORT, 0, &[]).await
    }

    /// GET_DESCRIPTOR (standard, device recipient).
    pub async fn get_descriptor(&self, ty: u8, index: u8, len: u16) -> Result<Vec<u8>, ReqError> {
        let req = ControlIn {
            control_type: ControlType::Standard,
            recipient: Recipient::Device,
            request: 6,
            value: (ty as u16) << 8 | index as u16,
            index: 0,
            length: len,
        };
        Ok(self.iface.control_in(req, self.timeout).await?)
    }

    /// Waits on the platform's clock.
    pub async fn sleep(&self, d: Duration) {
        self.iface.sleep(d).await
    }
}
