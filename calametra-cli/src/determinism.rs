//! `calametra determinism`: one run of a scenario made N times, each in its own process, and
//! every run's trace compared with the first's.
//!
//! What runs:
//!
//! - `FILE` (a saved case or a trace file): the trial `<scenario>::replay` of the test binary
//!   the file names, with `CALAMETRA_REPLAY_FILE=FILE` (what `calametra replay` runs);
//! - `--package P (--test T | --bin T) --scenario PATH --seed SEED`: the trial
//!   `PATH::seed::<SEED in hex>` of that harness binary;
//! - `-- PROGRAM ARGS..`: any program that writes its trace where `CALAMETRA_TRACE_OUT` says
//!   (a hypervisor's exit stream in the `tsc` envelope works as well as a Calametra trace).
//!
//! A harness binary is built once (`cargo test --no-run` / `cargo build`) and run directly,
//! `--exact <trial> --include-ignored` (so a guest scenario's trial runs too), from its package's
//! directory, with `CALAMETRA_TRACE_OUT=<run dir>/trace.jsonl` (the trial writes its run's full
//! trace there) and `CALAMETRA_REGRESSIONS=off` (the runs save no cases).
//!
//! Every run gets a directory `run-NNN` holding `command` (the exact shell command), `status`,
//! `stdout`, `stderr`, `trace.jsonl` and `summary`. Run 1 is the reference and is kept; a run
//! whose deterministic records all agree with the reference's (field by field, as `calametra
//! diff` compares) and whose exit status is the same is deleted; a divergent run is kept with
//! `divergence`, the diff of the reference and it. The directory's `config` says what ran and
//! how; its `summary` lists the runs kept and deleted and the counts, and is checked against
//! the `run-*` directories present (`calametra determinism --check DIR` checks again later).

mod check;

pub use check::check;

use crate::output::{cargo_or_default, clean, fail, usage, CliError};
use crate::replaying::replay_target;
use calametra::env_names::{REGRESSIONS, REPLAY_FILE, TRACE_OUT};
use calametra::report::shell_quote;
use calametra_core::divergence::{analyse, read, Options};
use calametra_core::regress::write_atomic;
use clap::Args;
use serde_json::{json, Value};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::Duration;

/// The format tags of the two files.
pub const CONFIG_FORMAT: &str = "calametra.determinism.config";
/// See [`CONFIG_FORMAT`].
pub const SUMMARY_FORMAT: &str = "calametra.determinism.summary";

/// What one run executes.
struct Plan {
    /// What the runs are of, for people (`leaky::hash_order seed 0x7`, a file, a program).
    what: Value,
    /// The program and its arguments.
    program: PathBuf,
    args: Vec<String>,
    /// Where it runs.
    cwd: PathBuf,
    /// Variables set for every run (besides `CALAMETRA_TRACE_OUT`).
    env: Vec<(String, String)>,
    /// Whether it is a harness trial (its libtest output says whether the one trial ran).
    trial: Option<String>,
    /// A name for the default output directory.
    label: String,
}

/// What a finished run left.
struct RunOut {
    index: usize,
    dir: PathBuf,
    status: String,
    code: Option<i32>,
    /// For a harness trial: `passed`, `failed` or `did not run`.
    trial: Option<&'static str>,
}

