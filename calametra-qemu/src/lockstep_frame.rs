//! The lockstep framing, sans-I/O: the 24-byte [`Header`], the [`Request`]s QEMU's
//! `usb-calametra` sends, the [`Reply`]s it gets ([`encode_reply`]) and the [`FrameReader`] that
//! cuts a byte stream into requests. `calametra-qemu/qemu/FRAMING.md` has every field; this is
//! its only implementation on the Rust side. Nothing here reads a socket or a clock.
//!
//! Its public path is also [`crate::lockstep::frame`] (and its items [`crate::lockstep`]'s).
//! It imports nothing of this crate: the lockstep server, the run ([`crate::lockstep`]) and the
//! snapshot ([`crate::snapshot`]) all read frames, so none of them may be imported here.

use calametra_core::clock::Nanos;
use calametra_core::usb::{Setup, TransferError};

/// The framing version this build speaks (the hello's).
pub const VERSION: u32 = 2;
/// `CLM1` read as a little-endian u32.
pub const MAGIC: u32 = 0x314d_4c43;
/// Bytes in a header.
pub const HEADER_LEN: usize = 24;
/// Bytes every reply payload starts with (`status`, `actions`, `wake_ns`, `complete_ns`).
pub const PREFIX_LEN: usize = 24;
/// The largest reply payload either side accepts (an IN's data, a descriptor).
pub const MAX_PAYLOAD: u32 = 1 << 20;
/// The largest request payload the host accepts: an OUT packet is one whole transfer (a TD),
/// which usbfs takes up to its 16 MiB memory limit by default (`usbfs_memory_mb`); the
/// example driver's frame upload is one 3 MB bulk OUT. QEMU sends what the guest submitted.
pub const MAX_REQUEST_PAYLOAD: u32 = 64 << 20;
/// Set in a reply's `type`.
pub const REPLY: u16 = 0x80;

/// Reply actions (bits of `actions`).
pub mod action {
    /// Detach the device from its port.
    pub const DETACH: u32 = 1;
    /// Attach it (after `reattach_gap_ns` when `DETACH` is set too: a re-enumeration).
    pub const ATTACH: u32 = 2;
    /// Retry every IN endpoint whose last answer was a NAK.
    pub const WAKE: u32 = 4;
}

/// What a request asks.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Kind {
    /// Once, at realize: the framing version.
    Hello,
    /// A control transfer: the setup packet and the OUT data stage.
    Control,
    /// A bulk or interrupt OUT packet.
    Out,
    /// A bulk or interrupt IN packet (or its retry after a NAK): the most bytes it takes.
    In,
    /// A USB port reset.
    Reset,
    /// The `wake_ns` timer fired.
    Tick,
    /// The host controller stopped an endpoint.
    EpStopped,
}

impl Kind {
    /// Every kind, in code order.
    pub const ALL: [Kind; 7] = [
        Kind::Hello,
        Kind::Control,
        Kind::Out,
        Kind::In,
        Kind::Reset,
        Kind::Tick,
        Kind::EpStopped,
    ];

    /// The wire code.
    pub fn code(self) -> u16 {
        match self {
            Kind::Hello => 1,
            Kind::Control => 2,
            Kind::Out => 3,
            Kind::In => 4,
            Kind::Reset => 5,
            Kind::Tick => 6,
            Kind::EpStopped => 7,
        }
    }

    /// The kind of a wire code.
    pub fn from_code(code: u16) -> Option<Kind> {
        Kind::ALL.into_iter().find(|k| k.code() == code)
    }

    /// The name in trace records.
    pub fn name(self) -> &'static str {
        match self {
            Kind::Hello => "hello",
            Kind::Control => "control",
            Kind::Out => "out",
            Kind::In => "in",
            Kind::Reset => "reset",
            Kind::Tick => "tick",
            Kind::EpStopped => "ep_stopped",
        }
    }
}

/// A reply's status.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Done.
    Ok,
    /// A STALL handshake.
    Stall,
    /// Nothing yet (an IN with no data, a request the model never completes).
    Nak,
    /// A transaction error.
    IoError,
    /// More data than the host asked for.
    Babble,
    /// The device is gone.
    NoDev,
}

impl Status {
    /// The wire code.
    pub fn code(self) -> u32 {
        match self {
            Status::Ok => 0,
            Status::Stall => 1,
            Status::Nak => 2,
            Status::IoError => 3,
            Status::Babble => 4,
            Status::NoDev => 5,
        }
    }

    /// The status of a wire code (unknown codes read as an I/O error, as QEMU reads them).
    pub fn from_code(code: u32) -> Status {
        match code {
            0 => Status::Ok,
            1 => Status::Stall,
            2 => Status::Nak,
            4 => Status::Babble,
            5 => Status::NoDev,
            _ => Status::IoError,
        }
    }

