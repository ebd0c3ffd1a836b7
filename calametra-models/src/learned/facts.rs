//! What a learned spec says, indexed for replay: the keys (control requests by setup and data,
//! OUT transfers by endpoint and data) with their answers, the scripted events by the answer
//! they follow, the descriptors that never changed, and the nearest key to an unseen input.
//!
//! Facts are immutable and shared by every model made from the same spec bytes ([`shared`]
//! parses a spec once per process); a model holds only its cursors. Nothing here reads the
//! clock or keeps per-run state.

use calametra_capture::learn::format::{LearnedSpec, OutOutcome, Outcome, Packet, Payload};
use calametra_core::clock::Nanos;
use calametra_core::spec::Spec;
use calametra_core::usb::Setup;
use calametra_core::world::Timing;
use calametra_core::Error;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Mutex};

/// What a key matches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Input {
    /// A control request.
    Control(Setup),
    /// A bulk or interrupt OUT on this endpoint.
    Out(u8),
}

/// One key's answers.
#[derive(Clone, Debug)]
pub(crate) enum Answers {
    /// A control request's.
    Control(Vec<Outcome>),
    /// An OUT transfer's.
    Out(Vec<OutOutcome>),
}

impl Answers {
    pub(crate) fn len(&self) -> usize {
        match self {
            Answers::Control(v) => v.len(),
            Answers::Out(v) => v.len(),
        }
    }

    /// Whether every answer is the same (then the last may be given again).
    fn all_same(&self) -> bool {
        match self {
            Answers::Control(v) => v.windows(2).all(|w| w[0] == w[1]),
            Answers::Out(v) => v.windows(2).all(|w| w[0] == w[1]),
        }
    }
}

/// A key: what it matches, its answers, and how long the device took.
#[derive(Clone, Debug)]
pub(crate) struct Key {
    /// Its name: the machine of its transition sites.
    pub(crate) name: String,
    pub(crate) input: Input,
    pub(crate) data: Payload,
    pub(crate) answers: Answers,
    /// Whether the last answer may be repeated once the answers run out: they are all equal, or
    /// the key is steady (its last two answers equal and one right after the other).
    pub(crate) repeat_last: bool,
    /// The reply's delay: the capture's latency less what the bus's default timing charges.
    pub(crate) delay_ns: Nanos,
    /// What the bus's default timing charges for this transfer before the device sees it.
    pub(crate) cost_ns: Nanos,
}

/// A learned spec, indexed.
#[derive(Debug)]
pub struct Facts {
    pub(crate) name: String,
    pub(crate) keys: Vec<Key>,
    control: BTreeMap<[u8; 8], Vec<usize>>,
    out: BTreeMap<(u8, u64), Vec<usize>>,
    /// Descriptors with one value over the whole capture, by (type, index, language).
    descriptors: BTreeMap<(u8, u8, u16), Vec<u8>>,
    /// Scripted events by the (key, answer) they follow; those before any key.
    pub(crate) events_after: BTreeMap<(usize, u32), Vec<usize>>,
    pub(crate) events_first: Vec<usize>,
    pub(crate) events: Vec<Packet>,
    pub(crate) in_endpoints: BTreeSet<u8>,
    /// bConfigurationValue of every configuration descriptor captured.
    configurations: BTreeSet<u8>,
    /// The descriptor types found inside the configuration descriptors captured.
    in_configuration: BTreeSet<u8>,
    pub(crate) id: Option<(u16, u16)>,
}

/// What the bus's default timing charges before a transfer of `bytes` reaches the device.
pub(crate) fn bus_cost(control: bool, bytes: usize) -> Nanos {
    let t = Timing::default();
    (if control { t.control_ns } else { t.transfer_ns })
        .saturating_add(t.per_byte_ns.saturating_mul(bytes as u64))
}

/// Adds `key` to `keys` and its index to its look-up `slot` (the keys sharing its setup, or its
/// endpoint and length) and to `by_name`; `None`, adding nothing, when a key of the slot has
/// the same data (keys are unique).
fn add_key(
    keys: &mut Vec<Key>,
    slot: &mut Vec<usize>,
    by_name: &mut BTreeMap<String, usize>,
    key: Key,
) -> Option<()> {
    if slot.iter().any(|&j| keys[j].data == key.data) {
        return None;
    }
    let id = keys.len();
    slot.push(id);
    by_name.insert(key.name.clone(), id);
    keys.push(key);
    Some(())
}

