//! The usbredir wire format, protocol 0.7: packet types, headers, capabilities, framing.
//!
//! [`Packet`] is one message in either direction; [`Packet::encode`] writes it and
//! [`Packet::decode`] reads one body; [`Framer`] cuts a byte stream into packets. Every length
//! that depends on a capability (the 64-bit id, `connect_device_version`,
//! `ep_info_max_packet_size`, `32bits_bulk_length`, `bulk_streams`) is decided by [`Caps`].
//! Bytes from the socket are never trusted: a short, long or unknown packet is a
//! [`ProtoError`] value, never a panic. Nothing here does I/O or keeps state beyond the framer's
//! buffer.

use std::fmt;

/// Capability bit: bulk streams.
pub const CAP_BULK_STREAMS: u32 = 0;
/// Capability bit: `device_connect` carries `device_version_bcd`.
pub const CAP_CONNECT_DEVICE_VERSION: u32 = 1;
/// Capability bit: filters.
pub const CAP_FILTER: u32 = 2;
/// Capability bit: the guest acknowledges `device_disconnect`.
pub const CAP_DEVICE_DISCONNECT_ACK: u32 = 3;
/// Capability bit: `ep_info` carries `max_packet_size`.
pub const CAP_EP_INFO_MAX_PACKET_SIZE: u32 = 4;
/// Capability bit: 64-bit packet ids (a 16-byte header).
pub const CAP_64BITS_IDS: u32 = 5;
/// Capability bit: bulk packets carry `length_high`.
pub const CAP_32BITS_BULK_LENGTH: u32 = 6;
/// Capability bit: buffered bulk receiving.
pub const CAP_BULK_RECEIVING: u32 = 7;

/// The capabilities this host advertises: what QEMU's xHCI path needs (4, 5, 6), the device
/// version in `device_connect` (1) and disconnect acknowledgements (3). No streams, no buffered
/// bulk receiving, no filters.
pub const HOST_CAPS: u32 = (1 << CAP_CONNECT_DEVICE_VERSION)
    | (1 << CAP_DEVICE_DISCONNECT_ACK)
    | (1 << CAP_EP_INFO_MAX_PACKET_SIZE)
    | (1 << CAP_64BITS_IDS)
    | (1 << CAP_32BITS_BULK_LENGTH);

/// A packet larger than this is a framing error (the biggest real one is a bulk transfer; QEMU
/// splits guest transfers far below this).
pub const MAX_PACKET_LEN: u32 = 16 << 20;

/// Status codes of replies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// 0.
    Success,
    /// 1.
    Cancelled,
    /// 2.
    Inval,
    /// 3.
    IoError,
    /// 4.
    Stall,
    /// 5.
    Timeout,
    /// 6.
    Babble,
    /// Any other value (an error).
    Other(u8),
}

impl Status {
    /// The wire value.
    pub fn to_u8(self) -> u8 {
        match self {
            Status::Success => 0,
            Status::Cancelled => 1,
            Status::Inval => 2,
            Status::IoError => 3,
            Status::Stall => 4,
            Status::Timeout => 5,
            Status::Babble => 6,
            Status::Other(v) => v,
        }
    }

    /// From the wire value.
    pub fn from_u8(v: u8) -> Status {
        match v {
            0 => Status::Success,
            1 => Status::Cancelled,
            2 => Status::Inval,
            3 => Status::IoError,
            4 => Status::Stall,
            5 => Status::Timeout,
            6 => Status::Babble,
            v => Status::Other(v),
        }
    }

    /// The status's name in traces.
    pub fn name(self) -> &'static str {
        match self {
            Status::Success => "success",
            Status::Cancelled => "cancelled",
            Status::Inval => "inval",
            Status::IoError => "ioerror",
            Status::Stall => "stall",
            Status::Timeout => "timeout",
            Status::Babble => "babble",
            Status::Other(_) => "other",
        }
    }
}

/// Endpoint (transfer) types of `ep_info`.
pub mod ep_type {
    /// Control.
    pub const CONTROL: u8 = 0;
    /// Isochronous.
    pub const ISO: u8 = 1;
    /// Bulk.
    pub const BULK: u8 = 2;
    /// Interrupt.
    pub const INTERRUPT: u8 = 3;
    /// Absent.
    pub const INVALID: u8 = 255;
}

/// Device speeds of `device_connect`.
pub mod speed {
    /// Low speed.
    pub const LOW: u8 = 0;
    /// Full speed.
    pub const FULL: u8 = 1;
    /// High speed.
    pub const HIGH: u8 = 2;
    /// Super speed.
    pub const SUPER: u8 = 3;
    /// Unknown.
    pub const UNKNOWN: u8 = 255;
}

/// Index into the 32-entry endpoint tables: OUT 0-15, then IN 0-15.
pub fn ep_index(addr: u8) -> usize {
    (((addr & 0x80) >> 3) | (addr & 0x0f)) as usize
}

/// The endpoint address of a table index.
pub fn index_ep(i: usize) -> u8 {
    (((i & 0x10) << 3) | (i & 0x0f)) as u8
}

/// Both sides' capabilities; a capability is in use only when both advertise it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Caps {
    /// What this side advertised.
    pub ours: u32,
    /// What the peer advertised in its hello (`None` until it arrives).
    pub peer: Option<u32>,
}

impl Caps {
    /// Our capabilities, the peer's not yet known.
    pub fn new(ours: u32) -> Caps {
        Caps { ours, peer: None }
    }

    /// Whether both sides have capability `cap`.
    pub fn both(&self, cap: u32) -> bool {
        cap < 32 && self.ours & (1 << cap) != 0 && self.peer.is_some_and(|p| p & (1 << cap) != 0)
    }

    /// Header length of packets other than hello: 16 with 64-bit ids, else 12.
    pub fn header_len(&self) -> usize {
        if self.both(CAP_64BITS_IDS) {
            16
        } else {
            12
        }
    }
}

/// A malformed packet or stream. Every variant names what was expected.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ProtoError {
    /// The body is shorter or longer than the packet type requires.
    Length {
        /// The packet type's name.
        packet: &'static str,
        /// What the type requires (a minimum for types with data).
        expected: usize,
        /// What arrived.
        found: usize,
    },
    /// A type header's length field disagrees with the data that follows.
    DataLength {
        /// The packet type's name.
        packet: &'static str,
        /// The length field.
        field: usize,
        /// Bytes of data present.
        found: usize,
    },
    /// The header announces a packet larger than [`MAX_PACKET_LEN`]: the stream is lost.
    TooLarge {
        /// The announced length.
        length: u32,
    },
    /// A packet type this parser does not know.
    UnknownType {
        /// The type.
        ty: u32,
    },
    /// A field has a value the protocol does not allow.
    Field {
        /// The packet type's name.
        packet: &'static str,
        /// The field.
        field: &'static str,
        /// What was wrong.
        message: String,
    },
}

