//! A guided sweep's corpus ([`Corpus`]): the runs that reached something new, kept to be
//! mutated, what a guided run is ([`Input`]: a fresh seed or a mutant of an entry), and how an
//! entry's events are cut into units a mutation moves. Saved and reloaded between sweeps
//! (`CALAMETRA_SWEEP_CORPUS`). What a sweep groups and writes (the tally, the summary) is the
//! parent module's; nothing here reads the wall clock or spawns a thread.

use super::{parse_versioned, pretty, VERSION};
use rand_core::RngCore;
use serde::{Deserialize, Serialize};
use std::path::Path;

/// A guided sweep's corpus: runs that reached something new (see [`Corpus::absorb`]), kept to
/// be mutated. Saved and reloaded between sweeps (`CALAMETRA_SWEEP_CORPUS=<dir>`, one file a
/// scenario).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Corpus {
    /// Always [`CORPUS_FORMAT`].
    pub format: String,
    /// Always [`VERSION`].
    pub version: u64,
    /// The scenario path.
    pub scenario: String,
    /// The runs kept, in the order they were kept.
    pub entries: Vec<Entry>,
    /// Every feature some run reached (marks, faults by site and primitive, outcomes, pairs of
    /// consecutive transitions, end states).
    pub seen: std::collections::BTreeSet<String>,
    /// The externals seen fired (names), which mutations may add.
    pub externals: Vec<String>,
}

/// The format tag of a corpus file.
pub const CORPUS_FORMAT: &str = "calametra.corpus";

/// One run of a corpus.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry {
    /// Its events (anchored), replayed to make it again.
    pub events: Vec<crate::choices::Event>,
    /// The fault sites it crossed (`ctrl.clear_halt#1`), where a mutation may add a fault.
    pub sites: Vec<String>,
    /// Those of `sites` that are OUT transfers (the driver's data to the device), where a
    /// mutation adds no primitive meaningful at IN payloads only (`corrupt`) and the others
    /// no primitive meaningful at OUT payloads only (`garble`). A corpus written before it was
    /// kept has none: every site counts as not OUT.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outs: Vec<String>,
    /// The outcomes it reached (`ctrl.clear_halt stall`), which a mutation may anchor to.
    pub outcomes: Vec<String>,
    /// Its scheduling steps.
    pub steps: u64,
    /// The features it was the first to reach.
    pub new: Vec<String>,
}

/// What a guided sweep's run is: a fresh seed (the sweep's sequence, as an unguided one) or
/// a mutant of a corpus entry's events.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Input {
    /// The seed of the `fresh`th fresh run.
    Fresh(u64),
    /// Events to replay, mutated from entry `parent`.
    Mutant {
        /// The corpus entry mutated.
        parent: usize,
        /// The events.
        events: Vec<crate::choices::Event>,
    },
}

/// Runs a guided sweep makes between two updates of its corpus: the corpus a run is mutated
/// from is the one at the start of its round, so what a run is does not depend on which
/// thread finished first.
pub const ROUND: u64 = 32;

impl Corpus {
    /// An empty corpus of `scenario`.
    pub fn new(scenario: &str) -> Corpus {
        Corpus {
            format: CORPUS_FORMAT.into(),
            version: VERSION,
            scenario: scenario.into(),
            ..Corpus::default()
        }
    }

    /// Whether run `j` (this partition's) is a mutant: three runs in four, once the corpus
    /// holds something (the fourth a fresh seed). Measured on the flash logger (a stalled
    /// write, a failed CLEAR_HALT and a replug; `tests/tests/guided_default.rs`, base seeds
    /// 1..=10 within 2,000 runs): every other run found it for 9 seeds (mean 748 runs to
    /// find), three in four for 10 (mean 514, at most 1,024).
    pub fn mutates(&self, j: u64) -> bool {
        !self.entries.is_empty() && j % 4 != 0
    }

