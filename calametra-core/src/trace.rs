//! The trace: one record per step, the `sha256:` hash over the deterministic ones, and the
//! record's two forms: the canonical binary encoding that is hashed, and the JSON Lines text
//! that is written out or kept.
//!
//! Every record shares one envelope:
//! `{"seq":12,"t_ns":250000,"kind":"transfer","actor":"driver","deterministic":true,"data":{...}}`.
//!
//! # The hash (version [`HASH_VERSION`] = 3)
//!
//! The trace hash is SHA-256 over the canonical binary encoding of the deterministic records, in
//! order, fed as they are produced (a run need not keep its records, and JSON is formatted only
//! when records are kept or written). Integers are unsigned LEB128 varints (7 bits a byte, low
//! bits first, the high bit set on every byte but the last; the shortest form); a *difference*
//! is the wrapping 64-bit difference in zigzag form (0, -1, 1, -2, ... as 0, 1, 2, 3, ...) as a
//! varint. One record encodes as
//!
//! | part | bytes |
//! |---|---|
//! | `seq` | difference from the previous record's `seq` plus one (0 for the first record's `seq` 0) |
//! | `t_ns` | difference from the previous record's `t_ns` (the first record's from 0) |
//! | `kind` | string |
//! | `actor` | string |
//! | `data` | each field in the order written: its key, then its value; then a `0x00` byte |
//!
//! **Strings are interned per trace**: a *string* is a varint code: `0`, then its UTF-8 byte
//! length (varint) and its bytes, for a string the trace has not had before, which then gets
//! the next index (0, 1, 2, ... in the order strings first appear); or its index plus one for a
//! string it has had. A *key* is the same code plus one (so `0x00` ends the object). Kinds,
//! actors, keys, string values, hex bytes and site-name bases all share the one table, which
//! holds at most 4,096 strings (a new string after that is written out every time and gets no
//! index). A *value* is one tag byte and its body: `0x01` string (a string); `0x02` unsigned
//! integer (varint); `0x03` negative integer (varint of its magnitude); `0x04` false; `0x05`
//! true; `0x06` null; `0x07` other number (f64 bits, 8 bytes little-endian); `0x08` array
//! (count as a varint, then the values); `0x09` object (its fields as in `data`, then `0x00`);
//! `0x0a` hex: a JSON string of an even, non-zero number of lowercase hex digits, as the string
//! of the bytes it spells (so `"4001"` is the two bytes `0x40 0x01`); `0x0b` site: a JSON
//! string `<base>#<n>` where `<n>` is decimal digits without a leading zero (`0` itself
//! allowed) that fit 64 bits, split at its last `#`, as the string `<base>` and `n` as a
//! varint. Every JSON string is written as exactly one of `0x0b`, `0x0a`, `0x01`, in that order
//! of preference.
//!
//! The encoding is a function of the records' JSON values in order (`deterministic` is not
//! encoded, only deterministic records are), so records read back from a JSONL file hash
//! exactly as they did when produced ([`hash_lines`]); every part is length-prefixed, tagged or
//! terminated and the table is rebuilt by reading in order, so two record sequences encode
//! alike only if their JSON values are alike, key order included.
//!
//! Older versions, which [`hash_records`] still computes so a saved case of that version can be
//! checked byte-exactly and migrated: version 1 hashed the JSON lines themselves (each with its
//! `\n`); version 2 is the encoding above with every string written out as its byte length and
//! bytes (kinds, actors and string values alike; hex bytes as their hex string, site names
//! whole), keys as their byte length plus one and their bytes, `seq` and `t_ns` as plain
//! varints, and `data` as an object value (`0x09`, fields, `0x00`). One traversal
//! (`encode::Sink`) writes both binary versions.
//!
//! `seq` counts deterministic records only; a record with `deterministic:false` (a wall-clock
//! reading, a host timing) carries the `seq` of the next deterministic record and is never hashed
//! or compared. This is the only place that formats or encodes a record or hashes trace bytes.

