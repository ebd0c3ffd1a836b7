//! A harness binary for the adversarial environment of issue 19 (`tests/adversarial.rs`): a
//! scenario with a spec whose invariant always breaks, one whose external `unplug` breaks an
//! invariant when a seed places it, and one that passes.

use calametra::prelude::*;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// A task that takes a few scheduling steps.
fn ticking(sim: &mut Sim) {
    sim.spawn("ticker", async {
        for _ in 0..6 {
            sleep(Duration::from_micros(10)).await;
        }
    });
}

/// Breaks at once: its saved case and trace are recorded against its spec.
#[calametra::scenario(spec = "../specs/dfu11-tolerant.json", schedules = 2, expect = "never")]
fn with_spec(sim: &mut Sim) {
    ticking(sim);
    sim.invariant("never", |_| false);
}

/// Breaks when a seed unplugs the device; `replug` does nothing.
#[calametra::scenario(schedules = 32, expect = "still_plugged")]
fn unplugged(sim: &mut Sim) {
    ticking(sim);
    let gone = Rc::new(Cell::new(false));
    let g = gone.clone();
    sim.external("unplug", move |_| g.set(true));
    sim.external("replug", |_| {});
    sim.invariant("still_plugged", move |_| !gone.get());
}

/// Passes.
#[calametra::scenario(schedules = 2)]
fn passing(sim: &mut Sim) {
    ticking(sim);
}

calametra::main!();
