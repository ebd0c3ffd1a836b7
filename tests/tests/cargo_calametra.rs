//! `cargo calametra` as a user runs it on the Trigger 6 example (issue "sweeps as an everyday
//! command"): a sweep of a package's scenario binaries with one report, partitions that merge
//! into the signatures of one sweep, and a find shown from its trial's name alone.
//!
//! The tools are the workspace's `cargo-calametra` and `calametra`, built once; every sweep is
//! uniform (`--no-guide`) and, where runs are compared, run-budgeted, so the figures do not
//! depend on the machine's speed.

mod support;

use calametra::sweep::Summary;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;
use support::{cargo, clean, executables, root, run_code as run};

const PKG: &str = "calametra-example-trigger6";

/// `cargo-calametra` (beside `calametra`, as `cargo install` puts them).
fn cargo_calametra() -> &'static Path {
    static EXE: OnceLock<PathBuf> = OnceLock::new();
    EXE.get_or_init(|| {
        let mut c = cargo();
        c.args(["build", "-p", "calametra-cli", "--bins"]);
        executables(c)
            .remove("cargo-calametra")
            .expect("cargo built cargo-calametra")
    })
}

/// `cargo-calametra calametra ARGS` (what `cargo calametra ARGS` runs), from the workspace;
/// the finds its sweeps save go to a scratch directory, not the example's committed cases.
fn sub(args: &[&str]) -> (i32, String) {
    static REGS: OnceLock<tempfile::TempDir> = OnceLock::new();
    let regs = REGS.get_or_init(|| tempfile::tempdir().unwrap());
    let mut c = clean(Command::new(cargo_calametra()));
    c.current_dir(root())
        .env("CALAMETRA_REGRESSIONS", regs.path())
        .env("CARGO", support::cargo_path())
        .arg("calametra")
        .args(args);
    run(&mut c)
}

fn summary(p: &Path) -> Summary {
    Summary::parse(p, &std::fs::read_to_string(p).unwrap()).unwrap()
}

/// (scenario, signature, kept seed, runs) of every signature.
fn signatures(s: &Summary) -> Vec<(String, String, String, u64)> {
    let mut v = Vec::new();
    for sc in &s.scenarios {
        for (sig, g) in &sc.tally.signatures {
            v.push((sc.scenario.clone(), sig.clone(), g.seed.clone(), g.runs));
        }
    }
    v.sort();
    v
}

