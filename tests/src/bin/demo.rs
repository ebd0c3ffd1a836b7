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

/// A fault schedule named by the scenario: every trial runs with the second status read
/// stalled, and the invariant checks that the driver saw exactly that.
#[calametra::scenario(
    schedules = 4,
    fault_schedule = "../specs/faults/status-stall-second-read.json"
)]
fn status_scheduled_stall(sim: &mut Sim) {
    let dev = sim.attach(calametra_tests::StatusDevice::new(false));
    let iface = dev.interface();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = seen.clone();
    sim.spawn("driver", async move {
        for _ in 0..3 {
            let r = iface
                .control_in(
                    ControlIn {
                        control_type: ControlType::Vendor,
                        recipient: Recipient::Device,
                        request: 0x87,
                        value: 0,
                        index: 0,
                        length: 1,
                    },
                    Duration::from_millis(5),
                )
                .await;
            s2.borrow_mut().push(r.err());
        }
    });
    sim.invariant("second_read_stalled", move |_| {
        let s = seen.borrow();
        match s.get(1) {
            None | Some(Some(TransferError::Stall)) => Ok(()),
            Some(other) => Err(format!(
                "second read ended {other:?}, the schedule says stall"
            )),
        }
    });
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
