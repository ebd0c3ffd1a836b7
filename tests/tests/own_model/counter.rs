//! A device model as a user writes one in their own crate, with only Calametra's public API:
//! a counter that adds what vendor request 1 says (wValue) up to the spec's `limit`, stalls a
//! request that would pass it, and reads its total back with vendor request 2 (4 bytes, LE).
//!
//! It registers itself by its spec's format (`calametra::register_model!`), so everything that
//! builds a model from a spec finds it: the scenario of `own_model_scenario.rs` and the
//! comparison with a capture of `own_model_compare.rs` both build it through
//! `calametra::registry`, never by naming it. Shared by those two test targets
//! (`#[path = "own_model/counter.rs"]`).

use calametra::prelude::*;
use calametra::spec::Spec;

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
