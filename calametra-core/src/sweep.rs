//! Sweeps: seeded runs of a scenario for a budget, spread over cores and machines.
//!
//! This module holds what a sweep decides and keeps, as pure functions: which seeds a
//! partition draws ([`Partition`], disjoint shares of one sequence of seeds), how failures are
//! grouped (by signature, the shortest run kept, the smaller seed on ties: [`Tally`]), and the
//! summary a partition writes and the `calametra` tool merges ([`Summary`], [`merge`]). The
//! driver that spends the budget on threads lives in the facade (`calametra::sweep`); nothing
//! here reads the wall clock or spawns a thread.

use crate::choices::derive_seed;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::fmt;
use std::path::Path;

mod corpus;
mod known;
pub use corpus::*;
pub use known::{Known, KnownFinding};

/// The format tag of a sweep summary.
pub const FORMAT: &str = "calametra.sweep";
/// The summary version this build reads and writes.
pub const VERSION: u64 = 1;

/// Which share of a sweep's seeds this process draws: the `k`th of `n` (1-based), so `n`
/// machines with `k = 1..=n` draw disjoint shares whose union is an unpartitioned sweep's.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Partition {
    /// This share, 1-based.
    pub k: u64,
    /// How many shares.
    pub n: u64,
}

impl Default for Partition {
    fn default() -> Self {
        Partition { k: 1, n: 1 }
    }
}

impl Partition {
    /// The most partitions a sweep is split into: each partition's `j`th run is the sequence's
    /// `j * n + k - 1`th, which must not run out of 64 bits (a partition of 2^64 - 1 shares
    /// drew one seed for almost every run).
    pub const MAX_N: u64 = 1 << 20;

    /// Reads `k/n` (`CALAMETRA_SWEEP_PARTITION=2/4`): decimal digits without a leading zero,
    /// `1 <= k <= n <= MAX_N`.
    pub fn parse(s: &str) -> Result<Partition, String> {
        let bad = || {
            format!(
                "`{s}`: expected k/n with 1 <= k <= n <= {}, e.g. 2/4",
                Partition::MAX_N
            )
        };
        let (k, n) = s.trim().split_once('/').ok_or_else(bad)?;
        let number = |t: &str| -> Result<u64, String> {
            let t = t.trim();
            if t.is_empty() || t.starts_with('0') || !t.bytes().all(|b| b.is_ascii_digit()) {
                return Err(bad());
            }
            t.parse().map_err(|_| bad())
        };
        let (k, n) = (number(k)?, number(n)?);
        if k > n || n > Partition::MAX_N {
            return Err(bad());
        }
        Ok(Partition { k, n })
    }

    /// The index in the sweep's sequence of this share's `j`th run.
    pub fn index(&self, j: u64) -> u64 {
        j.saturating_mul(self.n).saturating_add(self.k - 1)
    }
}

impl fmt::Display for Partition {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.k, self.n)
    }
}

/// The seed of the sweep's `index`th run of `scenario`: the same sequence as the scenario's
/// `seed::` trials (its first `schedules` runs are those trials' seeds), so a sweep extends them.
pub fn seed_at(base: u64, scenario: &str, index: u64) -> u64 {
    derive_seed(base, scenario, index)
}

/// One failure signature a sweep met.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// The kept run's events when it is a guided sweep's mutant (its `seed` then reads
    /// `guided:<index>`): the run is a replay of them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub events_list: Option<Vec<crate::choices::Event>>,
    /// The failure as printed by its kept run.
    pub failure: String,
    /// The kept run's seed (the shortest run; the smaller seed on ties).
    pub seed: String,
    /// Events of the kept run (before minimization).
    pub events: u64,
    /// Runs that failed with this signature.
    pub runs: u64,
    /// Whether it is a model gap.
    #[serde(default)]
    pub model_gap: bool,
}

