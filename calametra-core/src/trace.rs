//! The trace: one JSON Lines record per step, and the `sha256:` hash over the deterministic ones.
//!
//! Every record shares one envelope:
//! `{"seq":12,"t_ns":250000,"kind":"transfer","actor":"driver","deterministic":true,"data":{...}}`.
//! The canonical bytes of a record are exactly the line this module writes (keys in this order,
//! no spaces, a trailing `\n`); the trace hash is SHA-256 over the canonical bytes of the
//! deterministic records, fed incrementally so a run need not keep its records.
//!
//! `seq` counts deterministic records only; a record with `deterministic:false` (a wall-clock
//! reading, a host timing) carries the `seq` of the next deterministic record and is never hashed
//! or compared. This is the only place that formats a record or hashes trace bytes.

use sha2::{Digest, Sha256};
use std::fmt;
use std::io::BufReader;
use std::path::{Path, PathBuf};

/// A finished trace hash, printed as `sha256:<64 hex digits>`.
#[derive(Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct TraceHash(pub [u8; 32]);

impl fmt::Display for TraceHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("sha256:")?;
        for b in self.0 {
            write!(f, "{b:02x}")?;
        }
        Ok(())
    }
}

impl fmt::Debug for TraceHash {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(self, f)
    }
}

impl std::str::FromStr for TraceHash {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        let hex = s
            .strip_prefix("sha256:")
            .ok_or_else(|| format!("expected `sha256:<64 hex digits>`, found `{s}`"))?;
        let bytes = crate::hex::decode(hex).map_err(|e| format!("trace hash `{s}`: {e}"))?;
        let arr: [u8; 32] = bytes
            .try_into()
            .map_err(|_| format!("trace hash `{s}`: expected 32 bytes"))?;
        Ok(TraceHash(arr))
    }
}

/// SHA-256 of arbitrary bytes as a lowercase hex string (specs, data digests).
pub fn sha256_hex(bytes: &[u8]) -> String {
    crate::hex::encode(&Sha256::digest(bytes))
}

/// The builder for a record's `data` object. Keys are written in the order they are added.
pub struct Data<'a> {
    buf: &'a mut Vec<u8>,
    first: bool,
}

impl<'a> Data<'a> {
    fn key(&mut self, k: &str) {
        if !self.first {
            self.buf.push(b',');
        }
        self.first = false;
        push_json_bytes(self.buf, k);
        self.buf.push(b':');
    }
    /// A string field.
    pub fn str(&mut self, k: &str, v: &str) -> &mut Self {
        self.key(k);
        push_json_bytes(self.buf, v);
        self
    }
    /// An unsigned integer field.
    pub fn u64(&mut self, k: &str, v: u64) -> &mut Self {
        self.key(k);
        push_u64(self.buf, v);
        self
    }
    /// A signed integer field.
    pub fn i64(&mut self, k: &str, v: i64) -> &mut Self {
        self.key(k);
        if v < 0 {
            self.buf.push(b'-');
        }
        push_u64(self.buf, v.unsigned_abs());
        self
    }
    /// A boolean field.
    pub fn bool(&mut self, k: &str, v: bool) -> &mut Self {
        self.key(k);
        self.buf
            .extend_from_slice(if v { b"true" } else { b"false" });
        self
    }
    /// Bytes as lowercase hex.
    pub fn hex(&mut self, k: &str, v: &[u8]) -> &mut Self {
        self.key(k);
        self.buf.push(b'"');
        push_hex(self.buf, v);
        self.buf.push(b'"');
        self
    }
    /// Bytes of a payload: hex when short, else length, head and a digest so the hash still
    /// covers every byte without putting megabytes in a line.
    pub fn payload(&mut self, k: &str, v: &[u8]) -> &mut Self {
        if v.len() <= 64 {
            return self.hex(k, v);
        }
        self.key(k);
        self.buf.extend_from_slice(b"{\"head\":\"");
        push_hex(self.buf, &v[..32]);
        self.buf.extend_from_slice(b"\",\"sha256\":\"");
        push_hex(self.buf, &Sha256::digest(v)[..16]);
        self.buf.extend_from_slice(b"\"}");
        self
    }
    /// A list of strings.
    pub fn strs<S: AsRef<str>>(&mut self, k: &str, v: &[S]) -> &mut Self {
        self.key(k);
        self.buf.push(b'[');
        for (i, s) in v.iter().enumerate() {
            if i > 0 {
                self.buf.push(b',');
            }
            push_json_bytes(self.buf, s.as_ref());
        }
        self.buf.push(b']');
        self
    }
    /// A field whose value is already valid JSON (for example from `serde_json::to_string`).
    pub fn raw_json(&mut self, k: &str, json: &str) -> &mut Self {
        self.key(k);
        self.buf.extend_from_slice(json.as_bytes());
        self
    }
}

