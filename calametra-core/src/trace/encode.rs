//! The canonical binary encodings of trace records that the trace hash is computed over:
//! version 3 (strings interned per trace, [`V3`]) and version 2 (every string written out,
//! [`V2`]), both written through one [`Sink`] so a record, a JSON value and a record read back
//! from JSON Lines are traversed by one piece of code ([`Node::encode`], [`record`]). The
//! formats are documented in [`crate::trace`] and DESIGN.md section 3; version 3's string
//! table is in [`table`]. Nothing here formats JSON or keeps a trace.

use super::Record;
use std::fmt;
use table::Interner;

mod table;

/// Value tags of the binary encodings (module docs of [`crate::trace`]).
pub(super) mod tag {
    pub const STR: u8 = 0x01;
    pub const UINT: u8 = 0x02;
    pub const NEG: u8 = 0x03;
    pub const FALSE: u8 = 0x04;
    pub const TRUE: u8 = 0x05;
    pub const NULL: u8 = 0x06;
    pub const FLOAT: u8 = 0x07;
    pub const ARRAY: u8 = 0x08;
    pub const OBJECT: u8 = 0x09;
    /// Version 3: a string of lowercase hex digit pairs, as its bytes.
    pub const HEX: u8 = 0x0a;
    /// Version 3: a string `<base>#<n>` (a site name), as its base and `n`.
    pub const SITE: u8 = 0x0b;
}

/// The byte that ends an object (and, in version 3, a record's `data`).
pub(super) const END: u8 = 0x00;

/// Appends `v` as an unsigned LEB128 varint.
#[inline]
pub(super) fn enc_uint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// The zigzag form of a wrapping 64-bit difference: 0, -1, 1, -2, ... become 0, 1, 2, 3, ...
/// (a bijection of `u64`, so small steps either way are short varints).
fn zigzag(d: u64) -> u64 {
    let d = d as i64;
    ((d << 1) ^ (d >> 63)) as u64
}

/// Where an encoding is written: the record envelope, keys and strings differ by version; the
/// other values are the same in every binary version (the provided methods).
pub(super) trait Sink {
    /// The bytes written so far.
    fn buf(&mut self) -> &mut Vec<u8>;
    /// A record's envelope, before its `data` fields.
    fn head(&mut self, seq: u64, t_ns: u64, kind: &str, actor: &str);
    /// An object field's key (of `data` or a nested object).
    fn key(&mut self, k: &str);
    /// A string value.
    fn str(&mut self, s: &str);
    /// Bytes written as their lowercase hex string.
    fn hex(&mut self, bytes: &[u8]);

    /// An unsigned integer.
    #[inline]
    fn uint(&mut self, v: u64) {
        let b = self.buf();
        b.push(tag::UINT);
        enc_uint(b, v);
    }
    /// A negative integer, by its magnitude.
    #[inline]
    fn neg(&mut self, magnitude: u64) {
        let b = self.buf();
        b.push(tag::NEG);
        enc_uint(b, magnitude);
    }
    /// A boolean.
    #[inline]
    fn bool(&mut self, v: bool) {
        self.buf().push(if v { tag::TRUE } else { tag::FALSE });
    }
    /// Null.
    #[inline]
    fn null(&mut self) {
        self.buf().push(tag::NULL);
    }
    /// A number that is not an integer.
    #[inline]
    fn float(&mut self, v: f64) {
        let b = self.buf();
        b.push(tag::FLOAT);
        b.extend_from_slice(&v.to_bits().to_le_bytes());
    }
    /// An array of `n` values (the values follow).
    #[inline]
    fn array(&mut self, n: usize) {
        let b = self.buf();
        b.push(tag::ARRAY);
        enc_uint(b, n as u64);
    }
    /// An object (its fields follow, then [`Sink::end`]).
    #[inline]
    fn object(&mut self) {
        self.buf().push(tag::OBJECT);
    }
    /// The end of an object or of a record's `data`.
    #[inline]
    fn end(&mut self) {
        self.buf().push(END);
    }
}

/// Version 2: every string written out as its byte length and bytes; a record's `data` is an
/// object value.
#[derive(Default)]
pub(super) struct V2 {
    pub(super) buf: Vec<u8>,
}

impl V2 {
    fn string(&mut self, s: &[u8]) {
        enc_uint(&mut self.buf, s.len() as u64);
        self.buf.extend_from_slice(s);
    }
}