/// `calametra determinism ...`.
pub fn determinism(a: &DeterminismArgs) -> Result<(), CliError> {
    if let Some(dir) = &a.check {
        let s = check(dir).map_err(|e| CliError(e, 2))?;
        println!("{}", clean(&s));
        return Ok(());
    }
    let runs = a.runs;
    if runs < 2 {
        return Err(usage(
            "--runs: at least 2 runs (a reference and one to compare)",
        ));
    }
    let parallel = a.parallel.clamp(1, runs);
    let opts = Options {
        context: a.context,
        nondeterm_window: a.nondeterm_window,
    };
    let cargo = cargo_or_default(&a.cargo);
    let plan = match (a.program.as_slice(), &a.file) {
        ([_, ..], None) => program_plan(&a.program)?,
        ([_, ..], Some(_)) => {
            return Err(usage("determinism: give a FILE or `-- PROGRAM`, not both"))
        }
        ([], Some(file)) => file_plan(file, &cargo)?,
        ([], None) => seed_plan(a, &cargo)?,
    };
    let out = match &a.out {
        Some(d) => d.clone(),
        None => default_out(&plan.label),
    };
    if out.exists()
        && std::fs::read_dir(&out)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(CliError(
            format!(
                "{}: exists and is not empty; give --out a new directory",
                out.display()
            ),
            2,
        ));
    }
    std::fs::create_dir_all(&out)
        .map_err(|e| CliError(format!("{}: cannot create: {e}", out.display()), 2))?;
    let out = std::fs::canonicalize(&out).unwrap_or(out);
    write_config(&out, &plan, runs, parallel)?;
    println!(
        "determinism: {} runs of {}, {parallel} at a time, into {}",
        runs,
        plan.what,
        out.display()
    );
    let finished = run_all(&plan, &out, runs, parallel, a.timeout)?;
    analyse_runs(&plan, &out, finished, opts)
}

/// `target/calametra/determinism/<label>-<n>`, the first `n` free.
fn default_out(label: &str) -> PathBuf {
    let base = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("target"))
        .join("calametra")
        .join("determinism");
    let label: String = label
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    (1..)
        .map(|n| base.join(format!("{label}-{n}")))
        .find(|p| !p.exists())
        .unwrap_or(base)
}

fn program_plan(p: &[String]) -> Result<Plan, CliError> {
    let Some((prog, args)) = p.split_first() else {
        return Err(usage("determinism: `--` needs a PROGRAM"));
    };
    let label = Path::new(prog)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "program".into());
    Ok(Plan {
        what: json!({ "program": prog, "args": args }),
        program: PathBuf::from(prog),
        args: args.to_vec(),
        cwd: std::env::current_dir().unwrap_or_else(|_| PathBuf::from(".")),
        env: Vec::new(),
        trial: None,
        label,
    })
}

fn file_plan(file: &Path, cargo: &str) -> Result<Plan, CliError> {
    let (scenario, package, target) = replay_target(file)?;
    let abs = std::fs::canonicalize(file).map_err(|e| fail(format!("{}: {e}", file.display())))?;
    let trial = format!("{scenario}::replay");
    let (exe, dir) = build(cargo, &package, &target, None)?;
    Ok(Plan {
        what: json!({
            "file": abs.display().to_string(),
            "scenario": scenario,
            "package": package,
            "target": target,
            "trial": trial,
        }),
        program: exe,
        args: vec!["--exact".into(), trial.clone(), "--include-ignored".into()],
        cwd: dir,
        env: vec![
            (REPLAY_FILE.into(), abs.display().to_string()),
            (REGRESSIONS.into(), "off".into()),
        ],
        trial: Some(trial),
        label: scenario.replace("::", "."),
    })
}

fn seed_plan(a: &DeterminismArgs, cargo: &str) -> Result<Plan, CliError> {
    let need = |k: &str, v: &Option<String>| {
        v.clone().ok_or_else(|| {
            usage(&format!(
                "determinism needs a FILE, `-- PROGRAM`, or --package P (--test T | --bin T) --scenario PATH --seed SEED (missing --{k})"
            ))
        })
    };
    let package = need("package", &a.package)?;
    let (target, kind) = match (&a.test, &a.bin) {
        (Some(t), None) => (t.clone(), "test"),
        (None, Some(b)) => (b.clone(), "bin"),
        _ => return Err(usage("determinism: give one of --test T or --bin T")),
    };
    let scenario = need("scenario", &a.scenario)?;
    let seed_text = need("seed", &a.seed)?;
    let seed = match seed_text.strip_prefix("0x") {
        Some(h) => u64::from_str_radix(h, 16).ok(),
        None => seed_text.parse().ok(),
    }
    .ok_or_else(|| {
        usage(&format!(
            "--seed `{seed_text}`: expected a seed like 0x4f21a9"
        ))
    })?;
    let trial = format!("{scenario}::seed::{seed:#x}");
    let (exe, dir) = build(cargo, &package, &target, Some(kind))?;
    Ok(Plan {
        what: json!({
            "scenario": scenario,
            "seed": format!("{seed:#x}"),
            "package": package,
            "target": target,
            "trial": trial,
        }),
        program: exe,
        args: vec!["--exact".into(), trial.clone(), "--include-ignored".into()],
        cwd: dir,
        env: vec![(REGRESSIONS.into(), "off".into())],
        trial: Some(trial),
        label: format!("{}-seed-{seed:#x}", scenario.replace("::", ".")),
    })
}

