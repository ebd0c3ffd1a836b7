//! From one device's transfers to keys, outcomes, replies, scripted events and descriptors.
//!
//! The transfers are walked in the order the device saw them, as `compare_all` replays them: a
//! control or OUT transfer at its submission, an IN at its completion. What the device cannot
//! be shown to have answered (a SET_ADDRESS, which the bus handles; a submission that failed;
//! a transfer with no completion or a bus error; OUT data the capture truncated; an OUT taken
//! in part) is counted as skipped with its reason, never guessed.

use super::format::{
    control_name, out_name, ControlKey, Descriptor, InEndpoint, OutKey, OutOutcome, Outcome,
    Packet, Payload, ScriptedIn,
};
use crate::{ControlTransfer, DataTransfer, Status, Transfers, XferType};
use calametra_core::usb::Setup;
use std::collections::{BTreeMap, BTreeSet};

/// What one capture gave.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    /// Control transfers learned.
    pub control: usize,
    /// OUT transfers learned.
    pub out: usize,
    /// IN packets learned as replies to an OUT.
    pub replies: usize,
    /// IN packets learned as scripted events.
    pub events: usize,
    /// Transfers not learned, by reason.
    pub skipped: BTreeMap<String, usize>,
}

/// A key, before names are given.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum KeyRef {
    Control([u8; 8], Payload),
    Out(u8, Payload),
}

struct Acc<O> {
    latency_ns: u64,
    outcomes: Vec<O>,
    /// The step (counted over all captures) of the last answer and of the one before it.
    steps: (Option<u64>, Option<u64>),
}

impl<O: PartialEq> Acc<O> {
    fn new() -> Acc<O> {
        Acc {
            latency_ns: u64::MAX,
            outcomes: Vec::new(),
            steps: (None, None),
        }
    }

    fn push(&mut self, outcome: O, latency_ns: u64, step: u64) -> u32 {
        self.latency_ns = self.latency_ns.min(latency_ns);
        self.outcomes.push(outcome);
        self.steps = (self.steps.1, Some(step));
        self.outcomes.len() as u32
    }

    /// Whether the last two answers were equal and one right after the other.
    fn steady(&self) -> bool {
        let n = self.outcomes.len();
        n >= 2
            && self.outcomes[n - 1] == self.outcomes[n - 2]
            && matches!(self.steps, (Some(a), Some(b)) if b == a + 1)
    }
}

/// Everything learned so far, over all captures.
#[derive(Default)]
pub(crate) struct Learner {
    control: BTreeMap<([u8; 8], Payload), Acc<Outcome>>,
    out: BTreeMap<(u8, Payload), Acc<OutOutcome>>,
    events: Vec<(Packet, Option<(KeyRef, u32)>)>,
    descriptors: BTreeMap<(u8, u8, u16), Vec<Vec<u8>>>,
    in_endpoints: BTreeSet<InEndpoint>,
    /// Answers learned so far, over all captures (a capture starts one apart from the last).
    steps: u64,
}

/// The last transfer the device answered, and the last OUT (replies attach to it).
struct Walk {
    anchor: Option<(KeyRef, u32, i64)>,
    last_out: Option<((u8, Payload), i64, bool)>,
}

fn latency_ns(t_us: i64, done_us: Option<i64>) -> u64 {
    done_us
        .map(|c| u64::try_from(c.saturating_sub(t_us)).unwrap_or(0))
        .unwrap_or(0)
        .saturating_mul(1000)
}

fn after_ns(from_us: i64, to_us: i64) -> u64 {
    u64::try_from(to_us.saturating_sub(from_us))
        .unwrap_or(0)
        .saturating_mul(1000)
}

