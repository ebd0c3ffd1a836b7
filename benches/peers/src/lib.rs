//! Side-by-side benchmarks of Calametra and its peers (shuttle, loom, madsim, turmoil, proptest,
//! proptest-state-machine) on the same three workloads:
//!
//! - **A**, stale status after disconnect: a poller and a hotplug task race on one device cell.
//! - **B**, shrinking: a six-operation state machine whose bug needs `GetStatus . Disconnect .
//!   GetStatus`; how long finding and shrinking take, and how short the result is.
//! - **C**, a small simulated exchange: a driver and a device trade about 20 requests and
//!   replies with a stall and random latency; simulations per second.
//! - **D**, a bug that needs two faults at the right sites and an external in a window (a
//!   stalled write, a failed CLEAR_HALT, a replug within a few steps): runs to find it for
//!   uniform seeds, the swarm, the priority strategy and the guided sweep.
//!
//! Each tool's version of a workload lives in its own module, written once, as alike as the
//! tools allow. The madsim versions live in the `madsim-peer` package (they need
//! `--cfg madsim` for the whole build). Wall-clock timing lives only in [`measure`] and the
//! binaries, never inside a simulated workload.

pub mod calametra_workloads;
pub mod loom_a;
pub mod machine;
pub mod measure;
pub mod proptest_b;
pub mod shuttle_a;
pub mod turmoil_c;
/// Workload D (Calametra only): a stalled write, a failed CLEAR_HALT and a replug within a few
/// steps; the scenario the core's tests use, one source.
#[path = "../../../calametra-core/tests/support/workload_d.rs"]
pub mod workload_d;

/// The seeds every tool runs with: 20 fixed seeds for the find and shrink workloads.
pub const SEEDS: [u64; 20] = [
    1, 2, 3, 5, 8, 13, 21, 34, 55, 89, 144, 233, 377, 610, 987, 1597, 2584, 4181, 6765, 10946,
];

/// Workload A's find measurement runs each tool from seeds `1..=A_SEEDS`. A run finds the race
/// with fixed odds, so runs-to-find are geometric: over 20 seeds their median moves by half
/// from one seed list to the next (shuttle's random scheduler, whose odds are 6.4% a run
/// without yields, has a median of 6 over [`SEEDS`] where its odds predict 10.5); over 200 it
/// stays within about 15%.
pub const A_SEEDS: u64 = 200;

/// The seed of throughput workloads (each repetition adds its index).
pub const THROUGHPUT_SEED: u64 = 0x5eed;

/// Repetitions of every throughput measurement (the table shows their median and range).
pub const REPS: usize = 5;

/// Runs a randomized tool may take to find workload A's bug before it counts as not found.
pub const FIND_BUDGET: u64 = 20_000;

/// Runs a seed of workload D may take (uniform seeds, the swarm, the priority strategy, the
/// guided sweep alike).
pub const D_BUDGET: u64 = 20_000;

/// Client operations per run in workload B (and the longest sequence proptest generates).
pub const B_MAX_OPS: usize = 48;

/// Transfers (request and reply pairs) per simulation in workload C.
pub const C_TRANSFERS: u32 = 20;

/// The transfer of workload C whose request the device stalls (0-based).
pub const C_STALL_AT: u32 = 6;

/// Silences panic messages: the peers report failures by panicking (shuttle, loom,
/// proptest-state-machine), and printing thousands of them would measure the terminal.
pub fn quiet_panics() {
    std::panic::set_hook(Box::new(|_| {}));
}
