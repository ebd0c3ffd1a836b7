//! Fault primitives, fault sites, and fault schedules (`specs/faults/*.json`).
//!
//! A fault site is a named point of a run: a transfer crossing the bus (`ctrl.get_edid#2`,
//! `bulk.out#5`, `intr.in#1`) or a model transition (`flip.pending->shown#1`). `#n` counts the
//! site's occurrences in the run, from 1.
//!
//! The primitives are the table below, one entry each, and nowhere else: its name, its
//! trial-name and schedule-file forms, how it parses and shows, whether `faults = all` takes it,
//! what it does on arrival, to the latency and to the bytes, whether and what it does at a
//! transition, what exploration injects and what a guided sweep's mutation adds. `table.rs`
//! turns the table into [`Fault`], [`FaultKind`] and their methods ([`Fault::on_arrival`],
//! [`Fault::latency`], [`Fault::bend`], [`Fault::at_transition`], ...), and into the macro by
//! which `#[calametra::scenario(faults = [..])]` names a primitive, so the compiler checks
//! the name. DESIGN.md, "Adding a fault primitive", is the checklist. The world applies a
//! transfer's fault where the transfer crosses the bus, for in-process runs and for
//! `DeviceHost` (which the usb-redir and lockstep bridges drive) alike; a transition fault is
//! answered by the model through `DevCtx::transition`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

mod table;