use sha2::{Digest, Sha256};
use std::fmt;

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

/// The version of the trace hash's encoding this build produces (see the module docs).
pub const HASH_VERSION: u64 = 3;

/// The trace hash versions this build can compute: 1 (JSON lines), 2 (binary encoding) and 3
/// (binary encoding with interned strings).
pub const HASH_VERSIONS: &[u64] = &[1, 2, 3];

/// The builder for a record's `data` object. Keys are written in the order they are added, to
/// the binary encoding (when the record is hashed) and the JSON text (when it is kept).
pub struct Data<'a> {
    /// The binary encoding: the trace's when the record is deterministic, else one whose bytes
    /// are thrown away (so a field writes to it without asking whether it is wanted).
    bin: &'a mut V3,
    json: Option<&'a mut Vec<u8>>,
    first: bool,
}

// The binary side of every field is inlined into the caller (a literal key or value then costs
// no hashing of its bytes: the table's probe words are constants); the JSON side, wanted only
// when lines are kept, stays out of line, behind one test a field.
impl<'a> Data<'a> {
    /// A string field.
    #[inline(always)]
    pub fn str(&mut self, k: &str, v: &str) -> &mut Self {
        if let Some(json) = self.json.as_deref_mut() {
            json_key(json, &mut self.first, k);
            push_json_bytes(json, v);
        }
        self.bin.key(k);
        self.bin.str(v);
        self
    }
    /// A site name field, `<base>#<n>`, given by its parts: the same record as
    /// `str(k, "<base>#<n>")`, without building the name unless the line is kept.
    #[inline(always)]
    pub fn site(&mut self, k: &str, base: &str, n: u64) -> &mut Self {
        if let Some(json) = self.json.as_deref_mut() {
            json_key(json, &mut self.first, k);
            json_site(json, base, n);
        }
        self.bin.key(k);
        self.bin.site(base, n);
        self
    }
    /// An unsigned integer field.
    #[inline(always)]
    pub fn u64(&mut self, k: &str, v: u64) -> &mut Self {
        if let Some(json) = self.json.as_deref_mut() {
            json_key(json, &mut self.first, k);
            push_u64(json, v);
        }
        self.bin.key(k);
        self.bin.uint(v);
        self
    }
    /// A signed integer field.
    #[inline(always)]
    pub fn i64(&mut self, k: &str, v: i64) -> &mut Self {
        if let Some(json) = self.json.as_deref_mut() {
            json_key(json, &mut self.first, k);
            push_i64(json, v);
        }
        self.bin.key(k);
        // A non-negative i64 is the same JSON as a u64, so it encodes as one.
        if v < 0 {
            self.bin.neg(v.unsigned_abs());
        } else {
            self.bin.uint(v.unsigned_abs());
        }
        self
    }
    /// A boolean field.
    #[inline(always)]
    pub fn bool(&mut self, k: &str, v: bool) -> &mut Self {
        if let Some(json) = self.json.as_deref_mut() {
            json_key(json, &mut self.first, k);
            json.extend_from_slice(if v { b"true" } else { b"false" });
        }
        self.bin.key(k);
        self.bin.bool(v);
        self
    }
    /// Bytes as lowercase hex.
    #[inline(always)]
    pub fn hex(&mut self, k: &str, v: &[u8]) -> &mut Self {
        if let Some(json) = self.json.as_deref_mut() {
            json_key(json, &mut self.first, k);
            json_hex(json, v);
        }
        self.bin.key(k);
        self.bin.hex(v);
        self
    }
    /// Bytes of a payload: hex when short, else length, head and a digest so the hash still
    /// covers every byte without putting megabytes in a line.
    #[inline(always)]
    pub fn payload(&mut self, k: &str, v: &[u8]) -> &mut Self {
        if v.len() <= 64 {
            return self.hex(k, v);
        }
        self.long_payload(k, v)
    }
    #[inline(never)]
    fn long_payload(&mut self, k: &str, v: &[u8]) -> &mut Self {
        let digest = Sha256::digest(v);
        if let Some(json) = self.json.as_deref_mut() {
            json_key(json, &mut self.first, k);
            json.extend_from_slice(b"{\"head\":");
            json_hex(json, &v[..32]);
            json.extend_from_slice(b",\"sha256\":");
            json_hex(json, &digest[..16]);
            json.push(b'}');
        }
        let bin = &mut *self.bin;
        bin.key(k);
        bin.object();
        bin.key("head");
        bin.hex(&v[..32]);
        bin.key("sha256");
        bin.hex(&digest[..16]);
        bin.end();
        self
    }
    /// A list of strings.
    pub fn strs<S: AsRef<str>>(&mut self, k: &str, v: &[S]) -> &mut Self {
        if let Some(json) = self.json.as_deref_mut() {
            json_key(json, &mut self.first, k);
            json.push(b'[');
            for (i, s) in v.iter().enumerate() {
                if i > 0 {
                    json.push(b',');
                }
                push_json_bytes(json, s.as_ref());
            }
            json.push(b']');
        }
        let bin = &mut *self.bin;
        bin.key(k);
        bin.array(v.len());
        for s in v {
            bin.str(s.as_ref());
        }
        self
    }
    /// A field whose value is already valid JSON (for example from `serde_json::to_string`).
    /// Text that is not JSON is written as a string instead, so the record stays valid.
    pub fn raw_json(&mut self, k: &str, json: &str) -> &mut Self {
        let node = match serde_json::from_str::<Node>(json) {
            Ok(n) => n,
            Err(_) => return self.str(k, json),
        };
        if let Some(out) = self.json.as_deref_mut() {
            json_key(out, &mut self.first, k);
            out.extend_from_slice(json.trim().as_bytes());
        }
        self.bin.key(k);
        node.encode(self.bin);
        self
    }
}

