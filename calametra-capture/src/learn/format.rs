//! The learned spec format (`calametra.spec.learned`, version 1): its types, the one writer
//! ([`LearnedSpec::to_json`]) and the one reader ([`LearnedSpec::from_spec`]). `calametra
//! learn` writes it; the replay model of `calametra-models` (`learned`) reads it.
//!
//! Bytes are lowercase hex strings; every list is sorted by its key (or, for scripted events,
//! kept in capture order), so a spec is a function of its captures alone: no time of the
//! learning, no path but the captures' file names. Every field a reader rejects is named in
//! the error (`control.3.outcomes.2.data`), with what was expected. Nothing here panics on
//! input and nothing reads the clock.

use calametra_core::error::Error;
use calametra_core::hex;
use calametra_core::spec::Spec;
use calametra_core::usb::Setup;
use serde::Serialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// The spec's `format`.
pub const FORMAT: &str = "calametra.spec.learned";

/// The spec's `version`.
pub const VERSION: u64 = 1;

/// OUT data up to this many bytes is kept whole in a key; longer data (a frame) is kept as its
/// length, SHA-256 and first [`HEAD`] bytes.
pub const INLINE_MAX: usize = 4096;

/// How many leading bytes a digest key keeps, for people and for naming the nearest key.
pub const HEAD: usize = 32;

/// A learned spec: what one device did in one or more captures.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LearnedSpec {
    /// The device's name in traces (`learned-0711-5601`).
    pub name: String,
    /// Where the facts come from: each capture's file name, SHA-256 and the device's place.
    pub captures: Vec<CaptureSource>,
    /// Vendor and product id, when the capture shows a device descriptor.
    pub id: Option<(u16, u16)>,
    /// Complete descriptors read with GET_DESCRIPTOR, by (type, index, language).
    pub descriptors: Vec<Descriptor>,
    /// Control transfers, by setup packet and OUT data.
    pub control: Vec<ControlKey>,
    /// Bulk and interrupt OUT transfers, by endpoint and data.
    pub out: Vec<OutKey>,
    /// IN packets nobody asked for with an OUT (a notification), in capture order.
    pub events: Vec<ScriptedIn>,
    /// IN endpoints the host read in the capture, with their transfer type.
    pub in_endpoints: Vec<InEndpoint>,
}

/// One capture a spec was learned from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureSource {
    /// The file's name (no directory).
    pub file: String,
    /// SHA-256 of the file's bytes, as read (compressed, if it was).
    pub sha256: String,
    /// The device's bus in that capture.
    pub bus: u16,
    /// The device's address in that capture.
    pub address: u8,
}

/// A descriptor as GET_DESCRIPTOR returned it whole; `values` has more than one entry when it
/// changed during the captures (a DFU device's run-time and DFU-mode descriptors).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Descriptor {
    /// Descriptor type (`wValue` high byte).
    pub kind: u8,
    /// Descriptor index (`wValue` low byte).
    pub index: u8,
    /// Language id (`wIndex`; 0 except for strings).
    pub language: u16,
    /// The distinct complete values, in the order they were first seen.
    pub values: Vec<Vec<u8>>,
}

/// Data a key matches: the bytes, or (past [`INLINE_MAX`]) their length and SHA-256.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Payload {
    /// The bytes themselves.
    Bytes(Vec<u8>),
    /// Length and SHA-256 of the bytes, and their first [`HEAD`] bytes.
    Digest {
        /// Length in bytes.
        length: u64,
        /// SHA-256 of the bytes.
        sha256: [u8; 32],
        /// The first bytes.
        head: Vec<u8>,
    },
}

impl Payload {
    /// The key form of `data`: whole up to [`INLINE_MAX`], else a digest.
    pub fn of(data: &[u8]) -> Payload {
        if data.len() <= INLINE_MAX {
            return Payload::Bytes(data.to_vec());
        }
        Payload::Digest {
            length: data.len() as u64,
            sha256: Sha256::digest(data).into(),
            head: data.get(..HEAD).unwrap_or(data).to_vec(),
        }
    }

