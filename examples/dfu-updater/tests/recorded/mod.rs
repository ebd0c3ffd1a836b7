//! The updater's run recorded through `calametra-usb`'s recorder as a usbmon pcapng, and a
//! model learned from it: shared by `tests/learned.rs` and `benches/learned.rs`.

use calametra_capture::learn::{learn, Input, Selection};
use calametra_core::explore::Probe;
use calametra_core::spec::Spec;
use calametra_core::{run, RunConfig, Sim};
use calametra_example_dfu_updater::{new_image, update, Options, UpdateError};
use calametra_models::dfu::Dfu;

/// The updater's task, judged as the hand scenario judges it (the DFU invariants need the DFU
/// model's ground truth, which a learned model does not have).
pub fn updater(sim: &mut Sim, iface: calametra_core::interface::Interface) {
    sim.spawn("updater", async move {
        match update(&iface, &new_image(), &Options::default()).await {
            Ok(_) | Err(UpdateError::Disconnected | UpdateError::Reattached { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    });
}

/// The hand model's baseline recorded on the driver's side, as on hardware: the updater's
/// interface wrapped in `calametra_usb::record::Recorder` (virtual times), a usbmon pcapng.
pub fn record_baseline_pcapng() -> Vec<u8> {
    use calametra_usb::record::{Recorder, Recording};
    let spec = Spec::parse(
        "specs/dfu11-tolerant.json",
        calametra_example_dfu_updater::scenario::TOLERANT_SPEC,
    )
    .unwrap();
    let recording = Recording::in_memory();
    let rec = recording.clone();
    let clock = || std::time::Duration::from_nanos(calametra_core::exec::now());
    let r = run(
        Probe::Baseline.config(&RunConfig::default()),
        &move |sim: &mut Sim| {
            let dev = sim.attach(Dfu::from_spec(&spec));
            let iface =
                Recorder::with_clock(dev.interface(), &rec, clock as fn() -> std::time::Duration);
            sim.spawn("updater", async move {
                match update(&iface, &new_image(), &Options::default()).await {
                    Ok(_) | Err(UpdateError::Disconnected | UpdateError::Reattached { .. }) => {
                        Ok(())
                    }
                    Err(e) => Err(e),
                }
            });
        },
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    recording.bytes().expect("in memory")
}

/// The spec learned from the updater's recorded run ([`record_baseline_pcapng`], as a user
/// records on hardware), and what `learn` said of it.
pub fn learned_spec() -> (Spec, String) {
    let pcapng = record_baseline_pcapng();
    let input = Input::parse("dfu-updater-baseline.pcapng", &pcapng).unwrap();
    let (learned, report) = learn(&[input], &Selection::Only).unwrap();
    let spec = Spec::parse("specs/dfu-learned.json", &learned.to_json()).unwrap();
    (spec, report.to_string())
}
