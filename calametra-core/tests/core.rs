//! The simulator core on its own: determinism, scheduling choices, the bus and faults, using
//! only the loopback test device.

use calametra_core::choices::Source;
use calametra_core::exec::{sleep, yield_now};
use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::usb::{Loopback, TransferError};
use calametra_core::{run, Failure, RunConfig, Sim};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

const T: Duration = Duration::from_millis(100);

/// Three tasks with simultaneous timers append to a shared log; the log's order is traced.
fn three_tasks(sim: &mut Sim) {
    let log = Rc::new(RefCell::new(Vec::new()));
    for name in ["a", "b", "c"] {
        let log = log.clone();
        sim.spawn(name, async move {
            for i in 0..3u64 {
                sleep(Duration::from_micros(10)).await; // the same deadline for all three
                log.borrow_mut().push(format!("{name}{i}"));
                calametra_core::exec::mark(&format!("{name}{i}"));
            }
        });
    }
}

fn seeded(seed: u64) -> RunConfig {
    RunConfig {
        source: Source::Seeded(seed),
        keep_trace: true,
        ..RunConfig::default()
    }
}

#[test]
fn a_seed_always_names_the_same_run_and_seeds_vary_orderings() {
    let mut orderings = std::collections::BTreeSet::new();
    for seed in 0..200 {
        let a = run(seeded(seed), &three_tasks);
        let b = run(seeded(seed), &three_tasks);
        assert!(a.failure.is_none(), "{:?}", a.failure);
        assert_eq!(a.hash, b.hash, "seed {seed}");
        assert_eq!(a.lines, b.lines, "seed {seed}");
        let order: Vec<String> = a
            .lines
            .iter()
            .filter(|l| l.contains("\"kind\":\"mark\""))
            .map(|l| l.split("\"mark\":\"").nth(1).unwrap_or("").to_string())
            .collect();
        orderings.insert(order);
    }
    assert!(
        orderings.len() >= 2,
        "seeds produced only {} ordering(s)",
        orderings.len()
    );
}

#[test]
fn the_baseline_is_the_default_run_and_replays_from_its_events() {
    let base = run(
        RunConfig {
            keep_trace: true,
            ..RunConfig::default()
        },
        &three_tasks,
    );
    assert!(base.events.is_empty());
    let s = run(seeded(7), &three_tasks);
    let r = run(
        RunConfig {
            source: Source::Replay(s.events.clone()),
            keep_trace: true,
            ..RunConfig::default()
        },
        &three_tasks,
    );
    assert_eq!(s.hash, r.hash, "a run's events must replay it");
}

/// What a transfer gave the driver.
type Outcome = Result<Vec<u8>, TransferError>;

fn loopback_driver(sim: &mut Sim, seen: Rc<RefCell<Vec<Outcome>>>) {
    let dev = sim.attach(Loopback::default());
    let iface = dev.interface();
    sim.spawn("driver", async move {
        let r = iface
            .control_out(Loopback::store(&[1, 2, 3, 4]), T)
            .await
            .map(|_| Vec::new());
        seen.borrow_mut().push(r);
        let r = iface.control_in(Loopback::load(8), T).await;
        seen.borrow_mut().push(r);
    });
}

/// A run's world is kept for the thread's next run (its buffers reused): the next run must
/// see none of its state. The same run, first on a new world and then after runs that left
/// transfers, faults, marks, sites and a step limit behind, is the same run.
#[test]
fn a_run_after_other_runs_on_the_thread_is_the_run_it_is_alone() {
    let once = || {
        let seen = Rc::new(RefCell::new(Vec::new()));
        run(
            RunConfig {
                faults: FaultPlan::single("ctrl.load#1", Fault::Short(2)),
                keep_trace: true,
                record_sites: true,
                ..RunConfig::default()
            },
            &move |sim| loopback_driver(sim, seen.clone()),
        )
    };
    let first = once();
    for seed in 0..3 {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let cfg = RunConfig {
            faults: FaultPlan::single("ctrl.store#1", Fault::Delay(3_000_000)),
            max_steps: 5 + seed,
            coverage: true,
            ..seeded(seed)
        };
        run(cfg, &move |sim| {
            three_tasks(sim);
            loopback_driver(sim, seen.clone())
        });
        run(seeded(seed), &three_tasks);
    }
    let again = once();
    assert_eq!(again.hash, first.hash);
    assert_eq!(again.lines, first.lines);
    assert_eq!(again.events, first.events);
    assert_eq!(again.sites, first.sites);
    assert_eq!(again.marks, first.marks);
    assert_eq!(
        (again.steps, again.end_ns, again.records),
        (first.steps, first.end_ns, first.records)
    );
    assert!(first.lines.iter().any(|l| l.contains("\"kind\":\"fault\"")));
}

