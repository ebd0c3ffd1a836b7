//! The `calametra` command-line tool: `replay`, `diff`, `determinism`, `show`, `review`, `export`,
//! `compare`, `qemu`.
//!
//! Every command reads real files and reports a bad one with a clear message naming the file
//! and exits non-zero; nothing here panics on input.

mod determinism;

use crate::export;
use calametra_core::choices::story;
use calametra_core::regress::Regression;
use calametra_core::trace::{read_jsonl, Record};
use calametra_core::tracefile::load_replayable;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

const USAGE: &str = "\
calametra: deterministic testing of device drivers

usage:
  calametra replay FILE [--at STEP]          rerun a regression file or a trace; byte-exact or a failure;
                                             a trace's records are compared with the replay's
                                             (`86/86 records, sha256:... identical`); --at STEP
                                             stops at that step and prints the world there
  calametra diff A.jsonl B.jsonl [--context N] [--nondeterm-window N] [--format calametra|tsc]
                                             where two traces part ways: the last matching and the
                                             first divergent record field by field, time deltas, the
                                             non-deterministic records between, counts per kind;
                                             exit 0 identical, 1 divergent, 2 unusable input
  calametra determinism (FILE | --package P (--test T | --bin T) --scenario PATH --seed SEED | -- PROGRAM ARGS..)
                    [--runs N] [--parallel P] [--out DIR] [--context N] [--nondeterm-window N]
                                             run one run N times (a saved case or trace, a seed, any
                                             program writing $CALAMETRA_TRACE_OUT); keep the reference
                                             and each divergent run (command, status, output, trace,
                                             summary, diff), delete the matching ones; exit 0 all
                                             identical, 1 some diverge, 2 unusable
  calametra determinism --check DIR          check a determinism directory's summary against its runs
  calametra show FILE [--at STEP]            the minimal story of a failure (regression or trace);
                                             --at STEP: the world at that step, as replay --at
  calametra review [--package P] [--prune STATE,..]
                                             the workspace's saved cases: fails, fixed, stale, foreign,
                                             unreferenced; --prune fixed,stale deletes those
  calametra sweep-report SUMMARY.json.. [--out MERGED.json]
                                             merge sweep partitions' summaries into one report
  calametra export FILE (--chrome OUT.json | --html OUT.html)
                                             a Perfetto/Chrome trace or a self-contained HTML timeline
  calametra compare --capture CAPTURE --spec SPEC [--device BUS:ADDR] [--no-hotplug] [--frames DIR]
                                             replay a real capture against a model: its control
                                             transfers (and for a Trigger 6 its bulk and interrupt
                                             transfers too, each flipped frame as a PNG in DIR)
  calametra qemu --spec SPEC [--probe NAME] [--script FILE]
                                             serve a model to a Linux guest under QEMU
";

/// Options without a value (kept among the positional arguments for the command to look at).
const FLAGS: &[&str] = &["no-hotplug"];

/// A CLI failure: the message, and the exit code (2 for usage, 1 for a failed check).
pub struct CliError(pub String, pub u8);

fn usage(msg: &str) -> CliError {
    CliError(format!("{msg}\n\n{USAGE}"), 2)
}

fn fail(msg: impl Into<String>) -> CliError {
    CliError(msg.into(), 1)
}

/// Runs the tool with `args` (without the program name), printing to stdout.
pub fn run(args: &[String]) -> Result<(), CliError> {
    let Some((cmd, rest)) = args.split_first() else {
        return Err(usage("no command given"));
    };
    match cmd.as_str() {
        "replay" => replay(rest),
        "diff" => diff(rest),
        "determinism" => determinism::determinism(rest),
        "show" => show(rest),
        "export" => export_cmd(rest),
        "review" => crate::review::review(rest),
        "sweep-report" => sweep_report(rest),
        "compare" => crate::cli_models::compare(rest),
        "qemu" => crate::cli_models::qemu(rest),
        "-h" | "--help" | "help" => {
            print!("{USAGE}");
            Ok(())
        }
        other => Err(usage(&format!("unknown command `{other}`"))),
    }
}

/// The binary's main.
pub fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg, code)) => {
            eprintln!("calametra: {msg}");
            ExitCode::from(code)
        }
    }
}