/// Only the test build's table ends with [`Fault::Zero`], the primitive the added-primitive
/// test adds (see DESIGN.md, "Adding a fault primitive").
macro_rules! table {
    ($d:tt $($added:tt)*) => {
        table::primitives! { ($d)
            /// The endpoint answers with a STALL handshake; the request never reaches the
            /// device. At a transition site: the transition is refused and the request in
            /// progress stalls.
            Stall => {
                name: stall,
                form: "stall",
                json: "\"stall\"",
                in_all: true,
                payload: any,
                parse(a): a.none(Fault::Stall),
                show(f): f.write_str("stall"),
                arrival: Arrival::Stall,
                latency: 0,
                bends: false,
                bend(data): (),
                at_transition: true => AtTransition { refused: true, ..AtTransition::default() },
                explore(len): Some(Fault::Stall),
                mutant: Fault::Stall,
            }
            /// The request is swallowed: it never completes, until the host's own timeout
            /// gives up.
            Timeout => {
                name: timeout,
                form: "timeout",
                json: "\"timeout\"",
                in_all: true,
                payload: any,
                parse(a): a.none(Fault::Timeout),
                show(f): f.write_str("timeout"),
                arrival: Arrival::Swallow,
                latency: 0,
                bends: false,
                bend(data): (),
                at_transition: false => AtTransition::default(),
                explore(len): Some(Fault::Timeout),
                mutant: Fault::Timeout,
            }
            /// Only `n` bytes cross (an IN reply is cut, an OUT payload is cut before the
            /// device sees it). At an IN transfer any `n` below the reply's length (a device
            /// may send a short packet). At an OUT transfer only a packet boundary: a packet
            /// crosses whole or not at all (its CRC), so an OUT payload can end early only
            /// after a whole number of max-size packets, and exploration and seeded draws cut
            /// it at a multiple of `packet` (EP0's `bMaxPacketSize0` for a control OUT, the
            /// endpoint's `wMaxPacketSize` for a bulk or interrupt OUT, from the device's
            /// descriptors; where it gives none, 64 for control and 512 for bulk and
            /// interrupt). A single-packet OUT is cut to 0 only. The recorded fault holds the
            /// effective `n`; a schedule file or saved case pinning another `n` at an OUT
            /// transfer is applied as written.
            Short(n: u32) => {
                name: short,
                form: "short(n)",
                json: "{\"short\":n}",
                in_all: true,
                payload: any,
                parse(a): {
                    let [n] = a.list::<1>("short(n)")?;
                    Ok(Fault::Short(a.int(n, "length too large")?))
                },
                show(f): write!(f, "short({n})"),
                arrival: Arrival::Deliver,
                latency: 0,
                bends: true,
                bend(data): data.truncate(n as usize),
                at_transition: false => AtTransition::default(),
                // Half, rounded down to a packet boundary (`packet` is 1 at IN).
                explore(len, packet): (len > 0).then_some(Fault::Short(len / 2 / packet * packet)),
                // Any shorter length at a packet boundary: of what the device returned at an
                // IN transfer (`packet` 1: any), of whole packets at an OUT one.
                draw(len, below, packet): {
                    let p = u64::from(packet);
                    let cuts = u64::from(len).div_ceil(p);
                    Fault::Short((below(cuts) * p) as u32)
                },
                at_reply: true,
                // One byte of an IN reply; none of an OUT payload (0 is a packet boundary
                // whatever the endpoint's packet size, which the corpus does not keep).
                mutant(dir): Fault::Short(match dir {
                    Dir::In => 1,
                    Dir::Out => 0,
                }),
            }
            /// The device drops off the bus; this and every pending transfer fail
            /// `Disconnected`.
            Disconnect => {
                name: disconnect,
                form: "disconnect",
                json: "\"disconnect\"",
                in_all: true,
                payload: any,
                parse(a): a.none(Fault::Disconnect),
                show(f): f.write_str("disconnect"),
                arrival: Arrival::Disconnect,
                latency: 0,
                bends: false,
                bend(data): (),
                at_transition: true => AtTransition { disconnect: true, ..AtTransition::default() },
                explore(len): Some(Fault::Disconnect),
                mutant: Fault::Disconnect,
            }
            /// The transfer (or the transfer in progress at a transition) completes `ns`
            /// later.
            #[serde(rename = "delay_ns")]
            Delay(ns: u64) => {
                name: delay,
                form: "delay(d)",
                json: "{\"delay_ns\":n}",
                in_all: true,
                payload: any,
                parse(a): {
                    let [d] = a.list::<1>("delay(d)")?;
                    Ok(Fault::Delay(crate::clock::parse_ns(d)?))
                },
                show(f): write!(f, "delay({})", crate::clock::format_ns_exact(ns)),
                arrival: Arrival::Deliver,
                latency: ns,
                bends: false,
                bend(data): (),
                at_transition: true => AtTransition { delay: ns, ..AtTransition::default() },
                explore(len): Some(Fault::Delay(1_000_000)),
                mutant: Fault::Delay(1_000_000),
            }
            /// One byte of an IN payload (the reply a driver receives: a control IN's data
            /// stage, a bulk or interrupt IN) is XORed: the device sent a wrong byte (buggy or
            /// hostile), which a driver must validate, so what breaks through it is the
            /// driver's. Not at OUT payloads: a byte damaged on the wire fails its CRC and is
            /// retried or ends as a transfer error (`stall`, `timeout`, `short`,
            /// `disconnect`), so silent corruption is the device's doing, and at an OUT
            /// transfer it would be the device misreading what the driver sent, which no driver
            /// can see or prevent: that is `garble`, which a scenario names.
            Corrupt {
                /// Byte offset into the payload (wraps to its length).
                offset: u32,
                /// The XOR mask.
                xor: u8,
            } => {
                name: corrupt,
                form: "corrupt(offset,xor)",
                json: "{\"corrupt\":{\"offset\":o,\"xor\":x}}",
                in_all: true,
                payload: in,
                parse(a): {
                    let (offset, xor) = a.byte_xor("corrupt(offset,xor)")?;
                    Ok(Fault::Corrupt { offset, xor })
                },
                show(f): write!(f, "corrupt({offset},{xor:#04x})"),
                arrival: Arrival::Deliver,
                latency: 0,
                bends: true,
                bend(data): xor_byte(data, offset, xor),
                at_transition: false => AtTransition::default(),
                explore(len): (len > 0).then_some(Fault::Corrupt { offset: 0, xor: 0xff }),
                draw(len, below): {
                    let (offset, xor) = draw_byte_xor(len, below);
                    Fault::Corrupt { offset, xor }
                },
                mutant: Fault::Corrupt { offset: 0, xor: 0xff },
            }
            /// One byte of an OUT payload is XORed as the device receives it: the device
            /// misreads what the driver sent (its firmware, its buffer). Not the wire's doing: a
            /// byte damaged on the wire fails its CRC and is retried or ends as a transfer error
            /// (`stall`, `timeout`, `short`, `disconnect`). A driver can neither see nor prevent
            /// it, so it is outside `all` and `transport`: a scenario names it (`faults =
            /// [garble]`) to ask what the system does with a device that misreads, not whether
            /// the driver is right. Meaningful only at OUT payloads (the data stage of a control
            /// OUT, a bulk or interrupt OUT); parameters drawn from its own stream,
            /// `fault/garble`, as `corrupt`'s.
            Garble {
                /// Byte offset into the payload (wraps to its length).
                offset: u32,
                /// The XOR mask.
                xor: u8,
            } => {
                name: garble,
                form: "garble(offset,xor)",
                json: "{\"garble\":{\"offset\":o,\"xor\":x}}",
                in_all: false,
                payload: out,
                parse(a): {
                    let (offset, xor) = a.byte_xor("garble(offset,xor)")?;
                    Ok(Fault::Garble { offset, xor })
                },
                show(f): write!(f, "garble({offset},{xor:#04x})"),
                arrival: Arrival::Deliver,
                latency: 0,
                bends: true,
                bend(data): xor_byte(data, offset, xor),
                at_transition: false => AtTransition::default(),
                explore(len): (len > 0).then_some(Fault::Garble { offset: 0, xor: 0xff }),
                draw(len, below): {
                    let (offset, xor) = draw_byte_xor(len, below);
                    Fault::Garble { offset, xor }
                },
                mutant: Fault::Garble { offset: 0, xor: 0xff },
            }
            $($added)*
        }
    };
}

#[cfg(not(test))]
table!($);

// The test build's table: the six above and the primitive the added-primitive test adds, as
// DESIGN.md's checklist "Adding a fault primitive" says (an entry at the end, not in `all`).
#[cfg(test)]
table! { $
    /// Every byte of the payload arrives as zero (test builds only: the primitive the
    /// added-primitive test adds).
    Zero => {
        name: zero,
        form: "zero",
        json: "\"zero\"",
        in_all: false,
        payload: any,
        parse(a): a.none(Fault::Zero),
        show(f): f.write_str("zero"),
        arrival: Arrival::Deliver,
        latency: 0,
        bends: true,
        bend(data): data.iter_mut().for_each(|b| *b = 0),
        at_transition: false => AtTransition::default(),
        explore(len): (len > 0).then_some(Fault::Zero),
        mutant: Fault::Zero,
    }
}