impl Sink for V2 {
    fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
    fn head(&mut self, seq: u64, t_ns: u64, kind: &str, actor: &str) {
        enc_uint(&mut self.buf, seq);
        enc_uint(&mut self.buf, t_ns);
        self.string(kind.as_bytes());
        self.string(actor.as_bytes());
        self.buf.push(tag::OBJECT);
    }
    fn key(&mut self, k: &str) {
        enc_uint(&mut self.buf, k.len() as u64 + 1);
        self.buf.extend_from_slice(k.as_bytes());
    }
    fn str(&mut self, s: &str) {
        self.buf.push(tag::STR);
        self.string(s.as_bytes());
    }
    fn hex(&mut self, bytes: &[u8]) {
        self.buf.push(tag::STR);
        enc_uint(&mut self.buf, bytes.len() as u64 * 2);
        push_hex(&mut self.buf, bytes);
    }
}

/// The most strings one trace's table holds (version 3); later new strings are written out each
/// time, so a long run's table stays bounded.
pub(super) const MAX_INTERNED: usize = 4096;

/// Version 3: strings interned per trace (each distinct string written out once, then referred
/// to by its index), `seq` and `t_ns` as zigzag differences from the previous record, hex and
/// site-name strings by their parts, a record's `data` as bare fields.
#[derive(Default)]
pub(super) struct V3 {
    pub(super) buf: Vec<u8>,
    strings: Interner,
    /// The `seq` the next record is expected to carry (the previous one's plus one).
    next_seq: u64,
    /// The previous record's `t_ns`.
    prev_t: u64,
    /// The last two distinct strings written as each of: a record's kind ([`KIND`]), its
    /// actor ([`ACTOR`]), a site name's base ([`SITE_BASE`]) and hex bytes ([`HEX_BYTES`]),
    /// the later first ([`Recent`]): most records repeat a kind, an actor, a site base or a hex
    /// value of the two before, which are then written without a search of the table.
    recent: [[Recent; 2]; 4],
    /// Bytes of a hex string being decoded (reused).
    scratch: Vec<u8>,
}

/// The places of strings with [`Recent`] strings of their own (the index in `V3::recent`).
const KIND: usize = 0;
/// See [`KIND`].
const ACTOR: usize = 1;
/// See [`KIND`].
const SITE_BASE: usize = 2;
/// See [`KIND`].
const HEX_BYTES: usize = 3;

/// A string of up to 16 bytes that has an index in the current trace, by its table words and
/// length ([`Interner::words`]: they determine the string), with its code when that is one
/// byte (the index plus one, under `0x80`); or none (`len` [`Recent::NONE`]'s).
///
/// Why it never changes a byte: a string's index in a trace, once given, never changes and is
/// never taken back until the trace ends ([`V3::clear`], which forgets every `Recent`), and a
/// `Recent` is made only from the index the table just reported or gave for exactly this
/// string. So when a string's words and length equal a `Recent`'s, it is that string, and the
/// table would answer that same index: the code written is the one a search would write.
#[derive(Clone, Copy)]
struct Recent {
    a: u64,
    b: u64,
    len: u32,
    code: u8,
}

impl Recent {
    /// Whether this is the string of these words and length.
    #[inline(always)]
    fn is(&self, a: u64, b: u64, len: u32) -> bool {
        self.a == a && self.b == b && self.len == len
    }

    /// No string (no string has this length).
    const NONE: Recent = Recent {
        a: 0,
        b: 0,
        len: u32::MAX,
        code: 0,
    };
}

impl Default for Recent {
    fn default() -> Self {
        Recent::NONE
    }
}

impl V3 {
    /// Empties the encoder for a new trace, keeping its memory: the same state as
    /// `V3::default()` gives.
    pub(super) fn clear(&mut self) {
        // A buffer a huge record grew is not kept.
        if self.buf.capacity() > KEEP_BYTES {
            self.buf = Vec::new();
        }
        self.buf.clear();
        self.strings.clear();
        self.next_seq = 0;
        self.prev_t = 0;
        self.recent = [[Recent::NONE; 2]; 4];
    }

    /// The memory this encoder holds: its string table's slots, then its buffer's bytes.
    pub(super) fn room(&self) -> (usize, usize) {
        (self.strings.slots(), self.buf.capacity())
    }

