//! Trace files of failing runs, and telling a run aloud.
//!
//! A trace file is the run's kept JSONL lines followed by one non-deterministic `summary`
//! record naming the scenario, its package and test target, its events and its hash, so
//! `calametra replay` and `show` can use the file alone. [`load_replayable`] reads the events
//! and hash back from a trace file or a saved case. Nothing here runs a simulation.

use crate::choices::Event;
use crate::regress::{write_atomic, Regression};
use crate::trace::{push_json_str, Record};
use std::path::{Path, PathBuf};

/// The Cargo target directory holding the executable `exe` (a test binary in
/// `<target>/<profile>/deps/`): its nearest ancestor that cargo marks as its own, with
/// `.rustc_info.json` (always written) or `CACHEDIR.TAG` (written only when cargo created the
/// directory: a `target/` that a build script made first has none).
pub fn cargo_target_dir(exe: &Path) -> Option<PathBuf> {
    exe.ancestors()
        .skip(1)
        .find(|a| a.join(".rustc_info.json").is_file() || a.join("CACHEDIR.TAG").is_file())
        .map(Path::to_path_buf)
}

/// The last `n` things of a run a person cares about: transfers, externals, faults, USB
/// resets the host issued and the broken invariant, joined by ` . `.
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
            // A USB reset the host issued (the bus's `usb` machine): often the cause.
            "transition" if s(r, "machine") == "usb" && s(r, "to") == "reset" => {
                Some("USB RESET".to_string())
            }
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

/// What a trace file's `summary` record says besides the kept lines.
#[derive(Clone, Copy, Debug)]
pub struct TraceSummary<'a> {
    /// The scenario path.
    pub scenario: &'a str,
    /// The Cargo package holding it.
    pub package: &'a str,
    /// The test target holding it.
    pub target: &'a str,
    /// The events of the run (replaying them reproduces it).
    pub events: &'a [Event],
    /// The run's trace hash.
    pub hash: &'a str,
    /// The failure, if the run failed.
    pub failure: Option<&'a str>,
    /// The SHA-256 of the scenario's spec: `Some(None)` for a scenario without a spec, `None`
    /// when the writer does not know (then the summary has no `spec_sha256` field and a replay
    /// cannot check the spec).
    pub spec_sha256: Option<Option<&'a str>>,
}

/// Writes a trace file: the kept lines, then a non-deterministic `summary` record naming the
/// scenario, its events and hash, so `calametra replay` and `show` can use the file alone. The
/// summary records no spec; [`write_trace_summary`] can.
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
    write_trace_summary(
        path,
        lines,
        &TraceSummary {
            scenario,
            package,
            target,
            events,
            hash,
            failure,
            spec_sha256: None,
        },
    )
}

/// Writes a trace file: the kept lines, then the `summary` record (`deterministic:false`, so
/// never hashed) with the scenario, package, target, hash, failure, the spec's SHA-256 (when
/// known: a replay checks it) and the events.
pub fn write_trace_summary(path: &Path, lines: &[String], s: &TraceSummary) -> Result<(), String> {
    let mut out = String::new();
    for l in lines {
        out.push_str(l);
    }
    let seq = lines.len();
    let events_json = serde_json::to_string(s.events).map_err(|e| e.to_string())?;
    out.push_str(&format!(
        "{{\"seq\":{seq},\"t_ns\":0,\"kind\":\"summary\",\"actor\":\"calametra\",\"deterministic\":false,\"data\":{{\"scenario\":"
    ));
    push_json_str(&mut out, s.scenario);
    out.push_str(",\"package\":");
    push_json_str(&mut out, s.package);
    out.push_str(",\"target\":");
    push_json_str(&mut out, s.target);
    out.push_str(",\"hash\":");
    push_json_str(&mut out, s.hash);
    out.push_str(&format!(",\"hash_version\":{}", crate::trace::HASH_VERSION));
    if let Some(f) = s.failure {
        out.push_str(",\"failure\":");
        push_json_str(&mut out, f);
    }
    match s.spec_sha256 {
        None => {}
        Some(None) => out.push_str(",\"spec_sha256\":null"),
        Some(Some(h)) => {
            out.push_str(",\"spec_sha256\":");
            push_json_str(&mut out, h);
        }
    }
    out.push_str(",\"events\":");
    out.push_str(&events_json);
    out.push_str("}}\n");
    write_atomic(path, out.as_bytes()).map_err(|e| e.to_string())
}

