//! The DFU updater under the Calametra harness: a 64 KiB update against the DFU 1.1 model under
//! every fault at every site of its baseline (transfers and the model's transitions) and the
//! seeded schedules, and the planted bug, which exploration must find and minimize.
//!
//! `cargo test -p calametra-example-dfu-updater --test scenarios -- --list` shows the trials.

use calametra::prelude::*;
use calametra_example_dfu_updater::{scenario, scenario_nontolerant, scenario_planted};

/// The correct updater against the manifestation-tolerant device: never bricked, the state
/// machine always legal, the image installed when the updater says so.
#[calametra::scenario(spec = "../../specs/dfu11-tolerant.json", schedules = 32, faults = all)]
fn update_tolerant(sim: &mut Sim) {
    scenario(sim);
}

/// The same against the non-tolerant device, under transport faults.
#[calametra::scenario(spec = "../../specs/dfu11-nontolerant.json", schedules = 16, faults = transport)]
fn update_nontolerant(sim: &mut Sim) {
    scenario_nontolerant(sim);
}

/// The planted bug: a failed DFU_GETSTATUS after the final block read as "the device reset into
/// the new firmware". Exploration must break `installed_as_claimed`.
#[calametra::scenario(spec = "../../specs/dfu11-tolerant.json", schedules = 64, faults = transport, expect = "installed_as_claimed")]
fn planted_success_without_manifest(sim: &mut Sim) {
    scenario_planted(sim);
}

calametra::main!();
