//! `calametra diff` on fixtures of both envelopes (`tests/data/diff/`):
//!
//! - `cal_*.jsonl`: Calametra traces (`seq/t_ns/kind/actor/deterministic/data`) with host
//!   readings (`deterministic:false`, `wall_ns`) between the records;
//! - `tsc_*.jsonl`: a hypervisor's exit stream (`seq/tsc/real_tsc/deterministic/kind/data`):
//!   exits with registers and a device-state hash, serial bytes and interrupts interleaved, host
//!   timings not compared.
//!
//! Checked: field-by-field values of the divergent record, the time deltas, the
//! non-deterministic records in the window (and with a widened window), count verdicts, traces
//! differing only in host time being identical, and the exit codes (0 / 1 / 2).

mod support;
use std::path::PathBuf;

fn data(name: &str) -> String {
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/diff")
        .join(name);
    assert!(
        p.exists(),
        "fixture {} is part of the repository",
        p.display()
    );
    p.to_string_lossy().into_owned()
}

fn diff(args: &[&str]) -> (i32, String) {
    let mut a: Vec<String> = vec!["diff".into()];
    for x in args {
        a.push(if x.ends_with(".jsonl") && !x.contains('/') {
            data(x)
        } else {
            x.to_string()
        });
    }
    let a: Vec<&str> = a.iter().map(String::as_str).collect();
    support::tool(&a)
}

/// The row of `field` in the divergent record's table: (differs, A value, B value).
fn row(text: &str, field: &str) -> (bool, String, String) {
    let table = text
        .split_once("divergent record #")
        .map(|(_, t)| t)
        .unwrap_or_else(|| panic!("no field table in:\n{text}"));
    for line in table.lines().skip(2) {
        let differs = line.starts_with("  * ");
        let cols: Vec<&str> = line[4.min(line.len())..]
            .split("  ")
            .filter(|c| !c.trim().is_empty())
            .collect();
        if cols.first().map(|c| c.trim()) == Some(field) {
            return (
                differs,
                cols[1].trim().to_string(),
                cols[2].trim().to_string(),
            );
        }
        if line.starts_with("time axis") {
            break;
        }
    }
    panic!("no row `{field}` in:\n{text}");
}

