//! The vocabulary of DFU 1.1: states (`bState`), status codes (`bStatus`), class requests, and
//! the record of one transition the model made. Plain data: no behaviour lives here.

use std::fmt;

/// A DFU state (`bState`, DFU 1.1 section 6.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum State {
    /// 0: run-time mode, idle.
    AppIdle,
    /// 1: run-time mode, DFU_DETACH received, waiting for a USB reset.
    AppDetach,
    /// 2: DFU mode, idle.
    DfuIdle,
    /// 3: a block arrived; waiting for DFU_GETSTATUS.
    DnloadSync,
    /// 4: programming a block; the host waits bwPollTimeout.
    DnBusy,
    /// 5: ready for the next block (or the end of the image).
    DnloadIdle,
    /// 6: the end of the image arrived; waiting for DFU_GETSTATUS to manifest.
    ManifestSync,
    /// 7: manifesting the new image.
    Manifest,
    /// 8: manifested (non-tolerant device); waiting for a USB reset.
    ManifestWaitReset,
    /// 9: uploading.
    UploadIdle,
    /// 10: an error; DFU_CLRSTATUS clears it.
    Error,
}

impl State {
    /// Every state, in `bState` order.
    pub const ALL: [State; 11] = [
        State::AppIdle,
        State::AppDetach,
        State::DfuIdle,
        State::DnloadSync,
        State::DnBusy,
        State::DnloadIdle,
        State::ManifestSync,
        State::Manifest,
        State::ManifestWaitReset,
        State::UploadIdle,
        State::Error,
    ];

    /// The `bState` value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The state for a `bState` value.
    pub fn from_code(c: u8) -> Option<State> {
        State::ALL.get(c as usize).copied()
    }

    /// The short name used in transition fault sites: `dfu.dnload_sync->dnbusy#3`.
    pub fn name(self) -> &'static str {
        match self {
            State::AppIdle => "app_idle",
            State::AppDetach => "app_detach",
            State::DfuIdle => "idle",
            State::DnloadSync => "dnload_sync",
            State::DnBusy => "dnbusy",
            State::DnloadIdle => "dnload_idle",
            State::ManifestSync => "manifest_sync",
            State::Manifest => "manifest",
            State::ManifestWaitReset => "manifest_wait_reset",
            State::UploadIdle => "upload_idle",
            State::Error => "error",
        }
    }

    /// The spec's name: `dfuDNLOAD-SYNC`.
    pub fn spec_name(self) -> &'static str {
        match self {
            State::AppIdle => "appIDLE",
            State::AppDetach => "appDETACH",
            State::DfuIdle => "dfuIDLE",
            State::DnloadSync => "dfuDNLOAD-SYNC",
            State::DnBusy => "dfuDNBUSY",
            State::DnloadIdle => "dfuDNLOAD-IDLE",
            State::ManifestSync => "dfuMANIFEST-SYNC",
            State::Manifest => "dfuMANIFEST",
            State::ManifestWaitReset => "dfuMANIFEST-WAIT-RESET",
            State::UploadIdle => "dfuUPLOAD-IDLE",
            State::Error => "dfuERROR",
        }
    }

    /// Whether this is a run-time mode state (the device shows its run-time descriptors).
    pub fn is_runtime(self) -> bool {
        matches!(self, State::AppIdle | State::AppDetach)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec_name())
    }
}

/// A DFU status code (`bStatus`, DFU 1.1 section 6.1.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Status {
    /// 0x00: no error.
    Ok,
    /// 0x01: file not targeted for this device.
    ErrTarget,
    /// 0x02: file fails a vendor-specific test.
    ErrFile,
    /// 0x03: unable to write memory.
    ErrWrite,
    /// 0x04: erase failed.
    ErrErase,
    /// 0x05: erase check failed.
    ErrCheckErased,
    /// 0x06: program failed.
    ErrProg,
    /// 0x07: verification failed.
    ErrVerify,
    /// 0x08: address out of range.
    ErrAddress,
    /// 0x09: DNLOAD with wLength 0 before the device has all the data.
    ErrNotDone,
    /// 0x0A: firmware corrupt; cannot return to run-time.
    ErrFirmware,
    /// 0x0B: vendor-specific (see iString).
    ErrVendor,
    /// 0x0C: unexpected USB reset.
    ErrUsbr,
    /// 0x0D: unexpected power-on reset.
    ErrPor,
    /// 0x0E: unknown.
    ErrUnknown,
    /// 0x0F: the device stalled an unexpected request.
    ErrStalledPkt,
}

impl Status {
    /// Every status, in code order.
    pub const ALL: [Status; 16] = [
        Status::Ok,
        Status::ErrTarget,
        Status::ErrFile,
        Status::ErrWrite,
        Status::ErrErase,
        Status::ErrCheckErased,
        Status::ErrProg,
        Status::ErrVerify,
        Status::ErrAddress,
        Status::ErrNotDone,
        Status::ErrFirmware,
        Status::ErrVendor,
        Status::ErrUsbr,
        Status::ErrPor,
        Status::ErrUnknown,
        Status::ErrStalledPkt,
    ];

    /// The `bStatus` value.
    pub fn code(self) -> u8 {
        self as u8
    }

    /// The status for a `bStatus` value.
    pub fn from_code(c: u8) -> Option<Status> {
        Status::ALL.get(c as usize).copied()
    }

