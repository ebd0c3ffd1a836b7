//! The failure chain: what happens after a find, the same for the test harness, the
//! `calametra` tool and guest runs.
//!
//! A failing run is confirmed by replaying its events, minimized by delta debugging, replayed
//! once more with its trace kept, turned into a saved case ([`Regression`]), persisted through a
//! [`Store`] (a directory, or off) and verified by reading the kept case back and replaying it.
//! Every step's result is a type ([`Replay`], [`Handled`]), never a string to parse; the
//! libtest adapter only reports them. Nothing here reads the wall clock.

use crate::choices::{story, Event};
use crate::explore::{replay_config, Runner};
use crate::regress::{self, Regression, Saved, Store};
use crate::shrink::{minimize, Shrunk};
use crate::sim::{Failure, RunConfig, RunResult};
use crate::trace::parse_kept;
use crate::tracefile::read_aloud;

/// A replay of recorded events, compared with the recording.
#[derive(Debug)]
pub enum Replay {
    /// The same failure signature and the same trace hash: byte-exact.
    Exact(RunResult),
    /// The same failure signature, another trace hash.
    OtherHash(RunResult),
    /// A failure with another signature.
    Different(RunResult, Failure),
    /// The run ends without a failure.
    Passes(RunResult),
    /// The run gave no verdict (a guest that made no progress): neither pass nor failure.
    NoVerdict(String),
}

impl Replay {
    /// The replayed run, when there was one.
    pub fn run(&self) -> Option<&RunResult> {
        match self {
            Replay::Exact(r) | Replay::OtherHash(r) | Replay::Passes(r) => Some(r),
            Replay::Different(r, _) => Some(r),
            Replay::NoVerdict(_) => None,
        }
    }
}

/// Runs `events` with `runner` on top of `base` (the scenario's configuration), keeping the
/// trace lines when `keep`. `Err` is a run that gave no verdict.
pub fn replay(
    runner: &dyn Runner,
    base: &RunConfig,
    events: &[Event],
    keep: bool,
) -> Result<RunResult, String> {
    let mut c = replay_config(base, events);
    c.keep_trace = keep;
    runner.run(c)
}

/// Replays `events` and compares the run with a recorded `signature` and trace `hash` of
/// encoding `hash_version`. A hash of an older version ([`crate::trace::HASH_VERSIONS`]) is
/// checked against the replay's records hashed under that version (the replay keeps its trace
/// for it), so a case recorded before an encoding change still replays byte-exactly; the
/// replay's own `hash` is always the current version's.
pub fn compare(
    runner: &dyn Runner,
    base: &RunConfig,
    events: &[Event],
    signature: &str,
    (hash, hash_version): (&str, u64),
    keep: bool,
) -> Replay {
    let old = hash_version != crate::trace::HASH_VERSION;
    let r = match replay(runner, base, events, keep || old) {
        Ok(r) => r,
        Err(e) => return Replay::NoVerdict(e),
    };
    let exact = if old {
        crate::trace::hash_records(&parse_kept(&r.lines), hash_version)
            .is_some_and(|h| h.to_string() == hash)
    } else {
        r.hash.to_string() == hash
    };
    match r.failure.clone() {
        None => Replay::Passes(r),
        // A case saved before signatures normalized hex words and lists records the old
        // form, which still names this failure.
        Some(f) if !f.has_signature(signature) => Replay::Different(r, f),
        Some(_) if exact => Replay::Exact(r),
        Some(_) => Replay::OtherHash(r),
    }
}

/// Who a saved case belongs to: its Cargo package, test target and scenario path.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Owner {
    /// The Cargo package (`CARGO_PKG_NAME`).
    pub package: String,
    /// The test target's name as Cargo spells it (`hw-loop`, hyphens kept).
    pub target: String,
    /// The scenario path (`trigger6::stale_status_after_disconnect`).
    pub scenario: String,
}

/// A failing run that exploration found.
pub struct Found<'a> {
    /// The trial that found it (`path::seed::0x4f21a9`).
    pub trial: &'a str,
    /// The run.
    pub run: &'a RunResult,
    /// Its failure.
    pub failure: &'a Failure,
}

