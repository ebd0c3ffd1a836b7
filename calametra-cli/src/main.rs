//! The `calametra` command-line tool: `replay`, `diff`, `determinism`, `show`, `review`,
//! `sweep-report`, `export`, `compare`, `learn`, `qemu`, `guest-setup` and `completions`;
//! `calametra --help` and `calametra help <COMMAND>` say what each takes.
//!
//! Arguments are parsed by clap from the OS's strings: a file argument may be any path, and an
//! argument that must be text but is not UTF-8 is a usage error (exit 2), never a panic. Every
//! command reads real files and reports a bad one with a clear message naming the file and
//! exits non-zero; nothing here panics on input.

mod determinism;
mod export;
mod guest_setup;
mod learn;
mod models;
mod pictures;
mod qemu;
mod review;
mod sweep;
mod trial;

use calametra_core::choices::story;
use calametra_core::regress::Regression;
use calametra_core::trace::{read_jsonl, Record};
use calametra_core::tracefile::load_replayable;
use clap::{Args, CommandFactory, Parser, Subcommand};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

/// Deterministic testing of USB device drivers: replay, diff, show and export runs, review the
/// saved cases, merge sweeps, check determinism, compare a model with a real capture, serve a
/// model to a QEMU guest.
#[derive(Parser, Debug)]
#[command(
    name = "calametra",
    version,
    propagate_version = true,
    arg_required_else_help = true,
    after_help = "Exit status: 0 success, 1 a failed check (a divergence, a replay that fails, an unexplained difference), 2 unusable input or usage.\nSee `calametra help <COMMAND>` for a command's options."
)]
pub struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Rerun a regression file or a trace in its test binary: byte-exact or a failure
    ///
    /// A trace's records are compared with the replay's (`86/86 records, sha256:... identical`);
    /// with --at STEP the run stops at that step and the world there is printed.
    Replay(ReplayArgs),
    /// Where two traces part ways, field by field
    ///
    /// The last matching and the first divergent record as a table of fields, the time deltas,
    /// the non-deterministic records between and the counts per kind. Exit 0 identical, 1
    /// divergent, 2 unusable input.
    Diff(DiffArgs),
    /// Run one run N times and keep what diverges
    ///
    /// What runs: a saved case or trace (FILE), a seed of a scenario (--package P (--test T |
    /// --bin T) --scenario PATH --seed SEED), or any program that writes $CALAMETRA_TRACE_OUT
    /// (-- PROGRAM ARGS..). The reference run and each divergent run are kept (command,
    /// status, output, trace, summary, diff); matching runs are deleted. Exit 0 all identical,
    /// 1 some diverge, 2 unusable.
    Determinism(DeterminismArgs),
    /// The minimal story of a failure (a regression file or a trace)
    ///
    /// The file is read once, and only when it is a regular file within the readers' limits
    /// (a FIFO or `/dev/zero` is an error). Control characters in its strings (terminal escape
    /// sequences) are printed as `\u{1b}` escapes, here and in every command's output.
    Show(ShowArgs),
    /// The workspace's saved cases and their states
    ///
    /// States: fails, fails-differently, fixed, stale, foreign, other-build, unreferenced,
    /// unreadable, not-run. --prune fixed,stale deletes the files in those states.
    Review(ReviewArgs),
    /// Sweep the workspace's scenario binaries for a budget, then print one report
    ///
    /// `calametra sweep 10m` builds every test target, keeps those with scenarios and sweeps
    /// each in turn (`CALAMETRA_SWEEP` and friends set for it), sharing a time budget between
    /// them; -p and --test choose, --partition k/n takes this machine's share, --out keeps
    /// the summaries for `sweep-report`. Exit 0 nothing unexpected, 1 a failure found.
    Sweep(sweep::SweepArgs),
    /// Merge sweep partitions' summaries into one report
    ///
    /// Summaries of several test targets are merged target by target.
    SweepReport(SweepReportArgs),
    /// A Perfetto/Chrome trace, a self-contained HTML timeline or a usbmon pcapng of a trace
    ///
    /// Outputs: `-` is standard output (the `wrote` notes then go to standard error); a
    /// character device (`/dev/stdout`) or a FIFO is written through; an existing symlink is
    /// refused and left as it is; a regular file is replaced atomically. An output that is the
    /// input trace is refused (exit 2).
    Export(ExportArgs),
    /// Replay a real capture against a model
    ///
    /// Its control transfers (and for a Trigger 6 or a learned spec its bulk and interrupt
    /// transfers too; for a Trigger 6 each flipped frame as a PNG in --frames DIR); exit 1 on
    /// any unexplained difference, and exit 1 when nothing was compared (an empty or
    /// header-only capture, comments alone, a --device with no transfers). The capture must be
    /// a regular file; its first bytes are checked before the rest is read.
    Compare(CompareArgs),
    /// Learn a device from captures into a learned spec (calametra.spec.learned)
    ///
    /// Descriptors, control transfers by setup and OUT data, OUT transfers and the IN replies
    /// that followed them, unsolicited IN packets, per-key latency, and each capture's name and
    /// SHA-256. The same captures give the same bytes. Exit 1 for a capture with no device,
    /// several devices and no --device/--id (the devices are listed), or nothing to learn.
    Learn(learn::LearnArgs),
    /// Serve a model to a Linux guest under QEMU: lsusb, dfu-util, a script or your program
    ///
    /// One run of the lockstep QEMU (byte-exact, from the guest snapshot) with the model
    /// registered for the spec's format; with --package P --test T it runs inside that test
    /// binary, where a model of your own crate is registered. --bin FILE runs your program
    /// (static, or linked against what the guest image holds: glibc, libusb-1.0, libudev) once
    /// the device is configured, with --file SRC:DEST files and the arguments after `--`; its
    /// exit status is the verdict. Exit 1 when the run does not pass.
    Qemu(qemu::QemuArgs),
    /// Build the lockstep QEMU and the guest image once into your cache, for guest scenarios
    ///
    /// For a crate outside Calametra's repository: runs the scripts calametra-qemu carries
    /// (install-qemu.sh, then the guest's and the lockstep QEMU's builds, each pinned and kept
    /// under the key of what it was built from) in $CALAMETRA_CACHE, else
    /// $XDG_CACHE_HOME/calametra, else ~/.cache/calametra, where guest scenarios and `calametra
    /// qemu` look. Quick once built.
    GuestSetup(guest_setup::GuestSetupArgs),
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell)
    ///
    /// e.g. `calametra completions bash > ~/.local/share/bash-completion/completions/calametra`
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// Where cargo is: `--cargo`, else `$CARGO`, else `cargo`.
fn cargo_or_default(cargo: &Option<String>) -> String {
    cargo
        .clone()
        .unwrap_or_else(|| std::env::var("CARGO").unwrap_or_else(|_| "cargo".into()))
}

