//! End-to-end: a real Linux 6.1 guest under QEMU enumerates a Calametra device served through
//! usbredir, `lsusb -v` reads its descriptors, and a device that stops answering ends the run as
//! `emulator_blocked`. Each test needs QEMU and the guest (see the ignore reason) and, when run
//! with `--ignored` on a machine without them, prints why it is skipped.

mod common;

use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::RunConfig;
use calametra_qemu::{guest, Outcome, Probe};
use common::{qemu_or_skip, Gadget, CONFIG, DEVICE, PID, VID};
use std::time::Duration;

/// (field, value) pairs lsusb prints for a standard descriptor, from its bytes.
fn expected_fields(d: &[u8]) -> Vec<(&'static str, u32)> {
    let w = |i: usize| u16::from_le_bytes([d[i], d[i + 1]]) as u32;
    let b = |i: usize| d[i] as u32;
    match d[1] {
        1 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("bcdUSB", w(2)),
            ("bDeviceClass", b(4)),
            ("bDeviceSubClass", b(5)),
            ("bDeviceProtocol", b(6)),
            ("bMaxPacketSize0", b(7)),
            ("idVendor", w(8)),
            ("idProduct", w(10)),
            ("bcdDevice", w(12)),
            ("iManufacturer", b(14)),
            ("iProduct", b(15)),
            ("iSerial", b(16)),
            ("bNumConfigurations", b(17)),
        ],
        2 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("wTotalLength", w(2)),
            ("bNumInterfaces", b(4)),
            ("bConfigurationValue", b(5)),
            ("iConfiguration", b(6)),
            ("bmAttributes", b(7)),
        ],
        4 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("bInterfaceNumber", b(2)),
            ("bAlternateSetting", b(3)),
            ("bNumEndpoints", b(4)),
            ("bInterfaceClass", b(5)),
            ("bInterfaceSubClass", b(6)),
            ("bInterfaceProtocol", b(7)),
            ("iInterface", b(8)),
        ],
        5 => vec![
            ("bLength", b(0)),
            ("bDescriptorType", b(1)),
            ("bEndpointAddress", b(2)),
            ("bmAttributes", b(3)),
            ("wMaxPacketSize", w(4)),
            ("bInterval", b(6)),
        ],
        _ => Vec::new(),
    }
}

/// lsusb's value token as a number: `0x1209`, `2.00` (BCD), `255`.
fn lsusb_value(tok: &str) -> Option<u32> {
    if let Some(h) = tok.strip_prefix("0x") {
        return u32::from_str_radix(h, 16).ok();
    }
    if let Some((hi, lo)) = tok.split_once('.') {
        let hi = u32::from_str_radix(hi, 16).ok()?;
        let lo = u32::from_str_radix(lo, 16).ok()?;
        return Some((hi << 8) | lo);
    }
    tok.parse().ok()
}

/// Checks that lsusb's output shows every field of `descriptors` with the same value, in order.
fn lsusb_matches(lsusb: &[String], descriptors: &[Vec<u8>]) -> Result<usize, String> {
    let fields: Vec<(String, Option<u32>)> = lsusb
        .iter()
        .filter_map(|l| {
            let mut it = l.split_whitespace();
            let name = it.next()?;
            let value = it.next().and_then(lsusb_value);
            Some((name.to_string(), value))
        })
        .collect();
    let mut at = 0;
    let mut checked = 0;
    for d in descriptors {
        for (name, want) in expected_fields(d) {
            let found = fields[at..].iter().position(|(n, _)| n == name);
            let Some(i) = found else {
                return Err(format!("lsusb never shows {name} (wanted {want:#x})"));
            };
            let got = fields[at + i].1;
            if got != Some(want) {
                return Err(format!(
                    "lsusb shows {name} = {got:?}, the device says {want:#x}"
                ));
            }
            at += i + 1;
            checked += 1;
        }
    }
    Ok(checked)
}

/// Splits a configuration's bytes into its descriptors.
fn split(raw: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = 0;
    while at + 2 <= raw.len() && raw[at] >= 2 {
        let end = (at + raw[at] as usize).min(raw.len());
        out.push(raw[at..end].to_vec());
        at = end;
    }
    out
}

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
    qemu.no_progress = Duration::from_secs(30);
    qemu.budget = Duration::from_secs(150);
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
        run.stats.swallowed > 0,
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
    assert!(started.elapsed() < qemu.budget + Duration::from_secs(30));
}
