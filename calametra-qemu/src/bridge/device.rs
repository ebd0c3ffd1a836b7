//! The device's side of the bridge: control and data transfers through the [`DeviceHost`],
//! the per-request clock gap, pending INs polled and retried, and cancels.

use super::*;

impl Bridge {
    /// Advances the model's clock by the fixed per-request gap (see the module docs).
    pub(super) fn gap(&mut self) {
        let t = self.host.now() + self.opts.request_gap_ns;
        self.host.advance_to(t);
    }

    pub(super) fn control(&mut self, id: u64, header: ControlHeader, data: &[u8]) {
        self.stats.control += 1;
        let setup = Setup {
            request_type: header.requesttype,
            request: header.request,
            value: header.value,
            index: header.index,
            length: header.length,
        };
        match self.host.control(setup, data) {
            Ok(v) => {
                let (length, data) = if setup.is_in() {
                    (v.len() as u16, v)
                } else {
                    (data.len() as u16, Vec::new())
                };
                self.send(
                    id,
                    Packet::Control {
                        header: ControlHeader {
                            status: Status::Success,
                            length,
                            ..header
                        },
                        data,
                    },
                    true,
                );
            }
            Err(TransferError::Timeout) => {
                // The model never completed it: like a real device, it stays unanswered until
                // the guest gives up and cancels it.
                self.stats.swallowed += 1;
                self.swallowed.insert(id, Swallowed::Control(header));
                self.host.record("emulator", "usbredir", false, |r| {
                    r.str("event", "unanswered").u64("id", id);
                });
            }
            Err(e) => {
                self.send(
                    id,
                    Packet::Control {
                        header: ControlHeader {
                            status: status_of(e),
                            length: 0,
                            ..header
                        },
                        data: Vec::new(),
                    },
                    true,
                );
            }
        }
    }

    pub(super) fn reply_out(
        &mut self,
        id: u64,
        endpoint: u8,
        stream_id: u32,
        r: Result<usize, TransferError>,
        interrupt: bool,
    ) {
        let (status, length) = match r {
            Ok(n) => (Status::Success, n as u32),
            Err(TransferError::Timeout) => {
                self.stats.swallowed += 1;
                let s = if interrupt {
                    Swallowed::Interrupt { endpoint }
                } else {
                    Swallowed::Bulk {
                        endpoint,
                        stream_id,
                    }
                };
                self.swallowed.insert(id, s);
                return;
            }
            Err(e) => (status_of(e), 0),
        };
        let p = if interrupt {
            Packet::Interrupt {
                endpoint,
                status,
                length: length as u16,
                data: Vec::new(),
            }
        } else {
            Packet::Bulk {
                endpoint,
                status,
                length,
                stream_id,
                data: Vec::new(),
            }
        };
        self.send(id, p, true);
    }

    /// Polls pending IN request `i` once; replies and removes it when the model answered.
    pub(super) fn poll_pending(&mut self, i: usize) -> bool {
        let Some(p) = self.pending.get(i).cloned() else {
            return false;
        };
        let r = self.host.poll_in(p.endpoint, p.length as usize, false);
        let Some(r) = r else {
            return false;
        };
        self.pending.remove(i);
        let (status, data) = match r {
            Ok(d) => (Status::Success, d),
            Err(e) => (status_of(e), Vec::new()),
        };
        self.send(
            p.id,
            Packet::Bulk {
                endpoint: p.endpoint,
                status,
                length: data.len() as u32,
                stream_id: p.stream_id,
                data,
            },
            true,
        );
        true
    }

    /// Offers every pending IN and interrupt stream to the model once more, in order.
    pub(super) fn retry_pending(&mut self) {
        if !self.connected {
            return;
        }
        let mut i = 0;
        while i < self.pending.len() {
            if !self.poll_pending(i) {
                i += 1;
            }
        }
        let eps: Vec<u8> = self.interrupts.keys().copied().collect();
        for ep in eps {
            let alts = self.alts.clone();
            let (tables, _) = self
                .info
                .tables(self.config, |n| alts.get(&n).copied().unwrap_or(0));
            let max = tables.max_packet_size[crate::proto::ep_index(ep)].max(8) as usize;
            for _ in 0..self.opts.interrupt_burst {
                let Some(r) = self.host.poll_in(ep, max, true) else {
                    break;
                };
                let Some(seq) = self.interrupts.get_mut(&ep) else {
                    break;
                };
                let id = *seq;
                *seq += 1;
                let (status, data) = match r {
                    Ok(d) => (Status::Success, d),
                    Err(e) => (status_of(e), Vec::new()),
                };
                let failed = status != Status::Success;
                self.send(
                    id,
                    Packet::Interrupt {
                        endpoint: ep,
                        status,
                        length: data.len() as u16,
                        data,
                    },
                    true,
                );
                if failed {
                    self.interrupts.remove(&ep);
                    break;
                }
            }
        }
        self.check_attached();
    }

    pub(super) fn cancel(&mut self, id: u64) {
        if let Some(i) = self.pending.iter().position(|p| p.id == id) {
            let p = self.pending.remove(i);
            self.send(
                id,
                Packet::Bulk {
                    endpoint: p.endpoint,
                    status: Status::Cancelled,
                    length: 0,
                    stream_id: p.stream_id,
                    data: Vec::new(),
                },
                true,
            );
            return;
        }
        let reply = match self.swallowed.remove(&id) {
            Some(Swallowed::Control(header)) => Packet::Control {
                header: ControlHeader {
                    status: Status::Cancelled,
                    length: 0,
                    ..header
                },
                data: Vec::new(),
            },
            Some(Swallowed::Bulk {
                endpoint,
                stream_id,
            }) => Packet::Bulk {
                endpoint,
                status: Status::Cancelled,
                length: 0,
                stream_id,
                data: Vec::new(),
            },
            Some(Swallowed::Interrupt { endpoint }) => Packet::Interrupt {
                endpoint,
                status: Status::Cancelled,
                length: 0,
                data: Vec::new(),
            },
            None => return, // already answered
        };
        self.send(id, reply, true);
    }
}
