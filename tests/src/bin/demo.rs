//! A harness binary whose scenarios all pass: the end-to-end tests drive it with `--list`,
//! `--exact`, filters and nextest, and check what runs.

use calametra::prelude::*;
use calametra_tests::status_scenario;
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

/// Three tasks with simultaneous timers; the seeds vary their order.
#[calametra::scenario(schedules = 12)]
fn three_tasks(sim: &mut Sim) {
    let log = Rc::new(RefCell::new(Vec::new()));
    for name in ["a", "b", "c"] {
        let log = log.clone();
        sim.spawn(name, async move {
            for i in 0..3 {
                sleep(Duration::from_micros(10)).await;
                log.borrow_mut().push((name, i));
            }
        });
    }
    let l2 = log.clone();
    sim.invariant("each_task_in_order", move |_| {
        let l = l2.borrow();
        for n in ["a", "b", "c"] {
            let mine: Vec<i32> = l.iter().filter(|(t, _)| *t == n).map(|(_, i)| *i).collect();
            if mine.windows(2).any(|w| w[0] > w[1]) {
                return Err(format!("{n} ran out of order: {mine:?}"));
            }
        }
        Ok(())
    });
}

/// The fixed status driver under every transport fault at every site of its baseline.
#[calametra::scenario(schedules = 8, faults = transport)]
fn status_fixed(sim: &mut Sim) {
    status_scenario(sim, false, 6);
}

mod nested {
    use calametra::prelude::*;

    /// A scenario in a module: its trials are named `nested::inner::...`.
    #[calametra::scenario(seed = 0x2a, faults = [stall])]
    fn inner(sim: &mut Sim) {
        let dev = sim.attach(Loopback::default());
        let iface = dev.interface();
        sim.spawn("driver", async move {
            let out = ControlOut {
                control_type: ControlType::Vendor,
                recipient: Recipient::Device,
                request: 1,
                value: 0,
                index: 0,
                data: &[1, 2],
            };
            let _ = iface
                .control_out(out, std::time::Duration::from_millis(5))
                .await;
        });
    }
}

calametra::main!();
