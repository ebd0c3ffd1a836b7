//! Exploration: which runs a scenario's trials are. One strategy a function, each small:
//! the baseline, every (fault site, primitive) pair found in the baseline, and the seeded
//! schedules; `find` walks them in that order until a wanted failure shows.
//!
//! Seeds are derived from the scenario's path and a base seed, so trial names are stable
//! across runs and builds. Nothing here reads the wall clock.

use crate::choices::{derive_seed, Source};
use crate::fault::{Fault, FaultSet, Site};
use crate::sim::{run, Failure, RunConfig, RunResult, Sim};
use std::borrow::Cow;

/// A run of a scenario that exploration may try.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// Seed 0 with no faults and no externals: the run every site is found in.
    Baseline,
    /// One fault at one site.
    Site {
        /// The site.
        site: String,
        /// The fault.
        fault: Fault,
    },
    /// One seeded schedule, under the swarm configuration its seed draws.
    Seed(u64),
}

impl Probe {
    /// The trial-name suffix: `baseline`, `site::ctrl.get_status#3::stall`, `seed::0x4f21a9`.
    pub fn trial_suffix(&self) -> String {
        match self {
            Probe::Baseline => "baseline".into(),
            Probe::Site { site, fault } => format!("site::{site}::{fault}"),
            Probe::Seed(s) => format!("seed::{s:#x}"),
        }
    }

    /// [`Probe::parse_suffix`], but a `site::<site>::<fault>` whose fault names no primitive
    /// is an error (what [`Fault::parse`] says: the known forms), not "no probe": a trial
    /// asked for by its exact name is refused, never silently not run.
    pub fn parse_suffix_checked(s: &str) -> Result<Option<Probe>, String> {
        if let Some((site, fault)) = s.strip_prefix("site::").and_then(|r| r.rsplit_once("::")) {
            if !site.is_empty() && site.contains('#') {
                Fault::parse(fault)?;
            }
        }
        Ok(Probe::parse_suffix(s))
    }

    /// Reads a trial-name suffix back (`baseline`, `seed::0x2a`, `site::ctrl.dnload#3::stall`).
    pub fn parse_suffix(s: &str) -> Option<Probe> {
        if s == "baseline" {
            return Some(Probe::Baseline);
        }
        if let Some(hex) = s.strip_prefix("seed::0x") {
            return u64::from_str_radix(hex, 16).ok().map(Probe::Seed);
        }
        let (site, fault) = s.strip_prefix("site::")?.rsplit_once("::")?;
        if site.is_empty() || !site.contains('#') {
            return None;
        }
        Some(Probe::Site {
            site: site.to_string(),
            fault: Fault::parse(fault).ok()?,
        })
    }

    fn baseline(c: &mut RunConfig) {
        c.source = Source::Seeded(0);
        c.fault_set = FaultSet::None;
        c.place_externals = false;
        c.swarm = false;
    }

    /// The run configuration of this probe, on top of `base`.
    pub fn config(&self, base: &RunConfig) -> RunConfig {
        let mut c = base.clone();
        match self {
            Probe::Baseline => Self::baseline(&mut c),
            Probe::Site { site, fault } => {
                Self::baseline(&mut c);
                c.faults.faults.insert(site.clone(), fault.clone());
            }
            Probe::Seed(s) => {
                c.source = Source::Seeded(*s);
                c.swarm = true;
            }
        }
        c
    }
}

/// What runs a scenario under one configuration: the in-process simulator ([`InProcess`]), or
/// a Linux guest under lockstep QEMU (`calametra-qemu`'s guest scenarios). The harness makes the
/// same trials, minimizes and saves failures the same way, whichever runs them.
pub trait Runner {
    /// One run under `config`. `Err` when the run gave no verdict (a guest that made no progress,
    /// an emulator that would not start): the harness reports it and never minimizes it.
    fn run(&self, config: RunConfig) -> Result<RunResult, String>;

    /// At most how many runs minimizing one failure may take (`None`: as many as ddmin needs).
    fn shrink_budget(&self) -> Option<u64> {
        None
    }

    /// The identity of what this runner's runs depend on besides the scenario's code, recorded
    /// in its saved cases (`guest_build`): for a guest runner the content hash of the QEMU
    /// build and the guest image (`sha256:<hex>`); `None` in process, where the code is all.
    /// `Err` when it cannot be told (a file that cannot be read).
    fn build(&self) -> Result<Option<String>, String> {
        Ok(None)
    }
}

/// The in-process simulator running a scenario function.
pub struct InProcess<'a>(pub &'a dyn Fn(&mut Sim));

