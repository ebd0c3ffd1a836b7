//! Capture import: USB traffic recorded on real hardware, read into usbmon events and then into
//! transfers that a model can be compared against (see [`crate::compare`]).
//!
//! Formats, detected by their magic bytes (never by the file name): pcapng ([`pcapng`]) and
//! classic pcap ([`pcap`]) carrying Linux usbmon packets of link type 189 or 220
//! ([`usbmon_bin`]), usbmon text `1u` ([`usbmon_text`]), each optionally gzip-compressed.
//! [`control`] pairs submissions with completions into [`ControlTransfer`]s and
//! [`DataTransfer`]s.
//!
//! Every malformed input is an [`Error::File`] naming the file, the byte offset (or line) and
//! what was expected; nothing here panics on input bytes, and nothing here reads the clock.
//!
//! [`learn`] reads one device's traffic into a learned spec (`calametra.spec.learned`) that the
//! replay model of `calametra-models` answers from.
//!
//! [`compare`] replays a capture against a model (a `calametra_core::usb::Device` behind a
//! `calametra_core::host::DeviceHost`) and classifies every transfer; [`by_spec`] compares a
//! capture with the model a spec names, found in the model registry. The crate was split out
//! of `calametra-core` so that the simulator does not carry the capture readers (and `flate2`);
//! the `calametra compare` command of `calametra-cli` is built on it.
//!
//! ```no_run
//! use calametra_capture::{compare, Capture};
//! use calametra_core::{host::DeviceHost, usb::Loopback, RunConfig};
//!
//! let capture = Capture::load("dock.pcapng.gz")?;
//! let mut host = DeviceHost::new(Loopback::default(), &RunConfig::default());
//! let report = compare::compare(&capture.control_transfers(), &mut host);
//! print!("{}", report.render());
//! # Ok::<(), calametra_core::Error>(())
//! ```

#![warn(missing_docs)]

/// The crate's README, compiled as a doctest so it cannot drift from the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;

pub mod by_spec;
pub mod compare;
pub mod control;
pub mod learn;
pub mod pcap;
pub mod pcapng;
pub mod usbmon_bin;
pub mod usbmon_text;

pub use control::{ControlTransfer, DataTransfer, Status, Transfers};

use calametra_core::error::Error;
use calametra_core::usb::Setup;
use std::io::Read;
use std::path::{Path, PathBuf};

/// The largest capture accepted after decompression; past it a gzip file is refused, so that a
/// small corrupt or hostile file cannot exhaust memory.
pub const MAX_DECOMPRESSED: u64 = 2 << 30;

/// The container a capture came in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// pcapng (sections, interface descriptions, enhanced and simple packet blocks).
    Pcapng,
    /// Classic pcap; `nanos` when timestamps are in nanoseconds (magic `a1b23c4d`).
    Pcap {
        /// Whether the record timestamps are nanoseconds rather than microseconds.
        nanos: bool,
    },
    /// The usbmon text interface (`1u`, and the older `1t` without bus numbers).
    UsbmonText,
}

impl std::fmt::Display for Format {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Format::Pcapng => "pcapng",
            Format::Pcap { nanos: false } => "pcap",
            Format::Pcap { nanos: true } => "pcap (nanosecond)",
            Format::UsbmonText => "usbmon text",
        })
    }
}

/// What a usbmon event is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum EventKind {
    /// `S`: the host submitted an URB.
    Submit,
    /// `C`: the URB completed (its status says how).
    Complete,
    /// `E`: the submission failed; no completion follows.
    Error,
}

/// The transfer type of an endpoint, as usbmon numbers it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum XferType {
    /// 0: isochronous.
    Isochronous,
    /// 1: interrupt.
    Interrupt,
    /// 2: control.
    Control,
    /// 3: bulk.
    Bulk,
}

impl XferType {
    /// From usbmon's `xfer_type` byte.
    pub fn from_u8(v: u8) -> Option<XferType> {
        Some(match v {
            0 => XferType::Isochronous,
            1 => XferType::Interrupt,
            2 => XferType::Control,
            3 => XferType::Bulk,
            _ => return None,
        })
    }

    /// A short lowercase name (`bulk`, `interrupt`).
    pub fn as_str(self) -> &'static str {
        match self {
            XferType::Isochronous => "iso",
            XferType::Interrupt => "interrupt",
            XferType::Control => "control",
            XferType::Bulk => "bulk",
        }
    }
}

/// One usbmon event, whatever container it came from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Event {
    /// Where it is in the file: the 1-based packet number (as Wireshark counts) for pcap and
    /// pcapng, the 1-based line number for text.
    pub record: usize,
    /// The URB id (a kernel address) that pairs a submission with its completion.
    pub id: u64,
    /// Submission, completion or submission error.
    pub kind: EventKind,
    /// The endpoint's transfer type.
    pub xfer: XferType,
    /// Endpoint address: number, with bit 7 set for IN.
    pub endpoint: u8,
    /// Device address on its bus.
    pub device: u8,
    /// Bus number (0 in the old `1t` text format, which has none).
    pub bus: u16,
    /// Timestamp in microseconds, as the capturing host's clock read it.
    pub t_us: i64,
    /// URB status: -115 (-EINPROGRESS) on submissions, 0 ok, -32 stall, other negative errnos.
    pub status: i32,
    /// URB length: requested on a submission, transferred on a completion.
    pub length: u32,
    /// The setup packet, on a control submission whose setup was captured.
    pub setup: Option<Setup>,
    /// The data captured with this event (may be shorter than `length`).
    pub data: Vec<u8>,
}