    /// A string by the table: its index plus `1 + bias` when the table has it, else `bias`, its
    /// byte length and its bytes (it then gets the next index while the table has room).
    #[inline(always)]
    fn string(&mut self, s: &[u8], bias: u64) {
        match self.strings.find(s) {
            Ok(i) => {
                let code = u64::from(i) + 1 + bias;
                if code < 0x80 {
                    self.buf.push(code as u8);
                } else {
                    enc_uint(&mut self.buf, code);
                }
            }
            Err(miss) => {
                self.new_string(s, bias, miss);
            }
        }
    }

    /// A string in the place `which` ([`KIND`], [`ACTOR`], [`SITE_BASE`], [`HEX_BYTES`]):
    /// what [`V3::string`] writes (`bias` 0), found first among the [`Recent`] strings of that
    /// place, which then remember it.
    #[inline(always)]
    fn recent_string(&mut self, s: &[u8], which: usize) {
        if s.len() > 16 {
            return self.string(s, 0);
        }
        let (a, b) = Interner::words(s);
        let len = s.len() as u32;
        let recent = &self.recent[which];
        let code = if recent[0].is(a, b, len) {
            Some(recent[0].code)
        } else if recent[1].is(a, b, len) {
            Some(recent[1].code)
        } else {
            None
        };
        if let Some(code) = code {
            self.buf.push(code);
            return;
        }
        let idx = match self.strings.find_short(a, b, len) {
            Ok(i) => {
                let code = u64::from(i) + 1;
                if code >= 0x80 {
                    return enc_uint(&mut self.buf, code);
                }
                self.buf.push(code as u8);
                i
            }
            Err(miss) => match self.new_string(s, 0, miss) {
                Some(i) if i < 0x7f => i,
                _ => return,
            },
        };
        // The later one is kept as the earlier: two kinds (or actors) that take turns stay.
        let recent = &mut self.recent[which];
        recent[1] = recent[0];
        recent[0] = Recent {
            a,
            b,
            len,
            code: idx as u8 + 1,
        };
    }

    /// A string the table does not have: written out, and added while the table has room
    /// (the index it gets, if any).
    #[cold]
    #[inline(never)]
    fn new_string(&mut self, s: &[u8], bias: u64, miss: table::Miss) -> Option<u32> {
        // Most are short strings an earlier trace had (the table holds them: a stamp gives the
        // index), written where the buffer has room: that path calls nothing, so it saves and
        // restores no registers.
        if s.len() <= 16 && self.buf.capacity() - self.buf.len() >= 18 {
            if let Some(idx) = self.strings.restamp(miss) {
                self.short_string(s, bias);
                return Some(idx);
            }
        }
        self.other_new_string(s, bias, miss)
    }

    /// [`V3::new_string`] of a string the table must insert, a long string, or one the buffer
    /// must grow for.
    #[cold]
    #[inline(never)]
    fn other_new_string(&mut self, s: &[u8], bias: u64, miss: table::Miss) -> Option<u32> {
        let given = self.strings.add(s, miss);
        if s.len() > 16 {
            self.long_string(s, bias);
        } else {
            self.short_string(s, bias);
        }
        given
    }

    /// The code, length and bytes of a new string of up to 16 bytes.
    #[inline(always)]
    fn short_string(&mut self, s: &[u8], bias: u64) {
        // `bias` is 0 or 1 (a key): one byte; a length under 128 is one byte too.
        debug_assert!(bias <= 1);
        let n = s.len();
        // A fixed 18 bytes appended (code, length, room for 16), the string written into them
        // as two overlapping pieces straight from registers, then cut to size: no call to copy,
        // and nothing put together on the stack to be read back whole (a wide load of narrower
        // stores just made waits for them to land: it stalled here, a third of this function's
        // time natively).
        let buf = &mut self.buf;
        let at = buf.len();
        buf.extend_from_slice(&[0; 18]);
        let out = &mut buf[at..at + 18];
        out[0] = bias as u8;
        out[1] = n as u8;
        let body = &mut out[2..];
        match n {
            0 => {}
            1..=3 => {
                body[0] = s[0];
                body[n / 2] = s[n / 2];
                body[n - 1] = s[n - 1];
            }
            4..=7 => {
                body[..4].copy_from_slice(&s[..4]);
                body[n - 4..n].copy_from_slice(&s[n - 4..]);
            }
            _ => {
                body[..8].copy_from_slice(&s[..8]);
                body[n - 8..n].copy_from_slice(&s[n - 8..]);
            }
        }
        buf.truncate(at + 2 + n);
    }

