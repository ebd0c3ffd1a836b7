//! What a driver or a guest sends a model: arbitrary 8-byte setups with data stages, bulk and
//! interrupt OUT payloads, IN polls, time passing and bus resets (`calametra_fuzz::Op`), through
//! `DeviceHost` against the Trigger 6 model and the DFU models built from the project's specs.
//! A model may stall and record a model gap; it may not panic. With no faults injected, the DFU
//! model's history must also stay legal under the DFU 1.1 transition table whatever the host
//! sends (`state_machine_legal`, an independent check).
//!
//! Input: a selector byte (the spec: `b % 4`; with bit 7 set, a seeded run that may draw any
//! fault at any transfer or transition, seed `(b >> 2) & 0x1f`), then the ops.
#![no_main]

use calametra_core::choices::Source;
use calametra_core::fault::FaultSet;
use calametra_core::host::DeviceHost;
use calametra_core::RunConfig;
use calametra_fuzz::{drive, models_from, observe, spec, Input, MAX_OPS, SPECS};
use calametra_models::dfu::{state_machine_legal, Dfu};
use calametra_qemu::Boxed;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let b = input.u8();
    let config = if b & 0x80 != 0 {
        RunConfig {
            source: Source::Seeded(u64::from((b >> 2) & 0x1f)),
            fault_set: FaultSet::All,
            ..RunConfig::default()
        }
    } else {
        RunConfig::default()
    };
    let Some(model) = models_from(spec(b as usize % SPECS.len())).pop() else {
        return;
    };
    let mut h = DeviceHost::new(model, &config);
    drive(&mut h, &mut input, MAX_OPS);
    observe(&mut h);
    if let Some(dfu) = h.device::<Boxed>().and_then(|b| b.get::<Dfu>()) {
        if let Err(m) = state_machine_legal(dfu) {
            panic!("the DFU model left the DFU 1.1 state machine: {m}");
        }
    }
});
