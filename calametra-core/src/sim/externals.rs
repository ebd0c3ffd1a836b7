//! The run's externals: where a seeded run places them (drawn from the `externals` stream, in
//! declaration order, as the swarm lets them fire), where a replay places them (anchored ones
//! when their anchor happens, the others at their recorded step), and firing one (logged,
//! traced, then the invariants checked). The run loop in `sim` calls these at each scheduling
//! point.

use super::{check, take_panic, Failure, Sim};
use crate::choices::{anchored_iter, Anchor, Event, Source};
use std::panic::{catch_unwind, AssertUnwindSafe};

/// Externals placed at points: (point, index into `externals`), in firing order. A seeded run
/// draws one point per declared external from the `externals` stream, in declaration order,
/// and places those its swarm lets fire.
pub(super) fn place_externals(sim: &Sim) -> Vec<(u64, usize)> {
    let mut w = sim.world.borrow_mut();
    let mut placed = Vec::new();
    if w.core.decide.is_seeded() {
        if sim.config.place_externals {
            for (i, (name, _)) in sim.externals.iter().enumerate() {
                let Some(p) = w.core.decide.externals_below(sim.config.horizon.max(1)) else {
                    continue;
                };
                let on = match &w.core.decide.swarm {
                    Some(swarm) => swarm.allows_external(name),
                    None => true,
                };
                if on {
                    placed.push((p, i));
                }
            }
        }
    } else if let Source::Replay(events) = &w.core.decide.source {
        // Externals recorded with an anchor are placed when it happens (see
        // `Decider::occur`); the others at their raw step, as cases saved before anchors.
        for (_, anchor, e) in anchored_iter(events) {
            if let (None, Event::External { name, point }) = (anchor, e) {
                if let Some(i) = sim.externals.iter().position(|(n, _)| n == name) {
                    placed.push((*point, i));
                }
            }
        }
    }
    placed.sort();
    placed
}

/// The next anchored external due at `point` (replay): the earliest placed, the first
/// declared on ties; removed from the placed ones. Its index, step and anchor.
pub(super) fn next_anchored_external(sim: &Sim, point: u64) -> Option<(usize, u64, Anchor)> {
    let mut w = sim.world.borrow_mut();
    let resolved = &mut w.core.decide.resolved_externals;
    if resolved.is_empty() {
        return None;
    }
    let decl = |name: &str| sim.externals.iter().position(|(n, _)| n == name);
    let (k, _) = resolved
        .iter()
        .enumerate()
        .filter(|(_, (t, name, _))| *t <= point && decl(name).is_some())
        .min_by_key(|(_, (t, name, _))| (*t, decl(name)))?;
    let (_, name, anchor) = resolved.remove(k);
    Some((decl(&name)?, point, anchor))
}

/// Fires the external `i` at step `p` (logged with `anchor`, or one made now), then checks.
pub(super) fn fire_external(
    sim: &mut Sim,
    i: usize,
    p: u64,
    anchor: Option<Anchor>,
) -> Option<Failure> {
    let world = sim.world.clone();
    let (name, f) = &mut sim.externals[i];
    {
        let mut w = world.borrow_mut();
        let anchor = anchor.unwrap_or_else(|| w.core.decide.anchor_at(p));
        w.core.decide.log.push(anchor.event());
        w.core.decide.log.push(Event::External {
            name: name.clone(),
            point: p,
        });
        let in_flight = w.core.in_flight();
        let now = w.core.now;
        w.core.trace.emit(now, "external", name, true, |d| {
            d.str("external", name)
                .u64("step", p)
                .strs("in_flight", &in_flight);
        });
        w.core.occur(&format!("external {name}"));
    }
    let r = catch_unwind(AssertUnwindSafe(|| {
        let mut w = world.borrow_mut();
        f(&mut w);
        w.settle_all();
    }));
    if r.is_err() {
        return Some(Failure::Panic {
            task: format!("external {name}"),
            message: take_panic(),
        });
    }
    check(sim)
}
