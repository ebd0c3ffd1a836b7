//! `calametra sweep BUDGET` (and `cargo calametra sweep`): builds the workspace's scenario
//! binaries and sweeps each in turn, then prints one report (the test binaries and their trials
//! are found by `binaries.rs`).
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

use crate::binaries::{is_scenario_binary, test_binaries};
use crate::output::{cargo_or_default, clean, fail, usage, CliError};
use calametra::env_names::{
    REGRESSIONS, SWEEP, SWEEP_GUIDE, SWEEP_KNOWN, SWEEP_PARTITION, SWEEP_SUMMARY,
};
use calametra_core::sweep::{Budget, Known, Summary};
use clap::Args;
use std::path::PathBuf;
use std::process::Command;

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
    /// Known findings: a file of signatures the sweep meets without failing, one a line as
    /// `package | scenario | signature starts with | whose bug` (`CALAMETRA_SWEEP_KNOWN`).
    /// They are still minimized and saved, and the report says whose bug each is.
    #[arg(long, value_name = "FILE")]
    known: Option<PathBuf>,
    /// Save finds under `DIR/<package>/` instead of each package's `calametra-regressions/`
    /// (`CALAMETRA_REGRESSIONS`; `off` saves none).
    #[arg(long, value_name = "DIR")]
    regressions: Option<PathBuf>,
    /// The cargo that builds the binaries (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
    /// Arguments for each binary, as after `cargo test --`: a filter (`-- stale_status`)
    /// sweeps only the scenarios it matches.
    #[arg(last = true, value_name = "FILTER")]
    filter: Vec<String>,
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
    // Read before anything is built: a bad line is an error now, not after the budget.
    let known = match &a.known {
        Some(p) => {
            let abs = std::path::absolute(p).unwrap_or_else(|_| p.clone());
            Some((
                Known::read(&abs).map_err(|e| usage(&format!("--known: {e}")))?,
                abs,
            ))
        }
        None => None,
    };
    let regressions = match &a.regressions {
        Some(d) if d.as_os_str() == "off" => Some(d.clone()),
        Some(d) => Some(std::path::absolute(d).unwrap_or_else(|_| d.clone())),
        None => None,
    };
    let cargo = cargo_or_default(&a.cargo);
    let tmp;
    let out_dir = match &a.out {
        Some(d) => {
            std::fs::create_dir_all(d)
                .map_err(|e| fail(format!("{}: cannot create: {e}", d.display())))?;
            // Absolute: each binary runs in its package's directory, where a relative path
            // would name another place.
            std::path::absolute(d).unwrap_or_else(|_| d.clone())
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
        if let Some((_, path)) = &known {
            c.env(SWEEP_KNOWN, path);
        }
        match &regressions {
            Some(d) if d.as_os_str() == "off" => {
                c.env(REGRESSIONS, d);
            }
            Some(d) => {
                c.env(REGRESSIONS, d.join(&b.package));
            }
            None => {}
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
    // With a filter, a scenario left out is not swept, and its known findings are not stale.
    if let (Some((k, _)), true) = (&known, a.filter.is_empty()) {
        for line in unused_known(k, &summaries) {
            println!("{}", clean(&line));
        }
    }
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

/// A note for each known finding of a package swept (or of any, `*`) whose scenario no
/// summary holds (a typo, or a scenario renamed or gone): it can never match, so it should not
/// stay in the file unseen.
pub fn unused_known(known: &Known, summaries: &[Summary]) -> Vec<String> {
    known
        .findings
        .iter()
        .filter(|k| k.package == "*" || summaries.iter().any(|sm| sm.package == k.package))
        .filter(|k| {
            !summaries.iter().any(|sm| {
                (k.package == "*" || k.package == sm.package)
                    && sm.scenarios.iter().any(|sc| sc.scenario == k.scenario)
            })
        })
        .map(|k| {
            format!(
                "note: {} line {}: no scenario `{}` of package `{}` was swept; this known finding matched nothing (a scenario renamed or gone?)",
                known.path.display(),
                k.line,
                k.scenario,
                k.package
            )
        })
        .collect()
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
