//! The DFU updater under the Calametra harness: a 64 KiB update against the DFU 1.1 model under
//! every fault at every site of its baseline (transfers and the model's transitions) and the
//! seeded schedules, and the planted bug, which exploration must find and minimize.
//!
//! `cargo test -p calametra-example-dfu-updater --test scenarios -- --list` shows the trials.

use calametra::prelude::*;
use calametra_example_dfu_updater::{scenario, scenario_nontolerant, scenario_planted};
use calametra_models::dfu::marks;

/// The coverage marks an update should reach: each by at least three of the fixed seeds
/// (the `update_tolerant::marks` trial prints every mark's count when one falls short).
const MARKS: [&str; 13] = [
    marks::DETACH,
    marks::WILL_DETACH_TO_DFU,
    marks::DOWNLOAD_START,
    marks::END_OF_IMAGE,
    marks::MANIFESTED,
    marks::UPLOAD_SHORT_FRAME,
    marks::STALL_TO_ERROR,
    marks::ERROR_CLEARED,
    marks::TRANSITION_REFUSED,
    marks::GETSTATUS_DURING_DNBUSY,
    marks::BAD_BLOCK_LENGTH,
    marks::MANIFEST_REFUSED,
    marks::ABORT_UPLOAD,
];

/// The correct updater against the manifestation-tolerant device: never bricked, the state
/// machine always legal, the image installed when the updater says so; every mark of `MARKS`
/// reached by at least three of its 80 seeds.
///
/// Every primitive of `all` and `garble`: a download block the device misreads (`garble` of a
/// DFU_DNLOAD's data) is what its image check at the end of the download refuses
/// (`ManifestRefused`), and the updater must start the download again. `corrupt` alone no longer
/// reaches that: it corrupts the answers the updater receives, not the blocks it sends. 80
/// seeds, not 64: of the first 64, two reach `ManifestRefused` (the floor is three).
#[calametra::scenario(
    spec = "../../specs/dfu11-tolerant.json",
    schedules = 80,
    faults = [stall, timeout, short, disconnect, delay, corrupt, garble],
    marks = MARKS,
    marks_floor = 3
)]
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