impl fmt::Display for ProtoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ProtoError::Length {
                packet,
                expected,
                found,
            } => write!(
                f,
                "usbredir {packet}: expected a {expected}-byte body, found {found} bytes"
            ),
            ProtoError::DataLength {
                packet,
                field,
                found,
            } => write!(
                f,
                "usbredir {packet}: the length field says {field} bytes of data, {found} follow"
            ),
            ProtoError::TooLarge { length } => write!(
                f,
                "usbredir header announces {length} bytes, over the {MAX_PACKET_LEN}-byte limit; the stream cannot be trusted"
            ),
            ProtoError::UnknownType { ty } => write!(f, "usbredir packet type {ty} is unknown"),
            ProtoError::Field {
                packet,
                field,
                message,
            } => write!(f, "usbredir {packet}.{field}: {message}"),
        }
    }
}

impl std::error::Error for ProtoError {}

/// `interface_info`: the interfaces of the active configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InterfaceInfo {
    /// Number of valid entries (at most 32).
    pub count: u32,
    /// `bInterfaceNumber`s.
    pub interface: [u8; 32],
    /// Classes.
    pub class: [u8; 32],
    /// Subclasses.
    pub subclass: [u8; 32],
    /// Protocols.
    pub protocol: [u8; 32],
}

impl Default for InterfaceInfo {
    fn default() -> Self {
        InterfaceInfo {
            count: 0,
            interface: [0; 32],
            class: [0; 32],
            subclass: [0; 32],
            protocol: [0; 32],
        }
    }
}

/// `ep_info`: every endpoint of the active configuration and alternate settings.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EpInfo {
    /// Transfer type per index ([`ep_type`]).
    pub ty: [u8; 32],
    /// `bInterval`.
    pub interval: [u8; 32],
    /// The interface each endpoint belongs to.
    pub interface: [u8; 32],
    /// Max packet size in bytes (sent with `ep_info_max_packet_size`).
    pub max_packet_size: [u16; 32],
    /// Max streams (sent with `bulk_streams`).
    pub max_streams: [u32; 32],
}

impl Default for EpInfo {
    fn default() -> Self {
        EpInfo {
            ty: [ep_type::INVALID; 32],
            interval: [0; 32],
            interface: [0; 32],
            max_packet_size: [0; 32],
            max_streams: [0; 32],
        }
    }
}

/// `device_connect`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceConnect {
    /// [`speed`].
    pub speed: u8,
    /// `bDeviceClass`.
    pub class: u8,
    /// `bDeviceSubClass`.
    pub subclass: u8,
    /// `bDeviceProtocol`.
    pub protocol: u8,
    /// `idVendor`.
    pub vendor_id: u16,
    /// `idProduct`.
    pub product_id: u16,
    /// `bcdDevice` (sent with `connect_device_version`).
    pub device_version_bcd: u16,
}

/// The fixed header of a control packet (note `request` before `requesttype`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ControlHeader {
    /// Endpoint (0x00 or 0x80).
    pub endpoint: u8,
    /// `bRequest`.
    pub request: u8,
    /// `bmRequestType`.
    pub requesttype: u8,
    /// Status (replies).
    pub status: Status,
    /// `wValue`.
    pub value: u16,
    /// `wIndex`.
    pub index: u16,
    /// `wLength` (requests) or the actual length (replies).
    pub length: u16,
}

/// One usbredir message. Which direction a packet travels follows from its type.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Packet {
    /// 0: the first packet both ways.
    Hello {
        /// Free-form version string.
        version: String,
        /// Capability words.
        caps: Vec<u32>,
    },
    /// 1: host announces the device.
    DeviceConnect(DeviceConnect),
    /// 2: host announces the device is gone.
    DeviceDisconnect,
    /// 3: guest resets the device.
    Reset,
    /// 4: host describes the interfaces.
    InterfaceInfo(Box<InterfaceInfo>),
    /// 5: host describes the endpoints.
    EpInfo(Box<EpInfo>),
    /// 6.
    SetConfiguration {
        /// `bConfigurationValue`.
        configuration: u8,
    },
    /// 7.
    GetConfiguration,
    /// 8.
    ConfigurationStatus {
        /// Result.
        status: Status,
        /// The active configuration.
        configuration: u8,
    },
    /// 9.
    SetAltSetting {
        /// Interface.
        interface: u8,
        /// Alternate setting.
        alt: u8,
    },
    /// 10.
    GetAltSetting {
        /// Interface.
        interface: u8,
    },
    /// 11.
    AltSettingStatus {
        /// Result.
        status: Status,
        /// Interface.
        interface: u8,
        /// Alternate setting.
        alt: u8,
    },
    /// 12.
    StartIsoStream {
        /// Endpoint.
        endpoint: u8,
        /// Packets per URB.
        pkts_per_urb: u8,
        /// URBs.
        no_urbs: u8,
    },
    /// 13.
    StopIsoStream {
        /// Endpoint.
        endpoint: u8,
    },
    /// 14.
    IsoStreamStatus {
        /// Result.
        status: Status,
        /// Endpoint.
        endpoint: u8,
    },
    /// 15.
    StartInterruptReceiving {
        /// Endpoint.
        endpoint: u8,
    },
    /// 16.
    StopInterruptReceiving {
        /// Endpoint.
        endpoint: u8,
    },
    /// 17.
    InterruptReceivingStatus {
        /// Result.
        status: Status,
        /// Endpoint.
        endpoint: u8,
    },
    /// 18.
    AllocBulkStreams {
        /// Endpoint bitmask.
        endpoints: u32,
        /// Streams.
        no_streams: u32,
    },
    /// 19.
    FreeBulkStreams {
        /// Endpoint bitmask.
        endpoints: u32,
    },
    /// 20.
    BulkStreamsStatus {
        /// Endpoint bitmask.
        endpoints: u32,
        /// Streams.
        no_streams: u32,
        /// Result.
        status: Status,
    },
    /// 21: the header's id names the packet to cancel.
    CancelDataPacket,
    /// 22.
    FilterReject,
    /// 23: the rules string, without its NUL.
    FilterFilter {
        /// Rules.
        rules: String,
    },
    /// 24.
    DeviceDisconnectAck,
    /// 25.
    StartBulkReceiving {
        /// Stream.
        stream_id: u32,
        /// Bytes per transfer.
        bytes_per_transfer: u32,
        /// Endpoint.
        endpoint: u8,
        /// Transfers.
        no_transfers: u8,
    },
    /// 26.
    StopBulkReceiving {
        /// Stream.
        stream_id: u32,
        /// Endpoint.
        endpoint: u8,
    },
    /// 27.
    BulkReceivingStatus {
        /// Stream.
        stream_id: u32,
        /// Endpoint.
        endpoint: u8,
        /// Result.
        status: Status,
    },
    /// 100: a control transfer (request, or reply with the same id).
    Control {
        /// The fixed header.
        header: ControlHeader,
        /// OUT data (request) or IN data (reply).
        data: Vec<u8>,
    },
    /// 101: a bulk transfer.
    Bulk {
        /// Endpoint.
        endpoint: u8,
        /// Status (replies).
        status: Status,
        /// Requested length (IN requests) or actual length (replies).
        length: u32,
        /// Stream.
        stream_id: u32,
        /// Data in the endpoint's direction.
        data: Vec<u8>,
    },
    /// 102: an isochronous packet.
    Iso {
        /// Endpoint.
        endpoint: u8,
        /// Status.
        status: Status,
        /// Data.
        data: Vec<u8>,
    },
    /// 103: an interrupt packet (OUT request, or IN data the host streams).
    Interrupt {
        /// Endpoint.
        endpoint: u8,
        /// Status.
        status: Status,
        /// The length field (the data length, or the bytes wanted for an IN request).
        length: u16,
        /// Data.
        data: Vec<u8>,
    },
    /// 104: buffered bulk data.
    BufferedBulk {
        /// Stream.
        stream_id: u32,
        /// Endpoint.
        endpoint: u8,
        /// Status.
        status: Status,
        /// Data.
        data: Vec<u8>,
    },
}

