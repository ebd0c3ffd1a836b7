//! The canonical binary encoding of trace records (hash version 2; see [`crate::trace`]):
//! varints, length-prefixed strings, tagged values, and the encoding of a record read back from
//! JSON Lines. Nothing here formats JSON or keeps a trace.

use super::Record;
use std::fmt;

/// Value tags of the binary encoding (module docs).
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
}

/// Appends `v` as an unsigned LEB128 varint.
pub(super) fn enc_uint(buf: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        buf.push((v as u8) | 0x80);
        v >>= 7;
    }
    buf.push(v as u8);
}

/// Appends a length-prefixed string of the binary encoding.
pub(super) fn enc_str(buf: &mut Vec<u8>, s: &str) {
    enc_uint(buf, s.len() as u64);
    buf.extend_from_slice(s.as_bytes());
}

/// Appends an object field's key (length plus one: 0 ends the object).
pub(super) fn enc_key(buf: &mut Vec<u8>, k: &str) {
    enc_uint(buf, k.len() as u64 + 1);
    buf.extend_from_slice(k.as_bytes());
}

/// The byte that ends an object.
pub(super) const END: u8 = 0x00;

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
    pub(super) fn encode(&self, buf: &mut Vec<u8>) {
        match self {
            Node::Null => buf.push(tag::NULL),
            Node::Bool(false) => buf.push(tag::FALSE),
            Node::Bool(true) => buf.push(tag::TRUE),
            Node::UInt(v) => {
                buf.push(tag::UINT);
                enc_uint(buf, *v);
            }
            Node::Neg(v) => {
                buf.push(tag::NEG);
                enc_uint(buf, v.unsigned_abs());
            }
            Node::Float(v) => {
                buf.push(tag::FLOAT);
                buf.extend_from_slice(&v.to_bits().to_le_bytes());
            }
            Node::Str(s) => {
                buf.push(tag::STR);
                enc_str(buf, s);
            }
            Node::Array(items) => {
                buf.push(tag::ARRAY);
                enc_uint(buf, items.len() as u64);
                for i in items {
                    i.encode(buf);
                }
            }
            Node::Object(fields) => {
                buf.push(tag::OBJECT);
                for (k, v) in fields {
                    enc_key(buf, k);
                    v.encode(buf);
                }
                buf.push(END);
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

/// The canonical binary encoding (module docs) of a record read back from JSON Lines; `None`
/// when its line is not a JSON object with a `data` object.
pub fn encode_record(r: &Record) -> Option<Vec<u8>> {
    let data = match serde_json::from_str::<Node>(&r.line).ok()? {
        Node::Object(fields) => fields.into_iter().find(|(k, _)| k == "data")?.1,
        _ => return None,
    };
    if !matches!(data, Node::Object(_)) {
        return None;
    }
    let mut buf = Vec::with_capacity(r.line.len());
    enc_uint(&mut buf, r.seq);
    enc_uint(&mut buf, r.t_ns);
    enc_str(&mut buf, &r.kind);
    enc_str(&mut buf, &r.actor);
    data.encode(&mut buf);
    Some(buf)
}
