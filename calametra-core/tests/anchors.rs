//! Events anchored to what they follow (`Event::Anchor`): minimization drops an irrelevant
//! event that moved every later step (it was kept when externals were pinned to raw steps), a
//! saved case still reproduces after an unrelated extra transfer at the driver's start-up, and
//! `first_unapplied` tells applied anchored events from stale ones. The scenario is workload D
//! (`support/workload_d.rs`).

#[path = "support/workload_d.rs"]
mod workload_d;

use calametra_core::choices::{
    count_events, first_unapplied, story, without_anchors, Event, Source,
};
use calametra_core::explore::replay_config;
use calametra_core::fault::Fault;
use calametra_core::shrink::minimize;
use calametra_core::{run, RunConfig, RunResult, Sim};
use workload_d::pipe_scenario;

fn plain(sim: &mut Sim) {
    pipe_scenario(sim, false)
}

fn with_extra_startup(sim: &mut Sim) {
    pipe_scenario(sim, true)
}

fn fault(site: &str, fault: Fault) -> Event {
    Event::Fault {
        site: site.into(),
        fault,
    }
}

fn replay(events: &[Event], f: fn(&mut Sim)) -> RunResult {
    run(replay_config(&RunConfig::default(), events), &f)
}

/// A failing case recorded the old way (raw steps and sites, no anchors): an irrelevant 1 ms
/// delay at start-up, the stalled write, the failed CLEAR_HALT and the replug at the step
/// where it lands in the window.
fn raw_case() -> Vec<Event> {
    let mut events = vec![
        fault("ctrl.set_config#1", Fault::Delay(1_000_000)),
        fault("bulk.out#3", Fault::Stall),
        fault("ctrl.clear_halt#1", Fault::Stall),
    ];
    let point = (0..400)
        .find(|&p| {
            let mut e = events.clone();
            e.push(Event::External {
                name: "replug".into(),
                point: p,
            });
            replay(&e, plain).failure.is_some()
        })
        .expect("a replug step in the window");
    events.push(Event::External {
        name: "replug".into(),
        point,
    });
    events
}

fn minimized(events: Vec<Event>, anchors: bool) -> Vec<Event> {
    let sig = replay(&events, plain)
        .failure
        .expect("the case fails")
        .signature();
    minimize(events, &mut |cand| {
        let r = replay(cand, plain);
        match r.failure {
            Some(f) if f.signature() == sig => Some(if anchors {
                r.events
            } else {
                // Minimization as it was: the events a run took, at raw positions.
                without_anchors(&r.events)
            }),
            _ => None,
        }
    })
    .events
}

#[test]
fn an_irrelevant_event_before_the_load_bearing_ones_is_dropped() {
    let raw = raw_case();
    // As before anchors: without the delay every later step moves, the replug leaves its
    // window, and the delay is kept.
    let old = minimized(raw.clone(), false);
    assert!(
        old.iter().any(|e| matches!(
            e,
            Event::Fault {
                fault: Fault::Delay(_),
                ..
            }
        )),
        "raw steps keep the delay: {}",
        story(&old)
    );
    // The run's own record anchors each event to what it follows (the replug to the failed
    // CLEAR_HALT), so the delay goes.
    let taken = replay(&raw, plain).events;
    assert!(
        taken
            .windows(2)
            .any(|w| matches!(&w[0], Event::Anchor { after, nth: 1, .. }
                if &**after == "ctrl.clear_halt stall")
                && matches!(&w[1], Event::External { name, .. } if name == "replug")),
        "{taken:?}"
    );
    let new = minimized(taken, true);
    assert_eq!(
        story(&new),
        "stall at bulk.out#3 . stall at ctrl.clear_halt#1 . replug",
        "{new:?}"
    );
    assert_eq!(count_events(&new), 3);
    // The minimal case replays byte-exactly and every event applies.
    let a = replay(&new, plain);
    let b = replay(&new, plain);
    assert_eq!(a.hash, b.hash);
    assert!(a.failure.is_some());
    assert_eq!(first_unapplied(&new, &a.events), None);
}

#[test]
fn a_saved_case_still_reproduces_after_an_extra_start_up_transfer() {
    let case = minimized(replay(&raw_case(), plain).events, true);
    let sig = replay(&case, plain).failure.unwrap().signature();
    // The driver now asks `get_version` at start-up: every later step moves.
    let r = replay(&case, with_extra_startup);
    assert_eq!(
        r.failure.as_ref().map(|f| f.signature()),
        Some(sig.clone()),
        "the anchored case reproduces: {:?}",
        r.events
    );
    assert_eq!(first_unapplied(&case, &r.events), None);
    // The same events at raw steps do not: the replug lands outside its window.
    let raw = without_anchors(&case);
    let old = replay(&raw, with_extra_startup);
    assert!(old.failure.is_none(), "{:?}", old.failure);
    assert_eq!(
        first_unapplied(&raw, &old.events),
        None,
        "every raw event applied, at the wrong step: the case reads as fixed"
    );
}

#[test]
fn anchored_events_that_do_not_apply_fall_back_and_read_as_stale() {
    let case = minimized(replay(&raw_case(), plain).events, true);
    // Without the stall on the write, CLEAR_HALT is never sent: its fault and the replug's
    // anchor never happen. The replug falls back to its raw step; the fault is unapplied.
    let without_write: Vec<Event> = {
        let mut v = case.clone();
        let i = v
            .iter()
            .position(|e| matches!(e, Event::Fault { site, .. } if site.starts_with("bulk.out")))
            .unwrap();
        v.drain(i - 1..=i);
        v
    };
    let r = replay(&without_write, plain);
    assert!(r.failure.is_none());
    let stale = first_unapplied(&without_write, &r.events).expect("stale");
    assert!(
        matches!(&without_write[stale], Event::Fault { site, .. } if site == "ctrl.clear_halt#1"),
        "{:?}",
        without_write[stale]
    );
    assert!(
        r.events
            .iter()
            .any(|e| matches!(e, Event::External { name, .. } if name == "replug")),
        "the replug fell back to its raw step"
    );
    // Determinism of the fallback: the same events, the same run.
    assert_eq!(replay(&without_write, plain).hash, r.hash);
}

#[test]
fn seeded_runs_replay_byte_exactly_from_their_anchored_events() {
    let mut anchored = 0;
    for seed in 0..300u64 {
        let c = RunConfig {
            source: Source::Seeded(seed),
            fault_set: calametra_core::fault::FaultSet::Transport,
            horizon: 120,
            ..RunConfig::default()
        };
        let r = run(c, &plain);
        anchored += r
            .events
            .iter()
            .filter(|e| matches!(e, Event::Anchor { after, .. } if &**after != "start"))
            .count();
        let again = replay(&r.events, plain);
        assert_eq!(again.hash, r.hash, "seed {seed}");
        assert_eq!(
            first_unapplied(&r.events, &again.events),
            None,
            "seed {seed}"
        );
    }
    assert!(anchored > 20, "{anchored} events anchored past the start");
}
