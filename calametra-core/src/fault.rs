//! Fault primitives, fault sites, and fault schedules (`specs/faults/*.json`).
//!
//! A fault site is a named point of a run: a transfer crossing the bus (`ctrl.get_edid#2`,
//! `bulk.out#5`, `intr.in#1`) or a model transition (`flip.pending->shown#1`). `#n` counts the
//! site's occurrences in the run, from 1.
//!
//! How each primitive acts is defined here and nowhere else ([`Fault::on_arrival`],
//! [`Fault::latency`], [`Fault::bend`], [`Fault::at_transition`]): the world applies a transfer's
//! fault where the transfer crosses the bus, for in-process runs and for `DeviceHost` (which the
//! usb-redir and lockstep bridges drive) alike; a transition fault is answered by the model
//! through `DevCtx::transition`.

use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

/// A fault primitive.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum Fault {
    /// The endpoint answers with a STALL handshake; the request never reaches the device. At a
    /// transition site: the transition is refused and the request in progress stalls.
    Stall,
    /// The request is swallowed: it never completes, until the host's own timeout gives up.
    Timeout,
    /// Only `n` bytes cross (an IN reply is cut, an OUT payload is cut before the device sees it).
    Short(u32),
    /// The device drops off the bus; this and every pending transfer fail `Disconnected`.
    Disconnect,
    /// The transfer (or the transfer in progress at a transition) completes `ns` later.
    #[serde(rename = "delay_ns")]
    Delay(u64),
    /// One byte of the payload is XORed.
    Corrupt {
        /// Byte offset into the payload (wraps to its length).
        offset: u32,
        /// The XOR mask.
        xor: u8,
    },
}

/// The kind of a fault, without its parameters: what `faults = [..]` lists. Serialized by its
/// name (`"stall"`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FaultKind {
    /// [`Fault::Stall`].
    Stall,
    /// [`Fault::Timeout`].
    Timeout,
    /// [`Fault::Short`].
    Short,
    /// [`Fault::Disconnect`].
    Disconnect,
    /// [`Fault::Delay`].
    Delay,
    /// [`Fault::Corrupt`].
    Corrupt,
}

impl FaultKind {
    /// Every kind, in the order trials are generated.
    pub const ALL: [FaultKind; 6] = [
        FaultKind::Stall,
        FaultKind::Timeout,
        FaultKind::Short,
        FaultKind::Disconnect,
        FaultKind::Delay,
        FaultKind::Corrupt,
    ];

    /// Parses `stall`, `timeout`, `short`, `disconnect`, `delay`, `corrupt`.
    pub fn parse(s: &str) -> Option<FaultKind> {
        Some(match s {
            "stall" => FaultKind::Stall,
            "timeout" => FaultKind::Timeout,
            "short" => FaultKind::Short,
            "disconnect" => FaultKind::Disconnect,
            "delay" => FaultKind::Delay,
            "corrupt" => FaultKind::Corrupt,
            _ => return None,
        })
    }

    /// The kind's name.
    pub fn as_str(self) -> &'static str {
        match self {
            FaultKind::Stall => "stall",
            FaultKind::Timeout => "timeout",
            FaultKind::Short => "short",
            FaultKind::Disconnect => "disconnect",
            FaultKind::Delay => "delay",
            FaultKind::Corrupt => "corrupt",
        }
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

impl Fault {
    /// What this fault does when its transfer first reaches the device: `stall`, `timeout`
    /// and `disconnect` stop it there; the others let it through.
    pub fn on_arrival(&self) -> Arrival {
        match self {
            Fault::Stall => Arrival::Stall,
            Fault::Timeout => Arrival::Swallow,
            Fault::Disconnect => Arrival::Disconnect,
            Fault::Short(_) | Fault::Delay(_) | Fault::Corrupt { .. } => Arrival::Deliver,
        }
    }

    /// The extra time its transfer takes to cross the bus (`delay`; 0 for the others).
    pub fn latency(&self) -> u64 {
        match self {
            Fault::Delay(d) => *d,
            _ => 0,
        }
    }

    /// Whether it changes the bytes that cross (`short`, `corrupt`).
    pub fn bends(&self) -> bool {
        matches!(self, Fault::Short(_) | Fault::Corrupt { .. })
    }

    /// Bends bytes crossing the bus: `short(n)` keeps the first `n`, `corrupt(offset, xor)`
    /// XORs the byte at `offset` (wrapped to the length; nothing to corrupt when empty); the
    /// others leave them.
    pub fn bend(&self, data: &mut Vec<u8>) {
        match *self {
            Fault::Short(n) => data.truncate(n as usize),
            Fault::Corrupt { offset, xor } if !data.is_empty() => {
                let i = offset as usize % data.len();
                data[i] ^= xor;
            }
            _ => {}
        }
    }

    /// What it does at a transition site: `stall` refuses the transition, `disconnect` drops
    /// the device after the call, `delay` delays the request in progress; the others do
    /// nothing there.
    pub fn at_transition(&self) -> AtTransition {
        match self {
            Fault::Stall => AtTransition {
                refused: true,
                ..AtTransition::default()
            },
            Fault::Disconnect => AtTransition {
                disconnect: true,
                ..AtTransition::default()
            },
            Fault::Delay(d) => AtTransition {
                delay: *d,
                ..AtTransition::default()
            },
            _ => AtTransition::default(),
        }
    }