    /// Whether `data` is what this payload names.
    pub fn matches(&self, data: &[u8]) -> bool {
        match self {
            Payload::Bytes(b) => b.as_slice() == data,
            Payload::Digest { length, sha256, .. } => {
                data.len() as u64 == *length && <[u8; 32]>::from(Sha256::digest(data)) == *sha256
            }
        }
    }

    /// The length of the data.
    pub fn len(&self) -> u64 {
        match self {
            Payload::Bytes(b) => b.len() as u64,
            Payload::Digest { length, .. } => *length,
        }
    }

    /// Whether the data is empty.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The leading bytes known (all of them for [`Payload::Bytes`]).
    pub fn head(&self) -> &[u8] {
        match self {
            Payload::Bytes(b) => b,
            Payload::Digest { head, .. } => head,
        }
    }

    /// 8 bytes of the data's SHA-256, hex: what a key's name carries to tell data apart.
    pub fn tag(&self) -> String {
        match self {
            Payload::Bytes(b) => hex::encode(&Sha256::digest(b)[..8]),
            Payload::Digest { sha256, .. } => hex::encode(&sha256[..8]),
        }
    }

    fn to_value(&self) -> Value {
        match self {
            Payload::Bytes(b) => Value::String(hex::encode(b)),
            Payload::Digest {
                length,
                sha256,
                head,
            } => serde_json::json!({
                "length": length,
                "sha256": hex::encode(sha256),
                "head": hex::encode(head),
            }),
        }
    }
}

/// What the device did with one control transfer of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// IN: these bytes.
    Data(Vec<u8>),
    /// IN: the capture kept only the first bytes of `length` (a usbmon text capture keeps 32).
    Partial {
        /// The bytes kept.
        data: Vec<u8>,
        /// The bytes the device sent.
        length: u32,
    },
    /// OUT: accepted.
    Ack,
    /// Stalled.
    Stall,
}

impl Outcome {
    fn to_value(&self) -> Value {
        match self {
            Outcome::Data(d) => serde_json::json!({ "data": hex::encode(d) }),
            Outcome::Partial { data, length } => {
                serde_json::json!({ "partial": hex::encode(data), "length": length })
            }
            Outcome::Ack => serde_json::json!({ "ack": true }),
            Outcome::Stall => serde_json::json!({ "stall": true }),
        }
    }
}

/// A control request the capture showed, with its answers in capture order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlKey {
    /// The key's name (`c089.0000.0200.0200`): the base of its transition sites.
    pub name: String,
    /// The setup packet.
    pub setup: Setup,
    /// The OUT data stage (empty for IN).
    pub data: Payload,
    /// The shortest time from submission to completion the capture shows, in nanoseconds.
    pub latency_ns: u64,
    /// The answers, in capture order.
    pub outcomes: Vec<Outcome>,
    /// Whether its last two answers were equal and came one right after the other (no other
    /// transfer the device answered between): asking it did not change its answer, so the
    /// replay gives the last answer again once the answers run out.
    pub steady: bool,
}

/// An IN packet: its endpoint, its body, and when it was ready.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Packet {
    /// The IN endpoint (`0x81`...).
    pub endpoint: u8,
    /// The bytes, or a stall.
    pub body: Outcome,
    /// Nanoseconds from the submission of the transfer it follows to its completion.
    pub after_ns: u64,
}

impl Packet {
    fn to_value(&self) -> Value {
        let mut v = self.body.to_value();
        if let Value::Object(m) = &mut v {
            m.insert("endpoint".into(), self.endpoint.into());
            m.insert("after_ns".into(), self.after_ns.into());
        }
        v
    }
}

/// What the device did with one OUT transfer of a key.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutOutcome {
    /// Whether it stalled (else it took every byte).
    pub stall: bool,
    /// The IN packets that answered it (a command/response protocol), in order.
    pub replies: Vec<Packet>,
}