/// What the chain made of a find.
#[derive(Debug)]
pub struct Handled {
    /// The failure signature.
    pub signature: String,
    /// Whether replaying the found run's events reproduced the signature (minimization and
    /// saving happen only then).
    pub reproduced: bool,
    /// The minimized events and the reduction chain.
    pub shrunk: Shrunk,
    /// The minimal run, replayed once more with its trace kept.
    pub fin: RunResult,
    /// The saved case built from it.
    pub case: Regression,
    /// What the store did with the case, or why it could not keep it.
    pub saved: Result<Saved, String>,
}

impl Handled {
    /// The minimal run's failure when it differs from the found one.
    pub fn fails_differently(&self) -> Option<&Failure> {
        self.fin
            .failure
            .as_ref()
            .filter(|f| !f.has_signature(&self.signature))
    }
}

/// Confirms, minimizes, replays, builds and persists the case of `found`.
pub fn handle(
    runner: &dyn Runner,
    base: &RunConfig,
    owner: &Owner,
    base_seed: u64,
    found: Found<'_>,
    store: &dyn Store,
) -> Handled {
    let sig = case_signature(store, owner, found.failure);
    let r = found.run;
    let reproduced = replay(runner, base, &r.events, false)
        .ok()
        .and_then(|rr| rr.failure)
        .is_some_and(|f| f.has_signature(&sig));
    let mut budget = runner.shrink_budget();
    let shrunk = if reproduced {
        minimize(r.events.clone(), &mut |cand| {
            match &mut budget {
                Some(0) => return None,
                Some(n) => *n -= 1,
                None => {}
            }
            let rr = replay(runner, base, cand, false).ok()?;
            match rr.failure {
                Some(f) if f.has_signature(&sig) => Some(rr.events),
                _ => None,
            }
        })
    } else {
        Shrunk {
            events: r.events.clone(),
            chain: vec![crate::choices::count_events(&r.events)],
            attempts: 0,
        }
    };
    // The minimal run once more with its trace kept; a guest that gives no verdict this time
    // leaves the run that failed, with its own events, as the case.
    let (shrunk, fin) = match replay(runner, base, &shrunk.events, true) {
        Ok(f) => (shrunk, f),
        Err(_) => (
            Shrunk {
                events: r.events.clone(),
                chain: vec![crate::choices::count_events(&r.events)],
                attempts: shrunk.attempts,
            },
            r.clone(),
        ),
    };
    // A build that cannot be told leaves the case unpinned (it replays as an unpinned case).
    let guest_build = runner.build().ok().flatten();
    let case = Regression {
        format: regress::FORMAT.into(),
        version: regress::VERSION,
        scenario: owner.scenario.clone(),
        id: regress::id_for(&owner.scenario, &sig),
        signature: sig.clone(),
        failure: found.failure.to_string(),
        found_by: found.trial.to_string(),
        base_seed: format!("{base_seed:#x}"),
        spec_sha256: base.spec.as_ref().map(|s| s.sha256().to_string()),
        events: shrunk.events.clone(),
        story: story(&shrunk.events),
        run_aloud: read_aloud(&parse_kept(&fin.lines), 14),
        trace_hash: fin.hash.to_string(),
        hash_version: crate::trace::HASH_VERSION,
        swarm: r.swarm.clone(),
        guest_build,
        package: owner.package.clone(),
        target: owner.target.clone(),
    };
    let saved = if reproduced {
        store.save(&case)
    } else {
        Err(
            "the failure did not reproduce from its events (nondeterminism in the scenario?)"
                .to_string(),
        )
    };
    Handled {
        signature: sig,
        reproduced,
        shrunk,
        fin,
        case,
        saved,
    }
}

