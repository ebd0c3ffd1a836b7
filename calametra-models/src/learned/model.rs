//! The replay model: a [`Device`] that answers from a learned spec's facts, one cursor a key.
//!
//! A key's cursor counts the answers it has given; it moves only inside a call the bus made
//! because the device really received the transfer, and only when the step's transition (a
//! fault site) is not refused, so injected faults compose: a request stalled on the bus, or
//! refused at its transition, is answered with the recorded answer when it is retried. Nothing
//! here reads the wall clock; delays and scripted events are on the virtual clock.

use super::facts::{Answers, Facts, Input, Key};
use crate::chapter9;
use calametra_capture::learn::format::Outcome;
use calametra_core::clock::Nanos;
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use calametra_core::Error;
use std::collections::{BTreeMap, VecDeque};
use std::fmt::Write;
use std::sync::Arc;

/// A device that replays what a learned spec (`calametra.spec.learned`, written by `calametra
/// learn`) recorded of a real one.
///
/// - A control request or OUT transfer is looked up by its key (setup packet and OUT data;
///   endpoint and data) and answered with the key's next recorded answer: data, an ACK or a
///   stall, after the key's latency (the capture's, less what the bus's default timing already
///   charges). Each answer is a transition `<key>.<n>-><n+1>` (a fault site; refused, the
///   request stalls and the cursor stays).
/// - When a key's answers run out, its last answer is given again only if all its answers were
///   the same (a descriptor read again); otherwise the next answer is unknown and the request
///   is a model gap.
/// - An OUT's recorded replies are queued on their IN endpoints after their recorded delays;
///   the scripted events (IN packets nobody asked for) are queued after the answer they
///   followed in the capture (a transition `in<ep>.<n>-><n+1>` each; refused, the packet is
///   lost). An IN poll takes the next queued packet, or NAKs on an endpoint the capture read.
/// - What the capture never showed is a model gap naming the request and the nearest known key,
///   answered with a stall; never a guess. The bus's own business is answered without a key:
///   SET_ADDRESS; SET_CONFIGURATION of a configuration the captured descriptors show (or 0);
///   GET_DESCRIPTOR of a descriptor that never changed in the captures (any wLength), and of
///   the types USB 2.0 §9.4.3 returns only inside a configuration (a stall).
/// - A USB reset or a disconnect drops queued and scheduled IN packets; the cursors stay (the
///   capture's story goes on).
pub struct Learned {
    facts: Arc<Facts>,
    answered: Vec<u32>,
    queues: BTreeMap<u8, VecDeque<Outcome>>,
    /// Packets waiting for their timer: (endpoint, body, transition or not).
    scheduled: Vec<Option<(u8, Outcome, bool)>>,
    /// Scripted events queued, per endpoint (their transitions count them).
    events_done: BTreeMap<u8, u32>,
    generation: u32,
    started: bool,
    from: String,
    to: String,
}

impl Learned {
    /// Builds the model from a learned spec; errors name the spec file and the field. The
    /// spec's facts are parsed once per process and shared by every model made from the same
    /// bytes, so building one per run is cheap.
    pub fn try_from_spec(spec: &Spec) -> Result<Learned, Error> {
        Ok(Learned::new(super::facts::shared(spec)?))
    }

    /// Builds the model from a learned spec.
    ///
    /// # Panics
    ///
    /// When the spec is malformed, with the message of [`Learned::try_from_spec`]'s error (the
    /// file and the field). Scenarios whose spec is embedded at compile time use this.
    pub fn from_spec(spec: &Spec) -> Learned {
        match Learned::try_from_spec(spec) {
            Ok(l) => l,
            Err(e) => panic!("calametra: invalid learned spec: {e}"),
        }
    }

    /// A model over already indexed facts, every cursor at the start.
    pub fn new(facts: Arc<Facts>) -> Learned {
        Learned {
            answered: vec![0; facts.keys.len()],
            facts,
            queues: BTreeMap::new(),
            scheduled: Vec::new(),
            events_done: BTreeMap::new(),
            generation: 0,
            started: false,
            from: String::new(),
            to: String::new(),
        }
    }

    /// The vendor and product id the captured device descriptor carries, if one was captured.
    pub fn id(&self) -> Option<(u16, u16)> {
        self.facts.id
    }

    /// How many answers the key named `name` has given (`None`: no such key).
    pub fn answers_given(&self, name: &str) -> Option<u32> {
        let i = self.facts.keys.iter().position(|k| k.name == name)?;
        self.answered.get(i).copied()
    }

    /// The number of keys.
    pub fn keys(&self) -> usize {
        self.facts.keys.len()
    }

    /// The IN packets queued on `endpoint` now.
    pub fn queued(&self, endpoint: u8) -> usize {
        self.queues.get(&endpoint).map_or(0, VecDeque::len)
    }

    /// Schedules the scripted events that come before any answer, once.
    fn start(&mut self, cx: &mut DevCtx<'_>) {
        if self.started {
            return;
        }
        self.started = true;
        let first = self.facts.events_first.clone();
        for e in first {
            self.schedule_event(cx, e, 0);
        }
    }

