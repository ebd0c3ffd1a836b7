//! The Calametra scenario of the updater: a DFU model from an embedded spec on the simulated
//! bus, the real [`update`] against it with a 64 KiB image, and the invariants that judge the
//! run.
//!
//! What a run must show (the acceptance contract, checked after every step):
//! - `never_bricked`: the device holds the old image or the complete new one, and never marked
//!   anything else valid;
//! - `state_machine_legal`: every state change of the model is in the DFU 1.1 table;
//! - `installed_as_claimed`: once the updater reports success, the device holds the new image;
//! - and the updater task ends with `Ok` (the new image installed and verified) or with
//!   [`UpdateError::Disconnected`] / [`UpdateError::Reattached`] (the device left the bus, which
//!   in this simulator it never rejoins; the invariants above then guarantee it still holds a
//!   valid image). Any other error fails the run: every other single fault is recoverable.

use crate::updater::{update, Options, Report, UpdateError};
use calametra_core::spec::Spec;
use calametra_core::Sim;
use calametra_models::dfu::{installed_as_claimed, seal_image, watch_never_bricked_and_legal, Dfu};
use std::cell::RefCell;
use std::rc::Rc;

/// `specs/dfu11-tolerant.json`, embedded: the device [`scenario`] updates.
pub const TOLERANT_SPEC: &[u8] = include_bytes!("../../../specs/dfu11-tolerant.json");

/// `specs/dfu11-nontolerant.json`, embedded.
pub const NONTOLERANT_SPEC: &[u8] = include_bytes!("../../../specs/dfu11-nontolerant.json");

/// Bytes in the new image (CRC-32 trailer included).
pub const IMAGE_LEN: usize = 64 * 1024;

/// The updater's result, filled in when its task ends.
pub type Outcome = Rc<RefCell<Option<Result<Report, UpdateError>>>>;

/// The 64 KiB image the scenario installs: a deterministic pattern with the CRC-32 trailer the
/// spec's `flash.image_check` asks for.
pub fn new_image() -> Vec<u8> {
    image().to_vec()
}

/// [`new_image`], computed once per process (exploration runs the scenario thousands of times).
fn image() -> &'static [u8] {
    static IMAGE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    IMAGE.get_or_init(make_image)
}

fn make_image() -> Vec<u8> {
    let mut x: u32 = 0x2545_f491;
    let body: Vec<u8> = (0..IMAGE_LEN - 4)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect();
    seal_image(&body)
}

/// Updates the manifestation-tolerant DFU device of `specs/dfu11-tolerant.json` from run-time
/// mode to [`new_image`], with the invariants described in the module docs. Ready to be wrapped
/// by `#[calametra::scenario(spec = "specs/dfu11-tolerant.json", faults = all)]`.
pub fn scenario(sim: &mut Sim) {
    scenario_with(sim, "specs/dfu11-tolerant.json", TOLERANT_SPEC);
}

/// [`scenario`] against the manifestation non-tolerant device (`specs/dfu11-nontolerant.json`).
pub fn scenario_nontolerant(sim: &mut Sim) {
    scenario_with(sim, "specs/dfu11-nontolerant.json", NONTOLERANT_SPEC);
}

/// The scenario for any DFU spec; returns the cell the updater's result lands in.
///
/// # Panics
///
/// When `spec` is not a valid DFU spec (the message names `path` and the field): scenarios
/// embed their spec at compile time.
pub fn scenario_with(sim: &mut Sim, path: &str, spec: &[u8]) -> Outcome {
    scenario_with_options(sim, path, spec, Options::default())
}

/// [`scenario`] with the planted bug, whatever the build's features.
pub fn scenario_planted(sim: &mut Sim) {
    let options = Options {
        planted_bug: true,
        ..Options::default()
    };
    scenario_with_options(sim, "specs/dfu11-tolerant.json", TOLERANT_SPEC, options);
}

/// [`scenario_with`] with the updater's options.
pub fn scenario_with_options(sim: &mut Sim, path: &str, spec: &[u8], options: Options) -> Outcome {
    let spec = match Spec::parse(path, spec) {
        Ok(s) => s,
        Err(e) => panic!("calametra: {e}"),
    };
    let dfu = Dfu::from_spec(&spec);
    let old: Rc<[u8]> = dfu.valid_image().unwrap_or_default().into();
    let new: &'static [u8] = image();
    let dev = sim.attach(dfu);
    let iface = dev.interface();
    let outcome: Outcome = Rc::new(RefCell::new(None));
    {
        let outcome = outcome.clone();
        sim.spawn("updater", async move {
            let r = update(&iface, new, &options).await;
            *outcome.borrow_mut() = Some(r.clone());
            match r {
                Ok(_) | Err(UpdateError::Disconnected | UpdateError::Reattached { .. }) => Ok(()),
                Err(e) => Err(e),
            }
        });
    }
    watch_never_bricked_and_legal(sim, dev, old, new);
    {
        let outcome = outcome.clone();
        sim.invariant("installed_as_claimed", move |w| match &*outcome.borrow() {
            Some(Ok(_)) => installed_as_claimed(w.model(dev), new),
            _ => Ok(()),
        });
    }
    outcome
}
