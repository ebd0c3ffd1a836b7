//! What `calametra qemu` runs, as data: a [`Job`] (the spec, what the guest runs, where the
//! QEMU build and the guest are, where the trace goes) and [`Job::run`], one guest run of the
//! model registered for the spec's format.
//!
//! The tool runs a job in its own process for the models it links (the shipped ones, learned
//! specs), and for a model of the user's own crate inside that crate's test binary
//! (`calametra qemu --package P --test T`): it writes the job as JSON ([`Job::to_json`]) and
//! runs the binary with `CALAMETRA_QEMU_JOB` and `CALAMETRA_QEMU_OUT`; its harness finds the
//! [`QemuHook`] this crate submits and runs the job there,
//! where the user's model is registered. One code path either way.
//!
//! Nothing here parses a command line; that is the tool's.

use crate::guest::{GuestImage, Probe};
use crate::lockstep::{run_with_extras, Extras, LockstepConfig};
use crate::program::Program;
use crate::{Boxed, GuestRun, Outcome, QemuConfig};
use calametra_core::registry::{self, GuestReport, QemuHook};
use calametra_core::spec::Spec;
use calametra_core::RunConfig;
use serde_json::{json, Value};
use std::path::{Path, PathBuf};

/// What the guest runs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum What {
    /// `lsusb -v` of the device, with the raw descriptors the kernel read.
    Lsusb,
    /// dfu-util downloads the image (default: 64 KiB whose bytes name their offset) and uploads
    /// it back.
    Dfu {
        /// The image file.
        image: Option<PathBuf>,
    },
    /// A shell script the guest runs.
    Script {
        /// The script file.
        file: PathBuf,
    },
    /// A program ([`Program`]) with its arguments and extra files.
    Program {
        /// The executable.
        bin: PathBuf,
        /// Its arguments.
        args: Vec<String>,
        /// Extra files: the file here and its path in the guest.
        files: Vec<(PathBuf, String)>,
    },
}

/// One guest run `calametra qemu` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// The device spec; its model is the one registered for its `format`.
    pub spec: PathBuf,
    /// What the guest runs.
    pub what: What,
    /// The target directory holding the lockstep QEMU and the guest; `None` looks where a
    /// guest scenario looks (`CARGO_TARGET_DIR`, the running binary's target directory).
    pub target: Option<PathBuf>,
    /// Where to write the run's trace (JSON Lines), if anywhere.
    pub trace: Option<PathBuf>,
    /// Serve the model over usb-redir to the system QEMU (not repeatable) instead of the
    /// lockstep QEMU.
    pub usbredir: bool,
}

fn path_str(p: &Path) -> Result<&str, String> {
    p.to_str()
        .ok_or_else(|| format!("{}: not a UTF-8 path", p.display()))
}

impl Job {
    /// The job as JSON (what `CALAMETRA_QEMU_JOB` names). `Err` for a path that is not UTF-8.
    pub fn to_json(&self) -> Result<String, String> {
        let what = match &self.what {
            What::Lsusb => json!({"kind": "lsusb"}),
            What::Dfu { image } => json!({"kind": "dfu", "image": match image {
                Some(p) => Value::from(path_str(p)?),
                None => Value::Null,
            }}),
            What::Script { file } => json!({"kind": "script", "file": path_str(file)?}),
            What::Program { bin, args, files } => {
                let mut f = Vec::new();
                for (src, dest) in files {
                    f.push(json!([path_str(src)?, dest]));
                }
                json!({"kind": "program", "bin": path_str(bin)?, "args": args, "files": f})
            }
        };
        let opt = |p: &Option<PathBuf>| -> Result<Value, String> {
            Ok(match p {
                Some(p) => Value::from(path_str(p)?),
                None => Value::Null,
            })
        };
        Ok(json!({
            "spec": path_str(&self.spec)?,
            "what": what,
            "target": opt(&self.target)?,
            "trace": opt(&self.trace)?,
            "usbredir": self.usbredir,
        })
        .to_string())
    }

