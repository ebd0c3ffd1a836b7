//! `RunConfig::stop_at` and the state dump on a small world: a loopback device, a driver that
//! stores three bytes, sleeps and reads them back, and a daemon waiting on a bulk IN. The run
//! stops at the step asked for, before anything of it; a run that ends first gives its state at
//! the end; asking for no stop changes nothing of a run.

use calametra_core::choices::Source;
use calametra_core::exec::{mark, sleep};
use calametra_core::state::StateDump;
use calametra_core::usb::Loopback;
use calametra_core::{run, RunConfig, Sim};
use std::time::Duration;

fn scenario(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    let iface = dev.interface();
    let bulk = dev.interface();
    sim.spawn_daemon("reader", async move {
        let _ = bulk.bulk_in(0x81, 64).await;
    });
    sim.spawn("driver", async move {
        iface
            .control_out(Loopback::store(&[1, 2, 3]), Duration::from_millis(5))
            .await
            .unwrap();
        mark("Stored");
        sleep(Duration::from_millis(3)).await;
        iface
            .control_in(Loopback::load(3), Duration::from_millis(5))
            .await
            .unwrap();
    });
}

fn config(stop_at: Option<u64>) -> RunConfig {
    RunConfig {
        source: Source::Seeded(3),
        keep_trace: true,
        stop_at,
        ..RunConfig::default()
    }
}

/// The first step at which `pred` holds of the state.
fn first(pred: impl Fn(&StateDump) -> bool) -> StateDump {
    let end = run(config(None), &scenario).steps;
    (0..=end)
        .map(|s| run(config(Some(s)), &scenario).state.unwrap())
        .find(|s| s.reached && pred(s))
        .expect("some step")
}

#[test]
fn no_stop_changes_nothing_and_gives_no_state() {
    let a = run(config(None), &scenario);
    let b = run(
        RunConfig {
            stop_at: None,
            ..config(None)
        },
        &scenario,
    );
    assert!(a.failure.is_none(), "{:?}", a.failure);
    assert_eq!(a.hash, b.hash);
    assert!(a.state.is_none());
}

#[test]
fn the_state_at_a_step_names_tasks_transfers_devices_streams_and_marks() {
    let at0 = run(config(Some(0)), &scenario).state.unwrap();
    assert!(at0.reached && at0.step == 0 && at0.now_ns == 0);
    assert_eq!(at0.device_field("loopback", "echo"), Some("empty"));
    assert!(
        at0.tasks.iter().all(|t| t.waits_on == "ready to run"),
        "{}",
        at0.render()
    );
    assert_eq!(at0.source, "seeded 0x3");

    // Sleeping after the store: the model holds the bytes, the mark is reached, the driver
    // waits on a timer and the reader on its bulk IN, which the device NAKs.
    let s = first(|s| {
        s.tasks
            .iter()
            .any(|t| t.name == "driver" && t.waits_on.starts_with("a timer at"))
    });
    let text = s.render();
    assert_eq!(s.device_field("loopback", "echo"), Some("full"), "{text}");
    assert_eq!(
        s.device_field("loopback", "stored"),
        Some("010203"),
        "{text}"
    );
    assert_eq!(s.marks, vec![("Stored".to_string(), 1)], "{text}");
    let reader = s.tasks.iter().find(|t| t.name == "reader").unwrap();
    assert!(reader.daemon);
    assert_eq!(
        reader.waits_on, "transfer bulk.in#1 (waiting for the device (NAK))",
        "{text}"
    );
    assert!(
        s.transfers
            .iter()
            .any(|t| t.site == "bulk.in#1" && t.actor == "reader"),
        "{text}"
    );
    assert!(s.last_record.is_some());
    assert!(text.contains("state at step"), "{text}");

    // A stopped run says so in its trace.
    let r = run(config(Some(s.step)), &scenario);
    let end = r.lines.last().unwrap();
    assert!(
        end.contains("\"kind\":\"end\"") && end.contains("\"outcome\":\"stopped\""),
        "{end}"
    );
    // The `stop` record; what follows it is the cancellation of what was left.
    let stop = format!(
        "\"kind\":\"stop\",\"actor\":\"sim\",\"deterministic\":true,\"data\":{{\"step\":{}}}",
        s.step
    );
    assert_eq!(
        r.lines.iter().filter(|l| l.contains(&stop)).count(),
        1,
        "{:?}",
        r.lines
    );
}

#[test]
fn a_step_never_reached_gives_the_state_at_the_end() {
    let r = run(config(Some(u64::MAX)), &scenario);
    assert!(r.failure.is_none());
    let s = r.state.unwrap();
    assert!(!s.reached);
    assert_eq!(s.ended.as_deref(), Some("it passed"));
    assert!(s
        .render()
        .starts_with(&format!("the run ended at step {} before step", s.step)));
    assert_eq!(
        r.lines.last().map(|l| l.contains("\"outcome\":\"pass\"")),
        Some(true)
    );
}
