//! `calametra determinism --check DIR`: a determinism directory's summary checked against the
//! `run-*` directories present, after a run of `determinism` and again at any later time.

use super::{CONFIG_FORMAT, SUMMARY_FORMAT};
use serde_json::Value;
use std::path::Path;

/// Checks a determinism directory: its `summary` lists exactly the `run-*` directories present
/// (each with its `command`, `status`, `stdout`, `stderr`, `trace.jsonl` and `summary`, and a
/// divergent one with its `divergence`), and its counts add up. Returns a one-line account.
pub fn check(dir: &Path) -> Result<String, String> {
    let read_json = |name: &str| -> Result<Value, String> {
        let p = dir.join(name);
        // Bounded, regular files only: a FIFO named `config` must not hang the check.
        let text = calametra_core::input::read_regular(
            &p,
            calametra_core::input::MAX_DOCUMENT_BYTES,
            name,
        )
        .map_err(|e| format!("{}: {e}", p.display()))?;
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", p.display()))
    };
    let config = read_json("config")?;
    if config["format"] != CONFIG_FORMAT {
        return Err(format!(
            "{}: field `format`: expected `{CONFIG_FORMAT}`",
            dir.join("config").display()
        ));
    }
    let summary = read_json("summary")?;
    let sp = dir.join("summary");
    if summary["format"] != SUMMARY_FORMAT {
        return Err(format!(
            "{}: field `format`: expected `{SUMMARY_FORMAT}`",
            sp.display()
        ));
    }
    let runs = summary["runs"].as_u64().unwrap_or(0) as usize;
    if Some(runs as u64) != config["runs"].as_u64() {
        return Err(format!(
            "{}: {runs} runs, but the config asked for {}",
            sp.display(),
            config["runs"]
        ));
    }
    let kept: Vec<(String, String)> = summary["kept"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|k| {
            (
                k["run"].as_str().unwrap_or("").to_string(),
                k["role"].as_str().unwrap_or("").to_string(),
            )
        })
        .collect();
    let deleted: Vec<String> = summary["deleted"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|d| d.as_str().map(str::to_string))
        .collect();
    let mut present: Vec<String> = std::fs::read_dir(dir)
        .map_err(|e| format!("{}: {e}", dir.display()))?
        .flatten()
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("run-"))
        .collect();
    present.sort();
    let mut listed: Vec<String> = kept.iter().map(|(r, _)| r.clone()).collect();
    listed.sort();
    if present != listed {
        return Err(format!(
            "{}: the runs kept ({}) are not the run directories present ({})",
            sp.display(),
            listed.join(", "),
            present.join(", ")
        ));
    }
    if kept.len() + deleted.len() != runs {
        return Err(format!(
            "{}: {} kept and {} deleted make {}, not {runs} runs",
            sp.display(),
            kept.len(),
            deleted.len(),
            kept.len() + deleted.len()
        ));
    }
    if deleted.iter().any(|d| listed.contains(d)) {
        return Err(format!("{}: a run is both kept and deleted", sp.display()));
    }
    let count = |role: &str| kept.iter().filter(|(_, r)| r == role).count();
    if summary.get("unusable").is_some_and(|u| u.is_string()) {
        return Ok(format!(
            "checked {}: the reference was unusable; {} run directories kept",
            dir.display(),
            kept.len()
        ));
    }
    for (field, n) in [
        ("divergent", count("divergent")),
        ("unusable", count("unusable")),
        ("identical", deleted.len()),
    ] {
        if summary[field].as_u64() != Some(n as u64) {
            return Err(format!(
                "{}: field `{field}` says {}, but {n} runs are so",
                sp.display(),
                summary[field]
            ));
        }
    }
    for (run, role) in &kept {
        let mut need = vec!["command", "status", "stdout", "stderr", "summary"];
        if role != "unusable" {
            need.push("trace.jsonl");
        }
        if role == "divergent" {
            need.push("divergence");
        }
        for f in need {
            if !dir.join(run).join(f).is_file() {
                return Err(format!("{}: missing `{f}`", dir.join(run).display()));
            }
        }
    }
    if count("reference") != 1 {
        return Err(format!("{}: no reference run kept", sp.display()));
    }
    Ok(format!(
        "checked {}: {runs} runs: 1 reference, {} identical (deleted), {} divergent, {} unusable; the summary lists exactly the {} run directories present",
        dir.display(),
        deleted.len(),
        count("divergent"),
        count("unusable"),
        kept.len()
    ))
}