/// `corrupt`'s and `garble`'s bend: the byte at `offset` (wrapped to the length) XORed with
/// `xor`; an empty payload has nothing to bend.
fn xor_byte(data: &mut [u8], offset: u32, xor: u8) {
    if !data.is_empty() {
        let i = offset as usize % data.len();
        data[i] ^= xor;
    }
}

/// `corrupt`'s and `garble`'s drawn parameters, in this order: any byte of a `len`-byte
/// payload, then any mask but 0.
fn draw_byte_xor(len: u32, below: &mut dyn FnMut(u64) -> u64) -> (u32, u8) {
    let offset = below(u64::from(len)) as u32;
    (offset, 1 + below(255) as u8)
}

impl FaultKind {
    /// The primitives `faults = all` and `faults = transport` explore ([`FaultKind::in_all`]),
    /// as bits over [`FaultKind::ALL`].
    pub(crate) const IN_ALL_BITS: u64 = {
        let mut bits = 0;
        let mut i = 0;
        while i < FaultKind::COUNT {
            if FaultKind::ALL[i].in_all() {
                bits |= 1 << i;
            }
            i += 1;
        }
        bits
    };

    /// The error for text that names no primitive (or a primitive with the wrong arguments):
    /// every primitive's form, from the table.
    pub(crate) fn not_a_fault(text: &str) -> String {
        let forms: Vec<&str> = FaultKind::ALL.iter().map(|k| k.form()).collect();
        format!("`{text}` is not a fault; expected {}", either_or(&forms))
    }

    /// Every primitive's form in a fault schedule file, for its errors.
    pub(crate) fn json_forms() -> String {
        let forms: Vec<&str> = FaultKind::ALL.iter().map(|k| k.json_form()).collect();
        either_or(&forms)
    }
}

/// `a, b or c`.
fn either_or(items: &[&str]) -> String {
    match items.split_last() {
        None => String::new(),
        Some((last, [])) => (*last).to_string(),
        Some((last, rest)) => format!("{} or {last}", rest.join(", ")),
    }
}

/// What a transfer's fault does when the transfer first reaches its device.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Arrival {
    /// The transfer reaches the device (its bytes may still be bent, its completion delayed).
    Deliver,
    /// It completes with a STALL without reaching the device.
    Stall,
    /// It is swallowed: it never completes, until the host's own timeout gives up.
    Swallow,
    /// The device drops off the bus.
    Disconnect,
}

/// What a fault at a transition site does to the device call in progress.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AtTransition {
    /// The transition is refused (the device must not change state) and the request in
    /// progress stalls.
    pub refused: bool,
    /// The device drops off the bus after the call.
    pub disconnect: bool,
    /// The request in progress completes this much later.
    pub delay: u64,
}

impl fmt::Display for FaultKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A family of fault sites: the transfer type of a transfer site, or a model transition. A
/// seeded run's swarm configuration turns families on and off (see `swarm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum SiteFamily {
    /// Control transfers (`ctrl.get_status#3`).
    #[serde(rename = "ctrl")]
    Ctrl,
    /// Bulk OUT transfers (`bulk.out#5`), and interrupt OUT ones (`intr.out#1`).
    #[serde(rename = "bulk.out")]
    BulkOut,
    /// Bulk IN transfers (`bulk.in#2`).
    #[serde(rename = "bulk.in")]
    BulkIn,
    /// Interrupt IN transfers (`intr.in#1`).
    #[serde(rename = "intr.in")]
    IntrIn,
    /// Model transitions (`flip.pending->shown#1`).
    #[serde(rename = "transition")]
    Transition,
}

impl SiteFamily {
    /// Every family, in the order a swarm draws them.
    pub const ALL: [SiteFamily; 5] = [
        SiteFamily::Ctrl,
        SiteFamily::BulkOut,
        SiteFamily::BulkIn,
        SiteFamily::IntrIn,
        SiteFamily::Transition,
    ];

    /// The family of the site `name` of kind `kind` (`ctrl.x#1`, `bulk.out#2`, a transition).
    pub fn of(name: &str, kind: &SiteKind) -> SiteFamily {
        match kind {
            SiteKind::Transition => SiteFamily::Transition,
            SiteKind::Transfer { .. } => {
                if name.starts_with("ctrl.") {
                    SiteFamily::Ctrl
                } else if name.starts_with("bulk.out") || name.starts_with("intr.out") {
                    // Interrupt OUT (`intr.out#n`) shares the OUT family: a new family would
                    // shift every swarm's draws.
                    SiteFamily::BulkOut
                } else if name.starts_with("bulk.in") {
                    SiteFamily::BulkIn
                } else {
                    SiteFamily::IntrIn
                }
            }
        }
    }