#[derive(Args, Debug)]
struct ReplayArgs {
    /// A regression file (`calametra-regressions/...json`), a trace (`.jsonl`), or a trial's
    /// name (`path::scenario::seed::0x2a`: the trial is run once for its trace).
    file: PathBuf,
    /// With a trial's name: the package whose test binaries list it.
    #[arg(short = 'p', long = "package", value_name = "PKG")]
    package: Option<String>,
    /// Stop at this step (a scheduling point) and print the world there.
    #[arg(long, value_name = "STEP")]
    at: Option<String>,
    /// Write the pictures the devices show (a display's scanout) at --at STEP, or at the end of
    /// the replay, as PNGs into DIR (created; a symlink there is refused).
    #[arg(long, value_name = "DIR")]
    scanout: Option<PathBuf>,
    /// The cargo to run the test binary with (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
}

#[derive(Args, Debug)]
struct DiffArgs {
    /// The first trace.
    a: PathBuf,
    /// The second trace.
    b: PathBuf,
    /// Deterministic records of context shown before the divergence.
    #[arg(long, value_name = "N", default_value_t = 10)]
    context: usize,
    /// Show the non-deterministic records N deterministic records past the divergence too.
    #[arg(long, value_name = "N", default_value_t = 0)]
    nondeterm_window: usize,
    /// Force the envelope: `calametra` (seq/t_ns/kind/actor) or `tsc` (a hypervisor's exits).
    #[arg(long, value_name = "calametra|tsc")]
    format: Option<String>,
}