    /// Reads a job [`Job::to_json`] wrote; `Err` names the field and what was expected.
    pub fn from_json(text: &str) -> Result<Job, String> {
        let v: Value =
            serde_json::from_str(text).map_err(|e| format!("the job is not JSON: {e}"))?;
        let string = |v: &Value, field: &str| -> Result<String, String> {
            v.get(field)
                .and_then(Value::as_str)
                .map(str::to_string)
                .ok_or_else(|| format!("the job's field `{field}`: expected a string"))
        };
        let opt_path = |v: &Value, field: &str| -> Result<Option<PathBuf>, String> {
            match v.get(field) {
                None | Some(Value::Null) => Ok(None),
                Some(Value::String(s)) => Ok(Some(PathBuf::from(s))),
                Some(_) => Err(format!(
                    "the job's field `{field}`: expected a string or null"
                )),
            }
        };
        let w = v.get("what").ok_or("the job's field `what`: missing")?;
        let what = match string(w, "kind")?.as_str() {
            "lsusb" => What::Lsusb,
            "dfu" => What::Dfu {
                image: opt_path(w, "image")?,
            },
            "script" => What::Script {
                file: PathBuf::from(string(w, "file")?),
            },
            "program" => {
                let strings = |field: &str| -> Result<Vec<Value>, String> {
                    Ok(w.get(field)
                        .and_then(Value::as_array)
                        .ok_or_else(|| format!("the job's field `what.{field}`: expected a list"))?
                        .clone())
                };
                let mut args = Vec::new();
                for a in strings("args")? {
                    args.push(
                        a.as_str()
                            .ok_or("the job's field `what.args`: expected strings")?
                            .to_string(),
                    );
                }
                let mut files = Vec::new();
                for f in strings("files")? {
                    match f.as_array().map(Vec::as_slice) {
                        Some([Value::String(src), Value::String(dest)]) => {
                            files.push((PathBuf::from(src), dest.clone()))
                        }
                        _ => return Err(
                            "the job's field `what.files`: expected [source, destination] pairs"
                                .into(),
                        ),
                    }
                }
                What::Program {
                    bin: PathBuf::from(string(w, "bin")?),
                    args,
                    files,
                }
            }
            other => {
                return Err(format!(
                    "the job's field `what.kind`: `{other}`; expected lsusb, dfu, script or program"
                ))
            }
        };
        Ok(Job {
            spec: PathBuf::from(string(&v, "spec")?),
            what,
            target: opt_path(&v, "target")?,
            trace: opt_path(&v, "trace")?,
            usbredir: v.get("usbredir").and_then(Value::as_bool).unwrap_or(false),
        })
    }

    /// The probe, with the program when it runs one. `Err` names a file that cannot be read.
    fn probe(&self) -> Result<(Probe, Option<Program>), String> {
        let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
        Ok(match &self.what {
            What::Lsusb => (Probe::Lsusb, None),
            What::Dfu { image } => {
                let image = match image {
                    Some(f) => read(f)?,
                    // 64 KiB whose bytes name their offset.
                    None => (0..65536u32).map(|i| (i ^ (i >> 8)) as u8).collect(),
                };
                (Probe::Dfu { image, alt: 0 }, None)
            }
            What::Script { file } => {
                let text = String::from_utf8(read(file)?)
                    .map_err(|_| format!("{}: the script is not UTF-8 text", file.display()))?;
                (Probe::script(text), None)
            }
            What::Program { bin, args, files } => {
                let mut p = Program::from_file(bin)?.args(args.iter().cloned());
                for (src, dest) in files {
                    p = p.file(dest, read(src)?);
                }
                (p.probe(), Some(p))
            }
        })
    }

    /// The directories to look for the QEMU build and the guest in.
    fn target_dirs(&self) -> Vec<PathBuf> {
        match &self.target {
            Some(t) => vec![t.clone()],
            None => {
                let mut v = crate::scenario::target_dirs();
                v.push(PathBuf::from("target"));
                v
            }
        }
    }

