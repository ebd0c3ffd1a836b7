//! The harness's environment: the `CALAMETRA_*` variables a test binary reads, read once when
//! it starts into one typed [`Env`] (with its sweep's [`SweepEnv`]), every value checked and a
//! bad one an error naming the variable. The variables' names are [`crate::env_names`]'s; what
//! each does is listed in the [`crate::harness`] documentation. Nothing else in the harness
//! reads a `CALAMETRA_*` variable, and nothing here runs a scenario or writes a file.

use crate::env_names::{
    CASE_STATES, REGRESSIONS, REPLAY, REPLAY_FILE, SCANOUT, SCHEDULES, SEED, STATE_OUT, STOP_AT,
    SWEEP, SWEEP_CORPUS, SWEEP_GUIDE, SWEEP_KNOWN, SWEEP_PARTITION, SWEEP_SUMMARY, SWEEP_THREADS,
    TRACE_OUT, VERBOSE,
};
use crate::sweep;
use calametra_core::sweep::{Budget, Known, Partition};
use calametra_core::tracefile::{load_replay_file, Replayable};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// Where regression files go.
#[derive(Clone, Debug)]
pub(super) enum RegressionsMode {
    Off,
    Dir(Option<PathBuf>),
}

/// Settings read from the environment.
#[derive(Clone, Debug)]
pub(super) struct Env {
    pub(super) schedules: Option<u64>,
    pub(super) base_seed: u64,
    pub(super) regressions: RegressionsMode,
    pub(super) strict: bool,
    /// `CALAMETRA_REPLAY_FILE`, read: a saved case or a trace, replayed by the `replay` trial
    /// of the scenario it names.
    pub(super) replay: Option<Arc<Replayable>>,
    /// `CALAMETRA_CASE_STATES`: where to write the states of the saved cases replayed.
    pub(super) states_file: Option<PathBuf>,
    /// `CALAMETRA_SWEEP` and its companions.
    pub(super) sweep: Option<SweepEnv>,
    /// `CALAMETRA_TRACE_OUT=<file>`: the trial writes the full trace of the run it made
    /// (`calametra determinism` reads it).
    pub(super) trace_out: Option<PathBuf>,
    /// `CALAMETRA_STOP_AT=<step>` with `CALAMETRA_STATE_OUT=<file>`: the `replay` trial stops
    /// at that scheduling point and writes the world's state there (`calametra replay --at`).
    pub(super) stop_at: Option<(u64, PathBuf)>,
    /// `CALAMETRA_SCANOUT=<dir>`: pictures the devices show, written as PNGs (a failure's at
    /// the end of its minimal run, a replay's every one).
    pub(super) scanout: Option<PathBuf>,
    /// `CALAMETRA_VERBOSE` set (to anything, empty too): a `finds::` trial prints the screen of
    /// the failure it found.
    pub(super) verbose: bool,
}

/// A sweep asked for: `CALAMETRA_SWEEP=<budget>`, `CALAMETRA_SWEEP_PARTITION=k/n`,
/// `CALAMETRA_SWEEP_THREADS=N`, `CALAMETRA_SWEEP_SUMMARY=<file>`.
#[derive(Clone, Debug)]
pub(super) struct SweepEnv {
    pub(super) budget: Budget,
    pub(super) budget_text: String,
    pub(super) partition: Partition,
    pub(super) threads: usize,
    pub(super) summary: Option<PathBuf>,
    /// A guided sweep (a corpus of runs that reached something new, mutated alongside fresh
    /// seeds), the default: `Some(None)`, or `Some(Some(dir))` with `CALAMETRA_SWEEP_CORPUS`
    /// (its corpus kept in the directory); `None` with `CALAMETRA_SWEEP_GUIDE=0` (a uniform
    /// sweep of seeds alone, as before guidance was the default).
    pub(super) guide: Option<Option<PathBuf>>,
    /// `CALAMETRA_SWEEP_KNOWN=<file>`, read: signatures met without failing the sweep, each
    /// with whose bug it is.
    pub(super) known: Option<Arc<Known>>,
}

fn parse_u64(s: &str) -> Option<u64> {
    let s = s.trim();
    match s.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => s.parse().ok(),
    }
}

/// The most seeded schedules a scenario gets from `CALAMETRA_SCHEDULES` (the attribute's
/// `schedules` has the same bound): each is a trial built before any runs.
pub const MAX_SCHEDULES: u64 = 1_000_000;

/// `CALAMETRA_<name>`: unset or empty is `None`; a value that is not UTF-8 is an error naming
/// the variable (never silently taken as unset).
fn env_text(k: &str) -> Result<Option<String>, String> {
    match std::env::var_os(k) {
        None => Ok(None),
        Some(v) if v.is_empty() => Ok(None),
        Some(v) => v.into_string().map(Some).map_err(|v| {
            format!(
                "{k}=`{}`: not valid UTF-8 (expected {})",
                v.to_string_lossy(),
                expected(k)
            )
        }),
    }
}

/// `CALAMETRA_<name>` naming a file or directory: any bytes a path may have.
fn env_path(k: &str) -> Option<PathBuf> {
    std::env::var_os(k)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// What a variable's value is expected to be, for error messages.
fn expected(k: &str) -> &'static str {
    match k {
        SCHEDULES => "a number of seeded schedules from 1 to 1000000",
        SEED => "a seed like 0x4f21a9",
        REPLAY => "`strict`",
        STOP_AT => "a scheduling step (a number)",
        SWEEP => "a duration (`90s`, `10m`) or a number of runs per scenario",
        SWEEP_PARTITION => "a partition `k/n`",
        SWEEP_THREADS => "a number of threads from 1 to 1024",
        _ => "a value",
    }
}