/// What a sweep of one scenario counted.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    /// Runs made.
    pub runs: u64,
    /// Runs that gave no verdict.
    #[serde(default)]
    pub no_verdict: u64,
    /// Failures by signature.
    pub signatures: BTreeMap<String, Group>,
    /// Coverage marks: how many runs reached each.
    pub marks: BTreeMap<String, u64>,
    /// The marks the scenario declares (so a mark never reached shows).
    #[serde(default)]
    pub declared_marks: Vec<String>,
}

fn seed_value(s: &str) -> u64 {
    s.strip_prefix("0x")
        .and_then(|h| u64::from_str_radix(h, 16).ok())
        .unwrap_or(u64::MAX)
}

impl Tally {
    /// Counts one run: its failure (signature, printed failure, events, model gap) and marks.
    pub fn add(
        &mut self,
        seed: u64,
        failure: Option<(String, String, u64, bool)>,
        marks: impl IntoIterator<Item = String>,
    ) {
        self.runs += 1;
        for m in marks {
            *self.marks.entry(m).or_insert(0) += 1;
        }
        if let Some((sig, text, events, model_gap)) = failure {
            self.add_group(
                sig,
                Group {
                    events_list: None,
                    failure: text,
                    seed: format!("{seed:#x}"),
                    events,
                    runs: 1,
                    model_gap,
                },
            );
        }
    }

    /// Counts one mutant run of a guided sweep (`index` its place in the sweep), which failed
    /// with (signature, printed failure, model gap) or passed, its events and marks.
    pub fn add_mutant(
        &mut self,
        index: u64,
        failure: Option<(String, String, bool)>,
        events: &[crate::choices::Event],
        marks: impl IntoIterator<Item = String>,
    ) {
        self.runs += 1;
        for m in marks {
            *self.marks.entry(m).or_insert(0) += 1;
        }
        if let Some((sig, text, model_gap)) = failure {
            self.add_group(
                sig,
                Group {
                    events_list: Some(events.to_vec()),
                    failure: text,
                    seed: format!("guided:{index}"),
                    events: crate::choices::count_events(events) as u64,
                    runs: 1,
                    model_gap,
                },
            );
        }
    }

    fn add_group(&mut self, sig: String, g: Group) {
        match self.signatures.get_mut(&sig) {
            None => {
                self.signatures.insert(sig, g);
            }
            Some(e) => {
                let runs = e.runs.saturating_add(g.runs);
                if (g.events, seed_value(&g.seed)) < (e.events, seed_value(&e.seed)) {
                    *e = g;
                }
                e.runs = runs;
            }
        }
    }

    /// Adds another tally of the same scenario (another thread's or partition's).
    /// Counts saturate (a hand-edited summary near `u64::MAX` must not panic a merge; [`merge`]
    /// refuses such totals).
    pub fn absorb(&mut self, other: Tally) {
        self.runs = self.runs.saturating_add(other.runs);
        self.no_verdict = self.no_verdict.saturating_add(other.no_verdict);
        for (m, n) in other.marks {
            let e = self.marks.entry(m).or_insert(0);
            *e = e.saturating_add(n);
        }
        for (sig, g) in other.signatures {
            self.add_group(sig, g);
        }
        for m in other.declared_marks {
            if !self.declared_marks.contains(&m) {
                self.declared_marks.push(m);
            }
        }
        self.declared_marks.sort();
    }

    /// Declared marks no run reached.
    pub fn never_reached(&self) -> Vec<&str> {
        self.declared_marks
            .iter()
            .filter(|m| !self.marks.contains_key(*m))
            .map(String::as_str)
            .collect()
    }
}

/// One scenario's part of a summary.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScenarioSweep {
    /// The scenario path.
    pub scenario: String,
    /// Its counts.
    pub tally: Tally,
    /// The signatures met that a known findings file lists ([`Known`]), each with its account
    /// of whose bug it is. Absent when none.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub known: BTreeMap<String, String>,
    /// The invariant the scenario expects to break (`expect = "..."`), whose signatures are its
    /// known bug. Absent when it has none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expect: Option<String>,
}