#[derive(Args, Debug)]
struct DeterminismArgs {
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

#[derive(Args, Debug)]
struct ShowArgs {
    /// A regression file, a trace, or a trial's name (`path::scenario::seed::0x2a`: the
    /// trial is run once for its trace).
    file: PathBuf,
    /// With a trial's name: the package whose test binaries list it.
    #[arg(short = 'p', long = "package", value_name = "PKG")]
    package: Option<String>,
    /// Replay up to this step and print the world there (as `replay --at`).
    #[arg(long, value_name = "STEP")]
    at: Option<String>,
    /// With --at: write the pictures the devices show at STEP (a display's scanout) as PNGs
    /// into DIR (created; a symlink there is refused).
    #[arg(long, value_name = "DIR", requires = "at")]
    scanout: Option<PathBuf>,
    /// The cargo for --at (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
}

#[derive(Args, Debug)]
struct ReviewArgs {
    /// Only this package's saved cases (required with CALAMETRA_REGRESSIONS=<dir>).
    #[arg(long, value_name = "P")]
    package: Option<String>,
    /// Delete the files in these states (comma-separated: fixed,stale,...): only saved cases
    /// (regular `<12 hex>.json` files, never through a symlink), listed first.
    #[arg(long, value_name = "STATE,..")]
    prune: Option<String>,
    /// Delete what --prune lists without asking (needed when standard input is not a terminal).
    #[arg(long, requires = "prune")]
    yes: bool,
    /// The cargo that runs the test binaries (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
}

#[derive(Args, Debug)]
struct SweepReportArgs {
    /// The partitions' summaries (`CALAMETRA_SWEEP_SUMMARY` files).
    #[arg(required = true, value_name = "SUMMARY.json")]
    summaries: Vec<PathBuf>,
    /// Write the merged summary here (`-`: standard output, the report then goes to standard
    /// error). A character device or FIFO is written through; a symlink, or one of the
    /// summaries read, is refused.
    #[arg(long, value_name = "MERGED.json")]
    out: Option<PathBuf>,
}

#[derive(Args, Debug)]
#[command(group(clap::ArgGroup::new("output").required(true).multiple(true).args(["chrome", "html", "pcapng"])))]
struct ExportArgs {
    /// A trace (`.jsonl`).
    file: PathBuf,
    /// Write a Chrome trace event file (opens in Perfetto or chrome://tracing); `-` is standard
    /// output.
    #[arg(long, value_name = "OUT.json")]
    chrome: Option<PathBuf>,
    /// Write a self-contained HTML timeline (every string from the trace escaped); `-` is
    /// standard output.
    #[arg(long, value_name = "OUT.html")]
    html: Option<PathBuf>,
    /// Write the run's transfers as a usbmon pcapng capture (link type 220; opens in
    /// Wireshark, reads in `compare`): each a submission and a completion with the status the
    /// Linux host would see (stall -32, timeout -2, cancel -104, disconnect -108, fault -71;
    /// short: status 0 with the short length); `-` is standard output.
    #[arg(long, value_name = "OUT.pcapng")]
    pcapng: Option<PathBuf>,
    /// With --html: replay the trace's run in its test binary (as `replay`), take every picture
    /// a device showed (each frame a flip showed), and embed them in the page, each linked from
    /// the event that showed it.
    #[arg(long, requires = "html")]
    frames: bool,
    /// The cargo for --frames (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    cargo: Option<String>,
}

#[derive(Args, Debug)]
pub(crate) struct CompareArgs {
    /// The capture: pcap or pcapng (usbmon link type 189 or 220) or usbmon text, maybe gzipped.
    #[arg(long, value_name = "CAPTURE")]
    pub(crate) capture: PathBuf,
    /// The device spec whose model is compared.
    #[arg(long, value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    /// Compare only this device's control transfers (default: the busiest device).
    #[arg(long, value_name = "BUS:ADDR")]
    pub(crate) device: Option<String>,
    /// Do not script the capture's monitor hot-plug into the model (Trigger 6).
    #[arg(long)]
    pub(crate) no_hotplug: bool,
    /// Write each frame a flip showed as a PNG into DIR (Trigger 6); as every output, a
    /// symlink in DIR is refused (exit 1 after the comparison), never replaced.
    #[arg(long, value_name = "DIR")]
    pub(crate) frames: Option<PathBuf>,
    /// Compare inside this package's test binary (with --test), with the models registered
    /// there: a model of your own crate, which this tool does not link.
    #[arg(long, value_name = "P", requires = "test", conflicts_with = "frames")]
    pub(crate) package: Option<String>,
    /// The test target of --package: a `calametra::main!()` binary (harness = false) that
    /// links calametra-capture and the model.
    #[arg(long, value_name = "T", requires = "package")]
    pub(crate) test: Option<String>,
    /// The cargo for --package (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    pub(crate) cargo: Option<String>,
}

/// A CLI failure: the message, and the exit code (2 for usage, 1 for a failed check).
pub struct CliError(pub String, pub u8);

fn usage(msg: &str) -> CliError {
    CliError(
        format!("{msg}\n\nFor more information, try `calametra help <COMMAND>`."),
        2,
    )
}

fn fail(msg: impl Into<String>) -> CliError {
    CliError(msg.into(), 1)
}

/// Runs one parsed command, printing to stdout.
fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Replay(a) => replay(&a),
        Command::Diff(a) => diff(&a),
        Command::Determinism(a) => determinism::determinism(&a),
        Command::Show(a) => show(&a),
        Command::Review(a) => review::review(&a),
        Command::Sweep(a) => sweep::sweep(&a),
        Command::SweepReport(a) => sweep_report(&a),
        Command::Export(a) => export_cmd(&a),
        Command::Compare(a) => models::compare(&a),
        Command::Learn(a) => learn::learn(&a),
        Command::Qemu(a) => qemu::qemu(&a),
        Command::GuestSetup(a) => guest_setup::guest_setup(&a),
        Command::Completions { shell } => {
            let mut script = Vec::new();
            clap_complete::generate(shell, &mut Cli::command(), "calametra", &mut script);
            use std::io::Write;
            match std::io::stdout().write_all(&script) {
                // A reader that stopped early (`| head`) is not an error of ours.
                Err(e) if e.kind() != std::io::ErrorKind::BrokenPipe => {
                    Err(fail(format!("writing the completion script: {e}")))
                }
                _ => Ok(()),
            }
        }
    }
}

