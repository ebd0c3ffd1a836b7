//! The updater against the DFU model: the 64 KiB baseline, every fault primitive at every fault
//! site the baseline crosses, and 100 seeded schedules with transport faults; with the
//! `planted-bug` feature, exploration must find the planted bug.

// Under `planted-bug` only the baseline and the bug hunt are built.
#![cfg_attr(feature = "planted-bug", allow(unused_imports))]

use calametra_core::choices::{derive_seed, Event, Source};
#[cfg(feature = "planted-bug")]
use calametra_core::fault::FaultKind;
use calametra_core::fault::{Fault, FaultPlan, FaultSet, Site};
use calametra_core::{run, RunConfig, RunResult, Sim};
use calametra_example_dfu_updater::scenario::TOLERANT_SPEC;
use calametra_example_dfu_updater::{
    new_image, scenario, scenario_nontolerant, scenario_with, Report, UpdateError,
};
use calametra_models::dfu::marks;
use std::time::Instant;

fn baseline(scenario: fn(&mut Sim)) -> RunResult {
    run(
        RunConfig {
            record_sites: true,
            ..RunConfig::default()
        },
        &scenario,
    )
}

#[test]
fn baseline_downloads_64k_manifests_and_verifies() {
    for (name, s, tolerant) in [
        ("tolerant", scenario as fn(&mut Sim), true),
        ("nontolerant", scenario_nontolerant, false),
    ] {
        let a = baseline(s);
        assert!(a.failure.is_none(), "{name}: {:?}", a.failure);
        let b = baseline(s);
        assert_eq!(a.hash, b.hash, "{name}: the baseline is deterministic");
        assert_eq!(a.marks.get(marks::MANIFESTED), Some(&1), "{name}");
        assert_eq!(a.marks.get(marks::UPLOAD_SHORT_FRAME), Some(&1), "{name}");
        assert_eq!(
            a.marks.get(marks::WILL_DETACH_TO_DFU),
            Some(&if tolerant { 1 } else { 2 }),
            "{name}"
        );
        assert_eq!(
            a.marks.get(marks::STALL_TO_ERROR),
            None,
            "{name}: a clean run never stalls"
        );
    }
    // The report of a clean run.
    let cell = std::rc::Rc::new(std::cell::RefCell::new(None));
    let c2 = cell.clone();
    let r = run(RunConfig::default(), &move |sim: &mut Sim| {
        let o = scenario_with(sim, "specs/dfu11-tolerant.json", TOLERANT_SPEC);
        *c2.borrow_mut() = Some(o);
    });
    assert!(r.failure.is_none());
    let outcome = cell.borrow_mut().take().expect("scenario ran");
    let report = outcome
        .borrow()
        .clone()
        .expect("updater finished")
        .expect("updated");
    assert_eq!(
        (report.attempts, report.blocks, report.transfer_size),
        (1, 32, 2048)
    );
    assert!(report.verified && report.manifestation_tolerant && report.restarts.is_empty());
    assert_eq!(new_image().len(), 64 * 1024);
}

/// One run of the tolerant scenario with `faults`, and what the updater returned.
fn run_with(faults: FaultPlan) -> (RunResult, Option<Result<Report, UpdateError>>) {
    let cell = std::rc::Rc::new(std::cell::RefCell::new(None));
    let c2 = cell.clone();
    let r = run(
        RunConfig {
            faults,
            ..RunConfig::default()
        },
        &move |sim: &mut Sim| {
            let o = scenario_with(sim, "specs/dfu11-tolerant.json", TOLERANT_SPEC);
            *c2.borrow_mut() = Some(o);
        },
    );
    let outcome = cell.borrow().as_ref().and_then(|o| o.borrow().clone());
    (r, outcome)
}

