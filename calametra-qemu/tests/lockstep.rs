//! End-to-end, lockstep: a Linux 6.1 guest under the QEMU Calametra builds
//! (`calametra-qemu/qemu/build.sh`: QEMU 10.0.2 with the `usb-calametra` device) enumerates
//! `calametra_models::dfu`, runs `lsusb -v`, detaches it with dfu-util and downloads 64 KiB.
//! Every USB packet is answered synchronously with the guest's virtual clock in the frame, so
//! the run, its console included, hashes the same every time; a seed moves the model's faults
//! and the hash with them; a planted fault found in a guest run is written as a regression
//! file and replayed from it byte-exactly.

use calametra_core::chain::{self, Found, Owner};
use calametra_core::explore::{replay_config, Probe as Trial, Runner};
use calametra_core::fault::{Fault, FaultKind, FaultSet};
use calametra_core::regress::{self, Regression, Saved};
use calametra_core::spec::Spec;
use calametra_core::trace::{self, TraceHash};
use calametra_core::{Failure, RunConfig};
use calametra_models::dfu::{marks, never_bricked, seal_image, state_machine_legal, Dfu, Sabotage};
use calametra_qemu::lockstep::{ExternalAction, LockstepConfig};
use calametra_qemu::scenario::{run_result, GuestRunner};
use calametra_qemu::GuestRun;
use calametra_qemu::{Guest, Outcome, Probe};
use std::path::PathBuf;
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

/// What a test changes in the DFU guest scenario.
#[derive(Clone, Default)]
struct Variant {
    /// A planted bug in the model.
    sabotage: Option<Sabotage>,
    /// Another script for the guest (instead of the dfu-util session).
    script: Option<String>,
    /// An unplug a seeded run places in this window of the guest clock.
    unplug: Option<(u64, u64)>,
}

/// The guest scenario's function: the DFU model, re-enumerating by itself after DFU_DETACH
/// (the lockstep device detaches and attaches for the guest when the model says so), the
/// dfu-util session and `state_machine_legal` (and `never_bricked` with a planted bug).
fn dfu_download(guest: &mut Guest, v: &Variant) {
    let mut model = Dfu::try_from_spec(guest.spec()).expect("the DFU model builds");
    model.sabotage = v.sabotage;
    let factory = model.dfu_spec().factory_image.clone();
    guest.attach(model);
    guest.reenumerate_on(marks::WILL_DETACH_TO_DFU);
    guest.reenumerate_on(marks::WILL_DETACH_TO_APP);
    match &v.script {
        Some(script) => guest.probe(Probe::script(script.clone())),
        None => guest.run_script(
            &calametra_qemu::probes::dfu_detach_and_download("1209:0001"),
            vec![("calametra/image.bin".into(), image())],
        ),
    }
    guest.invariant("state_machine_legal", |d: &Dfu| state_machine_legal(d));
    if v.sabotage.is_some() {
        let new = image();
        guest.invariant("never_bricked", move |d: &Dfu| {
            never_bricked(d, &factory, &new)
        });
    }
    if let Some((from, to)) = v.unplug {
        guest.external("unplug", ExternalAction::Unplug);
        guest.window(from, to);
    }
}

/// A guest scenario as the harness runs it: its path, its runner and its base configuration.
struct Scenario {
    name: String,
    runner: GuestRunner,
    base: RunConfig,
}

/// One trial: its name and the whole guest run.
struct Trialled {
    trial: String,
    hash: TraceHash,
    lines: Vec<String>,
    failure: Option<Failure>,
    events: Vec<calametra_core::choices::Event>,
    run: GuestRun,
}

impl Scenario {
    fn new(lock: LockstepConfig, fault_set: FaultSet, name: &str, v: Variant) -> Scenario {
        Scenario {
            name: name.into(),
            runner: GuestRunner::with(move |g: &mut Guest| dfu_download(g, &v), lock),
            base: RunConfig {
                fault_set,
                spec: Some(Arc::new(spec())),
                ..RunConfig::default()
            },
        }
    }

    fn trialled(&self, trial: String, config: &RunConfig) -> Result<Trialled, String> {
        let run = self.runner.run_guest(config)?;
        Ok(Trialled {
            trial,
            hash: run.hash,
            lines: run.trace.clone(),
            failure: run.failure.clone(),
            events: run.events.clone(),
            run,
        })
    }

    /// The trial `t` (`Baseline`: no faults, no externals; `Seed(s)`: faults from the fault
    /// set and externals placed by `s`; `Site`: one pinned fault), as the harness makes it.
    fn run(&self, t: &Trial) -> Result<Trialled, String> {
        let name = format!("{}::{}", self.name, t.trial_suffix());
        self.trialled(name, &t.config(&self.base))
    }

    /// What the harness does with a failing trial: the failure chain (confirmed by a replay,
    /// minimized within the runner's budget, replayed with its trace kept) and the case saved
    /// under target/calametra/regressions; returns the case as read back from its file.
    fn save_case(&self, found: &Trialled) -> Regression {
        let failure = found.failure.clone().expect("a failing trial");
        let result = run_result(found.run.clone(), true).expect("the trial gave a verdict");
        let suffix = found
            .trial
            .strip_prefix(&format!("{}::", self.name))
            .unwrap_or(&found.trial);
        let owner = Owner {
            package: "calametra-qemu".into(),
            target: "lockstep".into(),
            scenario: self.name.clone(),
        };
        let dir = regress::scenario_dir(&target_dir().join("calametra/regressions"), &self.name);
        let handled = chain::handle(
            &self.runner as &dyn Runner,
            &self.base,
            &owner,
            0,
            Found {
                trial: suffix,
                run: &result,
                failure: &failure,
            },
            &regress::Dir(dir),
        );
        assert!(handled.reproduced, "the failure reproduced from its events");
        assert_eq!(handled.case.found_by, suffix);
        eprintln!(
            "minimized {} -> {} events in {} runs; saved: {:?}",
            found.events.len(),
            handled.shrunk.events.len(),
            handled.shrunk.attempts,
            handled.saved
        );
        let path = match handled.saved.expect("the case is saved") {
            Saved::Written(p) | Saved::Unchanged(p) => p,
            Saved::KeptBetter { path, .. } => path,
            other => panic!("the case was not kept: {other:?}"),
        };
        let loaded = Regression::load(&path).expect("the saved case reads back");
        eprintln!("regression: {}\n{}", path.display(), loaded.to_json());
        loaded
    }

