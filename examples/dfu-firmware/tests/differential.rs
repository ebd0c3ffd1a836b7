//! Differential test: the same host campaigns against the usbd-dfu firmware and against the
//! DFU 1.1 model (`calametra_models::dfu` with `specs/dfu11-usbd-dfu.json`, the firmware's
//! attributes), and every difference in DFU states, status codes, stalls or outcome reported
//! with both traces.
//!
//! The campaigns: the example updater (through the DfuSe wrapper, which is invisible to the
//! DFU 1.1 model) on a 2 KiB image (16 blocks: a first, middle and last block, manifestation,
//! a whole upload and its short frame, like the 64 KiB image in a sixteenth of the runs); then
//! every fault site of the two baselines with every meaningful primitive; and the updater
//! without the wrapper (plain DFU 1.1 block numbers).
//!
//! Where they differ, `refdata/dfu11.md` (the spec) decides. A firmware deviation from the spec
//! is listed in [`DEVIATIONS`] with its clause; a difference the spec does not decide (a
//! transport fault outside it, a limit of observing firmware) is listed in [`EXPLAINED`] with
//! why. The test asserts there is no other difference, and that every listed deviation is
//! actually observed.

use calametra_core::fault::{FaultPlan, FaultSet, Site};
use calametra_core::spec::Spec;
use calametra_core::{run, RunConfig, RunResult, Sim};
use calametra_example_dfu_firmware::dfuse::DfuSe;
use calametra_example_dfu_firmware::firmware_device;
use calametra_example_dfu_firmware::scenario::host_campaign_with;
use calametra_example_dfu_updater::protocol::Client;
use calametra_models::dfu::{seal_image, Dfu};
use serde_json::Value;
use std::collections::BTreeMap;
use std::time::Duration;
use std::time::Instant;

const SPEC: &[u8] = include_bytes!("../../../specs/dfu11-usbd-dfu.json");

/// 2 KiB: 16 blocks of wTransferSize 128, sealed with a CRC-32 trailer.
fn small_image() -> Vec<u8> {
    let mut x = 0x2545_f491u32;
    let body: Vec<u8> = (0..2048 - 4)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            (x >> 24) as u8
        })
        .collect();
    seal_image(&body)
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Target {
    Firmware,
    Model,
}

fn campaign(target: Target, dfuse: bool) -> impl Fn(&mut Sim) {
    move |sim: &mut Sim| {
        let img = small_image();
        match target {
            Target::Firmware => {
                let dev = sim.attach(firmware_device());
                host_campaign_with(sim, dev.interface(), img, dfuse)
            }
            Target::Model => {
                let spec = Spec::parse("specs/dfu11-usbd-dfu.json", SPEC).expect("the spec parses");
                let dev = sim.attach(Dfu::from_spec(&spec));
                host_campaign_with(sim, dev.interface(), img, dfuse)
            }
        };
    }
}

/// A short request sequence straight at a DFU-mode device (through [`DfuSe`], after reading the
/// configuration so it knows the device): the spec clauses the updater never exercises.
#[derive(Clone, Copy, Debug)]
enum Probe {
    /// DNLOAD one block, DFU_GETSTATUS (dfuDNBUSY, 4 ms), and DFU_GETSTATUS again at once.
    EarlyGetstatus,
    /// A zero-length DFU_DNLOAD in dfuIDLE, then DFU_GETSTATUS.
    ZeroLengthDnloadInIdle,
    /// DFU_DETACH in dfuIDLE, then DFU_GETSTATUS.
    DetachInIdle,
}

fn probe_campaign(target: Target, probe: Probe) -> impl Fn(&mut Sim) {
    move |sim: &mut Sim| {
        let iface = match target {
            Target::Firmware => sim.attach(firmware_device()).interface(),
            Target::Model => {
                let spec = Spec::parse("specs/dfu11-usbd-dfu.json", SPEC).expect("the spec parses");
                sim.attach(Dfu::from_spec(&spec)).interface()
            }
        };
        sim.spawn("host", async move {
            let host = DfuSe::new(iface);
            let c = Client::new(&host, 0, Duration::from_millis(500));
            let _ = c.get_descriptor(2, 0, 27).await;
            let _ = c.get_status().await;
            match probe {
                Probe::EarlyGetstatus => {
                    let _ = c.dnload(0, &small_image()[..128]).await;
                    let _ = c.get_status().await;
                    let _ = c.get_status().await;
                }
                Probe::ZeroLengthDnloadInIdle => {
                    let _ = c.dnload(0, &[]).await;
                    let _ = c.get_status().await;
                }
                Probe::DetachInIdle => {
                    let _ = c.detach(250).await;
                    let _ = c.get_status().await;
                }
            }
        });
    }
}