impl Facts {
    /// Indexes a learned spec; errors name the spec file and the field.
    pub fn build(spec: &Spec) -> Result<Facts, Error> {
        let l = LearnedSpec::from_spec(spec)?;
        let mut f = Facts {
            name: l.name.clone(),
            keys: Vec::new(),
            control: BTreeMap::new(),
            out: BTreeMap::new(),
            descriptors: BTreeMap::new(),
            events_after: BTreeMap::new(),
            events_first: Vec::new(),
            events: Vec::new(),
            in_endpoints: l.in_endpoints.iter().map(|e| e.endpoint).collect(),
            configurations: BTreeSet::new(),
            in_configuration: BTreeSet::new(),
            id: l.id,
        };
        let mut by_name = BTreeMap::new();
        for (i, k) in l.control.iter().enumerate() {
            let bytes = if k.setup.is_in() {
                0
            } else {
                k.data.len() as usize
            };
            let cost = bus_cost(true, bytes);
            let answers = Answers::Control(k.outcomes.clone());
            let key = Key {
                name: k.name.clone(),
                input: Input::Control(k.setup),
                data: k.data.clone(),
                repeat_last: k.steady || answers.all_same(),
                answers,
                delay_ns: k.latency_ns.saturating_sub(cost),
                cost_ns: cost,
            };
            let slot = f.control.entry(k.setup.to_bytes()).or_default();
            add_key(&mut f.keys, slot, &mut by_name, key).ok_or_else(|| {
                spec.error(
                    &format!("control.{i}"),
                    "the same setup and data as an earlier key; keys are unique",
                )
            })?;
        }
        for (i, k) in l.out.iter().enumerate() {
            let cost = bus_cost(false, k.data.len() as usize);
            let answers = Answers::Out(k.outcomes.clone());
            let key = Key {
                name: k.name.clone(),
                input: Input::Out(k.endpoint),
                data: k.data.clone(),
                repeat_last: k.steady || answers.all_same(),
                answers,
                delay_ns: k.latency_ns.saturating_sub(cost),
                cost_ns: cost,
            };
            let slot = f.out.entry((k.endpoint, k.data.len())).or_default();
            add_key(&mut f.keys, slot, &mut by_name, key).ok_or_else(|| {
                spec.error(
                    &format!("out.{i}"),
                    "the same endpoint and data as an earlier key; keys are unique",
                )
            })?;
        }
        for (i, e) in l.events.iter().enumerate() {
            match &e.after {
                None => f.events_first.push(i),
                Some((name, n)) => {
                    let Some(&k) = by_name.get(name) else {
                        return Err(spec.error(
                            &format!("events.{i}.after"),
                            format!("`{name}` names no key"),
                        ));
                    };
                    if *n as usize > f.keys[k].answers.len() {
                        return Err(spec.error(
                            &format!("events.{i}.after_answer"),
                            format!(
                                "{n}, but key `{name}` has {} answers",
                                f.keys[k].answers.len()
                            ),
                        ));
                    }
                    f.events_after.entry((k, *n)).or_default().push(i);
                }
            }
            f.events.push(e.packet.clone());
        }
        for d in &l.descriptors {
            if d.kind == 2 {
                for v in &d.values {
                    if let Some(&c) = v.get(5) {
                        f.configurations.insert(c);
                    }
                    let mut at = 0usize;
                    while let (Some(&len), Some(&ty)) = (v.get(at), v.get(at + 1)) {
                        f.in_configuration.insert(ty);
                        if len < 2 {
                            break;
                        }
                        at += len as usize;
                    }
                }
            }
            if let [one] = d.values.as_slice() {
                f.descriptors
                    .insert((d.kind, d.index, d.language), one.clone());
            }
        }
        Ok(f)
    }

    /// The key `input` with `data` matches.
    pub(crate) fn find(&self, input: &Input, data: &[u8]) -> Option<usize> {
        let ids = match input {
            Input::Control(s) => self.control.get(&s.to_bytes())?,
            Input::Out(ep) => self.out.get(&(*ep, data.len() as u64))?,
        };
        // A frame-sized key is matched by its SHA-256: hash the data once, not once a key.
        let mut digest: Option<[u8; 32]> = None;
        ids.iter().copied().find(|&i| match &self.keys[i].data {
            Payload::Bytes(b) => b.as_slice() == data,
            Payload::Digest { length, sha256, .. } => {
                *length == data.len() as u64
                    && *digest.get_or_insert_with(|| Sha256::digest(data).into()) == *sha256
            }
        })
    }

    /// A descriptor that never changed in the captures, whole.
    pub(crate) fn descriptor(&self, kind: u8, index: u8, language: u16) -> Option<&[u8]> {
        self.descriptors
            .get(&(kind, index, language))
            .map(Vec::as_slice)
    }

