//! End-to-end, lockstep: a Linux 6.1 guest under the QEMU Calametra builds
//! (`calametra-qemu/qemu/build.sh`: QEMU 10.0.2 with the `usb-calametra` device) enumerates
//! `calametra_models::dfu`, runs `lsusb -v`, detaches it with dfu-util and downloads 64 KiB.
//! Every USB packet is answered synchronously with the guest's virtual clock in the frame, so
//! the run, its console included, hashes the same every time; a seed moves the model's faults
//! and the hash with them; a planted fault found in a guest run is written as a regression
//! file and replayed from it byte-exactly.

use calametra_core::explore::Probe as Trial;
use calametra_core::fault::{Fault, FaultKind, FaultSet};
use calametra_core::host::DeviceHost;
use calametra_core::regress::{self, Regression};
use calametra_core::spec::Spec;
use calametra_core::{Failure, RunConfig};
use calametra_models::dfu::{marks, never_bricked, seal_image, state_machine_legal, Dfu, Sabotage};
use calametra_qemu::lockstep::{Extras, Invariant, LockstepConfig, Scenario, ScenarioRun};
use calametra_qemu::{Outcome, Probe};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;

const SPEC: &[u8] = include_bytes!("../../specs/dfu11-tolerant.json");

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target")
}

/// The lockstep QEMU and the guest; a test asked for without them fails saying what to run
/// (`CALAMETRA_QEMU_OPTIONAL=1` skips instead).
fn lockstep_or_skip(test: &str) -> Option<LockstepConfig> {
    match LockstepConfig::find(&target_dir()) {
        Ok(c) => Some(c),
        Err(e) if std::env::var_os("CALAMETRA_QEMU_OPTIONAL").is_some() => {
            eprintln!("SKIP {test}: {e}");
            None
        }
        Err(e) => panic!(
            "{test} needs the lockstep QEMU and the guest: {e} (scripts/install-qemu.sh, guest/build.sh, calametra-qemu/qemu/build.sh)"
        ),
    }
}

fn spec() -> Spec {
    Spec::parse("specs/dfu11-tolerant.json", SPEC).expect("the DFU spec parses")
}

/// 64 KiB the model accepts.
fn image() -> Vec<u8> {
    seal_image(&calametra_qemu::probes::pattern(65536 - 4))
}

fn scenario(lock: LockstepConfig, fault_set: FaultSet) -> Scenario<Dfu> {
    let spec = spec();
    let mut lock = lock;
    // A WillDetach device re-enumerates by itself after DFU_DETACH: the lockstep device
    // detaches and attaches for the guest when the model says so.
    lock.options.reenumerate_marks = vec![
        marks::WILL_DETACH_TO_DFU.to_string(),
        marks::WILL_DETACH_TO_APP.to_string(),
    ];
    let legal: Invariant = Rc::new(|h: &DeviceHost| match h.device::<Dfu>() {
        Some(d) => state_machine_legal(d),
        None => Err("the host holds no DFU model".into()),
    });
    let model_spec = spec.clone();
    Scenario {
        name: "lockstep::dfu_download".into(),
        model: Rc::new(move || Dfu::try_from_spec(&model_spec).expect("the DFU model builds")),
        probe: Probe::Script {
            script: calametra_qemu::probes::dfu_detach_and_download("1209:0001"),
            files: vec![("calametra/image.bin".into(), image())],
        },
        base: RunConfig {
            fault_set,
            spec: Some(Arc::new(spec)),
            ..RunConfig::default()
        },
        extras: Extras {
            invariants: vec![("state_machine_legal".into(), legal)],
            ..Extras::default()
        },
        lock,
    }
}

fn keep_trace(name: &str, run: &ScenarioRun) {
    let path = target_dir()
        .join("calametra/traces/lockstep")
        .join(format!("{name}.jsonl"));
    match run.run.write_trace(&path) {
        Ok(()) => eprintln!("trace: {}", path.display()),
        Err(e) => eprintln!("trace not written to {}: {e}", path.display()),
    }
}

fn bench(what: &str, run: &ScenarioRun) {
    eprintln!(
        "BENCH lockstep {what} boot_to_enumerated_s={:.2} dfu_download_s={:.2} probe_s={:.2} total_s={:.2} frames={} guest_clock_s={:.3} hash={}",
        run.run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.run
            .wall_between("CALAMETRA-DFU-DOWNLOAD-BEGIN", "CALAMETRA-DFU-DOWNLOAD-END")
            .unwrap_or_default()
            .as_secs_f64(),
        run.run.timings.probe.unwrap_or_default().as_secs_f64(),
        run.run.timings.total.as_secs_f64(),
        run.run.frames,
        run.run.end_clock_ns as f64 / 1e9,
        run.hash
    );
}