/// The signature a find's case is saved under: its failure's [`Failure::signature`], or,
/// when the store keeps this owner's case of the failure under its legacy signature (saved
/// before signatures normalized hex words and lists: [`Failure::legacy_signature`]), that one,
/// so the kept case stays the failure's file rather than a second file beside it.
fn case_signature(store: &dyn Store, owner: &Owner, failure: &Failure) -> String {
    let sig = failure.signature();
    let legacy = failure.legacy_signature();
    if legacy != sig {
        if let Some(c) = store.find(&regress::id_for(&owner.scenario, &legacy)) {
            if c.signature == legacy
                && c.scenario == owner.scenario
                && c.package == owner.package
                && c.target == owner.target
            {
                return legacy;
            }
        }
    }
    sig
}

/// Reads the case the store keeps for the signature back and replays it: it must be this case
/// or a better one of the same owner and signature, and replay byte-exactly (same signature,
/// same trace hash). `Ok` when nothing was saved (saving off, or it failed: see `saved`).
pub fn verify(runner: &dyn Runner, base: &RunConfig, handled: &Handled) -> Result<(), String> {
    let Some(path) = handled.saved.as_ref().ok().and_then(Saved::path) else {
        return Ok(());
    };
    let reg = Regression::load(path).map_err(|e| e.to_string())?;
    let ours = &handled.case;
    let same_owner = reg.package == ours.package
        && reg.target == ours.target
        && reg.scenario == ours.scenario
        && reg.signature == ours.signature;
    if !same_owner || (reg != *ours && !regress::better(&reg, ours)) {
        return Err(format!(
            "{}: the regression file read back holds neither this case nor a better one of its signature",
            path.display()
        ));
    }
    if let BuildCheck::OtherBuild { recorded, this } =
        check_build(reg.guest_build.as_deref(), ours.guest_build.as_deref())
    {
        return Err(format!(
            "{}: the file keeps a better case of this signature made for another build ({recorded} vs {this}), which cannot be replayed here; remove it to keep this build's case",
            path.display()
        ));
    }
    match compare(
        runner,
        base,
        &reg.events,
        &reg.signature,
        (&reg.trace_hash, reg.hash_version),
        false,
    ) {
        Replay::Exact(_) => Ok(()),
        Replay::NoVerdict(e) => Err(format!("no verdict: {e}")),
        other => {
            let (hash, sig) = match other.run() {
                Some(r) => (
                    r.hash.to_string(),
                    r.failure.as_ref().map(Failure::signature),
                ),
                None => (String::new(), None),
            };
            Err(format!(
                "the case saved in {} does not replay byte-exactly\n  recorded: {} ({})\n  replayed: {hash} ({sig:?})",
                path.display(),
                reg.trace_hash,
                reg.signature,
            ))
        }
    }
}

/// Whether a saved case can be replayed with this runner's build.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BuildCheck {
    /// Replay it: it records no build (an in-process case, or a guest case saved before cases
    /// recorded one), or the build it records is this one.
    Replay,
    /// It was made for another build: its replay here would prove nothing, so it is not run.
    OtherBuild {
        /// The build the case records.
        recorded: String,
        /// This runner's build (`none (in process)` for an in-process runner).
        this: String,
    },
}

/// Decides whether a case recording `recorded` (its `guest_build`) replays with a runner whose
/// build is `this` ([`Runner::build`]).
pub fn check_build(recorded: Option<&str>, this: Option<&str>) -> BuildCheck {
    match (recorded, this) {
        (None, _) => BuildCheck::Replay,
        (Some(r), Some(t)) if r == t => BuildCheck::Replay,
        (Some(r), t) => BuildCheck::OtherBuild {
            recorded: r.to_string(),
            this: t.unwrap_or("none (in process)").to_string(),
        },
    }
}

/// Why a saved case is stale: it no longer describes this code.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Stale {
    /// The scenario's spec is not the one the case was saved against.
    Spec {
        /// The spec's SHA-256 recorded in the case.
        recorded: Option<String>,
        /// The spec's SHA-256 now.
        now: Option<String>,
    },
    /// A recorded event did not apply on replay.
    Event {
        /// Its index in the case's events (0-based, the anchors before events not counted).
        index: usize,
        /// The event.
        event: Event,
        /// Why it did not apply.
        why: String,
    },
}

