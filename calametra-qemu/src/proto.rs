//! The usbredir wire format, protocol 0.7: packet types, headers, capabilities, framing.
//!
//! [`Packet`] is one message in either direction; [`Packet::encode`] writes it and
//! [`Packet::decode`] reads one body; [`Framer`] cuts a byte stream into packets. Every length
//! that depends on a capability (the 64-bit id, `connect_device_version`,
//! `ep_info_max_packet_size`, `32bits_bulk_length`, `bulk_streams`) is decided by [`Caps`].
//! Bytes from the socket are never trusted: a short, long or unknown packet is a
//! [`ProtoError`] value, never a panic. Nothing here does I/O or keeps state beyond the framer's
//! buffer.
//!
//! This file holds the constants, [`Status`], [`Caps`] and [`ProtoError`]; the packet types
//! are in `packet.rs`, writing them in `encode.rs`, reading them and the [`Framer`] in
//! `parse.rs` (all re-exported here).

mod encode;
mod packet;
mod parse;

pub use packet::{ty, type_name, ControlHeader, DeviceConnect, EpInfo, InterfaceInfo, Packet};
pub use parse::{Frame, Framer};

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
