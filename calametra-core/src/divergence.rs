//! Divergence analysis: from "the hashes differ" to the record, the field and the time where two
//! runs part ways.
//!
//! Two trace files are read into [`Rec`]s, whatever their envelope:
//!
//! - Calametra's `{"seq","t_ns","kind","actor","deterministic","data"}` (time axis `t_ns`);
//! - the `{"seq","tsc","real_tsc","deterministic","kind","data"}` envelope of a hypervisor's
//!   exit stream (time axis `tsc`; `real_tsc` is host time and is never compared, `seq` counts
//!   records of both kinds there, so it is shown but not compared).
//!
//! The envelope is detected from the first record (or forced). Deterministic records are
//! compared in order, field by field, as parsed JSON values (`data` flattened to `data.a.b`
//! paths; a `data` that is not an object is one value), never by their bytes: key order and
//! spacing do not matter, host-time fields never count, and records with
//! `deterministic:false` are shown, counted per kind, never compared. A different count of
//! deterministic records of some kind is a divergence by itself.
//!
//! [`analyse`] finds the last matching deterministic record and the first divergent one;
//! [`Analysis::render`] prints them as a field table (A value / B value), the time-axis deltas,
//! the non-deterministic records of each run in the window between the last match and the
//! divergence (optionally widened past it), and both per-kind count tables.

use crate::trace::{Record, TraceFileError};
use serde_json::Value;
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// The record envelope of a trace file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Envelope {
    /// `{"seq","t_ns","kind","actor","deterministic","data"}`, written by Calametra.
    Calametra,
    /// `{"seq","tsc","real_tsc","deterministic","kind","data"}`: a hypervisor's exit stream.
    Tsc,
}

/// Top-level fields that hold host time: shown, never compared.
pub const HOST_TIME_FIELDS: &[&str] = &["real_tsc"];

impl Envelope {
    /// `calametra` or `tsc`.
    pub fn parse(s: &str) -> Result<Envelope, String> {
        match s {
            "calametra" => Ok(Envelope::Calametra),
            "tsc" => Ok(Envelope::Tsc),
            _ => Err(format!("format `{s}`: expected `calametra` or `tsc`")),
        }
    }

    /// The envelope a first record is written in, from its fields.
    pub fn detect(first: &Value) -> Option<Envelope> {
        let o = first.as_object()?;
        if o.contains_key("t_ns") && o.contains_key("actor") {
            Some(Envelope::Calametra)
        } else if o.contains_key("tsc") {
            Some(Envelope::Tsc)
        } else {
            None
        }
    }

    /// Its name on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Envelope::Calametra => "calametra",
            Envelope::Tsc => "tsc",
        }
    }

    /// The field holding the time axis.
    pub fn time_field(self) -> &'static str {
        match self {
            Envelope::Calametra => "t_ns",
            Envelope::Tsc => "tsc",
        }
    }

    /// The unit of the time axis.
    pub fn time_unit(self) -> &'static str {
        match self {
            Envelope::Calametra => "ns",
            Envelope::Tsc => "ticks",
        }
    }
}

/// One record of either envelope, ready to compare: where its line sits in its trace's text
/// and what the comparison needs at a glance. Its compared fields are parsed again from the
/// line when two records' bytes differ ([`TraceRecs::fields`]), so a trace in memory is its
/// text and about 48 bytes a record, not a tree of values (a 100 MB trace once took 1 GB).
#[derive(Clone, Copy, Debug)]
pub struct Rec {
    /// 1-based line in its file.
    pub line_no: usize,
    /// The `seq` field.
    pub seq: u64,
    /// The time axis (`t_ns` or `tsc`).
    pub time: u64,
    /// Whether it is compared.
    pub deterministic: bool,
    /// The record kind, an index into its trace's kinds.
    kind: u32,
    /// Where its line is in its trace's text.
    start: usize,
    len: usize,
}

/// A record's fields, parsed from its line.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Fields {
    /// The compared fields by path (`seq` for Calametra, the time field, `kind`, `actor`,
    /// `data.<path>`; any other top-level field by its name).
    pub compared: BTreeMap<String, Value>,
    /// Fields shown and never compared: host time (`real_tsc`), the `seq` of a `tsc` record.
    pub shown: BTreeMap<String, Value>,
}

