//! The `calametra` command-line tool: `replay`, `diff`, `determinism`, `show`, `review`,
//! `sweep-report`, `export`, `compare`, `learn`, `qemu`, `guest-setup` and `completions`;
//! `calametra --help` and `calametra help <COMMAND>` say what each takes.
//!
//! Arguments are parsed by clap from the OS's strings: a file argument may be any path, and an
//! argument that must be text but is not UTF-8 is a usage error (exit 2), never a panic. Every
//! command reads real files and reports a bad one with a clear message naming the file and
//! exits non-zero; nothing here panics on input.

// The commands, one file each (their arguments and what they do); main.rs is the root, and no
// command imports from it.
mod compare;
mod completions;
mod determinism;
mod diff;
mod export;
mod guest_setup;
mod learn;
mod qemu;
mod replay;
mod review;
mod show;
mod sweep;
mod sweep_report;

// What the commands share: outputs and errors, reading inputs, running a replay trial, a
// trial's name, the pictures a replay wrote, the test binaries cargo builds.
mod binaries;
mod input;
mod output;
mod pictures;
mod replaying;
mod trial;
mod user_binary;

use clap::{CommandFactory, Parser, Subcommand};
use output::{clean, CliError};
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
    Replay(replay::ReplayArgs),
    /// Where two traces part ways, field by field
    ///
    /// The last matching and the first divergent record as a table of fields, the time deltas,
    /// the non-deterministic records between and the counts per kind. Exit 0 identical, 1
    /// divergent, 2 unusable input.
    Diff(diff::DiffArgs),
    /// Run one run N times and keep what diverges
    ///
    /// What runs: a saved case or trace (FILE), a seed of a scenario (--package P (--test T |
    /// --bin T) --scenario PATH --seed SEED), or any program that writes $CALAMETRA_TRACE_OUT
    /// (-- PROGRAM ARGS..). The reference run and each divergent run are kept (command,
    /// status, output, trace, summary, diff); matching runs are deleted. Exit 0 all identical,
    /// 1 some diverge, 2 unusable.
    Determinism(determinism::DeterminismArgs),
    /// The minimal story of a failure (a regression file or a trace)
    ///
    /// The file is read once, and only when it is a regular file within the readers' limits
    /// (a FIFO or `/dev/zero` is an error). Control characters in its strings (terminal escape
    /// sequences) are printed as `\u{1b}` escapes, here and in every command's output.
    Show(show::ShowArgs),
    /// The workspace's saved cases and their states
    ///
    /// States: fails, fails-differently, fixed, stale, foreign, other-build, unreferenced,
    /// unreadable, not-run. --prune fixed,stale deletes the files in those states.
    Review(review::ReviewArgs),
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
    SweepReport(sweep_report::SweepReportArgs),
    /// A Perfetto/Chrome trace, a self-contained HTML timeline or a usbmon pcapng of a trace
    ///
    /// Outputs: `-` is standard output (the `wrote` notes then go to standard error); a
    /// character device (`/dev/stdout`) or a FIFO is written through; an existing symlink is
    /// refused and left as it is; a regular file is replaced atomically. An output that is the
    /// input trace is refused (exit 2).
    Export(export::ExportArgs),
    /// Replay a real capture against a model
    ///
    /// Its control transfers (and for a Trigger 6 or a learned spec its bulk and interrupt
    /// transfers too; for a Trigger 6 each flipped frame as a PNG in --frames DIR); exit 1 on
    /// any unexplained difference, and exit 1 when nothing was compared (an empty or
    /// header-only capture, comments alone, a --device with no transfers). The capture must be
    /// a regular file; its first bytes are checked before the rest is read.
    Compare(compare::CompareArgs),
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

/// Runs one parsed command, printing to stdout.
fn run(cli: Cli) -> Result<(), CliError> {
    match cli.command {
        Command::Replay(a) => replay::replay(&a),
        Command::Diff(a) => diff::diff(&a),
        Command::Determinism(a) => determinism::determinism(&a),
        Command::Show(a) => show::show(&a),
        Command::Review(a) => review::review(&a),
        Command::Sweep(a) => sweep::sweep(&a),
        Command::SweepReport(a) => sweep_report::sweep_report(&a),
        Command::Export(a) => export::export_cmd(&a),
        Command::Compare(a) => compare::compare(&a),
        Command::Learn(a) => learn::learn(&a),
        Command::Qemu(a) => qemu::qemu(&a),
        Command::GuestSetup(a) => guest_setup::guest_setup(&a),
        Command::Completions { shell } => completions::completions(shell, Cli::command()),
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
