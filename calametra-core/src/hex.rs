//! Lowercase hex for bytes in traces, specs and regression files: the one encoder and decoder.

const DIGITS: &[u8; 16] = b"0123456789abcdef";

/// Appends `bytes` as lowercase hex.
pub fn push(buf: &mut String, bytes: &[u8]) {
    buf.reserve(bytes.len() * 2);
    for &b in bytes {
        buf.push(DIGITS[(b >> 4) as usize] as char);
        buf.push(DIGITS[(b & 15) as usize] as char);
    }
}

/// `bytes` as a lowercase hex string.
pub fn encode(bytes: &[u8]) -> String {
    let mut s = String::new();
    push(&mut s, bytes);
    s
}

/// Decodes hex; whitespace between byte pairs is allowed (`"12 01 10 03"`).
pub fn decode(s: &str) -> Result<Vec<u8>, String> {
    let digits: Vec<u8> = s.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
    if !digits.len().is_multiple_of(2) {
        return Err(format!(
            "odd number of hex digits ({}); expected two per byte",
            digits.len()
        ));
    }
    let val = |c: u8, at: usize| -> Result<u8, String> {
        match c {
            b'0'..=b'9' => Ok(c - b'0'),
            b'a'..=b'f' => Ok(c - b'a' + 10),
            b'A'..=b'F' => Ok(c - b'A' + 10),
            _ => Err(format!(
                "`{}` at digit {at} is not a hex digit",
                c.escape_ascii()
            )),
        }
    };
    digits
        .chunks(2)
        .enumerate()
        .map(|(i, p)| Ok(val(p[0], 2 * i)? << 4 | val(p[1], 2 * i + 1)?))
        .collect()
}

#[cfg(test)]
mod tests {
    #[test]
    fn round_trip_and_errors() {
        assert_eq!(super::encode(&[0, 0xab, 0x10]), "00ab10");
        assert_eq!(super::decode("00 AB10").unwrap(), vec![0, 0xab, 0x10]);
        assert!(super::decode("0").unwrap_err().contains("odd"));
        assert!(super::decode("zz").unwrap_err().contains("not a hex digit"));
    }
}
