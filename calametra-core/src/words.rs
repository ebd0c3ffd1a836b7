//! A short string's bytes as two machine words, so the site table and the decider's stream
//! look-up compare short names (`ctrl.get_status`, `driver`) word by word instead of calling
//! `memcmp`. Owns only [`edge_words`] and [`same`]; a table hashes the words its own way.

/// A string's first and last eight bytes (its first and last four below eight bytes; below
/// four, its bytes folded first byte highest), as little-endian words: with the string's
/// length they determine it when it is at most 16 bytes long (the two reads overlap and cover
/// every byte). Longer strings share their words with others, so a longer one is compared by
/// its bytes.
#[inline(always)]
pub(crate) fn edge_words(s: &[u8]) -> (u64, u64) {
    let n = s.len();
    let word = |b: &[u8]| {
        let mut w = [0u8; 8];
        w[..b.len()].copy_from_slice(b);
        u64::from_le_bytes(w)
    };
    if n >= 8 {
        (word(&s[..8]), word(&s[n - 8..]))
    } else if n >= 4 {
        (word(&s[..4]), word(&s[n - 4..]))
    } else {
        (s.iter().fold(0, |h, &b| (h << 8) | u64::from(b)), 0)
    }
}

/// Whether two strings are equal, compared by their [`edge_words`] when at most 16 bytes long.
#[inline(always)]
pub(crate) fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len()
        && if a.len() <= 16 {
            edge_words(a) == edge_words(b)
        } else {
            a == b
        }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every pair of strings of 0-17 bytes over a two-letter alphabet (so many share their
    /// ends): `same` is `==`, and equal words with equal lengths up to 16 mean equal strings.
    #[test]
    fn short_strings_are_determined_by_their_words() {
        let mut all: Vec<Vec<u8>> = Vec::new();
        for n in 0..=17usize {
            // Strings differing from `aaa...` in one byte, and the all-`a` string.
            all.push(vec![b'a'; n]);
            for i in 0..n {
                let mut s = vec![b'a'; n];
                s[i] = b'b';
                all.push(s);
            }
        }
        all.push(b"\0".to_vec());
        all.push(b"\0\0".to_vec());
        for a in &all {
            for b in &all {
                assert_eq!(same(a, b), a == b, "{a:?} {b:?}");
                if a.len() == b.len() && a.len() <= 16 {
                    assert_eq!(edge_words(a) == edge_words(b), a == b, "{a:?} {b:?}");
                }
            }
        }
    }
}