    /// The family's name, as site names begin: `ctrl`, `bulk.out`, `bulk.in`, `intr.in`,
    /// `transition`.
    pub fn as_str(self) -> &'static str {
        match self {
            SiteFamily::Ctrl => "ctrl",
            SiteFamily::BulkOut => "bulk.out",
            SiteFamily::BulkIn => "bulk.in",
            SiteFamily::IntrIn => "intr.in",
            SiteFamily::Transition => "transition",
        }
    }

    /// Whether a fault of `kind` means something at a site of this family (a transition takes
    /// the primitives whose entry says `at_transition: true`, `stall`, `disconnect` and
    /// `delay`; the OUT family those whose `payload` is not `in`, the IN families those
    /// whose `payload` is not `out`; control transfers, which go either way, every
    /// primitive).
    pub fn takes(self, kind: FaultKind) -> bool {
        match self {
            SiteFamily::Transition => kind.at_transition(),
            SiteFamily::Ctrl => true,
            SiteFamily::BulkOut => kind.at_payload(Dir::Out),
            SiteFamily::BulkIn | SiteFamily::IntrIn => kind.at_payload(Dir::In),
        }
    }

    /// Whether this family takes one of `kinds` (bits over [`FaultKind::ALL`]).
    pub(crate) fn takes_any(self, kinds: u64) -> bool {
        FaultKind::ALL
            .iter()
            .enumerate()
            .any(|(i, k)| kinds & (1 << i) != 0 && self.takes(*k))
    }
}

impl fmt::Display for SiteFamily {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which faults a scenario explores: the attribute's `faults = ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultSet {
    /// No fault trials, no faults in seeded schedules.
    None,
    /// Every primitive in `all` ([`FaultKind::in_all`]) at every transfer site.
    Transport,
    /// Every primitive in `all` ([`FaultKind::in_all`]) at every transfer and transition
    /// site.
    All,
    /// These primitives at every site where they mean something.
    Only(Vec<FaultKind>),
}

impl FaultSet {
    /// Whether any fault is explored.
    pub fn is_none(&self) -> bool {
        matches!(self, FaultSet::None) || matches!(self, FaultSet::Only(v) if v.is_empty())
    }

    /// The primitives this set explores somewhere, in [`FaultKind::ALL`] order.
    pub fn kinds(&self) -> Vec<FaultKind> {
        let bits = self.kind_bits();
        FaultKind::ALL
            .iter()
            .copied()
            .enumerate()
            .filter(|&(i, _)| bits & (1 << i) != 0)
            .map(|(_, k)| k)
            .collect()
    }

    /// [`FaultSet::kinds`] as bits: bit `i` for `FaultKind::ALL[i]` (no list built; a seeded
    /// run's swarm asks every run).
    pub(crate) fn kind_bits(&self) -> u64 {
        match self {
            FaultSet::None => 0,
            FaultSet::Transport | FaultSet::All => FaultKind::IN_ALL_BITS,
            FaultSet::Only(kinds) => FaultKind::ALL
                .iter()
                .enumerate()
                .filter(|(_, k)| kinds.contains(k))
                .fold(0, |b, (i, _)| b | 1 << i),
        }
    }

    /// Whether this set explores faults at sites of `family` at all (a transport set leaves
    /// transitions alone).
    pub fn reaches(&self, family: SiteFamily) -> bool {
        self.reaches_with(family, self.kind_bits())
    }

    /// [`FaultSet::reaches`] given this set's [`FaultSet::kind_bits`].
    pub(crate) fn reaches_with(&self, family: SiteFamily, kind_bits: u64) -> bool {
        match self {
            FaultSet::Transport => family != SiteFamily::Transition,
            _ => family.takes_any(kind_bits),
        }
    }

    fn allows(&self, kind: FaultKind, site: &SiteKind) -> bool {
        match self {
            FaultSet::None => false,
            FaultSet::Transport => kind.in_all() && matches!(site, SiteKind::Transfer { .. }),
            FaultSet::All => kind.in_all(),
            FaultSet::Only(kinds) => kinds.contains(&kind),
        }
    }

    /// The concrete faults explored at one site.
    pub fn candidates(&self, site: &SiteKind) -> Vec<Fault> {
        self.each_candidate(site).collect()
    }

    /// [`FaultSet::candidates`] without building a vector (a seeded run asks at every site
    /// crossing).
    pub(crate) fn each_candidate<'a>(
        &'a self,
        site: &'a SiteKind,
    ) -> impl Iterator<Item = Fault> + 'a {
        site.each_meaningful()
            .filter(move |f| self.allows(f.kind(), site))
    }
}

/// Which way a transfer's payload goes: what a primitive restricted to one direction
/// (its entry's `payload: in` or `out`) is meaningful at.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Dir {
    /// From the device to the driver: the reply a driver receives (a control IN data stage,
    /// a bulk or interrupt IN).
    In,
    /// From the driver to the device (a control OUT data stage, a bulk or interrupt OUT).
    Out,
}

/// What a site is, as the baseline saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SiteKind {
    /// A transfer; `len` is the payload length (the IN reply or the OUT data), `dir` the way
    /// it goes.
    Transfer {
        /// Payload bytes.
        len: u32,
        /// Which way the payload goes: a control transfer's data stage goes the way its setup
        /// packet says (a control OUT without data is `Out`).
        dir: Dir,
        /// The step at which the payload can end early: at OUT the endpoint's max packet
        /// size (a packet crosses whole or not at all, so an early end falls after whole
        /// packets; [`packet_fallback`] where the device's descriptors give none), at IN 1 (a
        /// device may send a short packet anywhere).
        packet: u32,
    },
    /// A model transition.
    Transition,
}