fn main() -> ExitCode {
    // Rust ignores SIGPIPE, so a closed pipe (`| head -1`) made every print a panic; as any
    // Unix filter, the tool now ends quietly there.
    #[cfg(unix)]
    // SAFETY: setting a signal's disposition to its default, before any thread starts.
    unsafe {
        libc::signal(libc::SIGPIPE, libc::SIG_DFL);
    }
    // `parse` reads `std::env::args_os()`: usage errors, `--help` and `--version` exit here
    // (2, 0 and 0).
    let cli = Cli::parse();
    match run(cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(CliError(msg, code)) => {
            eprintln!("calametra: {}", clean(&msg));
            ExitCode::from(code)
        }
    }
}

/// A string read from a file made safe for a terminal: every control character but newline
/// and tab (ESC, BEL, the C1 controls, DEL: what clears the screen, sets the title or writes
/// the clipboard) becomes a visible `\u{..}` escape. Every command prints what it read from a
/// file through this.
pub(crate) fn clean(s: &str) -> String {
    calametra::report::printable(s)
}

/// Whether an output path is a stream (`-`, a character device, a FIFO): what was written is
/// then on it, and notes about the writing go to standard error.
pub(crate) fn is_stream(path: &Path) -> bool {
    use std::os::unix::fs::FileTypeExt;
    path.as_os_str() == "-"
        || std::fs::symlink_metadata(path)
            .is_ok_and(|m| m.file_type().is_char_device() || m.file_type().is_fifo())
}

/// Says `wrote OUT` (and `extra`): on standard output, or on standard error when OUT is a
/// stream (so that `--html -` writes the page alone).
pub(crate) fn note_written(path: &Path, extra: &str) {
    if is_stream(path) {
        eprintln!("wrote {}{extra}", path.display());
    } else {
        println!("wrote {}{extra}", path.display());
    }
}

/// Refuses an output path that is one of the inputs (the same file, by any name): writing it
/// would destroy what was read. Exit 2.
pub(crate) fn not_an_input(out: &Path, inputs: &[&Path]) -> Result<(), CliError> {
    use std::os::unix::fs::MetadataExt;
    if out.as_os_str() == "-" {
        return Ok(());
    }
    let Ok(o) = std::fs::metadata(out) else {
        return Ok(());
    };
    for i in inputs {
        if let Ok(m) = std::fs::metadata(i) {
            if m.dev() == o.dev() && m.ino() == o.ino() {
                return Err(CliError(
                    format!(
                        "the output {} is the input {}: refusing to overwrite it",
                        out.display(),
                        i.display()
                    ),
                    2,
                ));
            }
        }
    }
    Ok(())
}

