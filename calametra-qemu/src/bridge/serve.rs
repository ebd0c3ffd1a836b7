//! The guest's side of the bridge: [`Bridge::serve`] answers each packet cut from the guest's
//! stream (hello, configuration and alt settings, receiving starts and stops, data packets,
//! cancels), handing transfers to the device side ([`super::device`]).

use super::*;

impl Bridge {
    pub(super) fn serve(&mut self, frame: Frame) {
        let Frame { ty, id, packet } = frame;
        let packet = match packet {
            Ok(p) => p,
            Err(e) => {
                self.stats.malformed += 1;
                let m = e.to_string();
                let name = crate::proto::type_name(ty);
                self.host.record("emulator", "usbredir", false, |r| {
                    r.str("dir", "in")
                        .str("packet", name)
                        .u64("id", id)
                        .str("error", &m);
                });
                return;
            }
        };
        let detail = describe(&packet);
        let name = packet.name();
        self.host.record("emulator", "usbredir", false, |r| {
            r.str("dir", "in")
                .str("packet", name)
                .u64("id", id)
                .str("detail", &detail);
        });
        match packet {
            Packet::Hello { caps, .. } => {
                if self.caps.peer.is_some() {
                    return; // a second hello is ignored
                }
                self.caps.peer = Some(caps.first().copied().unwrap_or(0));
                self.start();
                let negotiated = HOST_CAPS & self.caps.peer.unwrap_or(0);
                self.host.record("emulator", "usbredir", false, |r| {
                    r.str("event", "caps").u64("negotiated", negotiated as u64);
                });
                if self.host.is_attached() && self.plugged {
                    self.announce();
                }
            }
            Packet::Reset => {
                self.pending.clear();
                self.interrupts.clear();
                self.config = 0;
                self.alts.clear();
                if !self.configured_since_connect {
                    // The guest resets the port (Linux: twice) while it enumerates a device
                    // that was just plugged in; in the simulator attaching covers those resets,
                    // so the model does not see them (a DFU device would leave DFU mode on
                    // them). Resets of a configured device (a driver's or dfu-util's) reach it.
                    self.host.record("emulator", "usbredir", false, |r| {
                        r.str("event", "attach_reset");
                    });
                } else {
                    self.host.reset();
                    self.check_attached();
                }
            }
            Packet::DeviceDisconnectAck => {
                if self.awaiting_ack {
                    self.awaiting_ack = false;
                    if self.host.is_attached() {
                        self.announce();
                    }
                }
            }
            Packet::SetConfiguration { configuration } => {
                self.gap();
                self.pending.clear();
                self.interrupts.clear();
                let setup = Setup {
                    request_type: 0x00,
                    request: 9,
                    value: configuration as u16,
                    index: 0,
                    length: 0,
                };
                let r = self.host.control(setup, &[]);
                self.stats.control += 1;
                let status = match r {
                    Ok(_) => {
                        self.config = configuration;
                        self.configured_since_connect |= configuration != 0;
                        self.alts.clear();
                        self.send_tables();
                        Status::Success
                    }
                    Err(e) => status_of(e),
                };
                self.send(
                    id,
                    Packet::ConfigurationStatus {
                        status,
                        configuration: self.config,
                    },
                    true,
                );
                self.check_attached();
            }
            Packet::GetConfiguration => {
                self.gap();
                let setup = Setup {
                    request_type: 0x80,
                    request: 8,
                    value: 0,
                    index: 0,
                    length: 1,
                };
                self.stats.control += 1;
                let (status, configuration) = match self.host.control(setup, &[]) {
                    Ok(v) if v.len() == 1 => (Status::Success, v[0]),
                    Ok(_) => (Status::IoError, self.config),
                    Err(e) => (status_of(e), self.config),
                };
                self.send(
                    id,
                    Packet::ConfigurationStatus {
                        status,
                        configuration,
                    },
                    true,
                );
                self.check_attached();
            }
            Packet::SetAltSetting { interface, alt } => {
                self.gap();
                self.pending.clear();
                let setup = Setup {
                    request_type: 0x01,
                    request: 11,
                    value: alt as u16,
                    index: interface as u16,
                    length: 0,
                };
                self.stats.control += 1;
                let status = match self.host.control(setup, &[]) {
                    Ok(_) => {
                        self.alts.insert(interface, alt);
                        self.send_tables();
                        Status::Success
                    }
                    Err(e) => status_of(e),
                };
                let alt = self.alts.get(&interface).copied().unwrap_or(0);
                self.send(
                    id,
                    Packet::AltSettingStatus {
                        status,
                        interface,
                        alt,
                    },
                    true,
                );
                self.check_attached();
            }
            Packet::GetAltSetting { interface } => {
                self.gap();
                let setup = Setup {
                    request_type: 0x81,
                    request: 10,
                    value: 0,
                    index: interface as u16,
                    length: 1,
                };
                self.stats.control += 1;
                let known = self.alts.get(&interface).copied().unwrap_or(0);
                let (status, alt) = match self.host.control(setup, &[]) {
                    Ok(v) if v.len() == 1 => (Status::Success, v[0]),
                    Ok(_) => (Status::IoError, known),
                    Err(e) => (status_of(e), known),
                };
                self.send(
                    id,
                    Packet::AltSettingStatus {
                        status,
                        interface,
                        alt,
                    },
                    true,
                );
                self.check_attached();
            }
            Packet::StartInterruptReceiving { endpoint } => {
                self.interrupts.entry(endpoint).or_insert(0);
                self.send(
                    id,
                    Packet::InterruptReceivingStatus {
                        status: Status::Success,
                        endpoint,
                    },
                    true,
                );
                self.retry_pending();
            }
            Packet::StopInterruptReceiving { endpoint } => {
                self.interrupts.remove(&endpoint);
                self.send(
                    id,
                    Packet::InterruptReceivingStatus {
                        status: Status::Success,
                        endpoint,
                    },
                    true,
                );
            }
            Packet::StartIsoStream { endpoint, .. } | Packet::StopIsoStream { endpoint } => {
                self.send(
                    id,
                    Packet::IsoStreamStatus {
                        status: Status::Inval,
                        endpoint,
                    },
                    true,
                );
            }
            Packet::AllocBulkStreams {
                endpoints,
                no_streams,
            } => {
                self.send(
                    id,
                    Packet::BulkStreamsStatus {
                        endpoints,
                        no_streams,
                        status: Status::Inval,
                    },
                    true,
                );
            }
            Packet::FreeBulkStreams { endpoints } => {
                self.send(
                    id,
                    Packet::BulkStreamsStatus {
                        endpoints,
                        no_streams: 0,
                        status: Status::Inval,
                    },
                    true,
                );
            }
            Packet::StartBulkReceiving {
                stream_id,
                endpoint,
                ..
            }
            | Packet::StopBulkReceiving {
                stream_id,
                endpoint,
            } => {
                self.send(
                    id,
                    Packet::BulkReceivingStatus {
                        stream_id,
                        endpoint,
                        status: Status::Inval,
                    },
                    true,
                );
            }
            Packet::CancelDataPacket => self.cancel(id),
            Packet::Control { header, data } => {
                self.gap();
                self.control(id, header, &data);
                self.check_attached();
                self.retry_pending();
            }
            Packet::Bulk {
                endpoint,
                length,
                stream_id,
                data,
                ..
            } => {
                self.gap();
                self.stats.data += 1;
                if endpoint & 0x80 != 0 {
                    self.pending.push(PendingIn {
                        id,
                        endpoint,
                        length,
                        stream_id,
                    });
                    // Older requests on the same endpoint go first.
                    self.retry_pending();
                    if self.pending.iter().any(|p| p.id == id) {
                        self.stats.naks += 1;
                        self.host.record("emulator", "usbredir", false, |r| {
                            r.str("event", "nak").u64("id", id);
                        });
                    }
                } else {
                    let r = self.host.out(endpoint, &data);
                    self.reply_out(id, endpoint, stream_id, r, false);
                }
                self.check_attached();
                self.retry_pending();
            }
            Packet::Interrupt { endpoint, data, .. } => {
                // Interrupt OUT (QEMU completes it at once and ignores our status).
                self.gap();
                self.stats.data += 1;
                let r = self.host.out(endpoint, &data);
                self.reply_out(id, endpoint, 0, r, true);
                self.check_attached();
                self.retry_pending();
            }
            Packet::FilterFilter { .. }
            | Packet::FilterReject
            | Packet::Iso { .. }
            | Packet::BufferedBulk { .. } => {}
            // Host-to-guest packet types arriving from the guest: traced above, ignored.
            Packet::DeviceConnect(_)
            | Packet::DeviceDisconnect
            | Packet::InterfaceInfo(_)
            | Packet::EpInfo(_)
            | Packet::ConfigurationStatus { .. }
            | Packet::AltSettingStatus { .. }
            | Packet::IsoStreamStatus { .. }
            | Packet::InterruptReceivingStatus { .. }
            | Packet::BulkStreamsStatus { .. }
            | Packet::BulkReceivingStatus { .. } => {}
        }
    }
}