    /// The code, length and bytes of a new string longer than 16 bytes.
    #[cold]
    #[inline(never)]
    fn long_string(&mut self, s: &[u8], bias: u64) {
        let buf = &mut self.buf;
        let n = s.len();
        if n < 0x80 {
            buf.extend_from_slice(&[bias as u8, n as u8]);
        } else {
            buf.push(bias as u8);
            enc_uint(buf, n as u64);
        }
        buf.extend_from_slice(s);
    }
}

impl Sink for V3 {
    fn buf(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }
    #[inline(always)]
    fn head(&mut self, seq: u64, t_ns: u64, kind: &str, actor: &str) {
        enc_uint(&mut self.buf, zigzag(seq.wrapping_sub(self.next_seq)));
        enc_uint(&mut self.buf, zigzag(t_ns.wrapping_sub(self.prev_t)));
        self.next_seq = seq.wrapping_add(1);
        self.prev_t = t_ns;
        self.recent_string(kind.as_bytes(), KIND);
        self.recent_string(actor.as_bytes(), ACTOR);
    }
    #[inline(always)]
    fn key(&mut self, k: &str) {
        // 0 is the end of the object, so a key's code is its string code plus one.
        self.string(k.as_bytes(), 1);
    }
    #[inline(always)]
    fn str(&mut self, s: &str) {
        if let Some((base, n)) = site_parts(s) {
            self.site(base, n);
        } else if is_hex(s.as_bytes()) {
            self.hex_str(s);
        } else {
            self.buf.push(tag::STR);
            self.string(s.as_bytes(), 0);
        }
    }
    #[inline(always)]
    fn hex(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            // The empty string is not a hex string (module docs).
            return self.str("");
        }
        self.buf.push(tag::HEX);
        self.recent_string(bytes, HEX_BYTES);
    }
}

impl V3 {
    /// A string of hex digits (as [`is_hex`] tells) by its bytes.
    #[inline(never)]
    fn hex_str(&mut self, s: &str) {
        let mut bytes = std::mem::take(&mut self.scratch);
        bytes.clear();
        bytes.extend(
            s.as_bytes()
                .chunks_exact(2)
                .map(|p| (hex_digit(p[0]) << 4) | hex_digit(p[1])),
        );
        self.buf.push(tag::HEX);
        self.string(&bytes, 0);
        self.scratch = bytes;
    }

    /// A site name by its parts: exactly what [`Sink::str`] writes for `<base>#<n>`.
    #[inline(always)]
    pub(super) fn site(&mut self, base: &str, n: u64) {
        self.buf.push(tag::SITE);
        self.recent_string(base.as_bytes(), SITE_BASE);
        enc_uint(&mut self.buf, n);
    }
}