impl Learner {
    /// Learns the transfers of device `(bus, address)`.
    pub(crate) fn add(&mut self, t: &Transfers, device: (u16, u8)) -> Counts {
        let mut counts = Counts::default();
        let mut steps: Vec<(usize, usize, bool, usize)> = Vec::new();
        for (i, c) in t.control.iter().enumerate() {
            if (c.bus, c.device) == device {
                steps.push((c.submit_record, c.submit_record, true, i));
            }
        }
        for (i, d) in t.data.iter().enumerate() {
            if (d.bus, d.device) != device {
                continue;
            }
            if d.is_in()
                && d.xfer != XferType::Isochronous
                && super::format::is_data_endpoint(d.endpoint)
            {
                self.in_endpoints.insert(InEndpoint {
                    endpoint: d.endpoint,
                    interrupt: d.xfer == XferType::Interrupt,
                });
            }
            let record = if d.is_in() {
                d.complete_record.unwrap_or(usize::MAX)
            } else {
                d.submit_record
            };
            steps.push((record, d.submit_record, false, i));
        }
        steps.sort_unstable();
        // Answers of two captures are never one right after the other.
        self.steps += 1;
        let mut walk = Walk {
            anchor: None,
            last_out: None,
        };
        for (_, _, control, i) in steps {
            if control {
                if let Some(c) = t.control.get(i) {
                    self.control_step(c, &mut walk, &mut counts);
                }
            } else if let Some(d) = t.data.get(i) {
                self.data_step(d, &mut walk, &mut counts);
            }
        }
        counts
    }

    fn control_step(&mut self, c: &ControlTransfer, walk: &mut Walk, counts: &mut Counts) {
        let s = &c.setup;
        let skip = |counts: &mut Counts, why: &str| {
            *counts.skipped.entry(format!("control: {why}")).or_default() += 1;
        };
        if s.request_type == 0x00 && s.request == 5 {
            return skip(
                counts,
                "SET_ADDRESS (the bus's business, answered by the bus)",
            );
        }
        let outcome = match c.status {
            Status::Stall => Outcome::Stall,
            Status::Ok if !s.is_in() => Outcome::Ack,
            Status::Ok if c.truncated => Outcome::Partial {
                data: c.data.clone(),
                length: c.actual,
            },
            Status::Ok => Outcome::Data(c.data.clone()),
            Status::SubmitError(_) => return skip(counts, "the submission failed on the host"),
            Status::NoCompletion => return skip(counts, "no completion in the capture"),
            Status::Error(_) => return skip(counts, "ended with a bus error"),
        };
        if !s.is_in() && c.truncated {
            return skip(counts, "the capture truncated its OUT data");
        }
        if let Outcome::Data(d) = &outcome {
            self.descriptor(s, d);
        }
        let data = Payload::of(if s.is_in() { &[] } else { &c.data });
        let key = (s.to_bytes(), data);
        self.steps += 1;
        let acc = self.control.entry(key.clone()).or_insert_with(Acc::new);
        let n = acc.push(outcome, latency_ns(c.t_us, c.complete_t_us), self.steps);
        walk.anchor = Some((KeyRef::Control(key.0, key.1), n, c.t_us));
        counts.control += 1;
    }

    fn data_step(&mut self, d: &DataTransfer, walk: &mut Walk, counts: &mut Counts) {
        let skip = |counts: &mut Counts, why: String| {
            *counts.skipped.entry(why).or_default() += 1;
        };
        let kind = d.xfer.as_str();
        if d.xfer == XferType::Isochronous {
            return skip(counts, "isochronous: not learned".into());
        }
        if !super::format::is_data_endpoint(d.endpoint) {
            return skip(counts, format!("{kind}: not a data endpoint address"));
        }
        if d.is_in() {
            let body = match d.status {
                Status::Ok if d.truncated => Outcome::Partial {
                    data: d.data.clone(),
                    length: d.actual,
                },
                Status::Ok => Outcome::Data(d.data.clone()),
                Status::Stall => Outcome::Stall,
                // Pending at the end, cancelled, failed: the device sent nothing.
                _ => return,
            };
            let done = d.complete_t_us.unwrap_or(d.t_us);
            let reply_to = walk
                .last_out
                .as_ref()
                .filter(|(_, _, intr)| d.xfer == XferType::Bulk || *intr);
            if let Some((key, t_out, _)) = reply_to {
                if let Some(o) = self
                    .out
                    .get_mut(key)
                    .and_then(|acc| acc.outcomes.last_mut())
                {
                    o.replies.push(Packet {
                        endpoint: d.endpoint,
                        body,
                        after_ns: after_ns(*t_out, done),
                    });
                    counts.replies += 1;
                    return;
                }
            }
            let (after, from) = match &walk.anchor {
                Some((k, n, t)) => (Some((k.clone(), *n)), *t),
                None => (None, done),
            };
            self.events.push((
                Packet {
                    endpoint: d.endpoint,
                    body,
                    after_ns: after_ns(from, done),
                },
                after,
            ));
            counts.events += 1;
            return;
        }
        let stall = match d.status {
            Status::Ok if d.actual == d.requested => false,
            Status::Ok => {
                return skip(
                    counts,
                    format!("{kind} OUT: the device took part of the data"),
                )
            }
            Status::Stall => true,
            Status::SubmitError(_) => {
                return skip(
                    counts,
                    format!("{kind} OUT: the submission failed on the host"),
                )
            }
            Status::NoCompletion => {
                return skip(counts, format!("{kind} OUT: no completion in the capture"))
            }
            Status::Error(_) => return skip(counts, format!("{kind} OUT: ended with a bus error")),
        };
        if d.truncated {
            return skip(
                counts,
                format!("{kind} OUT: the capture truncated its data"),
            );
        }
        let key = (d.endpoint, Payload::of(&d.data));
        self.steps += 1;
        let acc = self.out.entry(key.clone()).or_insert_with(Acc::new);
        let n = acc.push(
            OutOutcome {
                stall,
                replies: Vec::new(),
            },
            latency_ns(d.t_us, d.complete_t_us),
            self.steps,
        );
        walk.anchor = Some((KeyRef::Out(key.0, key.1.clone()), n, d.t_us));
        walk.last_out = Some((key, d.t_us, d.xfer == XferType::Interrupt));
        counts.out += 1;
    }