fn run_one(target: Target, dfuse: bool, plan: &FaultPlan, sites: bool) -> RunResult {
    run(
        RunConfig {
            faults: plan.clone(),
            keep_trace: true,
            record_sites: sites,
            ..RunConfig::default()
        },
        &campaign(target, dfuse),
    )
}

/// One thing a run showed the host or did to the DFU state machine.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Step {
    what: String,
    /// Index of its record in the trace.
    line: usize,
}

/// What is compared: the DFU-level host-visible results in order, the DFU state changes in
/// order, and how the run ended.
struct Obs {
    steps: Vec<Step>,
    states: Vec<Step>,
    end: String,
    lines: Vec<String>,
}

fn base(site: &str) -> &str {
    site.split('#').next().unwrap_or(site)
}

fn observe(r: &RunResult) -> Obs {
    let mut steps = Vec::new();
    let mut states = Vec::new();
    let mut end = String::new();
    for (i, l) in r.lines.iter().enumerate() {
        let Ok(v) = serde_json::from_str::<Value>(l) else {
            continue;
        };
        let d = &v["data"];
        match v["kind"].as_str() {
            Some("transfer") => {
                let site = d["site"].as_str().unwrap_or("");
                let status = d["status"].as_str().unwrap_or("");
                let name = base(site).trim_start_matches("ctrl.");
                let input = d["in"].as_str().unwrap_or("");
                let detail = match (name, status) {
                    ("getstatus", "ok") if input.len() == 12 => {
                        format!("bStatus {} bState {}", &input[0..2], &input[8..10])
                    }
                    ("getstate", "ok") => format!("bState {input}"),
                    ("upload", "ok") => format!("{} bytes", input.len() / 2),
                    _ => String::new(),
                };
                steps.push(Step {
                    what: format!("{name} {status} {detail}").trim_end().to_string(),
                    line: i,
                });
            }
            Some("transition") if d["machine"].as_str() == Some("dfu") => states.push(Step {
                what: format!(
                    "{}->{}",
                    d["from"].as_str().unwrap_or(""),
                    d["to"].as_str().unwrap_or("")
                ),
                line: i,
            }),
            Some("end") => {
                end = format!(
                    "{} {}",
                    d["outcome"].as_str().unwrap_or(""),
                    d["failure"].as_str().unwrap_or("")
                )
                .trim_end()
                .to_string()
            }
            _ => {}
        }
    }
    Obs {
        steps,
        states,
        end,
        lines: r.lines.clone(),
    }
}

/// The first place two runs differ.
#[derive(Clone, Debug)]
struct Difference {
    trial: String,
    /// `host` (what the host saw), `state` (DFU state changes) or `end`.
    aspect: &'static str,
    index: usize,
    firmware: String,
    model: String,
    /// The steps before it (the same in both).
    before: Vec<String>,
    firmware_trace: String,
    model_trace: String,
}

fn context(o: &Obs, line: Option<usize>) -> String {
    let at = line.unwrap_or(o.lines.len());
    let from = at.saturating_sub(8);
    o.lines[from..(at + 3).min(o.lines.len())].join("\n")
}

fn first_difference(trial: &str, fw: &Obs, md: &Obs) -> Option<Difference> {
    for (aspect, a, b) in [
        ("host", &fw.steps, &md.steps),
        ("state", &fw.states, &md.states),
    ] {
        let n = a.len().max(b.len());
        for i in 0..n {
            let (x, y) = (a.get(i), b.get(i));
            if x.map(|s| &s.what) != y.map(|s| &s.what) {
                return Some(Difference {
                    trial: trial.to_string(),
                    aspect,
                    index: i,
                    firmware: x.map_or("(nothing)".into(), |s| s.what.clone()),
                    model: y.map_or("(nothing)".into(), |s| s.what.clone()),
                    before: a[i.saturating_sub(3)..i]
                        .iter()
                        .map(|s| s.what.clone())
                        .collect(),
                    firmware_trace: context(fw, x.map(|s| s.line)),
                    model_trace: context(md, y.map(|s| s.line)),
                });
            }
        }
    }
    (fw.end != md.end).then(|| Difference {
        trial: trial.to_string(),
        aspect: "end",
        index: 0,
        firmware: fw.end.clone(),
        model: md.end.clone(),
        before: Vec::new(),
        firmware_trace: context(fw, None),
        model_trace: context(md, None),
    })
}