impl SiteKind {
    /// The primitives that mean something here, with the parameters exploration uses.
    pub fn meaningful(&self) -> Vec<Fault> {
        self.each_meaningful().collect()
    }

    /// [`SiteKind::meaningful`] without building a vector: each primitive's explored fault
    /// ([`Fault::explored`]) in table order, where it means something (a transfer takes the
    /// primitives whose `payload` is its direction's or `any`; a transition has no payload,
    /// and takes the primitives that apply at transitions).
    pub(crate) fn each_meaningful(&self) -> impl Iterator<Item = Fault> {
        let (len, dir, packet) = match *self {
            SiteKind::Transfer { len, dir, packet } => (len, Some(dir), packet),
            SiteKind::Transition => (0, None, 1),
        };
        FaultKind::ALL
            .iter()
            .copied()
            .filter(move |k| match dir {
                Some(d) => k.at_payload(d),
                None => k.at_transition(),
            })
            .filter_map(move |k| Fault::explored(k, len, packet))
    }
}

/// The max packet size assumed for an OUT endpoint whose device's descriptors give none
/// (a model without descriptors): 64 for endpoint 0 (full-speed control), 512 for a bulk or
/// interrupt OUT endpoint (high-speed bulk).
pub fn packet_fallback(control: bool) -> u32 {
    if control {
        64
    } else {
        512
    }
}

/// A site seen in a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Site {
    /// Its name, `ctrl.get_status#3`.
    pub name: String,
    /// What it is.
    pub kind: SiteKind,
}

/// A fault schedule: faults pinned to sites. Loaded from `specs/faults/*.json` or built by
/// exploration.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FaultPlan {
    /// Site name to fault.
    pub faults: BTreeMap<String, Fault>,
}

impl FaultPlan {
    /// A plan with one fault.
    pub fn single(site: &str, fault: Fault) -> Self {
        let mut faults = BTreeMap::new();
        faults.insert(site.to_string(), fault);
        FaultPlan { faults }
    }

    /// Parses a fault schedule file's text; errors name `path` and the field.
    pub fn parse(path: &Path, text: &str) -> Result<FaultPlan, crate::Error> {
        let err = |field: &str, msg: String| crate::Error::File {
            path: path.to_path_buf(),
            field: field.to_string(),
            message: msg,
        };
        let v: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| err("(document)", format!("not valid JSON: {e}")))?;
        let obj = v
            .as_object()
            .ok_or_else(|| err("(document)", "expected a JSON object".into()))?;
        match obj.get("format").and_then(|f| f.as_str()) {
            Some("calametra.faults") => {}
            other => {
                return Err(err(
                    "format",
                    format!("expected \"calametra.faults\", found {other:?}"),
                ))
            }
        }
        match obj.get("version").and_then(|f| f.as_u64()) {
            Some(1) => {}
            other => return Err(err("version", format!("expected 1, found {other:?}"))),
        }
        if obj.get("source").and_then(|s| s.as_str()).is_none() {
            return Err(err(
                "source",
                "expected a string naming where the schedule comes from".into(),
            ));
        }
        let list = obj
            .get("faults")
            .and_then(|f| f.as_array())
            .ok_or_else(|| {
                err(
                    "faults",
                    "expected an array of {\"site\": ..., \"fault\": ...}".into(),
                )
            })?;
        let mut plan = FaultPlan::default();
        for (i, item) in list.iter().enumerate() {
            let field = format!("faults[{i}]");
            let site = item.get("site").and_then(|s| s.as_str()).ok_or_else(|| {
                err(
                    &format!("{field}.site"),
                    "expected a site name like \"ctrl.get_status#3\"".into(),
                )
            })?;
            if !site.contains('#') {
                return Err(err(
                    &format!("{field}.site"),
                    format!("`{site}` has no occurrence; expected `<site>#<n>`"),
                ));
            }
            let fault_v = item
                .get("fault")
                .ok_or_else(|| err(&format!("{field}.fault"), "missing".into()))?;
            let fault: Fault = match fault_v.as_str() {
                Some(s) if s.contains('(') => Fault::parse(s),
                _ => serde_json::from_value(fault_v.clone()).map_err(|e| e.to_string()),
            }
            .map_err(|e| {
                err(
                    &format!("{field}.fault"),
                    format!("{e}; expected {}", FaultKind::json_forms()),
                )
            })?;
            if plan.faults.insert(site.to_string(), fault).is_some() {
                return Err(err(
                    &format!("{field}.site"),
                    format!("`{site}` appears twice"),
                ));
            }
        }
        Ok(plan)
    }

    /// Loads a fault schedule file.
    pub fn load(path: &Path) -> Result<FaultPlan, crate::Error> {
        let text = std::fs::read_to_string(path).map_err(|e| crate::Error::File {
            path: path.to_path_buf(),
            field: "(file)".into(),
            message: format!("cannot read: {e}"),
        })?;
        Self::parse(path, &text)
    }
}

/// The seed digest's workload, shared with `tests/added_primitive.rs` (it names the core
/// crate `cc`).
#[cfg(test)]
use crate as cc;
#[cfg(test)]
#[path = "../tests/support/seed_digest.rs"]
mod seed_digest;

#[cfg(test)]
mod tests {
    use super::*;