/// `<base>#<n>` split at its last `#`, when `n` is decimal digits without a leading zero (`0`
/// itself allowed) that fit a `u64`.
#[inline]
pub(super) fn site_parts(s: &str) -> Option<(&str, u64)> {
    // Read from the end: the digits, then the `#` (the last one, as digits are not `#`); most
    // strings fail at their last byte.
    let bytes = s.as_bytes();
    let mut i = bytes.len();
    while i > 0 && bytes[i - 1].is_ascii_digit() {
        i -= 1;
    }
    if i == 0 || bytes[i - 1] != b'#' {
        return None;
    }
    let digits = &bytes[i..];
    if digits.is_empty() || (digits[0] == b'0' && digits.len() > 1) || digits.len() > 20 {
        return None;
    }
    let mut n: u64 = 0;
    if digits.len() < 20 {
        // Under 10^19: no overflow.
        for &d in digits {
            n = n * 10 + u64::from(d - b'0');
        }
    } else {
        for &d in digits {
            n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
    }
    Some((&s[..i - 1], n))
}

/// Whether `s` is a non-empty even number of lowercase hex digits.
pub(super) fn is_hex(s: &[u8]) -> bool {
    !s.is_empty()
        && s.len().is_multiple_of(2)
        && s.iter()
            .all(|&b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

fn hex_digit(b: u8) -> u8 {
    if b.is_ascii_digit() {
        b - b'0'
    } else {
        b - b'a' + 10
    }
}

/// Appends `bytes` as lowercase hex digits.
pub(super) fn push_hex(buf: &mut Vec<u8>, bytes: &[u8]) {
    const D: &[u8; 16] = b"0123456789abcdef";
    buf.reserve(bytes.len() * 2);
    for &b in bytes {
        buf.push(D[(b >> 4) as usize]);
        buf.push(D[(b & 15) as usize]);
    }
}

/// The most buffer memory an emptied encoder keeps for its next trace.
const KEEP_BYTES: usize = 1 << 20;

/// A JSON value with its object keys in document order (what the binary encoding needs;
/// `serde_json::Value` sorts keys).
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Node {
    Null,
    Bool(bool),
    UInt(u64),
    Neg(i64),
    Float(f64),
    Str(String),
    Array(Vec<Node>),
    Object(Vec<(String, Node)>),
}

impl Node {
    pub(super) fn encode<S: Sink>(&self, s: &mut S) {
        match self {
            Node::Null => s.null(),
            Node::Bool(v) => s.bool(*v),
            Node::UInt(v) => s.uint(*v),
            Node::Neg(v) => s.neg(v.unsigned_abs()),
            Node::Float(v) => s.float(*v),
            Node::Str(v) => s.str(v),
            Node::Array(items) => {
                s.array(items.len());
                for i in items {
                    i.encode(s);
                }
            }
            Node::Object(fields) => {
                s.object();
                for (k, v) in fields {
                    s.key(k);
                    v.encode(s);
                }
                s.end();
            }
        }
    }
}

impl<'de> serde::Deserialize<'de> for Node {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Node, D::Error> {
        struct V;
        impl<'de> serde::de::Visitor<'de> for V {
            type Value = Node;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a JSON value")
            }
            fn visit_unit<E>(self) -> Result<Node, E> {
                Ok(Node::Null)
            }
            fn visit_bool<E>(self, v: bool) -> Result<Node, E> {
                Ok(Node::Bool(v))
            }
            fn visit_u64<E>(self, v: u64) -> Result<Node, E> {
                Ok(Node::UInt(v))
            }
            fn visit_i64<E>(self, v: i64) -> Result<Node, E> {
                Ok(if v < 0 {
                    Node::Neg(v)
                } else {
                    Node::UInt(v as u64)
                })
            }
            fn visit_f64<E>(self, v: f64) -> Result<Node, E> {
                Ok(Node::Float(v))
            }
            fn visit_str<E>(self, v: &str) -> Result<Node, E> {
                Ok(Node::Str(v.to_owned()))
            }
            fn visit_string<E>(self, v: String) -> Result<Node, E> {
                Ok(Node::Str(v))
            }
            fn visit_seq<A: serde::de::SeqAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut v = Vec::new();
                while let Some(x) = a.next_element()? {
                    v.push(x);
                }
                Ok(Node::Array(v))
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(self, mut a: A) -> Result<Node, A::Error> {
                let mut v = Vec::new();
                while let Some((k, x)) = a.next_entry::<String, Node>()? {
                    v.push((k, x));
                }
                Ok(Node::Object(v))
            }
        }
        d.deserialize_any(V)
    }
}

/// Encodes a record read back from JSON Lines into `s`; `false` (nothing written) when its
/// line is not a JSON object with a `data` object.
pub(super) fn record<S: Sink>(s: &mut S, r: &Record) -> bool {
    let fields = match serde_json::from_str::<Node>(&r.line) {
        Ok(Node::Object(fields)) => fields,
        _ => return false,
    };
    let Some(Node::Object(data)) = fields.into_iter().find(|(k, _)| k == "data").map(|f| f.1)
    else {
        return false;
    };
    s.head(r.seq, r.t_ns, &r.kind, &r.actor);
    for (k, v) in &data {
        s.key(k);
        v.encode(s);
    }
    s.end();
    true
}

/// The bytes hashed for the deterministic `records` under `version` (1: each JSON line and its
/// `\n`; 2 and 3: the binary encoding, where a record whose line does not parse contributes
/// its line and `\n` as written), handed to `out` in pieces; `false` for a version this build
/// does not know.
pub(super) fn encode_with<'a>(
    records: impl IntoIterator<Item = &'a Record>,
    version: u64,
    mut out: impl FnMut(&[u8]),
) -> bool {
    fn binary<'a, S: Sink>(
        mut s: S,
        records: impl IntoIterator<Item = &'a Record>,
        out: &mut impl FnMut(&[u8]),
    ) {
        for r in records {
            if !record(&mut s, r) {
                s.buf().extend_from_slice(r.line.as_bytes());
                s.buf().push(b'\n');
            }
            if s.buf().len() >= super::HASH_CHUNK {
                out(s.buf());
                s.buf().clear();
            }
        }
        out(s.buf());
    }
    let records = records.into_iter().filter(|r| r.deterministic);
    match version {
        1 => {
            for r in records {
                out(r.line.as_bytes());
                out(b"\n");
            }
        }
        2 => binary(V2::default(), records, &mut out),
        3 => binary(V3::default(), records, &mut out),
        _ => return false,
    }
    true
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn site_names_and_hex_strings_are_recognised_exactly() {
        assert_eq!(site_parts("ctrl.load#12"), Some(("ctrl.load", 12)));
        assert_eq!(site_parts("a#b#0"), Some(("a#b", 0)));
        assert_eq!(site_parts("#7"), Some(("", 7)));
        for not in ["x#", "x#07", "x#1a", "x", "x#18446744073709551616", "x#-1"] {
            assert_eq!(site_parts(not), None, "{not}");
        }
        assert_eq!(site_parts("x#18446744073709551615"), Some(("x", u64::MAX)));
        assert!(is_hex(b"00ff") && is_hex(b"ab"));
        for not in [&b""[..], b"a", b"0A", b"0g", b"abc"] {
            assert!(!is_hex(not));
        }
    }

    /// The first reading of site names (split at the last `#`, then the digits checked), which
    /// [`site_parts`] reads from the end instead: they agree on every string of a small
    /// alphabet up to 5 characters and on long numbers.
    #[test]
    fn site_names_read_from_the_end_as_from_the_last_hash() {
        fn by_last_hash(s: &str) -> Option<(&str, u64)> {
            let i = s.as_bytes().iter().rposition(|&b| b == b'#')?;
            let digits = &s.as_bytes()[i + 1..];
            if digits.is_empty() || (digits[0] == b'0' && digits.len() > 1) {
                return None;
            }
            let mut n: u64 = 0;
            for &d in digits {
                if !d.is_ascii_digit() {
                    return None;
                }
                n = n.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
            }
            Some((&s[..i], n))
        }
        let alphabet = ["#", "0", "1", "9", "a", "é"];
        let mut words = vec![String::new()];
        for _ in 0..5 {
            let longer: Vec<String> = words
                .iter()
                .flat_map(|w| alphabet.iter().map(move |c| format!("{w}{c}")))
                .collect();
            words.extend(longer);
        }
        words.sort();
        words.dedup();
        for n in [
            "18446744073709551615",
            "18446744073709551616",
            "99999999999999999999",
        ] {
            for pre in ["x#", "#", "x#0", "x#1"] {
                words.push(format!("{pre}{n}"));
                words.push(format!("{pre}{n}0"));
            }
        }
        for w in &words {
            assert_eq!(site_parts(w), by_last_hash(w), "{w:?}");
        }
    }

    /// A new string of every length up to past the short path's 16 bytes is written as its
    /// code, length and bytes, and then referred to by its index: in a first trace (the table
    /// inserts each), in later ones (the table holds each from before: a stamp), with the
    /// buffer's room kept or given up (so it grows while writing).
    #[test]
    fn new_strings_of_every_length_are_written_whole() {
        let mut v = V3::default();
        let words: Vec<String> = (0..=40)
            .map(|n| {
                (0..n)
                    .map(|i| (b'a' + (i * 7 + n) as u8 % 26) as char)
                    .collect()
            })
            .collect();
        let mut want = Vec::new();
        for (i, w) in words.iter().enumerate() {
            want.extend_from_slice(&[1, w.len() as u8]);
            want.extend_from_slice(w.as_bytes());
            want.push(i as u8 + 2);
        }
        for trace in 0..4 {
            v.clear();
            if trace == 2 {
                v.buf.shrink_to_fit();
            }
            for w in &words {
                v.key(w);
                v.key(w);
            }
            assert_eq!(v.buf, want, "trace {trace}");
        }
    }

    /// Writes a record's envelope as [`Sink::head`] does, but every string by a search of the
    /// table (no [`Recent`] strings): the reference the fast path must match byte for byte
    /// (site names and hex bytes likewise, in the test).
    fn head_by_table(v: &mut V3, seq: u64, t_ns: u64, kind: &str, actor: &str) {
        enc_uint(&mut v.buf, zigzag(seq.wrapping_sub(v.next_seq)));
        enc_uint(&mut v.buf, zigzag(t_ns.wrapping_sub(v.prev_t)));
        v.next_seq = seq.wrapping_add(1);
        v.prev_t = t_ns;
        v.string(kind.as_bytes(), 0);
        v.string(actor.as_bytes(), 0);
    }

    /// The [`Recent`] kinds, actors, site bases and hex bytes never change a byte: over many
    /// traces of random records (one encoder kept from trace to trace, as a thread keeps it),
    /// strings repeating, taking turns or new, of every length around the 16 bytes a `Recent`
    /// holds, the empty string, strings that are also keys and values, traces whose strings
    /// pass the one-byte codes and the table's bound, the bytes equal the reference's.
    #[test]
    fn recent_strings_write_what_the_table_would() {
        use rand_chacha::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let pool: Vec<String> = [
            "",
            "a",
            "b",
            "ab",
            "task",
            "transfer",
            "driver",
            "poller",
            "abcdefghijklmnop",
            "abcdefghijklmnoq",
            "bbcdefghijklmnop",
            "abcdefghijklmnopq",
            "abcdefghijklmnopqr",
            "é",
            "aé",
            "0a",
            "x#1",
        ]
        .iter()
        .map(|s| s.to_string())
        .chain((0..40).map(|i| format!("{}{i}", "w".repeat(i % 19))))
        .collect();
        let (mut fast, mut slow) = (V3::default(), V3::default());
        let mut seq = 0u64;
        for trace in 0..3000u32 {
            fast.clear();
            slow.clear();
            // Most traces are short; some pass 127 strings (codes of two bytes) or the bound.
            let (records, fillers) = match trace % 400 {
                0 => (40, MAX_INTERNED / 20),
                1..=9 => (60, 4),
                _ => (1 + rng.next_u32() as usize % 12, 2),
            };
            for r in 0..records {
                let pick = |rng: &mut rand_chacha::ChaCha8Rng| {
                    // Often one of the first few (repeats and turns), else any.
                    let n = if rng.next_u32().is_multiple_of(4) {
                        pool.len()
                    } else {
                        6
                    };
                    pool[rng.next_u32() as usize % n].as_str()
                };
                let (kind, actor) = (pick(&mut rng), pick(&mut rng));
                let t = u64::from(rng.next_u32() % 300);
                seq += u64::from(rng.next_u32().is_multiple_of(5));
                fast.head(seq, t, kind, actor);
                head_by_table(&mut slow, seq, t, kind, actor);
                for f in 0..fillers {
                    let fresh = format!("t{trace}r{r}f{f}");
                    let word = pick(&mut rng);
                    for v in [&mut fast, &mut slow] {
                        v.key(word);
                        v.str(&fresh);
                        v.key(&fresh);
                        v.str(word);
                    }
                    // Site bases and hex bytes, repeated, taking turns or new.
                    let (base, n) = (pick(&mut rng), f as u64);
                    fast.site(base, n);
                    slow.buf.push(tag::SITE);
                    slow.string(base.as_bytes(), 0);
                    enc_uint(&mut slow.buf, n);
                    for bytes in [pick(&mut rng).as_bytes(), fresh.as_bytes()] {
                        fast.hex(bytes);
                        if bytes.is_empty() {
                            slow.str("");
                        } else {
                            slow.buf.push(tag::HEX);
                            slow.string(bytes, 0);
                        }
                    }
                }
                fast.end();
                slow.end();
                assert!(fast.buf == slow.buf, "trace {trace}, record {r}");
                seq += 1;
            }
        }
    }

    #[test]
    fn zigzag_is_a_bijection_on_small_steps() {
        assert_eq!(zigzag(0), 0);
        assert_eq!(zigzag(u64::MAX), 1);
        assert_eq!(zigzag(1), 2);
        assert_eq!(zigzag(2u64.wrapping_neg()), 3);
        assert_eq!(zigzag(i64::MAX as u64), u64::MAX - 1);
        assert_eq!(zigzag(i64::MIN as u64), u64::MAX);
    }
}