/// A kept line's `"<k>":`, after a `,` unless it is the first field.
#[inline(never)]
fn json_key(json: &mut Vec<u8>, first: &mut bool, k: &str) {
    if !*first {
        json.push(b',');
    }
    *first = false;
    push_json_bytes(json, k);
    json.push(b':');
}

/// A kept line's `"<base>#<n>"`.
#[inline(never)]
fn json_site(json: &mut Vec<u8>, base: &str, n: u64) {
    let mut name = String::with_capacity(base.len() + 4);
    name.push_str(base);
    name.push('#');
    crate::clock::push_decimal(&mut name, n);
    push_json_bytes(json, &name);
}

/// A kept line's `"<hex digits>"`.
#[inline(never)]
fn json_hex(json: &mut Vec<u8>, v: &[u8]) {
    json.push(b'"');
    push_hex(json, v);
    json.push(b'"');
}

#[inline(never)]
fn push_i64(json: &mut Vec<u8>, v: i64) {
    if v < 0 {
        json.push(b'-');
    }
    push_u64(json, v.unsigned_abs());
}

/// Appends `v` as a JSON string literal (bytes of UTF-8).
#[inline(never)]
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

#[inline(never)]
fn push_u64(buf: &mut Vec<u8>, v: u64) {
    buf.extend_from_slice(decimal(v, &mut [0; 20]));
}

/// The decimal digits of `v` (ASCII), written into `tmp`, without the formatting machinery:
/// the decimal formatter of byte buffers (a kept line's numbers); text is appended by
/// [`crate::clock::push_decimal`].
pub(crate) fn decimal(mut v: u64, tmp: &mut [u8; 20]) -> &[u8] {
    let mut i = tmp.len();
    loop {
        i -= 1;
        tmp[i] = b'0' + (v % 10) as u8;
        v /= 10;
        if v == 0 {
            break;
        }
    }
    &tmp[i..]
}

/// Encoded bytes gathered before they are handed to SHA-256 (fewer, larger updates).
const HASH_CHUNK: usize = 4096;