#[test]
#[ignore = "needs the lockstep QEMU build: run calametra-qemu/qemu/build.sh (after scripts/install-qemu.sh and guest/build.sh), then cargo test -p calametra-qemu --test lockstep -- --ignored"]
fn the_same_guest_scenario_twice_hashes_the_same_console_included() {
    let Some(lock) =
        lockstep_or_skip("the_same_guest_scenario_twice_hashes_the_same_console_included")
    else {
        return;
    };
    let s = scenario(lock, FaultSet::None);
    let a = s.run(&Trial::Baseline).expect("the first run starts");
    eprintln!("{}", a.run.summary());
    keep_trace("baseline-a", &a);
    bench("baseline-a", &a);
    assert_eq!(a.run.outcome, Outcome::Passed, "{}", a.run.summary());
    assert_eq!(a.trial, "lockstep::dfu_download::baseline");

    // What the guest did: lsusb read the model's descriptors, dfu-util detached the device
    // (it re-enumerated in DFU mode) and downloaded the image.
    let lsusb = a
        .run
        .console_block("CALAMETRA-LSUSB-BEGIN", "CALAMETRA-LSUSB-END");
    let text = lsusb.join("\n");
    assert!(text.contains("ID 1209:0001"), "{text}");
    assert!(text.contains("Calametra DFU 1.1 model"), "{text}");
    assert!(
        lsusb.iter().any(|l| {
            let w: Vec<&str> = l.split_whitespace().collect();
            w.len() >= 2 && w[0] == "bInterfaceClass" && w[1] == "254"
        }),
        "the DFU interface (class 0xfe): {text}"
    );
    let console = a.run.console.join("\n");
    assert!(console.contains("CALAMETRA-DFU-MODE"), "{console}");
    assert!(
        console.contains("CALAMETRA-DFU-DOWNLOAD-END rc=0"),
        "{console}"
    );
    assert!(a
        .lines
        .iter()
        .any(|l| l.contains("\"event\":\"reenumerate\"")));
    let dnloads = a
        .lines
        .iter()
        .filter(|l| l.contains("\"site\":\"ctrl.dnload#"))
        .count();
    assert!(dnloads >= 32, "{dnloads} DNLOAD transfers");
    // Every frame and every console line is a deterministic, hashed record.
    let frames = a
        .lines
        .iter()
        .filter(|l| l.contains("\"actor\":\"lockstep\"") && l.contains("\"frame\":"))
        .count() as u64;
    assert_eq!(frames, a.run.frames);
    assert!(a
        .lines
        .iter()
        .filter(|l| l.contains("\"kind\":\"emulator\"") && l.contains("\"frame\":"))
        .all(|l| l.contains("\"deterministic\":true")));
    let guest: Vec<&String> = a
        .lines
        .iter()
        .filter(|l| l.contains("\"kind\":\"guest\""))
        .collect();
    assert_eq!(guest.len(), a.run.console.len());
    assert!(guest.iter().all(|l| l.contains("\"deterministic\":true")));

    let b = s.run(&Trial::Baseline).expect("the second run starts");
    keep_trace("baseline-b", &b);
    bench("baseline-b", &b);
    assert_eq!(b.run.outcome, Outcome::Passed, "{}", b.run.summary());
    assert_eq!(
        a.run.console, b.run.console,
        "the console is byte-identical"
    );
    assert_eq!(
        a.hash, b.hash,
        "the same scenario hashes the same (calametra diff target/calametra/traces/lockstep/baseline-a.jsonl target/calametra/traces/lockstep/baseline-b.jsonl)"
    );
    assert_eq!(a.run.records, b.run.records);
    eprintln!("HASH baseline twice: {} {}", a.hash, b.hash);
}