/// Writes an output file: `-` is standard output; a character device (`/dev/stdout`) or a FIFO
/// is opened and written through, never replaced; a symlink, a directory, a socket or a block
/// device is refused (exit 2) and left as it is; a regular file or a new path is written
/// atomically (a temporary file renamed over it). Every command's outputs go through here.
pub(crate) fn write_output(path: &Path, bytes: &[u8]) -> Result<(), CliError> {
    use std::io::Write;
    use std::os::unix::fs::FileTypeExt;
    let stream_err = |e: std::io::Error| fail(format!("{}: cannot write: {e}", path.display()));
    if path.as_os_str() == "-" {
        let mut out = std::io::stdout().lock();
        return out
            .write_all(bytes)
            .and_then(|_| out.flush())
            .map_err(stream_err);
    }
    match std::fs::symlink_metadata(path) {
        Ok(m) => {
            let ft = m.file_type();
            if ft.is_symlink() {
                return Err(CliError(
                    format!(
                        "{}: is a symbolic link: refusing to write through or replace it (name its target, or `-` for standard output)",
                        path.display()
                    ),
                    2,
                ));
            }
            if ft.is_char_device() || ft.is_fifo() {
                let mut f = std::fs::OpenOptions::new()
                    .write(true)
                    .open(path)
                    .map_err(stream_err)?;
                return f
                    .write_all(bytes)
                    .and_then(|_| f.flush())
                    .map_err(stream_err);
            }
            if !ft.is_file() {
                let what = if ft.is_dir() {
                    "a directory"
                } else if ft.is_socket() {
                    "a socket"
                } else if ft.is_block_device() {
                    "a block device"
                } else {
                    "not a regular file"
                };
                return Err(CliError(
                    format!("{}: is {what}: refusing to write over it", path.display()),
                    2,
                ));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(format!("{}: cannot write: {e}", path.display()))),
    }
    calametra_core::regress::write_atomic(path, bytes).map_err(|e| fail(e.to_string()))
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
///
/// With `to_stderr` (an output going to standard output) the command and the trial's output go
/// to standard error.
fn run_replay_trial(
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
    .env("CALAMETRA_REPLAY_FILE", &abs)
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

/// `calametra replay FILE [--cargo CARGO]`: replays a saved case or a trace file in its test
/// binary (`<scenario>::replay`, `CALAMETRA_REPLAY_FILE`), which checks the trace hash; the
/// trial also writes the replayed run's trace where `CALAMETRA_TRACE_OUT` says, and the records
/// of a trace file are compared with it field by field, so a file whose records were edited
/// fails naming the first edited record even when its summary's hash was kept. Without that
/// trace (a harness that does not write it) a trace file's records must still hash to its
/// summary's hash.
fn replay(a: &ReplayArgs) -> Result<(), CliError> {
    use calametra_core::divergence::{analyse, from_records, read, Options};
    use calametra_core::trace::hash_records;
    let tmp_trial = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let file = file_or_trial(&a.file, &a.cargo, a.package.as_deref(), tmp_trial.path())?;
    let loaded = calametra_core::tracefile::load_replay_file(&file).map_err(fail)?;
    let hash_version = loaded.hash_version;
    let (events, hash, recorded) = (loaded.events, loaded.hash, loaded.records);
    let cargo = cargo_or_default(&a.cargo);
    if let Some(at) = &a.at {
        return state_at(&file, &cargo, at, a.scanout.as_deref());
    }
    let what = match calametra_core::choices::count_events(&events) {
        0 => story(&events),
        n => format!(
            "{}: {}",
            calametra::report::count(n, "event"),
            story(&events)
        ),
    };
    println!(
        "{}",
        clean(&format!(
            "replaying {} ({what}), expecting {hash}",
            file.display()
        ))
    );
    let tmp = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let trace_out = tmp.path().join("replayed.jsonl");
    let pictures = tmp.path().join("pictures");
    let mut env = vec![("CALAMETRA_TRACE_OUT", trace_out.as_os_str())];
    if a.scanout.is_some() {
        env.push(("CALAMETRA_SCANOUT", pictures.as_os_str()));
    }
    let r = run_replay_trial(&file, &cargo, &env, false)?;
    if !r.passed || !r.ran {
        return Err(fail(format!(
            "replay of {} failed (see the trial's output above)",
            file.display()
        )));
    }
    if let Some(out) = &a.scanout {
        pictures::copy_on_show(&pictures, out, &file, "at the end of the replay")?;
    }
    // The file's own records: what its summary's hash must cover.
    // (under the hash version the file records)
    let own = recorded
        .as_ref()
        .and_then(|r| hash_records(r, hash_version))
        .map(|h| h.to_string());
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
            print!("{}", clean(&an.render()));
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
///
/// With `scanout`, the trial also writes the pictures it saw (`CALAMETRA_SCANOUT`) and those on
/// show at STEP are copied into that directory.
fn state_at(file: &Path, cargo: &str, at: &str, scanout: Option<&Path>) -> Result<(), CliError> {
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
        ("CALAMETRA_STOP_AT", step_text.as_os_str()),
        ("CALAMETRA_STATE_OUT", out.as_os_str()),
    ];
    if scanout.is_some() {
        env.push(("CALAMETRA_SCANOUT", pictures.as_os_str()));
    }
    run_replay_trial(file, cargo, &env, false)?;
    let text = std::fs::read_to_string(&out).map_err(|_| {
        fail(format!(
            "the test binary wrote no state to CALAMETRA_STATE_OUT: its harness must replay with RunConfig::stop_at = CALAMETRA_STOP_AT and write RunResult::state there (StateDump::to_json) (replaying {})",
            file.display()
        ))
    })?;
    let dump =
        StateDump::from_json(&text).map_err(|e| fail(format!("CALAMETRA_STATE_OUT: {e}")))?;
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
fn replay_target(file: &Path) -> Result<(String, String, String), CliError> {
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

/// `calametra sweep-report A.json B.json [--out M.json]`: merges the summaries that the
/// partitions of one sweep wrote (`CALAMETRA_SWEEP_PARTITION=k/n`) and prints the report.
fn sweep_report(a: &SweepReportArgs) -> Result<(), CliError> {
    use calametra_core::sweep::{merge, Summary};
    if a.summaries.is_empty() {
        return Err(usage("sweep-report needs one or more SUMMARY.json files"));
    }
    // Summaries by test target: partitions of one target merge; targets are reported side by
    // side (what `calametra sweep --out DIR` leaves, one file per target).
    let mut groups: BTreeMap<(String, String), (Vec<Summary>, Option<u64>)> = BTreeMap::new();
    for p in &a.summaries {
        // A regular file within the document limit: a FIFO or /dev/zero is refused, not read.
        let text = calametra_core::input::read_regular(
            p,
            calametra_core::input::MAX_DOCUMENT_BYTES,
            "sweep summary",
        )
        .map_err(|e| fail(format!("{}: {e}", p.display())))?;
        let s = Summary::parse(p, &text).map_err(|e| fail(e.to_string()))?;
        let g = groups
            .entry((s.package.clone(), s.target.clone()))
            .or_default();
        calametra_core::sweep::check_mergeable(&s, &mut g.1)
            .map_err(|e| fail(format!("{}: {e}", p.display())))?;
        g.0.push(s);
    }
    let mut merged = Vec::new();
    for (_, (parts, _)) in groups {
        merged.push(merge(parts).map_err(fail)?);
    }
    let report = match merged.as_slice() {
        [one] => clean(&one.report()),
        many => clean(&sweep::report(many, &[])),
    };
    if a.out.as_deref().is_some_and(is_stream) {
        eprint!("{report}");
    } else {
        print!("{report}");
    }
    if let Some(out) = &a.out {
        let [one] = merged.as_slice() else {
            return Err(usage(&format!(
                "--out: the summaries are of {} test targets; a merged summary is of one (merge each target's apart)",
                merged.len()
            )));
        };
        let inputs: Vec<&Path> = a.summaries.iter().map(|p| p.as_path()).collect();
        not_an_input(out, &inputs)?;
        write_output(out, one.to_json().as_bytes())?;
        note_written(out, " (the merged summary)");
    }
    Ok(())
}

/// `calametra diff A B [--context N] [--nondeterm-window N] [--format calametra|tsc]`: the
/// record-by-record, field-by-field comparison of two traces (see
/// [`calametra_core::divergence`]). Exit 0 identical, 1 divergent, 2 unusable input.
fn diff(args: &DiffArgs) -> Result<(), CliError> {
    use calametra_core::divergence::{analyse, read, Envelope, Options};
    let (a, b) = (&args.a, &args.b);
    let opts = Options {
        context: args.context,
        nondeterm_window: args.nondeterm_window,
    };
    let format = match &args.format {
        Some(f) => Some(Envelope::parse(f).map_err(|e| usage(&e))?),
        None => None,
    };
    let unusable = |e: calametra_core::trace::TraceFileError| CliError(e.to_string(), 2);
    let ta = read(a, format).map_err(unusable)?;
    let tb = read(b, format).map_err(unusable)?;
    if ta.envelope != tb.envelope {
        return Err(CliError(
            format!(
                "{} is a {} trace and {} a {} trace: there is nothing to compare (force one envelope with --format calametra|tsc)",
                a.display(),
                ta.envelope.name(),
                b.display(),
                tb.envelope.name()
            ),
            2,
        ));
    }
    let an = analyse(&ta, &tb, opts);
    print!("{}", clean(&an.render()));
    if an.identical() {
        Ok(())
    } else {
        Err(CliError("the traces diverge".into(), 1))
    }
}

/// A command's FILE: the file, or for a trial's name the trace of that trial's run (in `dir`).
fn file_or_trial(
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

fn show(a: &ShowArgs) -> Result<(), CliError> {
    use std::fmt::Write;
    let tmp_trial = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let file = file_or_trial(&a.file, &a.cargo, a.package.as_deref(), tmp_trial.path())?;
    if let Some(at) = &a.at {
        let cargo = cargo_or_default(&a.cargo);
        load_replayable(&file).map_err(fail)?;
        return state_at(&file, &cargo, at, a.scanout.as_deref());
    }
    // Through the core's bounded readers (a FIFO or `/dev/zero` is refused before it is read),
    // and record by record: a trace is read twice more below, never held whole.
    let loaded = calametra_core::tracefile::load_replay_header(&file).map_err(fail)?;
    let (events, hash) = (&loaded.events, &loaded.hash);
    let mut o = String::new();
    let Some(r) = &loaded.case else {
        return show_trace(&file, events, hash);
    };
    {
        let _ = writeln!(o, "{}", r.failure);
        let _ = writeln!(o, "scenario:  {}", r.scenario);
        let _ = writeln!(o, "signature: {}", r.signature);
        let _ = writeln!(o, "found by:  {} (base seed {})", r.found_by, r.base_seed);
        let _ = writeln!(o, "story:     {}", r.story);
        if !r.run_aloud.is_empty() {
            let _ = writeln!(o, "the run:   {}", r.run_aloud);
        }
        // Numbered as the failure screen numbers them: an anchor goes unnumbered.
        let mut i = 0;
        for e in &r.events {
            if matches!(e, calametra_core::choices::Event::Anchor { .. }) {
                let _ = writeln!(o, "      {e}");
            } else {
                i += 1;
                let _ = writeln!(o, "  {i:>2}. {e}");
            }
        }
        let _ = writeln!(o, "trace hash: {}", r.trace_hash);
        // The harness names a saved case's trial by its file name, not by the `id` inside it
        // (a renamed or copied file keeps its old id); a file not named as a case is replayed
        // through CALAMETRA_REPLAY_FILE.
        let stem = file
            .file_name()
            .and_then(|n| n.to_str())
            .filter(|n| calametra_core::regress::is_case_file_name(n))
            .and_then(|n| n.strip_suffix(".json"));
        let command = match stem {
            Some(id) => calametra::report::replay_command(
                &r.package,
                &r.target,
                &format!("{}::regression::{id}", r.scenario),
                false,
            ),
            None => format!(
                "CALAMETRA_REPLAY_FILE={} {}",
                calametra::report::shell_quote(&file.display().to_string()),
                calametra::report::replay_command(
                    &r.package,
                    &r.target,
                    &format!("{}::replay", r.scenario),
                    false
                )
            ),
        };
        let _ = writeln!(o, "replay:    {command}");
        print!("{}", clean(&o));
    }
    Ok(())
}

/// `show` of a trace file: its summary, its records per kind, then what happened, printed as
/// the file is read (one record in memory at a time, whatever the trace's length).
fn show_trace(
    file: &Path,
    events: &[calametra_core::choices::Event],
    hash: &str,
) -> Result<(), CliError> {
    use calametra_core::trace::for_each_record;
    use std::io::Write;
    let mut counts: BTreeMap<String, usize> = BTreeMap::new();
    let mut head = String::new();
    for_each_record(file, |r| {
        if r.deterministic {
            *counts.entry(r.kind.clone()).or_insert(0) += 1;
        }
        if r.kind == "summary" {
            head.clear();
            if let Some(f) = r.data.get("failure").and_then(|v| v.as_str()) {
                head.push_str(&format!("{f}\n"));
            }
            if let Some(sc) = r.data.get("scenario").and_then(|v| v.as_str()) {
                head.push_str(&format!("scenario: {sc}\n"));
            }
        }
        Ok(())
    })
    .map_err(|e| fail(e.to_string()))?;
    let mut o = head;
    o.push_str(&format!("story:    {}\n", story(events)));
    o.push_str(&format!("trace hash: {hash}\nrecords:\n"));
    for (k, n) in counts {
        o.push_str(&format!("  {k:<12} {n}\n"));
    }
    o.push_str("what happened:\n");
    let stdout = std::io::stdout();
    let mut out = std::io::BufWriter::new(stdout.lock());
    // Every string here came from the file: no escape sequence reaches the terminal.
    let _ = out.write_all(clean(&o).as_bytes());
    for_each_record(file, |r| {
        if matches!(
            r.kind.as_str(),
            "transfer" | "fault" | "external" | "invariant" | "mark" | "model_gap" | "end"
        ) {
            let line = format!(
                "  #{:<5} {:>12} ns  {:<10} {}\n",
                r.seq,
                r.t_ns,
                r.actor,
                export::label(&r)
            );
            let _ = out.write_all(clean(&line).as_bytes());
        }
        Ok(())
    })
    .map_err(|e| fail(e.to_string()))?;
    let _ = out.flush();
    Ok(())
}

/// `export --frames`: replays `file` in its test binary with `CALAMETRA_SCANOUT` and reads back
/// every picture its run showed. The replay must pass (byte-exact), or the pictures would not
/// be this trace's.
fn export_frames(
    file: &Path,
    cargo: &str,
    to_stderr: bool,
) -> Result<Vec<export::Frame>, CliError> {
    load_replayable(file).map_err(fail)?;
    let tmp = tempfile::tempdir().map_err(|e| fail(format!("a temporary directory: {e}")))?;
    let dir = tmp.path().join("pictures");
    let r = run_replay_trial(
        file,
        cargo,
        &[("CALAMETRA_SCANOUT", dir.as_os_str())],
        to_stderr,
    )?;
    if !r.passed || !r.ran {
        return Err(fail(format!(
            "--frames: the replay of {} failed (see the trial's output above), so the pictures it would give are not this trace's",
            file.display()
        )));
    }
    let index = pictures::read_index(&dir, file)?;
    let mut frames = Vec::new();
    for entry in index.pictures {
        let png = pictures::png(&dir, &entry)?;
        frames.push(export::Frame { entry, png });
    }
    Ok(frames)
}

fn export_cmd(a: &ExportArgs) -> Result<(), CliError> {
    let file = &a.file;
    if a.chrome.is_none() && a.html.is_none() && a.pcapng.is_none() {
        return Err(usage(
            "export needs --chrome OUT.json, --html OUT.html or --pcapng OUT.pcapng",
        ));
    }
    for out in [&a.chrome, &a.html, &a.pcapng].into_iter().flatten() {
        not_an_input(out, &[file])?;
    }
    // Read record by record, twice at most an export: a long trace is never held whole.
    let recs = export::TraceFile(file);
    let bad = |e: String| {
        let name = file.display().to_string();
        // A reading error names the file already; a record's names only its line.
        fail(if e.starts_with(&name) {
            e
        } else {
            format!("{name}: {e}")
        })
    };
    if let Some(out) = &a.chrome {
        write_output(out, export::chrome(&recs).map_err(bad)?.as_bytes())?;
        note_written(out, " (open it in Perfetto or chrome://tracing)");
    }
    if let Some(out) = &a.html {
        let title = file
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "trace".to_string());
        let frames = if a.frames {
            export_frames(file, &cargo_or_default(&a.cargo), is_stream(out))?
        } else {
            Vec::new()
        };
        write_output(
            out,
            export::html(&recs, &title, &frames)
                .map_err(bad)?
                .as_bytes(),
        )?;
        note_written(out, "");
    }
    if let Some(out) = &a.pcapng {
        let bytes = export::pcapng::pcapng(&recs).map_err(bad)?;
        write_output(out, &bytes)?;
        note_written(out, " (open it in Wireshark)");
    }
    Ok(())
}