/// Flattens `v` under `prefix`: objects into `prefix.key` paths, anything else (arrays too) one
/// value. An empty object is kept as one value.
fn flatten(prefix: &str, v: &Value, out: &mut BTreeMap<String, Value>) {
    match v {
        Value::Object(o) if !o.is_empty() => {
            for (k, x) in o {
                flatten(&format!("{prefix}.{k}"), x, out);
            }
        }
        _ => {
            out.insert(prefix.to_string(), v.clone());
        }
    }
}

/// What [`parse_line`] reads from a line besides its fields.
#[derive(Clone, Debug)]
pub struct Header {
    /// The `seq` field.
    pub seq: u64,
    /// The time axis.
    pub time: u64,
    /// The record kind.
    pub kind: String,
    /// Whether it is compared.
    pub deterministic: bool,
}

/// Parses one line of a trace in `env`, naming the field that is wrong.
pub fn parse_line(line: &str, env: Envelope) -> Result<(Header, Fields), String> {
    let parsed = crate::trace::EnvelopeFields::parse(line, env.name())?;
    let obj = &parsed.0;
    let seq = parsed.num("seq")?;
    let time = parsed.num(env.time_field())?;
    let kind = parsed.text("kind")?;
    if env == Envelope::Calametra {
        parsed.text("actor")?;
    }
    let deterministic = parsed.deterministic()?;
    let data = obj
        .get("data")
        .ok_or_else(|| "field `data`: missing".to_string())?;
    if env == Envelope::Calametra && !data.is_object() {
        return Err("field `data`: expected an object".into());
    }
    let mut f = Fields::default();
    for (k, x) in obj {
        if HOST_TIME_FIELDS.contains(&k.as_str()) || (env == Envelope::Tsc && k == "seq") {
            f.shown.insert(k.clone(), x.clone());
        } else if k == "data" {
            flatten("data", x, &mut f.compared);
        } else if k != "deterministic" {
            f.compared.insert(k.clone(), x.clone());
        }
    }
    Ok((
        Header {
            seq,
            time,
            kind,
            deterministic,
        },
        f,
    ))
}

/// A trace file read for comparison: its lines in one text, and a [`Rec`] for each.
#[derive(Clone, Debug)]
pub struct TraceRecs {
    /// Where it came from (a name for people).
    pub path: PathBuf,
    /// Its envelope.
    pub envelope: Envelope,
    /// Its records in file order.
    pub records: Vec<Rec>,
    /// Every line, one after another (no separators).
    text: String,
    /// The record kinds, in order of first appearance.
    kinds: Vec<String>,
}

impl TraceRecs {
    /// An empty trace of `envelope`.
    pub fn new(path: PathBuf, envelope: Envelope) -> TraceRecs {
        TraceRecs {
            path,
            envelope,
            records: Vec::new(),
            text: String::new(),
            kinds: Vec::new(),
        }
    }

    /// Checks one line and adds it as the next record.
    pub fn push(&mut self, line: &str, line_no: usize) -> Result<(), String> {
        let (h, _) = parse_line(line, self.envelope)?;
        let kind = match self.kinds.iter().position(|k| *k == h.kind) {
            Some(i) => i,
            None => {
                self.kinds.push(h.kind);
                self.kinds.len() - 1
            }
        };
        self.records.push(Rec {
            line_no,
            seq: h.seq,
            time: h.time,
            deterministic: h.deterministic,
            kind: u32::try_from(kind).unwrap_or(u32::MAX),
            start: self.text.len(),
            len: line.len(),
        });
        self.text.push_str(line);
        Ok(())
    }

    /// A record's line as read.
    pub fn line(&self, r: &Rec) -> &str {
        self.text.get(r.start..r.start + r.len).unwrap_or("")
    }

    /// A record's kind.
    pub fn kind(&self, r: &Rec) -> &str {
        self.kinds.get(r.kind as usize).map_or("", String::as_str)
    }

    /// A record's fields, parsed again from its line (which parsed when it was read).
    pub fn fields(&self, r: &Rec) -> Fields {
        parse_line(self.line(r), self.envelope)
            .map(|(_, f)| f)
            .unwrap_or_default()
    }

