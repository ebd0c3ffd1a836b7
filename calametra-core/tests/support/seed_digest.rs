//! The seed digest: one SHA-256 over the trace hashes of many seeded runs of a loopback
//! workload (control IN and OUT, bulk OUT and IN, a transition, timers) under every fault set
//! a scenario could declare without naming a primitive added later. Compiled twice, against
//! the table as shipped (`tests/added_primitive.rs`) and against the test build's table with
//! one primitive added (`fault::tests`), and pinned to one value in both: adding a primitive
//! changed no seed's run (DESIGN.md, "Adding a fault primitive").
//!
//! The includer names the core crate `cc` (`use calametra_core as cc;` or `use crate as
//! cc;`), so the one file compiles in both places.

use super::cc;
use cc::choices::Source;
use cc::device::Loopback;
use cc::fault::{FaultKind, FaultSet};
use cc::{run, RunConfig, Sim};
use sha2::{Digest, Sha256};
use std::time::Duration;

const T: Duration = Duration::from_millis(100);

/// Two tasks on one loopback device: stores and loads over control transfers, queues and
/// reads bulk payloads, with timers between.
fn workload(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    for (name, n) in [("a", 3u8), ("b", 5u8)] {
        let iface = dev.interface();
        sim.spawn(name, async move {
            for i in 0..4u8 {
                let data = vec![n ^ i; usize::from(n + i)];
                let _ = iface.control_out(Loopback::store(&data), T).await;
                let _ = iface.control_in(Loopback::load(64), T).await;
                let _ = iface.bulk_out(0x01, data.clone()).await;
                let _ = iface.bulk_in(0x81, 64).await;
                let _ = iface.control_out(Loopback::store(&[]), T).await;
                cc::exec::sleep(Duration::from_micros(u64::from(10 + n))).await;
            }
        });
    }
}

/// The fault sets of the digest: `none`, `transport`, `all`, and lists of the primitives
/// swarms came with.
pub fn sets() -> Vec<FaultSet> {
    use FaultKind::*;
    vec![
        FaultSet::None,
        FaultSet::Transport,
        FaultSet::All,
        FaultSet::Only(vec![Stall]),
        FaultSet::Only(vec![Short, Corrupt]),
        FaultSet::Only(vec![Timeout, Disconnect, Delay]),
    ]
}

/// The digest of `seeds` seeded runs (swarm on, as `seed::` trials run) under each of
/// [`sets`], as hex, and how many of those runs injected a fault (so the digest is known to
/// cover faulted runs).
pub fn digest(seeds: u64) -> (String, usize) {
    let mut h = Sha256::new();
    let mut faulted = 0;
    for set in sets() {
        for seed in 0..seeds {
            let r = run(
                RunConfig {
                    source: Source::Seeded(seed),
                    fault_set: set.clone(),
                    ..RunConfig::default()
                },
                &workload,
            );
            if r.events
                .iter()
                .any(|e| matches!(e, cc::choices::Event::Fault { .. }))
            {
                faulted += 1;
            }
            h.update(r.hash.to_string().as_bytes());
            h.update(b"\n");
        }
    }
    let hex = h.finalize().iter().map(|b| format!("{b:02x}")).collect();
    (hex, faulted)
}

/// The digest's pinned value for 64 seeds, taken from the table as shipped and equal with the
/// test build's added primitive. It was `4a25a670b5415c17d82aecaefd852bf4b10bb2b0bcb79aef2649e557a6b3f833`
/// (the code before the table, and the table) until seeded runs drew `short` and `corrupt`
/// parameters from their own streams and a `short` at an IN transfer cut the reply (issue 41):
/// the runs that inject those changed by design, and the value was taken again, from the
/// shipped table. It was then `05cec2a13e292cca97dbf53d9f598a08df2e3b60ee3027047b219b3a5301ccc2`
/// (still, with `garble` added to the table) until `corrupt` was restricted to IN payloads
/// (`payload: in`): the runs under `transport`, `all` and `[short, corrupt]` that could draw
/// `corrupt` at the workload's control OUT (`store`) and bulk OUT sites draw among fewer
/// candidates there, and their swarms see no `corrupt` at `bulk.out`, by design; the value was
/// taken again, from the shipped table, and the test build's (with `zero`) gives the same. It
/// was then `ffeb83c1470d712e4a183fca977c1ef43456165a6658a97c0cf9dde199fad84b` until `short`
/// at an OUT payload cut at a packet boundary only (a packet crosses whole or not at all): the
/// runs that draw `short` at the workload's control OUT (`store`, 2 bytes, the loopback's EP0
/// of 64) or bulk OUT now draw 0 (one packet) instead of any shorter length, by design; taken
/// again from the shipped table, and the test build's gives the same.
pub const PINNED_64: &str = "34853d43cab47a0ea86017f59c897e85ac6673ac18172ab41f8abfd4abd10cb3";