    fn schedule_event(&mut self, cx: &mut DevCtx<'_>, event: usize, cost: Nanos) {
        let Some(p) = self.facts.events.get(event) else {
            return;
        };
        let (ep, body, delay) = (p.endpoint, p.body.clone(), p.after_ns.saturating_sub(cost));
        self.schedule(cx, ep, body, delay, true);
    }

    /// Queues a packet on `ep` after `delay`: a reply with no delay at once, anything else on a
    /// timer (an event's step is a transition of its own, never refused inside the request that
    /// anchors it, whose reply a refusal would stall).
    fn schedule(&mut self, cx: &mut DevCtx<'_>, ep: u8, body: Outcome, delay: Nanos, event: bool) {
        if delay == 0 && !event {
            self.arrive(cx, ep, body, event);
            return;
        }
        let token = (u64::from(self.generation) << 32) | self.scheduled.len() as u64;
        self.scheduled.push(Some((ep, body, event)));
        cx.wake_after(delay, token);
    }

    /// A packet is ready on `ep`; a scripted event is a step (a transition) first.
    fn arrive(&mut self, cx: &mut DevCtx<'_>, ep: u8, body: Outcome, event: bool) {
        if event {
            let n = self.events_done.get(&ep).copied().unwrap_or(0);
            let machine = format!("in{ep:02x}");
            self.set_numbers(n);
            if !cx.transition(&machine, &self.from, &self.to) {
                return;
            }
            self.events_done.insert(ep, n + 1);
        }
        self.queues.entry(ep).or_default().push_back(body);
    }

    fn set_numbers(&mut self, n: u32) {
        self.from.clear();
        self.to.clear();
        let _ = write!(self.from, "{n}");
        let _ = write!(self.to, "{}", n + 1);
    }

    /// Takes key `k`'s next answer as a step: `None` (after a model gap or a refused
    /// transition) when it gives none; otherwise its index among the key's answers.
    fn step(&mut self, cx: &mut DevCtx<'_>, k: usize) -> Option<usize> {
        let facts = self.facts.clone();
        let key = &facts.keys[k];
        let given = self.answered[k];
        let len = key.answers.len();
        let at = if (given as usize) < len {
            given as usize
        } else if key.repeat_last {
            len - 1
        } else {
            cx.model_gap(
                &describe_key(key),
                &format!(
                    "answer {} asked; the capture shows {len} answers to it and they differ, so \
                     the next is unknown",
                    given + 1
                ),
            );
            return None;
        };
        if let Answers::Control(v) = &key.answers {
            if let Some(Outcome::Partial { data, length }) = v.get(at) {
                cx.model_gap(
                    &describe_key(key),
                    &format!(
                        "answer {}: the capture kept only {} of the {length} bytes",
                        at + 1,
                        data.len()
                    ),
                );
                return None;
            }
        }
        self.set_numbers(given);
        if !cx.transition(&key.name, &self.from, &self.to) {
            return None;
        }
        self.answered[k] = given + 1;
        if let Some(events) = facts.events_after.get(&(k, given + 1)) {
            for &e in events {
                self.schedule_event(cx, e, key.cost_ns);
            }
        }
        if key.delay_ns > 0 {
            cx.delay_reply(key.delay_ns);
        }
        Some(at)
    }

    fn gap_unseen(&self, cx: &mut DevCtx<'_>, input: &Input, data: &[u8]) {
        let request = match input {
            Input::Control(s) => describe_control(s, data),
            Input::Out(ep) => describe_out(*ep, data),
        };
        let state = match self.facts.nearest(input, data) {
            Some((k, how)) => format!(
                "no such request in the capture; nearest known key: {} ({how})",
                k.name
            ),
            None => "no such request in the capture; it shows no request of this kind".into(),
        };
        cx.model_gap(&request, &state);
    }

    /// A control request no key matches: the bus's business, chapter 9, or a model gap.
    fn unkeyed(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            // SET_ADDRESS: the host and the bus choose the address.
            (0x00, 5) if setup.value <= 127 && setup.index == 0 && setup.length == 0 => {
                return Reply::Ack
            }
            // SET_CONFIGURATION of a configuration the captured descriptors show (USB 2.0
            // §9.4.7), or 0 (back to the address state).
            (0x00, 9)
                if setup.index == 0
                    && setup.length == 0
                    && self.facts.is_configuration(setup.value) =>
            {
                return Reply::Ack
            }
            (0x80, 6) => {
                let (ty, index) = ((setup.value >> 8) as u8, setup.value as u8);
                if let Some(d) = self.facts.descriptor(ty, index, setup.index) {
                    let n = d.len().min(setup.length as usize);
                    return Reply::Data(d[..n].to_vec());
                }
                // Types returned only inside a configuration (USB 2.0 and 3.2 §9.4.3), and an
                // OTG descriptor the captured configuration does not hold.
                let inside_only = matches!(ty, 4 | 5 | 0x0b | 0x10 | 0x30 | 0x31);
                if chapter9::absent_descriptor(ty).is_some()
                    && (inside_only || (ty == 9 && !self.facts.configuration_has(9)))
                {
                    return Reply::Stall;
                }
            }
            _ => {}
        }
        self.gap_unseen(cx, &Input::Control(*setup), data);
        Reply::Stall
    }
}