    /// Keeps a GET_DESCRIPTOR reply that holds its whole descriptor: as long as the descriptor
    /// says it is, or shorter than asked (the device had no more).
    fn descriptor(&mut self, s: &Setup, d: &[u8]) {
        if s.request_type != 0x80 || s.request != 6 || d.len() < 2 {
            return;
        }
        let kind = (s.value >> 8) as u8;
        let declared = match kind {
            2 | 7 | 0x0f => d
                .get(2..4)
                .map(|w| u16::from_le_bytes([w[0], w[1]]) as usize),
            _ => d.first().map(|&b| b as usize),
        };
        if declared != Some(d.len()) && d.len() >= usize::from(s.length) {
            return;
        }
        let values = self
            .descriptors
            .entry((kind, s.value as u8, s.index))
            .or_default();
        if !values.iter().any(|v| v.as_slice() == d) {
            values.push(d.to_vec());
        }
    }

    /// Whether anything was learned.
    pub(crate) fn is_empty(&self) -> bool {
        self.control.is_empty() && self.out.is_empty() && self.events.is_empty()
    }

    /// The keys with their names, sorted; the events with their anchors named.
    #[allow(clippy::type_complexity)]
    pub(crate) fn finish(
        self,
    ) -> (
        Vec<Descriptor>,
        Vec<ControlKey>,
        Vec<OutKey>,
        Vec<ScriptedIn>,
        Vec<InEndpoint>,
    ) {
        let name_of = |k: &KeyRef| match k {
            KeyRef::Control(setup, data) => match Setup::from_bytes(setup) {
                Ok(s) => control_name(&s, data),
                Err(_) => String::new(),
            },
            KeyRef::Out(ep, data) => out_name(*ep, data),
        };
        let descriptors = self
            .descriptors
            .into_iter()
            .map(|((kind, index, language), values)| Descriptor {
                kind,
                index,
                language,
                values,
            })
            .collect();
        let control = self
            .control
            .into_iter()
            .filter_map(|((setup, data), acc)| {
                let setup = Setup::from_bytes(&setup).ok()?;
                Some(ControlKey {
                    name: control_name(&setup, &data),
                    steady: acc.steady(),
                    setup,
                    data,
                    latency_ns: acc.latency_ns,
                    outcomes: acc.outcomes,
                })
            })
            .collect();
        let out = self
            .out
            .into_iter()
            .map(|((endpoint, data), acc)| OutKey {
                name: out_name(endpoint, &data),
                steady: acc.steady(),
                endpoint,
                data,
                latency_ns: acc.latency_ns,
                outcomes: acc.outcomes,
            })
            .collect();
        let events = self
            .events
            .into_iter()
            .map(|(packet, after)| ScriptedIn {
                packet,
                after: after.map(|(k, n)| (name_of(&k), n)),
            })
            .collect();
        (
            descriptors,
            control,
            out,
            events,
            self.in_endpoints.into_iter().collect(),
        )
    }
}
