//! Trace JSONL (`target/calametra/traces/**.jsonl`, what `calametra replay/diff/show` read):
//! each line through `parse_record`, the same bytes through `read_jsonl` (which must agree),
//! and two traces that both parse (the input split at a NUL byte, which no JSON line holds)
//! are compared and their divergence rendered, as `calametra diff` does.
#![no_main]

use calametra_core::trace::{
    first_divergence, hash_lines, parse_record, read_jsonl, render_divergence, Record,
};
use libfuzzer_sys::fuzz_target;
use std::path::PathBuf;
use std::sync::OnceLock;

/// Parses like `read_jsonl`: every line ends in `\n`, none is empty, at least one.
fn records(text: &str) -> Option<Vec<Record>> {
    let mut out = Vec::new();
    let mut rest = text;
    let mut line_no = 0;
    while !rest.is_empty() {
        line_no += 1;
        let (line, tail) = rest.split_once('\n')?;
        let line = line.trim_end_matches(['\n', '\r']);
        if line.is_empty() {
            return None;
        }
        out.push(parse_record(line, line_no).ok()?);
        rest = tail;
    }
    (!out.is_empty()).then_some(out)
}

fn scratch() -> &'static PathBuf {
    static P: OnceLock<PathBuf> = OnceLock::new();
    P.get_or_init(|| {
        std::env::temp_dir().join(format!("calametra-fuzz-trace-{}.jsonl", std::process::id()))
    })
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let (a_text, b_text) = text.split_once('\0').unwrap_or((text, ""));
    let a = records(a_text);
    if !a_text.is_empty() && std::fs::write(scratch(), a_text).is_ok() {
        let file = read_jsonl(scratch());
        assert_eq!(
            file.is_ok(),
            a.is_some(),
            "read_jsonl and parse_record disagree: {file:?}"
        );
    }
    let Some(a) = a else { return };
    let _ = hash_lines(&a);
    let Some(b) = records(b_text) else { return };
    if let Some(d) = first_divergence(&a, &b) {
        let context = data.len() % 24;
        let _ = render_divergence(&a, &d, context);
    }
});