fn describe_control(s: &Setup, data: &[u8]) -> String {
    let mut t = format!(
        "control {:02x} {:02x} {:04x} {:04x} {:04x}",
        s.request_type, s.request, s.value, s.index, s.length
    );
    if !s.is_in() && !data.is_empty() {
        let _ = write!(t, " with {} bytes of OUT data", data.len());
    }
    t
}

fn describe_out(ep: u8, data: &[u8]) -> String {
    format!("OUT {ep:#04x} of {} bytes", data.len())
}

fn describe_key(k: &Key) -> String {
    match &k.input {
        Input::Control(_) => format!("control key {}", k.name),
        Input::Out(_) => format!("OUT key {}", k.name),
    }
}

impl Device for Learned {
    fn name(&self) -> &str {
        &self.facts.name
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        self.start(cx);
        let data = if setup.is_in() { &[][..] } else { data };
        let Some(k) = self.facts.find(&Input::Control(*setup), data) else {
            return self.unkeyed(cx, setup, data);
        };
        let Some(at) = self.step(cx, k) else {
            return Reply::Stall;
        };
        match &self.facts.keys[k].answers {
            Answers::Control(v) => match v.get(at) {
                Some(Outcome::Data(d)) => Reply::Data(d.clone()),
                Some(Outcome::Ack) => Reply::Ack,
                _ => Reply::Stall,
            },
            Answers::Out(_) => Reply::Stall,
        }
    }

    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        self.start(cx);
        let input = Input::Out(ep);
        let Some(k) = self.facts.find(&input, data) else {
            self.gap_unseen(cx, &input, data);
            return Reply::Stall;
        };
        let Some(at) = self.step(cx, k) else {
            return Reply::Stall;
        };
        let facts = self.facts.clone();
        let key = &facts.keys[k];
        let Answers::Out(v) = &key.answers else {
            return Reply::Stall;
        };
        let Some(o) = v.get(at) else {
            return Reply::Stall;
        };
        if o.stall {
            return Reply::Stall;
        }
        for r in &o.replies {
            let delay = r.after_ns.saturating_sub(key.cost_ns);
            self.schedule(cx, r.endpoint, r.body.clone(), delay, false);
        }
        Reply::Ack
    }

    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        self.start(cx);
        match self.queues.get_mut(&ep).and_then(VecDeque::pop_front) {
            Some(Outcome::Data(mut d)) => {
                d.truncate(max_len);
                Reply::Data(d)
            }
            Some(Outcome::Partial { data, length }) => {
                cx.model_gap(
                    &format!("IN {ep:#04x}"),
                    &format!(
                        "the capture kept only {} of the packet's {length} bytes",
                        data.len()
                    ),
                );
                Reply::Stall
            }
            Some(Outcome::Stall) => Reply::Stall,
            Some(Outcome::Ack) => Reply::Ack,
            None if self.facts.in_endpoints.contains(&ep) => Reply::Nak,
            None => {
                cx.model_gap(
                    &format!("IN {ep:#04x} of up to {max_len} bytes"),
                    "the capture shows no IN transfer on this endpoint",
                );
                Reply::Stall
            }
        }
    }

    fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
        if (token >> 32) as u32 != self.generation {
            return;
        }
        let slot = self.scheduled.get_mut((token & 0xffff_ffff) as usize);
        if let Some((ep, body, event)) = slot.and_then(Option::take) {
            self.arrive(cx, ep, body, event);
        }
    }

    fn on_reset(&mut self, _cx: &mut DevCtx<'_>) {
        self.drop_packets();
    }

    fn on_disconnect(&mut self, _cx: &mut DevCtx<'_>) {
        self.drop_packets();
    }

    fn describe(&self) -> Vec<(String, String)> {
        let touched = self.answered.iter().filter(|&&n| n > 0).count();
        let mut v = vec![
            ("spec".into(), self.facts.name.clone()),
            (
                "keys answered".into(),
                format!("{touched} of {}", self.facts.keys.len()),
            ),
        ];
        for (k, n) in self.facts.keys.iter().zip(&self.answered) {
            if *n > 0 {
                v.push((
                    k.name.clone(),
                    format!("{n} of {} answers", k.answers.len()),
                ));
            }
        }
        for (ep, q) in &self.queues {
            v.push((format!("queued IN {ep:#04x}"), q.len().to_string()));
        }
        v
    }
}

impl Learned {
    fn drop_packets(&mut self) {
        self.generation = self.generation.wrapping_add(1);
        self.scheduled.clear();
        self.queues.clear();
    }
}