/// Packet type numbers.
pub mod ty {
    #![allow(missing_docs)]
    pub const HELLO: u32 = 0;
    pub const DEVICE_CONNECT: u32 = 1;
    pub const DEVICE_DISCONNECT: u32 = 2;
    pub const RESET: u32 = 3;
    pub const INTERFACE_INFO: u32 = 4;
    pub const EP_INFO: u32 = 5;
    pub const SET_CONFIGURATION: u32 = 6;
    pub const GET_CONFIGURATION: u32 = 7;
    pub const CONFIGURATION_STATUS: u32 = 8;
    pub const SET_ALT_SETTING: u32 = 9;
    pub const GET_ALT_SETTING: u32 = 10;
    pub const ALT_SETTING_STATUS: u32 = 11;
    pub const START_ISO_STREAM: u32 = 12;
    pub const STOP_ISO_STREAM: u32 = 13;
    pub const ISO_STREAM_STATUS: u32 = 14;
    pub const START_INTERRUPT_RECEIVING: u32 = 15;
    pub const STOP_INTERRUPT_RECEIVING: u32 = 16;
    pub const INTERRUPT_RECEIVING_STATUS: u32 = 17;
    pub const ALLOC_BULK_STREAMS: u32 = 18;
    pub const FREE_BULK_STREAMS: u32 = 19;
    pub const BULK_STREAMS_STATUS: u32 = 20;
    pub const CANCEL_DATA_PACKET: u32 = 21;
    pub const FILTER_REJECT: u32 = 22;
    pub const FILTER_FILTER: u32 = 23;
    pub const DEVICE_DISCONNECT_ACK: u32 = 24;
    pub const START_BULK_RECEIVING: u32 = 25;
    pub const STOP_BULK_RECEIVING: u32 = 26;
    pub const BULK_RECEIVING_STATUS: u32 = 27;
    pub const CONTROL_PACKET: u32 = 100;
    pub const BULK_PACKET: u32 = 101;
    pub const ISO_PACKET: u32 = 102;
    pub const INTERRUPT_PACKET: u32 = 103;
    pub const BUFFERED_BULK_PACKET: u32 = 104;
}

/// Reads little-endian fields from a body without ever indexing out of bounds.
struct Reader<'a> {
    b: &'a [u8],
    at: usize,
}

impl<'a> Reader<'a> {
    fn u8(&mut self) -> u8 {
        let v = self.b.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        v
    }
    fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }
    fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }
    fn arr<const N: usize>(&mut self) -> [u8; N] {
        let mut a = [0u8; N];
        for x in a.iter_mut() {
            *x = self.u8();
        }
        a
    }
    fn rest(&self) -> &'a [u8] {
        self.b.get(self.at..).unwrap_or(&[])
    }
}

fn exact(packet: &'static str, body: &[u8], n: usize) -> Result<(), ProtoError> {
    if body.len() == n {
        Ok(())
    } else {
        Err(ProtoError::Length {
            packet,
            expected: n,
            found: body.len(),
        })
    }
}

fn at_least(packet: &'static str, body: &[u8], n: usize) -> Result<(), ProtoError> {
    if body.len() >= n {
        Ok(())
    } else {
        Err(ProtoError::Length {
            packet,
            expected: n,
            found: body.len(),
        })
    }
}

impl Packet {
    /// The packet's type number.
    pub fn ty(&self) -> u32 {
        match self {
            Packet::Hello { .. } => ty::HELLO,
            Packet::DeviceConnect(_) => ty::DEVICE_CONNECT,
            Packet::DeviceDisconnect => ty::DEVICE_DISCONNECT,
            Packet::Reset => ty::RESET,
            Packet::InterfaceInfo(_) => ty::INTERFACE_INFO,
            Packet::EpInfo(_) => ty::EP_INFO,
            Packet::SetConfiguration { .. } => ty::SET_CONFIGURATION,
            Packet::GetConfiguration => ty::GET_CONFIGURATION,
            Packet::ConfigurationStatus { .. } => ty::CONFIGURATION_STATUS,
            Packet::SetAltSetting { .. } => ty::SET_ALT_SETTING,
            Packet::GetAltSetting { .. } => ty::GET_ALT_SETTING,
            Packet::AltSettingStatus { .. } => ty::ALT_SETTING_STATUS,
            Packet::StartIsoStream { .. } => ty::START_ISO_STREAM,
            Packet::StopIsoStream { .. } => ty::STOP_ISO_STREAM,
            Packet::IsoStreamStatus { .. } => ty::ISO_STREAM_STATUS,
            Packet::StartInterruptReceiving { .. } => ty::START_INTERRUPT_RECEIVING,
            Packet::StopInterruptReceiving { .. } => ty::STOP_INTERRUPT_RECEIVING,
            Packet::InterruptReceivingStatus { .. } => ty::INTERRUPT_RECEIVING_STATUS,
            Packet::AllocBulkStreams { .. } => ty::ALLOC_BULK_STREAMS,
            Packet::FreeBulkStreams { .. } => ty::FREE_BULK_STREAMS,
            Packet::BulkStreamsStatus { .. } => ty::BULK_STREAMS_STATUS,
            Packet::CancelDataPacket => ty::CANCEL_DATA_PACKET,
            Packet::FilterReject => ty::FILTER_REJECT,
            Packet::FilterFilter { .. } => ty::FILTER_FILTER,
            Packet::DeviceDisconnectAck => ty::DEVICE_DISCONNECT_ACK,
            Packet::StartBulkReceiving { .. } => ty::START_BULK_RECEIVING,
            Packet::StopBulkReceiving { .. } => ty::STOP_BULK_RECEIVING,
            Packet::BulkReceivingStatus { .. } => ty::BULK_RECEIVING_STATUS,
            Packet::Control { .. } => ty::CONTROL_PACKET,
            Packet::Bulk { .. } => ty::BULK_PACKET,
            Packet::Iso { .. } => ty::ISO_PACKET,
            Packet::Interrupt { .. } => ty::INTERRUPT_PACKET,
            Packet::BufferedBulk { .. } => ty::BUFFERED_BULK_PACKET,
        }
    }

