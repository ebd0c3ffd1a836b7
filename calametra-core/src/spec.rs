//! Device specs: versioned JSON files that name their source, embedded or read from disk.
//!
//! A [`Spec`] keeps the file's bytes (hashed into regression files), its path (for errors) and
//! the parsed document. Models read fields through [`Spec::at`] and the typed getters, so a
//! missing field, a wrong descriptor length or bad hex is an error naming file and field.

use crate::error::Error;
use std::path::{Path, PathBuf};

/// A parsed spec file.
#[derive(Clone, Debug)]
pub struct Spec {
    path: PathBuf,
    bytes: Vec<u8>,
    sha256: String,
    doc: serde_json::Value,
}

impl Spec {
    /// Parses spec bytes; `path` names the file in errors. The document must be an object with
    /// a string `format`, an integer `version` and a `source`.
    pub fn parse(path: impl Into<PathBuf>, bytes: &[u8]) -> Result<Spec, Error> {
        let path = path.into();
        let doc: serde_json::Value = serde_json::from_slice(bytes).map_err(|e| Error::File {
            path: path.clone(),
            field: "(document)".into(),
            message: format!("not valid JSON: {e}"),
        })?;
        let spec = Spec {
            sha256: crate::trace::sha256_hex(bytes),
            path,
            bytes: bytes.to_vec(),
            doc,
        };
        if !spec.doc.is_object() {
            return Err(spec.error("(document)", "expected a JSON object"));
        }
        spec.str("format")?;
        spec.u64("version")?;
        if spec.doc.get("source").is_none() {
            return Err(spec.error(
                "source",
                "missing; every spec names where its facts come from",
            ));
        }
        Ok(spec)
    }

    /// Reads and parses a spec file.
    pub fn load(path: &Path) -> Result<Spec, Error> {
        let bytes = std::fs::read(path).map_err(|source| Error::Io {
            path: path.to_path_buf(),
            action: "read the spec",
            source,
        })?;
        Spec::parse(path, &bytes)
    }

    /// The file's path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// SHA-256 of the file's bytes, hex.
    pub fn sha256(&self) -> &str {
        &self.sha256
    }

    /// The file's bytes.
    pub fn bytes(&self) -> &[u8] {
        &self.bytes
    }

    /// The whole document.
    pub fn doc(&self) -> &serde_json::Value {
        &self.doc
    }

    /// An error about `field` of this spec.
    pub fn error(&self, field: &str, message: impl Into<String>) -> Error {
        Error::File {
            path: self.path.clone(),
            field: field.to_string(),
            message: message.into(),
        }
    }

    /// The value at a dotted path (`descriptors.device`, `timing.outputs.0`).
    pub fn at(&self, field: &str) -> Result<&serde_json::Value, Error> {
        let mut v = &self.doc;
        for part in field.split('.') {
            v = match v {
                serde_json::Value::Object(m) => m.get(part),
                serde_json::Value::Array(a) => part.parse::<usize>().ok().and_then(|i| a.get(i)),
                _ => None,
            }
            .ok_or_else(|| self.error(field, "missing"))?;
        }
        Ok(v)
    }

    /// A string field.
    pub fn str(&self, field: &str) -> Result<&str, Error> {
        self.at(field)?
            .as_str()
            .ok_or_else(|| self.error(field, "expected a string"))
    }

    /// An unsigned integer field (a JSON number, or a string `"0x..."`).
    pub fn u64(&self, field: &str) -> Result<u64, Error> {
        let v = self.at(field)?;
        if let Some(n) = v.as_u64() {
            return Ok(n);
        }
        v.as_str()
            .and_then(|s| s.strip_prefix("0x"))
            .and_then(|h| u64::from_str_radix(h, 16).ok())
            .ok_or_else(|| self.error(field, "expected an unsigned integer (or \"0x..\" hex)"))
    }

    /// A hex byte string field, optionally of an exact length.
    pub fn hex(&self, field: &str, len: Option<usize>) -> Result<Vec<u8>, Error> {
        let s = self.str(field)?;
        let b = crate::hex::decode(s).map_err(|e| self.error(field, format!("bad hex: {e}")))?;
        if let Some(n) = len {
            if b.len() != n {
                return Err(self.error(field, format!("expected {n} bytes, found {}", b.len())));
            }
        }
        Ok(b)
    }

    /// An array field.
    pub fn array(&self, field: &str) -> Result<&Vec<serde_json::Value>, Error> {
        self.at(field)?
            .as_array()
            .ok_or_else(|| self.error(field, "expected an array"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn errors_name_file_and_field() {
        let s = Spec::parse(
            "specs/x.json",
            br#"{"format":"t","version":1,"source":"test","d":{"dev":"1201","n":"0x10","a":[5]}}"#,
        )
        .unwrap();
        assert_eq!(s.hex("d.dev", Some(2)).unwrap(), vec![0x12, 0x01]);
        assert_eq!(s.u64("d.n").unwrap(), 16);
        assert_eq!(s.u64("d.a.0").unwrap(), 5);
        let e = s.hex("d.dev", Some(18)).unwrap_err().to_string();
        assert!(
            e.contains("specs/x.json") && e.contains("d.dev") && e.contains("18"),
            "{e}"
        );
        let e = s.str("d.missing").unwrap_err().to_string();
        assert!(e.contains("d.missing") && e.contains("missing"), "{e}");
        let e = Spec::parse("a.json", br#"{"format":"t","version":1}"#)
            .unwrap_err()
            .to_string();
        assert!(e.contains("source"), "{e}");
        assert!(Spec::parse("a.json", b"{")
            .unwrap_err()
            .to_string()
            .contains("not valid JSON"));
    }
}