    /// Replays a saved case's events (`regression::<id>`): byte-exact or a panic naming both
    /// hashes. A case kept from before a hash encoding change is compared under its own
    /// encoding (`hash_version`), as the harness does.
    fn replay(&self, reg: &Regression) -> Trialled {
        let config = replay_config(&self.base, &reg.events);
        let name = format!("{}::regression::{}", self.name, reg.id);
        let run = self.trialled(name, &config).expect("the replay starts");
        let hash = if reg.hash_version == trace::HASH_VERSION {
            Some(run.hash)
        } else {
            trace::hash_records(&trace::parse_kept(&run.lines), reg.hash_version)
        };
        assert_eq!(
            hash.map(|h| h.to_string()).as_deref(),
            Some(reg.trace_hash.as_str()),
            "regression {} replayed with another trace hash (hash version {})",
            reg.id,
            reg.hash_version
        );
        run
    }
}

fn keep_trace(name: &str, run: &Trialled) {
    let path = target_dir()
        .join("calametra/traces/lockstep")
        .join(format!("{name}.jsonl"));
    match run.run.write_trace(&path) {
        Ok(()) => eprintln!("trace: {}", path.display()),
        Err(e) => eprintln!("trace not written to {}: {e}", path.display()),
    }
}

fn bench(what: &str, run: &Trialled) {
    eprintln!(
        "BENCH lockstep {what} boot_to_enumerated_s={:.2} dfu_download_s={:.2} probe_s={:.2} total_s={:.2} frames={} guest_clock_s={:.3} hash={}",
        run.run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.run
            .wall_between("CALAMETRA-DFU-DOWNLOAD-BEGIN", "CALAMETRA-DFU-DOWNLOAD-END")
            .unwrap_or_default()
            .as_secs_f64(),
        run.run.timings.probe.unwrap_or_default().as_secs_f64(),
        run.run.timings.total.as_secs_f64(),
        run.run.frames().expect("a lockstep run"),
        run.run.end_clock_ns().expect("a lockstep run") as f64 / 1e9,
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
    let s = Scenario::new(
        lock,
        FaultSet::None,
        "lockstep::dfu_download",
        Variant::default(),
    );
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
    assert_eq!(Some(frames), a.run.frames());
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
    let s = Scenario::new(
        lock,
        FaultSet::Only(vec![FaultKind::Delay]),
        "lockstep::dfu_download",
        Variant::default(),
    );
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
    let s = Scenario::new(
        lock,
        FaultSet::None,
        "lockstep::dfu_download",
        Variant::default(),
    );
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

    // What the harness does with it: confirmed, minimized, saved as a case, read back and
    // replayed from the file: byte-exact.
    let reg = s.save_case(&found);
    assert_eq!(reg.found_by, "site::ctrl.dnload#3::stall");
    // The one fault (with the anchor it is placed by, when minimization kept it: issue 16's
    // events are recorded relative to what they follow).
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
    let replayed = s.replay(&reg);
    keep_trace("planted-replayed", &replayed);
    bench("planted-replayed", &replayed);
    if reg.events == found.events {
        assert_eq!(replayed.hash, found.hash);
        assert_eq!(replayed.run.console, found.run.console);
    }
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
    let unplug = |window: (u64, u64)| Variant {
        script: Some(UNPLUG_SCRIPT.into()),
        unplug: Some(window),
        ..Variant::default()
    };
    let name = "lockstep::dfu_unplug";
    let s = Scenario::new(lock.clone(), FaultSet::None, name, unplug((0, 0)));
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
    let window = (configured + 1_000_000_000, configured + 2_000_000_000);
    let s = Scenario::new(lock, FaultSet::None, name, unplug(window));

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
    let at = |r: &Trialled| {
        let unplugs: Vec<u64> = r
            .events
            .iter()
            .filter_map(|e| match e {
                calametra_core::choices::Event::GuestExternal { name, at_ns }
                    if name == "unplug" =>
                {
                    Some(*at_ns)
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
    assert!((window.0..window.1).contains(&at(&a)));
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
    // The planted bug: blocks are programmed over the running image.
    let s = Scenario::new(
        lock,
        FaultSet::None,
        "lockstep::dfu_in_place_write",
        Variant {
            sabotage: Some(Sabotage::InPlaceWrite),
            ..Variant::default()
        },
    );

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
    assert_eq!(a.run.frames(), b.run.frames(), "the same frame");
    assert!(a.run.frames().is_some(), "a lockstep run");
    assert_eq!(
        a.run.console, b.run.console,
        "the same console, to the byte"
    );
    assert_eq!(a.hash, b.hash);

    let reg = s.save_case(&a);
    let replayed = s.replay(&reg);
    if reg.events == a.events {
        assert_eq!(replayed.hash, a.hash);
    }
    eprintln!(
        "HASH in-place write: {} {} replayed {} (stopped at frame {}, guest clock {} ns)",
        a.hash,
        b.hash,
        replayed.hash,
        a.run.frames().expect("a lockstep run"),
        a.run.end_clock_ns().expect("a lockstep run")
    );
}
