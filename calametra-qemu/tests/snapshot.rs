//! End-to-end, snapshot starts: a lockstep guest run restores the machine saved after boot
//! (before the device was plugged in) instead of booting. A run from a snapshot made just now,
//! from the same snapshot reused and from a second snapshot made from scratch hash the same; a
//! changed option makes a new snapshot; a cold boot still runs the same probe to the same end.

mod common;

use calametra_core::RunConfig;
use calametra_qemu::lockstep::{self, LockstepConfig, Start};
use calametra_qemu::GuestRun;
use calametra_qemu::{Outcome, Probe};
use common::{Gadget, PID, VID};
use std::path::Path;

/// `lock` starting from snapshots cached in `cache`.
fn from(lock: &LockstepConfig, cache: &Path) -> LockstepConfig {
    let mut l = lock.clone();
    l.start = Start::Snapshot {
        cache: cache.to_path_buf(),
    };
    l
}

fn run(lock: &LockstepConfig, what: &str) -> GuestRun {
    let (run, _host) = lockstep::run_with_host(
        Gadget::default(),
        &RunConfig::default(),
        &Probe::Lsusb,
        lock,
    )
    .expect("the run starts");
    eprintln!("{what}:\n{}", run.summary());
    eprintln!(
        "BENCH snapshot {what} snapshot_made_s={:.2} restored_s={:.2} enumerated_s={:.2} total_s={:.2} frames={} hash={}",
        run.timings.snapshot.unwrap_or_default().as_secs_f64(),
        run.timings.restored.unwrap_or_default().as_secs_f64(),
        run.timings.enumerated.unwrap_or_default().as_secs_f64(),
        run.timings.total.as_secs_f64(),
        run.frames().expect("a lockstep run"),
        run.hash
    );
    assert_eq!(run.outcome, Outcome::Passed, "{what}: {}", run.summary());
    let lsusb = run
        .console_block("CALAMETRA-LSUSB-BEGIN", "CALAMETRA-LSUSB-END")
        .join("\n");
    assert!(
        lsusb.contains(&format!("ID {VID:04x}:{PID:04x}")),
        "{what}: {lsusb}"
    );
    assert!(lsusb.contains("Calametra Test Gadget"), "{what}: {lsusb}");
    run
}

/// The `emulator` record a snapshot start writes: (key, fresh).
fn snapshot_record(run: &GuestRun) -> (String, bool) {
    let line = run
        .trace
        .iter()
        .find(|l| l.contains("\"actor\":\"snapshot\""))
        .expect("a snapshot start records its snapshot");
    let v: serde_json::Value = serde_json::from_str(line).expect("a trace line is JSON");
    assert_eq!(v["deterministic"], false, "which snapshot is not hashed");
    (
        v["data"]["key"].as_str().expect("the key").to_string(),
        v["data"]["fresh"].as_bool().expect("fresh"),
    )
}

#[test]
#[ignore = "needs the lockstep QEMU build: run calametra-qemu/qemu/build.sh (after scripts/install-qemu.sh and guest/build.sh), then cargo test -p calametra-qemu --test snapshot -- --ignored"]
fn runs_from_fresh_and_reused_snapshots_hash_the_same() {
    let Some(lock) = common::lockstep_or_skip("runs_from_fresh_and_reused_snapshots_hash_the_same")
    else {
        return;
    };
    let cache = tempfile::tempdir().expect("a private cache");
    let lock = from(&lock, cache.path());
    let fresh = run(&lock, "fresh");
    let (key, made) = snapshot_record(&fresh);
    assert!(made, "an empty cache: the first run makes the snapshot");
    assert!(fresh.timings.snapshot.is_some());
    assert!(
        fresh
            .console
            .first()
            .is_some_and(|l| l == "CALAMETRA-RESTORED"),
        "the console starts where the snapshot paused: {:?}",
        fresh.console.first()
    );
    assert!(
        !fresh.console.iter().any(|l| l.contains("CALAMETRA-INIT")),
        "no boot in a restored run"
    );
    let reused = run(&lock, "reused");
    assert_eq!(snapshot_record(&reused), (key.clone(), false));
    assert!(reused.timings.snapshot.is_none());
    let again = run(&lock, "reused-again");
    assert_eq!(
        fresh.hash, reused.hash,
        "the same run from a fresh and a reused snapshot"
    );
    assert_eq!(reused.hash, again.hash, "the same run restored twice");
    assert_eq!(fresh.console, again.console);
    // Another snapshot made from scratch holds the same machine: the guest pauses itself at a
    // fixed instruction and QEMU stops there on the same clock (patches/0003).
    let other_cache = tempfile::tempdir().expect("a second private cache");
    let remade = run(&from(&lock, other_cache.path()), "fresh-again");
    assert_eq!(snapshot_record(&remade), (key.clone(), true));
    assert_eq!(
        remade.hash, fresh.hash,
        "a run from a second fresh snapshot is the same run"
    );
    eprintln!(
        "HASH snapshot fresh/reused/reused/fresh-again: {} {} {} {}",
        fresh.hash, reused.hash, again.hash, remade.hash
    );

    // The key follows every option: another kernel command-line word, another machine.
    let mut other = lock.clone();
    other.qemu.extra_append = "calametra.note=another-snapshot".into();
    let changed = run(&other, "changed-option");
    let (key2, made2) = snapshot_record(&changed);
    assert!(made2, "a changed option makes a new snapshot");
    assert_ne!(key, key2);
    let dirs = std::fs::read_dir(cache.path())
        .expect("the cache")
        .filter_map(Result::ok)
        .filter(|e| !e.file_name().to_string_lossy().starts_with('.'))
        .count();
    assert_eq!(dirs, 2, "one snapshot per machine, nothing half-made left");
    // The old one is still there and still used.
    assert_eq!(snapshot_record(&run(&lock, "old-option")).1, false);
}

#[test]
#[ignore = "needs the lockstep QEMU build: run calametra-qemu/qemu/build.sh (after scripts/install-qemu.sh and guest/build.sh), then cargo test -p calametra-qemu --test snapshot -- --ignored"]
fn a_cold_boot_still_runs_the_probe_and_hashes_the_same_twice() {
    let Some(mut lock) =
        common::lockstep_or_skip("a_cold_boot_still_runs_the_probe_and_hashes_the_same_twice")
    else {
        return;
    };
    lock.start = Start::ColdBoot;
    let a = run(&lock, "cold-a");
    assert!(a.console.iter().any(|l| l.contains("CALAMETRA-INIT")));
    assert!(!a.trace.iter().any(|l| l.contains("\"actor\":\"snapshot\"")));
    let b = run(&lock, "cold-b");
    assert_eq!(a.hash, b.hash, "a cold boot is byte-exact too");
}
