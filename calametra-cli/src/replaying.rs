//! Running a saved case's or a trace's run again in its test binary, shared by the commands
//! that do (`replay`, `show --at`, `export --frames`, `determinism FILE`): which scenario,
//! package and test target a file names, the `<scenario>::replay` trial run with
//! `CALAMETRA_REPLAY_FILE`, the world at a step, and a trial's name taken for its trace. No
//! command's arguments live here.

use crate::input::records;
use crate::output::{cargo_or_default, clean, fail, usage, CliError};
use crate::{pictures, trial};
use calametra::env_names::{REPLAY_FILE, SCANOUT, STATE_OUT, STOP_AT};
use calametra_core::regress::Regression;
use std::path::{Path, PathBuf};

/// A replay trial run by `calametra replay` (and `show --at`): what cargo printed and whether
/// the one trial passed.
pub(crate) struct TrialRun {
    pub(crate) passed: bool,
    pub(crate) ran: bool,
}

/// Runs `<scenario>::replay` of the test binary `file` names, with `CALAMETRA_REPLAY_FILE` and
/// `env`, printing the command and the trial's standard output.
///
/// With `to_stderr` (an output going to standard output) the command and the trial's output go
/// to standard error.
pub(crate) fn run_replay_trial(
    file: &Path,
    cargo: &str,
    env: &[(&str, &std::ffi::OsStr)],
    to_stderr: bool,
) -> Result<TrialRun, CliError> {
    let (scenario, package, target) = replay_target(file)?;
    let abs = std::fs::canonicalize(file).map_err(|e| fail(format!("{}: {e}", file.display())))?;
    let trial = format!("{scenario}::replay");
    // A guest scenario's trials are ignored unless asked for; an in-process one's are not,
    // and --include-ignored changes nothing for them.
    for (field, v) in [("package", &package), ("target", &target)] {
        if !crate::user_binary::is_cargo_name(v) {
            return Err(fail(format!(
                "{}: field `{field}`: `{v}` is not a Cargo {field} name (letters, digits, `-`, `_`)",
                file.display()
            )));
        }
    }
    let say = |text: &str| {
        if to_stderr {
            eprint!("{text}");
        } else {
            print!("{text}");
        }
    };
    say(&format!(
        "$ {cargo} test -p {package} --test {target} -- --exact {} --include-ignored\n",
        calametra::report::shell_quote(&trial)
    ));
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
    .env(REPLAY_FILE, &abs)
    .stderr(std::process::Stdio::inherit());
    for (k, v) in env {
        c.env(k, v);
    }
    let out = c
        .output()
        .map_err(|e| fail(format!("cannot run `{cargo}`: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    say(&clean(&stdout));
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

/// `replay FILE --at STEP` and `show FILE --at STEP`: replays the file's run in its test binary
/// up to STEP (`CALAMETRA_STOP_AT`) and prints the world there, which the trial writes as JSON
/// where `CALAMETRA_STATE_OUT` says ([`calametra_core::state::StateDump`]).
///
/// With `scanout`, the trial also writes the pictures it saw (`CALAMETRA_SCANOUT`) and those on
/// show at STEP are copied into that directory.
pub(crate) fn state_at(
    file: &Path,
    cargo: &str,
    at: &str,
    scanout: Option<&Path>,
) -> Result<(), CliError> {
    use calametra_core::state::StateDump;
    let step: u64 = at.parse().map_err(|_| {
        usage(&format!(
            "--at `{at}`: expected a step (a scheduling point)"
        ))
    })?;
    let tmp = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let out = tmp.path().join("state.json");
    println!(
        "{}",
        clean(&format!("replaying {} up to step {step}", file.display()))
    );
    let step_text = std::ffi::OsString::from(step.to_string());
    let pictures = tmp.path().join("pictures");
    let mut env = vec![
        (STOP_AT, step_text.as_os_str()),
        (STATE_OUT, out.as_os_str()),
    ];
    if scanout.is_some() {
        env.push((SCANOUT, pictures.as_os_str()));
    }
    run_replay_trial(file, cargo, &env, false)?;
    let text = std::fs::read_to_string(&out).map_err(|_| {
        fail(format!(
            "the test binary wrote no state to {STATE_OUT}: its harness must replay with RunConfig::stop_at = {STOP_AT} and write RunResult::state there (StateDump::to_json) (replaying {})",
            file.display()
        ))
    })?;
    let dump = StateDump::from_json(&text).map_err(|e| fail(format!("{STATE_OUT}: {e}")))?;
    print!("{}", clean(&dump.render()));
    if let Some(dir) = scanout {
        let when = match (&dump.reached, &dump.ended) {
            (true, _) => format!("at step {step}"),
            (false, Some(how)) => format!("at the end of the run, before step {step} ({how})"),
            (false, None) => format!("at the end of the run, before step {step}"),
        };
        pictures::copy_on_show(&pictures, dir, file, &when)?;
    }
    Ok(())
}

/// The scenario, package and test target a regression or trace file names.
pub(crate) fn replay_target(file: &Path) -> Result<(String, String, String), CliError> {
    let text = calametra_core::input::read_regular(
        file,
        calametra_core::input::MAX_TRACE_BYTES,
        "saved case or trace",
    )
    .map_err(|e| fail(format!("{}: {e}", file.display())))?;
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

/// A command's FILE: the file, or for a trial's name the trace of that trial's run (in `dir`).
pub(crate) fn file_or_trial(
    arg: &Path,
    cargo: &Option<String>,
    package: Option<&str>,
    dir: &Path,
) -> Result<PathBuf, CliError> {
    if !trial::is_trial_name(arg) {
        if package.is_some() {
            return Err(usage("-p: only with a trial's name, not a file"));
        }
        return Ok(arg.to_path_buf());
    }
    let name = arg.to_string_lossy();
    trial::trace_of(&name, &cargo_or_default(cargo), package, dir)
}
