//! A small USB HID device (`calametra.spec.hid`, `specs/hid-reports.json`): one interface of
//! class 3 with an interrupt IN and an interrupt OUT endpoint and a vendor-page report
//! descriptor of one input report and one output report, each `report_len` bytes with no
//! report ID. What Linux's usbhid, hid-generic and hidraw bind to.
//!
//! It samples like a sensor: once configured it has an input report, the spec's
//! `input_report` with byte 1 the sample's number (1, 2, ...), which it sends when the host
//! polls, and `report_interval_ms` of virtual time after a sample was read it takes the next
//! (so a device nobody reads stays quiet on the bus, and the guest's watchdog still sees an
//! idle guest as idle). For each output report it receives (on the
//! interrupt OUT endpoint, or SET_REPORT(Output) on the default pipe) it checks it and answers
//! with an input report before the next sample: `answer_tag`, the number of the output report
//! (1..), then the output report's first `report_len - 2` bytes. An output report is well formed when
//! it is `report_len` bytes and starts with the spec's `output_tag`; anything else is recorded
//! as refused ([`Hid::refused`]) and breaks [`output_reports_well_formed`]. Between reports
//! the IN endpoint NAKs, as a HID device with nothing new to say does. (A report sent while no
//! program has `/dev/hidraw0` open is dropped by the kernel, so a device that spoke once only
//! at configuration would never be heard by a program that opens it later.)
//!
//! Class requests: GET_DESCRIPTOR of the HID (0x21) and report (0x22) descriptors,
//! SET_IDLE/GET_IDLE, GET_REPORT (the last input report, or the last output report),
//! SET_REPORT(Output). Anything else is a model gap.
//!
//! Fault sites: `ctrl.set_idle`, `ctrl.get_report`, `ctrl.set_report`, and the state changes
//! `hid.idle->reporting` (the first input report queued) and `hid.reporting->answered` (an
//! output report taken), besides the bus's own transfer sites.

use crate::class_device::StandardDevice;
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use std::collections::VecDeque;

/// The spec format this model registers.
pub const FORMAT: &str = "calametra.spec.hid";

calametra_core::names! {
    /// Coverage marks of the HID model.
    pub mod marks {
        /// The first input report was queued (the device was configured).
        FIRST_REPORT = "HidFirstReport";
        /// An input report went to the host.
        INPUT_SENT = "HidInputSent";
        /// A well-formed output report arrived on the interrupt OUT endpoint.
        OUTPUT_INTERRUPT = "HidOutputInterrupt";
        /// A well-formed output report arrived as SET_REPORT(Output) on the default pipe.
        OUTPUT_SET_REPORT = "HidOutputSetReport";
        /// An output report was refused (wrong length or tag).
        OUTPUT_REFUSED = "HidOutputRefused";
        /// SET_IDLE was accepted.
        SET_IDLE = "HidSetIdle";
    }
}

/// The HID device model.
pub struct Hid {
    std: StandardDevice,
    hid_descriptor: Vec<u8>,
    report_descriptor: Vec<u8>,
    report_len: usize,
    first_report: Vec<u8>,
    interval_ns: u64,
    sample: u8,
    output_tag: u8,
    answer_tag: u8,
    pending: VecDeque<Vec<u8>>,
    sampled: Option<Vec<u8>>,
    last_input: Vec<u8>,
    last_output: Vec<u8>,
    received: Vec<Vec<u8>>,
    refused: Vec<String>,
    sent: u64,
    idle_rate: u8,
    started: bool,
}