#[test]
fn recovery_paths_end_where_they_should() {
    // A block the device misreads (garbled as it receives it) is only caught by the device's
    // CRC check at the end of the image: the download starts again and the second attempt
    // installs the image.
    let (r, out) = run_with(FaultPlan::single(
        "ctrl.dnload#5",
        Fault::Garble {
            offset: 0,
            xor: 0xff,
        },
    ));
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.marks.get(marks::MANIFEST_REFUSED), Some(&1));
    let report = out.expect("finished").expect("updated");
    assert_eq!(report.attempts, 2);
    assert!(
        report.restarts[0].contains("errFILE"),
        "{:?}",
        report.restarts
    );
    // A block stalled on the bus never reached the device: it is sent again, no restart.
    let (r, out) = run_with(FaultPlan::single("ctrl.dnload#7", Fault::Stall));
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let report = out.expect("finished").expect("updated");
    assert_eq!((report.attempts, report.restarts.len()), (1, 0));
    // Polling before bwPollTimeout has passed (a garbled status makes the updater wait its
    // fallback instead, so force it with a refused timer): the device stalls, the updater
    // clears the error and starts again.
    let (r, out) = run_with(FaultPlan::single("dfu.dnbusy->dnload_sync#3", Fault::Stall));
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.marks.get(marks::GETSTATUS_DURING_DNBUSY), Some(&1));
    assert_eq!(out.expect("finished").expect("updated").attempts, 2);
    // Unplugged halfway: a clean error, and the device keeps the old image (never_bricked).
    let (r, out) = run_with(FaultPlan::single("ctrl.dnload#16", Fault::Disconnect));
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(out, Some(Err(UpdateError::Disconnected)));
}

/// Runs every fault of `set` at every site of `sites`; returns (runs, failures). The runs are
/// independent simulations, spread over the machine's cores (each thread has its own worlds).
#[allow(
    clippy::disallowed_methods,
    reason = "worker threads for the test itself; each simulated run stays on one thread"
)]
fn explore_sites(scenario: fn(&mut Sim), set: &FaultSet, sites: &[Site]) -> (usize, Vec<String>) {
    let trials: Vec<(String, Fault)> = sites
        .iter()
        .flat_map(|s| {
            set.candidates(&s.kind)
                .into_iter()
                .map(|f| (s.name.clone(), f))
        })
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let failures: Vec<String> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let trials = &trials;
                scope.spawn(move || {
                    let mut failed = Vec::new();
                    for (site, fault) in trials.iter().skip(k).step_by(threads) {
                        let r = run(
                            RunConfig {
                                faults: FaultPlan::single(site, fault.clone()),
                                ..RunConfig::default()
                            },
                            &scenario,
                        );
                        if let Some(f) = r.failure {
                            failed.push(format!("{site}::{fault}: {f}"));
                        }
                    }
                    failed
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| {
                h.join()
                    .unwrap_or_else(|_| vec!["an exploration thread panicked".into()])
            })
            .collect()
    });
    (trials.len(), failures)
}

/// The sites of a clean baseline.
fn sites_of(scenario: fn(&mut Sim)) -> Vec<Site> {
    let base = baseline(scenario);
    assert!(base.failure.is_none(), "{:?}", base.failure);
    base.sites
}