/// `--name value` options and positional arguments.
pub(crate) struct Opts {
    pub(crate) positional: Vec<String>,
    pub(crate) named: BTreeMap<String, String>,
}

pub(crate) fn parse_opts(args: &[String], valued: &[&str]) -> Result<Opts, CliError> {
    let mut o = Opts {
        positional: Vec::new(),
        named: BTreeMap::new(),
    };
    let mut it = args.iter();
    while let Some(a) = it.next() {
        if let Some(name) = a.strip_prefix("--") {
            if FLAGS.contains(&name) {
                o.positional.push(a.clone());
                continue;
            }
            if !valued.contains(&name) {
                return Err(usage(&format!("unknown option `{a}`")));
            }
            let v = it
                .next()
                .ok_or_else(|| usage(&format!("`{a}` needs a value")))?;
            o.named.insert(name.to_string(), v.clone());
        } else {
            o.positional.push(a.clone());
        }
    }
    Ok(o)
}

fn one_file(o: &Opts, what: &str) -> Result<PathBuf, CliError> {
    match o.positional.as_slice() {
        [f] => Ok(PathBuf::from(f)),
        [] => Err(usage(&format!("{what} needs a FILE"))),
        _ => Err(usage(&format!("{what} takes one FILE"))),
    }
}

fn records(path: &Path) -> Result<Vec<Record>, CliError> {
    read_jsonl(path).map_err(|e| fail(e.to_string()))
}

/// A replay trial run by `calametra replay` (and `show --at`): what cargo printed and whether
/// the one trial passed.
struct TrialRun {
    passed: bool,
    ran: bool,
}

