//! A small CDC-ACM serial port that echoes (`calametra.spec.cdc_acm`,
//! `specs/cdc-acm-echo.json`): a communication interface (class 2, subclass 2 ACM, with the
//! header, call management, ACM and union functional descriptors and an interrupt notification
//! endpoint) and a data interface (class 0x0a) with a bulk IN and a bulk OUT endpoint. What
//! Linux's cdc-acm binds to as `/dev/ttyACM0`.
//!
//! Every byte that arrives on the bulk OUT endpoint goes back on the bulk IN endpoint, in order;
//! the IN endpoint NAKs while nothing is waiting, and the notification endpoint NAKs always
//! (the line's state never changes by itself). Up to `acm.echo_capacity` bytes wait; the
//! host must read them before it writes more (a write past it is refused).
//!
//! It checks what it receives: a line coding must be one CDC PSTN 1.2 §6.3.11 allows (stop
//! bits 0..=2, parity 0..=4, data bits 5, 6, 7, 8 or 16, a rate above 0), and data must come
//! while the host holds DTR (a host opening the port raises it with SET_CONTROL_LINE_STATE
//! first). Anything else is recorded ([`Acm::refused`]) and breaks [`acm_host_behaved`].
//!
//! Class requests: SET_LINE_CODING, GET_LINE_CODING, SET_CONTROL_LINE_STATE, SEND_BREAK;
//! anything else is a model gap. Fault sites: `ctrl.set_line_coding`,
//! `ctrl.set_control_line_state` and the state changes `acm.closed->open` (DTR raised) and
//! `acm.open->closed`, besides the bus's own transfer sites (`bulk.out#n`, `bulk.in#n`).

use crate::class_device::StandardDevice;
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use std::collections::VecDeque;

/// The spec format this model registers.
pub const FORMAT: &str = "calametra.spec.cdc_acm";

calametra_core::names! {
    /// Coverage marks of the CDC-ACM model.
    pub mod marks {
        /// The host set a valid line coding.
        LINE_CODING = "AcmLineCoding";
        /// The host raised DTR (opened the port).
        DTR_RAISED = "AcmDtrRaised";
        /// The host dropped DTR (closed the port).
        DTR_DROPPED = "AcmDtrDropped";
        /// Bytes arrived and wait to be echoed.
        RECEIVED = "AcmReceived";
        /// Bytes went back to the host.
        ECHOED = "AcmEchoed";
        /// The host sent a break.
        BREAK = "AcmBreak";
        /// Something was refused (a bad line coding, data without DTR, an overflow).
        REFUSED = "AcmRefused";
    }
}

/// The CDC-ACM echo model.
pub struct Acm {
    std: StandardDevice,
    capacity: usize,
    line_coding: [u8; 7],
    dtr: bool,
    rts: bool,
    waiting: VecDeque<u8>,
    received: u64,
    echoed: u64,
    refused: Vec<String>,
}

impl Acm {
    /// The device `spec` describes; errors name the field.
    pub fn try_from_spec(spec: &Spec) -> Result<Acm, calametra_core::Error> {
        let std = StandardDevice::from_spec(spec)?;
        let capacity = usize::try_from(spec.u64("acm.echo_capacity")?)
            .ok()
            .filter(|n| (1..=1 << 20).contains(n))
            .ok_or_else(|| spec.error("acm.echo_capacity", "expected 1..=1048576 bytes"))?;
        Ok(Acm {
            std,
            capacity,
            // 9600 8N1 until the host says otherwise.
            line_coding: [0x80, 0x25, 0, 0, 0, 0, 8],
            dtr: false,
            rts: false,
            waiting: VecDeque::new(),
            received: 0,
            echoed: 0,
            refused: Vec::new(),
        })
    }

    /// The device `spec` describes. Panics with the spec's error (for scenarios).
    pub fn from_spec(spec: &Spec) -> Acm {
        match Acm::try_from_spec(spec) {
            Ok(a) => a,
            Err(e) => panic!("calametra: {e}"),
        }
    }

    /// What was refused, each with why.
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// Bytes received on the bulk OUT endpoint.
    pub fn received(&self) -> u64 {
        self.received
    }

    /// Bytes echoed on the bulk IN endpoint.
    pub fn echoed(&self) -> u64 {
        self.echoed
    }

    /// The line rate the host set, in bits per second.
    pub fn baud(&self) -> u32 {
        u32::from_le_bytes([
            self.line_coding[0],
            self.line_coding[1],
            self.line_coding[2],
            self.line_coding[3],
        ])
    }

    /// Whether the host holds DTR.
    pub fn dtr(&self) -> bool {
        self.dtr
    }

