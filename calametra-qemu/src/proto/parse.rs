//! Reading packets: [`Packet::decode`] of one body, never trusting its bytes, and the
//! [`Framer`] that cuts a peer's byte stream into [`Frame`]s.

use super::*;

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
    pub(super) seen_hello: bool,
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
