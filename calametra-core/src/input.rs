//! Reading the files people hand to Calametra (traces, saved cases, specs, fault schedules):
//! only regular files, bounded in size and in line length, with errors that say which limit.
//!
//! A FIFO would block the reader forever, `/dev/zero` or a sparse file would be read until
//! memory runs out: each reader opens its file through [`open_regular`], which refuses anything
//! but a regular file (after following symlinks) and a file larger than the reader's limit, and
//! reads lines through [`Lines`], which refuses a line longer than [`MAX_LINE_BYTES`]. The
//! limits are far above what Calametra writes:
//!
//! | what | limit | what Calametra writes |
//! | --- | --- | --- |
//! | a trace file (`*.jsonl`) | [`MAX_TRACE_BYTES`] = 1 GiB | a record is a few hundred bytes; a long run's trace tens of MB |
//! | one line of a trace | [`MAX_LINE_BYTES`] = 16 MiB | payloads past 64 bytes are a head and a digest; the summary line holds the events |
//! | a saved case, a spec, a fault schedule | [`MAX_DOCUMENT_BYTES`] = 16 MiB | a few KB |
//!
//! A trace read whole ([`crate::trace::read_jsonl`]) takes memory of about eight times
//! its size (each record is kept as its line and its parsed `data`).

use std::fs::File;
use std::io::{BufRead, Read};
use std::path::Path;

/// The largest trace file read: 1 GiB.
pub const MAX_TRACE_BYTES: u64 = 1 << 30;
/// The longest line of a trace file read: 16 MiB.
pub const MAX_LINE_BYTES: usize = 16 << 20;
/// The largest saved case, spec or fault schedule read: 16 MiB.
pub const MAX_DOCUMENT_BYTES: u64 = 16 << 20;

/// What kind of file `path` is, in words, when it is not a regular file.
fn not_regular(ft: &std::fs::FileType) -> &'static str {
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt;
        if ft.is_fifo() {
            return "a FIFO (named pipe)";
        }
        if ft.is_char_device() {
            return "a character device";
        }
        if ft.is_block_device() {
            return "a block device";
        }
        if ft.is_socket() {
            return "a socket";
        }
    }
    if ft.is_dir() {
        return "a directory";
    }
    "not a regular file"
}

/// Bytes in words: `16 MiB`, `1 GiB`, `300 bytes`.
pub fn size_words(n: u64) -> String {
    const UNITS: [(u64, &str); 3] = [(1 << 30, "GiB"), (1 << 20, "MiB"), (1 << 10, "KiB")];
    for (u, name) in UNITS {
        if n >= u && n.is_multiple_of(u) {
            return format!("{} {name}", n / u);
        }
    }
    for (u, name) in UNITS {
        if n >= u {
            return format!("{:.1} {name}", n as f64 / u as f64);
        }
    }
    format!("{n} bytes")
}

/// Opens `path` for reading when it is a regular file (symlinks followed) of at most
/// `max_bytes`; `what` names the file in the error (`trace`, `saved case`). The error is the
/// whole sentence without the path (`is a FIFO (named pipe), not a regular file`), with the
/// OS error when the file cannot be opened.
pub fn open_regular(path: &Path, max_bytes: u64, what: &str) -> Result<File, String> {
    // Looked at before opening: opening a FIFO to read waits for a writer.
    let meta = std::fs::metadata(path).map_err(|e| format!("cannot open the {what}: {e}"))?;
    let ft = meta.file_type();
    if !ft.is_file() {
        return Err(format!(
            "cannot read the {what}: it is {}, not a regular file",
            not_regular(&ft)
        ));
    }
    if meta.len() > max_bytes {
        return Err(format!(
            "cannot read the {what}: it is {} ({} bytes), more than the {} limit for a {what}",
            size_words(meta.len()),
            meta.len(),
            size_words(max_bytes)
        ));
    }
    File::open(path).map_err(|e| format!("cannot open the {what}: {e}"))
}

/// Reads a regular file of at most `max_bytes` as UTF-8 text (see [`open_regular`]).
pub fn read_regular(path: &Path, max_bytes: u64, what: &str) -> Result<String, String> {
    let f = open_regular(path, max_bytes, what)?;
    let mut bytes = Vec::new();
    // A file that grows while it is read stops at the limit too.
    f.take(max_bytes + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| format!("cannot read the {what}: {e}"))?;
    if bytes.len() as u64 > max_bytes {
        return Err(format!(
            "cannot read the {what}: it grew past the {} limit for a {what} while it was read",
            size_words(max_bytes)
        ));
    }
    String::from_utf8(bytes).map_err(|e| {
        format!(
            "the {what} is not UTF-8 text (invalid byte at offset {})",
            e.utf8_error().valid_up_to()
        )
    })
}