/// What a sweep (one partition of it) writes: `target/calametra/sweeps/*.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Summary {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`VERSION`].
    pub version: u64,
    /// The Cargo package.
    pub package: String,
    /// The test target.
    pub target: String,
    /// The base seed (`CALAMETRA_SEED`).
    pub base_seed: String,
    /// The partitions this summary covers (one, or several once merged), as `k/n`.
    pub partitions: Vec<String>,
    /// The budget as given (`10m`, `2000`).
    pub budget: String,
    /// Wall-clock seconds spent (host time, for people; never compared).
    pub wall_s: f64,
    /// Worker threads (summed over merged partitions).
    pub threads: u64,
    /// Per scenario, sorted by path.
    pub scenarios: Vec<ScenarioSweep>,
    /// The sweep was stopped by a signal (SIGTERM, SIGINT) before its budget was spent: a
    /// partial sweep, whose finds so far were saved. Absent when false (a whole sweep's summary
    /// is as before).
    #[serde(default, skip_serializing_if = "is_false")]
    pub interrupted: bool,
}

impl ScenarioSweep {
    /// Whether `g` is the bug the scenario's `expect` names (its invariant broke).
    pub fn expects(&self, g: &Group) -> bool {
        self.expect
            .as_ref()
            .is_some_and(|inv| g.failure.starts_with(&format!("invariant `{inv}` broke")))
    }
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Summary {
    /// Total runs.
    pub fn runs(&self) -> u64 {
        self.scenarios.iter().map(|s| s.tally.runs).sum()
    }

    /// Pretty JSON with a trailing newline.
    pub fn to_json(&self) -> String {
        pretty(self)
    }

    /// Parses a summary; errors name the file and field.
    pub fn parse(path: &Path, text: &str) -> Result<Summary, crate::Error> {
        parse_versioned(path, text, FORMAT, "a summary written by a Calametra sweep")
    }

    /// The closing report: runs, runs/s, signatures, marks reached and never reached, budget.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let runs = self.runs();
        let rate = if self.wall_s > 0.0 {
            runs as f64 / self.wall_s
        } else {
            0.0
        };
        s.push_str(&format!(
            "calametra sweep of {} --test {} (partition {}; base seed {}): {} in {:.1}s, {rate:.0} runs/s on {}; budget {}\n",
            self.package,
            self.target,
            self.partitions.join(", "),
            self.base_seed,
            count(runs, "run"),
            self.wall_s,
            count(self.threads, "thread"),
            self.budget,
        ));
        if self.interrupted {
            s.push_str(
                "  interrupted: stopped by a signal before the budget was spent (a partial sweep; its finds so far are saved)\n",
            );
        }
        for sc in &self.scenarios {
            let t = &sc.tally;
            s.push_str(&format!(
                "  {}: {}, {}{}\n",
                sc.scenario,
                count(t.runs, "run"),
                count(t.signatures.len() as u64, "failure signature"),
                if t.no_verdict > 0 {
                    format!(", {} without a verdict", t.no_verdict)
                } else {
                    String::new()
                }
            ));
            for (sig, g) in &t.signatures {
                let kept = match g.events_list {
                    Some(_) => format!("the mutant {}", g.seed),
                    None => format!("seed::{}", g.seed),
                };
                s.push_str(&format!(
                    "    {}{sig}\n      {}; shortest: {kept} ({}): {}\n",
                    if g.model_gap { "[model gap] " } else { "" },
                    count(g.runs, "run"),
                    count(g.events, "event"),
                    g.failure
                ));
                if let Some(account) = sc.known.get(sig) {
                    s.push_str(&format!("      known: {account}\n"));
                } else if sc.expects(g) {
                    s.push_str("      expected: the bug the scenario's `expect` names\n");
                }
            }
            if !t.marks.is_empty() {
                let marks: Vec<String> = t.marks.iter().map(|(m, n)| format!("{m} {n}")).collect();
                s.push_str(&format!("    marks reached (runs): {}\n", marks.join(", ")));
            }
            if let Some(inv) = &sc.expect {
                if !t.signatures.values().any(|g| sc.expects(g)) {
                    s.push_str(&format!(
                        "    expected invariant `{inv}` not broken in this sweep (the scenario's `finds::` trial pins it)\n"
                    ));
                }
            }
            let never = t.never_reached();
            if !never.is_empty() {
                s.push_str(&format!("    marks never reached: {}\n", never.join(", ")));
            }
        }
        s
    }
}