impl Runner for InProcess<'_> {
    fn run(&self, config: RunConfig) -> Result<RunResult, String> {
        Ok(run(config, self.0))
    }
}

/// Every (site, primitive) pair of a baseline's sites that `set` explores.
pub fn site_probes(sites: &[Site], set: &FaultSet) -> Vec<Probe> {
    let mut out = Vec::new();
    for s in sites {
        for fault in set.candidates(&s.kind) {
            out.push(Probe::Site {
                site: s.name.clone(),
                fault,
            });
        }
    }
    out
}

/// The seeded schedules of a scenario: `n` seeds derived from `base` and the scenario path.
pub fn seed_probes(scenario: &str, base: u64, n: u64) -> Vec<Probe> {
    (0..n)
        .map(|i| Probe::Seed(derive_seed(base, scenario, i)))
        .collect()
}

/// The baseline with site discovery on, for the harness to list site trials.
pub fn discover(base: &RunConfig, scenario: &dyn Fn(&mut Sim)) -> RunResult {
    let mut c = Probe::Baseline.config(base);
    c.record_sites = true;
    run(c, scenario)
}

/// The task choices over which a seeded run's priority strategy draws its change points
/// (`RunConfig::choices`), given the baseline `discovered`: the most of the baseline's and the
/// default order's (the first option everywhere, which runs each task as far as it goes
/// before the next). The baseline is one uniformly random order, which can end a race early
/// (the peers' workload A makes 5 task choices in its baseline and 8 or 12 in the default
/// order); a change point past the run's choices is wasted, one drawn over too few never
/// reaches the later choices.
pub fn change_point_horizon(
    base: &RunConfig,
    discovered: &RunResult,
    scenario: &dyn Fn(&mut Sim),
) -> u64 {
    let mut c = Probe::Baseline.config(base);
    c.source = Source::Default;
    discovered.choices.max(run(c, scenario).choices).max(1)
}

/// What [`find`] came to.
#[derive(Debug)]
pub enum Found {
    /// The first probe whose failure was wanted, its run (boxed: a run is large), and what the
    /// probes before it met.
    Yes(Probe, Box<RunResult>, Met),
    /// No probe's failure was wanted: what each of them met.
    No(Met),
}

/// What the probes of a [`find`] met that was not wanted, in order: each probe with its run's
/// failure (`None`: the run passed). An `expect` scenario's `finds::` trial reports it, so the
/// failures its hunt walked past are seen, not swallowed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Met(pub Vec<(Probe, Option<Failure>)>);

impl Met {
    /// The runs grouped by outcome, in order of first appearance: `passed` or a failure
    /// signature, with how many runs met it and the trial-name suffixes of the first `names`
    /// of them (`seed::0x..`).
    pub fn groups(&self, names: usize) -> Vec<(String, usize, Vec<String>)> {
        let mut out: Vec<(String, usize, Vec<String>)> = Vec::new();
        for (p, f) in &self.0 {
            let key = f.as_ref().map_or("passed".to_string(), Failure::signature);
            let i = match out.iter().position(|(k, _, _)| *k == key) {
                Some(i) => i,
                None => {
                    out.push((key, 0, Vec::new()));
                    out.len() - 1
                }
            };
            out[i].1 += 1;
            if out[i].2.len() < names {
                out[i].2.push(p.trial_suffix());
            }
        }
        out
    }
}

/// Runs probes in order with `runner` until `wanted` accepts a failure: [`Found::Yes`] with the
/// probe and its run, or [`Found::No`] when the probes ran out, each with what the runs before
/// met; `Err` for the first run that gave no verdict.
pub fn find(
    probes: &[Probe],
    base: &RunConfig,
    runner: &dyn Runner,
    wanted: &dyn Fn(&Failure) -> bool,
) -> Result<Found, String> {
    let mut met = Met::default();
    for p in probes {
        let r = runner.run(p.config(base))?;
        if r.failure.as_ref().is_some_and(wanted) {
            return Ok(Found::Yes(p.clone(), Box::new(r), met));
        }
        met.0.push((p.clone(), r.failure));
    }
    Ok(Found::No(met))
}

