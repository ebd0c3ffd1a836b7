//! Calametra's versions of workloads A, B and C, written as a user writes scenarios: ordinary
//! `#[calametra::scenario]` functions (the `peers-scenarios` binary runs them under the harness)
//! that the benchmark also drives directly with `calametra_core::run`, hashing every run's
//! trace as Calametra always does.
//!
//! Nothing here reads the wall clock; the timing loops live in `main.rs`.

use crate::machine::{Machine, Op};
use crate::{B_MAX_OPS, C_TRANSFERS};
use calametra::prelude::*;
use calametra_core::sync::Mutex;
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

// ---------------------------------------------------------------------------------------------
// A: stale status after disconnect.

/// The device cell the poller and the hotplug task share.
#[derive(Clone, Copy, Debug)]
pub struct DevCell {
    /// Whether the monitor is connected.
    pub connected: bool,
    /// The status register (non-zero while connected).
    pub status: u8,
    /// The driver's cached status.
    pub cache: u8,
}

/// How workload A is built.
#[derive(Clone, Copy, Debug)]
pub struct AVariant {
    /// Explicit `yield_now()` between steps (besides the lock acquisitions).
    pub yields: bool,
    /// The poller re-checks `connected` and caches the status in two separate steps.
    pub buggy: bool,
}

async fn step_yield(yields: bool) {
    if yields {
        yield_now().await;
    }
}

/// The poller: reads `connected`, then the status, then caches it if still connected.
/// Returns whether it saw the monitor connected.
async fn poller(dev: Rc<Mutex<DevCell>>, v: AVariant) -> bool {
    if !dev.lock().await.connected {
        return false;
    }
    step_yield(v.yields).await;
    let status = dev.lock().await.status;
    step_yield(v.yields).await;
    if v.buggy {
        let still = dev.lock().await.connected;
        step_yield(v.yields).await;
        if still {
            dev.lock().await.cache = status;
        }
    } else {
        let mut d = dev.lock().await;
        if d.connected {
            d.cache = status;
        }
    }
    true
}

/// The hotplug task: marks the monitor gone, then clears status and cache.
async fn hotplug(dev: Rc<Mutex<DevCell>>, v: AVariant) {
    dev.lock().await.connected = false;
    step_yield(v.yields).await;
    let mut d = dev.lock().await;
    d.status = 0;
    d.cache = 0;
}

/// Workload A: the poller and the hotplug task race; once both are done, a checker (the
/// `join` of the shuttle and loom versions) publishes the final cell for the invariant.
pub fn stale_status(sim: &mut Sim, v: AVariant) {
    let dev = Rc::new(Mutex::new(DevCell {
        connected: true,
        status: 0x5a,
        cache: 0,
    }));
    let end: Rc<Cell<Option<(bool, DevCell)>>> = Rc::new(Cell::new(None));
    let p = sim.spawn("poller", poller(dev.clone(), v));
    let h = sim.spawn("hotplug", hotplug(dev.clone(), v));
    let e2 = end.clone();
    sim.spawn("join", async move {
        let saw = p.await;
        h.await;
        let d = *dev.lock().await;
        e2.set(Some((saw, d)));
    });
    sim.invariant("no_stale_status_after_disconnect", move |_| {
        match end.get() {
            Some((true, d)) if !d.connected && d.cache != 0 => Err(format!(
                "status {:#04x} cached while disconnected, after the poller saw the monitor",
                d.cache
            )),
            _ => Ok(()),
        }
    });
}

/// A without explicit yields: the lock acquisitions are the only scheduling points.
#[calametra::scenario(schedules = 64, expect = "no_stale_status_after_disconnect")]
pub fn a_noyield_buggy(sim: &mut Sim) {
    stale_status(
        sim,
        AVariant {
            yields: false,
            buggy: true,
        },
    );
}

/// A with a `yield_now()` between steps.
#[calametra::scenario(schedules = 64, expect = "no_stale_status_after_disconnect")]
pub fn a_yield_buggy(sim: &mut Sim) {
    stale_status(
        sim,
        AVariant {
            yields: true,
            buggy: true,
        },
    );
}