#[test]
#[ignore = "needs the lockstep QEMU build: run calametra-qemu/qemu/build.sh (after scripts/install-qemu.sh and guest/build.sh), then cargo test -p calametra-qemu --test lockstep -- --ignored"]
fn a_different_seed_places_the_models_faults_elsewhere_and_hashes_differently() {
    let Some(lock) = lockstep_or_skip(
        "a_different_seed_places_the_models_faults_elsewhere_and_hashes_differently",
    ) else {
        return;
    };
    // A delayed transfer completes later on the guest clock (`complete_ns`: QEMU holds the
    // packet async until then), so dfu-util waits bwPollTimeout from when the model answered
    // and the whole session still passes under every seed's delays.
    let s = scenario(lock, FaultSet::Only(vec![FaultKind::Delay]));
    let mut runs = Vec::new();
    for seed in [0x11u64, 0x12] {
        let r = s.run(&Trial::Seed(seed)).expect("the run starts");
        keep_trace(&format!("seed-{seed:#x}"), &r);
        bench(&format!("seed-{seed:#x}"), &r);
        eprintln!(
            "{}: {} faults: {}",
            r.trial,
            r.events.len(),
            calametra_core::choices::story(&r.events)
        );
        eprintln!("{}: {}", r.trial, r.run.outcome);
        assert_eq!(r.run.outcome, Outcome::Passed, "{}", r.run.summary());
        assert!(!r.events.is_empty(), "seed {seed:#x} placed no fault");
        // Every delay at a transfer reached the guest as a later completion.
        let delayed_transfers = r
            .lines
            .iter()
            .filter(|l| {
                l.contains("\"kind\":\"fault\"")
                    && l.contains("\"fault\":\"delay(")
                    && l.contains("\"site\":\"ctrl.")
            })
            .count();
        let completed_later = r
            .lines
            .iter()
            .filter(|l| l.contains("\"frame\":\"control\"") && l.contains("\"complete_ns\":"))
            .count();
        eprintln!(
            "{}: {delayed_transfers} control transfers delayed, {completed_later} completed later",
            r.trial
        );
        assert!(
            delayed_transfers > 0,
            "seed {seed:#x} delayed no control transfer"
        );
        assert!(
            completed_later >= delayed_transfers,
            "{completed_later} later completions for {delayed_transfers} delayed control transfers"
        );
        runs.push(r);
    }
    assert_eq!(runs[0].trial, "lockstep::dfu_download::seed::0x11");
    assert_ne!(
        runs[0].events, runs[1].events,
        "the seeds place faults apart"
    );
    assert_ne!(runs[0].hash, runs[1].hash, "and the hash follows");
    eprintln!("HASH seeds: {} {}", runs[0].hash, runs[1].hash);
}

#[test]
#[ignore = "needs the lockstep QEMU build: run calametra-qemu/qemu/build.sh (after scripts/install-qemu.sh and guest/build.sh), then cargo test -p calametra-qemu --test lockstep -- --ignored"]
fn a_planted_fault_found_in_a_guest_run_replays_byte_exactly_from_its_regression_file() {
    let Some(lock) = lockstep_or_skip(
        "a_planted_fault_found_in_a_guest_run_replays_byte_exactly_from_its_regression_file",
    ) else {
        return;
    };
    let s = scenario(lock, FaultSet::None);
    // The planted fault: the third DFU_DNLOAD stalls. dfu-util gives up, the probe fails.
    let trial = Trial::Site {
        site: "ctrl.dnload#3".into(),
        fault: Fault::Stall,
    };
    let found = s.run(&trial).expect("the run starts");
    keep_trace("planted-found", &found);
    bench("planted-found", &found);
    eprintln!("{}", found.run.summary());
    assert_eq!(
        found.trial,
        "lockstep::dfu_download::site::ctrl.dnload#3::stall"
    );
    assert!(
        matches!(found.run.outcome, Outcome::Failed { rc: Some(rc), .. } if rc != 0),
        "{}",
        found.run.summary()
    );
    assert!(matches!(found.failure, Some(Failure::TaskError { .. })));
    let console = found.run.console.join("\n");
    assert!(
        console.contains("rror during download") || console.contains("download failed"),
        "dfu-util says why: {console}"
    );

    // Written as a regression file, read back, replayed: byte-exact.
    let reg = s.regression(&found).expect("a failed run has a regression");
    assert_eq!(reg.found_by, "site::ctrl.dnload#3::stall");
    // The one fault, preceded by the anchor it is placed by (issue 16: events are recorded
    // relative to what they follow).
    let faults: Vec<_> = reg
        .events
        .iter()
        .filter(|e| !matches!(e, calametra_core::choices::Event::Anchor { .. }))
        .cloned()
        .collect();
    assert_eq!(
        faults,
        vec![calametra_core::choices::Event::Fault {
            site: "ctrl.dnload#3".into(),
            fault: Fault::Stall
        }],
        "{:?}",
        reg.events
    );
    let dir = regress::scenario_dir(&target_dir().join("calametra/regressions"), &reg.scenario);
    let path = reg.save(&dir).expect("the regression file is written");
    eprintln!("regression: {}\n{}", path.display(), reg.to_json());
    let loaded = Regression::load(&path).expect("the regression file reads back");
    assert_eq!(loaded, reg);
    let replayed = s.replay(&loaded).expect("the replay is byte-exact");
    keep_trace("planted-replayed", &replayed);
    bench("planted-replayed", &replayed);
    assert_eq!(replayed.hash, found.hash);
    assert_eq!(replayed.run.console, found.run.console);
    assert_eq!(
        replayed.failure.as_ref().map(Failure::signature),
        Some(reg.signature.clone())
    );
    assert_eq!(
        replayed.trial,
        format!("lockstep::dfu_download::regression::{}", reg.id)
    );
    eprintln!(
        "HASH planted found/replayed: {} {}",
        found.hash, replayed.hash
    );
}