/// Runs `<scenario>::replay` of the test binary `file` names, with `CALAMETRA_REPLAY_FILE` and
/// `env`, printing the command and the trial's standard output.
fn run_replay_trial(
    file: &Path,
    cargo: &str,
    env: &[(&str, &std::ffi::OsStr)],
) -> Result<TrialRun, CliError> {
    let (scenario, package, target) = replay_target(file)?;
    let abs = std::fs::canonicalize(file).map_err(|e| fail(format!("{}: {e}", file.display())))?;
    let trial = format!("{scenario}::replay");
    // A guest scenario's trials are ignored unless asked for; an in-process one's are not,
    // and --include-ignored changes nothing for them.
    for (field, v) in [("package", &package), ("target", &target)] {
        if v.is_empty()
            || v.starts_with('-')
            || !v
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
        {
            return Err(fail(format!(
                "{}: field `{field}`: `{v}` is not a Cargo {field} name (letters, digits, `-`, `_`)",
                file.display()
            )));
        }
    }
    println!(
        "$ {cargo} test -p {package} --test {target} -- --exact {} --include-ignored",
        crate::report::shell_quote(&trial)
    );
    let mut c = std::process::Command::new(cargo);
    c.args([
        "test",
        "-p",
        &package,
        "--test",
        &target,
        "--",
        "--exact",
        &trial,
        "--include-ignored",
    ])
    .env("CALAMETRA_REPLAY_FILE", &abs)
    .stderr(std::process::Stdio::inherit());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo}`: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    print!("{stdout}");
    // Exit status 0 with no trial run (a scenario renamed since) is not a replay.
    let ran = stdout
        .lines()
        .any(|l| l.contains(" 1 passed;") || l.contains(" 1 failed;"));
    if out.status.success() && !ran {
        return Err(fail(format!(
            "replay of {}: no trial `{trial}` ran in {package}'s test `{target}` (was the scenario renamed or moved?)",
            file.display()
        )));
    }
    Ok(TrialRun {
        passed: out.status.success(),
        ran,
    })
}

/// `calametra replay FILE [--cargo CARGO]`: replays a saved case or a trace file in its test
/// binary (`<scenario>::replay`, `CALAMETRA_REPLAY_FILE`), which checks the trace hash; the
/// trial also writes the replayed run's trace where `CALAMETRA_TRACE_OUT` says, and the records
/// of a trace file are compared with it field by field, so a file whose records were edited
/// fails naming the first edited record even when its summary's hash was kept. Without that
/// trace (a harness that does not write it) a trace file's records must still hash to its
/// summary's hash.
fn replay(args: &[String]) -> Result<(), CliError> {
    use calametra_core::divergence::{analyse, from_records, read, Options};
    use calametra_core::trace::hash_lines;
    let o = parse_opts(args, &["cargo", "at"])?;
    let file = one_file(&o, "replay")?;
    let (events, hash, recorded) = load_replayable(&file).map_err(fail)?;
    let cargo = o
        .named
        .get("cargo")
        .cloned()
        .unwrap_or_else(|| std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
    if let Some(at) = o.named.get("at") {
        return state_at(&file, &cargo, at);
    }
    println!(
        "replaying {} ({} events: {}), expecting {hash}",
        file.display(),
        events.len(),
        story(&events)
    );
    let tmp = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let trace_out = tmp.path().join("replayed.jsonl");
    let r = run_replay_trial(
        &file,
        &cargo,
        &[("CALAMETRA_TRACE_OUT", trace_out.as_os_str())],
    )?;
    if !r.passed || !r.ran {
        return Err(fail(format!(
            "replay of {} failed (see the trial's output above)",
            file.display()
        )));
    }
    // The file's own records: what its summary's hash must cover.
    let own = recorded.as_ref().map(|r| hash_lines(r).to_string());
    let replayed = trace_out
        .exists()
        .then(|| read(&trace_out, None))
        .transpose()
        .map_err(|e| fail(format!("the replayed run's trace: {e}")))?;
    let deterministic = |t: &calametra_core::divergence::TraceRecs| {
        t.records.iter().filter(|r| r.deterministic).count()
    };
    match (&recorded, &replayed) {
        (Some(rec), Some(rep)) => {
            let mine = from_records(&file.display().to_string(), rec);
            let an = analyse(&mine, rep, Options::default());
            let (n, _) = an.deterministic_len();
            if an.identical() && own.as_deref() == Some(hash.as_str()) {
                println!("replay: {n}/{n} records, {hash} identical");
                return Ok(());
            }
            print!("{}", an.render());
            let which = match an.divergent_records() {
                Some((Some(x), _)) => format!(
                    "record #{} (line {} of {}) is not what the replay wrote: {}",
                    an.matching(),
                    x.line_no,
                    file.display(),
                    an.fields.join(", ")
                ),
                Some((None, _)) => format!(
                    "{} ends after {} records; the replay goes on",
                    file.display(),
                    an.matching()
                ),
                None => "the record counts differ".to_string(),
            };
            Err(fail(format!(
                "replay: {}/{n} records reproduced; {which} (the file's records hash to {}, its summary says {hash}: the records were edited)",
                an.matching(),
                own.unwrap_or_default()
            )))
        }
        (Some(rec), None) => {
            let n = rec.iter().filter(|r| r.deterministic).count();
            match own {
                Some(own) if own != hash => Err(fail(format!(
                    "replay: the run replays to {hash}, but the {n} records of {} hash to {own}: the records were edited after the summary was written (the test binary wrote no CALAMETRA_TRACE_OUT, so the first edited record cannot be named)",
                    file.display()
                ))),
                _ => {
                    println!("replay: {n}/{n} records, {hash} identical");
                    Ok(())
                }
            }
        }
        (None, Some(rep)) => {
            let n = deterministic(rep);
            println!("replay: {n}/{n} records, {hash} identical");
            Ok(())
        }
        (None, None) => {
            println!("replay is byte-exact: {hash}");
            Ok(())
        }
    }
}

/// `replay FILE --at STEP` and `show FILE --at STEP`: replays the file's run in its test binary
/// up to STEP (`CALAMETRA_STOP_AT`) and prints the world there, which the trial writes as JSON
/// where `CALAMETRA_STATE_OUT` says ([`calametra_core::state::StateDump`]).
fn state_at(file: &Path, cargo: &str, at: &str) -> Result<(), CliError> {
    use calametra_core::state::StateDump;
    let step: u64 = at.parse().map_err(|_| {
        usage(&format!(
            "--at `{at}`: expected a step (a scheduling point)"
        ))
    })?;
    let tmp = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let out = tmp.path().join("state.json");
    println!("replaying {} up to step {step}", file.display());
    let step_text = std::ffi::OsString::from(step.to_string());
    run_replay_trial(
        file,
        cargo,
        &[
            ("CALAMETRA_STOP_AT", step_text.as_os_str()),
            ("CALAMETRA_STATE_OUT", out.as_os_str()),
        ],
    )?;
    let text = std::fs::read_to_string(&out).map_err(|_| {
        fail(format!(
            "the test binary wrote no state to CALAMETRA_STATE_OUT: its harness must replay with RunConfig::stop_at = CALAMETRA_STOP_AT and write RunResult::state there (StateDump::to_json) (replaying {})",
            file.display()
        ))
    })?;
    let dump =
        StateDump::from_json(&text).map_err(|e| fail(format!("CALAMETRA_STATE_OUT: {e}")))?;
    print!("{}", dump.render());
    Ok(())
}

/// The scenario, package and test target a regression or trace file names.
fn replay_target(file: &Path) -> Result<(String, String, String), CliError> {
    let text = std::fs::read_to_string(file)
        .map_err(|e| fail(format!("{}: cannot read: {e}", file.display())))?;
    if let Ok(reg) = Regression::parse(file, &text) {
        return Ok((reg.scenario, reg.package, reg.target));
    }
    let recs = records(file)?;
    let s = recs
        .iter()
        .rev()
        .find(|r| r.kind == "summary")
        .ok_or_else(|| {
            fail(format!(
                "{}: no `summary` record; not a trace written by Calametra",
                file.display()
            ))
        })?;
    let get = |k: &str| {
        s.data[k].as_str().map(str::to_string).ok_or_else(|| {
            fail(format!(
                "{}:{}: field `data.{k}`: expected a string",
                file.display(),
                s.line_no
            ))
        })
    };
    Ok((get("scenario")?, get("package")?, get("target")?))
}

/// `calametra sweep-report A.json B.json [--out M.json]`: merges the summaries that the
/// partitions of one sweep wrote (`CALAMETRA_SWEEP_PARTITION=k/n`) and prints the report.
fn sweep_report(args: &[String]) -> Result<(), CliError> {
    use calametra_core::sweep::{merge, Summary};
    let o = parse_opts(args, &["out"])?;
    if o.positional.is_empty() {
        return Err(usage("sweep-report needs one or more SUMMARY.json files"));
    }
    let mut parts = Vec::new();
    for f in &o.positional {
        let p = Path::new(f);
        let text = std::fs::read_to_string(p)
            .map_err(|e| fail(format!("{}: cannot read: {e}", p.display())))?;
        parts.push(Summary::parse(p, &text).map_err(|e| fail(e.to_string()))?);
    }
    let merged = merge(parts).map_err(fail)?;
    print!("{}", merged.report());
    if let Some(out) = o.named.get("out") {
        calametra_core::regress::write_atomic(Path::new(out), merged.to_json().as_bytes())
            .map_err(|e| fail(e.to_string()))?;
        println!("merged summary: {out}");
    }
    Ok(())
}

fn kind_counts(r: &[Record]) -> BTreeMap<String, usize> {
    let mut m = BTreeMap::new();
    for x in r.iter().filter(|x| x.deterministic) {
        *m.entry(x.kind.clone()).or_insert(0) += 1;
    }
    m
}

/// `calametra diff A B [--context N] [--nondeterm-window N] [--format calametra|tsc]`: the
/// record-by-record, field-by-field comparison of two traces (see
/// [`calametra_core::divergence`]). Exit 0 identical, 1 divergent, 2 unusable input.
fn diff(args: &[String]) -> Result<(), CliError> {
    use calametra_core::divergence::{analyse, read, Envelope, Options};
    let o = parse_opts(args, &["context", "nondeterm-window", "format"])?;
    let [a, b] = o.positional.as_slice() else {
        return Err(usage("diff needs two trace files"));
    };
    let number = |name: &str, default: usize| -> Result<usize, CliError> {
        match o.named.get(name) {
            Some(c) => c
                .parse()
                .map_err(|_| usage(&format!("--{name} `{c}`: expected a number of records"))),
            None => Ok(default),
        }
    };
    let opts = Options {
        context: number("context", 10)?,
        nondeterm_window: number("nondeterm-window", 0)?,
    };
    let format = match o.named.get("format") {
        Some(f) => Some(Envelope::parse(f).map_err(|e| usage(&e))?),
        None => None,
    };
    let unusable = |e: calametra_core::trace::TraceFileError| CliError(e.to_string(), 2);
    let ta = read(Path::new(a), format).map_err(unusable)?;
    let tb = read(Path::new(b), format).map_err(unusable)?;
    if ta.envelope != tb.envelope {
        return Err(CliError(
            format!(
                "{a} is a {} trace and {b} a {} trace: there is nothing to compare (force one envelope with --format calametra|tsc)",
                ta.envelope.name(),
                tb.envelope.name()
            ),
            2,
        ));
    }
    let an = analyse(&ta, &tb, opts);
    print!("{}", an.render());
    if an.identical() {
        Ok(())
    } else {
        Err(CliError("the traces diverge".into(), 1))
    }
}

fn show(args: &[String]) -> Result<(), CliError> {
    let o = parse_opts(args, &["at", "cargo"])?;
    let file = one_file(&o, "show")?;
    if let Some(at) = o.named.get("at") {
        let cargo = o
            .named
            .get("cargo")
            .cloned()
            .unwrap_or_else(|| std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()));
        load_replayable(&file).map_err(fail)?;
        return state_at(&file, &cargo, at);
    }
    let text = std::fs::read_to_string(&file)
        .map_err(|e| fail(format!("{}: cannot read: {e}", file.display())))?;
    let whole: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    if whole.as_ref().is_some_and(|v| v.get("format").is_some()) {
        let r = Regression::parse(&file, &text).map_err(|e| fail(e.to_string()))?;
        println!("{}", r.failure);
        println!("scenario:  {}", r.scenario);
        println!("signature: {}", r.signature);
        println!("found by:  {} (base seed {})", r.found_by, r.base_seed);
        println!("story:     {}", r.story);
        if !r.run_aloud.is_empty() {
            println!("the run:   {}", r.run_aloud);
        }
        for (i, e) in r.events.iter().enumerate() {
            println!("  {:>2}. {e}", i + 1);
        }
        println!("trace hash: {}", r.trace_hash);
        println!(
            "replay:    {}",
            crate::report::replay_command(
                &r.package,
                &r.target,
                &format!("{}::regression::{}", r.scenario, r.id),
                false
            )
        );
        return Ok(());
    }
    let recs = records(&file)?;
    let (events, hash, _) = load_replayable(&file).map_err(fail)?;
    if let Some(s) = recs.iter().rev().find(|r| r.kind == "summary") {
        if let Some(f) = s.data.get("failure").and_then(|v| v.as_str()) {
            println!("{f}");
        }
        if let Some(sc) = s.data.get("scenario").and_then(|v| v.as_str()) {
            println!("scenario: {sc}");
        }
    }
    println!("story:    {}", story(&events));
    println!("trace hash: {hash}");
    println!("records:");
    for (k, n) in kind_counts(&recs) {
        println!("  {k:<12} {n}");
    }
    println!("what happened:");
    for r in recs.iter().filter(|r| {
        matches!(
            r.kind.as_str(),
            "transfer" | "fault" | "external" | "invariant" | "mark" | "model_gap" | "end"
        )
    }) {
        println!(
            "  #{:<5} {:>12} ns  {:<10} {}",
            r.seq,
            r.t_ns,
            r.actor,
            export::label(r)
        );
    }
    Ok(())
}

fn export_cmd(args: &[String]) -> Result<(), CliError> {
    let o = parse_opts(args, &["chrome", "html"])?;
    let file = one_file(&o, "export")?;
    if o.named.is_empty() {
        return Err(usage("export needs --chrome OUT.json or --html OUT.html"));
    }
    let recs = records(&file)?;
    let write = |out: &str, text: String| {
        calametra_core::regress::write_atomic(Path::new(out), text.as_bytes())
            .map_err(|e| fail(e.to_string()))
    };
    if let Some(out) = o.named.get("chrome") {
        write(out, export::chrome(&recs))?;
        println!("wrote {out} (open it in Perfetto or chrome://tracing)");
    }
    if let Some(out) = o.named.get("html") {
        let title = file
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("trace")
            .to_string();
        write(out, export::html(&recs, &title))?;
        println!("wrote {out}");
    }
    Ok(())
}