impl Env {
    pub(super) fn read() -> Result<Env, String> {
        let var = env_text;
        let schedules = match var(SCHEDULES)? {
            Some(v) => {
                let n = parse_u64(&v).ok_or_else(|| {
                    format!("{SCHEDULES}=`{v}`: expected {}", expected(SCHEDULES))
                })?;
                if n == 0 {
                    return Err(format!(
                        "{SCHEDULES}=`{v}`: expected {} (to run no seed trials, skip them: `-- --skip ::seed::`)",
                        expected(SCHEDULES)
                    ));
                }
                if n > MAX_SCHEDULES {
                    return Err(format!(
                        "{SCHEDULES}=`{v}`: at most {MAX_SCHEDULES} seeded schedules a scenario (each is a trial made before any runs); for more runs, sweep: {SWEEP}=<runs per scenario or a duration like 10m>"
                    ));
                }
                Some(n)
            }
            None => None,
        };
        let base_seed = match var(SEED)? {
            Some(v) => parse_u64(&v)
                .ok_or_else(|| format!("{SEED}=`{v}`: expected a seed like 0x4f21a9 (hex with 0x, or decimal, below 2^64)"))?,
            None => 0,
        };
        let regressions = match env_path(REGRESSIONS) {
            Some(d) if d.as_os_str() == "off" => RegressionsMode::Off,
            Some(d) => RegressionsMode::Dir(Some(d)),
            None => RegressionsMode::Dir(None),
        };
        let strict = match var(REPLAY)?.as_deref() {
            None => false,
            Some("strict") => true,
            Some(v) => return Err(format!("{REPLAY}=`{v}`: expected `strict` (or unset: a fixed saved case passes with a note)")),
        };
        let replay = match env_path(REPLAY_FILE) {
            None => None,
            Some(p) => Some(Arc::new(
                load_replay_file(&absolute(&p)).map_err(|e| format!("{REPLAY_FILE}: {e}"))?,
            )),
        };
        Ok(Env {
            schedules,
            base_seed,
            regressions,
            strict,
            replay,
            states_file: env_path(CASE_STATES).map(|p| absolute(&p)),
            trace_out: env_path(TRACE_OUT).map(|p| absolute(&p)),
            verbose: std::env::var_os(VERBOSE).is_some(),
            scanout: match env_path(SCANOUT).map(|p| absolute(&p)) {
                Some(d) if d.exists() && !d.is_dir() => {
                    return Err(format!(
                        "{SCANOUT}=`{}`: not a directory (expected a directory for the pictures, made when missing)",
                        d.display()
                    ))
                }
                // A symlink to nothing: `exists` follows it and says no, and making the
                // directory then failed with "File exists".
                Some(d) if !d.exists() && std::fs::symlink_metadata(&d).is_ok() => {
                    return Err(format!(
                        "{SCANOUT}=`{}`: a symlink to nothing (expected a directory for the pictures, made when missing; remove the dangling link or point it at a directory)",
                        d.display()
                    ))
                }
                d => d,
            },
            stop_at: match (var(STOP_AT)?, env_path(STATE_OUT)) {
                (None, None) => None,
                (Some(a), Some(o)) => Some((
                    parse_u64(&a).ok_or_else(|| {
                        format!("{STOP_AT}=`{a}`: expected a scheduling step (a number)")
                    })?,
                    absolute(&o),
                )),
                _ => {
                    return Err(format!(
                        "{STOP_AT} and {STATE_OUT} go together: the step to stop at and the file the state is written to"
                    ))
                }
            },
            sweep: match var(SWEEP)? {
                None => None,
                Some(b) => Some(SweepEnv {
                    budget: Budget::parse(&b).map_err(|e| format!("{SWEEP}={e}"))?,
                    budget_text: b.trim().to_string(),
                    partition: match var(SWEEP_PARTITION)? {
                        Some(p) => Partition::parse(&p)
                            .map_err(|e| format!("{SWEEP_PARTITION}={e}"))?,
                        None => Partition::default(),
                    },
                    threads: match var(SWEEP_THREADS)? {
                        Some(t) => t
                            .trim()
                            .parse::<usize>()
                            .ok()
                            .filter(|&n| (1..=1024).contains(&n))
                            .ok_or_else(|| {
                                format!("{SWEEP_THREADS}=`{t}`: expected a number of threads from 1 to 1024")
                            })?,
                        None => sweep::default_threads(),
                    },
                    summary: env_path(SWEEP_SUMMARY).map(|p| absolute(&p)),
                    known: match env_path(SWEEP_KNOWN) {
                        None => None,
                        Some(p) => Some(Arc::new(
                            Known::read(&absolute(&p))
                                .map_err(|e| format!("{SWEEP_KNOWN}: {e}"))?,
                        )),
                    },
                    guide: match (
                        env_path(SWEEP_CORPUS),
                        var(SWEEP_GUIDE)?.as_deref(),
                    ) {
                        (_, Some("0")) => None,
                        (Some(dir), None | Some("1")) => Some(Some(absolute(&dir))),
                        (None, None | Some("1")) => Some(None),
                        (_, Some(v)) => {
                            return Err(format!(
                                "{SWEEP_GUIDE}=`{v}`: expected 1 (guided, the default) or 0 (seeds alone)"
                            ))
                        }
                    },
                }),
            },
        })
    }
}

/// `p` made absolute against the current directory (a relative path in an environment
/// variable means the same whichever directory the test binary later runs in).
pub(super) fn absolute(p: &Path) -> PathBuf {
    std::path::absolute(p).unwrap_or_else(|_| p.to_path_buf())
}