impl Hid {
    /// The device `spec` describes; errors name the field.
    pub fn try_from_spec(spec: &Spec) -> Result<Hid, calametra_core::Error> {
        let std = StandardDevice::from_spec(spec)?;
        let report_descriptor = spec.hex("hid.report_descriptor", None)?;
        let report_len = usize::try_from(spec.u64("hid.report_len")?)
            .ok()
            .filter(|n| (3..=64).contains(n))
            .ok_or_else(|| spec.error("hid.report_len", "expected 3..=64 bytes"))?;
        let first_report = spec.hex("hid.input_report", Some(report_len))?;
        let byte = |field: &str| -> Result<u8, calametra_core::Error> {
            u8::try_from(spec.u64(field)?)
                .map_err(|_| spec.error(field, "expected a byte (0..=255)"))
        };
        let (output_tag, answer_tag) = (byte("hid.output_tag")?, byte("hid.answer_tag")?);
        let interval_ns = spec
            .u64("hid.report_interval_ms")
            .ok()
            .filter(|ms| (1..=10_000).contains(ms))
            .ok_or_else(|| spec.error("hid.report_interval_ms", "expected 1..=10000 ms"))?
            * 1_000_000;
        // The HID descriptor inside the configuration (type 0x21): it must name the report
        // descriptor's length, as a host reads exactly that many bytes.
        let c = &std.configuration;
        let mut at = 0;
        let mut hid_descriptor = None;
        while at + 1 < c.len() && c[at] >= 2 {
            if c[at + 1] == 0x21 && c[at] >= 9 && at + 9 <= c.len() {
                hid_descriptor = Some(c[at..at + usize::from(c[at])].to_vec());
            }
            at += usize::from(c[at]);
        }
        let hid_descriptor = hid_descriptor.ok_or_else(|| {
            spec.error(
                "usb.configuration",
                "expected a HID descriptor (type 0x21) in the configuration",
            )
        })?;
        let named = usize::from(u16::from_le_bytes([hid_descriptor[7], hid_descriptor[8]]));
        if hid_descriptor[6] != 0x22 || named != report_descriptor.len() {
            return Err(spec.error(
                "usb.configuration",
                format!(
                    "the HID descriptor names a report descriptor of {named} bytes; hid.report_descriptor has {}",
                    report_descriptor.len()
                ),
            ));
        }
        Ok(Hid {
            std,
            hid_descriptor,
            report_descriptor,
            report_len,
            last_input: first_report.clone(),
            first_report,
            interval_ns,
            sample: 0,
            output_tag,
            answer_tag,
            pending: VecDeque::new(),
            sampled: None,
            last_output: Vec::new(),
            received: Vec::new(),
            refused: Vec::new(),
            sent: 0,
            idle_rate: 0,
            started: false,
        })
    }

    /// The device `spec` describes. Panics with the spec's error (for scenarios, as
    /// `Dfu::from_spec`).
    pub fn from_spec(spec: &Spec) -> Hid {
        match Hid::try_from_spec(spec) {
            Ok(h) => h,
            Err(e) => panic!("calametra: {e}"),
        }
    }

    /// Well-formed output reports received, in order.
    pub fn received(&self) -> &[Vec<u8>] {
        &self.received
    }

    /// Output reports refused, each with why.
    pub fn refused(&self) -> &[String] {
        &self.refused
    }

    /// Input reports sent to the host.
    pub fn sent(&self) -> u64 {
        self.sent
    }

    /// The input report answering output report number `n` (1..) with bytes `out`.
    pub fn answer(&self, n: usize, out: &[u8]) -> Vec<u8> {
        let mut r = vec![self.answer_tag, n as u8];
        r.extend_from_slice(&out[..self.report_len - 2]);
        r
    }

    /// The next sample: the spec's input report with its number in byte 1.
    fn take_sample(&mut self) {
        self.sample = self.sample.wrapping_add(1);
        let mut r = self.first_report.clone();
        r[1] = self.sample;
        self.sampled = Some(r);
    }