    /// Whether `value` selects a configuration the captured descriptors show (or none).
    pub(crate) fn is_configuration(&self, value: u16) -> bool {
        value == 0 || u8::try_from(value).is_ok_and(|v| self.configurations.contains(&v))
    }

    /// Whether the configuration descriptors captured hold a descriptor of type `ty`.
    pub(crate) fn configuration_has(&self, ty: u8) -> bool {
        self.in_configuration.contains(&ty)
    }

    /// The known key nearest to an unseen input, and how it differs: same kind first, then the
    /// fewest setup fields differing (request type and request weigh most), then the data.
    pub(crate) fn nearest(&self, input: &Input, data: &[u8]) -> Option<(&Key, String)> {
        let mut best: Option<((u32, u32, u64), usize)> = None;
        for (i, k) in self.keys.iter().enumerate() {
            let score = match (input, &k.input) {
                (Input::Control(a), Input::Control(b)) => {
                    let req = u32::from(a.request_type != b.request_type)
                        + u32::from(a.request != b.request);
                    let rest = u32::from(a.value != b.value)
                        + u32::from(a.index != b.index)
                        + u32::from(a.length != b.length);
                    (req * 4 + rest, 0, data_distance(&k.data, data))
                }
                (Input::Out(a), Input::Out(b)) => {
                    (u32::from(a != b) * 8, 0, data_distance(&k.data, data))
                }
                _ => (16, 1, data_distance(&k.data, data)),
            };
            if best.is_none_or(|(s, _)| score < s) {
                best = Some((score, i));
            }
        }
        let (_, i) = best?;
        let k = &self.keys[i];
        Some((k, differences(input, data, k)))
    }
}

/// How far a key's data is from `data`: 0 when it matches, else the bytes past their common
/// prefix (and the length difference).
fn data_distance(key: &Payload, data: &[u8]) -> u64 {
    if key.matches(data) {
        return 0;
    }
    let same = common_prefix(key.head(), data) as u64;
    1 + key.len().max(data.len() as u64) - same.min(key.len())
}

fn common_prefix(a: &[u8], b: &[u8]) -> usize {
    a.iter().zip(b).take_while(|(x, y)| x == y).count()
}

/// What differs between an input and a key, in words.
fn differences(input: &Input, data: &[u8], k: &Key) -> String {
    let mut d = Vec::new();
    match (input, &k.input) {
        (Input::Control(a), Input::Control(b)) => {
            if a.request_type != b.request_type {
                d.push(format!(
                    "bmRequestType {:#04x} vs {:#04x}",
                    a.request_type, b.request_type
                ));
            }
            if a.request != b.request {
                d.push(format!("bRequest {:#04x} vs {:#04x}", a.request, b.request));
            }
            if a.value != b.value {
                d.push(format!("wValue {:#06x} vs {:#06x}", a.value, b.value));
            }
            if a.index != b.index {
                d.push(format!("wIndex {:#06x} vs {:#06x}", a.index, b.index));
            }
            if a.length != b.length {
                d.push(format!("wLength {} vs {}", a.length, b.length));
            }
        }
        (Input::Out(a), Input::Out(b)) if a != b => {
            d.push(format!("endpoint {a:#04x} vs {b:#04x}"));
        }
        (Input::Out(_), Input::Out(_)) => {}
        _ => d.push("another kind of transfer".into()),
    }
    if !k.data.matches(data) {
        if k.data.len() != data.len() as u64 {
            d.push(format!("{} data bytes vs {}", data.len(), k.data.len()));
        } else {
            let at = common_prefix(k.data.head(), data);
            if at < k.data.head().len() {
                d.push(format!("data differs from byte {at}"));
            } else {
                d.push(format!("data differs after byte {at} (by SHA-256)"));
            }
        }
    }
    if d.is_empty() {
        "the same request".into()
    } else {
        d.join(", ")
    }
}

/// The facts of `spec`, parsed once per process for each spec's bytes (by SHA-256): a model
/// made per run shares them. The few most recent are kept.
pub fn shared(spec: &Spec) -> Result<Arc<Facts>, Error> {
    static CACHE: Mutex<Vec<(String, Arc<Facts>)>> = Mutex::new(Vec::new());
    const KEEP: usize = 8;
    if let Ok(cache) = CACHE.lock() {
        if let Some((_, f)) = cache.iter().find(|(h, _)| h == spec.sha256()) {
            return Ok(f.clone());
        }
    }
    let facts = Arc::new(Facts::build(spec)?);
    if let Ok(mut cache) = CACHE.lock() {
        if cache.len() >= KEEP {
            cache.remove(0);
        }
        cache.push((spec.sha256().to_string(), facts.clone()));
    }
    Ok(facts)
}