/// The trace of one run: numbering, hashing, and (on request) the kept lines.
pub struct Trace {
    seq: u64,
    hasher: Sha256,
    /// The binary encoding; its `buf` holds deterministic records not yet fed to `hasher`.
    enc: V3,
    /// Where a non-deterministic record's fields are encoded when its line is kept: emptied
    /// after each (no memory until a trace keeps one).
    discard: V3,
    line: Vec<u8>,
    kept: Option<Vec<String>>,
    records: u64,
}

impl Trace {
    /// A trace that hashes every deterministic record and keeps lines only when `keep` is set.
    pub fn new(keep: bool) -> Self {
        let mut enc = pool::take::<V3>(Pool::TraceEncoder).unwrap_or_default();
        enc.clear();
        Trace {
            seq: 0,
            hasher: Sha256::new(),
            enc,
            discard: V3::default(),
            line: Vec::with_capacity(if keep { 256 } else { 0 }),
            kept: keep.then(Vec::new),
            records: 0,
        }
    }

    /// Makes this trace what `Trace::new(keep)` gives, in place, keeping its encoder's memory
    /// (a world kept for the thread's next run resets its trace so).
    pub(crate) fn reset(&mut self, keep: bool) {
        let Trace {
            seq,
            hasher,
            enc,
            discard: _,
            line,
            kept,
            records,
        } = self;
        *seq = 0;
        *hasher = Sha256::new();
        enc.clear();
        line.clear();
        if keep {
            line.reserve(256);
        }
        *kept = keep.then(Vec::new);
        *records = 0;
    }

    /// Whether records are kept as JSON lines (and so whether `fill` of a non-deterministic
    /// record runs at all).
    pub fn keeps(&self) -> bool {
        self.kept.is_some()
    }

    /// Appends one record. `fill` writes the `data` object's fields: to the binary encoding
    /// when the record is deterministic, to its JSON line when lines are kept; it is not called
    /// when neither is wanted.
    #[inline]
    pub fn emit(
        &mut self,
        t_ns: u64,
        kind: &str,
        actor: &str,
        deterministic: bool,
        fill: impl FnOnce(&mut Data<'_>),
    ) {
        self.records += 1;
        let keep = self.kept.is_some();
        if !deterministic && !keep {
            return;
        }
        if deterministic {
            self.enc.head(self.seq, t_ns, kind, actor);
        }
        if keep {
            self.begin_line(t_ns, kind, actor, deterministic);
        }
        fill(&mut Data {
            bin: if deterministic {
                &mut self.enc
            } else {
                &mut self.discard
            },
            json: keep.then_some(&mut self.line),
            first: true,
        });
        if !deterministic {
            // Only kept lines wanted this record's fields.
            self.discard.clear();
        } else {
            self.enc.end();
            self.seq += 1;
            if self.enc.buf.len() >= HASH_CHUNK {
                self.flush();
            }
        }
        if keep {
            self.end_line();
        }
    }

    /// A kept line's envelope, up to the `data` object's first field.
    #[inline(never)]
    fn begin_line(&mut self, t_ns: u64, kind: &str, actor: &str, deterministic: bool) {
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
    }

    /// Ends a kept line and keeps it.
    #[inline(never)]
    fn end_line(&mut self) {
        if let Some(kept) = &mut self.kept {
            let line = &mut self.line;
            line.extend_from_slice(b"}}\n");
            // Valid UTF-8 by construction: only &str pieces and ASCII were written.
            kept.push(String::from_utf8_lossy(line).into_owned());
        }
    }

    /// Hands the encoded bytes gathered so far to SHA-256.
    #[inline(never)]
    fn flush(&mut self) {
        self.hasher.update(&self.enc.buf);
        self.enc.buf.clear();
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

    /// The hash (version [`HASH_VERSION`]) of the deterministic records so far (the trace goes
    /// on).
    pub fn hash(&self) -> TraceHash {
        let mut h = self.hasher.clone();
        h.update(&self.enc.buf);
        TraceHash(h.finalize().into())
    }

    /// The kept lines, each ending in `\n` (empty unless the trace was made with `keep`).
    pub fn into_lines(mut self) -> Vec<String> {
        self.kept.take().unwrap_or_default()
    }

    /// The kept lines so far.
    pub fn lines(&self) -> &[String] {
        self.kept.as_deref().unwrap_or(&[])
    }
}

impl Drop for Trace {
    /// Leaves the encoder (its buffer and string table's memory) to the thread's next trace.
    fn drop(&mut self) {
        let enc = std::mem::take(&mut self.enc);
        // Of two, the encoder with more memory is kept (a trace made only to be replaced does
        // not push out the one a run used).
        let keep = match pool::take::<V3>(Pool::TraceEncoder) {
            Some(old) if old.room() >= enc.room() => old,
            _ => enc,
        };
        pool::put(Pool::TraceEncoder, keep);
    }
}

/// The trace hash (version [`HASH_VERSION`]) of records read back from JSON Lines: their
/// canonical binary encoding, deterministic records only, so it equals the hash [`Trace`]
/// computed when it wrote them. A record whose line does not parse contributes its bytes as
/// written (so an edited file still hashes differently from the original).
pub fn hash_lines<'a>(lines: impl IntoIterator<Item = &'a Record>) -> TraceHash {
    hash_records(lines, HASH_VERSION).unwrap_or(TraceHash([0; 32]))
}

/// The trace hash of `records` under encoding `version` (1: the JSON lines themselves, each
/// followed by `\n`; 2 and 3: the binary encodings), or `None` for a version this build does
/// not know.
pub fn hash_records<'a>(
    records: impl IntoIterator<Item = &'a Record>,
    version: u64,
) -> Option<TraceHash> {
    let mut h = Sha256::new();
    encode::encode_with(records, version, |b| h.update(b)).then(|| TraceHash(h.finalize().into()))
}

