//! A run that gives no verdict (`emulator_blocked`) fails its trial, since libtest has no other
//! outcome that keeps CI from passing, with a first line no driver failure has:
//! `calametra: NO VERDICT (emulator_blocked): <reason>`, under libtest (the failure's block)
//! and under nextest (the `Error: ` line nextest reads for its JUnit report). The binary is
//! `tests/src/bin/no_verdict.rs`: a guest scenario whose runner ends every run so, without QEMU.

use std::process::Command;

const FIRST_LINE: &str = "calametra: NO VERDICT (emulator_blocked): no console output and no USB traffic while the guest's clock advanced 61.0 s (budget 60s of guest time)";

fn trial() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_no_verdict"));
    c.args(["--ignored", "--exact", "stuck_guest::baseline"])
        .env("CALAMETRA_REGRESSIONS", "off")
        .env_remove("NEXTEST")
        .env_remove("CALAMETRA_SCHEDULES")
        .env_remove("CALAMETRA_SEED");
    c
}

fn run(c: &mut Command) -> (bool, String, String) {
    let out = c.output().expect("run the no_verdict harness binary");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

#[test]
fn libtest_shows_the_trial_failed_with_a_no_verdict_line_of_its_own() {
    let (ok, stdout, stderr) = run(&mut trial());
    assert!(
        !ok,
        "a trial without a verdict must not pass CI:\n{stdout}{stderr}"
    );
    assert!(
        stdout.contains("test stuck_guest::baseline ... FAILED"),
        "{stdout}"
    );
    // The failure's block: the trial's name, then the line.
    assert!(
        stdout.contains(&format!("---- stuck_guest::baseline ----\n{FIRST_LINE}\n")),
        "{stdout}"
    );
    assert!(
        stdout.contains("This is no verdict on the driver"),
        "{stdout}"
    );
    // What a CI log is grepped for appears once, on the line that opens the message.
    let lines: Vec<&str> = stdout
        .lines()
        .filter(|l| l.contains("calametra: NO VERDICT"))
        .collect();
    assert_eq!(lines, [FIRST_LINE], "{stdout}");
}

#[test]
fn under_nextest_the_error_line_nextest_reads_is_the_no_verdict_line() {
    let (ok, stdout, stderr) = run(trial().env("NEXTEST", "1"));
    assert!(!ok, "{stdout}{stderr}");
    assert!(
        stderr.lines().any(|l| l == format!("Error: {FIRST_LINE}")),
        "nextest takes a failure's description from its `Error: ` line:\n{stderr}"
    );
}