    /// One guest run of the model registered for the spec's format, from the snapshot (or
    /// over usb-redir with `usbredir`); the run, whatever its outcome. `Err` for what kept it
    /// from running: the spec, its model, a file, a missing library, the QEMU build or the
    /// guest (with how to build them).
    pub fn run(&self) -> Result<GuestRun, String> {
        let spec = Spec::load(&self.spec).map_err(|e| e.to_string())?;
        let def = registry::for_spec(&spec)?;
        let model = (def.build)(&spec)?;
        let (probe, program) = self.probe()?;
        let mut why = Vec::new();
        let run = if self.usbredir {
            let guest = self
                .target_dirs()
                .iter()
                .find_map(|d| GuestImage::find(d).map_err(|e| why.push(e)).ok())
                .ok_or_else(|| {
                    format!(
                        "{}\nbuild the guest first: scripts/install-qemu.sh && guest/build.sh",
                        why.join("; ")
                    )
                })?;
            if let Some(p) = &program {
                p.check_libraries(&guest)?;
            }
            let mut config = QemuConfig::new(guest);
            // What the model says a guest run needs of it (a DFU device re-enumerates when it
            // detaches, and its poll timeouts are timers).
            config.bridge.apply(&def.qemu);
            crate::run(Boxed(model), &RunConfig::default(), &probe, &config)
                .map_err(|e| e.to_string())?
        } else {
            let mut lock = self
                .target_dirs()
                .iter()
                .find_map(|d| LockstepConfig::find(d).map_err(|e| why.push(e)).ok())
                .ok_or_else(|| {
                    why.dedup();
                    format!(
                        "{}\nset them up once with `calametra guest-setup` (or, in Calametra's repository, scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh; or --usbredir for the system QEMU)",
                        why.join("; ")
                    )
                })?;
            if let Some(p) = &program {
                p.check_libraries(&lock.qemu.guest)?;
            }
            lock.options.apply(&def.qemu);
            run_with_extras(
                Boxed(model),
                &RunConfig::default(),
                &Extras::default(),
                &probe,
                &lock,
            )
            .map_err(|e| e.to_string())?
            .0
        };
        if let Some(t) = &self.trace {
            run.write_trace(t)
                .map_err(|e| format!("{}: cannot write the trace: {e}", t.display()))?;
        }
        Ok(run)
    }

    /// [`Job::run`] as the tool reports it: the run's summary (and where its trace went) and
    /// whether it passed.
    pub fn report(&self) -> Result<GuestReport, String> {
        let run = self.run()?;
        let mut text = run.summary();
        if let Some(t) = &self.trace {
            text.push_str(&format!("trace: {}\n", t.display()));
        }
        Ok(GuestReport {
            text,
            passed: matches!(run.outcome, Outcome::Passed),
        })
    }
}

/// The hook a test binary runs for `calametra qemu --package P --test T`: the job as JSON, run
/// with the models registered in that binary.
fn run_job(job: &str) -> Result<GuestReport, String> {
    Job::from_json(job)?.report()
}

registry::inventory::submit! {
    QemuHook(run_job)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_job_reads_back_what_it_wrote() {
        let jobs = [
            Job {
                spec: "specs/dfu11-tolerant.json".into(),
                what: What::Program {
                    bin: "/tmp/prog".into(),
                    args: vec!["-v".into(), "it's".into()],
                    files: vec![("/tmp/x.bin".into(), "/calametra/x.bin".into())],
                },
                target: Some("/w/target".into()),
                trace: None,
                usbredir: false,
            },
            Job {
                spec: "s.json".into(),
                what: What::Dfu { image: None },
                target: None,
                trace: Some("t.jsonl".into()),
                usbredir: true,
            },
            Job {
                spec: "s.json".into(),
                what: What::Script {
                    file: "probe.sh".into(),
                },
                target: None,
                trace: None,
                usbredir: false,
            },
        ];
        for j in jobs {
            assert_eq!(Job::from_json(&j.to_json().unwrap()).unwrap(), j);
        }
    }

    #[test]
    fn a_bad_job_names_its_field() {
        let e = Job::from_json(r#"{"spec": "s", "what": {"kind": "nothing"}}"#).unwrap_err();
        assert!(e.contains("what.kind") && e.contains("nothing"), "{e}");
        let e = Job::from_json(r#"{"spec": 3, "what": {"kind": "lsusb"}}"#).unwrap_err();
        assert!(e.contains("`spec`"), "{e}");
        let e = Job::from_json(r#"{"spec": "s", "what": {"kind": "program", "bin": "b", "args": [], "files": [["a"]]}}"#).unwrap_err();
        assert!(e.contains("what.files"), "{e}");
        assert!(Job::from_json("{").unwrap_err().contains("not JSON"));
    }
}