fn push_hex(buf: &mut Vec<u8>, bytes: &[u8]) {
    const D: &[u8; 16] = b"0123456789abcdef";
    buf.reserve(bytes.len() * 2);
    for &b in bytes {
        buf.push(D[(b >> 4) as usize]);
        buf.push(D[(b & 15) as usize]);
    }
}

/// Appends `v` as a JSON string literal (bytes of UTF-8).
fn push_json_bytes(buf: &mut Vec<u8>, v: &str) {
    if !v.bytes().any(|b| b < 0x20 || b == b'"' || b == b'\\') {
        buf.push(b'"');
        buf.extend_from_slice(v.as_bytes());
        buf.push(b'"');
        return;
    }
    let mut s = String::new();
    push_json_str(&mut s, v);
    buf.extend_from_slice(s.as_bytes());
}

/// Appends `v` as a JSON string literal.
pub fn push_json_str(buf: &mut String, v: &str) {
    buf.push('"');
    for c in v.chars() {
        match c {
            '"' => buf.push_str("\\\""),
            '\\' => buf.push_str("\\\\"),
            '\n' => buf.push_str("\\n"),
            '\r' => buf.push_str("\\r"),
            '\t' => buf.push_str("\\t"),
            c if (c as u32) < 0x20 => {
                buf.push_str("\\u00");
                crate::hex::push(buf, &[c as u8]);
            }
            c => buf.push(c),
        }
    }
    buf.push('"');
}

fn push_u64(buf: &mut Vec<u8>, mut v: u64) {
    let mut tmp = [0u8; 20];
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    buf.extend_from_slice(&tmp[i..]);
}

/// The trace of one run: numbering, hashing, and (on request) the kept lines.
pub struct Trace {
    seq: u64,
    hasher: Sha256,
    line: Vec<u8>,
    kept: Option<Vec<String>>,
    records: u64,
}

impl Trace {
    /// A trace that hashes every deterministic record and keeps lines only when `keep` is set.
    pub fn new(keep: bool) -> Self {
        Trace {
            seq: 0,
            hasher: Sha256::new(),
            line: Vec::with_capacity(256),
            kept: keep.then(Vec::new),
            records: 0,
        }
    }

    /// Appends one record. `fill` writes the `data` object's fields.
    pub fn emit(
        &mut self,
        t_ns: u64,
        kind: &str,
        actor: &str,
        deterministic: bool,
        fill: impl FnOnce(&mut Data<'_>),
    ) {
        let line = &mut self.line;
        line.clear();
        line.extend_from_slice(b"{\"seq\":");
        push_u64(line, self.seq);
        line.extend_from_slice(b",\"t_ns\":");
        push_u64(line, t_ns);
        line.extend_from_slice(b",\"kind\":");
        push_json_bytes(line, kind);
        line.extend_from_slice(b",\"actor\":");
        push_json_bytes(line, actor);
        line.extend_from_slice(if deterministic {
            b",\"deterministic\":true,\"data\":{"
        } else {
            b",\"deterministic\":false,\"data\":{"
        });
        {
            let mut d = Data {
                buf: line,
                first: true,
            };
            fill(&mut d);
        }
        line.extend_from_slice(b"}}\n");
        if deterministic {
            self.hasher.update(&line[..]);
            self.seq += 1;
        }
        self.records += 1;
        if let Some(kept) = &mut self.kept {
            // Valid UTF-8 by construction: only &str pieces and ASCII were written.
            kept.push(String::from_utf8_lossy(line).into_owned());
        }
    }

    /// Number of deterministic records so far.
    pub fn len(&self) -> u64 {
        self.seq
    }

    /// Whether no deterministic record was written.
    pub fn is_empty(&self) -> bool {
        self.seq == 0
    }

    /// Number of records of both kinds so far.
    pub fn total_records(&self) -> u64 {
        self.records
    }

    /// The hash of the deterministic records so far (the trace goes on).
    pub fn hash(&self) -> TraceHash {
        TraceHash(self.hasher.clone().finalize().into())
    }

    /// The kept lines, each ending in `\n` (empty unless the trace was made with `keep`).
    pub fn into_lines(self) -> Vec<String> {
        self.kept.unwrap_or_default()
    }

    /// The kept lines so far.
    pub fn lines(&self) -> &[String] {
        self.kept.as_deref().unwrap_or(&[])
    }
}

/// Hash of a sequence of already-canonical lines (as written by [`Trace`]), deterministic only.
pub fn hash_lines<'a>(lines: impl IntoIterator<Item = &'a Record>) -> TraceHash {
    let mut h = Sha256::new();
    for r in lines {
        if r.deterministic {
            h.update(r.line.as_bytes());
            h.update(b"\n");
        }
    }
    TraceHash(h.finalize().into())
}

