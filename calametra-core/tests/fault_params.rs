//! Fault parameters (issue 41): a seeded run draws a `short`'s length and a `corrupt`'s
//! offset and mask from the primitive's own stream (`fault/short`, `fault/corrupt`), shows
//! them in its trace and events, and replays them byte-exactly; `site::` trials keep the fixed
//! values. A `short` at an IN transfer cuts what the device returned, not the length asked for.

use calametra_core::choices::{Event, Source};
use calametra_core::device::Loopback;
use calametra_core::explore::{site_probes, Probe};
use calametra_core::fault::{Fault, FaultKind, FaultSet, SiteKind};
use calametra_core::{run, RunConfig, RunResult, Sim};
use std::cell::RefCell;
use std::collections::BTreeSet;
use std::rc::Rc;
use std::time::Duration;

const T: Duration = Duration::from_millis(100);

/// Stores `stored` bytes, then loads with a `wLength` of 64, `loads` times; what each load
/// returned is kept in `got`.
fn loads(sim: &mut Sim, stored: usize, loads: usize, got: Rc<RefCell<Vec<Vec<u8>>>>) {
    let dev = sim.attach(Loopback::default());
    let iface = dev.interface();
    sim.spawn("driver", async move {
        let data: Vec<u8> = (1..=stored as u8).collect();
        let _ = iface.control_out(Loopback::store(&data), T).await;
        for _ in 0..loads {
            if let Ok(d) = iface.control_in(Loopback::load(64), T).await {
                got.borrow_mut().push(d);
            }
        }
    });
}

fn faults_of(r: &RunResult) -> Vec<(String, Fault)> {
    r.events
        .iter()
        .filter_map(|e| match e {
            Event::Fault { site, fault } => Some((site.clone(), fault.clone())),
            _ => None,
        })
        .collect()
}

/// The bug: the site of a control IN took its length from `wLength` (64), so the explored
/// `short(len/2)` was `short(32)` and cut nothing of a 10-byte reply. The baseline's site now
/// has the reply's length and its `site::` trial cuts the reply in half.
#[test]
fn a_short_site_trial_at_a_control_in_cuts_what_the_device_returned() {
    let got = Rc::new(RefCell::new(Vec::new()));
    let g = got.clone();
    let base = run(
        RunConfig {
            record_sites: true,
            ..RunConfig::default()
        },
        &move |sim| loads(sim, 10, 1, g.clone()),
    );
    let load = base
        .sites
        .iter()
        .find(|s| s.name == "ctrl.load#1")
        .expect("the load's site");
    assert_eq!(
        load.kind,
        SiteKind::Transfer {
            len: 10,
            dir: calametra_core::fault::Dir::In,
            packet: 1,
        }
    );
    let probes = site_probes(&base.sites, &FaultSet::Only(vec![FaultKind::Short]));
    let probe = probes
        .iter()
        .find(|p| matches!(p, Probe::Site { site, .. } if site == "ctrl.load#1"))
        .expect("a short site trial at the load");
    assert_eq!(
        probe,
        &Probe::Site {
            site: "ctrl.load#1".into(),
            fault: Fault::Short(5)
        },
        "site trials keep the fixed value, half the length"
    );
    let got = Rc::new(RefCell::new(Vec::new()));
    let g = got.clone();
    let r = run(
        probe.config(&RunConfig {
            keep_trace: true,
            ..RunConfig::default()
        }),
        &move |sim| loads(sim, 10, 1, g.clone()),
    );
    assert_eq!(*got.borrow(), [vec![1, 2, 3, 4, 5]], "{:?}", r.lines);
    assert!(
        r.lines
            .iter()
            .any(|l| l.contains("\"kind\":\"fault\"") && l.contains("short(5)")),
        "{:#?}",
        r.lines
    );
}

/// Seeded runs draw the parameters: every drawn `short` at the load cuts the 10-byte reply to
/// a length below 10 (and what its event and record say), corrupts hit bytes other than the
/// first with masks other than 0xff, and each run's events replay it byte-exactly.
#[test]
fn seeded_runs_draw_fault_parameters_from_their_own_streams_and_replay_them() {
    let set = FaultSet::Only(vec![FaultKind::Short, FaultKind::Corrupt]);
    let (mut lengths, mut offsets, mut masks) = (BTreeSet::new(), BTreeSet::new(), BTreeSet::new());
    for seed in 0..48 {
        let got = Rc::new(RefCell::new(Vec::new()));
        let g = got.clone();
        let config = RunConfig {
            source: Source::Seeded(seed),
            fault_set: set.clone(),
            keep_trace: true,
            ..RunConfig::default()
        };
        let r = run(config.clone(), &move |sim| loads(sim, 10, 24, g.clone()));
        let loads_faulted: Vec<Fault> = faults_of(&r)
            .into_iter()
            .filter(|(site, _)| site.starts_with("ctrl.load#"))
            .map(|(_, f)| f)
            .collect();
        for f in &loads_faulted {
            match *f {
                Fault::Short(n) => {
                    assert!(n < 10, "seed {seed}: {f} is not shorter than the reply");
                    assert!(
                        got.borrow().iter().any(|d| d.len() == n as usize),
                        "seed {seed}: no reply of {n} bytes: {:?}",
                        got.borrow()
                    );
                    lengths.insert(n);
                }
                Fault::Corrupt { offset, xor } => {
                    assert_ne!(xor, 0, "seed {seed}");
                    offsets.insert(offset % 10);
                    masks.insert(xor);
                }
                _ => unreachable!("{f}"),
            }
            let text = f.to_string();
            assert!(
                r.lines
                    .iter()
                    .any(|l| l.contains("\"kind\":\"fault\"") && l.contains(&text)),
                "seed {seed}: {text} is not in the trace"
            );
        }
        // The events replay the run: the same parameters, the same hash.
        let again = run(
            RunConfig {
                source: Source::Replay(r.events.clone()),
                ..config
            },
            &|sim| loads(sim, 10, 24, Rc::new(RefCell::new(Vec::new()))),
        );
        assert_eq!(again.hash, r.hash, "seed {seed}");
        assert_eq!(faults_of(&again), faults_of(&r), "seed {seed}");
    }
    assert!(lengths.len() >= 4, "short lengths drawn: {lengths:?}");
    assert!(
        offsets.iter().any(|&o| o != 0) && masks.iter().any(|&x| x != 0xff),
        "corrupt offsets {offsets:?}, masks {masks:?}"
    );
}
