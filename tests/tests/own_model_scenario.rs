//! A model from a user's own crate runs in a scenario: the counter of `own_model/counter.rs`
//! registers itself by spec format, and the scenario takes its model from its spec through the
//! registry (`calametra::registry::build`), as a tool does, never by naming the type.

#[path = "own_model/counter.rs"]
mod counter;

// The capture comparison `calametra compare --package calametra-tests --test
// own_model_scenario` runs in this binary, with the counter registered here.
use calametra::prelude::*;
use calametra::registry::{self, Boxed};
use calametra_capture as _;
// Likewise the guest run of `calametra qemu --spec tests/own_model/counter.json --package
// calametra-tests --test own_model_scenario`, serving the counter registered here.
use calametra_qemu as _;
use counter::Counter;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// The driver adds 1, 2 and 3 to a counter whose limit is 5 (the last add is refused); under
/// stalls at every add, the total is never less than what the device acknowledged nor more
/// than what was asked.
#[calametra::scenario(
    spec = "tests/own_model/counter.json",
    schedules = 4,
    faults = [stall],
    marks = counter::marks::ALL,
    marks_floor = 3
)]
fn counter_counts_what_it_acknowledged(sim: &mut Sim) {
    let model = match registry::build(sim.spec()) {
        Ok(m) => m,
        Err(e) => panic!("{e}"),
    };
    let dev = sim.attach(Boxed(model));
    let iface = dev.interface();
    let (acked, asked) = (Rc::new(Cell::new(0u32)), Rc::new(Cell::new(0u32)));
    let (told, tried) = (acked.clone(), asked.clone());
    sim.spawn("driver", async move {
        for n in [1u16, 2, 3] {
            tried.set(tried.get() + u32::from(n));
            let add = ControlOut {
                control_type: ControlType::Vendor,
                recipient: Recipient::Device,
                request: 1,
                value: n,
                index: 0,
                data: &[],
            };
            if iface
                .control_out(add, Duration::from_millis(50))
                .await
                .is_ok()
            {
                told.set(told.get() + u32::from(n));
            }
        }
    });
    sim.invariant("total_between_acked_and_asked", move |w| {
        match w.model(dev).get::<Counter>() {
            Some(c) => acked.get() <= c.total() && c.total() <= asked.get(),
            None => false,
        }
    });
}

calametra::main!();
