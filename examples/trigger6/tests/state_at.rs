//! The world at a step of the committed Trigger 6 regression case
//! (`calametra-regressions/scenarios/stale_status_after_disconnect/7c49fc39c79d.json`: an
//! unplug at step 70), through the core API a test binary uses for `calametra replay FILE --at
//! STEP`: the case's events replayed in process with `RunConfig::stop_at`. Just before the
//! unplug (step 70, the step the case places it at) the monitor is on output 0; just after it
//! (step 71) it is gone, the model has raised the second hotplug interrupt and marked the stale
//! status.

use calametra_core::choices::Event;
use calametra_core::explore::replay_config;
use calametra_core::regress::Regression;
use calametra_core::state::StateDump;
use calametra_core::{run, RunConfig};
use calametra_example_trigger6::scenario_planted;
use std::path::Path;

const CASE: &str =
    "calametra-regressions/scenarios/stale_status_after_disconnect/7c49fc39c79d.json";

fn case() -> Regression {
    Regression::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join(CASE)).expect("the committed case")
}

/// The step the case's unplug fires at.
fn unplug_step() -> u64 {
    case()
        .events
        .iter()
        .find_map(|e| match e {
            Event::External { name, point } if name == "unplug" => Some(*point),
            _ => None,
        })
        .expect("the case unplugs the monitor")
}

fn at(step: u64) -> StateDump {
    let reg = case();
    let mut c = replay_config(&RunConfig::default(), &reg.events);
    c.keep_trace = true;
    c.stop_at = Some(step);
    let r = run(c, &scenario_planted);
    let s = r.state.expect("a stop was asked for");
    // The dump survives the JSON a test binary writes for CALAMETRA_STATE_OUT.
    assert_eq!(StateDump::from_json(&s.to_json()).unwrap(), s);
    s
}

#[test]
fn the_case_replays_in_process_as_the_harness_replays_it() {
    let reg = case();
    let r = run(
        replay_config(&RunConfig::default(), &reg.events),
        &scenario_planted,
    );
    assert_eq!(r.hash.to_string(), reg.trace_hash);
    assert!(r.state.is_none());
    assert!(reg.events.iter().any(|e| e.to_string().contains("unplug")));
}

#[test]
fn the_model_just_before_and_just_after_the_unplug() {
    let p = unplug_step();
    let before = at(p);
    let after = at(p + 1);
    assert!(
        before.ended.is_none() && after.ended.is_none(),
        "stopped, not ended"
    );
    println!("{}\n{}", before.render(), after.render());
    assert!(before.reached && after.reached);
    assert_eq!((before.step, after.step), (p, p + 1));
    let dock = &before.devices[0].name;
    let field = |s: &StateDump, f: &str| s.device_field(dock, f).unwrap_or("?").to_string();
    assert_eq!(field(&before, "out0.connected"), "true");
    assert_eq!(field(&after, "out0.connected"), "false");
    let raised = |s: &StateDump| field(s, "out0.hotplug raised").parse::<u32>().unwrap();
    assert_eq!(
        raised(&after),
        raised(&before) + 1,
        "the unplug raises a hotplug interrupt"
    );
    assert!(before.externals.is_empty());
    assert_eq!(after.externals, vec![format!("unplug at step {p}")]);
    // The stale status the planted race then accepts: marked by the model at the unplug.
    let stale = |s: &StateDump| {
        s.marks
            .iter()
            .any(|(m, _)| m == "StaleStatusAfterDisconnect")
    };
    assert!(
        !stale(&before) && stale(&after),
        "{:?} / {:?}",
        before.marks,
        after.marks
    );
    // Tasks and what they wait on, the streams and the time are there too.
    assert!(before.tasks.iter().any(|t| t.name == "driver"));
    assert!(before.tasks.iter().any(|t| t.name == "irq" && t.daemon));
    assert!(after.now_ns >= before.now_ns);
    assert!(before
        .streams
        .iter()
        .any(|s| s.name == "externals" && s.position == "0 externals fired (0 of 1 recorded)"));
    assert!(after
        .streams
        .iter()
        .any(|s| s.name == "externals" && s.position == "1 external fired (1 of 1 recorded)"));
    let text = after.render();
    assert!(
        text.contains(&format!(
            "state at step {} (before anything of it happens)",
            p + 1
        )),
        "{text}"
    );
    assert!(text.contains("out0.connected"), "{text}");
}

#[test]
fn a_step_past_the_end_gives_the_state_at_the_end() {
    let s = at(1_000_000);
    assert!(!s.reached);
    assert!(
        s.ended
            .as_deref()
            .is_some_and(|e| e.contains("status_matches_connection")),
        "{:?}",
        s.ended
    );
    assert!(s.render().contains("the run ended at step"));
}
