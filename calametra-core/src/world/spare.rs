//! The spare world: a finished run's world kept for the thread's next run ([`give_back`],
//! [`take_spare`]) and reset in place ([`Core::reset`]), so its buffers are kept and the
//! world is not built on the stack and moved into a new `Rc` each run. What a run drives lives
//! in the parent module (`world`) and must not move here. A spare keeps buffers, never state:
//! a field added to `Core` is reset in [`Core::reset`], or one run's state leaks into the next
//! (and its hash).

use super::World;
use crate::bus::{Core, Timing};
use crate::choices::Decider;
use crate::fault::{FaultPlan, FaultSet};
use crate::pool::{self, Pool};
use std::cell::RefCell;
use std::rc::Rc;

/// The world of a new run with its core's parts: the thread's spare world reset in place
/// ([`Core::reset`]: the same state as [`Core::new`] gives), or a new one.
pub(crate) fn take_spare(
    decide: Decider,
    plan: FaultPlan,
    fault_set: FaultSet,
    keep: bool,
) -> Rc<RefCell<World>> {
    // The world the thread's previous run left (cleared: no device, no task, see
    // [`give_back`]), so the world is not built on the stack and moved into a new `Rc` (a few
    // kilobytes copied several times a run) and its buffers are kept.
    match pool::take::<Rc<RefCell<World>>>(Pool::World) {
        Some(world) => {
            {
                let mut w = world.borrow_mut();
                w.core.reset(decide, plan, fault_set, keep);
                // The table kept its buffers, names and wakers in place (see `Tasks::close`).
                w.tasks.reopen();
            }
            world
        }
        None => Rc::new(RefCell::new(World::new(Core::new(
            decide, plan, fault_set, keep,
        )))),
    }
}

/// Keeps a finished run's world for the thread's next run when nothing else holds it (no
/// other `Rc`, no `Weak`: nothing can see the next run's world through it). Its devices and
/// tasks are dropped here, as when the world itself was dropped at the run's end; its core is
/// reset when it is taken.
pub(crate) fn give_back(world: Rc<RefCell<World>>) {
    if Rc::strong_count(&world) != 1 || Rc::weak_count(&world) != 0 {
        return;
    }
    let Ok(mut w) = world.try_borrow_mut() else {
        return;
    };
    let World {
        core: _,
        devices,
        tasks,
        hotplug,
    } = &mut *w;
    devices.clear();
    hotplug.clear();
    // Its names, wakers and buffers stay in the table, for the next run (see `Tasks::close`).
    tasks.close();
    drop(w);
    pool::put(Pool::World, world);
}

impl Core {
    /// Makes this core what [`Core::new`] with these parts gives, in place: a world kept for
    /// the thread's next run ([`take_spare`]) keeps its buffers, never its state. Every
    /// field is named, so a field added to `Core` must be reset here too.
    pub(crate) fn reset(
        &mut self,
        decide: Decider,
        plan: FaultPlan,
        fault_set: FaultSet,
        keep: bool,
    ) {
        let Core {
            now,
            trace,
            decide: d,
            point,
            queue,
            next_ev,
            transfers,
            site_table,
            plan: p,
            fault_set: f,
            sites,
            marks,
            gap,
            actor,
            sim_actor,
            timing,
            record_sites,
            coverage,
            last_transition,
        } = self;
        *now = 0;
        trace.reset(keep);
        *d = decide;
        *point = 0;
        queue.clear();
        *next_ev = 0;
        transfers.reset();
        site_table.reset();
        // The same plan as the previous run's (runs of a sweep or a spin): the bases keep the
        // entries they found in it.
        if *p != plan {
            site_table.forget_plan();
            *p = plan;
        }
        *f = fault_set;
        sites.clear();
        marks.clear();
        *gap = None;
        *actor = sim_actor.clone();
        *timing = Timing::default();
        *record_sites = false;
        *coverage = None;
        *last_transition = None;
    }
}
