//! A usbredir guest's bytes fed to the bridge serving a model built from the project's specs
//! (the Trigger 6 dock, the DFU devices), in arbitrary read sizes with idle ticks between:
//! whatever the guest sends, the bridge and the model answer or drop it without panicking.
//!
//! Input: a flags byte (model, bridge options, read sizes), a faults byte (bit 7: a seeded run
//! that may draw any fault at any transfer or transition, seed in the low bits), the stream.
#![no_main]

use calametra_core::choices::Source;
use calametra_core::fault::FaultSet;
use calametra_core::host::DeviceHost;
use calametra_core::RunConfig;
use calametra_fuzz::{models_from, observe, spec, Input, SPECS};
use calametra_models::dfu::marks::{WILL_DETACH_TO_APP, WILL_DETACH_TO_DFU};
use calametra_qemu::{Bridge, BridgeOptions};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut input = Input::new(data);
    let flags = input.u8();
    let faults = input.u8();
    let config = if faults & 0x80 != 0 {
        RunConfig {
            source: Source::Seeded(u64::from(faults & 0x7f)),
            fault_set: FaultSet::All,
            ..RunConfig::default()
        }
    } else {
        RunConfig::default()
    };
    let Some(model) = models_from(spec(flags as usize % SPECS.len())).pop() else {
        return;
    };
    let opts = BridgeOptions {
        warp_after_request: flags & 0x04 != 0,
        defer_connect: flags & 0x08 != 0,
        reenumerate_marks: if flags & 0x10 != 0 {
            vec![WILL_DETACH_TO_DFU.into(), WILL_DETACH_TO_APP.into()]
        } else {
            Vec::new()
        },
        ..BridgeOptions::default()
    };
    let Ok(mut bridge) = Bridge::new(DeviceHost::new(model, &config), opts) else {
        return;
    };
    bridge.start();
    let mut chunk = (flags >> 5) as usize * 16 + 1;
    let mut round = 0u32;
    while !input.is_empty() && round < 4096 {
        round += 1;
        let bytes = input.take(chunk);
        chunk = chunk * 7 % 251 + 1;
        if bridge.feed(bytes).is_err() {
            break;
        }
        let _ = bridge.take_output();
        if round % 3 == 0 {
            bridge.idle_tick();
        }
        if round == 5 {
            bridge.plug_in();
        }
    }
    let _ = bridge.stats();
    let mut h = bridge.into_host();
    observe(&mut h);
});
