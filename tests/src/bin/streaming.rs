//! Queued bulk IN transfers under faults (`tests/streaming.rs` drives this binary): a
//! streaming reader with four transfers in flight, fixed and with planted bugs, a stall
//! recovered with `clear_halt` and not, and a reader that reopens its device after a replug.

use calametra::prelude::*;
use calametra_tests::streaming::{replug_scenario, stream_scenario, Bug};

/// The fixed reader under stalls, timeouts, short packets and delays, and seeded schedules.
#[calametra::scenario(schedules = 16, faults = [stall, timeout, short, delay])]
fn stream_fixed(sim: &mut Sim) {
    stream_scenario(sim, Bug::None);
}

/// A reader that takes the stream as lossless: a lost sample goes unreported.
#[calametra::scenario(schedules = 16, faults = [stall, timeout, short, delay], expect = "no_sample_lost")]
fn stream_planted(sim: &mut Sim) {
    stream_scenario(sim, Bug::NoGapReport);
}

/// A stall on bulk IN, recovered with `clear_halt` (every stall site passes).
#[calametra::scenario(schedules = 4, faults = [stall])]
fn stall_recovered(sim: &mut Sim) {
    stream_scenario(sim, Bug::None);
}

/// The same stall without the recovery: the endpoint stays halted and the stream is lost.
#[calametra::scenario(schedules = 4, faults = [stall], expect = "no_sample_lost")]
fn stall_unrecovered(sim: &mut Sim) {
    stream_scenario(sim, Bug::NoClearHalt);
}

/// The reader finds its device through the host, and reopens it after the `unplug` external.
#[calametra::scenario(schedules = 16, faults = none, marks = ["reopened_after_replug"], marks_floor = 6)]
fn replug(sim: &mut Sim) {
    replug_scenario(sim);
}

calametra::main!();
