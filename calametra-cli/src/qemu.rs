//! `calametra qemu`: one guest run of a model under QEMU. The tool turns its options into a
//! [`calametra_qemu::job::Job`] and runs it here, with the models this tool links (the shipped
//! ones, learned specs), or, with `--package P --test T`, inside that test binary (the
//! `CALAMETRA_QEMU_*` variables of `calametra::tool`), where a model of the user's own crate is
//! registered. Nothing here serves a model; `calametra-qemu` does.

use crate::output::{clean, CliError};
use calametra::env_names::{QEMU_JOB, QEMU_OUT};
use calametra_qemu::job::{Job, What};
use clap::Args;
use std::path::{Path, PathBuf};

/// The options of `calametra qemu`.
#[derive(Args, Debug)]
pub(crate) struct QemuArgs {
    /// The device spec whose model the guest sees (the model registered for its format).
    #[arg(long, value_name = "SPEC")]
    pub(crate) spec: PathBuf,
    /// What the guest runs: `lsusb` (the default) or `dfu`.
    #[arg(long, value_name = "NAME", conflicts_with_all = ["script", "bin"])]
    pub(crate) probe: Option<String>,
    /// A shell script for the guest to run instead of a probe.
    #[arg(long, value_name = "FILE", conflicts_with = "bin")]
    pub(crate) script: Option<PathBuf>,
    /// A program for the guest to run once the device is configured: a static executable, or
    /// one linked against what the guest image holds (glibc, libusb-1.0, libudev); a library it
    /// lacks is named before the run. Its arguments follow `--`.
    #[arg(long, value_name = "FILE")]
    pub(crate) bin: Option<PathBuf>,
    /// A file for --bin's program: SRC here, DEST in the guest (a library goes in
    /// /calametra/lib; relative DEST is under /calametra, the program's directory).
    #[arg(long = "file", value_name = "SRC:DEST", requires = "bin")]
    pub(crate) files: Vec<String>,
    /// The image `--probe dfu` downloads (default: 64 KiB whose bytes name their offset).
    #[arg(long, value_name = "FILE")]
    pub(crate) image: Option<PathBuf>,
    /// The target directory holding the lockstep QEMU and the built guest (default: where a
    /// guest scenario looks: $CARGO_TARGET_DIR, this tool's target directory, ./target).
    #[arg(long, value_name = "DIR")]
    pub(crate) guest: Option<PathBuf>,
    /// Write the run's trace (JSON Lines) to FILE (`calametra show FILE` reads it).
    #[arg(long, value_name = "FILE")]
    pub(crate) trace: Option<PathBuf>,
    /// Serve the model over usb-redir to the system QEMU (scripts/install-qemu.sh) instead of
    /// the lockstep QEMU: runs are not repeatable.
    #[arg(long)]
    pub(crate) usbredir: bool,
    /// Run inside this package's test binary (with --test), with the models registered there:
    /// a model of your own crate, which this tool does not link.
    #[arg(long, value_name = "P", requires = "test")]
    pub(crate) package: Option<String>,
    /// The test target of --package: a `calametra::main!()` binary (harness = false) that
    /// links calametra-qemu (`use calametra_qemu as _;`) and the model.
    #[arg(long, value_name = "T", requires = "package")]
    pub(crate) test: Option<String>,
    /// The cargo for --package (default: $CARGO, else `cargo`).
    #[arg(long, value_name = "CARGO")]
    pub(crate) cargo: Option<String>,
    /// The program's arguments (after `--`).
    #[arg(last = true, value_name = "ARGS", requires = "bin")]
    pub(crate) args: Vec<String>,
}

/// An absolute form of `p` (relative to the current directory), so a test binary run in its
/// package's directory finds it.
fn absolute(p: &Path) -> Result<PathBuf, CliError> {
    std::path::absolute(p).map_err(|e| CliError(format!("{}: {e}", p.display()), 2))
}

