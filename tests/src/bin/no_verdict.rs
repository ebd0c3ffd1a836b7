//! A harness binary whose one guest scenario never gets a verdict: its runner ends every run as
//! the lockstep QEMU's watchdog ends a guest that makes no progress (`Err("emulator_blocked:
//! <reason>")`, what `calametra_qemu::scenario::run_result` returns), without QEMU. It shows how
//! a no-verdict trial reads in libtest's and nextest's output (`tests/tests/no_verdict.rs`).
//!
//! The scenario is registered by hand, as `#[calametra::scenario(guest = lockstep)]` registers
//! one, with its own runner in place of `calametra_qemu::scenario::runner`.

use calametra::__private::{inventory, Body, FaultsArg, ScenarioDef};
use calametra::explore::Runner;
use calametra::{RunConfig, RunResult};

/// The reason the watchdog gives for a guest that stopped making progress.
const REASON: &str = "no console output and no USB traffic while the guest's clock advanced 61.0 s (budget 60s of guest time)";

/// A guest runner whose every run ends `emulator_blocked`.
struct Blocked;

impl Runner for Blocked {
    fn run(&self, _config: RunConfig) -> Result<RunResult, String> {
        Err(format!("emulator_blocked: {REASON}"))
    }
}

fn blocked() -> Result<Box<dyn Runner>, String> {
    Ok(Box::new(Blocked))
}

inventory::submit! {
    ScenarioDef {
        module: module_path!(),
        name: "stuck_guest",
        func: Body::Guest(blocked),
        manifest_dir: env!("CARGO_MANIFEST_DIR"),
        package: env!("CARGO_PKG_NAME"),
        target: env!("CARGO_CRATE_NAME"),
        spec: None,
        fault_schedule: None,
        schedules: Some(1),
        faults: FaultsArg::None,
        seed: None,
        max_steps: None,
        virtual_timeout_ns: None,
        expect: None,
        marks: Vec::new,
        marks_floor: None,
    }
}

calametra::main!();