impl std::fmt::Display for Stale {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Stale::Spec { recorded, now } => write!(
                f,
                "the spec changed since the case was saved (sha256 {} then, {} now)",
                recorded.as_deref().unwrap_or("none"),
                now.as_deref().unwrap_or("none")
            ),
            Stale::Event { index, event, why } => {
                write!(f, "event {} (`{event}`) did not apply: {why}", index + 1)
            }
        }
    }
}

/// What replaying a saved case shows about it.
#[derive(Debug)]
pub enum CaseState {
    /// It fails with its recorded signature; `exact` when the trace hash is the recorded one.
    Fails {
        /// Byte-exact.
        exact: bool,
        /// The replayed run.
        run: RunResult,
    },
    /// It fails with another signature.
    FailsDifferently {
        /// The replayed run.
        run: RunResult,
        /// Its failure.
        failure: Failure,
    },
    /// Every recorded event applied and nothing failed: the bug is fixed.
    Fixed {
        /// The replayed run.
        run: RunResult,
    },
    /// It no longer describes this code: an event did not apply, or the spec changed.
    Stale(Stale),
    /// It belongs to another package, test target or scenario: never run as this one's case.
    Foreign(String),
    /// It was made for another build (a guest case's `guest_build`): not replayed, neither a
    /// pass nor a failure.
    OtherBuild {
        /// The build the case records.
        recorded: String,
        /// This runner's build.
        this: String,
    },
    /// The run gave no verdict.
    NoVerdict(String),
}

impl CaseState {
    /// One word for the state, as `calametra review` lists it.
    pub fn word(&self) -> &'static str {
        match self {
            CaseState::Fails { .. } => "fails",
            CaseState::FailsDifferently { .. } => "fails-differently",
            CaseState::Fixed { .. } => "fixed",
            CaseState::Stale(_) => "stale",
            CaseState::Foreign(_) => "foreign",
            CaseState::OtherBuild { .. } => "other-build",
            CaseState::NoVerdict(_) => "no-verdict",
        }
    }
}

/// Whether `case` belongs to `owner`; `Err` says whose it is.
pub fn check_owner(owner: &Owner, case: &Regression) -> Result<(), String> {
    for (field, theirs, ours) in [
        ("package", &case.package, &owner.package),
        ("target", &case.target, &owner.target),
        ("scenario", &case.scenario, &owner.scenario),
    ] {
        if theirs != ours {
            return Err(format!(
                "field `{field}`: the case belongs to {field} `{theirs}`, not `{ours}` (package `{}`, target `{}`, scenario `{}`); it is not run as this one's case",
                case.package, case.target, case.scenario
            ));
        }
    }
    Ok(())
}

/// Replays a saved case for `owner` and says what it shows: fails, fails differently, fixed
/// (every event applied, no failure), stale (the spec changed, or an event did not apply),
/// foreign, or made for another build (not replayed). Keeps the trace lines when `keep`.
pub fn check_case(
    runner: &dyn Runner,
    base: &RunConfig,
    owner: &Owner,
    case: &Regression,
    keep: bool,
) -> CaseState {
    if let Err(e) = check_owner(owner, case) {
        return CaseState::Foreign(e);
    }
    if case.guest_build.is_some() {
        let this = match runner.build() {
            Ok(b) => b,
            Err(e) => return CaseState::NoVerdict(format!("this build cannot be told: {e}")),
        };
        if let BuildCheck::OtherBuild { recorded, this } =
            check_build(case.guest_build.as_deref(), this.as_deref())
        {
            return CaseState::OtherBuild { recorded, this };
        }
    }
    let now = base.spec.as_ref().map(|s| s.sha256().to_string());
    if case.spec_sha256 != now {
        return CaseState::Stale(Stale::Spec {
            recorded: case.spec_sha256.clone(),
            now,
        });
    }
    let replayed = compare(
        runner,
        base,
        &case.events,
        &case.signature,
        (&case.trace_hash, case.hash_version),
        keep,
    );
    match replayed {
        Replay::Exact(run) => CaseState::Fails { exact: true, run },
        Replay::OtherHash(run) => CaseState::Fails { exact: false, run },
        Replay::Different(run, failure) => CaseState::FailsDifferently { run, failure },
        Replay::NoVerdict(e) => CaseState::NoVerdict(e),
        Replay::Passes(run) => match crate::choices::first_unapplied(&case.events, &run.events) {
            None => CaseState::Fixed { run },
            Some(index) => {
                let event = case.events[index].clone();
                CaseState::Stale(Stale::Event {
                    index: crate::choices::count_events(&case.events[..index]),
                    why: explain_unapplied(&event, &run),
                    event,
                })
            }
        },
    }
}

