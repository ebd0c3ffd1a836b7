//! The Trigger 6 driver against the model: the baseline (twice, same hash), the colour bars
//! decoded from VRAM and as a picture (pinned pixels, a PNG), the second monitor hot-plugged
//! into output 1 and the bars shown there, the fixed driver over 200 seeds and every single
//! transport fault of its baseline, and (feature `planted-race`) the race found by some seed.
//!
//! What counts as passing a fault trial: no invariant breaks, nothing panics, no model gap, no
//! deadlock or timeout. The driver may return an error (`TaskError`): after a fault it may give
//! up, but it must never believe something the dock contradicts.

use calametra_core::choices::{story, Source};
#[cfg(not(feature = "planted-race"))]
use calametra_core::fault::{FaultPlan, FaultSet};
use calametra_core::{run, RunConfig};
#[cfg(not(feature = "planted-race"))]
use calametra_core::{Failure, RunResult};
use calametra_example_trigger6::driver::{
    frame_len, Phase, FB_ADDR, FB_ADDR_1, HEIGHT, WATCH_FRAMES, WIDTH,
};
use calametra_example_trigger6::frame::{colour_bars_nv12, fnv1a64, BARS};
use calametra_example_trigger6::scenario::SECOND_MONITOR_AT;
use calametra_example_trigger6::{build, build_second_output, scenario};
#[cfg(not(feature = "planted-race"))]
use calametra_models::trigger6::marks;
#[cfg(feature = "planted-race")]
use calametra_models::trigger6::names;
use calametra_models::trigger6::scanout::decode_png;
use calametra_models::trigger6::{PixelFormat, Scanout};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Instant;

/// FNV-1a 64 of the 1920x1080 NV12 colour bars (Y plane then UV plane).
const BARS_CHECKSUM: u64 = 0x03a9_ad85_37ec_0a25;

fn seeded(seed: u64) -> RunConfig {
    RunConfig {
        source: Source::Seeded(seed),
        ..RunConfig::default()
    }
}

#[cfg(not(feature = "planted-race"))]
/// A fault trial passes unless an invariant broke or the run failed in a way a driver error
/// does not explain (panic, model gap, deadlock, timeout, step limit).
fn acceptable(r: &RunResult) -> Result<(), String> {
    match &r.failure {
        None | Some(Failure::TaskError { .. }) => Ok(()),
        Some(f) => Err(format!("{f} | events: {}", story(&r.events))),
    }
}

#[test]
#[allow(
    clippy::disallowed_methods,
    reason = "times the test itself on the wall clock, outside any simulated run"
)]
fn baseline_passes_and_replays_to_the_same_hash() {
    let t = Instant::now();
    let a = run(RunConfig::default(), &scenario);
    let took = t.elapsed();
    let b = run(RunConfig::default(), &scenario);
    assert!(a.failure.is_none(), "{:?}", a.failure);
    assert_eq!(a.hash, b.hash, "the baseline is deterministic");
    assert!(a.events.is_empty());
    eprintln!(
        "baseline: {} steps, {} records, {} virtual, {took:?} wall",
        a.steps,
        a.records,
        calametra_core::clock::format_ns(a.end_ns)
    );
}

