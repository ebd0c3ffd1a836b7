//! The usbredir packet types: [`Packet`] and the bodies it carries, the type numbers ([`ty`])
//! and their names in traces. Writing them is [`super::encode`]'s, reading them
//! [`super::parse`]'s.

use super::{ep_type, Status};

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
    /// [`speed`](super::speed).
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