/// The bytes the trace hash of `records` under `version` is computed over (see
/// [`hash_records`]), or `None` for a version this build does not know.
pub fn encode_records<'a>(
    records: impl IntoIterator<Item = &'a Record>,
    version: u64,
) -> Option<Vec<u8>> {
    let mut out = Vec::new();
    encode::encode_with(records, version, |b| out.extend_from_slice(b)).then_some(out)
}

mod encode;
mod read;
use crate::pool::{self, Pool};
use encode::{push_hex, Node, Sink, V3};
pub use read::*;

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

    /// The bytes of four records, pinned: a change here is a new [`HASH_VERSION`].
    #[test]
    fn binary_encoding_is_pinned() {
        let mut t = Trace::new(true);
        t.emit(250_000, "transfer", "driver", true, |d| {
            d.str("site", "ctrl#1")
                .u64("len", 300)
                .hex("data", &[1, 0xab]);
        });
        #[rustfmt::skip]
        let first: &[u8] = &[
            0, // seq 0: the expected one (zigzag 0)
            0xa0, 0xc2, 0x1e, // t_ns +250000: zigzag 500000
            0, 8, b't', b'r', b'a', b'n', b's', b'f', b'e', b'r', // new string 0
            0, 6, b'd', b'r', b'i', b'v', b'e', b'r', // new string 1
            1, 4, b's', b'i', b't', b'e', // key: new string 2
            0x0b, 0, 4, b'c', b't', b'r', b'l', 1, // site: base new string 3, n 1
            1, 3, b'l', b'e', b'n', 0x02, 0xac, 0x02, // key: new string 4; 300
            1, 4, b'd', b'a', b't', b'a', 0x0a, 0, 2, 0x01, 0xab, // hex: new string 6
            0x00, // end of data
        ];
        assert_eq!(t.enc.buf, first);
        t.emit(1, "mark", "host", false, |d| {
            d.u64("wall_ns", 5);
        });
        assert_eq!(
            t.enc.buf.len(),
            first.len(),
            "not encoded: not deterministic"
        );
        t.emit(250_000, "transfer", "driver", true, |d| {
            d.site("site", "ctrl", 2)
                .str("status", "ok")
                .hex("data", &[1, 0xab]);
        });
        #[rustfmt::skip]
        let second: &[u8] = &[
            0, 0, 1, 2, // seq and t as expected; strings 0 and 1 again
            4, 0x0b, 4, 2, // key string 2; site: base string 3, n 2
            1, 6, b's', b't', b'a', b't', b'u', b's', // key: new string 7
            0x01, 0, 2, b'o', b'k', // string: new string 8
            7, 0x0a, 7, // key string 5; hex string 6
            0x00,
        ];
        assert_eq!(&t.enc.buf[first.len()..], second);
        assert!(
            t.lines()[2].contains("\"site\":\"ctrl#2\""),
            "{}",
            t.lines()[2]
        );
        t.emit(100, "k", "a", true, |d| {
            d.i64("n", -2)
                .i64("p", 3)
                .bool("b", true)
                .strs("l", &["x", "0a"])
                .str("e", "");
        });
        #[rustfmt::skip]
        let third: &[u8] = &[
            0, 0xd7, 0xc0, 0x1e, // t_ns -249900: zigzag 499799
            0, 1, b'k', 0, 1, b'a',
            1, 1, b'n', 0x03, 2,
            1, 1, b'p', 0x02, 3,
            1, 1, b'b', 0x05,
            1, 1, b'l', 0x08, 2, 0x01, 0, 1, b'x', 0x0a, 0, 1, 0x0a,
            1, 1, b'e', 0x01, 0, 0, // the empty string is a string, not hex
            0x00,
        ];
        let at = first.len() + second.len();
        assert_eq!(&t.enc.buf[at..], third);
        t.emit(100, "k", "a", true, |d| {
            d.payload("p", &[7; 65]);
        });
        let fourth = &t.enc.buf[at + third.len()..];
        let digest = &Sha256::digest([7u8; 65])[..16];
        // Strings so far: 0-8 above, then k 9, a 10, n 11, p 12, b 13, l 14, x 15, [0a] 16,
        // e 17, "" 18: a string's code is its index plus one, a key's plus two.
        let mut want = vec![0, 0, 10, 11, 14, 0x09];
        want.extend_from_slice(&[1, 4, b'h', b'e', b'a', b'd', 0x0a, 0, 32]);
        want.extend_from_slice(&[7; 32]);
        want.extend_from_slice(&[1, 6, b's', b'h', b'a', b'2', b'5', b'6', 0x0a, 0, 16]);
        want.extend_from_slice(digest);
        want.extend_from_slice(&[0x00, 0x00]);
        assert_eq!(fourth, &want[..]);
        let all: Vec<u8> = t.enc.buf.clone();
        assert_eq!(t.hash(), TraceHash(Sha256::digest(&all).into()));
        // Read back from the JSON lines, the records encode to the same bytes.
        let recs = parse_kept(t.lines());
        assert_eq!(encode_records(&recs, 3).unwrap(), all);
        assert_eq!(hash_lines(&recs), t.hash());
    }

    /// Version 2's bytes of the first and third records above, pinned: saved cases of version
    /// 2 are checked against them.
    #[test]
    fn version_two_encoding_is_pinned() {
        let mut t = Trace::new(true);
        t.emit(250_000, "transfer", "driver", true, |d| {
            d.str("site", "ctrl#1")
                .u64("len", 300)
                .hex("data", &[1, 0xab]);
        });
        t.emit(2, "k", "a", true, |d| {
            d.i64("n", -2).i64("p", 3).bool("b", true).strs("l", &["x"]);
        });
        #[rustfmt::skip]
        let want: &[u8] = &[
            0, // seq 0
            0x90, 0xa1, 0x0f, // t_ns 250000 = 0x3d090
            8, b't', b'r', b'a', b'n', b's', b'f', b'e', b'r',
            6, b'd', b'r', b'i', b'v', b'e', b'r',
            0x09, // data: an object
            5, b's', b'i', b't', b'e', 0x01, 6, b'c', b't', b'r', b'l', b'#', b'1',
            4, b'l', b'e', b'n', 0x02, 0xac, 0x02, // 300 = 0b10_0101100
            5, b'd', b'a', b't', b'a', 0x01, 4, b'0', b'1', b'a', b'b',
            0x00, // end of data
            1, 2, 1, b'k', 1, b'a', 0x09,
            2, b'n', 0x03, 2,
            2, b'p', 0x02, 3,
            2, b'b', 0x05,
            2, b'l', 0x08, 1, 0x01, 1, b'x',
            0x00,
        ];
        let recs = parse_kept(t.lines());
        assert_eq!(encode_records(&recs, 2).unwrap(), want);
        assert_eq!(
            hash_records(&recs, 2),
            Some(TraceHash(Sha256::digest(want).into()))
        );
    }

    /// A record drawn from `rng`: fields of every kind, strings with escapes, non-ASCII, hex
    /// digits and site names, often repeated (so interned).
    fn random_record(rng: &mut rand_chacha::ChaCha8Rng, t: &mut Trace) {
        use rand_core::RngCore;
        let words = [
            "a", "b", "site", "", "q\"x", "\n", "é", "01ab", "5", "true", "x#1", "x#01", "#0",
        ];
        let pick = |rng: &mut rand_chacha::ChaCha8Rng, n: usize| (rng.next_u32() as usize) % n;
        let kind = words[pick(rng, 4)];
        let actor = words[pick(rng, words.len())];
        let t_ns = u64::from(rng.next_u32() % 3);
        let seq_skip = rng.next_u32().is_multiple_of(8);
        let n = pick(rng, 4);
        let fields: Vec<(usize, &str, u32)> = (0..n)
            .map(|_| (pick(rng, 9), words[pick(rng, words.len())], rng.next_u32()))
            .collect();
        if seq_skip {
            // A record that is not deterministic: the next one's seq is the same.
            t.emit(t_ns, kind, actor, false, |_| {});
        }
        t.emit(t_ns, kind, actor, true, |d| {
            for (how, w, x) in &fields {
                let k = w.char_indices().nth(1).map_or(*w, |(i, _)| &w[..i]);
                match how {
                    0 => d.str(k, w),
                    1 => d.u64(k, u64::from(x % 3)),
                    2 => d.i64(k, i64::from(x % 5) - 2),
                    3 => d.bool(k, x % 2 == 0),
                    4 => d.hex(k, &x.to_le_bytes()[..(*x as usize % 3)]),
                    5 => d.strs(k, &words[..(*x as usize % 3)]),
                    6 => d.payload(k, &vec![(*x % 2) as u8; 60 + (*x as usize % 10)]),
                    7 => d.site(k, ["x", "", "a#b"][*x as usize % 3], u64::from(x % 3)),
                    _ => d.raw_json(
                        k,
                        [
                            "5",
                            "\"5\"",
                            "[1,-1]",
                            "{\"b\":1,\"a\":null}",
                            "1.5",
                            "\"ab\"",
                        ][*x as usize % 6],
                    ),
                };
            }
        });
    }

    /// Over many random pairs of short traces (often equal, often near misses): two traces hash
    /// alike only if they encode alike, encode alike only if their records' JSON values are
    /// alike, and records read back from their JSON lines encode to exactly the bytes that were
    /// hashed.
    #[test]
    fn records_hash_alike_only_if_they_encode_alike() {
        use rand_chacha::rand_core::SeedableRng;
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(20);
        let (mut same, mut differ) = (0, 0);
        for _ in 0..4000 {
            // Each trace has 1 or 2 records, each from one of 8 small seeds, so pairs are often
            // equal and strings often repeat.
            let one = |rng: &mut rand_chacha::ChaCha8Rng| {
                use rand_core::RngCore;
                let mut t = Trace::new(true);
                for _ in 0..=rng.next_u32() % 2 {
                    let mut r =
                        rand_chacha::ChaCha8Rng::seed_from_u64(u64::from(rng.next_u32() % 8));
                    random_record(&mut r, &mut t);
                }
                let text: String = t.lines().concat();
                let recs = parse_kept(t.lines());
                let read_back = encode_records(&recs, HASH_VERSION).expect("current version");
                assert_eq!(read_back, t.enc.buf, "{text}");
                assert_eq!(hash_lines(&recs), t.hash(), "{text}");
                let values: Vec<serde_json::Value> = recs
                    .iter()
                    .filter(|r| r.deterministic)
                    .map(|r| serde_json::from_str(&r.line).expect("JSON"))
                    .collect();
                let det: Vec<String> = recs
                    .iter()
                    .filter(|r| r.deterministic)
                    .map(|r| r.line.clone())
                    .collect();
                (t.hash(), t.enc.buf.clone(), values, det, text)
            };
            let (ha, ea, va, la, ta) = one(&mut rng);
            let (hb, eb, vb, lb, tb) = one(&mut rng);
            assert_eq!(ha == hb, ea == eb, "{ta}{tb}");
            // serde_json::Value sorts keys, so equal values with other key orders may encode
            // apart; equal encodings always mean equal values and equal deterministic lines.
            if ea == eb {
                assert_eq!(va, vb, "{ta}{tb}");
                assert_eq!(la, lb, "{ta}{tb}");
                same += 1;
            } else {
                assert_ne!(la, lb, "{ta}{tb}");
                differ += 1;
            }
        }
        assert!(same > 50 && differ > 1000, "same {same}, differ {differ}");
    }

    #[test]
    fn older_versions_hash_their_own_encodings() {
        let mut t = Trace::new(true);
        t.emit(0, "task", "t", true, |d| {
            d.u64("i", 1);
        });
        let recs = parse_kept(t.lines());
        let v1 = hash_records(&recs, 1).unwrap();
        assert_eq!(
            v1,
            TraceHash(Sha256::digest(t.lines()[0].as_bytes()).into())
        );
        let v2 = hash_records(&recs, 2).unwrap();
        assert_eq!(hash_records(&recs, 3), Some(t.hash()));
        assert!(v1 != t.hash() && v2 != t.hash() && v1 != v2);
        assert_eq!(hash_records(&recs, 4), None);
        assert_eq!(hash_records(&recs, 0), None);
    }

    /// A trace made after another on the same thread (reusing its encoder's memory) encodes
    /// exactly as a first one: nothing of the earlier trace's string table is left.
    #[test]
    fn a_reused_encoder_starts_afresh() {
        let fill = |t: &mut Trace, salt: u64| {
            // Fewer bytes than are gathered before hashing, so `enc.buf` holds them all; more
            // strings than the table's first size holds.
            for i in 0..120u64 {
                t.emit(
                    i * 7,
                    ["transfer", "task", "mark"][(i % 3) as usize],
                    "driver",
                    true,
                    |d| {
                        d.str("site", &format!("s{}#{}", (i + salt) % 50, i))
                            .hex("data", &(i + salt).to_le_bytes())
                            .str("status", "ok");
                    },
                );
            }
        };
        let bytes = |t: &Trace| t.enc.buf.clone();
        let mut first = Trace::new(false);
        fill(&mut first, 0);
        let (h0, b0) = (first.hash(), bytes(&first));
        drop(first);
        let mut other = Trace::new(false);
        fill(&mut other, 1);
        drop(other);
        let mut again = Trace::new(true);
        fill(&mut again, 0);
        assert!(b0.len() > 2000 && b0.len() < HASH_CHUNK, "{}", b0.len());
        assert!(bytes(&again) == b0, "the same bytes as the first trace");
        assert_eq!(again.hash(), h0);
        let recs = parse_kept(again.lines());
        assert!(
            encode_records(&recs, 3).unwrap() == b0,
            "read back: the same bytes"
        );
    }

    #[test]
    fn hash_parses_back() {
        let t = Trace::new(false);
        let h = t.hash();
        assert_eq!(h.to_string().parse::<TraceHash>().unwrap(), h);
        assert!("sha1:00".parse::<TraceHash>().is_err());
    }
}
