//! A scenario that leaks `HashMap` iteration order into its trace, on purpose: the determinism
//! runner's subject (`tests/tests/determinism.rs`).
//!
//! `leaky [SEED]` runs the scenario `hash_order` once (seeded schedule SEED, default 7) and
//! writes the run's trace file (its records and a `summary` record) where `CALAMETRA_TRACE_OUT`
//! says, as a harness trial does for `calametra determinism`:
//!
//! ```text
//! calametra determinism --runs 50 --parallel 2 -- target/debug/leaky 7
//! ```
//!
//! The driver stores each setting of a `std::collections::HashMap` into a loopback device, in
//! the map's iteration order. That order comes from the map's `RandomState`, seeded from the OS
//! in every process, so two processes running the same seed store the settings in different
//! orders about half of the time: same seed, different trace.

use calametra::choices::Source;
use calametra::prelude::*;
use calametra::report::write_trace;
use calametra::{run, RunConfig};
use std::path::Path;
use std::time::Duration;

/// The settings the driver stores, by name.
#[allow(
    clippy::disallowed_types,
    reason = "the leak under test: a std HashMap's iteration order differs between processes"
)]
fn settings() -> std::collections::HashMap<&'static str, u8> {
    [("brightness", 0x40), ("contrast", 0x30)]
        .into_iter()
        .collect()
}

/// The loopback device and a driver that stores every setting and reads it back.
fn hash_order(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    let iface = dev.interface();
    sim.spawn("driver", async move {
        // The leak: the map's iteration order, not a choice stream, orders the transfers.
        for (name, value) in settings() {
            mark(name);
            let out = ControlOut {
                control_type: ControlType::Vendor,
                recipient: Recipient::Device,
                request: 1,
                value: 0,
                index: 0,
                data: &[value],
            };
            let _ = iface.control_out(out, Duration::from_millis(5)).await;
            let read = ControlIn {
                control_type: ControlType::Vendor,
                recipient: Recipient::Device,
                request: 2,
                value: 0,
                index: 0,
                length: 1,
            };
            let _ = iface.control_in(read, Duration::from_millis(5)).await;
            sleep(Duration::from_micros(data_below(50))).await;
        }
    });
}

fn main() {
    let seed = match std::env::args().nth(1) {
        None => 7,
        Some(a) => match a.strip_prefix("0x") {
            Some(h) => u64::from_str_radix(h, 16),
            None => a.parse(),
        }
        .unwrap_or_else(|_| {
            eprintln!("leaky: `{a}`: expected a seed");
            std::process::exit(2)
        }),
    };
    let r = run(
        RunConfig {
            source: Source::Seeded(seed),
            keep_trace: true,
            ..RunConfig::default()
        },
        &hash_order,
    );
    println!(
        "leaky: hash_order seed {seed:#x}: {} ({} records, {})",
        r.hash,
        r.records,
        match &r.failure {
            None => "pass".to_string(),
            Some(f) => f.to_string(),
        }
    );
    if let Some(out) = std::env::var_os("CALAMETRA_TRACE_OUT") {
        if let Err(e) = write_trace(
            Path::new(&out),
            &r.lines,
            "hash_order",
            "calametra-tests",
            "leaky",
            &r.events,
            &r.hash.to_string(),
            r.failure.as_ref().map(|f| f.to_string()).as_deref(),
        ) {
            eprintln!("leaky: CALAMETRA_TRACE_OUT: {e}");
            std::process::exit(2);
        }
    }
}