/// `n` and a noun in correct English: `1 run`, `3 runs` (every count the core prints).
pub(crate) fn count(n: u64, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `v` as pretty JSON with a trailing newline (the sweep's files are read by people too).
fn pretty(v: &impl Serialize) -> String {
    let mut s = serde_json::to_string_pretty(v).unwrap_or_default();
    s.push('\n');
    s
}

/// Reads one of the sweep's versioned JSON files: its `format` must be `format` (`what` says
/// what writes it) and its `version` [`VERSION`]; errors name the file and field.
fn parse_versioned<T: serde::de::DeserializeOwned>(
    path: &Path,
    text: &str,
    format: &str,
    what: &str,
) -> Result<T, crate::Error> {
    let err = |field: &str, message: String| crate::Error::File {
        path: path.to_path_buf(),
        field: field.into(),
        message,
    };
    let v: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| err("(document)", format!("not valid JSON: {e}")))?;
    if v.get("format").and_then(|f| f.as_str()) != Some(format) {
        return Err(err("format", format!("expected \"{format}\" ({what})")));
    }
    if v.get("version").and_then(|f| f.as_u64()) != Some(VERSION) {
        return Err(err("version", format!("expected {VERSION}")));
    }
    serde_json::from_value(v).map_err(|e| err("(document)", e.to_string()))
}

/// What a summary's partitions and scenarios must be before it is merged: each partition a
/// `k/n` as [`Partition::parse`] reads it, written as it writes it, at least one, none twice,
/// all with the same `n` (`n` carries it from one summary to the next); each scenario listed
/// once. [`merge`] checks every part with it; a caller that knows the files' names checks each
/// first, to name the file.
pub fn check_mergeable(s: &Summary, n: &mut Option<u64>) -> Result<(), String> {
    if s.partitions.is_empty() {
        return Err("field `partitions`: empty; expected the k/n this summary covers".into());
    }
    for (i, text) in s.partitions.iter().enumerate() {
        if s.partitions[..i].contains(text) {
            return Err(format!("field `partitions`: `{text}` is listed twice"));
        }
        let p = Partition::parse(text).map_err(|e| format!("field `partitions`: {e}"))?;
        if p.to_string() != *text {
            return Err(format!(
                "field `partitions`: `{text}` is not written as a sweep writes it (`{p}`)"
            ));
        }
        match n {
            Some(m) if *m != p.n => {
                return Err(format!(
                    "field `partitions`: `{text}` is a share of {} partitions, the others of {m}; only shares of one split merge",
                    p.n
                ))
            }
            _ => *n = Some(p.n),
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for sc in &s.scenarios {
        if !seen.insert(sc.scenario.as_str()) {
            return Err(format!(
                "field `scenarios`: `{}` is listed twice; a summary lists each scenario once",
                sc.scenario
            ));
        }
    }
    Ok(())
}

/// Merges partitions' summaries of one test target and base seed into one: shares of one
/// split (`k/n` with the same `n`), each once.
pub fn merge(parts: Vec<Summary>) -> Result<Summary, String> {
    let mut n = None;
    for p in &parts {
        check_mergeable(p, &mut n)?;
    }
    let mut it = parts.into_iter();
    let mut out = it.next().ok_or("no summaries to merge")?;
    for p in it {
        for (field, a, b) in [
            ("package", &out.package, &p.package),
            ("target", &out.target, &p.target),
            ("base_seed", &out.base_seed, &p.base_seed),
        ] {
            if a != b {
                return Err(format!(
                    "field `{field}`: cannot merge summaries of `{a}` and `{b}`"
                ));
            }
        }
        for k in &p.partitions {
            if out.partitions.contains(k) {
                return Err(format!(
                    "partition {k} appears twice; each partition's summary is merged once"
                ));
            }
        }
        out.partitions.extend(p.partitions);
        out.interrupted |= p.interrupted;
        out.wall_s = out.wall_s.max(p.wall_s);
        out.threads = out
            .threads
            .checked_add(p.threads)
            .ok_or("field `threads`: the total does not fit in 64 bits")?;
        for sc in &p.scenarios {
            if let Some(s) = out.scenarios.iter().find(|s| s.scenario == sc.scenario) {
                if s.tally.runs.checked_add(sc.tally.runs).is_none() {
                    return Err(format!(
                        "field `scenarios`: `{}`'s runs total does not fit in 64 bits",
                        sc.scenario
                    ));
                }
            }
        }
        for sc in p.scenarios {
            match out.scenarios.iter_mut().find(|s| s.scenario == sc.scenario) {
                Some(s) => {
                    s.tally.absorb(sc.tally);
                    s.known.extend(sc.known);
                }
                None => out.scenarios.push(sc),
            }
        }
    }
    out.partitions.sort();
    out.scenarios.sort_by(|a, b| a.scenario.cmp(&b.scenario));
    Ok(out)
}

/// A sweep's budget: wall time, or a number of runs per scenario (what tests and CI pin).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Budget {
    /// Run until this much wall time is spent (over all scenarios of the binary).
    Time(std::time::Duration),
    /// This many runs of each scenario (in this partition).
    Runs(u64),
}

impl Budget {
    /// Reads `10m`, `90s`, `1h`, `500ms` (time) or `20000` (runs per scenario).
    pub fn parse(s: &str) -> Result<Budget, String> {
        let t = s.trim();
        let bad = || {
            format!("`{s}`: expected a duration (`90s`, `10m`, `1h`, `500ms`) or a number of runs per scenario (`20000`)")
        };
        if let Ok(n) = t.parse::<u64>() {
            if n == 0 {
                return Err(bad());
            }
            return Ok(Budget::Runs(n));
        }
        let d = parse_duration(t).map_err(|_| bad())?;
        // A week is far past any CI job; a larger figure is a typo.
        if d.is_zero() || d > std::time::Duration::from_secs(7 * 24 * 3600) {
            return Err(bad());
        }
        Ok(Budget::Time(d))
    }
}

/// The one duration grammar (a sweep's budget, the attribute's `virtual_timeout`): a number,
/// decimals allowed, then `ns`, `us`, `ms`, `s`, `m` or `h` (`250us`, `1.5ms`, `90s`, `10m`,
/// `6h`). Errors say what was expected.
pub fn parse_duration(s: &str) -> Result<std::time::Duration, String> {
    let t = s.trim();
    let bad = || {
        format!("`{s}`: expected a duration: a number and ns, us, ms, s, m or h (`500ms`, `90s`, `10m`, `6h`)")
    };
    let (num, scale) = [
        ("ns", 1.0),
        ("us", 1e3),
        ("ms", 1e6),
        ("s", 1e9),
        ("m", 60e9),
        ("h", 3600e9),
    ]
    .iter()
    .find_map(|(suf, sc)| t.strip_suffix(suf).map(|n| (n.trim(), *sc)))
    .ok_or_else(bad)?;
    if num.is_empty() || !num.bytes().all(|b| b.is_ascii_digit() || b == b'.') {
        return Err(bad());
    }
    let n: f64 = num.parse().map_err(|_| bad())?;
    let ns = n * scale;
    if !ns.is_finite() || ns < 0.0 || ns > u64::MAX as f64 {
        return Err(bad());
    }
    Ok(std::time::Duration::from_nanos(ns.round() as u64))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_corpus_keeps_runs_that_reach_something_new_and_mutants_are_pure() {
        use crate::choices::Event;
        use crate::fault::{Fault, FaultKind};
        let run = |features: &[&str], events: Vec<Event>| Finished {
            events,
            features: features.iter().map(|f| f.to_string()).collect(),
            sites: vec!["ctrl.clear_halt#1".into(), "bulk.out#3".into()],
            outs: vec!["bulk.out#3".into()],
            steps: 40,
        };
        let mut c = Corpus::new("p::s");
        assert!(!c.mutates(1), "nothing to mutate yet");
        let ext = Event::External {
            name: "replug".into(),
            point: 9,
        };
        let kept = c.absorb(vec![
            run(&["outcome bulk.out stall"], vec![ext.clone()]),
            run(&["outcome bulk.out stall"], vec![]),
            run(&["outcome bulk.out stall", "mark m"], vec![]),
        ]);
        assert_eq!(kept, 2, "the second reached nothing new");
        assert_eq!(c.entries[1].new, vec!["mark m".to_string()]);
        assert_eq!(c.entries[0].outcomes, vec!["bulk.out stall".to_string()]);
        assert_eq!(c.externals, vec!["replug".to_string()]);
        assert!(c.mutates(1) && c.mutates(2) && c.mutates(3) && !c.mutates(4));
        let kinds = [FaultKind::Stall, FaultKind::Delay];
        let mut distinct = std::collections::BTreeSet::new();
        for i in 0..200 {
            let a = c.mutant(5, i, &kinds);
            assert_eq!(
                a,
                c.mutant(5, i, &kinds),
                "a pure function of corpus and index"
            );
            if let Input::Mutant { events, .. } = a {
                for e in &events {
                    if let Event::Fault { fault, .. } = e {
                        assert!(matches!(fault, Fault::Stall | Fault::Delay(_)));
                    }
                }
                distinct.insert(format!("{events:?}"));
            }
        }
        assert!(distinct.len() > 50, "{}", distinct.len());
        // A primitive restricted to one payload direction is added only there: `corrupt` at
        // the IN side (not `bulk.out#3`), `garble` at the OUT side (`bulk.out#3` alone).
        let (mut corrupts, mut garbles) = (0, 0);
        for i in 0..200 {
            if let Input::Mutant { events, .. } =
                c.mutant(5, i, &[FaultKind::Corrupt, FaultKind::Garble])
            {
                for e in &events {
                    match e {
                        Event::Fault {
                            site,
                            fault: Fault::Corrupt { .. },
                        } => {
                            assert_ne!(site, "bulk.out#3");
                            corrupts += 1;
                        }
                        Event::Fault {
                            site,
                            fault: Fault::Garble { .. },
                        } => {
                            assert_eq!(site, "bulk.out#3");
                            garbles += 1;
                        }
                        _ => {}
                    }
                }
            }
        }
        assert!(corrupts > 0 && garbles > 0, "{corrupts} {garbles}");
        let back = Corpus::parse(Path::new("c.json"), &c.to_json()).unwrap();
        assert_eq!(back, c);
    }

    #[test]
    fn mutants_of_extreme_draws_and_points_never_overflow() {
        // A corpus entry (from a file, or a genuine draw of 2^63 or more) at the edges of u64:
        // every mutation saturates instead of panicking on an add overflow (issue 41).
        use crate::choices::Event;
        let mut c = Corpus::new("p::s");
        c.absorb(vec![Finished {
            events: vec![
                Event::Data {
                    value: u64::MAX,
                    stream: None,
                },
                Event::External {
                    name: "replug".into(),
                    point: u64::MAX,
                },
                Event::Schedule {
                    point: u64::MAX,
                    pick: 1,
                    what: None,
                },
                Event::Data {
                    value: 1 << 63,
                    stream: None,
                },
            ],
            features: ["mark m".to_string()].into_iter().collect(),
            sites: vec![],
            outs: vec![],
            steps: u64::MAX,
        }]);
        let kinds = [crate::fault::FaultKind::Stall];
        for i in 0..2000 {
            let _ = c.mutant(1, i, &kinds);
        }
    }

    #[test]
    fn partitions_are_disjoint_and_cover_the_sequence() {
        let n = 3;
        let mut seen = std::collections::BTreeSet::new();
        for k in 1..=n {
            let p = Partition { k, n };
            for j in 0..10 {
                assert!(seen.insert(p.index(j)));
            }
        }
        assert_eq!(seen, (0..30).collect());
        assert_eq!(Partition::parse("2/4").unwrap(), Partition { k: 2, n: 4 });
        for bad in [
            "",
            "0/4",
            "5/4",
            "1",
            "a/b",
            "1/0",
            "01/2",
            "+1/2",
            "1/18446744073709551615",
            "1/1048577",
        ] {
            assert!(Partition::parse(bad).is_err(), "{bad}");
        }
        // The largest split keeps its shares' runs apart within 64 bits.
        let p = Partition::parse("1048576/1048576").unwrap();
        assert!(p.index(1 << 40) > p.index((1 << 40) - 1));
    }

    #[test]
    fn budgets_read_durations_and_run_counts() {
        use std::time::Duration;
        assert_eq!(
            Budget::parse("10m"),
            Ok(Budget::Time(Duration::from_secs(600)))
        );
        assert_eq!(
            Budget::parse("500ms"),
            Ok(Budget::Time(Duration::from_millis(500)))
        );
        assert_eq!(Budget::parse("2000"), Ok(Budget::Runs(2000)));
        for bad in [
            "",
            "0",
            "10x",
            "-1m",
            "99999999999999999999",
            "100000h",
            "0s",
        ] {
            assert!(Budget::parse(bad).is_err(), "{bad}");
        }
        // One grammar with the attribute's virtual_timeout: decimals and every unit.
        assert_eq!(parse_duration("6h"), Ok(Duration::from_secs(6 * 3600)));
        assert_eq!(parse_duration("1.5ms"), Ok(Duration::from_micros(1500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("100ns"), Ok(Duration::from_nanos(100)));
        assert_eq!(
            Budget::parse("1.5s"),
            Ok(Budget::Time(Duration::from_millis(1500)))
        );
        for bad in ["h", "1e3s", "+1s", "1.5", "inf s", "NaNs"] {
            assert!(parse_duration(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn the_shortest_run_is_kept_and_the_smaller_seed_on_ties() {
        let f = |n: u64| Some(("sig".to_string(), "boom".to_string(), n, false));
        let mut a = Tally::default();
        a.add(0x30, f(5), []);
        a.add(0x20, f(3), ["m".to_string()]);
        let mut b = Tally::default();
        b.add(0x10, f(3), ["m".to_string()]);
        b.add(0x05, f(4), []);
        a.absorb(b);
        let g = &a.signatures["sig"];
        assert_eq!((g.seed.as_str(), g.events, g.runs), ("0x10", 3, 4));
        assert_eq!(a.marks["m"], 2);
        assert_eq!(a.runs, 4);
    }

    #[test]
    fn merging_refuses_other_targets_and_repeated_partitions() {
        let s = |k: u64| Summary {
            format: FORMAT.into(),
            version: VERSION,
            package: "p".into(),
            target: "t".into(),
            base_seed: "0x0".into(),
            partitions: vec![format!("{k}/2")],
            budget: "10".into(),
            wall_s: 1.0,
            threads: 2,
            scenarios: vec![],
            interrupted: false,
        };
        assert!(merge(vec![s(1), s(2)]).is_ok());
        assert!(merge(vec![s(1), s(1)]).is_err());
        // Only shares of one split, each written as a sweep writes it, merge (issue 41).
        let with = |parts: &[&str]| {
            let mut x = s(1);
            x.partitions = parts.iter().map(|p| p.to_string()).collect();
            x
        };
        for (a, b, says) in [
            (&["1/2"][..], &["2/3"][..], "only shares of one split merge"),
            (&["01/2"], &["2/2"], "expected k/n"),
            (&["banana"], &["2/2"], "expected k/n"),
            (&[], &["2/2"], "empty"),
            (&["1/2", "1/2"], &["2/2"], "listed twice"),
        ] {
            let e = merge(vec![with(a), with(b)]).unwrap_err();
            assert!(e.contains(says), "{a:?} + {b:?}: {e}");
        }
        let mut twice = s(1);
        twice.scenarios = vec![
            ScenarioSweep {
                scenario: "a".into(),
                tally: Tally::default(),
                known: BTreeMap::new(),
                expect: None,
            };
            2
        ];
        let e = merge(vec![twice, s(2)]).unwrap_err();
        assert!(e.contains("`a` is listed twice"), "{e}");
        // Totals past 64 bits are refused, never a panic.
        let mut huge = s(1);
        huge.threads = u64::MAX;
        assert!(merge(vec![huge, s(2)]).unwrap_err().contains("threads"));
        let mut a = s(1);
        let mut b = s(2);
        for (x, runs) in [(&mut a, u64::MAX - 1), (&mut b, 5)] {
            let mut t = Tally::default();
            t.runs = runs;
            x.scenarios = vec![ScenarioSweep {
                scenario: "a".into(),
                tally: t,
                known: BTreeMap::new(),
                expect: None,
            }];
        }
        assert!(merge(vec![a, b]).unwrap_err().contains("runs total"));
        let mut other = s(2);
        other.target = "u".into();
        assert!(merge(vec![s(1), other]).unwrap_err().contains("target"));
    }

    #[test]
    fn the_report_says_which_signatures_are_known_or_expected_and_an_expected_bug_not_reached() {
        let sig = |inv: &str| {
            (
                format!("invariant `{inv}` broke"),
                format!("invariant `{inv}` broke: 1"),
                3,
                false,
            )
        };
        let mut t = Tally::default();
        t.add(1, Some(sig("a")), []);
        t.add(2, Some(sig("b")), []);
        t.add(3, Some(sig("c")), []);
        let sc = |expect: Option<&str>, tally: Tally| ScenarioSweep {
            scenario: "sc".into(),
            tally,
            known: [(
                "invariant `a` broke".to_string(),
                "theirs, issue 9".to_string(),
            )]
            .into(),
            expect: expect.map(String::from),
        };
        let summary = |scenarios| Summary {
            format: FORMAT.into(),
            version: VERSION,
            package: "p".into(),
            target: "t".into(),
            base_seed: "0x0".into(),
            partitions: vec!["1/1".into()],
            budget: "10s".into(),
            wall_s: 1.0,
            threads: 2,
            scenarios,
            interrupted: false,
        };
        let r = summary(vec![sc(Some("b"), t.clone())]).report();
        let after = |s: &str| {
            r.split(s)
                .nth(1)
                .unwrap_or_default()
                .lines()
                .nth(1)
                .unwrap_or_default()
                .to_string()
        };
        assert_eq!(
            after("invariant `a` broke\n"),
            "      known: theirs, issue 9",
            "{r}"
        );
        assert_eq!(
            after("invariant `b` broke\n"),
            "      expected: the bug the scenario's `expect` names",
            "{r}"
        );
        assert!(
            !after("invariant `c` broke\n").contains("known") && !r.contains("not broken"),
            "{r}"
        );
        // An expected bug no run broke.
        let r = summary(vec![sc(Some("z"), t)]).report();
        assert!(
            r.contains("expected invariant `z` not broken in this sweep"),
            "{r}"
        );
        // The fields round-trip, and a summary without them (from before) still parses.
        let s = summary(vec![sc(Some("z"), Tally::default())]);
        let back = Summary::parse(Path::new("s.json"), &s.to_json()).unwrap();
        assert_eq!(back.scenarios[0].known, s.scenarios[0].known);
        assert_eq!(back.scenarios[0].expect.as_deref(), Some("z"));
        // Without them (a summary from before they were added), neither is written and it parses.
        let mut plain = s.clone();
        plain.scenarios[0].known.clear();
        plain.scenarios[0].expect = None;
        let text = plain.to_json();
        assert!(
            !text.contains("\"known\"") && !text.contains("\"expect\""),
            "{text}"
        );
        assert_eq!(Summary::parse(Path::new("s.json"), &text).unwrap(), plain);
    }
}
