//! dfu-core, a published DFU host library, under the harness: the user's update
//! (`calametra_example_dfu_core_driver::update`) against the DFU 1.1 model, with the invariants
//! a user would write.
//!
//! `cargo test -p calametra-example-dfu-core-driver --test scenarios -- --list` shows the
//! trials.

use calametra::prelude::*;
use calametra_core::spec::Spec;
use calametra_example_dfu_core_driver::update::{update, Report};
use calametra_models::dfu::{installed_as_claimed, seal_image, watch_never_bricked_and_legal, Dfu};
use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::time::Duration;

/// What the update reported, once its task ended.
type Outcome = Rc<RefCell<Option<Result<Report, String>>>>;

/// How long a user waits for the update's answer, in virtual time (the update takes about
/// 90 ms: detach, 8 blocks, manifestation).
const DEADLINE: Duration = Duration::from_secs(10);

/// Bytes of the image installed (CRC-32 trailer included): 8 blocks of wTransferSize 2048.
const IMAGE_LEN: usize = 16 * 1024;

/// The image: a deterministic pattern sealed with the CRC-32 trailer the spec's
/// `flash.image_check` asks for, made once per process.
fn image() -> &'static [u8] {
    static IMAGE: std::sync::OnceLock<Vec<u8>> = std::sync::OnceLock::new();
    IMAGE.get_or_init(|| {
        let body: Vec<u8> = (0..IMAGE_LEN - 4)
            .map(|i| (i as u32).wrapping_mul(2_654_435_761).to_le_bytes()[3])
            .collect();
        seal_image(&body)
    })
}

/// The DFU model of `spec`, dfu-core's update against it, and the invariants:
///
/// - `installed_as_claimed`: once the update reports success, the device's flash holds the
///   image (checked after every step, from the moment of the claim);
/// - `never_bricked`: the device always holds the old image or the complete new one, so it is
///   never left unusable;
/// - `state_machine_legal`: every state change of the model is in the DFU 1.1 table (the
///   model's own sanity, so a finding is not a model slip);
/// - `answers_in_time`: the update has answered (success or error) within [`DEADLINE`] of
///   virtual time: no hang. The scenarios' `virtual_timeout` stays the backstop.
///
/// With `must_succeed`, a failed update fails the run (its task returns the error): for
/// scenarios without faults, where nothing excuses a failure.
fn judged(sim: &mut Sim, path: &str, bytes: &[u8], must_succeed: bool) -> Outcome {
    let spec = match Spec::parse(path, bytes) {
        Ok(s) => s,
        Err(e) => panic!("calametra: {e}"),
    };
    let dfu = Dfu::from_spec(&spec);
    let old: Rc<[u8]> = dfu.valid_image().unwrap_or_default().into();
    let new = image();
    let dev = sim.attach(dfu);
    let iface = dev.interface();
    let outcome: Outcome = Rc::new(RefCell::new(None));
    {
        let outcome = outcome.clone();
        sim.spawn("dfu-core", async move {
            let r = update(&iface, new).await.map_err(|e| e.to_string());
            *outcome.borrow_mut() = Some(r.clone());
            match r {
                Err(e) if must_succeed => Err(e),
                _ => Ok(()),
            }
        });
    }
    {
        let outcome = outcome.clone();
        sim.invariant("installed_as_claimed", move |w| match &*outcome.borrow() {
            Some(Ok(_)) => installed_as_claimed(w.model(dev), new),
            _ => Ok(()),
        });
    }
    {
        let outcome = outcome.clone();
        let late = Rc::new(Cell::new(false));
        let l2 = late.clone();
        sim.spawn_daemon("deadline", async move {
            sleep(DEADLINE).await;
            l2.set(true);
        });
        sim.invariant("answers_in_time", move |w| {
            if late.get() && outcome.borrow().is_none() {
                let d = w.model(dev);
                return Err(format!(
                    "no answer from the update after {DEADLINE:?} of virtual time (device state {}, bwPollTimeout last reported {} ms)",
                    d.state(),
                    d.poll_timeout_ms()
                ));
            }
            Ok(())
        });
    }
    watch_never_bricked_and_legal(sim, dev, old, new);
    outcome
}