/// A parsed capture: its events in file order.
#[derive(Clone, Debug)]
pub struct Capture {
    /// The file it came from (used in messages).
    pub path: PathBuf,
    /// The container.
    pub format: Format,
    /// Whether the file was gzip-compressed.
    pub gzip: bool,
    /// The link types of the interfaces that carried packets (189 or 220); empty for text.
    pub link_types: Vec<u32>,
    /// The usbmon events, in file order.
    pub events: Vec<Event>,
}

/// A capture file's bytes: a regular file within the trace limit
/// ([`calametra_core::input::MAX_TRACE_BYTES`]; a FIFO or `/dev/zero` is refused before it is
/// read). The one reader of capture files for [`Capture::load`] and `learn::Input::load`.
pub(crate) fn read_capture_file(path: &Path) -> Result<Vec<u8>, Error> {
    let limit = calametra_core::input::MAX_TRACE_BYTES;
    let f = calametra_core::input::open_regular(path, limit, "capture").map_err(|message| {
        Error::Input {
            path: path.to_path_buf(),
            message,
        }
    })?;
    let mut bytes = Vec::new();
    f.take(limit + 1)
        .read_to_end(&mut bytes)
        .map_err(|source| Error::Io {
            path: path.to_path_buf(),
            action: "read the capture",
            source,
        })?;
    Ok(bytes)
}

impl Capture {
    /// Reads and parses a capture file (pcapng, pcap or usbmon text, optionally gzipped).
    pub fn load(path: impl AsRef<Path>) -> Result<Capture, Error> {
        let path = path.as_ref();
        Capture::parse(path, &read_capture_file(path)?)
    }

    /// Parses capture bytes; `path` names the file in errors. The format is detected from the
    /// first bytes: gzip `1f 8b` is decompressed first, then pcapng `0a 0d 0d 0a`, a pcap magic
    /// in either byte order, or usbmon text.
    pub fn parse(path: impl Into<PathBuf>, bytes: &[u8]) -> Result<Capture, Error> {
        let path = path.into();
        let gzip = bytes.starts_with(&[0x1f, 0x8b]);
        let inflated;
        let body: &[u8] = if gzip {
            inflated = gunzip(&path, bytes)?;
            &inflated
        } else {
            bytes
        };
        let src = Src { path: &path, gzip };
        let mut events = Vec::new();
        let mut link_types = Vec::new();
        let format = match detect(body) {
            Detected::Pcapng => {
                pcapng::parse(&src, body, &mut events, &mut link_types)?;
                Format::Pcapng
            }
            Detected::Pcap => {
                let nanos = pcap::parse(&src, body, &mut events, &mut link_types)?;
                Format::Pcap { nanos }
            }
            Detected::Text => {
                usbmon_text::parse(&src, body, &mut events)?;
                Format::UsbmonText
            }
            Detected::Empty => {
                return Err(src.at(
                    0,
                    "(document)",
                    "the capture is empty; expected a pcapng, pcap or usbmon text capture",
                ))
            }
            Detected::Unknown => {
                let head: Vec<u8> = body.iter().take(4).copied().collect();
                return Err(src.at(
                    0,
                    "magic",
                    format!(
                        "found {}; expected a pcapng section header (0a0d0d0a), a pcap header \
                         (d4c3b2a1, a1b2c3d4, 4d3cb2a1 or a1b23c4d), gzip (1f8b) or usbmon text \
                         lines",
                        spaced_hex(&head)
                    ),
                ));
            }
        };
        Ok(Capture {
            path,
            format,
            gzip,
            link_types,
            events,
        })
    }

    /// The control transfers and bulk, interrupt and isochronous transfers, paired.
    pub fn transfers(&self) -> Transfers {
        control::reassemble(&self.events)
    }

    /// The control transfers only, in the order they were submitted.
    pub fn control_transfers(&self) -> Vec<ControlTransfer> {
        self.transfers().control
    }

    /// The devices seen, with how many transfers were submitted to each, ordered by bus and
    /// address.
    pub fn devices(&self) -> Vec<DeviceSeen> {
        let mut seen: std::collections::BTreeMap<(u16, u8), DeviceSeen> = Default::default();
        for e in self.events.iter().filter(|e| e.kind == EventKind::Submit) {
            let d = seen.entry((e.bus, e.device)).or_insert(DeviceSeen {
                bus: e.bus,
                device: e.device,
                control: 0,
                other: 0,
            });
            if e.xfer == XferType::Control {
                d.control += 1;
            } else {
                d.other += 1;
            }
        }
        seen.into_values().collect()
    }
}