    /// The spec's name: `errNOTDONE`.
    pub fn spec_name(self) -> &'static str {
        match self {
            Status::Ok => "OK",
            Status::ErrTarget => "errTARGET",
            Status::ErrFile => "errFILE",
            Status::ErrWrite => "errWRITE",
            Status::ErrErase => "errERASE",
            Status::ErrCheckErased => "errCHECK_ERASED",
            Status::ErrProg => "errPROG",
            Status::ErrVerify => "errVERIFY",
            Status::ErrAddress => "errADDRESS",
            Status::ErrNotDone => "errNOTDONE",
            Status::ErrFirmware => "errFIRMWARE",
            Status::ErrVendor => "errVENDOR",
            Status::ErrUsbr => "errUSBR",
            Status::ErrPor => "errPOR",
            Status::ErrUnknown => "errUNKNOWN",
            Status::ErrStalledPkt => "errSTALLEDPKT",
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.spec_name())
    }
}

/// A DFU class request (`bRequest`, DFU 1.1 table 3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Request {
    /// 0: DFU_DETACH.
    Detach,
    /// 1: DFU_DNLOAD.
    Dnload,
    /// 2: DFU_UPLOAD.
    Upload,
    /// 3: DFU_GETSTATUS.
    GetStatus,
    /// 4: DFU_CLRSTATUS.
    ClrStatus,
    /// 5: DFU_GETSTATE.
    GetState,
    /// 6: DFU_ABORT.
    Abort,
    /// Any other class request to the DFU interface, or a DFU request in the wrong direction.
    Other(u8),
}

impl Request {
    /// The seven requests DFU 1.1 defines.
    pub const DEFINED: [Request; 7] = [
        Request::Detach,
        Request::Dnload,
        Request::Upload,
        Request::GetStatus,
        Request::ClrStatus,
        Request::GetState,
        Request::Abort,
    ];

    /// Decodes `bRequest` with its direction: a defined request sent in the wrong direction is
    /// `Other`.
    pub fn decode(b_request: u8, dir_in: bool) -> Request {
        let r = match b_request {
            0 => Request::Detach,
            1 => Request::Dnload,
            2 => Request::Upload,
            3 => Request::GetStatus,
            4 => Request::ClrStatus,
            5 => Request::GetState,
            6 => Request::Abort,
            other => return Request::Other(other),
        };
        if r.is_in() == dir_in {
            r
        } else {
            Request::Other(b_request)
        }
    }

    /// `bRequest`.
    pub fn code(self) -> u8 {
        match self {
            Request::Detach => 0,
            Request::Dnload => 1,
            Request::Upload => 2,
            Request::GetStatus => 3,
            Request::ClrStatus => 4,
            Request::GetState => 5,
            Request::Abort => 6,
            Request::Other(b) => b,
        }
    }

    /// Whether the request's data stage is device-to-host.
    pub fn is_in(self) -> bool {
        matches!(
            self,
            Request::Upload | Request::GetStatus | Request::GetState
        )
    }

    /// The fault-site name: `ctrl.dnload#3`. `None` for other requests (the bus names them).
    pub fn site_name(self) -> Option<&'static str> {
        Some(match self {
            Request::Detach => "detach",
            Request::Dnload => "dnload",
            Request::Upload => "upload",
            Request::GetStatus => "getstatus",
            Request::ClrStatus => "clrstatus",
            Request::GetState => "getstate",
            Request::Abort => "abort",
            Request::Other(_) => return None,
        })
    }
}

impl fmt::Display for Request {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Request::Detach => f.write_str("DFU_DETACH"),
            Request::Dnload => f.write_str("DFU_DNLOAD"),
            Request::Upload => f.write_str("DFU_UPLOAD"),
            Request::GetStatus => f.write_str("DFU_GETSTATUS"),
            Request::ClrStatus => f.write_str("DFU_CLRSTATUS"),
            Request::GetState => f.write_str("DFU_GETSTATE"),
            Request::Abort => f.write_str("DFU_ABORT"),
            Request::Other(b) => write!(f, "class request {b:#04x}"),
        }
    }
}

/// What made the model change state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Cause {
    /// A class request (one the device stalled, or one without a data stage).
    Request {
        /// The request.
        request: Request,
        /// Its `wLength`.
        length: u16,
    },
    /// A DFU_UPLOAD the device answered with `returned` of `length` bytes (a short frame when
    /// `returned < length`).
    Upload {
        /// `wLength`.
        length: u16,
        /// Bytes the device returned.
        returned: u16,
    },
    /// The bwPollTimeout of dfuDNBUSY passed: the block is programmed.
    BlockWritten,
    /// The bwPollTimeout of dfuMANIFEST passed: the new image is in place.
    ManifestDone,
    /// The detach timer ran out in appDETACH without a USB reset.
    DetachTimeout,
    /// A WillDetach device detached and re-attached itself (after DFU_DETACH, or after
    /// manifestation when non-tolerant).
    SelfDetach,
    /// A USB reset.
    UsbReset,
    /// Power came back after the device was unplugged.
    PowerOn,
}

impl fmt::Display for Cause {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Cause::Request { request, length } => write!(f, "{request} (wLength {length})"),
            Cause::Upload { length, returned } => {
                write!(f, "DFU_UPLOAD (wLength {length}, returned {returned})")
            }
            Cause::BlockWritten => f.write_str("end of the dfuDNBUSY poll timeout"),
            Cause::ManifestDone => f.write_str("end of manifestation"),
            Cause::DetachTimeout => f.write_str("detach timeout"),
            Cause::SelfDetach => f.write_str("WillDetach detach-attach"),
            Cause::UsbReset => f.write_str("USB reset"),
            Cause::PowerOn => f.write_str("power-on reset"),
        }
    }
}

/// One state change the model made, as recorded in its history.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Transition {
    /// Virtual time of the change.
    pub at_ns: u64,
    /// The state before.
    pub from: State,
    /// The state after.
    pub to: State,
    /// What caused it.
    pub cause: Cause,
    /// `bStatus` after the change.
    pub status: Status,
    /// Whether the device held a valid image after the change.
    pub firmware_valid: bool,
}