    /// DESIGN.md, "Adding a fault primitive": the test build's table ends with `zero`, added
    /// as the checklist says. Every seed of every scenario that does not name it runs as it
    /// did (the seed digest is the one pinned against the shipped table, which
    /// `tests/added_primitive.rs` checks), and a scenario that names it gets it: parsed,
    /// shown, drawn by its swarms from its own stream, injected, and acting on the bytes.
    #[test]
    fn an_added_primitive_changes_no_seed_that_does_not_ask_for_it() {
        assert_eq!(FaultKind::ALL.last(), Some(&FaultKind::Zero));
        let (digest, _) = super::seed_digest::digest(64);
        assert_eq!(digest, super::seed_digest::PINNED_64);

        // Named by the macro's path, parsed, shown, serialized like the others.
        assert_eq!(__calametra_fault_kind!(zero), FaultKind::Zero);
        assert_eq!(Fault::parse("zero"), Ok(Fault::Zero));
        assert_eq!(Fault::Zero.to_string(), "zero");
        assert_eq!(serde_json::to_string(&FaultKind::Zero).unwrap(), "\"zero\"");
        assert!(Fault::parse("nothing")
            .unwrap_err()
            .contains("garble(offset,xor) or zero"));
        // Not in `all`: a scenario names it.
        assert!(!FaultSet::All.kinds().contains(&FaultKind::Zero));
        let only = FaultSet::Only(vec![FaultKind::Zero]);
        assert_eq!(
            only.candidates(&SiteKind::Transfer {
                len: 4,
                dir: Dir::In,
                packet: 1,
            }),
            [Fault::Zero]
        );
        assert!(only.candidates(&SiteKind::Transition).is_empty());

        // A scenario that asks for it: its swarms turn it on (from `swarm/zero`) and its
        // seeded runs inject it; where injected, an IN reply arrives zeroed.
        let mut injected = 0;
        for seed in 0..64 {
            let s = crate::swarm::Swarm::draw(seed, &only, &[], 16);
            assert_eq!(
                s.faults,
                [FaultKind::Zero],
                "seed {seed}: the only one, so on"
            );
            let r = crate::run(
                crate::RunConfig {
                    source: crate::choices::Source::Seeded(seed),
                    fault_set: only.clone(),
                    ..crate::RunConfig::default()
                },
                &|sim: &mut crate::Sim| {
                    let dev = sim.attach(crate::device::Loopback::default());
                    let iface = dev.interface();
                    sim.spawn("a", async move {
                        for _ in 0..40 {
                            let t = std::time::Duration::from_millis(100);
                            let _ = iface
                                .control_out(crate::device::Loopback::store(&[7, 7]), t)
                                .await;
                            let _ = iface.control_in(crate::device::Loopback::load(2), t).await;
                        }
                    });
                },
            );
            injected += r
                .events
                .iter()
                .filter(|e| {
                    matches!(
                        e,
                        crate::choices::Event::Fault {
                            fault: Fault::Zero,
                            ..
                        }
                    )
                })
                .count();
        }
        assert!(injected > 0, "no seed injected `zero`");
        let mut d = vec![1, 2, 3];
        Fault::Zero.bend(&mut d);
        assert_eq!(d, [0, 0, 0]);
        assert_eq!(Fault::Zero.on_arrival(), Arrival::Deliver);
    }