    fn state(&self) -> &'static str {
        match (self.std.configuration_value, self.received.is_empty()) {
            (0, _) => "unconfigured",
            (_, true) => "reporting",
            (_, false) => "answered",
        }
    }

    /// An output report from the host, by `how` (a mark).
    fn output(&mut self, cx: &mut DevCtx<'_>, data: &[u8], how: &str) -> bool {
        if data.len() != self.report_len || data.first() != Some(&self.output_tag) {
            cx.mark(marks::OUTPUT_REFUSED);
            self.refused.push(format!(
                "output report {} ({} bytes, expected {} starting {:#04x})",
                calametra_core::hex::encode(data),
                data.len(),
                self.report_len,
                self.output_tag
            ));
            return false;
        }
        let from = self.state();
        if !cx.transition("hid", from, "answered") {
            return false;
        }
        cx.mark(how);
        self.received.push(data.to_vec());
        self.last_output = data.to_vec();
        let answer = self.answer(self.received.len(), data);
        self.pending.push_back(answer);
        true
    }

    fn class(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        let len = usize::from(setup.length);
        match (setup.request_type, setup.request) {
            // SET_IDLE (HID 1.11 §7.2.4): the duration in wValue's high byte.
            (0x21, 0x0a) => {
                self.idle_rate = (setup.value >> 8) as u8;
                cx.mark(marks::SET_IDLE);
                Reply::Ack
            }
            (0xa1, 0x02) => Reply::Data(vec![self.idle_rate]),
            // GET_REPORT: wValue's high byte is the type (1 input, 2 output), low the ID (0).
            (0xa1, 0x01) if setup.value == 0x0100 => {
                let mut r = self.last_input.clone();
                r.truncate(len);
                Reply::Data(r)
            }
            (0xa1, 0x01) if setup.value == 0x0200 => {
                let mut r = if self.last_output.is_empty() {
                    vec![0; self.report_len]
                } else {
                    self.last_output.clone()
                };
                r.truncate(len);
                Reply::Data(r)
            }
            // SET_REPORT(Output, ID 0).
            (0x21, 0x09) if setup.value == 0x0200 => {
                if self.output(cx, data, marks::OUTPUT_SET_REPORT) {
                    Reply::Ack
                } else {
                    Reply::Stall
                }
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

calametra_core::register_model!(FORMAT, Hid::try_from_spec);

/// The timer token of the next sample.
const SAMPLE: u64 = 1;

/// Every output report the model received was well formed (`report_len` bytes starting with
/// the spec's `output_tag`).
pub fn output_reports_well_formed(d: &Hid) -> Result<(), String> {
    match d.refused() {
        [] => Ok(()),
        r => Err(format!(
            "the HID model refused {}: {}",
            r.len(),
            r.join("; ")
        )),
    }
}

impl Device for Hid {
    fn name(&self) -> &str {
        "hid"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        if setup.request_type & 0x60 == 0x20 {
            return self.class(cx, setup, data);
        }
        let was = self.std.configuration_value;
        let (hid, report) = (self.hid_descriptor.clone(), self.report_descriptor.clone());
        let reply = self
            .std
            .standard(cx, setup, self.state(), |ty, index, _iface| {
                match (ty, index) {
                    (0x21, 0) => Some(hid.clone()),
                    (0x22, 0) => Some(report.clone()),
                    _ => None,
                }
            });
        if was == 0
            && self.std.configuration_value == 1
            && !self.started
            && cx.transition("hid", "idle", "reporting")
        {
            self.started = true;
            cx.mark(marks::FIRST_REPORT);
            self.take_sample();
        }
        reply
    }

    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        if ep != 0x02 || self.std.halted(ep) {
            return Reply::Stall;
        }
        if self.output(cx, data, marks::OUTPUT_INTERRUPT) {
            Reply::Ack
        } else {
            Reply::Stall
        }
    }

    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        if ep != 0x81 || self.std.halted(ep) {
            return Reply::Stall;
        }
        let answer = self.pending.pop_front();
        let sample = answer.is_none().then(|| self.sampled.take()).flatten();
        if sample.is_some() {
            cx.wake_after(self.interval_ns, SAMPLE);
        }
        match answer.or(sample) {
            Some(mut r) => {
                cx.mark(marks::INPUT_SENT);
                self.sent += 1;
                self.last_input = r.clone();
                r.truncate(max_len);
                Reply::Data(r)
            }
            None => Reply::Nak,
        }
    }

    /// A reset unconfigures the device: reports not yet read are lost, and the first input
    /// report is sent again once it is configured again.
    fn on_reset(&mut self, _cx: &mut DevCtx<'_>) {
        self.std.reset();
        self.pending.clear();
        self.sampled = None;
        self.started = false;
    }

    fn on_timer(&mut self, _cx: &mut DevCtx<'_>, token: u64) {
        if token == SAMPLE && self.started && self.std.configuration_value == 1 {
            self.take_sample();
        }
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        match (setup.request_type, setup.request) {
            (0x21, 0x0a) => Some("set_idle"),
            (0xa1, 0x01) => Some("get_report"),
            (0x21, 0x09) => Some("set_report"),
            _ => None,
        }
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("state".into(), self.state().into()),
            ("input reports sent".into(), self.sent.to_string()),
            ("output reports".into(), self.received.len().to_string()),
            ("refused".into(), self.refused.len().to_string()),
            ("pending".into(), self.pending.len().to_string()),
        ]
    }
}

#[cfg(test)]
mod tests;
