//! The DFU model in a state dump (`RunConfig::stop_at`, what `calametra replay FILE --at STEP`
//! prints): at the start of the update the device is in its run-time mode; halfway it is in
//! DFU mode, downloading, with blocks counted; the stopped run ends `stopped`.

use calametra_core::state::StateDump;
use calametra_core::{run, RunConfig};
use calametra_example_dfu_updater::scenario;

fn at(step: u64) -> StateDump {
    let r = run(
        RunConfig {
            stop_at: Some(step),
            keep_trace: true,
            ..RunConfig::default()
        },
        &scenario,
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let last = r.lines.last().expect("kept");
    assert!(last.contains("\"outcome\":\"stopped\""), "{last}");
    r.state.expect("asked for")
}

#[test]
fn the_dfu_model_describes_itself_at_a_step() {
    let steps = run(RunConfig::default(), &scenario).steps;
    let start = at(0);
    let mid = at(steps / 2);
    println!("{}\n{}", start.render(), mid.render());
    assert_eq!(start.device_field("dfu", "state"), Some("appIDLE"));
    assert_eq!(start.device_field("dfu", "next block"), Some("0"));
    let state = mid.device_field("dfu", "state").unwrap();
    assert!(state.starts_with("dfu"), "{state}");
    let blocks: u32 = mid
        .device_field("dfu", "next block")
        .unwrap()
        .parse()
        .unwrap();
    assert!(blocks > 0, "{}", mid.render());
    assert_eq!(mid.device_field("dfu", "powered"), Some("true"));
}