    /// `garble` is the OUT side of a payload byte XORed (the device misreads what it was
    /// sent): parsed and shown, outside `all`, meaningful at OUT payloads only, and a seeded
    /// run of a scenario naming it injects it at the loopback's control OUT (`store`), never
    /// at its IN (`load`), with its parameters drawn.
    #[test]
    fn garble_is_injected_at_out_payloads_only() {
        let g = Fault::Garble {
            offset: 1,
            xor: 0x0f,
        };
        assert_eq!(g.to_string(), "garble(1,0x0f)");
        assert_eq!(Fault::parse("garble(1,0x0f)"), Ok(g.clone()));
        let j = serde_json::to_string(&g).unwrap();
        assert_eq!(j, r#"{"garble":{"offset":1,"xor":15}}"#);
        assert_eq!(serde_json::from_str::<Fault>(&j).unwrap(), g);
        assert!(!FaultKind::Garble.in_all());
        assert_eq!(FaultKind::Garble.payload(), Some(Dir::Out));
        let mut d = vec![1, 2, 3];
        g.bend(&mut d);
        assert_eq!(d, [1, 0x0d, 3]);
        let only = FaultSet::Only(vec![FaultKind::Garble]);
        let out = SiteKind::Transfer {
            len: 4,
            dir: Dir::Out,
            packet: 1,
        };
        let inn = SiteKind::Transfer {
            len: 4,
            dir: Dir::In,
            packet: 1,
        };
        assert_eq!(
            only.candidates(&out),
            [Fault::Garble {
                offset: 0,
                xor: 0xff
            }]
        );
        assert!(only.candidates(&inn).is_empty());
        assert!(FaultSet::All
            .candidates(&out)
            .iter()
            .all(|f| f.kind() != FaultKind::Garble));
        assert!(SiteFamily::BulkOut.takes(FaultKind::Garble));
        assert!(!SiteFamily::BulkIn.takes(FaultKind::Garble));
        assert!(SiteFamily::Ctrl.takes(FaultKind::Garble));

        let mut at = BTreeMap::<String, usize>::new();
        let mut drawn = std::collections::BTreeSet::new();
        for seed in 0..64 {
            let r = crate::run(
                crate::RunConfig {
                    source: crate::choices::Source::Seeded(seed),
                    fault_set: only.clone(),
                    ..crate::RunConfig::default()
                },
                &|sim: &mut crate::Sim| {
                    let dev = sim.attach(crate::device::Loopback::default());
                    let iface = dev.interface();
                    sim.spawn("a", async move {
                        for _ in 0..40 {
                            let t = std::time::Duration::from_millis(100);
                            let _ = iface
                                .control_out(crate::device::Loopback::store(&[7, 7]), t)
                                .await;
                            let _ = iface.control_in(crate::device::Loopback::load(2), t).await;
                        }
                    });
                },
            );
            for e in &r.events {
                if let crate::choices::Event::Fault { site, fault } = e {
                    *at.entry(site.split('#').next().unwrap_or("").to_string())
                        .or_default() += 1;
                    drawn.insert(fault.clone());
                }
            }
        }
        assert_eq!(at.keys().collect::<Vec<_>>(), ["ctrl.store"], "{at:?}");
        assert!(drawn.len() > 1, "offsets and masks are drawn: {drawn:?}");
    }

    /// A packet crosses whole or not at all: `short` at an OUT payload cuts at a packet
    /// boundary (explored and drawn), at an IN reply anywhere, as before.
    #[test]
    fn short_at_an_out_payload_cuts_at_a_packet_boundary() {
        let out = |len, packet| SiteKind::Transfer {
            len,
            dir: Dir::Out,
            packet,
        };
        let short_of = |k: &SiteKind| {
            k.meaningful()
                .into_iter()
                .find(|f| f.kind() == FaultKind::Short)
        };
        // Exploration: half, rounded down to a packet boundary.
        assert_eq!(short_of(&out(1000, 512)), Some(Fault::Short(0)));
        assert_eq!(short_of(&out(2048, 512)), Some(Fault::Short(1024)));
        assert_eq!(short_of(&out(31, 512)), Some(Fault::Short(0)));
        assert_eq!(short_of(&out(0, 512)), None);
        // Seeded draws: every value `below` can give lands on 0 or 512 of 1000 bytes, and
        // on 0 only for a single-packet OUT (a 31-byte CBW).
        let drawn = |len, packet| {
            let mut seen = std::collections::BTreeSet::new();
            for v in 0..64u64 {
                let f = Fault::drawn(FaultKind::Short, len, packet, &mut |n| v % n).unwrap();
                seen.insert(f);
            }
            seen.into_iter().collect::<Vec<_>>()
        };
        assert_eq!(drawn(1000, 512), [Fault::Short(0), Fault::Short(512)]);
        assert_eq!(drawn(31, 64), [Fault::Short(0)]);
        assert_eq!(drawn(31, 512), [Fault::Short(0)]);
        // IN is unchanged: any length below the reply's (its `packet` is 1).
        let inn = SiteKind::Transfer {
            len: 1000,
            dir: Dir::In,
            packet: 1,
        };
        assert_eq!(short_of(&inn), Some(Fault::Short(500)));
        assert_eq!(drawn(11, 1), (0..11).map(Fault::Short).collect::<Vec<_>>());
        // Exploration of a 31-byte IN still halves it.
        assert_eq!(
            Fault::explored(FaultKind::Short, 31, 1),
            Some(Fault::Short(15))
        );
    }

    #[test]
    fn each_primitive_acts_as_documented_where_it_applies() {
        let arrival: Vec<Arrival> = [
            Fault::Stall,
            Fault::Timeout,
            Fault::Disconnect,
            Fault::Short(1),
            Fault::Delay(5),
            Fault::Corrupt { offset: 0, xor: 1 },
        ]
        .iter()
        .map(Fault::on_arrival)
        .collect();
        use Arrival::*;
        assert_eq!(
            arrival,
            [Stall, Swallow, Disconnect, Deliver, Deliver, Deliver]
        );
        assert_eq!(Fault::Delay(7).latency(), 7);
        assert_eq!(Fault::Stall.latency(), 0);
        let bent = |f: Fault, mut d: Vec<u8>| {
            assert_eq!(
                f.bends(),
                matches!(f, Fault::Short(_) | Fault::Corrupt { .. })
            );
            f.bend(&mut d);
            d
        };
        assert_eq!(bent(Fault::Short(2), vec![1, 2, 3]), [1, 2]);
        assert_eq!(bent(Fault::Short(9), vec![1, 2, 3]), [1, 2, 3]);
        // The offset wraps to the payload's length; an empty payload has nothing to corrupt.
        assert_eq!(
            bent(
                Fault::Corrupt {
                    offset: 4,
                    xor: 0xff
                },
                vec![1, 2, 3]
            ),
            [1, 0xfd, 3]
        );
        assert_eq!(
            bent(
                Fault::Corrupt {
                    offset: 4,
                    xor: 0xff
                },
                vec![]
            ),
            [] as [u8; 0]
        );
        assert_eq!(bent(Fault::Delay(1), vec![1]), [1]);
        let stall = Fault::Stall.at_transition();
        assert!(stall.refused && !stall.disconnect && stall.delay == 0);
        let gone = Fault::Disconnect.at_transition();
        assert!(!gone.refused && gone.disconnect);
        assert_eq!(Fault::Delay(3).at_transition().delay, 3);
        assert_eq!(Fault::Short(1).at_transition(), AtTransition::default());
    }

    #[test]
    fn display_and_parse_round_trip() {
        for f in [
            Fault::Stall,
            Fault::Timeout,
            Fault::Short(3),
            Fault::Disconnect,
            Fault::Delay(1_000_000),
            Fault::Corrupt {
                offset: 2,
                xor: 0xff,
            },
        ] {
            assert_eq!(Fault::parse(&f.to_string()).unwrap(), f);
            let j = serde_json::to_string(&f).unwrap();
            assert_eq!(serde_json::from_str::<Fault>(&j).unwrap(), f, "{j}");
        }
        assert!(Fault::parse("explode").is_err());
        assert!(Fault::parse("corrupt(1,300)").unwrap_err().contains("byte"));
    }

    /// The faults meaningful at a site, in the order seeded draws index them (pinned: a
    /// change of order changes which fault a seed draws).
    #[test]
    fn meaningful_faults_are_in_their_pinned_order() {
        let corrupt = Fault::Corrupt {
            offset: 0,
            xor: 0xff,
        };
        // The primitives of `all`, in their pinned order; the test build's added primitive
        // comes after them.
        let of_all = |k: &SiteKind| -> Vec<Fault> {
            k.meaningful()
                .into_iter()
                .filter(|f| f.kind().in_all())
                .collect()
        };
        assert_eq!(
            SiteKind::Transfer {
                len: 4,
                dir: Dir::In,
                packet: 1,
            }
            .meaningful()
            .last(),
            Some(&Fault::Zero)
        );
        assert_eq!(
            of_all(&SiteKind::Transfer {
                len: 4,
                dir: Dir::In,
                packet: 1,
            }),
            vec![
                Fault::Stall,
                Fault::Timeout,
                Fault::Short(2),
                Fault::Disconnect,
                Fault::Delay(1_000_000),
                corrupt
            ]
        );
        // `corrupt` is the IN side's: an OUT payload takes the others (and `garble`, which
        // no scenario gets without naming it).
        assert_eq!(
            of_all(&SiteKind::Transfer {
                len: 4,
                dir: Dir::Out,
                packet: 1,
            }),
            vec![
                Fault::Stall,
                Fault::Timeout,
                Fault::Short(2),
                Fault::Disconnect,
                Fault::Delay(1_000_000),
            ]
        );
        assert_eq!(
            SiteKind::Transfer {
                len: 4,
                dir: Dir::Out,
                packet: 1,
            }
            .meaningful()
            .last(),
            Some(&Fault::Zero)
        );
        assert!(!SiteFamily::BulkOut.takes(FaultKind::Corrupt));
        assert!(SiteFamily::BulkIn.takes(FaultKind::Corrupt));
        assert_eq!(
            SiteKind::Transfer {
                len: 0,
                dir: Dir::In,
                packet: 1,
            }
            .meaningful(),
            vec![
                Fault::Stall,
                Fault::Timeout,
                Fault::Disconnect,
                Fault::Delay(1_000_000)
            ]
        );
        assert_eq!(
            SiteKind::Transition.meaningful(),
            vec![Fault::Stall, Fault::Disconnect, Fault::Delay(1_000_000)]
        );
    }

    #[test]
    fn candidates_follow_the_set() {
        let t = SiteKind::Transfer {
            len: 4,
            dir: Dir::In,
            packet: 1,
        };
        assert_eq!(FaultSet::Transport.candidates(&t).len(), 6);
        assert!(FaultSet::Transport
            .candidates(&SiteKind::Transition)
            .is_empty());
        assert_eq!(FaultSet::All.candidates(&SiteKind::Transition).len(), 3);
        assert_eq!(
            FaultSet::Only(vec![FaultKind::Stall]).candidates(&t),
            vec![Fault::Stall]
        );
        assert_eq!(
            FaultSet::Transport
                .candidates(&SiteKind::Transfer {
                    len: 0,
                    dir: Dir::In,
                    packet: 1,
                })
                .len(),
            4
        );
    }

    #[test]
    fn schedule_files_report_file_and_field() {
        let p = Path::new("specs/faults/x.json");
        let ok = r#"{"format":"calametra.faults","version":1,"source":"test","faults":[{"site":"ctrl.get_status#3","fault":"stall"},{"site":"bulk.out#1","fault":{"short":2}},{"site":"bulk.out#2","fault":"delay(1ms)"}]}"#;
        let plan = FaultPlan::parse(p, ok).unwrap();
        assert_eq!(plan.faults["bulk.out#1"], Fault::Short(2));
        assert_eq!(plan.faults["bulk.out#2"], Fault::Delay(1_000_000));
        let bad = r#"{"format":"calametra.faults","version":1,"source":"t","faults":[{"site":"ctrl.x#1","fault":"melt"}]}"#;
        let e = FaultPlan::parse(p, bad).unwrap_err().to_string();
        assert!(
            e.contains("specs/faults/x.json") && e.contains("faults[0].fault"),
            "{e}"
        );
        let e = FaultPlan::parse(p, r#"{"format":"calametra.faults","version":2}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("version"), "{e}");
        assert!(FaultPlan::parse(p, "{")
            .unwrap_err()
            .to_string()
            .contains("not valid JSON"));
    }
}