/// Builds `package`'s target `target` (a test, or a bin; looked up with `cargo metadata` when
/// not said) and returns its executable and the package's directory (where `cargo test` runs
/// it).
fn build(
    cargo: &str,
    package: &str,
    target: &str,
    kind: Option<&str>,
) -> Result<(PathBuf, PathBuf), CliError> {
    for (field, v) in [("package", package), ("target", target)] {
        if !crate::user_binary::is_cargo_name(v) {
            return Err(fail(format!(
                "{field} `{v}` is not a Cargo {field} name (letters, digits, `-`, `_`)"
            )));
        }
    }
    let meta = Command::new(cargo)
        .args(["metadata", "--no-deps", "--format-version", "1"])
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| CliError(format!("cannot run `{cargo} metadata`: {e}"), 2))?;
    if !meta.status.success() {
        return Err(CliError(format!("`{cargo} metadata` failed"), 2));
    }
    let meta: Value = serde_json::from_slice(&meta.stdout)
        .map_err(|e| CliError(format!("`{cargo} metadata`: {e}"), 2))?;
    let pkg = meta["packages"]
        .as_array()
        .into_iter()
        .flatten()
        .find(|p| p["name"] == package)
        .ok_or_else(|| CliError(format!("no package `{package}` in this workspace"), 2))?;
    let dir = pkg["manifest_path"]
        .as_str()
        .and_then(|m| Path::new(m).parent())
        .map(Path::to_path_buf)
        .ok_or_else(|| CliError(format!("package `{package}`: no manifest path"), 2))?;
    let kinds: Vec<String> = pkg["targets"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|t| t["name"] == target)
        .flat_map(|t| t["kind"].as_array().cloned().unwrap_or_default())
        .filter_map(|k| k.as_str().map(str::to_string))
        .collect();
    let kind = match kind {
        Some(k) if kinds.iter().any(|x| x == k) => k.to_string(),
        Some(k) => {
            return Err(CliError(
                format!("package `{package}` has no {k} target `{target}`"),
                2,
            ))
        }
        None if kinds.iter().any(|x| x == "test") => "test".into(),
        None if kinds.iter().any(|x| x == "bin") => "bin".into(),
        None => {
            return Err(CliError(
                format!("package `{package}` has no test or bin target `{target}`"),
                2,
            ))
        }
    };
    let mut c = Command::new(cargo);
    if kind == "test" {
        c.args(["test", "--no-run", "-p", package, "--test", target]);
    } else {
        c.args(["build", "-p", package, "--bin", target]);
    }
    println!(
        "$ {cargo} {} --message-format=json",
        c.get_args()
            .map(|a| shell_quote(&a.to_string_lossy()))
            .collect::<Vec<_>>()
            .join(" ")
    );
    let built = c
        .arg("--message-format=json")
        .stderr(Stdio::inherit())
        .output()
        .map_err(|e| CliError(format!("cannot run `{cargo}`: {e}"), 2))?;
    if !built.status.success() {
        return Err(CliError(
            format!("building {package}'s `{target}` failed"),
            2,
        ));
    }
    let exe = String::from_utf8_lossy(&built.stdout)
        .lines()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .filter(|v| v["target"]["name"] == target)
        .find_map(|v| v["executable"].as_str().map(PathBuf::from))
        .ok_or_else(|| CliError(format!("cargo built no executable for `{target}`"), 2))?;
    Ok((exe, dir))
}

