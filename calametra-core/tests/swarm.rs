//! Independent streams and swarm configurations, end to end: what a seeded run draws, what it
//! records, and that a replay (of new and of old event lists) reproduces it.

use calametra_core::choices::{first_unapplied, Event, Source};
use calametra_core::exec::{data_below, draw_below, sleep, yield_now};
use calametra_core::explore::{replay_config, Probe};
use calametra_core::fault::{FaultKind, FaultSet, SiteFamily, SiteKind};
use calametra_core::swarm::{Swarm, DENSITIES};
use calametra_core::usb::{
    ControlIn, ControlType, DevCtx, Device, Loopback, Recipient, Reply, Setup,
};
use calametra_core::{run, RunConfig, RunResult, Sim};
use std::collections::{BTreeMap, BTreeSet};
use std::time::Duration;

const T: Duration = Duration::from_millis(100);

/// A die: every control IN returns one byte drawn from the device's own data stream.
struct Die;

impl Device for Die {
    fn name(&self) -> &str {
        "die"
    }
    fn control(&mut self, cx: &mut DevCtx<'_>, _setup: &Setup, _data: &[u8]) -> Reply {
        Reply::Data(vec![cx.data_below(6) as u8])
    }
}

fn roll() -> ControlIn {
    ControlIn {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request: 1,
        value: 0,
        index: 0,
        length: 1,
    }
}

/// Two tasks draw data, roll the die and sleep; `extra_draw` gives task `a` one more draw at
/// its start, `extra_external` declares one more (harmless) external after `tick`.
fn dice(sim: &mut Sim, extra_draw: bool, extra_external: bool) {
    let dev = sim.attach(Die);
    for name in ["a", "b"] {
        let iface = dev.interface();
        sim.spawn(name, async move {
            if extra_draw && name == "a" {
                data_below(1000);
            }
            for _ in 0..4 {
                let d = data_below(50);
                let _ = iface.control_in(roll(), T).await;
                sleep(Duration::from_micros(10 + d)).await;
                yield_now().await;
            }
        });
    }
    sim.external("tick", |w| w.mark("tick"));
    if extra_external {
        sim.external("tock", |w| w.mark("tock"));
    }
}

fn seeded(seed: u64) -> RunConfig {
    RunConfig {
        source: Source::Seeded(seed),
        keep_trace: true,
        horizon: 40,
        ..RunConfig::default()
    }
}

/// The values of each draw stream, in order.
fn draws(r: &RunResult) -> BTreeMap<String, Vec<u64>> {
    let mut m: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for e in &r.events {
        if let Event::Data {
            value,
            stream: Some(s),
        } = e
        {
            m.entry(s.to_string()).or_default().push(*value);
        }
    }
    m
}

fn schedule_events(r: &RunResult) -> Vec<Event> {
    r.events
        .iter()
        .filter(|e| matches!(e, Event::Schedule { .. }))
        .cloned()
        .collect()
}

#[test]
fn an_extra_draw_in_one_actor_leaves_the_others_draws_unchanged() {
    let mut compared = 0;
    for seed in 0..100 {
        let one = run(seeded(seed), &|sim| dice(sim, false, false));
        let two = run(seeded(seed), &|sim| dice(sim, true, false));
        assert!(one.failure.is_none() && two.failure.is_none());
        let (d1, d2) = (draws(&one), draws(&two));
        assert_eq!(
            d1.keys().collect::<Vec<_>>(),
            ["data/a", "data/b", "data/die"]
        );
        // The other task and the device draw the same values; `a` draws one more from its own
        // stream (which moves only a's later values).
        assert_eq!(d1["data/b"], d2["data/b"], "seed {seed}");
        assert_eq!(d1["data/die"], d2["data/die"], "seed {seed}");
        assert_eq!(d2["data/a"].len(), d1["data/a"].len() + 1);
        if schedule_events(&one) == schedule_events(&two) {
            compared += 1;
        }
    }
    // a's values move its sleeps, yet the schedule picks stay the same in some runs.
    assert!(compared > 0);
}