/// A firmware deviation from DFU 1.1: the clause, what the spec says, what usbd-dfu does, and
/// how to recognise the first difference it causes.
struct Deviation {
    id: &'static str,
    clause: &'static str,
    spec: &'static str,
    firmware: &'static str,
    matches: fn(&Difference) -> bool,
}

/// A difference the spec does not decide, and why.
struct Explained {
    id: &'static str,
    why: &'static str,
    matches: fn(&Difference) -> bool,
}

const DEVIATIONS: &[Deviation] = &[
    Deviation {
        id: "bcd-dfu-version",
        clause: "DFU 1.1 section 4.1.3, functional descriptor bcdDFUVersion (dfu11.md: 0x0110 for DFU 1.1; ST DfuSe devices report 0x011A)",
        spec: "bcdDFUVersion = 0x0110",
        firmware: "usbd-dfu writes 0x011A (DfuSe 1.1a) into every functional descriptor",
        matches: |_| false, // checked on the descriptor itself, below
    },
    Deviation {
        id: "wblocknum-is-a-command",
        clause: "DFU 1.1 section 6.1.1 and dfu11.md Requests: DFU_DNLOAD wValue = wBlockNum, a block counter (dfu-util sends transaction++ from 0); dfuIDLE: DNLOAD with wLength > 0 and bitCanDnload = 1 -> dfuDNLOAD-SYNC",
        spec: "the first block (wBlockNum 0) is accepted as data: dfuIDLE -> dfuDNLOAD-SYNC",
        firmware: "usbd-dfu implements DfuSe: wBlockNum 0 is a command byte (0x21 set address, 0x41 erase), 1 is reserved, data starts at 2; an image block at wBlockNum 0 is stalled and the device enters dfuERROR (errSTALLEDPKT)",
        matches: |d| {
            d.trial.starts_with("raw")
                && ((d.aspect == "host"
                    && d.firmware.starts_with("dnload stall")
                    && d.model.starts_with("dnload ok"))
                    || (d.aspect == "state"
                        && d.firmware == "idle->error"
                        && d.model == "idle->dnload_sync"))
        },
    },
    Deviation {
        id: "dnbusy-ends-at-once",
        clause: "dfu11.md dfuDNBUSY (4): bwPollTimeout expires -> dfuDNLOAD-SYNC; any request during the timeout -> stall, dfuERROR",
        spec: "the device stays in dfuDNBUSY for the bwPollTimeout it reported (4 ms) and leaves it when that expires",
        firmware: "usbd-dfu programs the block inside the poll that answers the DFU_GETSTATUS reporting dfuDNBUSY and is back in dfuDNLOAD-SYNC before the host has the answer: the dfuDNBUSY->dfuDNLOAD-SYNC change rides on that request (a fault refusing it refuses the request; a disconnect during it comes after it), and a request sent before bwPollTimeout is served instead of stalled",
        matches: |d| {
            (d.trial.starts_with("dfu.dnload_sync->dnbusy#")
                && d.trial.ends_with("::disconnect")
                && d.aspect == "state"
                && d.firmware == "dnbusy->dnload_sync"
                && d.model == "(nothing)")
                || (d.trial.starts_with("dfu.dnbusy->dnload_sync#")
                    && d.trial.ends_with("::stall")
                    && d.aspect == "host"
                    && d.firmware == "getstatus stall"
                    && d.model == "getstatus ok bStatus 00 bState 04")
                || (d.trial.starts_with("early getstatus")
                    && d.aspect == "host"
                    && d.firmware == "getstatus ok bStatus 00 bState 05"
                    && d.model == "getstatus stall")
        },
    },
    Deviation {
        id: "zero-length-dnload-in-idle",
        clause: "dfu11.md dfuIDLE (2): DNLOAD with wLength=0 ... -> stall, dfuERROR",
        spec: "a zero-length DFU_DNLOAD in dfuIDLE (nothing downloaded) is stalled and the device enters dfuERROR",
        firmware: "usbd-dfu accepts it as the end of an image (DfuSe 'leave'): dfuIDLE -> dfuMANIFEST-SYNC, and the next DFU_GETSTATUS manifests whatever the flash holds",
        matches: |d| {
            d.trial.starts_with("zero-length dnload")
                && d.aspect == "host"
                && d.firmware == "dnload ok"
                && d.model == "dnload stall"
        },
    },
    Deviation {
        id: "stall-without-dfuerror",
        clause: "dfu11.md State transitions: \"A stall in a DFU-mode state moves the device to dfuERROR\"; dfuIDLE: any other request (DETACH, CLRSTATUS) -> stall, dfuERROR",
        spec: "DFU_DETACH in dfuIDLE is stalled and the device enters dfuERROR (errSTALLEDPKT)",
        firmware: "usbd-dfu stalls requests it does not implement (DFU_DETACH, unknown class requests) but stays in its state with bStatus OK",
        matches: |d| {
            d.trial.starts_with("detach in dfuIDLE")
                && d.aspect == "host"
                && d.firmware == "getstatus ok bStatus 00 bState 02"
                && d.model == "getstatus ok bStatus 0f bState 0a"
        },
    },
];