/// A device address seen in a capture, with how many transfers were submitted to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeviceSeen {
    /// Bus number.
    pub bus: u16,
    /// Device address.
    pub device: u8,
    /// Control submissions.
    pub control: usize,
    /// Bulk, interrupt and isochronous submissions.
    pub other: usize,
}

enum Detected {
    Empty,
    Pcapng,
    Pcap,
    Text,
    Unknown,
}

fn detect(b: &[u8]) -> Detected {
    if b.is_empty() {
        return Detected::Empty;
    }
    if b.starts_with(&pcapng::SHB_TYPE) {
        return Detected::Pcapng;
    }
    if b.get(..4).and_then(pcap::magic).is_some() {
        return Detected::Pcap;
    }
    if usbmon_text::looks_like_text(b) {
        return Detected::Text;
    }
    Detected::Unknown
}

fn gunzip(path: &Path, bytes: &[u8]) -> Result<Vec<u8>, Error> {
    let mut out = Vec::new();
    let mut dec = flate2::read::MultiGzDecoder::new(bytes).take(MAX_DECOMPRESSED + 1);
    if let Err(e) = dec.read_to_end(&mut out) {
        return Err(Error::File {
            path: path.to_path_buf(),
            field: "(gzip)".into(),
            message: format!(
                "the gzip stream is corrupt or truncated after {} decompressed bytes: {e}; \
                 expected a complete gzip file",
                out.len()
            ),
        });
    }
    if out.len() as u64 > MAX_DECOMPRESSED {
        return Err(Error::File {
            path: path.to_path_buf(),
            field: "(gzip)".into(),
            message: format!(
                "decompresses to more than {MAX_DECOMPRESSED} bytes; expected a capture that \
                 fits in memory"
            ),
        });
    }
    Ok(out)
}

/// Where bytes came from, for error messages.
pub(crate) struct Src<'a> {
    pub(crate) path: &'a Path,
    pub(crate) gzip: bool,
}

impl Src<'_> {
    /// An error at byte `offset` (of the decompressed data when the file is gzipped).
    pub(crate) fn at(&self, offset: usize, what: &str, message: impl Into<String>) -> Error {
        let place = if self.gzip {
            "decompressed byte"
        } else {
            "byte"
        };
        Error::File {
            path: self.path.to_path_buf(),
            field: format!("{place} {offset} ({what})"),
            message: message.into(),
        }
    }

    /// An error on 1-based line `line` of a text capture.
    pub(crate) fn line(&self, line: usize, what: &str, message: impl Into<String>) -> Error {
        Error::File {
            path: self.path.to_path_buf(),
            field: format!("line {line} ({what})"),
            message: message.into(),
        }
    }
}

/// Byte order of a pcap file or pcapng section (and of the usbmon headers inside it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Order {
    /// Little-endian.
    Little,
    /// Big-endian.
    Big,
}

impl Order {
    /// A `u16` at `at`, if the bytes are there.
    pub(crate) fn u16(self, b: &[u8], at: usize) -> Option<u16> {
        let a: [u8; 2] = b.get(at..at.checked_add(2)?)?.try_into().ok()?;
        Some(match self {
            Order::Little => u16::from_le_bytes(a),
            Order::Big => u16::from_be_bytes(a),
        })
    }

    /// A `u32` at `at`, if the bytes are there.
    pub(crate) fn u32(self, b: &[u8], at: usize) -> Option<u32> {
        let a: [u8; 4] = b.get(at..at.checked_add(4)?)?.try_into().ok()?;
        Some(match self {
            Order::Little => u32::from_le_bytes(a),
            Order::Big => u32::from_be_bytes(a),
        })
    }

    /// A `u64` at `at`, if the bytes are there.
    pub(crate) fn u64(self, b: &[u8], at: usize) -> Option<u64> {
        let a: [u8; 8] = b.get(at..at.checked_add(8)?)?.try_into().ok()?;
        Some(match self {
            Order::Little => u64::from_le_bytes(a),
            Order::Big => u64::from_be_bytes(a),
        })
    }
}

/// Bytes as spaced hex for messages (`0a 0d 0d 0a`).
pub(crate) fn spaced_hex(b: &[u8]) -> String {
    if b.is_empty() {
        return "no bytes".into();
    }
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

/// The name of a Linux errno as usbmon reports URB status (`-32` is `EPIPE`).
pub fn errno_name(status: i32) -> Option<&'static str> {
    Some(match status {
        0 => "ok",
        -2 => "ENOENT",
        -18 => "EXDEV",
        -19 => "ENODEV",
        -32 => "EPIPE",
        -62 => "ETIME",
        -71 => "EPROTO",
        -75 => "EOVERFLOW",
        -84 => "EILSEQ",
        -104 => "ECONNRESET",
        -108 => "ESHUTDOWN",
        -110 => "ETIMEDOUT",
        -115 => "EINPROGRESS",
        -121 => "EREMOTEIO",
        _ => return None,
    })
}