/// A bulk or interrupt OUT transfer the capture showed, with its outcomes in capture order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct OutKey {
    /// The key's name (`out02.102400.1f0c...`).
    pub name: String,
    /// The OUT endpoint.
    pub endpoint: u8,
    /// The data.
    pub data: Payload,
    /// The shortest time from submission to completion, in nanoseconds.
    pub latency_ns: u64,
    /// The outcomes, in capture order.
    pub outcomes: Vec<OutOutcome>,
    /// As [`ControlKey::steady`].
    pub steady: bool,
}

/// An IN packet the device sent unasked (an interrupt notification): scripted after the
/// answer it followed in the capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ScriptedIn {
    /// The packet; `after_ns` counts from the submission of the transfer it followed.
    pub packet: Packet,
    /// The key (by name) and its answer (counted from 1) it followed; `None` when it came
    /// before any transfer the device answered.
    pub after: Option<(String, u32)>,
}

/// An IN endpoint the host read in the capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct InEndpoint {
    /// The endpoint address.
    pub endpoint: u8,
    /// Whether it is an interrupt endpoint (else bulk).
    pub interrupt: bool,
}

/// Whether `endpoint` is a bulk, interrupt or isochronous endpoint address: a number 1..15,
/// bit 7 the direction, no reserved bit.
pub fn is_data_endpoint(endpoint: u8) -> bool {
    endpoint & 0x70 == 0 && endpoint & 0x0f != 0
}

/// The name of a control key: `<bmRequestType><bRequest>.<wValue>.<wIndex>.<wLength>` in hex,
/// and `.<tag>` of the OUT data when there is some.
pub fn control_name(setup: &Setup, data: &Payload) -> String {
    let mut s = format!(
        "{:02x}{:02x}.{:04x}.{:04x}.{:04x}",
        setup.request_type, setup.request, setup.value, setup.index, setup.length
    );
    if !data.is_empty() {
        s.push('.');
        s.push_str(&data.tag());
    }
    s
}

/// The name of an OUT key: `out<endpoint>.<length>.<tag>`.
pub fn out_name(endpoint: u8, data: &Payload) -> String {
    format!("out{endpoint:02x}.{}.{}", data.len(), data.tag())
}

#[derive(Serialize)]
struct CaptureJson<'a> {
    file: &'a str,
    sha256: &'a str,
    bus: u16,
    address: u8,
}

#[derive(Serialize)]
struct DescriptorJson {
    #[serde(rename = "type")]
    kind: u8,
    index: u8,
    language: u16,
    values: Vec<String>,
}

#[derive(Serialize)]
struct KeyJson<'a> {
    name: &'a str,
    #[serde(skip_serializing_if = "Option::is_none")]
    setup: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    endpoint: Option<u8>,
    data: Value,
    latency_ns: u64,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    steady: bool,
    outcomes: Vec<Value>,
}

#[derive(Serialize)]
struct Doc<'a> {
    format: &'static str,
    version: u64,
    name: &'a str,
    source: Value,
    device: Value,
    descriptors: Vec<DescriptorJson>,
    control: Vec<KeyJson<'a>>,
    out: Vec<KeyJson<'a>>,
    events: Vec<Value>,
    in_endpoints: Vec<Value>,
}