/// The job the options describe; `Err` (exit 2) for a malformed option.
fn job(a: &QemuArgs) -> Result<Job, CliError> {
    let what = match (&a.bin, &a.script, a.probe.as_deref()) {
        (Some(bin), _, _) => {
            let mut files = Vec::new();
            for f in &a.files {
                let (src, dest) = f.split_once(':').filter(|(s, d)| !s.is_empty() && !d.is_empty()).ok_or_else(|| {
                    CliError(format!("--file `{f}`: expected SRC:DEST (a file here, its path in the guest)"), 2)
                })?;
                let dest = if dest.starts_with('/') {
                    dest.to_string()
                } else {
                    format!("/calametra/{dest}")
                };
                files.push((absolute(Path::new(src))?, dest));
            }
            What::Program {
                bin: absolute(bin)?,
                args: a.args.clone(),
                files,
            }
        }
        (None, Some(f), _) => What::Script { file: absolute(f)? },
        (None, None, None | Some("lsusb")) => What::Lsusb,
        (None, None, Some("dfu")) => What::Dfu {
            image: a.image.as_deref().map(absolute).transpose()?,
        },
        (None, None, Some(other)) => {
            return Err(CliError(
                format!("--probe `{other}`: expected lsusb or dfu (or --script FILE, --bin FILE)"),
                2,
            ))
        }
    };
    Ok(Job {
        spec: absolute(&a.spec)?,
        what,
        target: a.guest.as_deref().map(absolute).transpose()?,
        trace: a.trace.as_deref().map(absolute).transpose()?,
        usbredir: a.usbredir,
    })
}

/// `calametra qemu --spec SPEC [--probe lsusb|dfu | --script FILE | --bin FILE [--file
/// SRC:DEST ..] -- ARGS] [--package P --test T]`.
pub(crate) fn qemu(a: &QemuArgs) -> Result<(), CliError> {
    let job = job(a)?;
    let (text, passed) = match (&a.package, &a.test) {
        (Some(package), Some(test)) => in_test_binary(a, &job, package, test)?,
        _ => {
            let r = job.report().map_err(|e| CliError(e, 1))?;
            (r.text, r.passed)
        }
    };
    print!("{}", clean(&text));
    if passed {
        Ok(())
    } else {
        Err(CliError("the guest run did not pass (see above)".into(), 1))
    }
}

/// `qemu --package P --test T`: the job runs inside that test binary, whose harness finds the
/// spec's model among the models registered there and the guest run `calametra-qemu` links
/// (`calametra::tool`: `CALAMETRA_QEMU_JOB`, `CALAMETRA_QEMU_OUT`); its summary and verdict.
fn in_test_binary(
    a: &QemuArgs,
    job: &Job,
    package: &str,
    test: &str,
) -> Result<(String, bool), CliError> {
    crate::user_binary::check_names(package, test)?;
    let json = job.to_json().map_err(|e| CliError(e, 2))?;
    let tmp =
        tempfile::tempdir().map_err(|e| CliError(format!("a temporary directory: {e}"), 1))?;
    let (job_file, out) = (tmp.path().join("job.json"), tmp.path().join("qemu.json"));
    std::fs::write(&job_file, json)
        .map_err(|e| CliError(format!("{}: {e}", job_file.display()), 1))?;
    let v = crate::user_binary::ask(&crate::user_binary::Ask {
        package,
        test,
        trial: "calametra::qemu",
        cargo: &a.cargo,
        env: vec![
            (QEMU_JOB, job_file.as_os_str()),
            (QEMU_OUT, out.as_os_str()),
        ],
        out: &out,
        what: "guest run",
        links: "calametra-qemu",
    })?;
    match (v["text"].as_str(), v["passed"].as_bool()) {
        (Some(t), Some(p)) => Ok((t.to_string(), p)),
        _ => Err(CliError(
            format!("the guest run {test} wrote has no `text` and `passed`: {v}"),
            1,
        )),
    }
}
