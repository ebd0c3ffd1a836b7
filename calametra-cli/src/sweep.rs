//! `calametra sweep BUDGET` (and `cargo calametra sweep`): builds the workspace's scenario
//! binaries and sweeps each in turn, then prints one report; and the test binaries and trials
//! the tool finds for `replay`/`show` given a trial name.
//!
//! What a sweep runs is exactly what `CALAMETRA_SWEEP=BUDGET cargo test --test T` runs (DESIGN
//! §4, "Sweeps"): this module only chooses the binaries, splits a time budget between them, sets
//! the environment and reads back each binary's summary. A time budget is shared: each binary
//! gets what is left divided by the binaries left, so one that sweeps nothing (a guest-only
//! binary exits 2 at once) leaves its share to the others. A run budget is per scenario, as
//! the variable's.
//!
//! What must not live here: the sweep itself (the harness's), the merge of partitions
//! (`calametra_core::sweep::merge`).

use crate::output::{cargo_or_default, clean, fail, usage, CliError};
use calametra::env_names::{SWEEP, SWEEP_GUIDE, SWEEP_PARTITION, SWEEP_SUMMARY};
use calametra_core::sweep::{Budget, Summary};
use clap::Args;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// `calametra sweep`.
#[derive(Args, Debug)]
pub struct SweepArgs {
    /// A duration shared by every binary (`20s`, `10m`, `1h`) or runs per scenario (`2000`).
    #[arg(value_name = "BUDGET")]
    budget: String,
    /// Only this package's scenario binaries (repeatable).
    #[arg(short = 'p', long = "package", value_name = "PKG")]
    packages: Vec<String>,
    /// Only this test target (repeatable; with -p when several packages have one of its name).
    #[arg(long = "test", value_name = "T")]
    tests: Vec<String>,
    /// This machine's share of the sweep (`k/n`): run `1/4` to `4/4` on four machines and
    /// merge their summaries with `calametra sweep-report`.
    #[arg(long, value_name = "k/n")]
    partition: Option<String>,
    /// A guided sweep (a corpus of runs that reached something new, mutated alongside fresh
    /// seeds; `CALAMETRA_SWEEP_GUIDE=1`).
    #[arg(long, conflicts_with = "no_guide")]
    guide: bool,
    /// A uniform sweep: fresh seeds only (`CALAMETRA_SWEEP_GUIDE=0`).
    #[arg(long)]
    no_guide: bool,
    /// Keep each binary's summary here as `<package>--<target>.json` (created; default: a
    /// temporary directory).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// The cargo that builds the binaries (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
    /// Arguments for each binary, as after `cargo test --`: a filter (`-- stale_status`)
    /// sweeps only the scenarios it matches.
    #[arg(last = true, value_name = "FILTER")]
    filter: Vec<String>,
}

/// A test binary cargo built.
#[derive(Clone, Debug)]
pub struct TestBinary {
    /// Its package.
    pub package: String,
    /// Its test target.
    pub target: String,
    /// The executable.
    pub exe: PathBuf,
    /// Its package's directory (where `cargo test` runs it).
    pub dir: PathBuf,
}