    /// The packet's name in traces (`control_packet`, `ep_info`).
    pub fn name(&self) -> &'static str {
        type_name(self.ty())
    }

    /// Encodes the whole packet (header and body) with packet id `id`. A hello always gets the
    /// 12-byte header; others follow `caps`.
    pub fn encode(&self, id: u64, caps: &Caps) -> Vec<u8> {
        let body = self.body(caps);
        let mut out = Vec::with_capacity(16 + body.len());
        out.extend_from_slice(&self.ty().to_le_bytes());
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        if matches!(self, Packet::Hello { .. }) || caps.header_len() == 12 {
            out.extend_from_slice(&(id as u32).to_le_bytes());
        } else {
            out.extend_from_slice(&id.to_le_bytes());
        }
        out.extend_from_slice(&body);
        out
    }

    fn body(&self, caps: &Caps) -> Vec<u8> {
        let mut b = Vec::new();
        match self {
            Packet::Hello {
                version,
                caps: words,
            } => {
                let mut v = [0u8; 64];
                let n = version.len().min(63);
                v[..n].copy_from_slice(&version.as_bytes()[..n]);
                b.extend_from_slice(&v);
                for w in words {
                    b.extend_from_slice(&w.to_le_bytes());
                }
            }
            Packet::DeviceConnect(d) => {
                b.extend_from_slice(&[d.speed, d.class, d.subclass, d.protocol]);
                b.extend_from_slice(&d.vendor_id.to_le_bytes());
                b.extend_from_slice(&d.product_id.to_le_bytes());
                if caps.both(CAP_CONNECT_DEVICE_VERSION) {
                    b.extend_from_slice(&d.device_version_bcd.to_le_bytes());
                }
            }
            Packet::DeviceDisconnect
            | Packet::Reset
            | Packet::GetConfiguration
            | Packet::CancelDataPacket
            | Packet::FilterReject
            | Packet::DeviceDisconnectAck => {}
            Packet::InterfaceInfo(i) => {
                b.extend_from_slice(&i.count.to_le_bytes());
                b.extend_from_slice(&i.interface);
                b.extend_from_slice(&i.class);
                b.extend_from_slice(&i.subclass);
                b.extend_from_slice(&i.protocol);
            }
            Packet::EpInfo(e) => {
                b.extend_from_slice(&e.ty);
                b.extend_from_slice(&e.interval);
                b.extend_from_slice(&e.interface);
                if caps.both(CAP_EP_INFO_MAX_PACKET_SIZE) {
                    for m in e.max_packet_size {
                        b.extend_from_slice(&m.to_le_bytes());
                    }
                }
                if caps.both(CAP_BULK_STREAMS) {
                    for m in e.max_streams {
                        b.extend_from_slice(&m.to_le_bytes());
                    }
                }
            }
            Packet::SetConfiguration { configuration } => b.push(*configuration),
            Packet::ConfigurationStatus {
                status,
                configuration,
            } => b.extend_from_slice(&[status.to_u8(), *configuration]),
            Packet::SetAltSetting { interface, alt } => b.extend_from_slice(&[*interface, *alt]),
            Packet::GetAltSetting { interface } => b.push(*interface),
            Packet::AltSettingStatus {
                status,
                interface,
                alt,
            } => b.extend_from_slice(&[status.to_u8(), *interface, *alt]),
            Packet::StartIsoStream {
                endpoint,
                pkts_per_urb,
                no_urbs,
            } => b.extend_from_slice(&[*endpoint, *pkts_per_urb, *no_urbs]),
            Packet::StopIsoStream { endpoint }
            | Packet::StartInterruptReceiving { endpoint }
            | Packet::StopInterruptReceiving { endpoint } => b.push(*endpoint),
            Packet::IsoStreamStatus { status, endpoint }
            | Packet::InterruptReceivingStatus { status, endpoint } => {
                b.extend_from_slice(&[status.to_u8(), *endpoint])
            }
            Packet::AllocBulkStreams {
                endpoints,
                no_streams,
            } => {
                b.extend_from_slice(&endpoints.to_le_bytes());
                b.extend_from_slice(&no_streams.to_le_bytes());
            }
            Packet::FreeBulkStreams { endpoints } => b.extend_from_slice(&endpoints.to_le_bytes()),
            Packet::BulkStreamsStatus {
                endpoints,
                no_streams,
                status,
            } => {
                b.extend_from_slice(&endpoints.to_le_bytes());
                b.extend_from_slice(&no_streams.to_le_bytes());
                b.push(status.to_u8());
            }
            Packet::FilterFilter { rules } => {
                b.extend_from_slice(rules.as_bytes());
                b.push(0);
            }
            Packet::StartBulkReceiving {
                stream_id,
                bytes_per_transfer,
                endpoint,
                no_transfers,
            } => {
                b.extend_from_slice(&stream_id.to_le_bytes());
                b.extend_from_slice(&bytes_per_transfer.to_le_bytes());
                b.extend_from_slice(&[*endpoint, *no_transfers]);
            }
            Packet::StopBulkReceiving {
                stream_id,
                endpoint,
            } => {
                b.extend_from_slice(&stream_id.to_le_bytes());
                b.push(*endpoint);
            }
            Packet::BulkReceivingStatus {
                stream_id,
                endpoint,
                status,
            } => {
                b.extend_from_slice(&stream_id.to_le_bytes());
                b.extend_from_slice(&[*endpoint, status.to_u8()]);
            }
            Packet::Control { header: h, data } => {
                b.extend_from_slice(&[h.endpoint, h.request, h.requesttype, h.status.to_u8()]);
                b.extend_from_slice(&h.value.to_le_bytes());
                b.extend_from_slice(&h.index.to_le_bytes());
                b.extend_from_slice(&h.length.to_le_bytes());
                b.extend_from_slice(data);
            }
            Packet::Bulk {
                endpoint,
                status,
                length,
                stream_id,
                data,
            } => {
                b.extend_from_slice(&[*endpoint, status.to_u8()]);
                b.extend_from_slice(&(*length as u16).to_le_bytes());
                b.extend_from_slice(&stream_id.to_le_bytes());
                if caps.both(CAP_32BITS_BULK_LENGTH) {
                    b.extend_from_slice(&((*length >> 16) as u16).to_le_bytes());
                }
                b.extend_from_slice(data);
            }
            Packet::Iso {
                endpoint,
                status,
                data,
            } => {
                b.extend_from_slice(&[*endpoint, status.to_u8()]);
                b.extend_from_slice(&(data.len() as u16).to_le_bytes());
                b.extend_from_slice(data);
            }
            Packet::Interrupt {
                endpoint,
                status,
                length,
                data,
            } => {
                b.extend_from_slice(&[*endpoint, status.to_u8()]);
                b.extend_from_slice(&length.to_le_bytes());
                b.extend_from_slice(data);
            }
            Packet::BufferedBulk {
                stream_id,
                endpoint,
                status,
                data,
            } => {
                b.extend_from_slice(&stream_id.to_le_bytes());
                b.extend_from_slice(&(data.len() as u32).to_le_bytes());
                b.extend_from_slice(&[*endpoint, status.to_u8()]);
                b.extend_from_slice(data);
            }
        }
        b
    }

    /// Decodes one body of type `ty`. `from_host` says which side sent it: a data packet's
    /// data follows in one direction only, so a request and a reply of the same type differ.
    pub fn decode(
        ty: u32,
        body: &[u8],
        caps: &Caps,
        from_host: bool,
    ) -> Result<Packet, ProtoError> {
        let name = type_name(ty);
        let mut r = Reader { b: body, at: 0 };
        let p = match ty {
            ty::HELLO => {
                at_least(name, body, 64)?;
                if (body.len() - 64) % 4 != 0 {
                    return Err(ProtoError::Field {
                        packet: name,
                        field: "capabilities",
                        message: format!(
                            "expected whole 32-bit words after the 64-byte version, found {} bytes",
                            body.len() - 64
                        ),
                    });
                }
                let v = &body[..64];
                let end = v.iter().position(|&c| c == 0).unwrap_or(64);
                let version = String::from_utf8_lossy(&v[..end]).into_owned();
                let caps = body[64..]
                    .chunks_exact(4)
                    .map(|c| u32::from_le_bytes([c[0], c[1], c[2], c[3]]))
                    .collect();
                Packet::Hello { version, caps }
            }
            ty::DEVICE_CONNECT => {
                let n = if caps.both(CAP_CONNECT_DEVICE_VERSION) {
                    10
                } else {
                    8
                };
                exact(name, body, n)?;
                let (speed, class, subclass, protocol) = (r.u8(), r.u8(), r.u8(), r.u8());
                let vendor_id = r.u16();
                let product_id = r.u16();
                let device_version_bcd = if n == 10 { r.u16() } else { 0 };
                Packet::DeviceConnect(DeviceConnect {
                    speed,
                    class,
                    subclass,
                    protocol,
                    vendor_id,
                    product_id,
                    device_version_bcd,
                })
            }
            ty::DEVICE_DISCONNECT => {
                exact(name, body, 0)?;
                Packet::DeviceDisconnect
            }
            ty::RESET => {
                exact(name, body, 0)?;
                Packet::Reset
            }
            ty::INTERFACE_INFO => {
                exact(name, body, 132)?;
                let count = r.u32();
                if count > 32 {
                    return Err(ProtoError::Field {
                        packet: name,
                        field: "interface_count",
                        message: format!("at most 32 interfaces, found {count}"),
                    });
                }
                Packet::InterfaceInfo(Box::new(InterfaceInfo {
                    count,
                    interface: r.arr(),
                    class: r.arr(),
                    subclass: r.arr(),
                    protocol: r.arr(),
                }))
            }
            ty::EP_INFO => {
                let mut n = 96;
                if caps.both(CAP_EP_INFO_MAX_PACKET_SIZE) {
                    n += 64;
                }
                if caps.both(CAP_BULK_STREAMS) {
                    n += 128;
                }
                exact(name, body, n)?;
                let mut e = EpInfo {
                    ty: r.arr(),
                    interval: r.arr(),
                    interface: r.arr(),
                    ..EpInfo::default()
                };
                if caps.both(CAP_EP_INFO_MAX_PACKET_SIZE) {
                    for m in e.max_packet_size.iter_mut() {
                        *m = r.u16();
                    }
                }
                if caps.both(CAP_BULK_STREAMS) {
                    for m in e.max_streams.iter_mut() {
                        *m = r.u32();
                    }
                }
                Packet::EpInfo(Box::new(e))
            }
            ty::SET_CONFIGURATION => {
                exact(name, body, 1)?;
                Packet::SetConfiguration {
                    configuration: r.u8(),
                }
            }
            ty::GET_CONFIGURATION => {
                exact(name, body, 0)?;
                Packet::GetConfiguration
            }
            ty::CONFIGURATION_STATUS => {
                exact(name, body, 2)?;
                Packet::ConfigurationStatus {
                    status: Status::from_u8(r.u8()),
                    configuration: r.u8(),
                }
            }
            ty::SET_ALT_SETTING => {
                exact(name, body, 2)?;
                Packet::SetAltSetting {
                    interface: r.u8(),
                    alt: r.u8(),
                }
            }
            ty::GET_ALT_SETTING => {
                exact(name, body, 1)?;
                Packet::GetAltSetting { interface: r.u8() }
            }
            ty::ALT_SETTING_STATUS => {
                exact(name, body, 3)?;
                Packet::AltSettingStatus {
                    status: Status::from_u8(r.u8()),
                    interface: r.u8(),
                    alt: r.u8(),
                }
            }
            ty::START_ISO_STREAM => {
                exact(name, body, 3)?;
                Packet::StartIsoStream {
                    endpoint: r.u8(),
                    pkts_per_urb: r.u8(),
                    no_urbs: r.u8(),
                }
            }
            ty::STOP_ISO_STREAM => {
                exact(name, body, 1)?;
                Packet::StopIsoStream { endpoint: r.u8() }
            }
            ty::ISO_STREAM_STATUS => {
                exact(name, body, 2)?;
                Packet::IsoStreamStatus {
                    status: Status::from_u8(r.u8()),
                    endpoint: r.u8(),
                }
            }
            ty::START_INTERRUPT_RECEIVING => {
                exact(name, body, 1)?;
                Packet::StartInterruptReceiving { endpoint: r.u8() }
            }
            ty::STOP_INTERRUPT_RECEIVING => {
                exact(name, body, 1)?;
                Packet::StopInterruptReceiving { endpoint: r.u8() }
            }
            ty::INTERRUPT_RECEIVING_STATUS => {
                exact(name, body, 2)?;
                Packet::InterruptReceivingStatus {
                    status: Status::from_u8(r.u8()),
                    endpoint: r.u8(),
                }
            }
            ty::ALLOC_BULK_STREAMS => {
                exact(name, body, 8)?;
                Packet::AllocBulkStreams {
                    endpoints: r.u32(),
                    no_streams: r.u32(),
                }
            }
            ty::FREE_BULK_STREAMS => {
                exact(name, body, 4)?;
                Packet::FreeBulkStreams { endpoints: r.u32() }
            }
            ty::BULK_STREAMS_STATUS => {
                exact(name, body, 9)?;
                Packet::BulkStreamsStatus {
                    endpoints: r.u32(),
                    no_streams: r.u32(),
                    status: Status::from_u8(r.u8()),
                }
            }
            ty::CANCEL_DATA_PACKET => {
                exact(name, body, 0)?;
                Packet::CancelDataPacket
            }
            ty::FILTER_REJECT => {
                exact(name, body, 0)?;
                Packet::FilterReject
            }
            ty::FILTER_FILTER => {
                let end = body.iter().position(|&c| c == 0).ok_or(ProtoError::Field {
                    packet: name,
                    field: "rules",
                    message: "expected a NUL-terminated string".into(),
                })?;
                Packet::FilterFilter {
                    rules: String::from_utf8_lossy(&body[..end]).into_owned(),
                }
            }
            ty::DEVICE_DISCONNECT_ACK => {
                exact(name, body, 0)?;
                Packet::DeviceDisconnectAck
            }
            ty::START_BULK_RECEIVING => {
                exact(name, body, 10)?;
                Packet::StartBulkReceiving {
                    stream_id: r.u32(),
                    bytes_per_transfer: r.u32(),
                    endpoint: r.u8(),
                    no_transfers: r.u8(),
                }
            }
            ty::STOP_BULK_RECEIVING => {
                exact(name, body, 5)?;
                Packet::StopBulkReceiving {
                    stream_id: r.u32(),
                    endpoint: r.u8(),
                }
            }
            ty::BULK_RECEIVING_STATUS => {
                exact(name, body, 6)?;
                Packet::BulkReceivingStatus {
                    stream_id: r.u32(),
                    endpoint: r.u8(),
                    status: Status::from_u8(r.u8()),
                }
            }
            ty::CONTROL_PACKET => {
                at_least(name, body, 10)?;
                let header = ControlHeader {
                    endpoint: r.u8(),
                    request: r.u8(),
                    requesttype: r.u8(),
                    status: Status::from_u8(r.u8()),
                    value: r.u16(),
                    index: r.u16(),
                    length: r.u16(),
                };
                let data = r.rest().to_vec();
                let is_in = header.requesttype & 0x80 != 0;
                // Data travels host->guest for IN, guest->host for OUT.
                let data_expected = is_in == from_host;
                if data_expected {
                    if data.len() != header.length as usize {
                        return Err(ProtoError::DataLength {
                            packet: name,
                            field: header.length as usize,
                            found: data.len(),
                        });
                    }
                } else if !data.is_empty() {
                    return Err(ProtoError::DataLength {
                        packet: name,
                        field: 0,
                        found: data.len(),
                    });
                }
                Packet::Control { header, data }
            }
            ty::BULK_PACKET => {
                let n = if caps.both(CAP_32BITS_BULK_LENGTH) {
                    10
                } else {
                    8
                };
                at_least(name, body, n)?;
                let endpoint = r.u8();
                let status = Status::from_u8(r.u8());
                let low = r.u16() as u32;
                let stream_id = r.u32();
                let high = if n == 10 { r.u16() as u32 } else { 0 };
                let length = low | (high << 16);
                let data = r.rest().to_vec();
                let is_in = endpoint & 0x80 != 0;
                if is_in == from_host {
                    if data.len() != length as usize {
                        return Err(ProtoError::DataLength {
                            packet: name,
                            field: length as usize,
                            found: data.len(),
                        });
                    }
                } else if !data.is_empty() {
                    return Err(ProtoError::DataLength {
                        packet: name,
                        field: 0,
                        found: data.len(),
                    });
                }
                Packet::Bulk {
                    endpoint,
                    status,
                    length,
                    stream_id,
                    data,
                }
            }
            ty::ISO_PACKET => {
                at_least(name, body, 4)?;
                let endpoint = r.u8();
                let status = Status::from_u8(r.u8());
                let length = r.u16() as usize;
                let data = r.rest().to_vec();
                if data.len() != length {
                    return Err(ProtoError::DataLength {
                        packet: name,
                        field: length,
                        found: data.len(),
                    });
                }
                Packet::Iso {
                    endpoint,
                    status,
                    data,
                }
            }
            ty::INTERRUPT_PACKET => {
                at_least(name, body, 4)?;
                let endpoint = r.u8();
                let status = Status::from_u8(r.u8());
                let length = r.u16();
                let data = r.rest().to_vec();
                let is_in = endpoint & 0x80 != 0;
                let data_expected = is_in == from_host;
                if (data_expected && data.len() != length as usize)
                    || (!data_expected && !data.is_empty())
                {
                    return Err(ProtoError::DataLength {
                        packet: name,
                        field: if data_expected { length as usize } else { 0 },
                        found: data.len(),
                    });
                }
                Packet::Interrupt {
                    endpoint,
                    status,
                    length,
                    data,
                }
            }
            ty::BUFFERED_BULK_PACKET => {
                at_least(name, body, 10)?;
                let stream_id = r.u32();
                let length = r.u32() as usize;
                let endpoint = r.u8();
                let status = Status::from_u8(r.u8());
                let data = r.rest().to_vec();
                if data.len() != length {
                    return Err(ProtoError::DataLength {
                        packet: name,
                        field: length,
                        found: data.len(),
                    });
                }
                Packet::BufferedBulk {
                    stream_id,
                    endpoint,
                    status,
                    data,
                }
            }
            other => return Err(ProtoError::UnknownType { ty: other }),
        };
        Ok(p)
    }
}