/// Waits for the device, then up to 2 s of guest time for it to leave.
const UNPLUG_SCRIPT: &str = r#"
dev=1209:0001
present() {
    for d in /sys/bus/usb/devices/*; do
        [ -f "$d/idVendor" ] || continue
        [ "$(cat $d/idVendor):$(cat $d/idProduct)" = "$dev" ] && return 0
    done
    return 1
}
while ! present; do sleep 0.1; done
echo "CALAMETRA-ENUMERATED $dev"
i=0
while present && [ $i -lt 20 ]; do sleep 0.1; i=$((i + 1)); done
if present; then echo "CALAMETRA-STILL-THERE"; else echo "CALAMETRA-GONE after $i"; fi
"#;

#[test]
#[ignore = "needs the lockstep QEMU build: run calametra-qemu/qemu/build.sh (after scripts/install-qemu.sh and guest/build.sh), then cargo test -p calametra-qemu --test lockstep -- --ignored"]
fn an_unplug_placed_by_the_seed_lands_at_the_same_guest_clock_on_every_run() {
    let Some(lock) =
        lockstep_or_skip("an_unplug_placed_by_the_seed_lands_at_the_same_guest_clock_on_every_run")
    else {
        return;
    };
    let mut s = scenario(lock, FaultSet::None);
    s.name = "lockstep::dfu_unplug".into();
    s.probe = Probe::script(UNPLUG_SCRIPT);
    s.extras.externals = vec![calametra_qemu::lockstep::External::new(
        "unplug",
        calametra_qemu::lockstep::ExternalAction::Unplug,
    )];
    // The baseline places no external: the guest configures the device and waits 2 s.
    let base = s.run(&Trial::Baseline).expect("the baseline starts");
    assert_eq!(base.run.outcome, Outcome::Passed, "{}", base.run.summary());
    assert!(base
        .run
        .console
        .iter()
        .any(|l| l == "CALAMETRA-STILL-THERE"));
    // Where Linux configured the device, on the guest clock: the unplug goes 1-2 s after it,
    // once the script (a few hundred ms of guest time per look at sysfs) has seen the device
    // and before its 20 looks are over.
    let configured = base
        .lines
        .iter()
        .filter(|l| l.contains("\"frame\":\"control\"") && l.contains("\"setup\":\"0009"))
        .filter_map(|l| {
            let at = l.find("\"clock_ns\":")? + "\"clock_ns\":".len();
            l[at..]
                .split(|c: char| !c.is_ascii_digit())
                .next()?
                .parse::<u64>()
                .ok()
        })
        .next_back()
        .expect("the guest configured the device");
    s.extras.window = (configured + 1_000_000_000, configured + 2_000_000_000);

    let a = s.run(&Trial::Seed(0x5eed)).expect("the run starts");
    keep_trace("unplug-a", &a);
    eprintln!("{}", a.run.summary());
    let b = s.run(&Trial::Seed(0x5eed)).expect("the run starts");
    keep_trace("unplug-b", &b);
    for r in [&a, &b] {
        assert_eq!(r.run.outcome, Outcome::Passed, "{}", r.run.summary());
        assert!(
            r.run
                .console
                .iter()
                .any(|l| l.starts_with("CALAMETRA-GONE")),
            "{}",
            r.run.summary()
        );
    }
    let at = |r: &ScenarioRun| {
        let unplugs: Vec<u64> = r
            .events
            .iter()
            .filter_map(|e| match e {
                calametra_core::choices::Event::External { name, point } if name == "unplug" => {
                    Some(*point)
                }
                _ => None,
            })
            .collect();
        match unplugs.as_slice() {
            [point] => *point,
            other => panic!("expected one unplug, found {other:?} in {:?}", r.events),
        }
    };
    assert_eq!(at(&a), at(&b));
    assert!((s.extras.window.0..s.extras.window.1).contains(&at(&a)));
    assert_eq!(
        a.run.console, b.run.console,
        "the kernel saw it at the same time"
    );
    assert_eq!(a.hash, b.hash);
    let c = s.run(&Trial::Seed(0x5eee)).expect("the run starts");
    keep_trace("unplug-c", &c);
    assert_ne!(at(&a), at(&c), "another seed, another guest clock");
    assert_ne!(a.hash, c.hash);
    eprintln!(
        "HASH unplug: seed 0x5eed twice {} {} (at {} ns), seed 0x5eee {} (at {} ns)",
        a.hash,
        b.hash,
        at(&a),
        c.hash,
        at(&c)
    );
}

#[test]
#[ignore = "needs the lockstep QEMU build: run calametra-qemu/qemu/build.sh (after scripts/install-qemu.sh and guest/build.sh), then cargo test -p calametra-qemu --test lockstep -- --ignored"]
fn a_planted_bug_stops_the_guest_at_the_same_frame_and_console_line_every_run() {
    let Some(lock) = lockstep_or_skip(
        "a_planted_bug_stops_the_guest_at_the_same_frame_and_console_line_every_run",
    ) else {
        return;
    };
    let mut s = scenario(lock, FaultSet::None);
    s.name = "lockstep::dfu_in_place_write".into();
    // The planted bug: blocks are programmed over the running image.
    let model_spec = spec();
    s.model = Rc::new(move || {
        let mut d = Dfu::try_from_spec(&model_spec).expect("the DFU model builds");
        d.sabotage = Some(Sabotage::InPlaceWrite);
        d
    });
    let old = Dfu::try_from_spec(&spec())
        .expect("the DFU model builds")
        .dfu_spec()
        .factory_image
        .clone();
    let new = image();
    let bricked: Invariant = Rc::new(move |h: &DeviceHost| match h.device::<Dfu>() {
        Some(d) => never_bricked(d, &old, &new),
        None => Err("the host holds no DFU model".into()),
    });
    s.extras.invariants.push(("never_bricked".into(), bricked));

    let a = s.run(&Trial::Baseline).expect("the run starts");
    keep_trace("in-place-a", &a);
    eprintln!("{}", a.run.summary());
    let b = s.run(&Trial::Baseline).expect("the run starts");
    keep_trace("in-place-b", &b);
    for r in [&a, &b] {
        assert!(
            matches!(&r.failure, Some(Failure::Invariant { name, .. }) if name == "never_bricked"),
            "{}",
            r.run.summary()
        );
        // Stopped mid-download, on the frame after which the image was no longer valid.
        assert!(r
            .run
            .console
            .iter()
            .any(|l| l.starts_with("CALAMETRA-DFU-DOWNLOAD-BEGIN")));
        assert!(!r
            .run
            .console
            .iter()
            .any(|l| l.starts_with("CALAMETRA-DFU-DOWNLOAD-END")));
    }
    assert_eq!(a.run.frames, b.run.frames, "the same frame");
    assert_eq!(
        a.run.console, b.run.console,
        "the same console, to the byte"
    );
    assert_eq!(a.hash, b.hash);

    let reg = s.regression(&a).expect("a failed run has a regression");
    let dir = regress::scenario_dir(&target_dir().join("calametra/regressions"), &reg.scenario);
    let path = reg.save(&dir).expect("the regression file is written");
    let replayed = s
        .replay(&Regression::load(&path).expect("it reads back"))
        .expect("the replay is byte-exact");
    assert_eq!(replayed.hash, a.hash);
    eprintln!(
        "HASH in-place write: {} {} replayed {} (stopped at frame {}, guest clock {} ns)",
        a.hash, b.hash, replayed.hash, a.run.frames, a.run.end_clock_ns
    );
}