#[test]
fn calametra_envelope_field_by_field_with_time_deltas_and_the_window() {
    let (code, out) = diff(&["cal_a.jsonl", "cal_b_diverges.jsonl", "--context", "2"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("first divergent record: #3 (deterministic index), fields that differ: t_ns, data.in, data.len, data.status"),
        "{out}"
    );
    assert!(
        out.contains("last matching record: #2 (A line 3, B line 3):"),
        "{out}"
    );
    assert_eq!(row(&out, "t_ns"), (true, "250000".into(), "375000".into()));
    assert_eq!(
        row(&out, "data.status"),
        (true, "\"ok\"".into(), "\"stall\"".into())
    );
    assert_eq!(row(&out, "data.len"), (true, "2".into(), "(absent)".into()));
    assert_eq!(
        row(&out, "data.site"),
        (
            false,
            "\"ctrl.get_status#2\"".into(),
            "\"ctrl.get_status#2\"".into()
        )
    );
    assert!(
        out.contains("last match -> divergence: A +125000 (t_ns 250000), B +250000 (t_ns 375000)"),
        "{out}"
    );
    assert!(out.contains("divergent record, B - A: +125000 ns"), "{out}");
    // The window: each run's host reading between record #2 and record #3, nothing after.
    let window = out
        .split_once("non-deterministic records between")
        .unwrap()
        .1;
    assert!(
        window.contains("A line 4:") && window.contains("\"wall_ns\":1000"),
        "{out}"
    );
    assert!(
        window.contains("B line 4:") && window.contains("poll took (retried)"),
        "{out}"
    );
    assert!(!window.contains("line 7:"), "{out}");
    // Widened two deterministic records past the divergence: the later readings too.
    let (code, out) = diff(&[
        "cal_a.jsonl",
        "cal_b_diverges.jsonl",
        "--nondeterm-window",
        "2",
    ]);
    assert_eq!(code, 1, "{out}");
    let window = out
        .split_once("non-deterministic records between")
        .unwrap()
        .1;
    assert!(
        window.contains("up to 2 deterministic records past the divergence"),
        "{out}"
    );
    assert!(
        window.contains("A line 4:") && window.contains("A line 7:"),
        "{out}"
    );
    assert!(
        window.contains("B line 7:") && window.contains("\"wall_ns\":2100"),
        "{out}"
    );
    assert!(!window.contains("line 9:"), "{out}");
}

#[test]
fn tsc_envelope_registers_hashes_serial_and_interrupts() {
    let (code, out) = diff(&["tsc_a.jsonl", "tsc_b_diverges.jsonl"]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("(tsc envelope, 12 records: 8 deterministic, 4 not)"),
        "{out}"
    );
    assert!(
        out.contains("first divergent record: #4 (deterministic index), fields that differ: tsc, data.regs.rax, data.state_hash"),
        "{out}"
    );
    assert_eq!(
        row(&out, "data.regs.rax"),
        (true, "\"0x41\"".into(), "\"0x42\"".into())
    );
    assert_eq!(
        row(&out, "data.state_hash"),
        (true, "\"9f0c2a11\"".into(), "\"d00dfeed\"".into())
    );
    assert_eq!(
        row(&out, "data.regs.rip"),
        (false, "\"0x1010\"".into(), "\"0x1010\"".into())
    );
    // Host time is shown, never compared.
    assert_eq!(
        row(&out, "real_tsc (not compared)"),
        (false, "1002100".into(), "5002100".into())
    );
    assert!(
        out.contains("last matching record: #3 (A line 5, B line 5):"),
        "{out}"
    );
    assert!(out.contains("\"kind\":\"interrupt\""), "{out}");
    assert!(
        out.contains("last match -> divergence: A +400 (tsc 3000), B +600 (tsc 3200)"),
        "{out}"
    );
    assert!(out.contains("divergent record, B - A: +200 ticks"), "{out}");
    // The window holds each run's host timing after the interrupt; widened past the
    // divergence it reaches the timing after the next serial byte.
    let window = out
        .split_once("non-deterministic records between")
        .unwrap()
        .1;
    assert!(
        window.contains("A line 6:") && window.contains("B line 6:"),
        "{out}"
    );
    assert!(!window.contains("line 9:"), "{out}");
    let (code, out) = diff(&[
        "tsc_a.jsonl",
        "tsc_b_diverges.jsonl",
        "--nondeterm-window",
        "2",
    ]);
    assert_eq!(code, 1, "{out}");
    let window = out
        .split_once("non-deterministic records between")
        .unwrap()
        .1;
    assert!(
        window.contains("A line 9:") && window.contains("B line 9:"),
        "{out}"
    );
    assert!(!window.contains("line 11:"), "{out}");
    // Forcing the envelope reads the same.
    let (code, forced) = diff(&["tsc_a.jsonl", "tsc_b_diverges.jsonl", "--format", "tsc"]);
    assert_eq!(code, 1);
    assert!(forced.contains("data.state_hash"), "{forced}");
}

#[test]
fn a_count_difference_is_a_divergence_when_the_first_records_agree() {
    let (code, out) = diff(&["tsc_a.jsonl", "tsc_c_extra.jsonl"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("exit            4 | 5    <- differs"), "{out}");
    assert!(out.contains("interrupt       2 | 3    <- differs"), "{out}");
    assert!(out.contains("serial          2 | 2\n"), "{out}");
    assert!(
        out.contains(
            "count verdict: the counts differ (a divergence, whatever the records before it)"
        ),
        "{out}"
    );
    assert!(
        out.contains("verdict: divergent: A ends before deterministic record #8, B goes on; record counts differ: exit 4 vs 5, interrupt 2 vs 3"),
        "{out}"
    );
    assert!(out.contains("last matching record: #7"), "{out}");
    let (code, out) = diff(&["cal_a.jsonl", "cal_c_extra.jsonl"]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("transfer       2 | 3    <- differs"), "{out}");
    assert!(out.contains("the counts differ"), "{out}");
}

#[test]
fn traces_differing_only_in_host_time_are_identical() {
    for (a, b) in [
        ("cal_a.jsonl", "cal_a_other_host.jsonl"),
        ("tsc_a.jsonl", "tsc_a_other_host.jsonl"),
    ] {
        let (code, out) = diff(&[a, b]);
        assert_eq!(code, 0, "{out}");
        assert!(out.contains("verdict: identical:"), "{out}");
        assert!(out.contains("count verdict: the counts agree"), "{out}");
        assert!(out.contains("never compared"), "{out}");
    }
}

#[test]
fn unusable_input_exits_2() {
    let dir = tempfile::tempdir().unwrap();
    let unknown = dir.path().join("unknown.jsonl");
    std::fs::write(&unknown, "{\"when\":1,\"what\":\"x\"}\n").unwrap();
    let unknown = unknown.to_string_lossy().into_owned();
    for (args, needle) in [
        (vec!["tsc_a.jsonl", "cal_a.jsonl"], "nothing to compare"),
        (vec!["tsc_a.jsonl", "/nonexistent/x.jsonl"], "cannot open"),
        (vec!["tsc_a.jsonl", unknown.as_str()], "unknown envelope"),
        (
            vec!["cal_a.jsonl", "cal_a.jsonl", "--format", "tsc"],
            "field `tsc`",
        ),
        (
            vec!["cal_a.jsonl", "cal_a.jsonl", "--format", "x"],
            "expected `calametra` or `tsc`",
        ),
    ] {
        let (code, out) = diff(&args);
        assert_eq!(code, 2, "{args:?}: {out}");
        assert!(
            out.contains(needle),
            "{args:?}: expected `{needle}` in {out}"
        );
    }
}