/// The name of a packet type (`unknown` for numbers the protocol does not define).
pub fn type_name(t: u32) -> &'static str {
    match t {
        ty::HELLO => "hello",
        ty::DEVICE_CONNECT => "device_connect",
        ty::DEVICE_DISCONNECT => "device_disconnect",
        ty::RESET => "reset",
        ty::INTERFACE_INFO => "interface_info",
        ty::EP_INFO => "ep_info",
        ty::SET_CONFIGURATION => "set_configuration",
        ty::GET_CONFIGURATION => "get_configuration",
        ty::CONFIGURATION_STATUS => "configuration_status",
        ty::SET_ALT_SETTING => "set_alt_setting",
        ty::GET_ALT_SETTING => "get_alt_setting",
        ty::ALT_SETTING_STATUS => "alt_setting_status",
        ty::START_ISO_STREAM => "start_iso_stream",
        ty::STOP_ISO_STREAM => "stop_iso_stream",
        ty::ISO_STREAM_STATUS => "iso_stream_status",
        ty::START_INTERRUPT_RECEIVING => "start_interrupt_receiving",
        ty::STOP_INTERRUPT_RECEIVING => "stop_interrupt_receiving",
        ty::INTERRUPT_RECEIVING_STATUS => "interrupt_receiving_status",
        ty::ALLOC_BULK_STREAMS => "alloc_bulk_streams",
        ty::FREE_BULK_STREAMS => "free_bulk_streams",
        ty::BULK_STREAMS_STATUS => "bulk_streams_status",
        ty::CANCEL_DATA_PACKET => "cancel_data_packet",
        ty::FILTER_REJECT => "filter_reject",
        ty::FILTER_FILTER => "filter_filter",
        ty::DEVICE_DISCONNECT_ACK => "device_disconnect_ack",
        ty::START_BULK_RECEIVING => "start_bulk_receiving",
        ty::STOP_BULK_RECEIVING => "stop_bulk_receiving",
        ty::BULK_RECEIVING_STATUS => "bulk_receiving_status",
        ty::CONTROL_PACKET => "control_packet",
        ty::BULK_PACKET => "bulk_packet",
        ty::ISO_PACKET => "iso_packet",
        ty::INTERRUPT_PACKET => "interrupt_packet",
        ty::BUFFERED_BULK_PACKET => "buffered_bulk_packet",
        _ => "unknown",
    }
}