const EXPLAINED: &[Explained] = &[
    Explained {
        id: "manifestation-takes-no-time",
        why: "dfu11.md dfuMANIFEST (7): the device manifests and, \"when it finishes\", goes to dfuMANIFEST-SYNC; how long that takes is the device's. The model takes the bwPollTimeout it reports (a timer); usbd-dfu manifests inside the poll that answers the DFU_GETSTATUS reporting dfuMANIFEST, so the change rides on that request: a fault refusing it refuses the request, a disconnect during it comes after it",
        matches: |d| {
            (d.trial.starts_with("dfu.manifest_sync->manifest#")
                && d.trial.ends_with("::disconnect")
                && d.aspect == "state"
                && d.firmware == "manifest->manifest_sync"
                && d.model == "(nothing)")
                || (d.trial.starts_with("dfu.manifest->manifest_sync#")
                    && d.trial.ends_with("::stall")
                    && d.aspect == "host"
                    && d.firmware == "getstatus stall"
                    && d.model == "getstatus ok bStatus 00 bState 07")
        },
    },
    Explained {
        id: "short-data-stage",
        why: "a short(n) fault cuts a control OUT data stage below wLength, which USB 2.0 section 9.3.5 rules out (\"on an output request, wLength will always indicate the exact amount of data to be sent by the host\"; device behaviour is then undefined) and DFU 1.1 does not address. The model stalls the block (and enters dfuERROR); usb-device keeps waiting for the rest of the data stage and NAKs the status stage, so the host's transfer times out and the DFU state is untouched",
        matches: |d| {
            d.trial.starts_with("ctrl.dnload#")
                && d.trial.contains("::short(")
                && d.aspect == "host"
                && d.firmware == "dnload timeout"
                && d.model == "dnload stall"
        },
    },
    Explained {
        id: "firmware-only-site",
        why: "the site is usb-device's own chapter 9 state machine (usb.default->addressed, usb.addressed->configured), which the firmware reports and the DFU model does not model as transitions: a fault there acts on the firmware alone",
        matches: |d| d.trial.starts_with("usb."),
    },
];

fn explain(d: &Difference) -> Option<&'static str> {
    DEVIATIONS
        .iter()
        .find(|k| (k.matches)(d))
        .map(|k| k.id)
        .or_else(|| EXPLAINED.iter().find(|k| (k.matches)(d)).map(|k| k.id))
}

fn report(d: &Difference) -> String {
    format!(
        "{} [{} #{}]: firmware `{}`, model `{}` (after: {:?})\n--- firmware trace ---\n{}\n--- model trace ---\n{}\n",
        d.trial, d.aspect, d.index, d.firmware, d.model, d.before, d.firmware_trace, d.model_trace
    )
}

fn compare(trial: &str, dfuse: bool, plan: &FaultPlan) -> Option<Difference> {
    let fw = observe(&run_one(Target::Firmware, dfuse, plan, false));
    let md = observe(&run_one(Target::Model, dfuse, plan, false));
    first_difference(trial, &fw, &md)
}

/// Every site of both baselines, in first-seen order, each once.
fn sites() -> Vec<Site> {
    let mut seen: BTreeMap<String, ()> = BTreeMap::new();
    let mut all = Vec::new();
    for t in [Target::Firmware, Target::Model] {
        let r = run_one(t, true, &FaultPlan::default(), true);
        assert!(r.failure.is_none(), "{t:?} baseline: {:?}", r.failure);
        for s in r.sites {
            if seen.insert(s.name.clone(), ()).is_none() {
                all.push(s);
            }
        }
    }
    all
}

