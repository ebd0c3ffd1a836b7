//! End-to-end, pinned guest cases (issue 18): a guest scenario's saved case records the QEMU
//! build and the guest image it was made with (`guest_build`, `snapshot::build_id`); with the
//! same build it replays byte-exactly, with another it is not replayed and says so.
//!
//! The scenario is the test gadget under `lsusb` with a planted invariant (the gadget must
//! never be configured) that the kernel's enumeration breaks on the same frame every run: the
//! failure chain saves its case into a temporary directory, the case is read back and replayed
//! with the same runner (the recorded hash) and judged with a runner of another build (a
//! machine with more memory: no run at all). Three to four guest runs from the lsusb snapshot.

mod common;

use calametra_core::chain::{self, CaseState, Found, Owner};
use calametra_core::explore::{Probe as Trial, Runner};
use calametra_core::regress::{self, Regression, Saved};
use calametra_qemu::scenario::GuestRunner;
use calametra_qemu::{snapshot, Guest, Probe};
use common::Gadget;

/// The gadget under lsusb, and an invariant the enumeration breaks (SET_CONFIGURATION).
fn never_configured(guest: &mut Guest) {
    guest.attach(Gadget::default());
    guest.probe(Probe::Lsusb);
    guest.invariant("never_configured", |g: &Gadget| match g.configuration {
        0 => Ok(()),
        c => Err(format!("configuration {c} was set")),
    });
}

#[test]
#[ignore = "needs the lockstep QEMU and the guest: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test pinned -- --ignored"]
fn a_saved_guest_case_records_its_build_replays_with_it_and_not_with_another() {
    let test = "a_saved_guest_case_records_its_build_replays_with_it_and_not_with_another";
    let Some(lock) = common::lockstep_or_skip(test) else {
        return;
    };
    let build = snapshot::build_id(&lock).expect("this build's identity");
    let runner = GuestRunner::new(never_configured, lock.clone());
    assert_eq!(runner.build(), Ok(Some(build.clone())));

    let base = calametra_core::RunConfig::default();
    let found = runner
        .run(Trial::Baseline.config(&base))
        .expect("the run gives a verdict");
    let failure = found.failure.clone().expect("the planted invariant breaks");
    assert_eq!(failure.invariant(), Some("never_configured"), "{failure}");

    let dir = tempfile::tempdir().unwrap();
    let owner = Owner {
        package: "calametra-qemu".into(),
        target: "pinned".into(),
        scenario: "never_configured".into(),
    };
    let handled = chain::handle(
        &runner,
        &base,
        &owner,
        0,
        Found {
            trial: "never_configured::baseline",
            run: &found,
            failure: &failure,
        },
        &regress::Dir(dir.path().to_path_buf()),
    );
    assert!(handled.reproduced, "the failure reproduces from its events");
    let path = match &handled.saved {
        Ok(Saved::Written(p)) => p.clone(),
        other => panic!("the case is written: {other:?}"),
    };
    let text = std::fs::read_to_string(&path).unwrap();
    assert!(
        text.contains(&format!("\"guest_build\": \"{build}\"")),
        "the case records the build: {text}"
    );
    let case = Regression::load(&path).expect("the saved case reads back");
    assert_eq!(case.guest_build.as_deref(), Some(build.as_str()));

    // The same build: replayed byte-exactly, the recorded hash.
    match chain::check_case(&runner, &base, &owner, &case, false) {
        CaseState::Fails { exact: true, run } => {
            assert_eq!(run.hash.to_string(), case.trace_hash);
            eprintln!(
                "HASH pinned case: saved {} replayed {}",
                case.trace_hash, run.hash
            );
        }
        s => panic!(
            "the case replays byte-exactly with its build, not {}",
            s.word()
        ),
    }

    // Another build (the machine's memory is part of it): not replayed, both builds named.
    let mut other = lock.clone();
    other.qemu.memory_mib += 256;
    let other_build = snapshot::build_id(&other).unwrap();
    assert_ne!(other_build, build);
    let elsewhere = GuestRunner::new(never_configured, other);
    match chain::check_case(&elsewhere, &base, &owner, &case, false) {
        CaseState::OtherBuild { recorded, this } => {
            assert_eq!((recorded, this), (build.clone(), other_build.clone()));
        }
        s => panic!("a case of another build is not replayed, not {}", s.word()),
    }
}