    /// The mutant of run `index` (its place in the sweep's whole sequence, so partitions
    /// differ): a pure function of the corpus and the index. One to three mutations of a
    /// corpus entry's events: drop an event, add a fault (at a site the entry crossed, or
    /// anchored to an outcome it reached), add an external (anchored to an outcome), move an
    /// external or a pick, change a draw, add a pick.
    pub fn mutant(&self, base: u64, index: u64, kinds: &[crate::fault::FaultKind]) -> Input {
        use crate::choices::{below, derive_seed, stream_named, Event};
        let mut rng = stream_named(derive_seed(base, &self.scenario, index), "guide");
        // Half the time one of the eight newest entries (a chain of discoveries goes on from
        // its last step), else any.
        let n = self.entries.len().max(1) as u64;
        let parent = if below(&mut rng, 2) == 0 {
            (n - 1 - below(&mut rng, n.min(8))) as usize
        } else {
            below(&mut rng, n) as usize
        };
        let e = &self.entries[parent];
        // The primitives the entry already injects come first (half the time).
        let injected: Vec<crate::fault::FaultKind> = e
            .events
            .iter()
            .filter_map(|x| match x {
                Event::Fault { fault, .. } => Some(fault.kind()),
                _ => None,
            })
            .filter(|k| kinds.contains(k))
            .collect();
        let mut units = units_of(&e.events);
        let ops = 1 + below(&mut rng, 3);
        for _ in 0..ops {
            // Weights: drop 2, add a fault 3, add an external 2, move 2, change a draw 1, add a
            // pick 1.
            let op = below(&mut rng, 11);
            let positional: Vec<usize> = (0..units.len())
                .filter(|&i| {
                    units[i].iter().any(|x| {
                        matches!(
                            x,
                            Event::Fault { .. }
                                | Event::External { .. }
                                | Event::Schedule { .. }
                                | Event::Client { .. }
                                | Event::Data { .. }
                        )
                    })
                })
                .collect();
            match op {
                0..=1 if !positional.is_empty() => {
                    let i = positional[below(&mut rng, positional.len() as u64) as usize];
                    units.remove(i);
                }
                2..=4 if !e.sites.is_empty() && !kinds.is_empty() => {
                    let kind = if !injected.is_empty() && below(&mut rng, 2) == 0 {
                        injected[below(&mut rng, injected.len() as u64) as usize]
                    } else {
                        kinds[below(&mut rng, kinds.len() as u64) as usize]
                    };
                    let mut unit: Vec<Event> = Vec::new();
                    let site = if !e.outcomes.is_empty() && below(&mut rng, 2) == 0 {
                        // The first or second crossing of a request after an outcome: a fault
                        // where something already went wrong (the site one of that request).
                        let k = &e.outcomes[below(&mut rng, e.outcomes.len() as u64) as usize];
                        let mut bases: Vec<&str> = e
                            .sites
                            .iter()
                            .map(|x| crate::choices::site_base(x))
                            .collect();
                        bases.sort();
                        bases.dedup();
                        let b = bases[below(&mut rng, bases.len() as u64) as usize];
                        unit.push(Event::Anchor {
                            after: k.as_str().into(),
                            nth: 1,
                            offset: 1 + below(&mut rng, 2),
                        });
                        e.sites
                            .iter()
                            .find(|x| crate::choices::site_base(x) == b)
                            .cloned()
                            .unwrap_or_default()
                    } else {
                        e.sites[below(&mut rng, e.sites.len() as u64) as usize].clone()
                    };
                    // Not where the primitive means nothing: `corrupt` at an OUT payload,
                    // `garble` at another (the draws above are made all the same, so the
                    // mutant's other operations stay where they were).
                    let dir = if e.outs.contains(&site) {
                        crate::fault::Dir::Out
                    } else {
                        crate::fault::Dir::In
                    };
                    if !kind.at_payload(dir) {
                        continue;
                    }
                    let fault = crate::fault::Fault::mutant(kind, dir);
                    unit.push(Event::Fault { site, fault });
                    units.push(unit);
                }
                5..=6 if !self.externals.is_empty() => {
                    let name = self.externals
                        [below(&mut rng, self.externals.len() as u64) as usize]
                        .clone();
                    let point = below(&mut rng, e.steps.max(1));
                    let mut unit = Vec::new();
                    if !e.outcomes.is_empty() {
                        let k = &e.outcomes[below(&mut rng, e.outcomes.len() as u64) as usize];
                        unit.push(Event::Anchor {
                            after: k.as_str().into(),
                            nth: 1,
                            offset: below(&mut rng, 4),
                        });
                    }
                    unit.push(Event::External { name, point });
                    units.push(unit);
                }
                7..=8 => {
                    let movable: Vec<usize> = (0..units.len())
                        .filter(|&i| {
                            units[i].iter().any(|x| {
                                matches!(x, Event::External { .. } | Event::Schedule { .. })
                            })
                        })
                        .collect();
                    if movable.is_empty() {
                        continue;
                    }
                    let i = movable[below(&mut rng, movable.len() as u64) as usize];
                    let delta = below(&mut rng, 7) as i64 - 3;
                    let shift = |v: u64| v.saturating_add_signed(delta);
                    for x in &mut units[i] {
                        match x {
                            Event::Anchor { offset, .. } => *offset = shift(*offset),
                            Event::External { point, .. } | Event::Schedule { point, .. } => {
                                *point = shift(*point)
                            }
                            _ => {}
                        }
                    }
                }
                9 => {
                    let draws: Vec<usize> = (0..units.len())
                        .filter(|&i| {
                            units[i].iter().any(|x| {
                                matches!(
                                    x,
                                    Event::Schedule { .. }
                                        | Event::Client { .. }
                                        | Event::Data { .. }
                                )
                            })
                        })
                        .collect();
                    if draws.is_empty() {
                        continue;
                    }
                    let i = draws[below(&mut rng, draws.len() as u64) as usize];
                    let r = rng.next_u64();
                    for x in &mut units[i] {
                        match x {
                            Event::Schedule { pick, .. } => *pick = 1 + (r % 3) as u32,
                            Event::Client { value, .. } | Event::Data { value, .. } => {
                                *value = r % value.saturating_mul(2).saturating_add(2)
                            }
                            _ => {}
                        }
                    }
                }
                _ => {
                    let point = below(&mut rng, e.steps.max(1));
                    units.push(vec![Event::Schedule {
                        point,
                        pick: 1 + below(&mut rng, 2) as u32,
                        what: None,
                    }]);
                }
            }
        }
        Input::Mutant {
            parent,
            events: units.into_iter().flatten().collect(),
        }
    }

