//! A device model as a user writes one in their own crate, with only Calametra's public API:
//! a counter that adds what vendor request 1 says (wValue) up to the spec's `limit`, stalls a
//! request that would pass it, and reads its total back with vendor request 2 (4 bytes, LE).
//! It answers the standard requests a host enumerates it with (descriptors, configuration,
//! status), so a Linux guest sees it as `1209:0c07` (`calametra qemu --package calametra-tests
//! --test own_model_scenario`, tested in `calametra-cli/tests/qemu.rs`).
//!
//! It registers itself by its spec's format (`calametra::register_model!`), so everything that
//! builds a model from a spec finds it: the scenario of `own_model_scenario.rs` and the
//! comparison with a capture of `own_model_compare.rs` both build it through
//! `calametra::registry`, never by naming it. Shared by those two test targets
//! (`#[path = "own_model/counter.rs"]`).

use calametra::prelude::*;
use calametra::spec::Spec;
use calametra_models::chapter9::absent_descriptor;

/// The spec format the counter registers (`format` in `counter.json`).
pub const FORMAT: &str = "example.spec.counter";

calametra::names! {
    /// The counter's coverage marks.
    pub mod marks {
        /// An add that would pass the limit was refused (stalled).
        REFUSED_PAST_LIMIT = "RefusedPastLimit";
    }
}

/// The counter device.
pub struct Counter {
    total: u32,
    limit: u32,
}

impl Counter {
    /// The counter `spec` describes (`start`, `limit`); errors name the field.
    pub fn try_from_spec(spec: &Spec) -> Result<Counter, calametra::Error> {
        let field = |name: &str| -> Result<u32, calametra::Error> {
            u32::try_from(spec.u64(name)?)
                .map_err(|_| spec.error(name, "expected a number below 2^32"))
        };
        let (total, limit) = (field("start")?, field("limit")?);
        if total > limit {
            return Err(spec.error("start", format!("expected at most `limit` ({limit})")));
        }
        Ok(Counter { total, limit })
    }

    /// The total so far (the model's ground truth).
    pub fn total(&self) -> u32 {
        self.total
    }
}

calametra::register_model!(FORMAT, Counter::try_from_spec);

/// The descriptor GET_DESCRIPTOR(`value`: type and index) reads, or `None` for one the
/// counter does not have: a full-speed device (USB 1.1, so no qualifier) with one
/// vendor-class interface and no endpoints besides control (ids 1209:0c07, pid.codes' test
/// vendor), and its product string.
fn descriptor(value: u16) -> Option<Vec<u8>> {
    match value {
        0x0100 => Some(vec![
            18, 1, 0x10, 0x01, 0xff, 0, 0, 64, 0x09, 0x12, 0x07, 0x0c, 0x00, 0x01, 0, 1, 0, 1,
        ]),
        0x0200 => Some(vec![
            9, 2, 18, 0, 1, 1, 0, 0x80, 50, // configuration 1, bus-powered, 100 mA
            9, 4, 0, 0, 0, 0xff, 0, 0, 0, // interface 0: vendor class, no endpoints
        ]),
        0x0300 => Some(vec![4, 3, 0x09, 0x04]),
        0x0301 => Some(
            std::iter::once([16, 3])
                .chain("counter".encode_utf16().map(u16::to_le_bytes))
                .flatten()
                .collect(),
        ),
        _ => None,
    }
}

impl Device for Counter {
    fn name(&self) -> &str {
        "counter"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, _data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            (0x40, 0x01) => {
                let next = self.total + u32::from(setup.value);
                if next > self.limit {
                    cx.mark(marks::REFUSED_PAST_LIMIT);
                    return Reply::Stall;
                }
                if next == self.limit && !cx.transition("counter", "below", "full") {
                    return Reply::Stall;
                }
                self.total = next;
                Reply::Ack
            }
            (0xc0, 0x02) => {
                let mut d = self.total.to_le_bytes().to_vec();
                d.truncate(usize::from(setup.length));
                Reply::Data(d)
            }
            // The standard requests a host enumerates it with (a guest's kernel and lsusb):
            // what chapter 9 says a full-speed vendor-class device answers.
            (0x80, 0x06) => match descriptor(setup.value) {
                Some(mut d) => {
                    d.truncate(usize::from(setup.length));
                    Reply::Data(d)
                }
                // A descriptor chapter 9 says a device without it stalls (lsusb asks for a
                // DEBUG descriptor): no evidence is missing.
                None if absent_descriptor((setup.value >> 8) as u8).is_some() => Reply::Stall,
                None => {
                    cx.model_gap(&format!("GET_DESCRIPTOR {:04x}", setup.value), "counting");
                    Reply::Stall
                }
            },
            (0x80, 0x00) => Reply::Data(vec![0, 0][..usize::from(setup.length).min(2)].to_vec()),
            (0x00, 0x05) => Reply::Ack,
            (0x00, 0x09) if setup.value <= 1 => Reply::Ack,
            (0x80, 0x08) => Reply::Data(vec![1]),
            _ => {
                cx.model_gap(
                    &format!("control {:02x}/{:02x}", setup.request_type, setup.request),
                    "counting",
                );
                Reply::Stall
            }
        }
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        match setup.request {
            0x01 => Some("add"),
            0x02 => Some("read"),
            0x06 if setup.request_type == 0x80 => Some("get_descriptor"),
            _ => None,
        }
    }

    fn describe(&self) -> Vec<(String, String)> {
        vec![
            ("total".into(), self.total.to_string()),
            ("limit".into(), self.limit.to_string()),
        ]
    }
}