/// Package names by manifest path (`cargo metadata --no-deps`).
fn package_names(cargo: &str) -> Result<BTreeMap<PathBuf, String>, CliError> {
    let out = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo} metadata`: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "`{cargo} metadata` failed: run this inside a Cargo workspace"
        )));
    }
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)
        .map_err(|e| fail(format!("`{cargo} metadata` printed no JSON: {e}")))?;
    let mut m = BTreeMap::new();
    for p in v["packages"].as_array().into_iter().flatten() {
        if let (Some(n), Some(mp)) = (p["name"].as_str(), p["manifest_path"].as_str()) {
            m.insert(PathBuf::from(mp), n.to_string());
        }
    }
    Ok(m)
}

/// Builds the test targets (`cargo test --no-run`, with `-p` and `--test` as given, every test
/// target when no `--test`) and lists their executables in cargo's order.
pub fn test_binaries(
    cargo: &str,
    packages: &[String],
    tests: &[String],
) -> Result<Vec<TestBinary>, CliError> {
    let names = package_names(cargo)?;
    let mut c = Command::new(cargo);
    c.args([
        "test",
        "--no-run",
        "--message-format=json-render-diagnostics",
    ]);
    for p in packages {
        c.args(["-p", p]);
    }
    if tests.is_empty() {
        c.arg("--tests");
    }
    for t in tests {
        c.args(["--test", t]);
    }
    eprintln!(
        "$ {cargo} {}",
        c.get_args()
            .map(|a| calametra::report::shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let out = c
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo} test --no-run`: {e}")))?;
    if !out.status.success() {
        return Err(fail(format!(
            "`{cargo} test --no-run` failed (its errors are above)"
        )));
    }
    let mut v = Vec::new();
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Ok(m) = serde_json::from_str::<serde_json::Value>(line) else {
            continue;
        };
        if m["reason"] != "compiler-artifact" || m["profile"]["test"] != true {
            continue;
        }
        let is_test = m["target"]["kind"]
            .as_array()
            .is_some_and(|k| k.iter().any(|x| x == "test"));
        let (Some(exe), Some(target), Some(manifest)) = (
            m["executable"].as_str(),
            m["target"]["name"].as_str(),
            m["manifest_path"].as_str(),
        ) else {
            continue;
        };
        if !is_test {
            continue;
        }
        let manifest = PathBuf::from(manifest);
        let Some(package) = names.get(&manifest).cloned() else {
            continue;
        };
        v.push(TestBinary {
            package,
            target: target.to_string(),
            exe: PathBuf::from(exe),
            dir: manifest.parent().unwrap_or(Path::new(".")).to_path_buf(),
        });
    }
    Ok(v)
}

/// The trials a test binary lists (`--list`): every one, or the ignored ones alone.
pub fn trials(b: &TestBinary, ignored_only: bool) -> Result<Vec<String>, CliError> {
    let which = if ignored_only {
        "--ignored"
    } else {
        "--include-ignored"
    };
    let out = Command::new(&b.exe)
        .args(["--list", which])
        .current_dir(&b.dir)
        .env_remove(SWEEP)
        .stderr(Stdio::null())
        .output()
        .map_err(|e| fail(format!("{}: cannot list its trials: {e}", b.exe.display())))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect())
}

/// Whether a binary holds in-process Calametra scenarios (a `<scenario>::baseline` trial that
/// is not ignored: a guest scenario's trials are, and a sweep leaves them out).
fn is_scenario_binary(b: &TestBinary) -> Result<bool, CliError> {
    let ignored = trials(b, true)?;
    Ok(trials(b, false)?
        .iter()
        .any(|t| t.ends_with("::baseline") && !ignored.contains(t)))
}

