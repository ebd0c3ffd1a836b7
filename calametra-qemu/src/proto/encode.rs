//! Writing packets: [`Packet::encode`] and each packet type's body, with the lengths the
//! negotiated [`Caps`] decide.

use super::*;

impl Packet {
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

    pub(super) fn body(&self, caps: &Caps) -> Vec<u8> {
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
}
