//! A trace's string table (hash version 3 interns strings): the distinct strings in the order
//! first met and their indices. Only [`super`] (the version-3 encoder) uses it.

use super::{KEEP_BYTES, MAX_INTERNED};

/// A trace's string table: the distinct strings in the order first met, found by an
/// open-addressing index. Only the order strings are met in decides an index, never the index's
/// hash, so the encoding does not depend on it. A string of up to 16 bytes is held in its slot
/// as two words that cover all its bytes (so finding one reads no other memory); a longer one
/// is held in `long` and its slot holds its hash and where it starts. The table is at most a
/// quarter full (a search mostly ends at its first slot) and can be emptied for the next trace
/// without giving back its memory ([`Interner::clear`]).
#[derive(Default)]
pub(super) struct Interner {
    /// Power-of-two sized (or empty), at most a quarter full.
    slots: Vec<Slot>,
    /// `64 - log2(slots.len())`: a hash's top bits pick the first slot (0 while empty).
    shift: u32,
    /// How many strings the table holds.
    count: u32,
    /// The bytes of strings longer than 16 bytes.
    long: Vec<u8>,
    /// The slots in use, so emptying the table touches only them.
    used: Vec<u32>,
}

#[derive(Clone, Copy, Default)]
struct Slot {
    /// Up to 16 bytes: the first word of the string (see [`Interner::words`]); longer: its hash.
    a: u64,
    /// Up to 16 bytes: the last word; longer: its start in `long`.
    b: u64,
    len: u32,
    /// 0 when empty, else the string's index plus one.
    idx: u32,
}

const K: u64 = 0x517c_c1b7_2722_0a95;

/// The table's size when it is first used: room for 64 strings at a quarter full.
const FIRST_SLOTS: usize = 256;

#[inline(always)]
fn word8(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&s[at..at + 8]);
    u64::from_le_bytes(w)
}

#[inline(always)]
fn word4(s: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&s[at..at + 4]);
    u64::from(u32::from_le_bytes(w))
}

impl Interner {
    /// Two words that, with the length, determine a string of up to 16 bytes (its first and
    /// last 8, 4 or 1 bytes, overlapping); for a longer string, a hash of all its bytes.
    #[inline(always)]
    fn words(s: &[u8]) -> (u64, u64) {
        let n = s.len();
        match n {
            0 => (0, 0),
            1..=3 => (
                u64::from(s[0]) | u64::from(s[n / 2]) << 8 | u64::from(s[n - 1]) << 16,
                0,
            ),
            4..=7 => (word4(s, 0), word4(s, n - 4)),
            8..=16 => (word8(s, 0), word8(s, n - 8)),
            _ => {
                let mut h = n as u64;
                let mut at = 0;
                while at + 8 <= n {
                    h = (h.rotate_left(5) ^ word8(s, at)).wrapping_mul(K);
                    at += 8;
                }
                h = (h.rotate_left(5) ^ word8(s, n - 8)).wrapping_mul(K);
                (h, 0)
            }
        }
    }

    /// Where a string's search starts: the top bits of a mix of its words and length.
    #[inline(always)]
    fn bucket(a: u64, b: u64, len: u32, shift: u32) -> usize {
        let h = (a ^ u64::from(len).rotate_right(8)).wrapping_mul(K);
        let h = (h.rotate_left(26) ^ b).wrapping_mul(K);
        (h >> shift) as usize
    }

