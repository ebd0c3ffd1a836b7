//! The DFU loop closed: the updater's baseline run against the hand-written DFU model is
//! recorded at the device as a pcap (usbmon link type 220), a model is learned from it
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

use calametra_capture::learn::{learn, Input, Selection};
use calametra_capture::{pcap, usbmon_bin, Event, EventKind, Order, XferType};
use calametra_core::explore::{discover, site_probes, Probe};
use calametra_core::fault::{Fault, FaultSet};
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use calametra_core::world::Timing;
use calametra_core::{run, Failure, RunConfig, Sim};
use calametra_example_dfu_updater::{new_image, scenario, update, Options, UpdateError};
use calametra_models::dfu::{Dfu, Request};
use calametra_models::learned::Learned;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;

/// The DFU model, with every control transfer it answers written down as usbmon events: a
/// submission the bus's cost before the device saw it, a completion when it answered.
struct Recorder {
    inner: Dfu,
    events: Rc<RefCell<Vec<Event>>>,
}

impl Device for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        let reply = self.inner.control(cx, setup, data);
        let t = Timing::default();
        let out = if setup.is_in() { 0 } else { data.len() as u64 };
        let cost_us = (t.control_ns + t.per_byte_ns * out) / 1000;
        let done_us = (cx.now() / 1000) as i64;
        let mut ev = self.events.borrow_mut();
        let id = 0x1000 + ev.len() as u64;
        let (status, got) = match &reply {
            Reply::Data(d) if setup.is_in() => {
                (0, d[..d.len().min(setup.length as usize)].to_vec())
            }
            Reply::Ack | Reply::Data(_) => (0, Vec::new()),
            _ => (-32, Vec::new()),
        };
        let endpoint = if setup.is_in() { 0x80 } else { 0 };
        let base = Event {
            record: 0,
            id,
            kind: EventKind::Submit,
            xfer: XferType::Control,
            endpoint,
            device: 2,
            bus: 1,
            t_us: done_us - cost_us as i64,
            status: -115,
            length: if setup.is_in() {
                setup.length as u32
            } else {
                data.len() as u32
            },
            setup: Some(*setup),
            data: if setup.is_in() {
                Vec::new()
            } else {
                data.to_vec()
            },
        };
        ev.push(base.clone());
        ev.push(Event {
            kind: EventKind::Complete,
            t_us: done_us,
            status,
            length: if setup.is_in() {
                got.len() as u32
            } else if status == 0 {
                data.len() as u32
            } else {
                0
            },
            setup: None,
            data: got,
            ..base
        });
        reply
    }

    fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
        self.inner.on_timer(cx, token)
    }

    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        self.inner.on_reset(cx)
    }

    fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
        self.inner.on_disconnect(cx)
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        self.inner.request_name(setup)
    }
}

/// The hand model's baseline, recorded as a pcap.
fn record_baseline() -> Vec<u8> {
    let events: Rc<RefCell<Vec<Event>>> = Rc::default();
    let spec = Spec::parse(
        "specs/dfu11-tolerant.json",
        calametra_example_dfu_updater::scenario::TOLERANT_SPEC,
    )
    .unwrap();
    let sink = events.clone();
    let r = run(
        Probe::Baseline.config(&RunConfig::default()),
        &move |sim: &mut Sim| {
            let dev = sim.attach(Recorder {
                inner: Dfu::from_spec(&spec),
                events: sink.clone(),
            });
            updater(sim, dev.interface());
        },
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let packets: Vec<Vec<u8>> = events
        .borrow()
        .iter()
        .map(|e| usbmon_bin::build_packet(e, 220, Order::Little))
        .collect();
    pcap::build(220, Order::Little, &packets)
}

/// The updater's task, judged as the hand scenario judges it (the DFU invariants need the DFU
/// model's ground truth, which a learned model does not have).
fn updater(sim: &mut Sim, iface: calametra_core::interface::Interface) {
    sim.spawn("updater", async move {
        match update(&iface, &new_image(), &Options::default()).await {
            Ok(_) | Err(UpdateError::Disconnected | UpdateError::Reattached { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    });
}

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
    let pcap = record_baseline();
    let input = Input::parse("dfu-updater-baseline.pcap", &pcap).unwrap();
    let (learned, report) = learn(&[input], &Selection::Only).unwrap();
    print!("{report}");
    let bytes = learned.to_json();
    let spec = Spec::parse("specs/dfu-learned.json", &bytes).unwrap();
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