#[cfg(not(feature = "planted-bug"))]
#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "times the test itself on the wall clock, outside any simulated run"
)]
fn every_fault_at_every_site_of_the_64k_download() {
    let t = Instant::now();
    let sites = sites_of(scenario);
    let (runs, failures) = explore_sites(scenario, &FaultSet::All, &sites);
    eprintln!(
        "tolerant: {} sites, {runs} single-fault runs in {:.2?}",
        sites.len(),
        t.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// The non-tolerant device differs from the tolerant one from the end of the image on
/// (manifestation, its own detach-attach, a second detach, the upload): every fault at every
/// site from the zero-length DFU_DNLOAD.
#[cfg(not(feature = "planted-bug"))]
#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "times the test itself on the wall clock, outside any simulated run"
)]
fn every_fault_after_the_download_of_the_nontolerant_device() {
    let t = Instant::now();
    let sites = sites_of(scenario_nontolerant);
    let last_dnload = sites
        .iter()
        .rposition(|s| s.name.starts_with("ctrl.dnload#"))
        .expect("the baseline downloads");
    let (runs, failures) =
        explore_sites(scenario_nontolerant, &FaultSet::All, &sites[last_dnload..]);
    eprintln!(
        "nontolerant: {} of {} sites, {runs} single-fault runs in {:.2?}",
        sites.len() - last_dnload,
        sites.len(),
        t.elapsed()
    );
    assert!(
        failures.is_empty(),
        "{} of {runs} runs failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

#[cfg(not(feature = "planted-bug"))]
#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "times the test itself on the wall clock, outside any simulated run"
)]
fn a_hundred_seeds_with_transport_faults() {
    let t = Instant::now();
    let mut failures = Vec::new();
    let (mut faulted, mut updated, mut unplugged) = (0, 0, 0);
    for i in 0..100 {
        let seed = derive_seed(0, "dfu_updater::scenario", i);
        let cell = std::rc::Rc::new(std::cell::RefCell::new(None));
        let c2 = cell.clone();
        let r = run(
            RunConfig {
                source: Source::Seeded(seed),
                fault_set: FaultSet::Transport,
                ..RunConfig::default()
            },
            &move |sim: &mut Sim| {
                let o = scenario_with(sim, "specs/dfu11-tolerant.json", TOLERANT_SPEC);
                *c2.borrow_mut() = Some(o);
            },
        );
        if r.events.iter().any(|e| matches!(e, Event::Fault { .. })) {
            faulted += 1;
        }
        match cell.borrow().as_ref().and_then(|o| o.borrow().clone()) {
            Some(Ok(_)) => updated += 1,
            Some(Err(UpdateError::Disconnected | UpdateError::Reattached { .. })) => unplugged += 1,
            _ => {}
        }
        if let Some(f) = r.failure {
            failures.push(format!("seed {seed:#x}: {f}"));
        }
    }
    eprintln!(
        "100 seeds in {:.2?}: {faulted} injected faults; {updated} updated, {unplugged} ended cleanly when the device was unplugged",
        t.elapsed()
    );
    assert!(faulted >= 50, "most seeds inject faults: {faulted}");
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    assert_eq!(updated + unplugged, 100);
}

#[cfg(feature = "planted-bug")]
#[test]
fn exploration_finds_the_planted_bug() {
    let sites = sites_of(scenario); // the planted bug hides in the baseline
    let (runs, failures) = explore_sites(scenario, &FaultSet::All, &sites);
    let found: Vec<&String> = failures
        .iter()
        .filter(|f| f.contains("installed_as_claimed"))
        .collect();
    let seeds = (0..32)
        .filter(|&i| {
            let r = run(
                RunConfig {
                    source: Source::Seeded(derive_seed(0, "dfu_updater::marks", i)),
                    fault_set: no_disconnect(),
                    ..RunConfig::default()
                },
                &scenario,
            );
            r.failure.and_then(|f| f.invariant().map(str::to_owned))
                == Some("installed_as_claimed".into())
        })
        .count();
    eprintln!(
        "{} of {runs} single-fault runs and {seeds} of 32 seeds find the planted bug; the first: {}",
        found.len(),
        found.first().map_or("(none)", |s| s.as_str())
    );
    assert!(
        !found.is_empty(),
        "no site found the planted bug: {failures:?}"
    );
}

/// Every fault primitive but `disconnect` (which ends most long seeded runs early).
#[cfg(feature = "planted-bug")]
fn no_disconnect() -> FaultSet {
    FaultSet::Only(vec![
        FaultKind::Stall,
        FaultKind::Timeout,
        FaultKind::Short,
        FaultKind::Delay,
        FaultKind::Corrupt,
    ])
}