/// One record read back from a JSONL file.
#[derive(Clone, Debug)]
pub struct Record {
    /// The `seq` field.
    pub seq: u64,
    /// Virtual time in nanoseconds.
    pub t_ns: u64,
    /// The record kind (`transfer`, `task`, ...).
    pub kind: String,
    /// Who acted.
    pub actor: String,
    /// Whether the record is compared and hashed.
    pub deterministic: bool,
    /// The `data` object.
    pub data: serde_json::Value,
    /// The line as read, without its newline (its canonical bytes when written by [`Trace`]).
    pub line: String,
    /// 1-based line number in its file.
    pub line_no: usize,
}

/// A trace file that could not be read.
#[derive(Debug)]
pub struct TraceFileError {
    /// The file.
    pub path: PathBuf,
    /// 1-based line, or 0 for the whole file.
    pub line: usize,
    /// What was wrong and what was expected.
    pub message: String,
}

impl fmt::Display for TraceFileError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path.display(), self.message)
        } else {
            write!(f, "{}:{}: {}", self.path.display(), self.line, self.message)
        }
    }
}

impl std::error::Error for TraceFileError {}

/// Parses one JSONL line into a [`Record`], naming the field that is wrong.
pub fn parse_record(line: &str, line_no: usize) -> Result<Record, String> {
    let v: serde_json::Value = serde_json::from_str(line)
        .map_err(|e| format!("not a JSON object: {}", crate::input::json_error_words(&e)))?;
    let obj = v
        .as_object()
        .ok_or_else(|| "expected a JSON object with the trace envelope".to_string())?;
    let num = |k: &str| -> Result<u64, String> {
        obj.get(k)
            .and_then(|x| x.as_u64())
            .ok_or_else(|| format!("field `{k}`: expected an unsigned integer"))
    };
    let text = |k: &str| -> Result<String, String> {
        obj.get(k)
            .and_then(|x| x.as_str())
            .map(str::to_owned)
            .ok_or_else(|| format!("field `{k}`: expected a string"))
    };
    Ok(Record {
        seq: num("seq")?,
        t_ns: num("t_ns")?,
        kind: text("kind")?,
        actor: text("actor")?,
        deterministic: obj
            .get("deterministic")
            .and_then(|x| x.as_bool())
            .ok_or_else(|| "field `deterministic`: expected true or false".to_string())?,
        data: obj
            .get("data")
            .filter(|d| d.is_object())
            .cloned()
            .ok_or_else(|| "field `data`: expected an object".to_string())?,
        line: line.to_string(),
        line_no,
    })
}

/// Reads a JSONL trace. An empty file, a truncated last line or a malformed record is an error
/// naming the file and line. Only a regular file of at most [`crate::input::MAX_TRACE_BYTES`]
/// is read, in lines of at most [`crate::input::MAX_LINE_BYTES`] (a FIFO, `/dev/zero` or a
/// huge file is refused before it is read).
pub fn read_jsonl(path: &Path) -> Result<Vec<Record>, TraceFileError> {
    let mut out = Vec::new();
    for_each_record(path, |r| {
        out.push(r);
        Ok(())
    })?;
    Ok(out)
}