#[test]
fn an_added_external_leaves_the_rest_of_the_run_unchanged() {
    let mut fired = 0;
    for seed in 0..100 {
        let one = run(seeded(seed), &|sim| dice(sim, false, false));
        let two = run(seeded(seed), &|sim| dice(sim, false, true));
        assert!(one.failure.is_none() && two.failure.is_none());
        // Placements come from the `externals` stream, not `schedule`: every schedule pick,
        // every draw and `tick`'s placement are the same.
        assert_eq!(schedule_events(&one), schedule_events(&two), "seed {seed}");
        assert_eq!(draws(&one), draws(&two), "seed {seed}");
        let ext = |r: &RunResult, n: &str| {
            r.events
                .iter()
                .filter(|e| matches!(e, Event::External { name, .. } if name == n))
                .cloned()
                .collect::<Vec<_>>()
        };
        assert_eq!(ext(&one, "tick"), ext(&two, "tick"), "seed {seed}");
        let (s1, s2) = (one.swarm.clone().unwrap(), two.swarm.clone().unwrap());
        assert_eq!(
            (s1.schedule, s1.allows_external("tick")),
            (s2.schedule, s2.allows_external("tick"))
        );
        fired += ext(&two, "tock").len();
    }
    assert!(fired > 10, "tock fired in {fired} runs");
}

#[test]
fn user_streams_are_recorded_replayed_and_move_nothing_else() {
    let scenario = |with_user: bool| {
        move |sim: &mut Sim| {
            sim.spawn("a", async move {
                for _ in 0..3 {
                    if with_user {
                        let r = draw_below("retries", 4);
                        sleep(Duration::from_micros(r)).await;
                    }
                    let d = data_below(9);
                    sleep(Duration::from_micros(d)).await;
                }
            });
        }
    };
    let r = run(seeded(5), &scenario(true));
    let d = draws(&r);
    assert_eq!(d["user/retries"].len(), 3);
    let plain = run(seeded(5), &scenario(false));
    assert_eq!(d["data/a"], draws(&plain)["data/a"]);
    let replay = run(replay_config(&seeded(5), &r.events), &scenario(true));
    assert_eq!(replay.hash, r.hash);
    assert_eq!(first_unapplied(&r.events, &replay.events), None);
    // The default source draws 0 and records nothing.
    let def = run(RunConfig::default(), &scenario(true));
    assert!(def.events.is_empty());
}

/// A driver that does a bit of everything on a loopback device, with an unplug.
fn busy(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    let iface = dev.interface();
    sim.spawn("driver", async move {
        for i in 0..12u8 {
            let _ = iface.control_out(Loopback::store(&[i, i, i]), T).await;
            let _ = iface.control_in(Loopback::load(3), T).await;
            let _ = iface.bulk_out(0x01, vec![i; 8]).await;
            let _ = iface.bulk_in(0x81, 64).await;
        }
    });
    let iface = dev.interface();
    sim.spawn_daemon("listener", async move {
        while iface.interrupt_in(0x82, 8).await.is_ok() {}
    });
    sim.external("unplug", move |w| w.disconnect(dev));
}

fn family_of(site: &str) -> SiteFamily {
    let kind = if site.contains("->") {
        SiteKind::Transition
    } else {
        SiteKind::Transfer {
            len: 0,
            dir: calametra_core::fault::Dir::Out,
            packet: 1,
        }
    };
    SiteFamily::of(site, &kind)
}