/// The fault plan a replay of `events` needs: the scenario's file plan plus the events' faults.
/// `events` by reference (copied into the config) or by value (kept: a minimizer's candidate,
/// [`crate::shrink::minimize_owned`]).
pub fn replay_config<'a>(
    base: &RunConfig,
    events: impl Into<Cow<'a, [crate::choices::Event]>>,
) -> RunConfig {
    let events = events.into();
    let mut c = base.clone();
    // Faults recorded with an anchor are placed by it at run time (see `choices::Anchor`);
    // the others are pinned to their site, as in cases saved before anchors.
    for (_, anchor, e) in crate::choices::anchored_iter(&events) {
        if let (None, crate::choices::Event::Fault { site, fault }) = (anchor, e) {
            c.faults.faults.insert(site.clone(), fault.clone());
        }
    }
    c.source = Source::Replay(events.into_owned());
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Runs an empty scenario and makes its failure from the probe: seeds 1 to 9 end with a task
    /// error naming the seed, seed 20 breaks invariant `wanted`, others (the baseline) pass.
    struct Scripted;

    impl Runner for Scripted {
        fn run(&self, config: RunConfig) -> Result<RunResult, String> {
            let seed = match config.source {
                Source::Seeded(s) => Some(s),
                _ => None,
            };
            let mut r = run(config, &|_| {});
            r.failure = match seed {
                Some(s) if (1..10).contains(&s) => Some(Failure::TaskError {
                    task: "guest probe".into(),
                    message: format!("the probe exited with {s}"),
                }),
                Some(20) => Some(Failure::Invariant {
                    name: "wanted".into(),
                    message: "broke".into(),
                }),
                _ => None,
            };
            Ok(r)
        }
    }

    #[test]
    fn find_returns_what_the_probes_met_before_the_wanted_failure_or_without_it() {
        let base = RunConfig::default();
        let wanted = |f: &Failure| f.invariant() == Some("wanted");
        let probes = [
            Probe::Baseline,
            Probe::Seed(3),
            Probe::Seed(11),
            Probe::Seed(4),
            Probe::Seed(5),
        ];
        let Ok(Found::No(met)) = find(&probes, &base, &Scripted, &wanted) else {
            panic!("no probe breaks `wanted`");
        };
        assert_eq!(met.0.len(), 5);
        assert_eq!(
            met.0[1].1.as_ref().map(Failure::to_string).as_deref(),
            Some("task `guest probe` returned an error: the probe exited with 3")
        );
        // Grouped by signature in order of first appearance, at most two names each.
        assert_eq!(
            met.groups(2),
            vec![
                (
                    "passed".to_string(),
                    2,
                    vec!["baseline".to_string(), "seed::0xb".to_string()]
                ),
                (
                    "task `guest probe` returned an error: the probe exited with N".to_string(),
                    3,
                    vec!["seed::0x3".to_string(), "seed::0x4".to_string()]
                ),
            ]
        );
        let probes = [Probe::Seed(3), Probe::Seed(20), Probe::Seed(4)];
        let Ok(Found::Yes(p, r, met)) = find(&probes, &base, &Scripted, &wanted) else {
            panic!("seed 20 breaks `wanted`");
        };
        assert_eq!(p, Probe::Seed(20));
        assert!(r.failure.as_ref().is_some_and(wanted));
        assert_eq!(met.0.len(), 1, "what came before the find, not after");
        assert_eq!(met.0[0].0, Probe::Seed(3));
    }

    #[test]
    fn trial_suffixes_read_back() {
        for p in [
            Probe::Baseline,
            Probe::Seed(0x4f21a9),
            Probe::Site {
                site: "ctrl.get_status#3".into(),
                fault: Fault::Stall,
            },
            Probe::Site {
                site: "bulk.out#2".into(),
                fault: Fault::Corrupt {
                    offset: 0,
                    xor: 0xff,
                },
            },
            Probe::Site {
                site: "ctrl.dnload#3".into(),
                fault: Fault::Delay(1_234_567),
            },
        ] {
            assert_eq!(Probe::parse_suffix(&p.trial_suffix()), Some(p.clone()));
        }
        for bad in [
            "",
            "seed::12",
            "seed::0xzz",
            "site::ctrl::stall",
            "site::a#1::melt",
            "finds::x",
        ] {
            assert_eq!(Probe::parse_suffix(bad), None, "{bad}");
        }
        // An unknown primitive in a site trial's name is an error naming the known ones.
        let e = Probe::parse_suffix_checked("site::a#1::melt").unwrap_err();
        assert!(
            e.contains("`melt` is not a fault") && e.contains("corrupt(offset,xor)"),
            "{e}"
        );
        assert_eq!(Probe::parse_suffix_checked("finds::x"), Ok(None));
        assert_eq!(
            Probe::parse_suffix_checked("site::a#1::stall"),
            Ok(Some(Probe::Site {
                site: "a#1".into(),
                fault: Fault::Stall
            }))
        );
    }
}