    /// The deterministic records' compared fields as one digest, `sha256:<hex>` over each
    /// record's fields as JSON and a newline (what [`analyse`] compares: host time and the
    /// bytes' formatting left out), hashed record by record.
    pub fn fingerprint(&self) -> String {
        use sha2::{Digest, Sha256};
        let mut h = Sha256::new();
        for r in self.records.iter().filter(|r| r.deterministic) {
            h.update(serde_json::to_string(&self.fields(r).compared).unwrap_or_default());
            h.update(b"\n");
        }
        format!("sha256:{}", crate::hex::encode(&h.finalize()))
    }

    /// Whether `x` (of this trace) and `y` (of `other`) agree on every compared field: the same
    /// bytes do; otherwise their fields are compared as values.
    pub fn same(&self, x: &Rec, other: &TraceRecs, y: &Rec) -> bool {
        let (lx, ly) = (self.line(x), other.line(y));
        lx == ly || self.fields(x).compared == other.fields(y).compared
    }
}

/// Reads a trace file in `forced`, or in the envelope of its first record. An empty file, a
/// truncated last line, an unknown envelope or a malformed record is an error naming the file
/// and line. The trace in memory is about its file's size (see [`Rec`]).
pub fn read(path: &Path, forced: Option<Envelope>) -> Result<TraceRecs, TraceFileError> {
    let err = |line: usize, message: String| TraceFileError {
        path: path.to_path_buf(),
        line,
        message,
    };
    use crate::input::{open_regular, Line, Lines, MAX_LINE_BYTES, MAX_TRACE_BYTES};
    let f = open_regular(path, MAX_TRACE_BYTES, "trace").map_err(|e| err(0, e))?;
    let size = f.metadata().map(|m| m.len()).unwrap_or(0);
    let mut lines = Lines::new(BufReader::new(f), MAX_LINE_BYTES, MAX_TRACE_BYTES);
    let mut trace: Option<TraceRecs> = forced.map(|e| TraceRecs::new(path.to_path_buf(), e));
    if let Some(t) = trace.as_mut() {
        t.text.reserve(usize::try_from(size).unwrap_or(0));
    }
    while let Some(line) = lines.next().map_err(|(n, m)| err(n, m))? {
        let (text, line_no) = match line {
            Line::Text(t, n) => (t, n),
            Line::Unterminated(t, n) => {
                let why = match serde_json::from_str::<Value>(t) {
                    Ok(_) => "truncated record: the last line has no newline (was the writer killed?)".to_string(),
                    Err(e) if e.classify() == serde_json::error::Category::Eof => format!(
                        "truncated record: the last line has no newline and its JSON ends early (was the writer killed?): {e}"
                    ),
                    Err(e) => format!(
                        "the last line has no newline, and it is not a record: {}",
                        crate::input::json_error_words(&e)
                    ),
                };
                return Err(err(n, why));
            }
        };
        if text.is_empty() {
            return Err(err(line_no, "empty line; expected a JSON record".into()));
        }
        if trace.is_none() {
            let v: Value = serde_json::from_str(text).map_err(|e| {
                if line_no == 1 && text.trim() == "{" {
                    // A JSON document over several lines (a saved case), not JSON Lines.
                    return err(1, crate::trace::document_instead(path));
                }
                err(
                    line_no,
                    format!("not a JSON object: {}", crate::input::json_error_words(&e)),
                )
            })?;
            let e = Envelope::detect(&v).ok_or_else(|| {
                err(
                    line_no,
                    "unknown envelope: expected `t_ns` and `actor` (calametra) or `tsc` (tsc); force one with --format calametra|tsc".into(),
                )
            })?;
            let mut t = TraceRecs::new(path.to_path_buf(), e);
            // One allocation for the text: the file's size bounds it.
            t.text.reserve(usize::try_from(size).unwrap_or(0));
            trace = Some(t);
        }
        if let Some(t) = trace.as_mut() {
            t.push(text, line_no).map_err(|m| err(line_no, m))?;
        }
    }
    match trace {
        Some(t) if !t.records.is_empty() => {
            let mut t = t;
            t.text.shrink_to_fit();
            Ok(t)
        }
        _ => Err(err(0, "empty trace; expected JSON Lines records".into())),
    }
}

