//! Reading traces back: a JSON Lines file's [`Record`]s (errors naming the file, line and field;
//! special and oversized files refused before they are read), and where two traces first part
//! ways ([`first_divergence`], [`render_divergence`]). Nothing here writes or hashes a trace
//! ([`crate::trace`] does).

use std::fmt;
use std::io::BufReader;
use std::path::{Path, PathBuf};

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
    /// The line as read, without its newline (its canonical bytes when written by
    /// [`Trace`](super::Trace)).
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

/// One trace line as a JSON object, and readers of its envelope's fields whose errors name the
/// field: the one way a trace line is taken apart ([`parse_record`], and
/// [`crate::divergence`] for the envelopes it compares).
pub(crate) struct EnvelopeFields(pub(crate) serde_json::Map<String, serde_json::Value>);

impl EnvelopeFields {
    /// Parses `line`; `what` names the envelope expected (`trace`).
    pub(crate) fn parse(line: &str, what: &str) -> Result<EnvelopeFields, String> {
        match serde_json::from_str(line) {
            Ok(serde_json::Value::Object(o)) => Ok(EnvelopeFields(o)),
            Ok(_) => Err(format!("expected a JSON object with the {what} envelope")),
            Err(e) => Err(format!(
                "not a JSON object: {}",
                crate::input::json_error_words(&e)
            )),
        }
    }

    /// The unsigned integer field `k`.
    pub(crate) fn num(&self, k: &str) -> Result<u64, String> {
        self.0
            .get(k)
            .and_then(|x| x.as_u64())
            .ok_or_else(|| format!("field `{k}`: expected an unsigned integer"))
    }

    /// The string field `k`.
    pub(crate) fn text(&self, k: &str) -> Result<String, String> {
        self.0
            .get(k)
            .and_then(|x| x.as_str())
            .map(str::to_owned)
            .ok_or_else(|| format!("field `{k}`: expected a string"))
    }

    /// The `deterministic` flag.
    pub(crate) fn deterministic(&self) -> Result<bool, String> {
        self.0
            .get("deterministic")
            .and_then(|x| x.as_bool())
            .ok_or_else(|| "field `deterministic`: expected true or false".to_string())
    }
}

/// Parses one JSONL line into a [`Record`], naming the field that is wrong.
pub fn parse_record(line: &str, line_no: usize) -> Result<Record, String> {
    let env = EnvelopeFields::parse(line, "trace")?;
    let obj = &env.0;
    Ok(Record {
        seq: env.num("seq")?,
        t_ns: env.num("t_ns")?,
        kind: env.text("kind")?,
        actor: env.text("actor")?,
        deterministic: env.deterministic()?,
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
            "context ({} both runs share):\n",
            crate::sweep::count((d.index - start) as u64, "record")
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

/// Parses lines kept by a [`Trace`](super::Trace) into records (they are valid by construction).
pub fn parse_kept(lines: &[String]) -> Vec<Record> {
    lines
        .iter()
        .enumerate()
        .filter_map(|(i, l)| parse_record(l.trim_end_matches('\n'), i + 1).ok())
        .collect()
}
