//! Properties users rely on, checked over many seeds: a seed names one run; minimization never
//! returns a run that does not fail with the original signature, and what it returns is
//! 1-minimal; a regression file written then read round-trips exactly.
//! (The soak at scale is `cargo run --release -p calametra-tests --bin soak -- 10000`.)

use calametra::choices::{Event, Source};
use calametra::explore::replay_config;
use calametra::fault::Fault;
use calametra::regress::{self, Regression};
use calametra::shrink::minimize;
use calametra::{run, RunConfig, Sim};
use calametra_tests::status_scenario;

fn planted(sim: &mut Sim) {
    status_scenario(sim, true, 48);
}

#[test]
fn a_seed_names_one_run() {
    for seed in 0..300 {
        let cfg = RunConfig {
            source: Source::Seeded(seed),
            fault_set: calametra::fault::FaultSet::Transport,
            ..RunConfig::default()
        };
        let a = run(cfg.clone(), &planted);
        let b = run(cfg, &planted);
        assert_eq!(a.hash, b.hash, "seed {seed}");
        assert_eq!(a.events, b.events, "seed {seed}");
        let r = run(replay_config(&RunConfig::default(), &a.events), &planted);
        assert_eq!(r.hash, a.hash, "seed {seed}: its events replay it");
    }
}

#[test]
fn minimization_keeps_the_signature_and_is_one_minimal() {
    let base = RunConfig::default();
    let mut checked = 0;
    for seed in 0..150 {
        let r = run(
            RunConfig {
                source: Source::Seeded(seed),
                ..RunConfig::default()
            },
            &planted,
        );
        let Some(f) = r.failure else { continue };
        let sig = f.signature();
        let fails = |cand: &[Event]| {
            let rr = run(replay_config(&base, cand), &planted);
            match rr.failure {
                Some(f) if f.signature() == sig => Some(rr.events),
                _ => None,
            }
        };
        let mut fails_mut = fails;
        let shrunk = minimize(r.events.clone(), &mut fails_mut);
        let again = run(replay_config(&base, &shrunk.events), &planted);
        assert_eq!(
            again.failure.map(|f| f.signature()),
            Some(sig.clone()),
            "seed {seed}: the minimal run fails the same way"
        );
        for i in 0..shrunk.events.len() {
            let mut c = shrunk.events.clone();
            c.remove(i);
            assert!(
                fails_mut(&c).is_none(),
                "seed {seed}: removing event {i} still fails, not 1-minimal"
            );
        }
        assert_eq!(
            shrunk.events.len(),
            3,
            "seed {seed}: {}",
            calametra::choices::story(&shrunk.events)
        );
        checked += 1;
    }
    assert!(checked >= 50, "only {checked} failing seeds");
}

#[test]
fn regression_files_round_trip_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let mut rng = calametra::choices::stream(9, calametra::choices::StreamName::Data);
    for i in 0..200u64 {
        let n = calametra::choices::below(&mut rng, 20);
        let events: Vec<Event> = (0..n)
            .map(|_| match calametra::choices::below(&mut rng, 5) {
                0 => Event::Schedule {
                    point: calametra::choices::below(&mut rng, 1000),
                    pick: 1 + calametra::choices::below(&mut rng, 3) as u32,
                    what: Some("t\"x\n".into()),
                },
                1 => Event::External {
                    name: "unplug".into(),
                    point: calametra::choices::below(&mut rng, 99),
                },
                2 => Event::Fault {
                    site: format!(
                        "ctrl.get_status#{}",
                        1 + calametra::choices::below(&mut rng, 9)
                    ),
                    fault: [
                        Fault::Stall,
                        Fault::Short(3),
                        Fault::Delay(5),
                        Fault::Corrupt {
                            offset: 1,
                            xor: 0x80,
                        },
                    ][calametra::choices::below(&mut rng, 4) as usize]
                        .clone(),
                },
                3 => Event::Client {
                    value: calametra::choices::below(&mut rng, 6),
                    label: Some("get_status".into()),
                },
                _ => Event::Data {
                    value: calametra::choices::below(&mut rng, u64::MAX),
                    stream: [None, Some("data/driver".into())]
                        [calametra::choices::below(&mut rng, 2) as usize]
                        .clone(),
                },
            })
            .collect();
        let reg = Regression {
            format: regress::FORMAT.into(),
            version: regress::VERSION,
            scenario: format!("a::b{i}"),
            id: regress::id_for("a::b", &format!("sig {i}")),
            signature: format!("sig {i} \u{1f600}"),
            failure: "x".into(),
            found_by: "seed::0x1".into(),
            base_seed: "0x0".into(),
            spec_sha256: (i % 2 == 0).then(|| "ab".repeat(32)),
            story: calametra::choices::story(&events),
            run_aloud: "a . b".into(),
            swarm: None,
            guest_build: (i % 3 == 0).then(|| format!("sha256:{}", "c3".repeat(32))),
            events,
            trace_hash: "sha256:00".into(),
            hash_version: calametra::trace::HASH_VERSION,
            package: "p".into(),
            target: "t".into(),
        };
        let p = reg.save(dir.path()).unwrap();
        assert_eq!(Regression::load(&p).unwrap(), reg);
    }
}
