//! `calametra export TRACE --pcapng OUT` as a user meets it: the run's transfers in a usbmon
//! pcapng that the capture reader takes back (and `compare` and Wireshark read), standard
//! output as `-`, a symlink refused and left as it is, a malformed transfer record a clear
//! error naming its line and field.

use calametra::report::write_trace;
use calametra::{run, RunConfig, Sim};
use calametra_capture::{Capture, Status};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

mod support;

fn tool(args: &[&std::ffi::OsStr]) -> Output {
    let out = Command::new(env!("CARGO_BIN_EXE_calametra"))
        .args(args)
        .output()
        .expect("run calametra");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("panicked"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn scenario(sim: &mut Sim) {
    support::loopback_reader(sim, "driver", 3);
}

fn trace(dir: &Path) -> PathBuf {
    let r = run(
        RunConfig {
            keep_trace: true,
            ..RunConfig::default()
        },
        &scenario,
    );
    let p = dir.join("run.jsonl");
    write_trace(
        &p,
        &r.lines,
        "export_pcapng::scenario",
        "calametra-cli",
        "export_pcapng",
        &r.events,
        &r.hash.to_string(),
        None,
    )
    .unwrap();
    p
}

#[test]
fn export_pcapng_writes_the_runs_transfers_to_a_file_or_standard_output() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let out = dir.path().join("run.pcapng");
    let o = tool(&[
        "export".as_ref(),
        t.as_os_str(),
        "--pcapng".as_ref(),
        out.as_os_str(),
    ]);
    assert!(o.status.success(), "{o:?}");
    assert!(String::from_utf8_lossy(&o.stdout).contains("wrote"));
    let bytes = std::fs::read(&out).unwrap();
    let cap = Capture::parse(&out, &bytes).unwrap();
    let c = cap.control_transfers();
    assert_eq!(c.len(), 3, "the three reads");
    for x in &c {
        assert_eq!((x.bus, x.device, x.setup.request), (1, 2, 2));
        assert_eq!(x.status, Status::Ok);
        assert_eq!(x.actual as usize, x.data.len());
    }
    let o = tool(&[
        "export".as_ref(),
        t.as_os_str(),
        "--pcapng".as_ref(),
        "-".as_ref(),
    ]);
    assert!(o.status.success());
    assert_eq!(
        o.stdout, bytes,
        "`-` writes the same file to standard output"
    );
}

#[test]
fn export_pcapng_refuses_a_symlink_and_names_a_bad_records_line_and_field() {
    let dir = tempfile::tempdir().unwrap();
    let t = trace(dir.path());
    let target = dir.path().join("target.pcapng");
    std::fs::write(&target, b"keep").unwrap();
    let link = dir.path().join("link.pcapng");
    std::os::unix::fs::symlink(&target, &link).unwrap();
    let o = tool(&[
        "export".as_ref(),
        t.as_os_str(),
        "--pcapng".as_ref(),
        link.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("symbolic link"));
    assert_eq!(std::fs::read(&target).unwrap(), b"keep");
    assert!(std::fs::symlink_metadata(&link)
        .unwrap()
        .file_type()
        .is_symlink());

    let bad = dir.path().join("bad.jsonl");
    std::fs::write(
        &bad,
        "{\"seq\":0,\"t_ns\":5,\"kind\":\"transfer\",\"actor\":\"driver\",\"deterministic\":true,\"data\":{\"site\":\"bulk.in#1\",\"ep\":\"x\",\"status\":\"ok\"}}\n",
    )
    .unwrap();
    let out = dir.path().join("bad.pcapng");
    let o = tool(&[
        "export".as_ref(),
        bad.as_os_str(),
        "--pcapng".as_ref(),
        out.as_os_str(),
    ]);
    assert_eq!(o.status.code(), Some(1));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("bad.jsonl") && err.contains("line 1") && err.contains("field `ep`"),
        "{err}"
    );
    assert!(!out.exists(), "nothing written");
}
