//! The coverage-marks floor (`marks = [...]`, `marks_floor = N`): a `marks` trial over the
//! fixed seeds passes when every declared mark is reached often enough and fails with a table
//! of every mark's count when one is not (the sabotage: a declared mark nothing reaches).

use std::process::Command;

fn marks_bin(args: &[&str]) -> (bool, String) {
    let o = Command::new(env!("CARGO_BIN_EXE_marks"))
        .env_remove("CALAMETRA_SCHEDULES")
        .env_remove("CALAMETRA_SEED")
        .env("CALAMETRA_REGRESSIONS", "off")
        .args(args)
        .output()
        .expect("run the marks binary");
    (
        o.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&o.stdout),
            String::from_utf8_lossy(&o.stderr)
        ),
    )
}

#[test]
fn the_floor_passes_when_every_declared_mark_is_reached_often_enough() {
    let (ok, text) = marks_bin(&["--exact", "floor_met::marks"]);
    assert!(ok, "{text}");
    assert!(text.contains("test floor_met::marks ... ok"), "{text}");
}

#[test]
fn the_floor_fails_with_a_table_when_a_declared_mark_is_never_reached() {
    let (ok, text) = marks_bin(&["--exact", "floor_missed::marks"]);
    assert!(!ok, "{text}");
    assert!(
        text.contains("test floor_missed::marks ... FAILED"),
        "{text}"
    );
    assert!(
        text.contains("1 of 2 declared marks reached by fewer than 3 of the 16 fixed seeds"),
        "{text}"
    );
    let row = |m: &str| {
        text.lines()
            .find(|l| l.split_whitespace().next() == Some(m))
            .unwrap_or_else(|| panic!("no row for {m}:\n{text}"))
            .to_string()
    };
    assert!(row("Never").contains("0  BELOW THE FLOOR"), "{text}");
    assert!(row("Often").contains("16"), "{text}");
    // Reached but not declared: listed, not judged.
    assert!(
        row("Sometimes").contains("(reached, not declared)"),
        "{text}"
    );
}