/// The fixed poller (re-check and cache in one step), no explicit yields.
#[calametra::scenario(schedules = 64)]
pub fn a_noyield_correct(sim: &mut Sim) {
    stale_status(
        sim,
        AVariant {
            yields: false,
            buggy: false,
        },
    );
}

/// The fixed poller with a `yield_now()` between steps.
#[calametra::scenario(schedules = 64)]
pub fn a_yield_correct(sim: &mut Sim) {
    stale_status(
        sim,
        AVariant {
            yields: true,
            buggy: false,
        },
    );
}

// ---------------------------------------------------------------------------------------------
// B: shrinking.

/// Workload B: a driver draws up to 48 client operations against the status machine; the
/// invariant compares the driver's belief with the device's ground truth after every step.
#[calametra::scenario(schedules = 64, expect = "belief_matches_connection")]
pub fn b_status_ops(sim: &mut Sim) {
    let m = Rc::new(RefCell::new(Machine::new(true)));
    let m2 = m.clone();
    sim.spawn("driver", async move {
        for _ in 0..B_MAX_OPS {
            let Some(i) = client_choose(&Op::LABELS) else {
                return;
            };
            m2.borrow_mut().apply(Op::ALL[i]);
            // A scheduling point, so the invariant runs after every operation.
            yield_now().await;
        }
    });
    sim.invariant("belief_matches_connection", move |_| m.borrow().check());
}

// ---------------------------------------------------------------------------------------------
// C: a small simulated exchange.

const T: Duration = Duration::from_millis(10);

/// Workload C's driver: 20 control transfers (stores and loads) against a loopback device,
/// a random think time before each (the `data` stream), a retry after a stall. Counts the
/// messages that crossed the bus into `messages` (a request and its reply or handshake each).
pub async fn exchange_driver(iface: Interface, messages: Rc<Cell<u64>>) -> Result<(), String> {
    for i in 0..C_TRANSFERS {
        sleep(Duration::from_micros(50 + data_below(1000))).await;
        let mut tries = 0;
        loop {
            tries += 1;
            let r = if i % 2 == 0 {
                let out = ControlOut {
                    control_type: ControlType::Vendor,
                    recipient: Recipient::Device,
                    request: 0x01,
                    value: 0,
                    index: 0,
                    data: &[i as u8, 0xa5],
                };
                iface.control_out(out, T).await.map(|_| ())
            } else {
                let inp = ControlIn {
                    control_type: ControlType::Vendor,
                    recipient: Recipient::Device,
                    request: 0x02,
                    value: 0,
                    index: 0,
                    length: 2,
                };
                iface.control_in(inp, T).await.and_then(|d| {
                    if d == [i as u8 - 1, 0xa5] {
                        Ok(())
                    } else {
                        Err(TransferError::Fault)
                    }
                })
            };
            messages.set(messages.get() + 2);
            match r {
                Ok(()) => break,
                Err(TransferError::Stall) if tries < 3 => continue,
                Err(e) => return Err(format!("transfer {i} failed: {e}")),
            }
        }
    }
    Ok(())
}

thread_local! {
    /// Messages counted by the last run of [`c_exchange`] on this thread.
    pub static C_MESSAGES: Rc<Cell<u64>> = Rc::new(Cell::new(0));
}

/// Workload C: the driver against a loopback device; the fault schedule stalls one transfer.
#[calametra::scenario(fault_schedule = "faults/c-stall.json", schedules = 16)]
pub fn c_exchange(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    let messages = C_MESSAGES.with(|m| m.clone());
    messages.set(0);
    sim.spawn("driver", exchange_driver(dev.interface(), messages));
    sim.invariant("stored_is_whole", move |w| {
        let s = w.model(dev).stored();
        s.is_empty() || (s.len() == 2 && s[1] == 0xa5)
    });
}

/// The fault plan of `faults/c-stall.json`, as the harness loads it.
pub fn c_fault_plan() -> calametra_core::fault::FaultPlan {
    let text = include_str!("../faults/c-stall.json");
    calametra_core::fault::FaultPlan::parse(std::path::Path::new("faults/c-stall.json"), text)
        .expect("faults/c-stall.json is a valid fault schedule")
}