const TOLERANT: &[u8] = include_bytes!("../../../specs/dfu11-tolerant.json");
const NONTOLERANT: &[u8] = include_bytes!("../../../specs/dfu11-nontolerant.json");
const NODETACH: &[u8] = include_bytes!("../specs/dfu11-nontolerant-nodetach.json");

/// Without faults, over seeded schedules, dfu-core installs the image on the tolerant device.
#[calametra::scenario(spec = "../../specs/dfu11-tolerant.json", schedules = 8, faults = none)]
fn update_succeeds_without_faults(sim: &mut Sim) {
    judged(sim, "specs/dfu11-tolerant.json", TOLERANT, true);
}

/// The tolerant device under every fault primitive but `corrupt` at every site of the
/// baseline (transfers and the model's transitions) and seeded schedules: no invariant breaks.
/// `corrupt` is left out since seeded runs draw its offset and mask: a DFU_GETSTATUS
/// corrupted in its bwPollTimeout is Finding 2 (`huge_poll_timeout_hangs`), which dfu-core
/// sleeps in full, and seeds reach it (`update_tolerant::seed::0x8652e450ff6` did, and still
/// does with `corrupt` at IN payloads only: `corrupt(566,0xe3) at ctrl.getstatus#13`, a reply
/// dfu-core receives and trusts, so the finding is dfu-core's; with `faults = all` that seed is
/// the only failure of 200, the site trials all pass).
#[calametra::scenario(spec = "../../specs/dfu11-tolerant.json", schedules = 16, faults = [stall, timeout, short, disconnect, delay])]
fn update_tolerant(sim: &mut Sim) {
    judged(sim, "specs/dfu11-tolerant.json", TOLERANT, false);
}

/// A DFU_GETSTATUS answer cut to 3 bytes (exploration's `short(len/2)` of the 6-byte answer,
/// since a site's length is the answer's; it halved the 2048 bytes dfu-core asks for before):
/// dfu-core reports it as an error, and the device keeps its old image.
#[calametra::scenario(
    spec = "../../specs/dfu11-tolerant.json",
    fault_schedule = "specs/faults/getstatus-short-answer.json",
    schedules = 2,
    faults = none
)]
fn short_status_answer_is_an_error(sim: &mut Sim) {
    let outcome = judged(sim, "specs/dfu11-tolerant.json", TOLERANT, false);
    sim.invariant("short_answer_reported", move |_| match &*outcome.borrow() {
        Some(Ok(_)) => Err("the update reported success over a 3-byte status".to_string()),
        Some(Err(e)) if !e.contains("too short") => Err(format!("another error: {e}")),
        _ => Ok(()),
    });
}

/// Finding 2: a bwPollTimeout garbled to 0xff0004 ms is slept in full: the update hangs for
/// 4.6 hours of virtual time.
#[calametra::scenario(
    spec = "../../specs/dfu11-tolerant.json",
    fault_schedule = "specs/faults/getstatus-huge-poll-timeout.json",
    schedules = 2,
    faults = none,
    expect = "answers_in_time"
)]
fn huge_poll_timeout_hangs(sim: &mut Sim) {
    judged(sim, "specs/dfu11-tolerant.json", TOLERANT, false);
}

/// Finding 1: on a non-tolerant WillDetach device, dfu-core reports success at the first
/// dfuMANIFEST status, before the device has written the image.
#[calametra::scenario(spec = "../../specs/dfu11-nontolerant.json", schedules = 2, faults = transport, expect = "installed_as_claimed")]
fn nontolerant_success_before_manifestation(sim: &mut Sim) {
    judged(sim, "specs/dfu11-nontolerant.json", NONTOLERANT, false);
}

/// Finding 1, with harm: on a non-tolerant device without WillDetach, dfu-core resets the bus
/// while the device is still in dfuMANIFEST, and reports success; the image is never
/// installed.
#[calametra::scenario(spec = "specs/dfu11-nontolerant-nodetach.json", schedules = 2, faults = transport, expect = "installed_as_claimed")]
fn nodetach_reset_during_manifestation(sim: &mut Sim) {
    judged(
        sim,
        "specs/dfu11-nontolerant-nodetach.json",
        NODETACH,
        false,
    );
}

calametra::main!();
