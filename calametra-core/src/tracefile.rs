//! Trace files of failing runs, and telling a run aloud.
//!
//! A trace file is the run's kept JSONL lines followed by one non-deterministic `summary`
//! record naming the scenario, its package and test target, its events and its hash, so
//! `calametra replay` and `show` can use the file alone. [`load_replayable`] reads the events
//! and hash back from a trace file or a saved case. Nothing here runs a simulation.

use crate::choices::Event;
use crate::regress::{write_atomic, Regression};
use crate::trace::{push_json_str, read_jsonl, Record};
use std::path::Path;

/// The last `n` things of a run a person cares about: transfers, externals, faults and the
/// broken invariant, joined by ` . `.
pub fn read_aloud(records: &[Record], n: usize) -> String {
    let s = |r: &Record, k: &str| {
        r.data
            .get(k)
            .and_then(|v| v.as_str())
            .unwrap_or("")
            .to_string()
    };
    let items: Vec<String> = records
        .iter()
        .filter_map(|r| match r.kind.as_str() {
            "transfer" => {
                let site = s(r, "site");
                let site = site.strip_prefix("ctrl.").unwrap_or(&site).to_string();
                let status = s(r, "status");
                Some(match r.data.get("in").and_then(|v| v.as_str()) {
                    Some(d) if status == "ok" && d.len() <= 8 => format!("{site} -> {d}"),
                    _ if status == "ok" => site,
                    _ => format!("{site} {status}"),
                })
            }
            "external" => Some(s(r, "external").to_uppercase()),
            "fault" => Some(format!(
                "{} at {}",
                s(r, "fault").to_uppercase(),
                s(r, "site")
            )),
            "invariant" => Some(format!("`{}` BROKE", s(r, "invariant"))),
            _ => None,
        })
        .collect();
    let skip = items.len().saturating_sub(n);
    let mut out = items[skip..].join(" . ");
    if skip > 0 {
        out = format!("... {out}");
    }
    out
}

/// Writes a trace file: the kept lines, then a non-deterministic `summary` record naming the
/// scenario, its events and hash, so `calametra replay` and `show` can use the file alone.
#[allow(clippy::too_many_arguments)]
pub fn write_trace(
    path: &Path,
    lines: &[String],
    scenario: &str,
    package: &str,
    target: &str,
    events: &[Event],
    hash: &str,
    failure: Option<&str>,
) -> Result<(), String> {
    let mut out = String::new();
    for l in lines {
        out.push_str(l);
    }
    let seq = lines.len();
    let events_json = serde_json::to_string(events).map_err(|e| e.to_string())?;
    out.push_str(&format!(
        "{{\"seq\":{seq},\"t_ns\":0,\"kind\":\"summary\",\"actor\":\"calametra\",\"deterministic\":false,\"data\":{{\"scenario\":"
    ));
    push_json_str(&mut out, scenario);
    out.push_str(",\"package\":");
    push_json_str(&mut out, package);
    out.push_str(",\"target\":");
    push_json_str(&mut out, target);
    out.push_str(",\"hash\":");
    push_json_str(&mut out, hash);
    if let Some(f) = failure {
        out.push_str(",\"failure\":");
        push_json_str(&mut out, f);
    }
    out.push_str(",\"events\":");
    out.push_str(&events_json);
    out.push_str("}}\n");
    write_atomic(path, out.as_bytes()).map_err(|e| e.to_string())
}

/// Events, hash and (for traces) records of a regression or trace file.
#[allow(clippy::type_complexity)]
pub fn load_replayable(path: &Path) -> Result<(Vec<Event>, String, Option<Vec<Record>>), String> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| format!("{}: cannot read: {e}", path.display()))?;
    let whole: Option<serde_json::Value> = serde_json::from_str(&text).ok();
    if whole.as_ref().is_some_and(|v| v.get("format").is_some()) {
        let reg = Regression::parse(path, &text).map_err(|e| e.to_string())?;
        return Ok((reg.events, reg.trace_hash, None));
    }
    let recs = read_jsonl(path).map_err(|e| e.to_string())?;
    let summary = recs
        .iter()
        .rev()
        .find(|r| r.kind == "summary")
        .ok_or_else(|| {
            format!(
                "{}: no `summary` record; expected a trace written by Calametra",
                path.display()
            )
        })?;
    let events: Vec<Event> =
        serde_json::from_value(summary.data["events"].clone()).map_err(|e| {
            format!(
                "{}:{}: field `data.events`: {e}",
                path.display(),
                summary.line_no
            )
        })?;
    let hash = summary.data["hash"]
        .as_str()
        .ok_or_else(|| {
            format!(
                "{}:{}: field `data.hash`: expected a string",
                path.display(),
                summary.line_no
            )
        })?
        .to_string();
    Ok((events, hash, Some(recs)))
}