    /// The fault's kind.
    pub fn kind(&self) -> FaultKind {
        match self {
            Fault::Stall => FaultKind::Stall,
            Fault::Timeout => FaultKind::Timeout,
            Fault::Short(_) => FaultKind::Short,
            Fault::Disconnect => FaultKind::Disconnect,
            Fault::Delay(_) => FaultKind::Delay,
            Fault::Corrupt { .. } => FaultKind::Corrupt,
        }
    }

    /// Parses the trial-name form: `stall`, `short(4)`, `delay(1ms)`, `corrupt(0,0xff)`.
    pub fn parse(s: &str) -> Result<Fault, String> {
        let s = s.trim();
        let (name, arg) = match s.split_once('(') {
            Some((n, rest)) => (
                n,
                Some(
                    rest.strip_suffix(')')
                        .ok_or_else(|| format!("`{s}`: missing `)`"))?,
                ),
            ),
            None => (s, None),
        };
        let int = |a: &str| -> Result<u64, String> {
            let a = a.trim();
            let r = match a.strip_prefix("0x") {
                Some(h) => u64::from_str_radix(h, 16),
                None => a.parse(),
            };
            r.map_err(|_| format!("`{s}`: `{a}` is not a number"))
        };
        match (name, arg) {
            ("stall", None) => Ok(Fault::Stall),
            ("timeout", None) => Ok(Fault::Timeout),
            ("disconnect", None) => Ok(Fault::Disconnect),
            ("short", Some(a)) => Ok(Fault::Short(
                u32::try_from(int(a)?).map_err(|_| format!("`{s}`: length too large"))?,
            )),
            ("delay", Some(a)) => Ok(Fault::Delay(crate::clock::parse_ns(a)?)),
            ("corrupt", Some(a)) => {
                let (o, x) = a
                    .split_once(',')
                    .ok_or_else(|| format!("`{s}`: expected corrupt(offset,xor)"))?;
                Ok(Fault::Corrupt {
                    offset: u32::try_from(int(o)?).map_err(|_| format!("`{s}`: offset too large"))?,
                    xor: u8::try_from(int(x)?).map_err(|_| format!("`{s}`: xor must fit a byte"))?,
                })
            }
            _ => Err(format!(
                "`{s}` is not a fault; expected stall, timeout, short(n), disconnect, delay(d) or corrupt(offset,xor)"
            )),
        }
    }
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
    /// `stall`, `disconnect` and `delay`; a transfer every primitive).
    pub fn takes(self, kind: FaultKind) -> bool {
        match self {
            SiteFamily::Transition => matches!(
                kind,
                FaultKind::Stall | FaultKind::Disconnect | FaultKind::Delay
            ),
            _ => true,
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

impl fmt::Display for Fault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Fault::Stall => f.write_str("stall"),
            Fault::Timeout => f.write_str("timeout"),
            Fault::Short(n) => write!(f, "short({n})"),
            Fault::Disconnect => f.write_str("disconnect"),
            Fault::Delay(ns) => write!(f, "delay({})", crate::clock::format_ns_exact(*ns)),
            Fault::Corrupt { offset, xor } => write!(f, "corrupt({offset},{xor:#04x})"),
        }
    }
}

/// Which faults a scenario explores: the attribute's `faults = ...`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FaultSet {
    /// No fault trials, no faults in seeded schedules.
    None,
    /// Every primitive at every transfer site.
    Transport,
    /// Every primitive at every transfer and transition site.
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
            .into_iter()
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
            FaultSet::Transport | FaultSet::All => (1 << FaultKind::ALL.len()) - 1,
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
            FaultSet::Transport => matches!(site, SiteKind::Transfer { .. }),
            FaultSet::All => true,
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

/// What a site is, as the baseline saw it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SiteKind {
    /// A transfer; `len` is the payload length (the IN reply or the OUT data).
    Transfer {
        /// Payload bytes.
        len: u32,
    },
    /// A model transition.
    Transition,
}

impl SiteKind {
    /// The primitives that mean something here, with the parameters exploration uses.
    pub fn meaningful(&self) -> Vec<Fault> {
        self.each_meaningful().collect()
    }

    /// [`SiteKind::meaningful`] without building a vector.
    pub(crate) fn each_meaningful(&self) -> impl Iterator<Item = Fault> {
        let some: [Option<Fault>; 6] = match *self {
            SiteKind::Transfer { len } => [
                Some(Fault::Stall),
                Some(Fault::Timeout),
                (len > 0).then_some(Fault::Short(len / 2)),
                Some(Fault::Disconnect),
                Some(Fault::Delay(1_000_000)),
                (len > 0).then_some(Fault::Corrupt {
                    offset: 0,
                    xor: 0xff,
                }),
            ],
            SiteKind::Transition => [
                Some(Fault::Stall),
                Some(Fault::Disconnect),
                Some(Fault::Delay(1_000_000)),
                None,
                None,
                None,
            ],
        };
        some.into_iter().flatten()
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
                    format!("{e}; expected \"stall\", \"timeout\", \"disconnect\", {{\"short\":n}}, {{\"delay_ns\":n}} or {{\"corrupt\":{{\"offset\":o,\"xor\":x}}}}"),
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

#[cfg(test)]
mod tests {
    use super::*;

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
        assert_eq!(
            SiteKind::Transfer { len: 4 }.meaningful(),
            vec![
                Fault::Stall,
                Fault::Timeout,
                Fault::Short(2),
                Fault::Disconnect,
                Fault::Delay(1_000_000),
                corrupt
            ]
        );
        assert_eq!(
            SiteKind::Transfer { len: 0 }.meaningful(),
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
        let t = SiteKind::Transfer { len: 4 };
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
                .candidates(&SiteKind::Transfer { len: 0 })
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
