//! End-to-end: a real Linux 6.1 guest under QEMU enumerates a Calametra device served through
//! usbredir, `lsusb -v` reads its descriptors, and a device that stops answering ends the run as
//! `emulator_blocked`. Each test needs QEMU and the guest (see the ignore reason) and, when run
//! with `--ignored` on a machine without them, prints why it is skipped.

mod common;
mod lsusb;

use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::RunConfig;
use calametra_qemu::{guest, Outcome, Probe};
use common::{qemu_or_skip, Gadget, CONFIG, DEVICE, PID, VID};
use lsusb::{lsusb_matches, split};
use std::time::Duration;

#[test]
#[ignore = "needs QEMU and the guest: run scripts/install-qemu.sh && guest/build.sh, then cargo test -p calametra-qemu -- --ignored"]
fn a_gadget_enumerates_and_lsusb_shows_its_descriptors() {
    let Some(qemu) = qemu_or_skip("a_gadget_enumerates_and_lsusb_shows_its_descriptors") else {
        return;
    };
    let (run, host) = calametra_qemu::run_with_host(
        Gadget::default(),
        &RunConfig::default(),
        &Probe::Lsusb,
        &qemu,
    )
    .expect("the run starts");
    eprintln!("{}", run.summary());
    common::keep_trace("a_gadget_enumerates_and_lsusb_shows_its_descriptors", &run);
    assert_eq!(run.outcome, Outcome::Passed, "{}", run.summary());
    assert!(run.command.contains("sleep=off"));

    // The kernel's raw descriptors are the device's bytes.
    let dump = guest::descriptor_dump(&run.console).expect("the probe dumps descriptors");
    let mut want = DEVICE.to_vec();
    want.extend_from_slice(&CONFIG);
    assert_eq!(
        dump, want,
        "sysfs descriptors differ from the model's bytes"
    );

    // lsusb -v shows every field with the device's value.
    let lsusb = run.console_block("CALAMETRA-LSUSB-BEGIN", "CALAMETRA-LSUSB-END");
    let mut descs = vec![DEVICE.to_vec()];
    descs.extend(split(&CONFIG));
    let checked =
        lsusb_matches(&lsusb, &descs).unwrap_or_else(|e| panic!("{e}\n{}", lsusb.join("\n")));
    assert!(checked >= 40, "only {checked} fields checked");
    let text = lsusb.join("\n");
    assert!(
        text.contains("Calametra Test Gadget"),
        "strings read: {text}"
    );
    assert!(text.contains(&format!("ID {VID:04x}:{PID:04x}")));

    // The model served the guest's requests, and the trace says so.
    let gadget = host.device::<Gadget>().expect("the gadget");
    assert_eq!(gadget.configuration, 1, "the guest configured the device");
    assert!(run.trace.iter().any(|l| l.contains("\"kind\":\"guest\"")));
    assert!(run
        .trace
        .iter()
        .any(|l| l.contains("\"kind\":\"emulator\"") && l.contains("device_connect")));
    let transfers = run
        .trace
        .iter()
        .filter(|l| l.contains("\"kind\":\"transfer\""))
        .count();
    assert!(transfers > 10, "{transfers} transfers traced");
    assert!(run
        .trace
        .iter()
        .all(|l| !l.contains("\"kind\":\"guest\"") || l.contains("\"deterministic\":false")));
    eprintln!(
        "BENCH boot_to_enumerated_s={:.2} probe_s={:.2} total_s={:.2} hash={}",
        run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.timings.probe.unwrap_or_default().as_secs_f64(),
        run.timings.total.as_secs_f64(),
        run.hash
    );
}

#[test]
#[ignore = "needs QEMU and the guest: run scripts/install-qemu.sh && guest/build.sh, then cargo test -p calametra-qemu -- --ignored"]
fn a_device_that_stops_answering_is_emulator_blocked_not_a_verdict() {
    let Some(mut qemu) =
        qemu_or_skip("a_device_that_stops_answering_is_emulator_blocked_not_a_verdict")
    else {
        return;
    };
    // The bridge reads the descriptors itself (get_descriptor #1-#3); from the guest's first
    // request on, every control transfer is swallowed: the model never completes it.
    let mut plan = FaultPlan::default();
    for n in 4..=400 {
        plan.faults
            .insert(format!("ctrl.get_descriptor#{n}"), Fault::Timeout);
    }
    for name in ["set_configuration", "get_configuration", "std_get_status"] {
        for n in 1..=100 {
            plan.faults
                .insert(format!("ctrl.{name}#{n}"), Fault::Timeout);
        }
    }
    // The guest does not stop: it waits for a device that never enumerates. Its console and
    // the socket go quiet; the watchdog ends the run on the guest's own clock (60 s of it
    // without progress, once /init has printed), long before the wall budget, which is only a
    // last resort here. Neither is hastened by a busy host: a slow boot is not blocked.
    qemu.budget = Duration::from_secs(120);
    let started = std::time::Instant::now();
    let run = calametra_qemu::run(
        Gadget::default(),
        &RunConfig {
            faults: plan,
            ..RunConfig::default()
        },
        &Probe::Lsusb,
        &qemu,
    )
    .expect("the run starts");
    eprintln!("{}", run.summary());
    common::keep_trace(
        "a_device_that_stops_answering_is_emulator_blocked_not_a_verdict",
        &run,
    );
    assert!(
        matches!(run.outcome, Outcome::EmulatorBlocked { .. }),
        "{}",
        run.summary()
    );
    assert!(!run.outcome.is_verdict());
    assert_eq!(run.outcome.name(), "emulator_blocked");
    assert!(
        run.stats().expect("a usb-redir run").swallowed > 0,
        "the guest's requests went unanswered"
    );
    assert!(run.console.iter().any(|l| l.contains("CALAMETRA-INIT")));
    assert!(!run
        .console
        .iter()
        .any(|l| l.starts_with("CALAMETRA-ENUMERATED")));
    assert!(
        run.trace
            .iter()
            .any(|l| l.contains("\"actor\":\"watchdog\"") && l.contains("emulator_blocked")),
        "the watchdog's decision is traced"
    );
    // The guest's clock ended it, not the wall budget.
    let Outcome::EmulatorBlocked { reason } = &run.outcome else {
        unreachable!()
    };
    assert!(
        reason.contains("no console output and no USB traffic while the guest's clock advanced"),
        "{reason}"
    );
    let took = started.elapsed();
    eprintln!("BENCH emulator_blocked_s={:.1}", took.as_secs_f64());
    assert!(took < qemu.budget, "{took:?}");
}