fn write_config(out: &Path, plan: &Plan, runs: usize, parallel: usize) -> Result<(), CliError> {
    let mut env: Vec<Value> = plan
        .env
        .iter()
        .map(|(k, v)| json!({ "name": k, "value": v }))
        .collect();
    env.push(json!({ "name": TRACE_OUT, "value": "<run dir>/trace.jsonl" }));
    let config = json!({
        "format": CONFIG_FORMAT,
        "version": 1,
        "what": plan.what,
        "program": plan.program.display().to_string(),
        "args": plan.args,
        "cwd": plan.cwd.display().to_string(),
        "env": env,
        "runs": runs,
        "parallel": parallel,
        "reference": "run-001",
    });
    write_json(&out.join("config"), &config)
}

fn write_json(path: &Path, v: &Value) -> Result<(), CliError> {
    let mut text = serde_json::to_string_pretty(v).unwrap_or_default();
    text.push('\n');
    write_atomic(path, text.as_bytes()).map_err(|e| CliError(e.to_string(), 2))
}

fn run_name(i: usize) -> String {
    format!("run-{i:03}")
}

/// The exact shell command of one run.
fn command_line(plan: &Plan, trace: &Path) -> String {
    let mut s = format!("cd {} && ", shell_quote(&plan.cwd.display().to_string()));
    for (k, v) in &plan.env {
        s.push_str(&format!("{k}={} ", shell_quote(v)));
    }
    s.push_str(&format!(
        "{TRACE_OUT}={} {}",
        shell_quote(&trace.display().to_string()),
        shell_quote(&plan.program.display().to_string())
    ));
    for a in &plan.args {
        s.push(' ');
        s.push_str(&shell_quote(a));
    }
    s
}

/// Which of libtest's closing lines a run's stdout holds, read line by line from its file
/// (a run's output is never held whole).
fn trial_outcome(stdout: &Path) -> &'static str {
    use calametra_core::input::{Line, Lines, MAX_LINE_BYTES};
    let Ok(f) = std::fs::File::open(stdout) else {
        return "did not run";
    };
    let mut lines = Lines::new(std::io::BufReader::new(f), MAX_LINE_BYTES, u64::MAX);
    let mut outcome = "did not run";
    while let Ok(Some(line)) = lines.next() {
        let (Line::Text(t, _) | Line::Unterminated(t, _)) = line;
        if t.contains(" 1 passed;") {
            outcome = "passed";
        } else if t.contains(" 1 failed;") {
            outcome = "failed";
        }
    }
    outcome
}

/// A run started and not yet finished.
struct Running {
    index: usize,
    dir: PathBuf,
    child: std::process::Child,
    #[allow(
        clippy::disallowed_types,
        reason = "host time: a run's --timeout deadline"
    )]
    started: std::time::Instant,
}

/// Starts run `index` (its output going straight to its files, never held), or says why it
/// could not start.
#[allow(
    clippy::disallowed_methods,
    reason = "host-side process runner: the deadline is host time, outside every simulation"
)]
fn start(plan: &Plan, out: &Path, index: usize) -> Result<Running, (PathBuf, std::io::Error)> {
    let dir = out.join(run_name(index));
    let trace = dir.join("trace.jsonl");
    let _ = std::fs::create_dir_all(&dir);
    let _ = std::fs::write(
        dir.join("command"),
        format!("{}\n", command_line(plan, &trace)),
    );
    let mut c = Command::new(&plan.program);
    c.args(&plan.args)
        .current_dir(&plan.cwd)
        .env(TRACE_OUT, &trace)
        .stdin(Stdio::null());
    // Its own process group, so a timeout kills what it started too (a trial's QEMU).
    #[cfg(unix)]
    std::os::unix::process::CommandExt::process_group(&mut c, 0);
    for (k, v) in &plan.env {
        c.env(k, v);
    }
    let spawned = std::fs::File::create(dir.join("stdout"))
        .and_then(|o| Ok((o, std::fs::File::create(dir.join("stderr"))?)))
        .and_then(|(o, e)| c.stdout(o).stderr(e).spawn());
    match spawned {
        Ok(child) => Ok(Running {
            index,
            dir,
            child,
            started: std::time::Instant::now(),
        }),
        Err(e) => Err((dir, e)),
    }
}