/// A saved case or a trace file, read for replay.
#[derive(Clone, Debug)]
pub struct Replayable {
    /// The file.
    pub path: PathBuf,
    /// The events to replay.
    pub events: Vec<Event>,
    /// The trace hash recorded.
    pub hash: String,
    /// The encoding version of `hash` (a file that does not record it predates versions: 1).
    pub hash_version: u64,
    /// The scenario path the file names.
    pub scenario: String,
    /// The Cargo package it names (empty when a trace's summary does not say).
    pub package: String,
    /// The test target it names (empty when a trace's summary does not say).
    pub target: String,
    /// The spec's SHA-256 recorded: `Some(None)` when the file records that the scenario had
    /// no spec, `None` when it records nothing (a trace written before traces recorded it).
    pub spec_sha256: Option<Option<String>>,
    /// A trace file's records (`None` for a saved case).
    pub records: Option<Vec<Record>>,
    /// The saved case, when the file is one.
    pub case: Option<Regression>,
}

/// Whether the file at `path` is a JSON document (a saved case) rather than JSON Lines (a
/// trace): its first line is a lone `{` (a document over several lines, as saved cases are
/// written) or one JSON object with a `format` field. Only the first line is read (at most
/// [`crate::input::MAX_LINE_BYTES`]).
fn is_document(path: &Path) -> Result<bool, String> {
    use crate::input::{open_regular, Line, Lines, MAX_LINE_BYTES, MAX_TRACE_BYTES};
    let f = open_regular(path, MAX_TRACE_BYTES, "trace or saved case")?;
    let mut lines = Lines::new(std::io::BufReader::new(f), MAX_LINE_BYTES, MAX_TRACE_BYTES);
    let first = match lines.next() {
        Ok(Some(Line::Text(t, _) | Line::Unterminated(t, _))) => t.trim().to_string(),
        Ok(None) => return Ok(false),
        // The trace reader says what is wrong with the line.
        Err(_) => return Ok(false),
    };
    if first == "{" {
        return Ok(true);
    }
    Ok(serde_json::from_str::<serde_json::Value>(&first)
        .ok()
        .is_some_and(|v| v.get("format").is_some()))
}

/// Reads a saved case or a trace file for replay: events, hash, the scenario, package and
/// target it names, the spec's SHA-256 it records, and a trace's records. Errors name the file,
/// the field and the line. Special files (a FIFO, `/dev/zero`) and files past the readers'
/// limits ([`crate::input`]) are refused before they are read.
pub fn load_replay_file(path: &Path) -> Result<Replayable, String> {
    load(path, true)
}

/// [`load_replay_file`] without a trace's records (`records` is `None` for a trace too): the
/// file is read record by record and only its summary kept, so a long trace is never held in
/// memory (`show` reads it so).
pub fn load_replay_header(path: &Path) -> Result<Replayable, String> {
    load(path, false)
}

fn load(path: &Path, keep_records: bool) -> Result<Replayable, String> {
    if is_document(path).map_err(|e| format!("{}: {e}", path.display()))? {
        let reg = Regression::load(path).map_err(|e| e.to_string())?;
        return Ok(Replayable {
            path: path.to_path_buf(),
            events: reg.events.clone(),
            hash: reg.trace_hash.clone(),
            hash_version: reg.hash_version,
            scenario: reg.scenario.clone(),
            package: reg.package.clone(),
            target: reg.target.clone(),
            spec_sha256: Some(reg.spec_sha256.clone()),
            records: None,
            case: Some(reg),
        });
    }
    let mut recs = Vec::new();
    let mut last_summary = None;
    crate::trace::for_each_record(path, |r| {
        if r.kind == "summary" {
            last_summary = Some(r.clone());
        }
        if keep_records {
            recs.push(r);
        }
        Ok(())
    })
    .map_err(|e| e.to_string())?;
    let summary = last_summary.as_ref().ok_or_else(|| {
        format!(
            "{}: no `summary` record; expected a trace written by Calametra",
            path.display()
        )
    })?;
    let at = |field: &str, what: String| {
        format!(
            "{}:{}: field `data.{field}`: {what}",
            path.display(),
            summary.line_no
        )
    };
    let events = match summary.data.get("events") {
        None => return Err(at("events", "missing; expected the run's events".into())),
        Some(v) => events_of(v).map_err(|(field, e)| at(&field, e))?,
    };
    let text = |field: &str, required: bool| -> Result<String, String> {
        match summary.data.get(field) {
            Some(serde_json::Value::String(s)) => Ok(s.clone()),
            None if !required => Ok(String::new()),
            _ => Err(at(field, "expected a string".into())),
        }
    };
    let spec_sha256 = match summary.data.get("spec_sha256") {
        None => None,
        Some(serde_json::Value::Null) => Some(None),
        Some(serde_json::Value::String(s)) => Some(Some(s.clone())),
        Some(_) => {
            return Err(at(
                "spec_sha256",
                "expected a string (hex) or null (no spec)".into(),
            ))
        }
    };
    let hash_version = match summary.data.get("hash_version") {
        None => 1,
        Some(v) => v
            .as_u64()
            .filter(|v| crate::trace::HASH_VERSIONS.contains(v))
            .ok_or_else(|| {
                at(
                    "hash_version",
                    format!(
                        "expected one of {:?}, found {v}; this trace was written by another Calametra version",
                        crate::trace::HASH_VERSIONS
                    ),
                )
            })?,
    };
    Ok(Replayable {
        path: path.to_path_buf(),
        hash: text("hash", true)?,
        hash_version,
        scenario: text("scenario", true)?,
        package: text("package", false)?,
        target: text("target", false)?,
        events,
        spec_sha256,
        records: keep_records.then_some(recs),
        case: None,
    })
}