/// Calametra records (kept lines, a file read with [`crate::trace::read_jsonl`]) for comparison.
pub fn from_records(name: &str, records: &[Record]) -> TraceRecs {
    let mut t = TraceRecs::new(PathBuf::from(name), Envelope::Calametra);
    for r in records {
        // A record that does not parse as one is left out, as it always was.
        let _ = t.push(&r.line, r.line_no);
    }
    t
}

/// What to show.
#[derive(Clone, Copy, Debug)]
pub struct Options {
    /// Deterministic records both runs share shown before the divergence.
    pub context: usize,
    /// How many deterministic records past the divergence the window of non-deterministic
    /// records reaches (0: up to the divergence).
    pub nondeterm_window: usize,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            context: 10,
            nondeterm_window: 0,
        }
    }
}

/// Two traces compared.
pub struct Analysis<'a> {
    a: &'a TraceRecs,
    b: &'a TraceRecs,
    /// Positions (in `records`) of the deterministic records of each.
    da: Vec<usize>,
    db: Vec<usize>,
    /// Index (among deterministic records) of the first that differs; None when every
    /// deterministic record agrees and both have as many.
    pub first_divergent: Option<usize>,
    /// The compared fields that differ there (`(A ended)` / `(B ended)` when one ran out).
    pub fields: Vec<String>,
    /// Deterministic records per kind: (A, B).
    pub det_counts: BTreeMap<String, (usize, usize)>,
    /// Non-deterministic records per kind: (A, B).
    pub nondet_counts: BTreeMap<String, (usize, usize)>,
    opts: Options,
}

/// Compares two traces.
pub fn analyse<'a>(a: &'a TraceRecs, b: &'a TraceRecs, opts: Options) -> Analysis<'a> {
    let det = |t: &TraceRecs| -> Vec<usize> {
        t.records
            .iter()
            .enumerate()
            .filter(|(_, r)| r.deterministic)
            .map(|(i, _)| i)
            .collect()
    };
    let (da, db) = (det(a), det(b));
    let mut first_divergent = None;
    let mut fields = Vec::new();
    for i in 0..da.len().max(db.len()) {
        match (da.get(i), db.get(i)) {
            (Some(&x), Some(&y)) => {
                let (x, y) = (&a.records[x], &b.records[y]);
                if !a.same(x, b, y) {
                    first_divergent = Some(i);
                    fields = differing(&a.fields(x).compared, &b.fields(y).compared);
                    break;
                }
            }
            (Some(_), None) => {
                first_divergent = Some(i);
                fields = vec!["(B ended)".into()];
                break;
            }
            _ => {
                first_divergent = Some(i);
                fields = vec!["(A ended)".into()];
                break;
            }
        }
    }
    let mut det_counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    let mut nondet_counts: BTreeMap<String, (usize, usize)> = BTreeMap::new();
    for (t, left) in [(a, true), (b, false)] {
        for r in &t.records {
            let m = if r.deterministic {
                &mut det_counts
            } else {
                &mut nondet_counts
            };
            let e = m.entry(t.kind(r).to_string()).or_insert((0, 0));
            if left {
                e.0 += 1;
            } else {
                e.1 += 1;
            }
        }
    }
    Analysis {
        a,
        b,
        da,
        db,
        first_divergent,
        fields,
        det_counts,
        nondet_counts,
        opts,
    }
}

/// The order fields are listed in: the envelope's (`seq`, time, `kind`, `actor`, others), then
/// the `data` paths, each group by name.
fn field_order(k: &str) -> (u8, &str) {
    let rank = match k {
        "seq" => 0,
        "t_ns" | "tsc" => 1,
        "kind" => 2,
        "actor" => 3,
        _ if k == "data" || k.starts_with("data.") => 5,
        _ => 4,
    };
    (rank, k)
}

/// The compared fields of `x` and `y` that differ, in [`field_order`].
fn differing(x: &BTreeMap<String, Value>, y: &BTreeMap<String, Value>) -> Vec<String> {
    let mut keys: Vec<&String> = x.keys().chain(y.keys()).collect();
    keys.sort_by(|p, q| field_order(p).cmp(&field_order(q)));
    keys.dedup();
    keys.into_iter()
        .filter(|k| x.get(*k) != y.get(*k))
        .cloned()
        .collect()
}