    /// Takes a round's runs in their order: a run that reached a feature no run reached before
    /// is kept (with the sites it crossed, its outcomes and its steps); the externals it fired
    /// are noted. Returns how many were kept.
    pub fn absorb(&mut self, runs: Vec<Finished>) -> usize {
        let mut kept = 0;
        for r in runs {
            for e in &r.events {
                if let crate::choices::Event::External { name, .. } = e {
                    if !self.externals.contains(name) {
                        self.externals.push(name.clone());
                    }
                }
            }
            let new: Vec<String> = r
                .features
                .iter()
                .filter(|f| !self.seen.contains(*f))
                .cloned()
                .collect();
            if new.is_empty() {
                continue;
            }
            self.seen.extend(new.iter().cloned());
            let outcomes = r
                .features
                .iter()
                .filter_map(|f| f.strip_prefix("outcome "))
                .map(str::to_string)
                .collect();
            self.entries.push(Entry {
                events: r.events,
                sites: r.sites,
                outs: r.outs,
                outcomes,
                steps: r.steps,
                new,
            });
            kept += 1;
        }
        kept
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        pretty(self)
    }

    /// Parses a corpus file; errors name the file and field.
    pub fn parse(path: &Path, text: &str) -> Result<Corpus, crate::Error> {
        parse_versioned(
            path,
            text,
            CORPUS_FORMAT,
            "a corpus written by a guided sweep",
        )
    }
}

/// What a guided sweep keeps of a finished run.
#[derive(Clone, Debug, Default)]
pub struct Finished {
    /// Its events.
    pub events: Vec<crate::choices::Event>,
    /// Its features (`RunResult::coverage`).
    pub features: std::collections::BTreeSet<String>,
    /// The fault sites it crossed.
    pub sites: Vec<String>,
    /// Those of `sites` that are OUT transfers ([`Entry::outs`]).
    pub outs: Vec<String>,
    /// Its steps.
    pub steps: u64,
}

/// The units of an event list: each event with the anchor before it.
fn units_of(events: &[crate::choices::Event]) -> Vec<Vec<crate::choices::Event>> {
    let mut out = Vec::new();
    let mut open = Vec::new();
    for e in events {
        let anchor = matches!(e, crate::choices::Event::Anchor { .. });
        open.push(e.clone());
        if !anchor {
            out.push(std::mem::take(&mut open));
        }
    }
    if !open.is_empty() {
        out.push(open);
    }
    out
}