#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "wall-clock timing and worker threads for the test itself; each simulated run stays on one thread"
)]
fn firmware_and_model_agree_except_for_known_deviations() {
    let t = Instant::now();
    let mut diffs: Vec<Difference> = Vec::new();
    // The baseline, with the DfuSe wrapper: no difference at all.
    if let Some(d) = compare("baseline", true, &FaultPlan::default()) {
        diffs.push(d);
    }
    // Without it.
    if let Some(d) = compare(
        "raw (plain DFU 1.1 block numbers)",
        false,
        &FaultPlan::default(),
    ) {
        diffs.push(d);
    }
    // The spec clauses the updater never reaches, asked directly.
    for (name, p) in [
        (
            "early getstatus (during bwPollTimeout)",
            Probe::EarlyGetstatus,
        ),
        (
            "zero-length dnload in dfuIDLE",
            Probe::ZeroLengthDnloadInIdle,
        ),
        ("detach in dfuIDLE", Probe::DetachInIdle),
    ] {
        let cfg = RunConfig {
            keep_trace: true,
            ..RunConfig::default()
        };
        let fw = observe(&run(cfg.clone(), &probe_campaign(Target::Firmware, p)));
        let md = observe(&run(cfg, &probe_campaign(Target::Model, p)));
        if let Some(d) = first_difference(name, &fw, &md) {
            diffs.push(d);
        }
    }
    // Every fault at every site.
    let sites = sites();
    let trials: Vec<(String, calametra_core::fault::Fault)> = sites
        .iter()
        .flat_map(|s| {
            FaultSet::All
                .candidates(&s.kind)
                .into_iter()
                .map(|f| (s.name.clone(), f))
        })
        .collect();
    let threads = std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .clamp(1, 4);
    let found: Vec<Difference> = std::thread::scope(|scope| {
        let handles: Vec<_> = (0..threads)
            .map(|k| {
                let trials = &trials;
                scope.spawn(move || {
                    trials
                        .iter()
                        .skip(k)
                        .step_by(threads)
                        .filter_map(|(site, fault)| {
                            compare(
                                &format!("{site}::{fault}"),
                                true,
                                &FaultPlan::single(site, fault.clone()),
                            )
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().expect("a comparison thread panicked"))
            .collect()
    });
    diffs.extend(found);

    // The descriptor deviation, read from the firmware's own configuration descriptor.
    let fw = run_one(Target::Firmware, true, &FaultPlan::default(), false);
    let cfg = fw
        .lines
        .iter()
        .find(|l| l.contains("\"setup\":\"8006000200001b00\""))
        .expect("the configuration was read");
    assert!(
        cfg.contains("09210ffa0080001a01"),
        "bcdDFUVersion 0x011A in the functional descriptor: {cfg}"
    );
    let mut observed: BTreeMap<&str, usize> = BTreeMap::new();
    observed.insert("bcd-dfu-version", 1);

    let mut unexplained = Vec::new();
    for d in &diffs {
        match explain(d) {
            Some(id) => *observed.entry(id).or_insert(0) += 1,
            None => {
                eprintln!(
                    "UNEXPLAINED {} [{} #{}]: firmware `{}`, model `{}` after {:?}",
                    d.trial, d.aspect, d.index, d.firmware, d.model, d.before
                );
                unexplained.push(report(d))
            }
        }
    }
    eprintln!(
        "differential: {} sites, {} fault trials (x2 devices) in {:.1?}; {} differences: {:?}",
        sites.len(),
        trials.len(),
        t.elapsed(),
        diffs.len(),
        observed
    );
    for k in DEVIATIONS {
        eprintln!(
            "known deviation {} ({} differences): {}\n  spec ({}): {}",
            k.id,
            observed.get(k.id).copied().unwrap_or(0),
            k.firmware,
            k.clause,
            k.spec
        );
    }
    for k in EXPLAINED {
        eprintln!(
            "explained {} ({} differences): {}",
            k.id,
            observed.get(k.id).copied().unwrap_or(0),
            k.why
        );
    }
    assert!(
        unexplained.is_empty(),
        "{} unexplained differences; the first 5:\n{}",
        unexplained.len(),
        unexplained
            .iter()
            .take(5)
            .cloned()
            .collect::<Vec<_>>()
            .join("\n")
    );
    for k in DEVIATIONS {
        assert!(
            observed.contains_key(k.id),
            "known deviation `{}` was not observed: the list is stale",
            k.id
        );
    }
}