/// Reads a JSONL trace record by record, as [`read_jsonl`] does, handing each to `f` (which
/// may stop the reading with an error message for that record's line) instead of keeping them.
pub fn for_each_record(
    path: &Path,
    mut f: impl FnMut(Record) -> Result<(), String>,
) -> Result<(), TraceFileError> {
    use crate::input::{open_regular, Line, Lines, MAX_LINE_BYTES, MAX_TRACE_BYTES};
    let err = |line: usize, message: String| TraceFileError {
        path: path.to_path_buf(),
        line,
        message,
    };
    let file = open_regular(path, MAX_TRACE_BYTES, "trace").map_err(|e| err(0, e))?;
    let mut lines = Lines::new(BufReader::new(file), MAX_LINE_BYTES, MAX_TRACE_BYTES);
    let mut any = false;
    while let Some(line) = lines.next().map_err(|(n, m)| err(n, m))? {
        let (text, line_no) = match line {
            Line::Text(t, n) => (t, n),
            Line::Unterminated(t, n) => {
                // A line that does not parse says why; one that does was cut at its newline.
                let why = match serde_json::from_str::<serde_json::Value>(t) {
                    Ok(_) => "truncated record: the last line has no newline (was the writer killed?)".to_string(),
                    Err(e) if e.classify() == serde_json::error::Category::Eof => format!(
                        "truncated record: the last line has no newline and its JSON ends early (was the writer killed?): {e}"
                    ),
                    Err(_) if n == 1 && t.trim() == "{" => document_instead(path),
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
        let r = match parse_record(text, line_no) {
            Ok(r) => r,
            // A JSON document spread over lines (a saved case) is not JSON Lines: say what the
            // document as a whole is, with its own line and column.
            Err(_) if line_no == 1 && text.trim() == "{" => {
                return Err(err(1, document_instead(path)));
            }
            Err(m) => return Err(err(line_no, m)),
        };
        any = true;
        f(r).map_err(|m| err(line_no, m))?;
    }
    if !any {
        return Err(err(0, "empty trace; expected JSON Lines records".into()));
    }
    Ok(())
}

/// The error for a file whose first line is a lone `{`: a JSON document over several lines.
pub(crate) fn document_instead(path: &Path) -> String {
    use crate::input::{read_regular, MAX_DOCUMENT_BYTES};
    let what = "not a JSON Lines trace: a JSON document spread over several lines (a saved case?)";
    match read_regular(path, MAX_DOCUMENT_BYTES, "document") {
        Err(e) => format!("{what}; {e}"),
        Ok(text) => match serde_json::from_str::<serde_json::Value>(&text) {
            Err(e) => format!(
                "{what}, and as a document it is {}",
                crate::input::json_error_words(&e)
            ),
            Ok(_) => what.to_string(),
        },
    }
}

/// Where two traces first part ways.
#[derive(Debug, Clone)]
pub struct Divergence {
    /// Index among deterministic records.
    pub index: usize,
    /// The record of the first trace there (None when it ended first).
    pub left: Option<Record>,
    /// The record of the second trace there (None when it ended first).
    pub right: Option<Record>,
    /// The top-level and `data.` fields that differ.
    pub fields: Vec<String>,
}

/// The first deterministic record at which `a` and `b` differ, or None when they are the same.
pub fn first_divergence(a: &[Record], b: &[Record]) -> Option<Divergence> {
    let da: Vec<&Record> = a.iter().filter(|r| r.deterministic).collect();
    let db: Vec<&Record> = b.iter().filter(|r| r.deterministic).collect();
    let n = da.len().max(db.len());
    for i in 0..n {
        match (da.get(i), db.get(i)) {
            (Some(x), Some(y)) if x.line == y.line => continue,
            (x, y) => {
                let fields = match (x, y) {
                    (Some(x), Some(y)) => differing_fields(x, y),
                    _ => vec!["(one trace ended)".to_string()],
                };
                return Some(Divergence {
                    index: i,
                    left: x.map(|r| (*r).clone()),
                    right: y.map(|r| (*r).clone()),
                    fields,
                });
            }
        }
    }
    None
}

fn differing_fields(x: &Record, y: &Record) -> Vec<String> {
    let mut out = Vec::new();
    if x.seq != y.seq {
        out.push("seq".into());
    }
    if x.t_ns != y.t_ns {
        out.push("t_ns".into());
    }
    if x.kind != y.kind {
        out.push("kind".into());
    }
    if x.actor != y.actor {
        out.push("actor".into());
    }
    let empty = serde_json::Map::new();
    let ox = x.data.as_object().unwrap_or(&empty);
    let oy = y.data.as_object().unwrap_or(&empty);
    let mut keys: Vec<&String> = ox.keys().chain(oy.keys()).collect();
    keys.sort();
    keys.dedup();
    for k in keys {
        if ox.get(k) != oy.get(k) {
            out.push(format!("data.{k}"));
        }
    }
    if out.is_empty() {
        out.push("(formatting)".into());
    }
    out
}

/// Renders a divergence with `context` deterministic records before it, for people.
pub fn render_divergence(a: &[Record], d: &Divergence, context: usize) -> String {
    let da: Vec<&Record> = a.iter().filter(|r| r.deterministic).collect();
    let mut s = String::new();
    let start = d.index.saturating_sub(context);
    s.push_str(&format!(
        "first divergent record: #{} (deterministic index), fields that differ: {}\n",
        d.index,
        d.fields.join(", ")
    ));
    if start < d.index {
        s.push_str(&format!(
            "context ({} records both runs share):\n",
            d.index - start
        ));
        for r in &da[start..d.index] {
            s.push_str("    ");
            s.push_str(&r.line);
            s.push('\n');
        }
    }
    match &d.left {
        Some(r) => s.push_str(&format!("  - {}\n", r.line)),
        None => s.push_str("  - (first run ended here)\n"),
    }
    match &d.right {
        Some(r) => s.push_str(&format!("  + {}\n", r.line)),
        None => s.push_str("  + (second run ended here)\n"),
    }
    s
}

/// Parses lines kept by a [`Trace`] into records (they are valid by construction).
pub fn parse_kept(lines: &[String]) -> Vec<Record> {
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| parse_record(l.trim_end_matches('\n'), i + 1).ok())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envelope_is_canonical_and_hash_covers_only_deterministic_records() {
        let mut t = Trace::new(true);
        t.emit(250_000, "transfer", "driver", true, |d| {
            d.str("site", "ctrl.get_status#1")
                .u64("len", 4)
                .hex("data", &[1, 0xab]);
        });
        t.emit(7, "mark", "host", false, |d| {
            d.u64("wall_ns", 123);
        });
        let lines = t.lines().to_vec();
        assert_eq!(
            lines[0],
            "{\"seq\":0,\"t_ns\":250000,\"kind\":\"transfer\",\"actor\":\"driver\",\"deterministic\":true,\"data\":{\"site\":\"ctrl.get_status#1\",\"len\":4,\"data\":\"01ab\"}}\n"
        );
        assert!(lines[1].starts_with("{\"seq\":1,"));
        let mut only = Trace::new(false);
        only.emit(250_000, "transfer", "driver", true, |d| {
            d.str("site", "ctrl.get_status#1")
                .u64("len", 4)
                .hex("data", &[1, 0xab]);
        });
        assert_eq!(t.hash(), only.hash());
        let recs = parse_kept(&lines);
        assert_eq!(hash_lines(&recs), t.hash());
    }

    #[test]
    fn strings_are_escaped() {
        let mut t = Trace::new(true);
        t.emit(0, "mark", "a\"b", true, |d| {
            d.str("m", "line\nnext\u{1}");
        });
        let r = parse_record(t.lines()[0].trim_end(), 1).unwrap();
        assert_eq!(r.actor, "a\"b");
        assert_eq!(r.data["m"], "line\nnext\u{1}");
    }

    #[test]
    fn divergence_names_fields() {
        let mut a = Trace::new(true);
        let mut b = Trace::new(true);
        for i in 0..5 {
            a.emit(i, "task", "t", true, |d| {
                d.u64("i", i);
            });
            b.emit(i, "task", "t", true, |d| {
                d.u64("i", if i == 3 { 9 } else { i });
            });
        }
        let (ra, rb) = (parse_kept(a.lines()), parse_kept(b.lines()));
        let d = first_divergence(&ra, &rb).unwrap();
        assert_eq!(d.index, 3);
        assert_eq!(d.fields, vec!["data.i".to_string()]);
        let text = render_divergence(&ra, &d, 2);
        assert!(text.contains("context (2 records"), "{text}");
        assert!(first_divergence(&ra, &ra).is_none());
    }

    #[test]
    fn hash_parses_back() {
        let t = Trace::new(false);
        let h = t.hash();
        assert_eq!(h.to_string().parse::<TraceHash>().unwrap(), h);
        assert!("sha1:00".parse::<TraceHash>().is_err());
    }
}