#[test]
fn the_colour_bars_are_what_the_dock_shows() {
    let seen = Rc::new(RefCell::new(None));
    let s2 = seen.clone();
    let r = run(RunConfig::default(), &move |sim| {
        let h = build(sim);
        let s2 = s2.clone();
        sim.invariant("peek", move |w| {
            if h.beliefs.borrow().fence_done >= 1 && s2.borrow().is_none() {
                let m = w.model(h.dock);
                *s2.borrow_mut() = Some((m.shown_frame(0), m.mode(0), m.flip_state(0)));
            }
            true
        });
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let (frame, mode, flips) = seen.borrow_mut().take().expect("a frame was shown");
    let mode = mode.expect("a mode is set");
    assert_eq!(
        (mode.hactive, mode.vactive, mode.refresh_hz, mode.pclk_khz),
        (1920, 1080, 60, 148_500)
    );
    let shown = flips.shown.expect("flip shown");
    assert_eq!((shown.fence, shown.y_offset, shown.format), (1, FB_ADDR, 6));
    let f = frame.expect("the shown frame decodes");
    assert_eq!(
        (f.width, f.height, f.format),
        (1920, 1080, PixelFormat::Nv12)
    );
    for (i, &(y, cb, cr)) in BARS.iter().enumerate() {
        for &(x, line) in &[
            (i as u32 * 240, 0),
            (i as u32 * 240 + 239, 1079),
            (i as u32 * 240 + 120, 540),
        ] {
            assert_eq!(
                f.ycbcr(x, line),
                Some((y, cb, cr)),
                "bar {i} at ({x}, {line})"
            );
        }
    }
    let sum = fnv1a64(&[&f.planes[0], &f.planes[1]]);
    let want = colour_bars_nv12(WIDTH as usize, HEIGHT as usize);
    assert_eq!(want.len(), frame_len());
    assert_eq!(sum, fnv1a64(&[&want]), "decoded frame = the driver's bars");
    assert_eq!(sum, BARS_CHECKSUM, "checksum {sum:#018x}");
}

#[cfg(not(feature = "planted-race"))]
#[test]
fn the_fixed_driver_survives_200_seeds() {
    let mut unplugged = 0;
    let mut endings = std::collections::BTreeMap::new();
    for seed in 0..200 {
        let seen = Rc::new(RefCell::new(None));
        let s2 = seen.clone();
        let r = run(seeded(seed), &move |sim| {
            let h = build(sim);
            *s2.borrow_mut() = Some(h.beliefs);
        });
        assert!(
            r.failure.is_none(),
            "seed {seed}: {:?} | {}",
            r.failure,
            story(&r.events)
        );
        if r.marks.contains_key(marks::STALE_STATUS_AFTER_DISCONNECT) {
            unplugged += 1;
        }
        let b = seen.borrow_mut().take().expect("built");
        let phase = format!("{:?}", b.borrow().phase);
        *endings.entry(phase).or_insert(0) += 1;
    }
    assert!(
        unplugged >= 3,
        "StaleStatusAfterDisconnect in {unplugged} seeds"
    );
    assert_eq!(
        endings.get("Done"),
        Some(&200),
        "every run finished: {endings:?}"
    );
    eprintln!("200 seeds: stale-status windows in {unplugged}; phases {endings:?}");
}

#[cfg(not(feature = "planted-race"))]
#[test]
fn the_fixed_driver_survives_64_seeds_with_transport_faults() {
    let mut driver_errors = 0;
    for seed in 0..64 {
        let r = run(
            RunConfig {
                fault_set: FaultSet::Transport,
                ..seeded(seed)
            },
            &scenario,
        );
        if let Err(e) = acceptable(&r) {
            panic!("seed {seed}: {e}");
        }
        if r.failure.is_some() {
            driver_errors += 1;
        }
    }
    eprintln!("64 seeds with transport faults: {driver_errors} ended with a driver error, none broke an invariant");
}

#[cfg(not(feature = "planted-race"))]
#[test]
fn the_fixed_driver_survives_every_single_transport_fault() {
    let base = run(
        RunConfig {
            record_sites: true,
            ..RunConfig::default()
        },
        &scenario,
    );
    assert!(base.failure.is_none(), "{:?}", base.failure);
    let mut trials = 0;
    let mut driver_errors = 0;
    let mut bad = Vec::new();
    for site in &base.sites {
        for fault in FaultSet::Transport.candidates(&site.kind) {
            let r = run(
                RunConfig {
                    faults: FaultPlan::single(&site.name, fault.clone()),
                    ..RunConfig::default()
                },
                &scenario,
            );
            trials += 1;
            if matches!(r.failure, Some(Failure::TaskError { .. })) {
                driver_errors += 1;
            }
            if let Err(e) = acceptable(&r) {
                bad.push(format!("{}::{fault}: {e}", site.name));
            }
        }
    }
    assert!(trials > 100, "only {trials} trials");
    assert!(
        bad.is_empty(),
        "{} of {trials} trials failed:\n{}",
        bad.len(),
        bad.join("\n")
    );
    eprintln!("{trials} single-fault trials: {driver_errors} ended with a driver error, none broke an invariant");
}

#[cfg(feature = "planted-race")]
#[test]
fn the_planted_race_breaks_status_matches_connection_in_some_seed() {
    let found = (0..200).find_map(|seed| {
        let r = run(seeded(seed), &scenario);
        match &r.failure {
            Some(f) if f.invariant() == Some(names::STATUS_MATCHES_CONNECTION) => {
                Some((seed, f.to_string(), story(&r.events)))
            }
            Some(f) => panic!("seed {seed} failed otherwise: {f}"),
            None => None,
        }
    });
    let (seed, message, events) = found.expect("no seed in 0..200 found the planted race");
    assert!(message.contains("believes Connected"), "{message}");
    assert!(events.contains("unplug"), "{events}");
    eprintln!("seed {seed}: {message}\n  events: {events}");
}

/// SHA-256 of the colour bars as a monitor sees them: 1920x1080 8-bit RGB, the driver's
/// BT.601 limited-range bars decoded with the dock's full-range equations
/// (`calametra_models::trigger6::scanout`), so white is (235, 235, 235) and black (16, 16, 16).
const BARS_PICTURE: &str = "fe031f5c2492e7584f2c17f5a31a11a0b8dd13849c54293035a390d5f40cbaf6";

/// The RGB of each bar, as the dock shows it: white, yellow, cyan, green, magenta, red, blue,
/// black.
const BARS_RGB: [[u8; 3]; 8] = [
    [235, 235, 235],
    [235, 236, 12],
    [13, 237, 237],
    [13, 238, 14],
    [238, 13, 237],
    [238, 14, 14],
    [16, 15, 239],
    [16, 16, 16],
];

/// Checks a picture of the colour bars: size, bar colours, the pinned pixel hash, and that its
/// PNG (written to `name` under the target's temporary directory) decodes back to the pixels.
fn check_bars_picture(s: &Scanout, name: &str) {
    assert_eq!(
        (s.width, s.height, s.format),
        (1920, 1080, PixelFormat::Nv12)
    );
    let got: Vec<[u8; 3]> = (0..8)
        .map(|i| s.pixel(i * 240 + 120, 540).unwrap())
        .collect();
    assert_eq!(got, BARS_RGB, "bar colours");
    for (i, rgb) in BARS_RGB.iter().enumerate() {
        let x = i as u32 * 240;
        assert_eq!(s.pixel(x, 0).as_ref(), Some(rgb), "bar {i} left edge");
        assert_eq!(
            s.pixel(x + 239, 1079).as_ref(),
            Some(rgb),
            "bar {i} right edge"
        );
    }
    // Every pixel is its bar's colour: the picture built from the table is the same bytes.
    let line: Vec<u8> = BARS_RGB
        .iter()
        .flat_map(|rgb| std::iter::repeat_n(*rgb, 240).flatten())
        .collect();
    assert!(
        s.rgb == line.repeat(1080),
        "every pixel is its bar's colour"
    );
    assert_eq!(s.sha256(), BARS_PICTURE, "pixels sha256");
    let path = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(name);
    s.write_png(&path).unwrap();
    let (w, h, px) = decode_png(&std::fs::read(&path).unwrap()).unwrap();
    assert_eq!((w, h), (1920, 1080));
    assert!(px == s.rgb, "{} decodes back to the pixels", path.display());
}

#[test]
fn the_colour_bars_as_a_picture_are_pinned_and_their_png_decodes_back() {
    let seen = Rc::new(RefCell::new(None));
    let s2 = seen.clone();
    let r = run(RunConfig::default(), &move |sim| {
        let h = build(sim);
        let s2 = s2.clone();
        sim.invariant("peek", move |w| {
            if h.beliefs.borrow().fence_done >= 1 && s2.borrow().is_none() {
                let m = w.model(h.dock);
                *s2.borrow_mut() = Some((m.scanout(0), m.scanout(1), m.scanout_png(0)));
            }
            true
        });
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let (s0, s1, png) = seen.borrow_mut().take().expect("a frame was shown");
    let s = s0.expect("output 0 shows the bars");
    assert_eq!((s.output, s.fence), (0, 1));
    assert!(s1.is_none(), "output 1 shows nothing");
    assert_eq!(png.as_deref(), Some(s.png().as_slice()));
    check_bars_picture(&s, "colour-bars-out0.png");
}

#[test]
fn the_second_monitor_hot_plugged_into_output_1_shows_the_colour_bars() {
    let seen = Rc::new(RefCell::new(None));
    let s2 = seen.clone();
    let done = Rc::new(RefCell::new(None));
    let d2 = done.clone();
    let r = run(RunConfig::default(), &move |sim| {
        let h = build_second_output(sim);
        let (s2, d2) = (s2.clone(), d2.clone());
        sim.invariant("peek", move |w| {
            let dock = w.model(h.dock);
            let m = dock.inner();
            let b = h.beliefs.borrow();
            if b.fence_done >= 1 && s2.borrow().is_none() {
                *s2.borrow_mut() = Some((
                    m.scanout(1),
                    m.flip_state(0),
                    m.flip_state(1),
                    m.mode(1),
                    w.now(),
                ));
            }
            if b.phase == Phase::Done {
                *d2.borrow_mut() = Some((
                    dock.done()
                        .iter()
                        .map(|s| s.to_string())
                        .collect::<Vec<_>>(),
                    m.hotplug_raised(1),
                    b.hotplug_seen,
                    b.frames_shown,
                    b.edid.clone(),
                    b.modes,
                ));
            }
            true
        });
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let (s1, flips0, flips1, mode, shown_at) = seen.borrow_mut().take().expect("a frame");
    assert!(
        shown_at > SECOND_MONITOR_AT.as_nanos() as u64,
        "shown after the hot-plug"
    );
    let mode = mode.expect("output 1 has a mode");
    assert_eq!(
        (mode.hactive, mode.vactive, mode.refresh_hz, mode.pclk_khz),
        (1920, 1080, 60, 148_500)
    );
    assert!(flips0.shown.is_none(), "output 0 shows nothing");
    let f = flips1.shown.expect("output 1 shows a flip");
    assert_eq!(
        (f.output, f.fence, f.y_offset, f.format),
        (1, 1, FB_ADDR_1, 6)
    );
    let s = s1.expect("output 1's picture");
    assert_eq!(s.output, 1);
    check_bars_picture(&s, "colour-bars-out1.png");
    let (scripted, raised, seen_hp, frames, edid, modes) =
        done.borrow_mut().take().expect("the driver finished");
    assert_eq!(scripted, ["hotplug out1"]);
    assert_eq!(raised, 1);
    assert_eq!(seen_hp, [0, 1], "the driver processed output 1's hot-plug");
    assert_eq!(frames, 1 + WATCH_FRAMES);
    let dp = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../refdata/hp-x27q-dp.edid.bin"),
    )
    .unwrap();
    assert_eq!(edid.as_deref(), Some(dp.as_slice()), "the DisplayPort EDID");
    assert!(modes[0].is_none() && modes[1].is_some());
}

/// The picture hook (`Device::pictures`, `RunConfig::pictures`): a run of the second output that
/// watches pictures sees one per flip on output 1, in order, each named by its flip and
/// rendered as the colour bars; what is on show at the end is the last flip; watching changes
/// neither the trace nor its hash.
#[test]
fn watching_the_second_output_sees_each_flip_as_the_colour_bars() {
    let plain = run(RunConfig::default(), &|sim| {
        build_second_output(sim);
    });
    assert!(
        plain.pictures.is_none(),
        "a run not watching pictures has none"
    );
    let watched = run(
        RunConfig {
            pictures: true,
            keep_trace: true,
            ..RunConfig::default()
        },
        &|sim| {
            build_second_output(sim);
        },
    );
    assert!(watched.failure.is_none(), "{:?}", watched.failure);
    assert_eq!(
        watched.hash, plain.hash,
        "watching pictures changes no record"
    );
    let log = watched
        .pictures
        .clone()
        .expect("a watching run returns its pictures");
    let names: Vec<&str> = log.shown.iter().map(|s| s.name.as_str()).collect();
    let want: Vec<String> = (1..=1 + WATCH_FRAMES)
        .map(|n| format!("out1-flip{n}-fence{n}-nv12-1920x1080"))
        .collect();
    assert_eq!(names, want, "one picture a flip, on output 1 only");
    let mut last_step = 0;
    for s in &log.shown {
        assert_eq!(s.device_name, "trigger6");
        assert!(s.step > last_step, "in the order they appeared");
        last_step = s.step;
        let p = s.picture.as_ref().expect("rendered");
        let (w, h, px) = decode_png(&p.png).unwrap();
        assert_eq!((w, h, p.width, p.height), (1920, 1080, 1920, 1080));
        assert_eq!(
            calametra_core::trace::sha256_hex(&px),
            BARS_PICTURE,
            "{} is the colour bars",
            s.name
        );
        assert!(p.about.contains(BARS_PICTURE), "{}", p.about);
    }
    assert_eq!(
        log.at_end,
        [log.shown.len() - 1],
        "the last flip is on show"
    );
    // The flip's transition record comes just before the picture was seen.
    let recs = calametra_core::trace::parse_kept(&watched.lines);
    let first = &log.shown[0];
    let flip = recs
        .iter()
        .rfind(|r| r.seq < first.records && r.actor == "trigger6")
        .expect("a record of the dock before the picture");
    assert_eq!(
        flip.data["site"], "flip_secondary.pending->shown#1",
        "the picture appears with its flip"
    );
}
