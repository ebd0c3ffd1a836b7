//! The DFU loop closed: the updater's baseline run against the hand-written DFU model is
//! recorded through `calametra-usb`'s recorder as a usbmon pcapng (link type 220), as a user
//! records a run on hardware; a model is learned from it
//! (`calametra_capture::learn`), and the updater's scenario runs on the learned model: its
//! baseline passes, and every `site::` trial either gives the hand-written model's verdict for
//! the same fault at the same transfer, or fails as a model gap naming the unseen request
//! (never a pass where the hand model fails); the share of equal verdicts is printed and must
//! be at least 80%.
//!
//! A learned transfer site (`ctrl.a1_03#5`) is the hand model's site of the same request and
//! occurrence (`ctrl.getstatus#5`); a learned step's transition site (`a103.0000.0000.0006.4->5`)
//! stands for the transfer that made the step, so its fault is compared with the same primitive
//! at that transfer's site on the hand model. `LIST_GAPS=1` lists each trial that ends in a
//! model gap, with the gap.

use calametra_core::explore::{discover, site_probes, Probe};
use calametra_core::fault::{Fault, FaultSet};
use calametra_core::{run, Failure, RunConfig, Sim};
use calametra_example_dfu_updater::scenario;
use calametra_models::dfu::Request;
use calametra_models::learned::Learned;
use recorded::{learned_spec, updater};
use std::collections::BTreeMap;

mod recorded;

#[derive(Clone, Debug, PartialEq, Eq)]
enum Verdict {
    Pass,
    Fail(String),
    Gap(String),
}

impl Verdict {
    fn of(f: &Option<Failure>) -> Verdict {
        match f {
            None => Verdict::Pass,
            Some(Failure::ModelGap(g)) => Verdict::Gap(format!("{} in {}", g.request, g.state)),
            Some(f) => Verdict::Fail(f.text()),
        }
    }

    fn same_as(&self, other: &Verdict) -> bool {
        matches!(
            (self, other),
            (Verdict::Pass, Verdict::Pass) | (Verdict::Fail(_), Verdict::Fail(_))
        )
    }
}

/// The hand model's name for a learned transfer site base (`ctrl.a1_03` is `ctrl.getstatus`).
fn hand_base(base: &str) -> String {
    let Some(hex) = base.strip_prefix("ctrl.") else {
        return base.to_string();
    };
    let Some((rt, req)) = hex.split_once('_') else {
        return base.to_string();
    };
    match (u8::from_str_radix(rt, 16), u8::from_str_radix(req, 16)) {
        (Ok(rt), Ok(req)) if rt & 0x7f == 0x21 => Request::decode(req, rt & 0x80 != 0)
            .site_name()
            .map_or(base.to_string(), |n| format!("ctrl.{n}")),
        _ => base.to_string(),
    }
}

fn hand_site(site: &str) -> String {
    match site.rsplit_once('#') {
        Some((base, n)) => format!("{}#{n}", hand_base(base)),
        None => site.to_string(),
    }
}

#[test]
fn the_dfu_updater_scenarios_run_on_a_model_learned_from_their_own_run() {
    let (spec, report) = learned_spec();
    print!("{report}");
    Learned::try_from_spec(&spec).unwrap();
    let learned_scenario = move |sim: &mut Sim| {
        let dev = sim.attach(Learned::from_spec(&spec));
        updater(sim, dev.interface());
    };

    // The baseline passes, twice the same.
    let base = RunConfig::default();
    let found = discover(
        &RunConfig {
            keep_trace: true,
            ..base.clone()
        },
        &learned_scenario,
    );
    assert!(found.failure.is_none(), "{:?}", found.failure);
    let again = run(Probe::Baseline.config(&base), &learned_scenario);
    assert_eq!(again.hash, found.hash);

    // A learned step's transition stands for the transfer it answered: the next transfer record.
    let mut step_transfer: BTreeMap<String, String> = BTreeMap::new();
    let mut pending: Vec<String> = Vec::new();
    for l in &found.lines {
        let r = calametra_core::trace::parse_record(l, 0).unwrap();
        let site = r.data.get("site").and_then(|v| v.as_str()).unwrap_or("");
        match r.kind.as_str() {
            "transition" => pending.push(site.to_string()),
            "transfer" => {
                for t in pending.drain(..) {
                    step_transfer.insert(t, site.to_string());
                }
            }
            _ => {}
        }
    }

    let mut hand_cache: BTreeMap<(String, Fault), Verdict> = BTreeMap::new();
    let mut hand = |site: &str, fault: &Fault| -> Verdict {
        hand_cache
            .entry((site.to_string(), fault.clone()))
            .or_insert_with(|| {
                let p = Probe::Site {
                    site: site.to_string(),
                    fault: fault.clone(),
                };
                Verdict::of(&run(p.config(&base), &scenario).failure)
            })
            .clone()
    };
    let probes = site_probes(&found.sites, &FaultSet::All);
    let (mut same, mut gaps, mut wrong) = (0usize, 0usize, Vec::new());
    for p in &probes {
        let Probe::Site { site, fault } = p else {
            continue;
        };
        let mine = Verdict::of(&run(p.config(&base), &learned_scenario).failure);
        let theirs = match step_transfer.get(site) {
            Some(transfer) => hand(&hand_site(transfer), fault),
            None => hand(&hand_site(site), fault),
        };
        if mine.same_as(&theirs) {
            same += 1;
        } else if let Verdict::Gap(g) = &mine {
            assert!(
                g.contains("control") || g.contains("OUT") || g.contains("IN"),
                "{g}"
            );
            gaps += 1;
            if std::env::var_os("LIST_GAPS").is_some() {
                println!("GAP {} :: {g}", p.trial_suffix());
            }
        } else {
            wrong.push(format!(
                "{}: learned {mine:?}, hand {theirs:?}",
                p.trial_suffix()
            ));
        }
    }
    let share = same as f64 / probes.len() as f64;
    println!(
        "learned DFU model: {} site trials: {same} give the hand model's verdict ({:.1}%), {gaps} \
         model gaps, {} otherwise",
        probes.len(),
        share * 100.0,
        wrong.len()
    );
    assert!(
        wrong.is_empty(),
        "{} trials:\n{}",
        wrong.len(),
        wrong.join("\n")
    );
    assert!(
        share >= 0.8,
        "only {:.1}% give the hand model's verdict",
        share * 100.0
    );
}