impl LearnedSpec {
    /// The spec as JSON bytes (indented, a final newline): the same spec, the same bytes.
    pub fn to_json(&self) -> Vec<u8> {
        let captures: Vec<Value> = self
            .captures
            .iter()
            .map(|c| {
                serde_json::to_value(CaptureJson {
                    file: &c.file,
                    sha256: &c.sha256,
                    bus: c.bus,
                    address: c.address,
                })
                .unwrap_or_default()
            })
            .collect();
        let doc = Doc {
            format: FORMAT,
            version: VERSION,
            name: &self.name,
            source: serde_json::json!({
                "learned_by": "calametra learn",
                "captures": captures,
            }),
            device: match self.id {
                Some((v, p)) => serde_json::json!({
                    "vendor_id": format!("{v:#06x}"),
                    "product_id": format!("{p:#06x}"),
                }),
                None => Value::Null,
            },
            descriptors: self
                .descriptors
                .iter()
                .map(|d| DescriptorJson {
                    kind: d.kind,
                    index: d.index,
                    language: d.language,
                    values: d.values.iter().map(|v| hex::encode(v)).collect(),
                })
                .collect(),
            control: self
                .control
                .iter()
                .map(|k| KeyJson {
                    name: &k.name,
                    setup: Some(hex::encode(&k.setup.to_bytes())),
                    endpoint: None,
                    data: k.data.to_value(),
                    latency_ns: k.latency_ns,
                    steady: k.steady,
                    outcomes: k.outcomes.iter().map(Outcome::to_value).collect(),
                })
                .collect(),
            out: self
                .out
                .iter()
                .map(|k| KeyJson {
                    name: &k.name,
                    setup: None,
                    endpoint: Some(k.endpoint),
                    data: k.data.to_value(),
                    latency_ns: k.latency_ns,
                    steady: k.steady,
                    outcomes: k
                        .outcomes
                        .iter()
                        .map(|o| {
                            let mut v = if o.stall {
                                serde_json::json!({ "stall": true })
                            } else {
                                serde_json::json!({ "ack": true })
                            };
                            if !o.replies.is_empty() {
                                if let Value::Object(m) = &mut v {
                                    m.insert(
                                        "replies".into(),
                                        o.replies.iter().map(Packet::to_value).collect(),
                                    );
                                }
                            }
                            v
                        })
                        .collect(),
                })
                .collect(),
            events: self
                .events
                .iter()
                .map(|e| {
                    let mut v = e.packet.to_value();
                    if let (Value::Object(m), Some((key, n))) = (&mut v, &e.after) {
                        m.insert("after".into(), Value::String(key.clone()));
                        m.insert("after_answer".into(), (*n).into());
                    }
                    v
                })
                .collect(),
            in_endpoints: self
                .in_endpoints
                .iter()
                .map(|e| {
                    serde_json::json!({
                        "endpoint": e.endpoint,
                        "type": if e.interrupt { "interrupt" } else { "bulk" },
                    })
                })
                .collect(),
        };
        // Serializing plain values into memory cannot fail.
        let mut out = serde_json::to_vec_pretty(&doc).unwrap_or_default();
        out.push(b'\n');
        out
    }

    /// Reads a learned spec; every error names the spec file and the field.
    pub fn from_spec(spec: &Spec) -> Result<LearnedSpec, Error> {
        Reader { spec }.read()
    }
}

/// Reads a [`LearnedSpec`] out of a parsed [`Spec`], field by field.
struct Reader<'a> {
    spec: &'a Spec,
}