/// A value for a table cell.
fn cell(v: Option<&Value>) -> String {
    match v {
        None => "(absent)".into(),
        Some(v) => v.to_string(),
    }
}

fn signed(d: i128) -> String {
    if d >= 0 {
        format!("+{d}")
    } else {
        d.to_string()
    }
}

impl Analysis<'_> {
    /// Whether the kinds' counts of deterministic records differ.
    pub fn counts_differ(&self) -> bool {
        self.det_counts.values().any(|(x, y)| x != y)
    }

    /// Every deterministic record agrees, and so do the counts.
    pub fn identical(&self) -> bool {
        self.first_divergent.is_none() && !self.counts_differ()
    }

    /// Deterministic records of A and of B.
    pub fn deterministic_len(&self) -> (usize, usize) {
        (self.da.len(), self.db.len())
    }

    /// Deterministic records both share before the first divergence (all of them when none).
    pub fn matching(&self) -> usize {
        self.first_divergent
            .unwrap_or(self.da.len().min(self.db.len()))
    }

    /// The divergent records (A's, B's; None where a trace ended).
    pub fn divergent_records(&self) -> Option<(Option<&Rec>, Option<&Rec>)> {
        let i = self.first_divergent?;
        Some((
            self.da.get(i).map(|&p| &self.a.records[p]),
            self.db.get(i).map(|&p| &self.b.records[p]),
        ))
    }

    /// One line: `identical: 84 deterministic records` or where it diverges.
    pub fn verdict(&self) -> String {
        match (self.first_divergent, self.counts_differ()) {
            (None, false) => format!(
                "identical: {} deterministic records agree field by field",
                self.da.len()
            ),
            (d, c) => {
                let mut parts = Vec::new();
                match (d, self.fields.first().map(String::as_str)) {
                    (Some(i), Some("(A ended)")) => parts.push(format!(
                        "A ends before deterministic record #{i}, B goes on"
                    )),
                    (Some(i), Some("(B ended)")) => parts.push(format!(
                        "B ends before deterministic record #{i}, A goes on"
                    )),
                    (Some(i), _) => parts.push(format!(
                        "deterministic record #{i} differs ({})",
                        self.fields.join(", ")
                    )),
                    (None, _) => {}
                }
                if c {
                    let kinds: Vec<String> = self
                        .det_counts
                        .iter()
                        .filter(|(_, (x, y))| x != y)
                        .map(|(k, (x, y))| format!("{k} {x} vs {y}"))
                        .collect();
                    parts.push(format!("record counts differ: {}", kinds.join(", ")));
                }
                format!("divergent: {}", parts.join("; "))
            }
        }
    }

    /// The report for people.
    pub fn render(&self) -> String {
        let (a, b) = (self.a, self.b);
        let mut s = String::new();
        for (tag, t, d) in [("A", a, &self.da), ("B", b, &self.db)] {
            let _ = writeln!(
                s,
                "{tag}: {} ({} envelope, {}: {} deterministic, {} not)",
                t.path.display(),
                t.envelope.name(),
                crate::sweep::count(t.records.len() as u64, "record"),
                d.len(),
                t.records.len() - d.len()
            );
        }
        self.render_counts(&mut s);
        match self.first_divergent {
            None => {}
            Some(i) => self.render_divergence(&mut s, i),
        }
        let _ = writeln!(s, "verdict: {}", self.verdict());
        s
    }

    fn render_counts(&self, s: &mut String) {
        let width = self
            .det_counts
            .keys()
            .chain(self.nondet_counts.keys())
            .map(String::len)
            .max()
            .unwrap_or(4)
            .max(4);
        let _ = writeln!(s, "deterministic records per kind (A | B):");
        for (k, (x, y)) in &self.det_counts {
            let mark = if x != y { "    <- differs" } else { "" };
            let _ = writeln!(s, "  {k:<width$} {x:>7} | {y}{mark}");
        }
        let _ = writeln!(
            s,
            "  count verdict: {}",
            if self.counts_differ() {
                "the counts differ (a divergence, whatever the records before it)"
            } else {
                "the counts agree"
            }
        );
        if self.nondet_counts.is_empty() {
            let _ = writeln!(s, "non-deterministic records per kind: none in either run");
        } else {
            let _ = writeln!(
                s,
                "non-deterministic records per kind (A | B), never compared:"
            );
            for (k, (x, y)) in &self.nondet_counts {
                let _ = writeln!(s, "  {k:<width$} {x:>7} | {y}");
            }
        }
    }

    fn render_divergence(&self, s: &mut String, i: usize) {
        let (a, b) = (self.a, self.b);
        let env = a.envelope;
        let _ = writeln!(
            s,
            "first divergent record: #{i} (deterministic index), fields that differ: {}",
            self.fields.join(", ")
        );
        let start = i.saturating_sub(self.opts.context);
        if start + 1 < i {
            let _ = writeln!(
                s,
                "context ({} both runs share, A's lines):",
                crate::sweep::count((i - 1 - start) as u64, "record")
            );
            for &p in &self.da[start..i - 1] {
                let _ = writeln!(s, "    {}", a.line(&a.records[p]));
            }
        }
        let last = i
            .checked_sub(1)
            .map(|j| (&a.records[self.da[j]], &b.records[self.db[j]]));
        match last {
            Some((x, y)) => {
                let _ = writeln!(
                    s,
                    "last matching record: #{} (A line {}, B line {}):\n    {}",
                    i - 1,
                    x.line_no,
                    y.line_no,
                    a.line(x)
                );
            }
            None => {
                let _ = writeln!(s, "last matching record: none (the first record differs)");
            }
        }
        let (x, y) = (
            self.da.get(i).map(|&p| &a.records[p]),
            self.db.get(i).map(|&p| &b.records[p]),
        );
        let line =
            |r: Option<&Rec>| r.map_or("ended".to_string(), |r| format!("line {}", r.line_no));
        let _ = writeln!(s, "divergent record #{i} (A {}, B {}):", line(x), line(y));
        let empty = Fields::default();
        let (px, py) = (x.map(|r| a.fields(r)), y.map(|r| b.fields(r)));
        let fx = &px.as_ref().unwrap_or(&empty).compared;
        let fy = &py.as_ref().unwrap_or(&empty).compared;
        let mut keys: Vec<&String> = fx.keys().chain(fy.keys()).collect();
        keys.sort_by(|p, q| field_order(p).cmp(&field_order(q)));
        keys.dedup();
        let ended = |r: Option<&Rec>, v: Option<&Value>| match r {
            None => "(ended)".to_string(),
            Some(_) => cell(v),
        };
        let rows: Vec<(String, String, String, bool)> = keys
            .iter()
            .map(|k| {
                let (vx, vy) = (fx.get(*k), fy.get(*k));
                (
                    k.to_string(),
                    ended(x, vx),
                    ended(y, vy),
                    x.is_none() || y.is_none() || vx != vy,
                )
            })
            .chain({
                let sx = &px.as_ref().unwrap_or(&empty).shown;
                let sy = &py.as_ref().unwrap_or(&empty).shown;
                let mut hk: Vec<&String> = sx.keys().chain(sy.keys()).collect();
                hk.sort();
                hk.dedup();
                hk.into_iter()
                    .map(|k| {
                        (
                            format!("{k} (not compared)"),
                            ended(x, sx.get(k)),
                            ended(y, sy.get(k)),
                            false,
                        )
                    })
                    .collect::<Vec<_>>()
            })
            .collect();
        let wk = rows.iter().map(|r| r.0.len()).max().unwrap_or(5).max(5);
        let wa = rows
            .iter()
            .map(|r| r.1.chars().count())
            .max()
            .unwrap_or(1)
            .clamp(1, 60);
        let _ = writeln!(s, "    {:<wk$}  {:<wa$}  B", "field", "A");
        for (k, va, vb, differs) in &rows {
            let m = if *differs { "*" } else { " " };
            let _ = writeln!(s, "  {m} {k:<wk$}  {va:<wa$}  {vb}");
        }
        // The time axis.
        let (tf, unit) = (env.time_field(), env.time_unit());
        let _ = writeln!(s, "time axis ({tf}, {unit}):");
        let at = |r: Option<&Rec>| r.map(|r| r.time as i128);
        let (lx, ly) = match last {
            Some((p, q)) => (Some(p.time as i128), Some(q.time as i128)),
            None => (Some(0), Some(0)),
        };
        let from = if last.is_some() {
            "last match -> divergence"
        } else {
            "start -> divergence"
        };
        let delta = |t: Option<i128>, l: Option<i128>| match (t, l) {
            (Some(t), Some(l)) => format!("{} ({tf} {t})", signed(t - l)),
            _ => "(ended)".to_string(),
        };
        let _ = writeln!(
            s,
            "  {from}: A {}, B {}",
            delta(at(x), lx),
            delta(at(y), ly)
        );
        match (at(x), at(y)) {
            (Some(tx), Some(ty)) => {
                let _ = writeln!(s, "  divergent record, B - A: {} {unit}", signed(ty - tx));
            }
            _ => {
                let _ = writeln!(s, "  divergent record, B - A: (one run ended)");
            }
        }
        self.render_window(s, i);
    }

    /// The non-deterministic records of each run after the last match and before the
    /// divergence, or `nondeterm_window` deterministic records past it.
    fn render_window(&self, s: &mut String, i: usize) {
        let n = self.opts.nondeterm_window;
        let reach = if n == 0 {
            "up to the divergence".to_string()
        } else {
            format!(
                "up to {} past the divergence",
                crate::sweep::count(n as u64, "deterministic record")
            )
        };
        let _ = writeln!(
            s,
            "non-deterministic records between the last match and the divergence ({reach}):"
        );
        for (tag, t, d) in [("A", self.a, &self.da), ("B", self.b, &self.db)] {
            let from = match i.checked_sub(1) {
                Some(j) => d[j] + 1,
                None => 0,
            };
            let to = d
                .get(i.saturating_add(n))
                .copied()
                .unwrap_or(t.records.len());
            let picked: Vec<&Rec> = t.records[from.min(to)..to]
                .iter()
                .filter(|r| !r.deterministic)
                .collect();
            if picked.is_empty() {
                let _ = writeln!(s, "  {tag}: none");
            }
            for r in picked {
                let _ = writeln!(s, "  {tag} line {}: {}", r.line_no, t.line(r));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn recs(env: Envelope, lines: &[&str]) -> TraceRecs {
        let mut t = TraceRecs::new(PathBuf::from("t"), env);
        for (i, l) in lines.iter().enumerate() {
            t.push(l, i + 1).unwrap();
        }
        t
    }

    #[test]
    fn fields_are_compared_as_values_not_bytes() {
        let a = recs(
            Envelope::Calametra,
            &[
                r#"{"seq":0,"t_ns":5,"kind":"k","actor":"a","deterministic":true,"data":{"x":1,"y":{"z":[1,2]}}}"#,
            ],
        );
        let b = recs(
            Envelope::Calametra,
            &[
                r#"{ "t_ns":5, "seq":0, "kind":"k","actor":"a","deterministic":true,"data":{"y":{"z":[1,2]},"x":1}}"#,
            ],
        );
        assert!(analyse(&a, &b, Options::default()).identical());
    }

    #[test]
    fn tsc_host_time_and_seq_are_not_compared() {
        let a = recs(
            Envelope::Tsc,
            &[
                r#"{"seq":0,"tsc":100,"real_tsc":7,"deterministic":true,"kind":"exit","data":{"rip":"0x10"}}"#,
            ],
        );
        let b = recs(
            Envelope::Tsc,
            &[
                r#"{"seq":3,"tsc":100,"real_tsc":9999,"deterministic":true,"kind":"exit","data":{"rip":"0x10"}}"#,
            ],
        );
        let an = analyse(&a, &b, Options::default());
        assert!(an.identical(), "{}", an.render());
    }

    #[test]
    fn detects_the_envelope() {
        let v: Value = serde_json::from_str(r#"{"seq":0,"tsc":1,"kind":"k","data":1}"#).unwrap();
        assert_eq!(Envelope::detect(&v), Some(Envelope::Tsc));
        let v: Value =
            serde_json::from_str(r#"{"seq":0,"t_ns":1,"actor":"x","kind":"k","data":{}}"#).unwrap();
        assert_eq!(Envelope::detect(&v), Some(Envelope::Calametra));
        assert_eq!(Envelope::detect(&Value::Null), None);
    }
}