    fn state(&self) -> &'static str {
        match (self.std.configuration_value, self.dtr) {
            (0, _) => "unconfigured",
            (_, false) => "closed",
            (_, true) => "open",
        }
    }

    fn refuse(&mut self, cx: &mut DevCtx<'_>, why: String) {
        cx.mark(marks::REFUSED);
        self.refused.push(why);
    }

    fn class(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            // SET_LINE_CODING (PSTN 1.2 §6.3.10): dwDTERate, bCharFormat, bParityType, bDataBits.
            (0x21, 0x20) => {
                let Ok(lc) = <[u8; 7]>::try_from(data) else {
                    self.refuse(
                        cx,
                        format!("SET_LINE_CODING of {} bytes (7 expected)", data.len()),
                    );
                    return Reply::Stall;
                };
                let rate = u32::from_le_bytes([lc[0], lc[1], lc[2], lc[3]]);
                if rate == 0 || lc[4] > 2 || lc[5] > 4 || ![5, 6, 7, 8, 16].contains(&lc[6]) {
                    self.refuse(
                        cx,
                        format!(
                            "line coding {} (rate {rate}, stop {}, parity {}, data bits {})",
                            calametra_core::hex::encode(&lc),
                            lc[4],
                            lc[5],
                            lc[6]
                        ),
                    );
                    return Reply::Stall;
                }
                cx.mark(marks::LINE_CODING);
                self.line_coding = lc;
                Reply::Ack
            }
            (0xa1, 0x21) => {
                let mut v = self.line_coding.to_vec();
                v.truncate(usize::from(setup.length));
                Reply::Data(v)
            }
            // SET_CONTROL_LINE_STATE (§6.3.12): bit 0 DTR, bit 1 RTS.
            (0x21, 0x22) => {
                let dtr = setup.value & 1 != 0;
                if dtr != self.dtr {
                    let (from, to) = if dtr {
                        ("closed", "open")
                    } else {
                        ("open", "closed")
                    };
                    if !cx.transition("acm", from, to) {
                        return Reply::Stall;
                    }
                    cx.mark(if dtr {
                        marks::DTR_RAISED
                    } else {
                        marks::DTR_DROPPED
                    });
                }
                self.dtr = dtr;
                self.rts = setup.value & 2 != 0;
                Reply::Ack
            }
            (0x21, 0x23) => {
                cx.mark(marks::BREAK);
                Reply::Ack
            }
            _ => {
                cx.model_gap(
                    &format!(
                        "class request {:#04x}/{:#04x} wValue {:#06x}",
                        setup.request_type, setup.request, setup.value
                    ),
                    self.state(),
                );
                Reply::Stall
            }
        }
    }
}

calametra_core::register_model!(FORMAT, Acm::try_from_spec);

/// The host behaved as a CDC-ACM host must towards the model: valid line codings, data only
/// while DTR is raised, no write past what the port holds.
pub fn acm_host_behaved(d: &Acm) -> Result<(), String> {
    match d.refused() {
        [] => Ok(()),
        r => Err(format!(
            "the CDC-ACM model refused {}: {}",
            r.len(),
            r.join("; ")
        )),
    }
}

impl Device for Acm {
    fn name(&self) -> &str {
        "acm"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        if setup.request_type & 0x60 == 0x20 {
            return self.class(cx, setup, data);
        }
        let state = self.state();
        self.std.standard(cx, setup, state, |_, _, _| None)
    }

    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        if ep != 0x02 || self.std.halted(ep) {
            return Reply::Stall;
        }
        if !self.dtr {
            self.refuse(
                cx,
                format!("{} bytes of data while DTR is down", data.len()),
            );
        }
        if self.waiting.len() + data.len() > self.capacity {
            self.refuse(
                cx,
                format!(
                    "{} bytes past the {}-byte echo buffer ({} waiting)",
                    data.len(),
                    self.capacity,
                    self.waiting.len()
                ),
            );
            return Reply::Stall;
        }
        if !data.is_empty() {
            cx.mark(marks::RECEIVED);
        }
        self.received += data.len() as u64;
        self.waiting.extend(data.iter().copied());
        Reply::Ack
    }

    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        if self.std.halted(ep) {
            return Reply::Stall;
        }
        match ep {
            0x81 if !self.waiting.is_empty() => {
                let n = self.waiting.len().min(max_len);
                let v: Vec<u8> = self.waiting.drain(..n).collect();
                self.echoed += v.len() as u64;
                cx.mark(marks::ECHOED);
                Reply::Data(v)
            }
            0x81 | 0x83 => Reply::Nak,
            _ => Reply::Stall,
        }
    }

    fn on_reset(&mut self, _cx: &mut DevCtx<'_>) {
        self.std.reset();
        self.dtr = false;
        self.rts = false;
        self.waiting.clear();
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        match (setup.request_type, setup.request) {
            (0x21, 0x20) => Some("set_line_coding"),
            (0xa1, 0x21) => Some("get_line_coding"),
            (0x21, 0x22) => Some("set_control_line_state"),
            (0x21, 0x23) => Some("send_break"),
            _ => None,
        }
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("state".into(), self.state().into()),
            ("baud".into(), self.baud().to_string()),
            ("rts".into(), self.rts.to_string()),
            ("received".into(), self.received.to_string()),
            ("echoed".into(), self.echoed.to_string()),
            ("waiting".into(), self.waiting.len().to_string()),
            ("refused".into(), self.refused.len().to_string()),
        ]
    }
}

#[cfg(test)]
mod tests;