#[test]
fn transfers_cross_the_bus_and_faults_apply_where_they_cross() {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = seen.clone();
    let r = run(
        RunConfig {
            keep_trace: true,
            record_sites: true,
            ..RunConfig::default()
        },
        &move |sim| loopback_driver(sim, s2.clone()),
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(seen.borrow()[1], Ok(vec![1, 2, 3, 4]));
    let names: Vec<&str> = r.sites.iter().map(|s| s.name.as_str()).collect();
    assert_eq!(names, ["ctrl.store#1", "echo.empty->full#1", "ctrl.load#1"]);
    assert!(
        r.end_ns >= 250_000,
        "two control transfers take modelled time: {}",
        r.end_ns
    );

    let cases: Vec<(&str, Fault, Outcome)> = vec![
        ("ctrl.load#1", Fault::Stall, Err(TransferError::Stall)),
        ("ctrl.load#1", Fault::Timeout, Err(TransferError::Timeout)),
        ("ctrl.load#1", Fault::Short(2), Ok(vec![1, 2])),
        (
            "ctrl.load#1",
            Fault::Corrupt {
                offset: 1,
                xor: 0xff,
            },
            Ok(vec![1, 0xfd, 3, 4]),
        ),
        (
            "ctrl.load#1",
            Fault::Disconnect,
            Err(TransferError::Disconnected),
        ),
        ("ctrl.store#1", Fault::Short(1), Ok(vec![1])),
        ("echo.empty->full#1", Fault::Stall, Ok(vec![])),
    ];
    for (site, fault, want) in cases {
        let seen = Rc::new(RefCell::new(Vec::new()));
        let s2 = seen.clone();
        let cfg = RunConfig {
            faults: FaultPlan::single(site, fault.clone()),
            keep_trace: true,
            ..RunConfig::default()
        };
        let r = run(cfg, &move |sim| loopback_driver(sim, s2.clone()));
        assert!(r.failure.is_none(), "{site} {fault}: {:?}", r.failure);
        assert_eq!(seen.borrow()[1], want, "{site} {fault}");
        assert!(
            r.lines.iter().any(|l| l.contains("\"kind\":\"fault\"")),
            "{site} {fault}: fault traced"
        );
        assert_eq!(
            calametra_core::choices::count_events(&r.events),
            1,
            "the injected fault is an event of the run (after its anchor)"
        );
    }
    // A delay moves the completion later in virtual time.
    let cfg = RunConfig {
        faults: FaultPlan::single("ctrl.load#1", Fault::Delay(5_000_000)),
        ..RunConfig::default()
    };
    let s3 = Rc::new(RefCell::new(Vec::new()));
    let s4 = s3.clone();
    let r = run(cfg, &move |sim| loopback_driver(sim, s4.clone()));
    assert!(r.end_ns >= 5_000_000);
    assert_eq!(s3.borrow()[1], Ok(vec![1, 2, 3, 4]));
}

#[test]
fn invariants_panics_deadlocks_and_timeouts_are_failures() {
    let r = run(RunConfig::default(), &|sim| {
        let dev = sim.attach(Loopback::default());
        let iface = dev.interface();
        sim.spawn("driver", async move {
            let _ = iface.control_out(Loopback::store(&[9]), T).await;
        });
        sim.invariant("nothing_stored", move |w| {
            if w.model(dev).stored().is_empty() {
                Ok(())
            } else {
                Err(format!("stored {:?}", w.model(dev).stored()))
            }
        });
    });
    assert_eq!(
        r.failure.as_ref().and_then(|f| f.invariant()),
        Some("nothing_stored")
    );
    assert_eq!(
        r.failure.unwrap().signature(),
        "invariant `nothing_stored` broke: stored [N]"
    );

    let r = run(RunConfig::default(), &|sim| {
        sim.spawn("boom", async {
            if true {
                panic!("driver bug {}", 7)
            }
        });
    });
    match r.failure {
        Some(Failure::Panic { task, message }) => {
            assert_eq!(task, "boom");
            assert!(message.contains("driver bug 7"), "{message}");
        }
        other => panic!("expected a panic failure, got {other:?}"),
    }

    let r = run(RunConfig::default(), &|sim| {
        let dev = sim.attach(Loopback::default());
        let iface = dev.interface();
        sim.spawn("waiter", async move {
            let _ = iface.interrupt_in(0x82, 8).await; // nothing ever comes
        });
    });
    assert!(
        matches!(r.failure, Some(Failure::Deadlock { ref blocked }) if blocked == &["waiter".to_string()]),
        "{:?}",
        r.failure
    );

    let r = run(
        RunConfig {
            virtual_timeout: 1_000_000,
            ..RunConfig::default()
        },
        &|sim| {
            sim.spawn("sleeper", async { sleep(Duration::from_secs(1)).await });
        },
    );
    assert!(
        matches!(r.failure, Some(Failure::VirtualTimeout { .. })),
        "{:?}",
        r.failure
    );

    let r = run(
        RunConfig {
            max_steps: 50,
            ..RunConfig::default()
        },
        &|sim| {
            sim.spawn("spinner", async {
                for _ in 0..u64::MAX {
                    yield_now().await
                }
            });
        },
    );
    assert!(
        matches!(r.failure, Some(Failure::StepLimit { steps: 50 })),
        "{:?}",
        r.failure
    );

    let r = run(RunConfig::default(), &|sim| {
        sim.spawn("err", async { Err::<(), _>("no device") });
    });
    assert!(
        matches!(r.failure, Some(Failure::TaskError { .. })),
        "{:?}",
        r.failure
    );
}

#[test]
fn interrupt_in_waits_for_device_state_and_externals_disconnect() {
    let r = run(
        RunConfig {
            keep_trace: true,
            ..RunConfig::default()
        },
        &|sim| {
            let dev = sim.attach(Loopback::default());
            let a = dev.interface();
            let b = dev.interface();
            sim.spawn("listener", async move {
                let v = a.interrupt_in(0x82, 8).await.expect("interrupt");
                assert_eq!(v, vec![0]);
            });
            sim.spawn("writer", async move {
                sleep(Duration::from_millis(1)).await;
                b.bulk_out(0x01, vec![5; 10]).await.expect("bulk out");
                let back = b.bulk_in(0x81, 64).await.expect("bulk in");
                assert_eq!(back, vec![5; 10]);
            });
        },
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);

    // An external unplug fails the pending transfer, in seeded runs only.
    let scenario = |sim: &mut Sim| {
        let dev = sim.attach(Loopback::default());
        let a = dev.interface();
        sim.spawn_daemon("listener", async move {
            let r = a.interrupt_in(0x82, 8).await;
            assert_eq!(r, Err(TransferError::Disconnected));
        });
        let b = dev.interface();
        sim.spawn("driver", async move {
            for _ in 0..20 {
                if b.control_in(Loopback::load(4), T).await == Err(TransferError::Disconnected) {
                    return;
                }
            }
        });
        sim.external("unplug", move |w| w.disconnect(dev));
    };
    let base = run(RunConfig::default(), &scenario);
    assert!(base.events.is_empty() && base.failure.is_none());
    // Without a swarm a seeded run places every external (a swarm may turn the unplug off).
    let s = run(
        RunConfig {
            source: Source::Seeded(3),
            horizon: 20,
            swarm: false,
            ..RunConfig::default()
        },
        &scenario,
    );
    assert!(s.failure.is_none(), "{:?}", s.failure);
    assert!(s
        .events
        .iter()
        .any(|e| matches!(e, calametra_core::choices::Event::External { .. })));
    assert_ne!(s.hash, base.hash);
}

#[test]
fn a_device_host_drives_one_device_without_tasks() {
    use calametra_core::host::DeviceHost;
    let mut h = DeviceHost::new(
        Loopback::default(),
        &RunConfig {
            keep_trace: true,
            ..RunConfig::default()
        },
    );
    assert_eq!(
        h.control(Loopback::store(&[7, 8]).setup(), &[7, 8]),
        Ok(vec![])
    );
    assert_eq!(h.control(Loopback::load(4).setup(), &[]), Ok(vec![7, 8]));
    assert!(h.now() >= 250_000);
    assert_eq!(h.poll_in(0x81, 64, false), None, "nothing queued: NAK");
    assert_eq!(h.out(0x01, &[1, 2, 3]), Ok(3));
    assert_eq!(h.poll_in(0x81, 64, false), Some(Ok(vec![1, 2, 3])));
    h.advance_to(10_000_000);
    assert_eq!(h.now(), 10_000_000);
    assert_eq!(
        h.device::<Loopback>().map(|d| d.stored().to_vec()),
        Some(vec![7, 8])
    );
    h.disconnect();
    assert_eq!(
        h.control(Loopback::load(4).setup(), &[]),
        Err(TransferError::Disconnected)
    );
    let (hash, n) = h.hash();
    assert!(n >= 5 && hash.to_string().starts_with("sha256:"));

    // The same sequence with a stall pinned at the second load.
    let cfg = RunConfig {
        faults: FaultPlan::single("ctrl.load#1", Fault::Stall),
        ..RunConfig::default()
    };
    let mut h = DeviceHost::new(Loopback::default(), &cfg);
    assert_eq!(
        h.control(Loopback::load(4).setup(), &[]),
        Err(TransferError::Stall)
    );
}