#[test]
fn a_sweep_of_a_package_prints_one_report_of_its_scenario_binaries() {
    let (code, text) = sub(&["sweep", "200", "-p", PKG, "--no-guide"]);
    // The guest binary (guest scenarios only, never swept) is left out before the budget.
    assert!(!text.contains("--test guest"), "{text}");
    // The example's one known bug is an `expect` scenario's: found, and not a failure.
    assert_eq!(code, 0, "{text}");
    for line in [
        "$ CALAMETRA_SWEEP=",
        "cargo test -p calametra-example-trigger6 --test scenarios",
        "stale_status_after_disconnect: ",
        "invariant `status_matches_connection` broke",
        "over 1 scenario binary, 1 failure signature",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
}

#[test]
fn partitions_merge_into_one_sweep_and_a_find_is_shown_by_its_trial_name() {
    let tmp = tempfile::tempdir().unwrap();
    let dir = |n: &str| tmp.path().join(n).display().to_string();
    let base = ["-p", PKG, "--test", "scenarios", "--no-guide"];
    let sweep = |budget: &str, extra: &[&str], out: &str| {
        let mut args = vec!["sweep", budget];
        args.extend(base);
        args.extend(extra);
        args.extend(["--out", out, "--", "stale_status_after_disconnect"]);
        let (code, text) = sub(&args);
        assert_eq!(code, 0, "{text}");
        summary(&Path::new(out).join(format!("{PKG}--scenarios.json")))
    };
    // (An `expect` scenario's sweep must meet its known bug: 100 runs a share do.)
    let whole = sweep("200", &[], &dir("whole"));
    sweep("100", &["--partition", "1/2"], &dir("p1"));
    sweep("100", &["--partition", "2/2"], &dir("p2"));
    let merged = tmp.path().join("merged.json");
    let (code, text) = sub(&[
        "sweep-report",
        &format!("{}/{PKG}--scenarios.json", dir("p1")),
        &format!("{}/{PKG}--scenarios.json", dir("p2")),
        "--out",
        merged.to_str().unwrap(),
    ]);
    assert_eq!(code, 0, "{text}");
    let merged = summary(&merged);
    assert_eq!(merged.runs(), whole.runs());
    assert_eq!(signatures(&merged), signatures(&whole));
    // The find's trial, named as the report names it, shows the failing run.
    let sig = signatures(&whole);
    let (scenario, _, seed, _) = sig
        .iter()
        .find(|s| s.0 == "stale_status_after_disconnect")
        .expect("the sweep met the known bug");
    let trial = format!("{scenario}::seed::{seed}");
    let (code, text) = sub(&["show", &trial, "-p", PKG]);
    assert_eq!(code, 0, "{text}");
    assert!(
        text.contains("invariant `status_matches_connection` broke") && text.contains("end: fail"),
        "`show {trial}` does not show the failing run:\n{text}"
    );
}

/// A name that is neither a file nor a trial any binary lists is a clear error.
#[test]
fn a_trial_name_no_binary_lists_is_refused_naming_it() {
    let (code, text) = sub(&["show", "no_such::seed::0x1", "-p", PKG]);
    assert_eq!(code, 1, "{text}");
    assert!(
        text.contains("lists a trial `no_such::seed::0x1`"),
        "{text}"
    );
}

/// `--known FILE` reaches every binary (a signature it lists is reported with its account),
/// a line naming a scenario no binary swept is pointed out, `--regressions DIR` saves each
/// package's finds under `DIR/<package>/`, and a bad file is refused before anything is built.
#[test]
fn known_findings_and_a_regressions_directory_reach_every_binary() {
    let tmp = tempfile::tempdir().unwrap();
    let known = tmp.path().join("examples.known");
    std::fs::write(
        &known,
        format!(
            "# package | scenario | signature starts with | whose bug\n\
             {PKG} | stale_status_after_disconnect | invariant `status_matches_connection` broke | the example's planted stale status\n\
             {PKG} | no_such_scenario | invariant `x` broke | a line left behind\n"
        ),
    )
    .unwrap();
    let regs = tmp.path().join("finds");
    let k = known.to_str().unwrap();
    let r = regs.to_str().unwrap();
    // `--out` relative to where the command runs (the workspace), not to each package.
    let out = format!("target/tmp/known-findings-{}", std::process::id());
    let (code, text) = sub(&[
        "sweep",
        "50",
        "-p",
        PKG,
        "--test",
        "scenarios",
        "--no-guide",
        "--known",
        k,
        "--regressions",
        r,
        "--out",
        &out,
    ]);
    assert_eq!(code, 0, "{text}");
    let file = root().join(&out).join(format!("{PKG}--scenarios.json"));
    let s = summary(&file);
    let _ = std::fs::remove_dir_all(root().join(&out));
    assert!(
        s.scenarios.iter().any(|sc| !sc.known.is_empty()),
        "the summary records the known finding: {s:?}"
    );
    for line in [
        "known: the example's planted stale status",
        "examples.known line 3: no scenario `no_such_scenario` of package `calametra-example-trigger6` was swept",
    ] {
        assert!(text.contains(line), "no `{line}` in:\n{text}");
    }
    let saved = regs
        .join(PKG)
        .join("scenarios")
        .join("stale_status_after_disconnect");
    assert!(
        std::fs::read_dir(&saved).is_ok_and(|d| d.count() > 0),
        "no case under {}:\n{text}",
        saved.display()
    );

    std::fs::write(&known, "stale_status_after_disconnect | the bug\n").unwrap();
    let (code, text) = sub(&["sweep", "50", "-p", PKG, "--known", k]);
    assert_eq!(code, 2, "{text}");
    assert!(
        text.contains("--known: ")
            && text.contains("examples.known: field `line 1: (line)`: expected four fields")
            && !text.contains("$ CALAMETRA_SWEEP="),
        "{text}"
    );
}