/// One packet cut from the stream: its id and its decoded body, or the error of that body
/// (the stream goes on after a malformed body whose length was sound).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// The packet type.
    pub ty: u32,
    /// The header's id.
    pub id: u64,
    /// The decoded packet.
    pub packet: Result<Packet, ProtoError>,
}

/// Cuts a byte stream from one peer into packets. The header length follows `caps`, except for
/// a hello, which always has the 12-byte header; once a stream error is fatal (a length over
/// [`MAX_PACKET_LEN`]) every later call returns it again.
#[derive(Debug, Default)]
pub struct Framer {
    buf: Vec<u8>,
    at: usize,
    dead: Option<ProtoError>,
    seen_hello: bool,
}

impl Framer {
    /// A framer for a stream that has sent nothing yet.
    pub fn new() -> Framer {
        Framer::default()
    }

    /// Appends bytes read from the peer.
    pub fn push(&mut self, bytes: &[u8]) {
        if self.at > 0 && self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        } else if self.at > 64 * 1024 {
            self.buf.drain(..self.at);
            self.at = 0;
        }
        self.buf.extend_from_slice(bytes);
    }

    /// Bytes received but not yet cut into a packet.
    pub fn pending(&self) -> usize {
        self.buf.len() - self.at
    }

    /// The next whole packet, `None` when more bytes are needed, `Err` when the stream is lost.
    /// `caps` must already hold the peer's capabilities once its hello was returned.
    pub fn next(&mut self, caps: &Caps, from_host: bool) -> Option<Result<Frame, ProtoError>> {
        if let Some(e) = &self.dead {
            return Some(Err(e.clone()));
        }
        let avail = &self.buf[self.at..];
        if avail.len() < 8 {
            return None;
        }
        let ty = u32::from_le_bytes([avail[0], avail[1], avail[2], avail[3]]);
        let len = u32::from_le_bytes([avail[4], avail[5], avail[6], avail[7]]);
        if len > MAX_PACKET_LEN {
            let e = ProtoError::TooLarge { length: len };
            self.dead = Some(e.clone());
            return Some(Err(e));
        }
        // The peer's first packet is its hello with a 32-bit id.
        let hlen = if ty == ty::HELLO || !self.seen_hello {
            12
        } else {
            caps.header_len()
        };
        let total = hlen + len as usize;
        if avail.len() < total {
            return None;
        }
        let id = if hlen == 16 {
            u64::from_le_bytes([
                avail[8], avail[9], avail[10], avail[11], avail[12], avail[13], avail[14],
                avail[15],
            ])
        } else {
            u32::from_le_bytes([avail[8], avail[9], avail[10], avail[11]]) as u64
        };
        let body = &avail[hlen..total];
        let packet = Packet::decode(ty, body, caps, from_host);
        if ty == ty::HELLO {
            self.seen_hello = true;
        }
        self.at += total;
        Some(Ok(Frame { ty, id, packet }))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn both() -> Caps {
        Caps {
            ours: HOST_CAPS,
            peer: Some(0xff),
        }
    }

    #[test]
    fn qemus_hello_is_80_bytes_with_a_32_bit_id() {
        // What QEMU 10 sends: type 0, length 68, id 0, a version string, caps 0xff.
        let mut bytes = vec![0, 0, 0, 0, 68, 0, 0, 0, 0, 0, 0, 0];
        let mut v = [0u8; 64];
        v[..20].copy_from_slice(b"qemu usb-redir guest");
        bytes.extend_from_slice(&v);
        bytes.extend_from_slice(&[0xff, 0, 0, 0]);
        assert_eq!(bytes.len(), 80);
        let mut f = Framer::new();
        f.push(&bytes[..30]);
        assert!(f.next(&Caps::new(HOST_CAPS), false).is_none(), "needs more");
        f.push(&bytes[30..]);
        let frame = f.next(&Caps::new(HOST_CAPS), false).unwrap().unwrap();
        assert_eq!(frame.id, 0);
        assert_eq!(
            frame.packet,
            Ok(Packet::Hello {
                version: "qemu usb-redir guest".into(),
                caps: vec![0xff]
            })
        );
        // Our own hello encodes the same way.
        let ours = Packet::Hello {
            version: "qemu usb-redir guest".into(),
            caps: vec![0xff],
        }
        .encode(0, &Caps::new(HOST_CAPS));
        assert_eq!(ours, bytes);
    }

    #[test]
    fn caps_decide_header_and_body_lengths() {
        let c = both();
        assert!(c.both(CAP_64BITS_IDS) && c.both(CAP_EP_INFO_MAX_PACKET_SIZE));
        assert!(!c.both(CAP_BULK_STREAMS), "we do not advertise streams");
        assert_eq!(c.header_len(), 16);
        assert_eq!(Caps::new(HOST_CAPS).header_len(), 12, "peer unknown");
        let ep = Packet::EpInfo(Box::default()).encode(0, &c);
        assert_eq!(ep.len(), 16 + 160);
        let dc = Packet::DeviceConnect(DeviceConnect {
            speed: speed::HIGH,
            class: 0xff,
            subclass: 0,
            protocol: 0,
            vendor_id: 0x0711,
            product_id: 0x5601,
            device_version_bcd: 0x1010,
        })
        .encode(0, &c);
        assert_eq!(
            dc,
            [
                1, 0, 0, 0, 10, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 0xff, 0, 0, 0x11, 7, 1, 0x56,
                0x10, 0x10
            ]
        );
        let old = Caps {
            ours: HOST_CAPS,
            peer: Some(0),
        };
        assert_eq!(
            Packet::EpInfo(Box::default()).encode(0, &old).len(),
            12 + 96
        );
    }

    #[test]
    fn a_get_descriptor_request_and_its_reply() {
        // control_packet, 64-bit id 0x1122334455667788, GET_DESCRIPTOR(device, 18).
        let req = [
            100, 0, 0, 0, 10, 0, 0, 0, 0x88, 0x77, 0x66, 0x55, 0x44, 0x33, 0x22,
            0x11, // header
            0x80, 6, 0x80, 0, 0, 1, 0, 0, 18,
            0, // endpoint, request, requesttype, status, ...
        ];
        let mut f = Framer::new();
        f.seen_hello = true;
        f.push(&req);
        let frame = f.next(&both(), false).unwrap().unwrap();
        assert_eq!(frame.id, 0x1122334455667788);
        let header = ControlHeader {
            endpoint: 0x80,
            request: 6,
            requesttype: 0x80,
            status: Status::Success,
            value: 0x100,
            index: 0,
            length: 18,
        };
        assert_eq!(
            frame.packet,
            Ok(Packet::Control {
                header,
                data: vec![]
            })
        );
        let reply = Packet::Control {
            header: ControlHeader {
                length: 2,
                status: Status::Stall,
                ..header
            },
            data: vec![0x12, 0x01],
        }
        .encode(frame.id, &both());
        assert_eq!(&reply[..8], &[100, 0, 0, 0, 12, 0, 0, 0]);
        assert_eq!(
            &reply[16..],
            &[0x80, 6, 0x80, 4, 0, 1, 0, 0, 2, 0, 0x12, 0x01]
        );
        // The reply parses back when read as coming from the host.
        let back = Packet::decode(100, &reply[16..], &both(), true).unwrap();
        assert!(matches!(back, Packet::Control { ref data, .. } if data == &[0x12, 0x01]));
        // An OUT request with missing data is a value, not a panic.
        let bad = [0, 9, 0, 0, 1, 0, 0, 0, 4, 0, 1, 2];
        assert_eq!(
            Packet::decode(100, &bad, &both(), false),
            Err(ProtoError::DataLength {
                packet: "control_packet",
                field: 4,
                found: 2
            })
        );
    }

    #[test]
    fn bulk_lengths_use_length_high() {
        let p = Packet::Bulk {
            endpoint: 0x81,
            status: Status::Success,
            length: 0x12345,
            stream_id: 0,
            data: vec![],
        };
        let b = p.encode(7, &both());
        assert_eq!(&b[16..], &[0x81, 0, 0x45, 0x23, 0, 0, 0, 0, 1, 0]);
        assert_eq!(Packet::decode(101, &b[16..], &both(), false), Ok(p));
        // An OUT request carries its data.
        let out = Packet::Bulk {
            endpoint: 0x01,
            status: Status::Success,
            length: 3,
            stream_id: 0,
            data: vec![1, 2, 3],
        };
        let b = out.encode(8, &both());
        assert_eq!(Packet::decode(101, &b[16..], &both(), false), Ok(out));
    }

    #[test]
    fn every_packet_round_trips() {
        let c = both();
        let h = ControlHeader {
            endpoint: 0,
            request: 9,
            requesttype: 0,
            status: Status::Success,
            value: 1,
            index: 0,
            length: 0,
        };
        let mut ep = EpInfo::default();
        ep.ty[ep_index(0x81)] = ep_type::INTERRUPT;
        ep.max_packet_size[ep_index(0x81)] = 8;
        let all: Vec<(Packet, bool)> = vec![
            (
                Packet::Hello {
                    version: "x".into(),
                    caps: vec![HOST_CAPS],
                },
                true,
            ),
            (Packet::DeviceDisconnect, true),
            (Packet::Reset, false),
            (Packet::InterfaceInfo(Box::default()), true),
            (Packet::EpInfo(Box::new(ep)), true),
            (Packet::SetConfiguration { configuration: 1 }, false),
            (Packet::GetConfiguration, false),
            (
                Packet::ConfigurationStatus {
                    status: Status::Stall,
                    configuration: 1,
                },
                true,
            ),
            (
                Packet::SetAltSetting {
                    interface: 1,
                    alt: 2,
                },
                false,
            ),
            (Packet::GetAltSetting { interface: 1 }, false),
            (
                Packet::AltSettingStatus {
                    status: Status::Success,
                    interface: 1,
                    alt: 2,
                },
                true,
            ),
            (
                Packet::StartIsoStream {
                    endpoint: 0x83,
                    pkts_per_urb: 8,
                    no_urbs: 3,
                },
                false,
            ),
            (Packet::StopIsoStream { endpoint: 0x83 }, false),
            (
                Packet::IsoStreamStatus {
                    status: Status::Inval,
                    endpoint: 0x83,
                },
                true,
            ),
            (Packet::StartInterruptReceiving { endpoint: 0x81 }, false),
            (Packet::StopInterruptReceiving { endpoint: 0x81 }, false),
            (
                Packet::InterruptReceivingStatus {
                    status: Status::Success,
                    endpoint: 0x81,
                },
                true,
            ),
            (
                Packet::AllocBulkStreams {
                    endpoints: 6,
                    no_streams: 4,
                },
                false,
            ),
            (Packet::FreeBulkStreams { endpoints: 6 }, false),
            (
                Packet::BulkStreamsStatus {
                    endpoints: 6,
                    no_streams: 4,
                    status: Status::Inval,
                },
                true,
            ),
            (Packet::CancelDataPacket, false),
            (Packet::FilterReject, false),
            (
                Packet::FilterFilter {
                    rules: "-1,-1,-1,-1,1".into(),
                },
                false,
            ),
            (Packet::DeviceDisconnectAck, false),
            (
                Packet::StartBulkReceiving {
                    stream_id: 0,
                    bytes_per_transfer: 512,
                    endpoint: 0x82,
                    no_transfers: 4,
                },
                false,
            ),
            (
                Packet::StopBulkReceiving {
                    stream_id: 0,
                    endpoint: 0x82,
                },
                false,
            ),
            (
                Packet::BulkReceivingStatus {
                    stream_id: 0,
                    endpoint: 0x82,
                    status: Status::Other(9),
                },
                true,
            ),
            (
                Packet::Control {
                    header: h,
                    data: vec![],
                },
                false,
            ),
            (
                Packet::Iso {
                    endpoint: 0x83,
                    status: Status::Success,
                    data: vec![1],
                },
                true,
            ),
            (
                Packet::Interrupt {
                    endpoint: 0x81,
                    status: Status::Success,
                    length: 2,
                    data: vec![5, 6],
                },
                true,
            ),
            (
                Packet::BufferedBulk {
                    stream_id: 0,
                    endpoint: 0x82,
                    status: Status::Success,
                    data: vec![7; 3],
                },
                true,
            ),
        ];
        let mut stream = Vec::new();
        for (i, (p, _)) in all.iter().enumerate() {
            stream.extend_from_slice(&p.encode(i as u64, &c));
        }
        let mut f = Framer::new();
        // Byte by byte: the framer must wait for whole packets.
        let mut got = Vec::new();
        for b in &stream {
            f.push(std::slice::from_ref(b));
            while let Some(r) = f.next(&c, true) {
                got.push(r.unwrap());
            }
        }
        assert_eq!(got.len(), all.len());
        for (i, (frame, (p, from_host))) in got.iter().zip(&all).enumerate() {
            assert_eq!(frame.id, i as u64, "{}", p.name());
            let want = Packet::decode(p.ty(), &p.body(&c), &c, *from_host);
            assert_eq!(want.as_ref(), Ok(p), "{}", p.name());
            if *from_host {
                assert_eq!(frame.packet.as_ref(), Ok(p), "{}", p.name());
            }
        }
        assert_eq!(f.pending(), 0);
    }

    #[test]
    fn ep_index_maps_out_then_in() {
        assert_eq!(ep_index(0x00), 0);
        assert_eq!(ep_index(0x02), 2);
        assert_eq!(ep_index(0x80), 16);
        assert_eq!(ep_index(0x81), 17);
        for i in 0..32 {
            assert_eq!(ep_index(index_ep(i)), i);
        }
    }

    #[test]
    fn oversized_and_unknown_packets_are_errors() {
        let mut f = Framer::new();
        f.push(&[200, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0]);
        let frame = f.next(&both(), false).unwrap().unwrap();
        assert_eq!(frame.packet, Err(ProtoError::UnknownType { ty: 200 }));
        f.push(&[100, 0, 0, 0, 0xff, 0xff, 0xff, 0xff]);
        assert_eq!(
            f.next(&both(), false),
            Some(Err(ProtoError::TooLarge { length: u32::MAX }))
        );
        assert!(f.next(&both(), false).unwrap().is_err(), "stays dead");
        let e = Packet::decode(4, &[0; 4], &both(), true).unwrap_err();
        assert!(e.to_string().contains("132-byte body"), "{e}");
    }
}