/// `calametra sweep BUDGET ...`.
#[allow(
    clippy::disallowed_methods,
    clippy::disallowed_types,
    reason = "host-side runner: a time budget is host time, outside every simulation"
)]
pub fn sweep(a: &SweepArgs) -> Result<(), CliError> {
    let budget = Budget::parse(&a.budget).map_err(|e| usage(&format!("BUDGET: {e}")))?;
    if let Some(p) = &a.partition {
        calametra_core::sweep::Partition::parse(p)
            .map_err(|e| usage(&format!("--partition: {e}")))?;
    }
    let cargo = cargo_or_default(&a.cargo);
    let tmp;
    let out_dir = match &a.out {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| fail(format!("{}: cannot create: {e}", d.display())))?;
            d.clone()
        }
        None => {
            tmp = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
            tmp.path().to_path_buf()
        }
    };
    let mut bins = Vec::new();
    for b in test_binaries(&cargo, &a.packages, &a.tests)? {
        if is_scenario_binary(&b)? {
            bins.push(b);
        }
    }
    if bins.is_empty() {
        return Err(CliError(
            "sweep: no scenario binary among the test targets chosen (a test target with `calametra::main!()` and scenarios); nothing to sweep".into(),
            2,
        ));
    }
    let started = std::time::Instant::now();
    let mut summaries: Vec<Summary> = Vec::new();
    let mut nothing: Vec<String> = Vec::new();
    let mut worst = 0u8;
    for (i, b) in bins.iter().enumerate() {
        let share = match budget {
            Budget::Runs(n) => n.to_string(),
            Budget::Time(total) => {
                let left = total.saturating_sub(started.elapsed());
                let each = left / u32::try_from(bins.len() - i).unwrap_or(u32::MAX);
                // The grammar's smallest unit the sweep reads; at least a millisecond.
                format!("{}ms", each.as_millis().max(1))
            }
        };
        let summary = out_dir.join(format!("{}--{}.json", b.package, b.target));
        let mut c = Command::new(&b.exe);
        c.args(&a.filter)
            .current_dir(&b.dir)
            .env(SWEEP, &share)
            .env(SWEEP_SUMMARY, &summary);
        if let Some(p) = &a.partition {
            c.env(SWEEP_PARTITION, p);
        }
        if a.guide {
            c.env(SWEEP_GUIDE, "1");
        } else if a.no_guide {
            c.env(SWEEP_GUIDE, "0");
        }
        println!(
            "\n$ {SWEEP}={share} cargo test -p {} --test {}{}",
            b.package,
            b.target,
            a.partition
                .as_ref()
                .map(|p| format!("  (partition {p})"))
                .unwrap_or_default()
        );
        let status = c
            .status()
            .map_err(|e| fail(format!("{}: cannot run: {e}", b.exe.display())))?;
        let code = status.code().unwrap_or(1);
        let read = calametra_core::input::read_regular(
            &summary,
            calametra_core::input::MAX_DOCUMENT_BYTES,
            "sweep summary",
        );
        match read {
            Ok(text) => {
                summaries.push(Summary::parse(&summary, &text).map_err(|e| fail(e.to_string()))?)
            }
            Err(_) if code == 2 => {
                nothing.push(format!("{} --test {}", b.package, b.target));
                continue;
            }
            Err(e) => {
                return Err(fail(format!(
                    "{} --test {} wrote no summary ({}): {e}",
                    b.package,
                    b.target,
                    summary.display()
                )))
            }
        }
        worst = worst.max(u8::try_from(code.clamp(0, 2)).unwrap_or(1));
    }
    println!("\n{}", clean(&report(&summaries, &nothing)));
    if a.out.is_some() {
        println!("summaries: {}", out_dir.display());
    }
    match worst {
        0 => Ok(()),
        _ => Err(CliError(
            "the sweep found failures not expected (see the report above)".into(),
            worst,
        )),
    }
}

/// One report over several binaries' summaries: each binary's, then the totals.
pub fn report(summaries: &[Summary], nothing: &[String]) -> String {
    let mut s = String::new();
    for sm in summaries {
        s.push_str(&sm.report());
    }
    for n in nothing {
        s.push_str(&format!("{n}: swept nothing (no in-process scenario)\n"));
    }
    let runs: u64 = summaries.iter().map(Summary::runs).sum();
    let sigs: usize = summaries
        .iter()
        .flat_map(|sm| &sm.scenarios)
        .map(|sc| sc.tally.signatures.len())
        .sum();
    let n = summaries.len();
    s.push_str(&format!(
        "calametra sweep: {} over {n} scenario binar{}, {}\n",
        calametra::report::count(usize::try_from(runs).unwrap_or(usize::MAX), "run"),
        if n == 1 { "y" } else { "ies" },
        calametra::report::count(sigs, "failure signature")
    ));
    s
}