/// A trace summary's `events`, errors naming the event and its field (`events[3].point`).
fn events_of(v: &serde_json::Value) -> Result<Vec<Event>, (String, String)> {
    let Some(list) = v.as_array() else {
        return Err(("events".into(), "expected an array of events".into()));
    };
    let mut out = Vec::with_capacity(list.len());
    for (i, e) in list.iter().enumerate() {
        match serde_json::from_value::<Event>(e.clone()) {
            Ok(ev) => out.push(ev),
            Err(err) => {
                let field = match crate::regress::culprit_field::<Event>(e, Some("event")) {
                    Some(k) => format!("events[{i}].{k}"),
                    None => format!("events[{i}]"),
                };
                return Err((field, err.to_string()));
            }
        }
    }
    Ok(out)
}

/// Events, hash and (for traces) records of a regression or trace file ([`load_replay_file`]).
#[allow(clippy::type_complexity)]
pub fn load_replayable(path: &Path) -> Result<(Vec<Event>, String, Option<Vec<Record>>), String> {
    let r = load_replay_file(path)?;
    Ok((r.events, r.hash, r.records))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_host_issued_usb_reset_is_read_aloud() {
        let lines = [
            r#"{"seq":0,"t_ns":0,"kind":"transfer","actor":"driver","deterministic":true,"data":{"site":"ctrl.get_status#1","status":"ok","in":"01"}}"#,
            r#"{"seq":1,"t_ns":5,"kind":"transition","actor":"dfu","deterministic":true,"data":{"machine":"usb","from":"attached","to":"reset"}}"#,
            r#"{"seq":2,"t_ns":9,"kind":"transition","actor":"dfu","deterministic":true,"data":{"machine":"dfu","from":"idle","to":"busy"}}"#,
            r#"{"seq":3,"t_ns":9,"kind":"invariant","actor":"sim","deterministic":true,"data":{"invariant":"flashed"}}"#,
        ];
        let recs: Vec<Record> = lines
            .iter()
            .enumerate()
            .map(|(i, l)| crate::trace::parse_record(l, i + 1).unwrap())
            .collect();
        assert_eq!(
            read_aloud(&recs, 10),
            "get_status#1 -> 01 . USB RESET . `flashed` BROKE"
        );
    }

    fn summary_line(events: &str) -> String {
        format!(
            "{{\"seq\":0,\"t_ns\":0,\"kind\":\"summary\",\"actor\":\"calametra\",\"deterministic\":false,\"data\":{{\"scenario\":\"s\",\"hash\":\"sha256:00\",\"events\":{events}}}}}\n"
        )
    }

    #[test]
    fn a_trace_records_the_spec_and_reads_back() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        let events = [Event::External {
            name: "unplug".into(),
            point: 3,
        }];
        let s = TraceSummary {
            scenario: "a::b",
            package: "p",
            target: "t",
            events: &events,
            hash: "sha256:00",
            failure: Some("boom"),
            spec_sha256: Some(Some("ab12")),
        };
        write_trace_summary(&p, &[], &s).unwrap();
        let r = load_replay_file(&p).unwrap();
        assert_eq!(r.spec_sha256, Some(Some("ab12".to_string())));
        assert_eq!(
            (r.scenario.as_str(), r.package.as_str(), r.target.as_str()),
            ("a::b", "p", "t")
        );
        assert_eq!(r.events, events);
        write_trace_summary(
            &p,
            &[],
            &TraceSummary {
                spec_sha256: Some(None),
                ..s
            },
        )
        .unwrap();
        assert_eq!(load_replay_file(&p).unwrap().spec_sha256, Some(None));
        write_trace(&p, &[], "a::b", "p", "t", &events, "sha256:00", None).unwrap();
        assert_eq!(load_replay_file(&p).unwrap().spec_sha256, None);
    }

    #[test]
    fn a_bad_event_in_a_trace_summary_is_named_with_its_field() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("t.jsonl");
        std::fs::write(
            &p,
            summary_line(r#"[{"event":"external","name":"unplug","point":1},{"event":"external","name":"unplug","point":"x"}]"#),
        )
        .unwrap();
        let e = load_replay_file(&p).unwrap_err();
        assert!(e.contains("t.jsonl:1: field `data.events[1].point`"), "{e}");
        std::fs::write(&p, summary_line(r#"[{"event":"unplugged","point":1}]"#)).unwrap();
        let e = load_replay_file(&p).unwrap_err();
        assert!(
            e.contains("field `data.events[0].event`: unknown variant `unplugged`"),
            "{e}"
        );
    }
}