/// Why `event` (a recorded event that [`crate::choices::first_unapplied`] found unapplied) did
/// not apply in the replayed `run`, naming what the run knows: an external the scenario does
/// not declare (and those it does), a step past the run's end.
pub fn explain_unapplied(event: &Event, run: &RunResult) -> String {
    let ended = |point: u64| format!("the run ended at step {}, before step {point}", run.steps);
    match event {
        Event::External { name, .. } => match &run.externals {
            Some(names) if !names.contains(name) && names.is_empty() => {
                format!("no external named `{name}` in this scenario (it declares none)")
            }
            Some(names) if !names.contains(name) => format!(
                "no external named `{name}` in this scenario (it has: {})",
                names.join(", ")
            ),
            _ => match event {
                Event::External { point, .. } if *point > run.steps => ended(*point),
                _ => crate::choices::why_unapplied(event),
            },
        },
        Event::Schedule { point, .. } if *point >= run.steps => ended(*point),
        _ => crate::choices::why_unapplied(event),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A runner whose runs are an empty in-process scenario and whose build is what the test
    /// says: a guest runner's identity without QEMU.
    struct Stub {
        build: Result<Option<String>, String>,
        runs: Cell<u32>,
    }

    impl Stub {
        fn new(build: Result<Option<&str>, &str>) -> Stub {
            Stub {
                build: build.map(|b| b.map(str::to_string)).map_err(str::to_string),
                runs: Cell::new(0),
            }
        }
    }

    impl Runner for Stub {
        fn run(&self, config: RunConfig) -> Result<RunResult, String> {
            self.runs.set(self.runs.get() + 1);
            Ok(crate::sim::run(config, &|_| {}))
        }

        fn build(&self) -> Result<Option<String>, String> {
            self.build.clone()
        }
    }

    fn owner() -> Owner {
        Owner {
            package: "p".into(),
            target: "t".into(),
            scenario: "s".into(),
        }
    }

    fn case(guest_build: Option<&str>) -> Regression {
        Regression {
            format: regress::FORMAT.into(),
            version: regress::VERSION,
            scenario: "s".into(),
            id: regress::id_for("s", "sig"),
            signature: "sig".into(),
            failure: "sig".into(),
            found_by: "seed::0x1".into(),
            base_seed: "0x0".into(),
            spec_sha256: None,
            events: Vec::new(),
            story: String::new(),
            run_aloud: String::new(),
            trace_hash: "sha256:00".into(),
            hash_version: crate::trace::HASH_VERSION,
            swarm: None,
            guest_build: guest_build.map(str::to_string),
            package: "p".into(),
            target: "t".into(),
        }
    }

    const A: &str = "sha256:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa";
    const B: &str = "sha256:bbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbbb";

    /// A failure whose case the store keeps under its legacy signature (saved before hashes
    /// and attempt lists were normalized) is saved under that one, the same file; with no such
    /// case, or another owner's, under its signature.
    #[test]
    fn a_case_kept_under_the_legacy_signature_stays_the_failures_file() {
        let f = Failure::Invariant {
            name: "installed_as_claimed".into(),
            message: "the host reports 16384 bytes, sha256 e62e2321e187.. installed".into(),
        };
        let (sig, legacy) = (f.signature(), f.legacy_signature());
        assert_ne!(sig, legacy);
        let dir = tempfile::tempdir().unwrap();
        let store = regress::Dir(dir.path().to_path_buf());
        assert_eq!(case_signature(&store, &owner(), &f), sig, "nothing kept");
        let old = Regression {
            id: regress::id_for("s", &legacy),
            signature: legacy.clone(),
            ..case(None)
        };
        assert!(matches!(store.save(&old), Ok(Saved::Written(_))));
        assert_eq!(case_signature(&store, &owner(), &f), legacy);
        let other = Owner {
            target: "another".into(),
            ..owner()
        };
        assert_eq!(case_signature(&store, &other, &f), sig);
        assert_eq!(case_signature(&regress::Off, &owner(), &f), sig);
    }

    #[test]
    fn the_build_decision() {
        assert_eq!(check_build(None, None), BuildCheck::Replay);
        assert_eq!(check_build(None, Some(A)), BuildCheck::Replay);
        assert_eq!(check_build(Some(A), Some(A)), BuildCheck::Replay);
        assert_eq!(
            check_build(Some(A), Some(B)),
            BuildCheck::OtherBuild {
                recorded: A.into(),
                this: B.into()
            }
        );
        assert_eq!(
            check_build(Some(A), None),
            BuildCheck::OtherBuild {
                recorded: A.into(),
                this: "none (in process)".into()
            }
        );
    }

    /// A case made for another build is not replayed (no run), and says both builds; with the
    /// same build, or unpinned, it is replayed as before.
    #[test]
    fn a_case_of_another_build_is_not_replayed() {
        let base = RunConfig::default();
        let other = Stub::new(Ok(Some(B)));
        match check_case(&other, &base, &owner(), &case(Some(A)), false) {
            CaseState::OtherBuild { recorded, this } => assert_eq!((&*recorded, &*this), (A, B)),
            s => panic!("{}", s.word()),
        }
        assert_eq!(other.runs.get(), 0, "nothing ran");
        let in_process = Stub::new(Ok(None));
        let s = check_case(&in_process, &base, &owner(), &case(Some(A)), false);
        assert_eq!(s.word(), "other-build");
        assert_eq!(in_process.runs.get(), 0);

        let same = Stub::new(Ok(Some(A)));
        let s = check_case(&same, &base, &owner(), &case(Some(A)), false);
        assert_eq!(
            s.word(),
            "fixed",
            "replayed: no failure, every event applied"
        );
        assert!(same.runs.get() >= 1);
        let unpinned = Stub::new(Ok(Some(B)));
        let s = check_case(&unpinned, &base, &owner(), &case(None), false);
        assert_eq!(s.word(), "fixed");
        assert!(unpinned.runs.get() >= 1);

        // A build that cannot be told is no verdict for a pinned case, and does not matter for
        // an unpinned one.
        let broken = Stub::new(Err("qemu: no such file"));
        match check_case(&broken, &base, &owner(), &case(Some(A)), false) {
            CaseState::NoVerdict(e) => assert!(e.contains("no such file"), "{e}"),
            s => panic!("{}", s.word()),
        }
        let s = check_case(&broken, &base, &owner(), &case(None), false);
        assert_eq!(s.word(), "fixed");
    }

    /// `finds` reads the kept case back and replays it: a better case of the signature made
    /// for another build (a committed one) cannot be replayed here, and says so instead of
    /// failing as "not byte-exact".
    #[test]
    fn a_kept_case_of_another_build_is_named_not_replayed() {
        let dir = tempfile::tempdir().unwrap();
        let theirs = case(Some(A));
        let path = theirs.save(dir.path()).unwrap();
        let runner = Stub::new(Ok(Some(B)));
        let handled = Handled {
            signature: "sig".into(),
            reproduced: true,
            shrunk: Shrunk {
                events: Vec::new(),
                chain: vec![0],
                attempts: 0,
            },
            fin: crate::sim::run(RunConfig::default(), &|_| {}),
            case: Regression {
                story: "ours".into(),
                ..case(Some(B))
            },
            saved: Ok(Saved::KeptBetter {
                path: path.clone(),
                kept: Box::new(theirs),
            }),
        };
        let e = verify(&runner, &RunConfig::default(), &handled).unwrap_err();
        assert!(
            e.contains(&format!("made for another build ({A} vs {B})")),
            "{e}"
        );
        assert_eq!(runner.runs.get(), 0, "nothing replayed");
    }
}