impl Reader<'_> {
    fn err(&self, field: &str, message: impl Into<String>) -> Error {
        self.spec.error(field, message)
    }

    fn read(&self) -> Result<LearnedSpec, Error> {
        let s = self.spec;
        let format = s.str("format")?;
        if format != FORMAT {
            return Err(self.err("format", format!("`{format}`; expected `{FORMAT}`")));
        }
        let version = s.u64("version")?;
        if version != VERSION {
            return Err(self.err(
                "version",
                format!("{version}; this build reads version {VERSION} of {FORMAT}"),
            ));
        }
        let name = s.str("name")?.to_string();
        if name.is_empty() || name.chars().any(|c| c.is_control()) {
            return Err(self.err(
                "name",
                "expected a non-empty name without control characters",
            ));
        }
        let mut out = LearnedSpec {
            name,
            ..LearnedSpec::default()
        };
        for (i, c) in self.list("source.captures")?.iter().enumerate() {
            let f = format!("source.captures.{i}");
            out.captures.push(CaptureSource {
                file: self.string(c, &f, "file")?,
                sha256: self.string(c, &f, "sha256")?,
                bus: self.int(c, &f, "bus", u16::MAX as u64)? as u16,
                address: self.int(c, &f, "address", 255)? as u8,
            });
        }
        match s.doc().get("device") {
            None | Some(Value::Null) => {}
            Some(_) => {
                let v = s.u64("device.vendor_id")?;
                let p = s.u64("device.product_id")?;
                if v > 0xffff || p > 0xffff {
                    return Err(self.err("device", "expected 16-bit vendor and product ids"));
                }
                out.id = Some((v as u16, p as u16));
            }
        }
        for (i, d) in self.list("descriptors")?.iter().enumerate() {
            let f = format!("descriptors.{i}");
            let mut values = Vec::new();
            for (j, v) in self.array(d, &f, "values")?.iter().enumerate() {
                values.push(self.hex_value(v, &format!("{f}.values.{j}"))?);
            }
            if values.is_empty() {
                return Err(self.err(&format!("{f}.values"), "expected at least one value"));
            }
            out.descriptors.push(Descriptor {
                kind: self.int(d, &f, "type", 255)? as u8,
                index: self.int(d, &f, "index", 255)? as u8,
                language: self.int(d, &f, "language", 0xffff)? as u16,
                values,
            });
        }
        let mut names = std::collections::BTreeSet::new();
        for (i, k) in self.list("control")?.iter().enumerate() {
            let f = format!("control.{i}");
            let setup_bytes = self.hex_value(self.field(k, &f, "setup")?, &format!("{f}.setup"))?;
            let setup = Setup::from_bytes(&setup_bytes).map_err(|e| self.err(&f, e))?;
            let data = self.payload(self.field(k, &f, "data")?, &format!("{f}.data"))?;
            if setup.is_in() && !data.is_empty() {
                return Err(self.err(&format!("{f}.data"), "an IN request has no OUT data"));
            }
            let mut outcomes = Vec::new();
            for (j, o) in self.array(k, &f, "outcomes")?.iter().enumerate() {
                let of = format!("{f}.outcomes.{j}");
                let o = self.outcome(o, &of)?;
                match (&o, setup.is_in()) {
                    (Outcome::Ack, true) | (Outcome::Data(_) | Outcome::Partial { .. }, false) => {
                        return Err(self.err(
                            &of,
                            if setup.is_in() {
                                "an IN request's outcome is `data`, `partial` or `stall`"
                            } else {
                                "an OUT request's outcome is `ack` or `stall`"
                            },
                        ))
                    }
                    _ => {}
                }
                outcomes.push(o);
            }
            if outcomes.is_empty() {
                return Err(self.err(&format!("{f}.outcomes"), "expected at least one outcome"));
            }
            let name = self.name(k, &f, &mut names)?;
            out.control.push(ControlKey {
                name,
                setup,
                data,
                latency_ns: self.int(k, &f, "latency_ns", u64::MAX)?,
                steady: self.flag(k, &f, "steady")?,
                outcomes,
            });
        }
        for (i, k) in self.list("out")?.iter().enumerate() {
            let f = format!("out.{i}");
            let endpoint = self.int(k, &f, "endpoint", 255)? as u8;
            if !is_data_endpoint(endpoint) || endpoint & 0x80 != 0 {
                return Err(self.err(
                    &format!("{f}.endpoint"),
                    format!("{endpoint:#04x}; expected an OUT endpoint 0x01..0x0f"),
                ));
            }
            let data = self.payload(self.field(k, &f, "data")?, &format!("{f}.data"))?;
            let mut outcomes = Vec::new();
            for (j, o) in self.array(k, &f, "outcomes")?.iter().enumerate() {
                let of = format!("{f}.outcomes.{j}");
                let stall = match self.outcome(o, &of)? {
                    Outcome::Ack => false,
                    Outcome::Stall => true,
                    _ => return Err(self.err(&of, "an OUT transfer's outcome is `ack` or `stall`")),
                };
                let mut replies = Vec::new();
                if let Some(r) = o.get("replies") {
                    let rf = format!("{of}.replies");
                    let r = r
                        .as_array()
                        .ok_or_else(|| self.err(&rf, "expected an array"))?;
                    for (n, p) in r.iter().enumerate() {
                        replies.push(self.packet(p, &format!("{rf}.{n}"))?);
                    }
                }
                outcomes.push(OutOutcome { stall, replies });
            }
            if outcomes.is_empty() {
                return Err(self.err(&format!("{f}.outcomes"), "expected at least one outcome"));
            }
            let name = self.name(k, &f, &mut names)?;
            out.out.push(OutKey {
                name,
                endpoint,
                data,
                latency_ns: self.int(k, &f, "latency_ns", u64::MAX)?,
                steady: self.flag(k, &f, "steady")?,
                outcomes,
            });
        }
        for (i, e) in self.list("events")?.iter().enumerate() {
            let f = format!("events.{i}");
            let packet = self.packet(e, &f)?;
            let after = match e.get("after") {
                None | Some(Value::Null) => None,
                Some(Value::String(key)) => {
                    if !names.contains(key.as_str()) {
                        return Err(self.err(
                            &format!("{f}.after"),
                            format!("`{key}` names no key of `control` or `out`"),
                        ));
                    }
                    let n = self.int(e, &f, "after_answer", u32::MAX as u64)? as u32;
                    if n == 0 {
                        return Err(
                            self.err(&format!("{f}.after_answer"), "answers are counted from 1")
                        );
                    }
                    Some((key.clone(), n))
                }
                Some(_) => {
                    return Err(self.err(&format!("{f}.after"), "expected a key's name or null"))
                }
            };
            out.events.push(ScriptedIn { packet, after });
        }
        for (i, e) in self.list("in_endpoints")?.iter().enumerate() {
            let f = format!("in_endpoints.{i}");
            let endpoint = self.int(e, &f, "endpoint", 255)? as u8;
            if !is_data_endpoint(endpoint) || endpoint & 0x80 == 0 {
                return Err(self.err(
                    &format!("{f}.endpoint"),
                    format!("{endpoint:#04x}; expected an IN endpoint 0x81..0x8f"),
                ));
            }
            let interrupt = match self.string(e, &f, "type")?.as_str() {
                "interrupt" => true,
                "bulk" => false,
                other => {
                    return Err(self.err(
                        &format!("{f}.type"),
                        format!("`{other}`; expected `bulk` or `interrupt`"),
                    ))
                }
            };
            out.in_endpoints.push(InEndpoint {
                endpoint,
                interrupt,
            });
        }
        Ok(out)
    }

    /// An array at a top-level path; absent is empty.
    fn list(&self, path: &str) -> Result<Vec<Value>, Error> {
        match self.spec.at(path) {
            Err(_) => Ok(Vec::new()),
            Ok(Value::Array(a)) => Ok(a.clone()),
            Ok(_) => Err(self.err(path, "expected an array")),
        }
    }

    fn field<'v>(&self, v: &'v Value, f: &str, k: &str) -> Result<&'v Value, Error> {
        v.get(k)
            .ok_or_else(|| self.err(&format!("{f}.{k}"), "missing"))
    }

    fn array<'v>(&self, v: &'v Value, f: &str, k: &str) -> Result<&'v Vec<Value>, Error> {
        self.field(v, f, k)?
            .as_array()
            .ok_or_else(|| self.err(&format!("{f}.{k}"), "expected an array"))
    }

    /// An optional boolean (absent is false).
    fn flag(&self, v: &Value, f: &str, k: &str) -> Result<bool, Error> {
        match v.get(k) {
            None => Ok(false),
            Some(Value::Bool(b)) => Ok(*b),
            Some(_) => Err(self.err(&format!("{f}.{k}"), "expected true or false")),
        }
    }

    fn string(&self, v: &Value, f: &str, k: &str) -> Result<String, Error> {
        self.field(v, f, k)?
            .as_str()
            .map(str::to_string)
            .ok_or_else(|| self.err(&format!("{f}.{k}"), "expected a string"))
    }

    fn int(&self, v: &Value, f: &str, k: &str, max: u64) -> Result<u64, Error> {
        let n = self
            .field(v, f, k)?
            .as_u64()
            .ok_or_else(|| self.err(&format!("{f}.{k}"), "expected an unsigned integer"))?;
        if n > max {
            return Err(self.err(&format!("{f}.{k}"), format!("{n}; expected at most {max}")));
        }
        Ok(n)
    }

    fn hex_value(&self, v: &Value, f: &str) -> Result<Vec<u8>, Error> {
        let s = v
            .as_str()
            .ok_or_else(|| self.err(f, "expected a hex string"))?;
        hex::decode(s).map_err(|e| self.err(f, format!("bad hex: {e}")))
    }

    fn name(
        &self,
        k: &Value,
        f: &str,
        names: &mut std::collections::BTreeSet<String>,
    ) -> Result<String, Error> {
        let name = self.string(k, f, "name")?;
        let ok = !name.is_empty()
            && name.len() <= 96
            && !name.contains("::")
            && name
                .bytes()
                .all(|b| b.is_ascii_graphic() && b != b'#' && b != b'"' && b != b'\\');
        if !ok {
            return Err(self.err(
                &format!("{f}.name"),
                "expected 1 to 96 printable ASCII characters without `#`, `::`, quotes or \
                 backslashes (it names fault sites)",
            ));
        }
        if !names.insert(name.clone()) {
            return Err(self.err(
                &format!("{f}.name"),
                format!("`{name}` names another key too; names are unique"),
            ));
        }
        Ok(name)
    }

    fn payload(&self, v: &Value, f: &str) -> Result<Payload, Error> {
        match v {
            Value::String(_) => Ok(Payload::Bytes(self.hex_value(v, f)?)),
            Value::Object(_) => {
                let length = self.int(v, f, "length", u64::MAX)?;
                let sha = self.hex_value(self.field(v, f, "sha256")?, &format!("{f}.sha256"))?;
                let sha256: [u8; 32] = sha
                    .as_slice()
                    .try_into()
                    .map_err(|_| self.err(&format!("{f}.sha256"), "expected 32 bytes"))?;
                let head = self.hex_value(self.field(v, f, "head")?, &format!("{f}.head"))?;
                if head.len() as u64 > length {
                    return Err(self.err(&format!("{f}.head"), "longer than `length`"));
                }
                Ok(Payload::Digest {
                    length,
                    sha256,
                    head,
                })
            }
            _ => Err(self.err(
                f,
                "expected hex bytes or {\"length\", \"sha256\", \"head\"}",
            )),
        }
    }

    fn outcome(&self, v: &Value, f: &str) -> Result<Outcome, Error> {
        if !v.is_object() {
            return Err(self.err(f, "expected an object"));
        }
        let flag = |k: &str| v.get(k).and_then(Value::as_bool) == Some(true);
        if flag("stall") {
            return Ok(Outcome::Stall);
        }
        if flag("ack") {
            return Ok(Outcome::Ack);
        }
        if let Some(d) = v.get("data") {
            return Ok(Outcome::Data(self.hex_value(d, &format!("{f}.data"))?));
        }
        if let Some(d) = v.get("partial") {
            let data = self.hex_value(d, &format!("{f}.partial"))?;
            let length = self.int(v, f, "length", u32::MAX as u64)? as u32;
            if (data.len() as u64) >= u64::from(length) {
                return Err(self.err(
                    &format!("{f}.length"),
                    "a partial outcome keeps fewer bytes than its length",
                ));
            }
            return Ok(Outcome::Partial { data, length });
        }
        Err(self.err(
            f,
            "expected one of {\"data\"}, {\"partial\", \"length\"}, {\"ack\": true}, {\"stall\": true}",
        ))
    }

    fn packet(&self, v: &Value, f: &str) -> Result<Packet, Error> {
        let endpoint = self.int(v, f, "endpoint", 255)? as u8;
        if !is_data_endpoint(endpoint) || endpoint & 0x80 == 0 {
            return Err(self.err(
                &format!("{f}.endpoint"),
                format!("{endpoint:#04x}; expected an IN endpoint 0x81..0x8f"),
            ));
        }
        let body = self.outcome(v, f)?;
        if body == Outcome::Ack {
            return Err(self.err(f, "an IN packet is `data`, `partial` or `stall`"));
        }
        Ok(Packet {
            endpoint,
            body,
            after_ns: self.int(v, f, "after_ns", u64::MAX)?,
        })
    }
}