    /// The name in trace records.
    pub fn name(self) -> &'static str {
        match self {
            Status::Ok => "ok",
            Status::Stall => "stall",
            Status::Nak => "nak",
            Status::IoError => "ioerror",
            Status::Babble => "babble",
            Status::NoDev => "nodev",
        }
    }

    pub(crate) fn of(e: TransferError) -> Status {
        match e {
            TransferError::Stall => Status::Stall,
            TransferError::Timeout => Status::Nak,
            TransferError::Disconnected => Status::NoDev,
            TransferError::Cancelled | TransferError::Fault => Status::IoError,
        }
    }
}

/// Why a byte stream is not lockstep frames, or a frame not what its type says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FrameError {
    /// The first four bytes are not `CLM1`.
    Magic(u32),
    /// A request type this version does not know.
    Type(u16),
    /// A payload longer than [`MAX_REQUEST_PAYLOAD`] (a request) or [`MAX_PAYLOAD`] (a reply).
    TooLong(u32),
    /// A request out of sequence.
    Sequence {
        /// The number expected.
        expected: u32,
        /// The number found.
        found: u32,
    },
    /// The hello's framing version is not [`VERSION`].
    Version(u32),
    /// A payload too short for its request.
    Payload {
        /// The request.
        kind: Kind,
        /// What was expected.
        expected: String,
    },
}

impl std::fmt::Display for FrameError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            FrameError::Magic(m) => write!(f, "bad magic {m:#010x}, expected {MAGIC:#010x} (CLM1)"),
            FrameError::Type(t) => write!(f, "unknown request type {t}"),
            FrameError::TooLong(n) => write!(
                f,
                "payload of {n} bytes, at most {MAX_REQUEST_PAYLOAD} in a request and {MAX_PAYLOAD} in a reply"
            ),
            FrameError::Sequence { expected, found } => {
                write!(f, "request {found} out of sequence, expected {expected}")
            }
            FrameError::Version(v) => write!(
                f,
                "QEMU's usb-calametra speaks framing version {v}, this build {VERSION}: rebuild with calametra-qemu/qemu/build.sh"
            ),
            FrameError::Payload { kind, expected } => {
                write!(f, "{} request: expected {expected}", kind.name())
            }
        }
    }
}

impl std::error::Error for FrameError {}

/// A frame header.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Header {
    /// The type code (`| REPLY` in a reply).
    pub ty: u16,
    /// The endpoint address.
    pub ep: u8,
    /// Reserved, 0.
    pub flags: u8,
    /// The request number.
    pub seq: u32,
    /// Payload bytes.
    pub len: u32,
    /// The clock: the guest's for a request, the model's for a reply.
    pub clock_ns: u64,
}

impl Header {
    /// The 24 wire bytes.
    pub fn encode(&self) -> [u8; HEADER_LEN] {
        let mut b = [0u8; HEADER_LEN];
        b[0..4].copy_from_slice(&MAGIC.to_le_bytes());
        b[4..6].copy_from_slice(&self.ty.to_le_bytes());
        b[6] = self.ep;
        b[7] = self.flags;
        b[8..12].copy_from_slice(&self.seq.to_le_bytes());
        b[12..16].copy_from_slice(&self.len.to_le_bytes());
        b[16..24].copy_from_slice(&self.clock_ns.to_le_bytes());
        b
    }

    /// Parses 24 wire bytes (the magic and the length are checked, not the type).
    pub fn decode(b: &[u8; HEADER_LEN]) -> Result<Header, FrameError> {
        let u32_at = |i: usize| u32::from_le_bytes([b[i], b[i + 1], b[i + 2], b[i + 3]]);
        let magic = u32_at(0);
        if magic != MAGIC {
            return Err(FrameError::Magic(magic));
        }
        let len = u32_at(12);
        if len > MAX_REQUEST_PAYLOAD.max(MAX_PAYLOAD + PREFIX_LEN as u32) {
            return Err(FrameError::TooLong(len));
        }
        let mut clock = [0u8; 8];
        clock.copy_from_slice(&b[16..24]);
        Ok(Header {
            ty: u16::from_le_bytes([b[4], b[5]]),
            ep: b[6],
            flags: b[7],
            seq: u32_at(8),
            len,
            clock_ns: u64::from_le_bytes(clock),
        })
    }
}

/// One request from QEMU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Request {
    /// What it asks.
    pub kind: Kind,
    /// The endpoint address.
    pub ep: u8,
    /// Its number.
    pub seq: u32,
    /// The guest's virtual clock when it was made.
    pub clock_ns: Nanos,
    /// The payload.
    pub payload: Vec<u8>,
}

impl Request {
    /// The wire bytes (what QEMU sends; for tests and tools).
    pub fn encode(&self) -> Vec<u8> {
        let h = Header {
            ty: self.kind.code(),
            ep: self.ep,
            flags: 0,
            seq: self.seq,
            len: self.payload.len() as u32,
            clock_ns: self.clock_ns,
        };
        let mut out = h.encode().to_vec();
        out.extend_from_slice(&self.payload);
        out
    }

    /// The setup packet and OUT data of a `control` request.
    pub fn control(&self) -> Result<(Setup, &[u8]), FrameError> {
        let short = || FrameError::Payload {
            kind: self.kind,
            expected: format!(
                "an 8-byte setup packet and its data, found {} bytes",
                self.payload.len()
            ),
        };
        let setup =
            Setup::from_bytes(self.payload.get(..8).ok_or_else(short)?).map_err(|_| short())?;
        Ok((setup, &self.payload[8..]))
    }

