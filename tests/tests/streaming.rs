//! Queued transfers end to end (issue 37), through the `streaming` harness binary: a reader
//! with four bulk IN transfers in flight keeps its invariant (no sample lost or duplicated
//! unless it reports the gap) under stalls, timeouts, short packets, delays and seeded
//! schedules; a planted bug (gaps unreported) breaks it, minimized to one fault; a stall on
//! bulk IN is recovered with `clear_halt`, and without the recovery the invariant breaks,
//! minimized to the stall; a reader reopens its device through the host after the `unplug`
//! external (its `marks` trial: enough seeds reach `reopened_after_replug`).

use std::process::Command;

fn streaming(args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_streaming"))
        .env_remove("CALAMETRA_SCHEDULES")
        .env_remove("CALAMETRA_SEED")
        .env("CALAMETRA_REGRESSIONS", "off")
        .env("CALAMETRA_VERBOSE", "1")
        .args(args)
        .output()
        .expect("run the streaming binary");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

/// The `minimal events:` line of a find, its events split on ` . `.
fn minimal_events(text: &str) -> Vec<String> {
    let line = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("minimal events: "))
        .unwrap_or_else(|| panic!("no minimal events line:\n{text}"));
    line.split(" . ").map(str::to_string).collect()
}

#[test]
fn every_trial_passes_the_fixed_readers_hold_and_the_planted_ones_are_found() {
    let (ok, text) = streaming(&[]);
    assert!(ok, "{text}");
    for t in [
        "stream_fixed::baseline",
        "stream_fixed::site::bulk.in#1::delay(1ms)",
        "stall_recovered::site::bulk.in#2::stall",
        "stream_planted::finds::no_sample_lost",
        "stall_unrecovered::finds::no_sample_lost",
        "replug::marks",
    ] {
        let passed = text.lines().any(|l| {
            l.strip_prefix("test ")
                .and_then(|r| r.strip_prefix(t))
                .is_some_and(|r| r.starts_with(' ') && r.trim_end().ends_with("... ok"))
        });
        assert!(passed, "{t}:\n{text}");
    }
}

#[test]
fn a_planted_reader_that_leaves_gaps_unreported_is_found_minimized_to_one_fault() {
    let (ok, text) = streaming(&["--exact", "stream_planted::finds::no_sample_lost"]);
    assert!(ok, "{text}");
    assert!(text.contains("invariant `no_sample_lost` broke"), "{text}");
    let events = minimal_events(&text);
    assert_eq!(events.len(), 1, "{events:?}\n{text}");
    assert!(events[0].contains("at bulk.in#"), "{events:?}");
}

#[test]
fn a_stall_without_clear_halt_breaks_the_stream_minimized_to_the_stall() {
    let (ok, text) = streaming(&["--exact", "stall_unrecovered::finds::no_sample_lost"]);
    assert!(ok, "{text}");
    let events = minimal_events(&text);
    assert_eq!(events.len(), 1, "{events:?}\n{text}");
    assert!(events[0].starts_with("stall at bulk.in#"), "{events:?}");
    // The halted endpoint: every read after the stall stalls until the reader gives up.
    assert!(text.contains(" stall . bulk.in#"), "{text}");
}

#[test]
fn the_same_stalls_are_recovered_through_clear_halt() {
    let (ok, text) = streaming(&["--exact", "stall_recovered"]);
    assert!(ok, "{text}");
    let sites = text
        .lines()
        .filter(|l| l.contains("stall_recovered::site::bulk.in#") && l.ends_with("... ok"))
        .count();
    assert!(sites >= 8, "{sites} stall sites:\n{text}");
}