/// Writes a finished run's `status` and says what it left.
fn finished(plan: &Plan, index: usize, dir: PathBuf, status: String, code: Option<i32>) -> RunOut {
    let trial = plan
        .trial
        .as_ref()
        .map(|_| trial_outcome(&dir.join("stdout")));
    let status_text = match trial {
        Some(t) => format!("{status}\ntrial {t}\n"),
        None => format!("{status}\n"),
    };
    let _ = std::fs::write(dir.join("status"), status_text);
    RunOut {
        index,
        dir,
        status,
        code,
        trial,
    }
}

/// Kills a run's whole process group (it was started as its leader), then the run itself.
fn kill_group(child: &mut std::process::Child) {
    #[cfg(unix)]
    if let Ok(pid) = libc::pid_t::try_from(child.id()) {
        // SAFETY: kill(2) with a negative pid signals the group the child leads; no memory is
        // shared with it.
        unsafe {
            libc::kill(-pid, libc::SIGKILL);
        }
    }
    let _ = child.kill();
}

/// Runs every run, `parallel` at a time, started in index order, from this one thread: each
/// run is a child process polled for its end (no thread per run, so `--parallel 3000` costs
/// no memory of its own). A run the system will not start while others run (a process or
/// memory limit) waits for one of them to end; one that cannot start alone is a run that "did
/// not start". Past `timeout` a run is killed with its process group.
#[allow(
    clippy::disallowed_methods,
    reason = "host-side process runner: polling children on host time, outside every simulation"
)]
fn run_all(
    plan: &Plan,
    out: &Path,
    runs: usize,
    parallel: usize,
    timeout: Option<Duration>,
) -> Result<Vec<RunOut>, CliError> {
    let mut done: Vec<RunOut> = Vec::with_capacity(runs);
    let mut running: Vec<Running> = Vec::new();
    let mut next = 1usize;
    let mut held_back = false;
    loop {
        while running.len() < parallel && next <= runs {
            match start(plan, out, next) {
                Ok(r) => running.push(r),
                Err(_) if !running.is_empty() => {
                    // Refused while others run: try again when one has ended.
                    if !held_back {
                        eprintln!(
                            "determinism: the system refused run {next} while {} ran; the runs go {} at a time",
                            running.len(),
                            running.len()
                        );
                        held_back = true;
                    }
                    break;
                }
                Err((dir, e)) => {
                    let _ = std::fs::write(dir.join("stderr"), e.to_string());
                    done.push(finished(
                        plan,
                        next,
                        dir,
                        format!("did not start: {e}"),
                        None,
                    ));
                }
            }
            next += 1;
        }
        if running.is_empty() && next > runs {
            break;
        }
        let mut any = false;
        let mut k = 0;
        while k < running.len() {
            let r = &mut running[k];
            let over = timeout.is_some_and(|t| r.started.elapsed() >= t);
            let ended = match r.child.try_wait() {
                Ok(Some(st)) => Some(match st.code() {
                    Some(c) => (format!("exit {c}"), Some(c)),
                    None => (format!("killed ({st})"), None),
                }),
                Ok(None) if over => {
                    kill_group(&mut r.child);
                    let _ = r.child.wait();
                    Some((
                        format!("timed out after {:?} (killed)", timeout.unwrap_or_default()),
                        None,
                    ))
                }
                Ok(None) => None,
                Err(e) => {
                    kill_group(&mut r.child);
                    let _ = r.child.wait();
                    Some((format!("could not be waited for: {e}"), None))
                }
            };
            match ended {
                Some((status, code)) => {
                    let r = running.swap_remove(k);
                    done.push(finished(plan, r.index, r.dir, status, code));
                    any = true;
                }
                None => k += 1,
            }
        }
        if !any {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
    done.sort_by_key(|r| r.index);
    Ok(done)
}

fn analyse_runs(
    plan: &Plan,
    out: &Path,
    finished: Vec<RunOut>,
    opts: Options,
) -> Result<(), CliError> {
    // Each run's trace is read, compared with the reference's and dropped before the next is
    // read: two traces in memory at most, each about its file's size.
    let load = |r: &RunOut| read(&r.dir.join("trace.jsonl"), None).map_err(|e| e.to_string());
    let Some(reference) = finished.first() else {
        return Err(CliError("no run finished".into(), 2));
    };
    let first = load(reference);
    if reference.trial == Some("did not run") {
        return Err(CliError(
            format!(
                "the reference run ran no trial `{}` (was the scenario renamed or moved? is the seed one the binary lists?); see {}",
                plan.trial.as_deref().unwrap_or("?"),
                reference.dir.join("stdout").display()
            ),
            2,
        ));
    }
    let ref_trace = match &first {
        Ok(t) => t,
        Err(e) => {
            let why = if reference.status.starts_with("timed out") {
                format!("it {} before its trace was whole: {e}", reference.status)
            } else if plan.trial.is_some() && !reference.dir.join("trace.jsonl").exists() {
                format!(
                    "the test binary wrote no trace to {TRACE_OUT} (its harness must write the trial's run there: every record and the closing `summary` record): {e}"
                )
            } else {
                e.clone()
            };
            let summary = json!({
                "format": SUMMARY_FORMAT,
                "version": 1,
                "runs": finished.len(),
                "reference": run_name(1),
                "unusable": why,
                "kept": finished.iter().map(|r| json!({"run": run_name(r.index), "role": "not analysed", "status": r.status})).collect::<Vec<_>>(),
                "deleted": [],
            });
            write_json(&out.join("summary"), &summary)?;
            return Err(CliError(
                format!(
                    "the reference run ({}) is unusable: {why}",
                    reference.dir.display()
                ),
                2,
            ));
        }
    };
    let mut kept = Vec::new();
    let mut deleted = Vec::new();
    let mut hashes: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let (mut identical, mut divergent, mut unusable) = (0usize, 0usize, 0usize);
    let mut report = String::new();
    for r in &finished {
        let own;
        let t = if r.index == reference.index {
            &first
        } else {
            own = load(r);
            &own
        };
        let name = run_name(r.index);
        let mut summary = json!({
            "run": name,
            "command": command_line(plan, &r.dir.join("trace.jsonl")),
            "status": r.status,
            "exit_code": r.code,
            "trial": r.trial,
        });
        let role = match t {
            Err(e) => {
                unusable += 1;
                summary["trace"] = json!({ "error": e });
                report.push_str(&format!("{name}: unusable: {e}\n"));
                "unusable"
            }
            Ok(t) => {
                let fp = t.fingerprint();
                let det = t.records.iter().filter(|x| x.deterministic).count();
                summary["trace"] = json!({
                    "records": t.records.len(),
                    "deterministic": det,
                    "fingerprint": fp,
                    "envelope": t.envelope.name(),
                });
                hashes.entry(fp.clone()).or_default().push(name.clone());
                if r.index == 1 {
                    "reference"
                } else {
                    let an = analyse(ref_trace, t, opts);
                    let same_status = r.status == reference.status && r.trial == reference.trial;
                    if an.identical() && same_status {
                        identical += 1;
                        "identical"
                    } else {
                        divergent += 1;
                        let mut text = format!(
                            "$ calametra diff {} {}\n",
                            ref_trace.path.display(),
                            t.path.display()
                        );
                        if !same_status {
                            text.push_str(&format!(
                                "exit status differs: reference {} ({}), this run {} ({})\n",
                                reference.status,
                                reference.trial.unwrap_or("-"),
                                r.status,
                                r.trial.unwrap_or("-")
                            ));
                        }
                        text.push_str(&an.render());
                        let _ = std::fs::write(r.dir.join("divergence"), &text);
                        summary["verdict"] = json!(an.verdict());
                        summary["first_divergent"] = json!(an.first_divergent);
                        summary["fields"] = json!(an.fields);
                        report.push_str(&format!(
                            "{name}: {} ({})\n",
                            an.verdict(),
                            r.dir.join("divergence").display()
                        ));
                        "divergent"
                    }
                }
            }
        };
        summary["role"] = json!(role);
        if role == "identical" {
            let _ = std::fs::remove_dir_all(&r.dir);
            deleted.push(name);
        } else {
            write_json(&r.dir.join("summary"), &summary)?;
            kept.push(json!({
                "run": name,
                "role": role,
                "status": r.status,
                "verdict": summary.get("verdict").cloned().unwrap_or(Value::Null),
                "fingerprint": summary["trace"].get("fingerprint").cloned().unwrap_or(Value::Null),
            }));
        }
    }
    let summary = json!({
        "format": SUMMARY_FORMAT,
        "version": 1,
        "what": plan.what,
        "runs": finished.len(),
        "reference": run_name(1),
        "identical": identical,
        "divergent": divergent,
        "unusable": unusable,
        "kept": kept,
        "deleted": deleted,
        "fingerprints": hashes.iter().map(|(k, v)| json!({"fingerprint": k, "runs": v.len()})).collect::<Vec<_>>(),
    });
    write_json(&out.join("summary"), &summary)?;
    print!("{}", clean(&report));
    let checked = check(out).map_err(|e| CliError(e, 2))?;
    println!("{checked}");
    if divergent + unusable == 0 {
        Ok(())
    } else {
        Err(CliError(
            format!(
                "{divergent} of {} runs diverge from the reference{}",
                finished.len() - 1,
                if unusable > 0 {
                    format!(", {unusable} unusable")
                } else {
                    String::new()
                }
            ),
            if divergent > 0 { 1 } else { 2 },
        ))
    }
}

/// The arguments of `calametra determinism`.
#[derive(Args, Debug)]
pub(crate) struct DeterminismArgs {
    /// A saved case or a trace file to replay N times.
    file: Option<PathBuf>,
    /// Check a determinism directory's summary against its runs, and do nothing else.
    #[arg(long, value_name = "DIR")]
    check: Option<PathBuf>,
    /// The package of the test binary (with --test or --bin, --scenario and --seed).
    #[arg(long, value_name = "P")]
    package: Option<String>,
    /// The test target holding the scenario.
    #[arg(long, value_name = "T")]
    test: Option<String>,
    /// The binary target holding the scenario (a harness binary under src/bin/).
    #[arg(long, value_name = "T")]
    bin: Option<String>,
    /// The scenario's path (`module::scenario`).
    #[arg(long, value_name = "PATH")]
    scenario: Option<String>,
    /// The seed (`0x4f21a9` or decimal).
    #[arg(long, value_name = "SEED")]
    seed: Option<String>,
    /// Runs in all (at least 2: a reference and one to compare).
    #[arg(long, value_name = "N", default_value_t = 10)]
    runs: usize,
    /// Runs at a time.
    #[arg(long, value_name = "P", default_value_t = 1)]
    parallel: usize,
    /// The longest one run may take (`90s`, `10m`): a run still going then is killed, with its
    /// process group, and counts as unusable ("timed out"). Default: no limit.
    #[arg(long, value_name = "DURATION", value_parser = parse_timeout)]
    timeout: Option<std::time::Duration>,
    /// The directory to keep runs in (new or empty; default target/calametra/determinism/...).
    #[arg(long, value_name = "DIR")]
    out: Option<PathBuf>,
    /// Deterministic records of context in each divergence.
    #[arg(long, value_name = "N", default_value_t = 5)]
    context: usize,
    /// Non-deterministic records shown past the divergence (see `diff`).
    #[arg(long, value_name = "N", default_value_t = 0)]
    nondeterm_window: usize,
    /// The cargo that builds the test binary (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
    /// A program (and its arguments) that writes its trace where $CALAMETRA_TRACE_OUT says.
    #[arg(last = true, value_name = "PROGRAM ARGS")]
    program: Vec<String>,
}

/// `--timeout`: the one duration grammar of `CALAMETRA_SWEEP`, and more than zero.
fn parse_timeout(s: &str) -> Result<std::time::Duration, String> {
    match calametra_core::sweep::parse_duration(s)? {
        d if d.is_zero() => Err(format!("`{s}`: expected a duration above zero")),
        d => Ok(d),
    }
}