    /// The index of `s` when the table has it.
    #[inline(always)]
    pub(super) fn find(&self, s: &[u8]) -> Option<u32> {
        if s.len() > 16 {
            return self.find_long(s);
        }
        let (a, b) = Self::words(s);
        let len = s.len() as u32;
        let mask = self.slots.len().wrapping_sub(1);
        // An empty table has `shift` 0, so this first slot is past its end: not found.
        let mut i = Self::bucket(a, b, len, self.shift);
        loop {
            let slot = self.slots.get(i)?;
            if slot.idx == 0 {
                return None;
            }
            if slot.a == a && slot.b == b && slot.len == len {
                return Some(slot.idx - 1);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline(never)]
    fn find_long(&self, s: &[u8]) -> Option<u32> {
        if self.slots.is_empty() {
            return None;
        }
        let len = u32::try_from(s.len()).ok()?;
        let (a, _) = Self::words(s);
        let mask = self.slots.len() - 1;
        let mut i = Self::bucket(a, 0, len, self.shift);
        loop {
            let slot = &self.slots[i];
            if slot.idx == 0 {
                return None;
            }
            let start = slot.b as usize;
            if slot.a == a && slot.len == len && self.long.get(start..start + s.len()) == Some(s) {
                return Some(slot.idx - 1);
            }
            i = (i + 1) & mask;
        }
    }

    /// Adds `s`, which the table does not have, while the table has room.
    pub(super) fn add(&mut self, s: &[u8]) {
        let n = s.len();
        let Ok(len) = u32::try_from(n) else {
            return;
        };
        if self.count as usize >= MAX_INTERNED {
            return;
        }
        if self.slots.is_empty() {
            self.slots = vec![Slot::default(); FIRST_SLOTS];
            self.shift = 64 - FIRST_SLOTS.trailing_zeros();
        }
        let (a, b) = Self::words(s);
        let b = if n <= 16 {
            b
        } else {
            self.long.extend_from_slice(s);
            (self.long.len() - n) as u64
        };
        self.count += 1;
        let slot = Slot {
            a,
            b,
            len,
            idx: self.count,
        };
        if self.count as usize * 4 > self.slots.len() {
            self.grow();
        }
        self.place(slot);
    }

    /// Puts `slot` in the first free place from its bucket.
    fn place(&mut self, slot: Slot) {
        let mask = self.slots.len() - 1;
        let b = if slot.len <= 16 { slot.b } else { 0 };
        let mut i = Self::bucket(slot.a, b, slot.len, self.shift);
        while self.slots[i].idx != 0 {
            i = (i + 1) & mask;
        }
        self.slots[i] = slot;
        self.used.push(i as u32);
    }

    fn grow(&mut self) {
        let bigger = vec![Slot::default(); self.slots.len() * 2];
        let old = std::mem::replace(&mut self.slots, bigger);
        self.shift -= 1;
        self.used.clear();
        for slot in old.into_iter().filter(|s| s.idx != 0) {
            self.place(slot);
        }
    }

    /// How many slots the table has (the memory it holds).
    pub(super) fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Empties the table, keeping its memory for the next trace.
    pub(super) fn clear(&mut self) {
        for &i in &self.used {
            self.slots[i as usize] = Slot::default();
        }
        self.used.clear();
        if self.long.capacity() > KEEP_BYTES {
            self.long = Vec::new();
        }
        self.long.clear();
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_table_finds_what_it_added_and_stops_growing_at_its_bound() {
        let mut t = Interner::default();
        // Every length from 0 to 40 (short strings are held in their slots, longer ones
        // apart), strings that share their first and last bytes, and the empty string.
        let words: Vec<String> = (0..MAX_INTERNED + 10)
            .map(|i| match i % 4 {
                0 => format!("w{i}"),
                1 => format!("a{i}{}z", "-".repeat(i % 41)),
                2 => format!("{i:0w$}", w = i % 41),
                _ => format!("{}{i}{}", "x".repeat(1 + i % 17), "y".repeat(i % 9)),
            })
            .collect();
        let distinct: std::collections::BTreeSet<&String> = words.iter().collect();
        assert_eq!(distinct.len(), words.len(), "the words are distinct");
        for w in &words {
            assert_eq!(t.find(w.as_bytes()), None);
            t.add(w.as_bytes());
        }
        for (i, w) in words.iter().enumerate().take(MAX_INTERNED) {
            assert_eq!(t.find(w.as_bytes()), Some(i as u32));
        }
        // Past the bound a new string is never added, so it is written out each time.
        for w in &words[MAX_INTERNED..] {
            assert_eq!(t.find(w.as_bytes()), None);
        }
        assert_eq!(t.find(b""), None);
        // Emptied, the table has none of them, and filled again in another order it numbers
        // them by the new order.
        t.clear();
        assert_eq!(t.count, 0);
        for w in &words {
            assert_eq!(t.find(w.as_bytes()), None);
        }
        for w in words.iter().rev().take(100) {
            t.add(w.as_bytes());
        }
        for (i, w) in words.iter().rev().take(100).enumerate() {
            assert_eq!(t.find(w.as_bytes()), Some(i as u32));
        }
        assert_eq!(t.find(words[0].as_bytes()), None);
    }

    #[test]
    fn an_empty_table_finds_nothing() {
        let t = Interner::default();
        for w in ["", "a", "abcd", "abcdefgh", "abcdefghijklmnopq"] {
            assert_eq!(t.find(w.as_bytes()), None);
        }
    }
}