#[test]
fn a_swarm_is_drawn_from_the_seed_and_bounds_what_the_run_injects() {
    let mut kinds_injected = BTreeSet::new();
    let mut families_injected = BTreeSet::new();
    let mut densities = BTreeSet::new();
    let mut unplugged = (0, 0);
    for seed in 0..200 {
        let cfg = RunConfig {
            fault_set: FaultSet::All,
            ..seeded(seed)
        };
        let a = run(cfg.clone(), &busy);
        let b = run(cfg.clone(), &busy);
        assert_eq!(a.hash, b.hash, "seed {seed}");
        let swarm = a.swarm.clone().expect("a seeded run draws a swarm");
        assert_eq!(b.swarm.as_ref(), Some(&swarm));
        assert_eq!(swarm, Swarm::draw(seed, &FaultSet::All, &["unplug"], 40));
        densities.insert(swarm.odds);
        // The swarm is the first record of the trace and an event of the run.
        assert!(
            a.lines[0].contains(r#""kind":"config""#),
            "seed {seed}: {}",
            a.lines[0]
        );
        assert!(a.events.contains(&Event::Swarm {
            swarm: Box::new(swarm.clone())
        }));
        for e in &a.events {
            match e {
                Event::Fault { site, fault } => {
                    let family = family_of(site);
                    assert!(
                        swarm.faults.contains(&fault.kind()) && swarm.sites.contains(&family),
                        "seed {seed}: {fault} at {site} under {swarm}"
                    );
                    kinds_injected.insert(fault.kind());
                    families_injected.insert(family);
                }
                Event::External { name, .. } => {
                    assert!(
                        swarm.allows_external(name),
                        "seed {seed}: {name} under {swarm}"
                    );
                }
                _ => {}
            }
        }
        if swarm.allows_external("unplug") {
            unplugged.0 += 1;
        } else {
            unplugged.1 += 1;
        }
        // Its events replay it byte-exactly, swarm record included.
        let r = run(replay_config(&cfg, &a.events), &busy);
        assert_eq!(r.hash, a.hash, "seed {seed}: replay");
        assert_eq!(r.swarm.as_ref(), Some(&swarm));
        assert_eq!(first_unapplied(&a.events, &r.events), None);
    }
    assert_eq!(
        densities.into_iter().collect::<Vec<_>>(),
        DENSITIES.to_vec()
    );
    assert!(kinds_injected.len() >= 5, "{kinds_injected:?}");
    assert!(families_injected.len() >= 4, "{families_injected:?}");
    assert!(unplugged.0 > 50 && unplugged.1 > 50, "{unplugged:?}");
}

#[test]
fn a_primitive_a_swarm_turns_off_is_never_injected() {
    let mut off_somewhere = BTreeSet::new();
    for seed in 0..200 {
        let cfg = RunConfig {
            fault_set: FaultSet::Transport,
            ..seeded(seed)
        };
        let r = run(cfg, &busy);
        let swarm = r.swarm.unwrap();
        for k in FaultKind::ALL {
            if !swarm.faults.contains(&k) {
                off_somewhere.insert(k);
                assert!(
                    !r.events
                        .iter()
                        .any(|e| matches!(e, Event::Fault { fault, .. } if fault.kind() == k)),
                    "seed {seed}: {k} is off in {swarm}"
                );
            }
        }
        assert!(!swarm.sites.contains(&SiteFamily::Transition));
    }
    // Each of the six in `all` is off in some swarm (a primitive outside `all`, `garble`, is
    // in none: never injected either).
    assert_eq!(off_somewhere.iter().filter(|k| k.in_all()).count(), 6);
}

/// Three tasks taking turns: no device, no faults, no externals (a pure concurrency scenario).
fn turns(sim: &mut Sim) {
    for name in ["a", "b", "c"] {
        sim.spawn(name, async move {
            for _ in 0..3 {
                yield_now().await;
            }
        });
    }
}

/// The first line of a kept trace: a `config` record with these `data` fields.
fn config_line(data: &str) -> String {
    format!(
        "{{\"seq\":0,\"t_ns\":0,\"kind\":\"config\",\"actor\":\"swarm\",\"deterministic\":true,\"data\":{{{data}}}}}\n"
    )
}

#[test]
fn a_run_without_faults_records_its_strategy_alone_and_replays_it() {
    let mut forms = BTreeSet::new();
    let mut strategies = BTreeSet::new();
    for seed in 0..150 {
        let cfg = seeded(seed);
        let a = run(cfg.clone(), &turns);
        let swarm = a.swarm.clone().expect("a seeded run draws a swarm");
        assert_eq!(swarm, Swarm::draw(seed, &FaultSet::None, &[], 40));
        assert!(!swarm.has_faults_part());
        assert_eq!(
            a.lines[0],
            config_line(&format!(r#""schedule":"{}""#, swarm.schedule)),
            "seed {seed}"
        );
        strategies.insert(swarm.schedule.to_string());
        let r = run(replay_config(&cfg, &a.events), &turns);
        assert_eq!(
            (r.hash, r.swarm.as_ref()),
            (a.hash, Some(&swarm)),
            "seed {seed}"
        );
        // With an external declared, its draw comes from the `swarm` stream; the record is the
        // schedule alone only while no external is on.
        let d = run(cfg.clone(), &|sim| dice(sim, false, false));
        let ds = d.swarm.clone().expect("a seeded run draws a swarm");
        assert_eq!(ds, Swarm::draw(seed, &FaultSet::None, &["tick"], 40));
        let alone = !ds.allows_external("tick");
        let want = if alone {
            format!(r#""schedule":"{}""#, ds.schedule)
        } else {
            format!(
                r#""faults":[],"sites":[],"odds":0,"externals":["tick"],"schedule":"{}""#,
                ds.schedule
            )
        };
        assert_eq!(d.lines[0], config_line(&want), "seed {seed}");
        forms.insert(alone);
        let r = run(replay_config(&cfg, &d.events), &|sim| {
            dice(sim, false, false)
        });
        assert_eq!(r.hash, d.hash, "seed {seed}: replay");
    }
    assert_eq!(forms.len(), 2, "both record forms written");
    assert!(strategies.len() >= 8, "{strategies:?}");
}

#[test]
fn a_saved_swarm_with_a_faults_part_and_no_faults_replays_with_its_five_fields() {
    // A fault-free scenario's swarm as runs drew it before swarms without a faults part: its
    // case replays the record it was saved with, so its trace hash holds.
    let old = Swarm {
        odds: 64,
        ..Swarm::strategy_only("sticky(0.75)".parse().expect("a strategy"))
    };
    let events = vec![Event::Swarm {
        swarm: Box::new(old.clone()),
    }];
    let r = run(replay_config(&seeded(0), &events), &turns);
    assert_eq!(
        r.lines[0],
        config_line(r#""faults":[],"sites":[],"odds":64,"externals":[],"schedule":"sticky(0.75)""#)
    );
    assert_eq!(r.swarm, Some(old));
}

#[test]
fn the_baseline_draws_no_swarm_and_records_no_config() {
    let base = RunConfig {
        fault_set: FaultSet::All,
        keep_trace: true,
        ..RunConfig::default()
    };
    let r = run(Probe::Baseline.config(&base), &busy);
    assert!(r.swarm.is_none());
    assert!(r.events.iter().all(|e| !matches!(e, Event::Swarm { .. })));
    assert!(r.lines.iter().all(|l| !l.contains(r#""kind":"config""#)));
    // Its schedule is seed 0's uniform draws; a seed probe of seed 0 draws a swarm.
    let s = run(Probe::Seed(0).config(&base), &busy);
    assert!(s.swarm.is_some());
}

#[test]
fn old_data_events_without_a_stream_still_replay() {
    for seed in 0..50 {
        let r = run(seeded(seed), &|sim| dice(sim, false, false));
        // As a case saved before draws were per actor: the same draws, in global order, with
        // no stream names.
        let old: Vec<Event> = r
            .events
            .iter()
            .map(|e| match e {
                Event::Data { value, .. } => Event::Data {
                    value: *value,
                    stream: None,
                },
                other => other.clone(),
            })
            .collect();
        let json = serde_json::to_string(&old).unwrap();
        assert!(!json.contains("stream"), "{json}");
        let old: Vec<Event> = serde_json::from_str(&json).unwrap();
        let replay = run(replay_config(&seeded(seed), &old), &|sim| {
            dice(sim, false, false)
        });
        assert_eq!(replay.hash, r.hash, "seed {seed}");
        assert_eq!(first_unapplied(&old, &replay.events), None, "seed {seed}");
    }
}