    /// The first payload word (`in`: the most bytes; `hello`: the version).
    pub fn word(&self) -> Result<u32, FrameError> {
        let b = self.payload.get(..4).ok_or_else(|| FrameError::Payload {
            kind: self.kind,
            expected: format!("a 4-byte word, found {} bytes", self.payload.len()),
        })?;
        Ok(u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
    }
}

/// One reply to QEMU.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reply {
    /// How the request went.
    pub status: Status,
    /// [`action`] bits.
    pub actions: u32,
    /// When QEMU should send a `tick` (guest clock), or 0.
    pub wake_ns: Nanos,
    /// When the packet completes on the guest clock (the model took longer: a delay), or 0
    /// for at once. QEMU holds it async until then.
    pub complete_ns: Nanos,
    /// The data (an IN's, the hello's).
    pub data: Vec<u8>,
}

impl Reply {
    pub(crate) fn status(status: Status) -> Reply {
        Reply {
            status,
            actions: 0,
            wake_ns: 0,
            complete_ns: 0,
            data: Vec::new(),
        }
    }
}

/// The wire bytes of `reply` to `req`, stamped with the model's clock.
pub fn encode_reply(req: &Request, clock_ns: Nanos, reply: &Reply) -> Vec<u8> {
    let h = Header {
        ty: req.kind.code() | REPLY,
        ep: req.ep,
        flags: 0,
        seq: req.seq,
        len: (PREFIX_LEN + reply.data.len()) as u32,
        clock_ns,
    };
    let mut out = Vec::with_capacity(HEADER_LEN + PREFIX_LEN + reply.data.len());
    out.extend_from_slice(&h.encode());
    out.extend_from_slice(&reply.status.code().to_le_bytes());
    out.extend_from_slice(&reply.actions.to_le_bytes());
    out.extend_from_slice(&reply.wake_ns.to_le_bytes());
    out.extend_from_slice(&reply.complete_ns.to_le_bytes());
    out.extend_from_slice(&reply.data);
    out
}

/// Cuts a byte stream into requests.
#[derive(Default)]
pub struct FrameReader {
    buf: Vec<u8>,
}

impl FrameReader {
    /// An empty reader.
    pub fn new() -> FrameReader {
        FrameReader::default()
    }

    /// Appends bytes read from the socket.
    pub fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
    }

    /// The next whole request, if one is buffered. An error means the stream is lost.
    pub fn next_request(&mut self) -> Option<Result<Request, FrameError>> {
        if self.buf.len() < HEADER_LEN {
            return None;
        }
        let mut hb = [0u8; HEADER_LEN];
        hb.copy_from_slice(&self.buf[..HEADER_LEN]);
        let h = match Header::decode(&hb) {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        if h.len > MAX_REQUEST_PAYLOAD {
            return Some(Err(FrameError::TooLong(h.len)));
        }
        let end = HEADER_LEN + h.len as usize;
        if self.buf.len() < end {
            return None;
        }
        let payload = self.buf[HEADER_LEN..end].to_vec();
        self.buf.drain(..end);
        let Some(kind) = Kind::from_code(h.ty) else {
            return Some(Err(FrameError::Type(h.ty)));
        };
        Some(Ok(Request {
            kind,
            ep: h.ep,
            seq: h.seq,
            clock_ns: h.clock_ns,
            payload,
        }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 18: an OUT is one whole transfer, which usbfs submits up to its 16 MiB limit (the
    /// example driver's frame upload is one 3 MB bulk OUT; with the reply's 1 MiB limit the
    /// stream was refused and the guest's vCPU waited on it forever). A request past
    /// [`MAX_REQUEST_PAYLOAD`] is still refused, by its header, before its bytes arrive.
    #[test]
    fn an_out_of_a_whole_frame_is_one_request() {
        let big = Request {
            kind: Kind::Out,
            ep: 1,
            seq: 7,
            clock_ns: 42,
            payload: vec![0x5a; 3_110_448],
        };
        let mut rd = FrameReader::new();
        rd.push(&big.encode());
        let got = rd
            .next_request()
            .expect("a whole request")
            .expect("accepted");
        assert_eq!((got.kind, got.ep, got.seq), (Kind::Out, 1, 7));
        assert_eq!(got.payload.len(), 3_110_448);

        let mut too_long = Header {
            ty: Kind::Out.code(),
            ep: 1,
            flags: 0,
            seq: 8,
            len: MAX_REQUEST_PAYLOAD + 1,
            clock_ns: 0,
        }
        .encode()
        .to_vec();
        too_long.extend_from_slice(&[0; 16]);
        let mut rd = FrameReader::new();
        rd.push(&too_long);
        match rd.next_request() {
            Some(Err(e @ FrameError::TooLong(_))) => {
                assert!(e.to_string().contains("in a request"), "{e}")
            }
            other => panic!("{other:?}"),
        }
    }
}
