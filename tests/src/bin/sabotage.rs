//! Scenarios that break the rules on purpose: each must be caught, with a useful message.

use calametra::prelude::*;
#[allow(
    clippy::disallowed_types,
    reason = "leaks hash order on purpose: the harness must catch it"
)]
use std::collections::HashMap;

/// Iterates a std HashMap with RandomState and lets the order reach the trace.
#[calametra::scenario(schedules = 1)]
#[allow(
    clippy::disallowed_types,
    reason = "leaks hash order on purpose: the harness must catch it"
)]
fn hashmap_order(sim: &mut Sim) {
    let mut m = HashMap::new();
    for i in 0..16 {
        m.insert(format!("key{i}"), i);
    }
    sim.spawn("leaky", async move {
        for (k, _) in m.iter() {
            mark(k);
        }
    });
}

/// Reads the wall clock and lets it reach the trace.
#[calametra::scenario(schedules = 1)]
#[allow(
    clippy::disallowed_methods,
    reason = "leaks the wall clock on purpose: the harness must catch it"
)]
fn wall_clock(sim: &mut Sim) {
    sim.spawn("leaky", async move {
        let t = std::time::Instant::now();
        let mut x = 0u64;
        for i in 0..1000 {
            x = x.wrapping_add(i);
        }
        mark(&format!("took {:?} for {x}", t.elapsed()));
    });
}

/// Panics on some seeds (client draw 3): those trials fail, the others still run.
#[calametra::scenario(schedules = 12)]
fn panics_sometimes(sim: &mut Sim) {
    sim.spawn("driver", async {
        if let Some(3) = client_below(4) {
            panic!("driver bug: unexpected action 3");
        }
    });
}

/// A model that panics on its second request: one failed trial with the panic, not an aborted
/// test binary.
struct PanickyModel(u32);

impl Device for PanickyModel {
    fn control(&mut self, _cx: &mut DevCtx<'_>, _setup: &Setup, _data: &[u8]) -> Reply {
        self.0 += 1;
        if self.0 == 2 {
            panic!("model bug: request {} was never expected", self.0);
        }
        Reply::Data(vec![0])
    }
}

#[calametra::scenario(schedules = 2)]
fn model_panics(sim: &mut Sim) {
    let dev = sim.attach(PanickyModel(0));
    let iface = dev.interface();
    sim.spawn("driver", async move {
        for _ in 0..3 {
            let _ = iface
                .control_in(
                    ControlIn {
                        control_type: ControlType::Vendor,
                        recipient: Recipient::Device,
                        request: 1,
                        value: 0,
                        index: 0,
                        length: 1,
                    },
                    std::time::Duration::from_millis(5),
                )
                .await;
        }
    });
}

calametra::main!();