/// One line read by [`Lines`].
#[derive(Debug, PartialEq, Eq)]
pub enum Line<'a> {
    /// A line and its 1-based number, without its `\n` (nor the `\r`s before it).
    Text(&'a str, usize),
    /// The last line, which has no newline (a writer killed mid-line, or a file not in JSON
    /// Lines), and its number.
    Unterminated(&'a str, usize),
}

/// Lines of a reader, each at most `max` bytes, as UTF-8 text; errors carry the 1-based line
/// number (0: the whole file).
pub struct Lines<R> {
    reader: R,
    buf: Vec<u8>,
    line_no: usize,
    max: usize,
    total: u64,
    max_total: u64,
}

impl<R: BufRead> Lines<R> {
    /// Lines of `reader`, each at most `max_line` bytes, all together at most `max_total`.
    pub fn new(reader: R, max_line: usize, max_total: u64) -> Self {
        Lines {
            reader,
            buf: Vec::new(),
            line_no: 0,
            max: max_line,
            total: 0,
            max_total,
        }
    }

    /// The next line, `None` at the end.
    #[allow(clippy::should_implement_trait)]
    pub fn next(&mut self) -> Result<Option<Line<'_>>, (usize, String)> {
        self.buf.clear();
        let line_no = self.line_no + 1;
        let mut limited = (&mut self.reader).take(self.max as u64 + 2);
        let n = limited
            .read_until(b'\n', &mut self.buf)
            .map_err(|e| (line_no, format!("cannot read: {e}")))?;
        if n == 0 {
            return Ok(None);
        }
        self.line_no = line_no;
        self.total += n as u64;
        if self.total > self.max_total {
            return Err((
                line_no,
                format!(
                    "the file grew past the {} this reader takes while it was read",
                    size_words(self.max_total)
                ),
            ));
        }
        let terminated = self.buf.last() == Some(&b'\n');
        let mut body = &self.buf[..];
        if terminated {
            body = &body[..body.len() - 1];
        }
        // As `str::trim_end_matches(['\n', '\r'])` did before lines were bounded.
        while body.last() == Some(&b'\r') {
            body = &body[..body.len() - 1];
        }
        if body.len() > self.max {
            return Err((
                line_no,
                format!(
                    "line longer than {} (the longest line read; Calametra writes none so long): not a trace written by Calametra",
                    size_words(self.max as u64)
                ),
            ));
        }
        let text = std::str::from_utf8(body).map_err(|e| {
            (
                line_no,
                format!(
                    "not UTF-8 text (invalid byte at column {})",
                    e.valid_up_to() + 1
                ),
            )
        })?;
        Ok(Some(if terminated {
            Line::Text(text, line_no)
        } else {
            Line::Unterminated(text, line_no)
        }))
    }
}

/// What a JSON parse error means, in words: `truncated (...)` for a document that ends early,
/// `nested too deeply (...)` for serde_json's recursion limit, `not valid JSON: ...` otherwise;
/// each with serde_json's message and position.
pub fn json_error_words(e: &serde_json::Error) -> String {
    let msg = e.to_string();
    if msg.starts_with("recursion limit exceeded") {
        return format!(
            "nested too deeply: more than 128 levels of arrays and objects ({msg}); Calametra writes at most a few levels"
        );
    }
    match e.classify() {
        serde_json::error::Category::Eof => {
            format!("truncated: the JSON ends before it is complete ({msg})")
        }
        _ => format!("not valid JSON: {msg}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn special_files_and_large_files_are_refused_before_reading() {
        let dir = tempfile::tempdir().unwrap();
        let e = open_regular(dir.path(), 10, "trace").unwrap_err();
        assert!(e.contains("a directory, not a regular file"), "{e}");
        #[cfg(unix)]
        {
            let e = open_regular(Path::new("/dev/zero"), 10, "trace").unwrap_err();
            assert!(e.contains("a character device"), "{e}");
        }
        let p = dir.path().join("big");
        std::fs::write(&p, vec![b'x'; 11]).unwrap();
        let e = open_regular(&p, 10, "saved case").unwrap_err();
        assert!(e.contains("11 bytes") && e.contains("10 bytes"), "{e}");
        assert_eq!(read_regular(&p, 11, "saved case").unwrap(), "x".repeat(11));
        let e = open_regular(&dir.path().join("none"), 10, "trace").unwrap_err();
        assert!(e.contains("cannot open the trace"), "{e}");
        assert_eq!(size_words(16 << 20), "16 MiB");
        assert_eq!(size_words(1 << 30), "1 GiB");
        assert_eq!(size_words(1536), "1.5 KiB");
    }

    #[test]
    fn lines_are_bounded_and_numbered() {
        let text = b"ab\r\ncd\n0123456789\nxyz";
        let mut l = Lines::new(&text[..], 9, 1000);
        assert_eq!(l.next().unwrap(), Some(Line::Text("ab", 1)));
        assert_eq!(l.next().unwrap(), Some(Line::Text("cd", 2)));
        let (n, e) = l.next().unwrap_err();
        assert_eq!(n, 3);
        assert!(e.contains("longer than 9 bytes"), "{e}");
        let mut l = Lines::new(&b"ab\nxyz"[..], 9, 1000);
        l.next().unwrap();
        assert_eq!(l.next().unwrap(), Some(Line::Unterminated("xyz", 2)));
        assert_eq!(l.next().unwrap(), None);
        let mut l = Lines::new(&b"ab\ncd\n"[..], 9, 4);
        l.next().unwrap();
        assert!(l.next().unwrap_err().1.contains("grew past"));
        // An endless line stops at the limit.
        let mut l = Lines::new(
            std::io::BufReader::new(std::io::repeat(0)),
            1 << 10,
            u64::MAX,
        );
        assert!(l.next().unwrap_err().1.contains("longer than 1 KiB"));
    }

    #[test]
    fn json_errors_say_truncated_only_when_the_text_ends_early() {
        let e =
            |t: &str| json_error_words(&serde_json::from_str::<serde_json::Value>(t).unwrap_err());
        assert!(
            e("{\"a\": [1,").starts_with("truncated"),
            "{}",
            e("{\"a\": [1,")
        );
        let trailing = e("{\"a\": 1,\n}");
        assert!(
            trailing.starts_with("not valid JSON: trailing comma at line 2 column 1"),
            "{trailing}"
        );
        let deep = e(&"[".repeat(200));
        assert!(deep.starts_with("nested too deeply"), "{deep}");
    }
}
