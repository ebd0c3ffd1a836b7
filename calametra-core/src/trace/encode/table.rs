//! A trace's string table (hash version 3 interns strings): the distinct strings in the order
//! first met and their indices. Only [`super`] (the version-3 encoder) uses it.

use super::{KEEP_BYTES, MAX_INTERNED};

/// A trace's string table: the distinct strings in the order first met, found by an
/// open-addressing index. Only the order strings are met in decides an index, never the index's
/// hash, so the encoding does not depend on it. A string of up to 16 bytes is held in its slot
/// as two words that cover all its bytes (so finding one reads no other memory); a longer one
/// is held in `long` and its slot holds its hash and where it starts. The table is at most a
/// quarter full (a search mostly ends at its first slot).
///
/// The table outlives its trace: emptied for the next trace ([`Interner::clear`]) it keeps its
/// strings, each stamped with the trace (`epoch`) that last gave it an index, and only a
/// string stamped with the current trace has an index. So a new trace costs no work per
/// string, and a string an earlier trace had costs the next one a stamp instead of an insert;
/// which strings the table holds from earlier traces never shows in an index or in a byte
/// written (a held string without this trace's stamp is treated exactly as an absent one).
/// The strings kept from earlier traces are bounded ([`KEEP_STRINGS`]).
pub(super) struct Interner {
    /// Power-of-two sized (or empty), at most a quarter full.
    slots: Vec<Slot>,
    /// `64 - log2(slots.len())`: a hash's top bits pick the first slot (0 while empty).
    shift: u32,
    /// How many strings the current trace has given an index.
    count: u32,
    /// The current trace's stamp (never 0, the mark of an empty slot).
    epoch: u16,
    /// How many slots are in use (strings of this and earlier traces).
    live: u32,
    /// The bytes of strings longer than 16 bytes.
    long: Vec<u8>,
    /// The slots in use, so emptying the table touches only them.
    used: Vec<u32>,
}

impl Default for Interner {
    fn default() -> Self {
        Interner {
            slots: Vec::new(),
            shift: 0,
            count: 0,
            epoch: 1,
            live: 0,
            long: Vec::new(),
            used: Vec::new(),
        }
    }
}

#[derive(Clone, Copy, Default)]
struct Slot {
    /// Up to 16 bytes: the first word of the string (see [`Interner::words`]); longer: its hash.
    a: u64,
    /// Up to 16 bytes: the last word; longer: its start in `long`.
    b: u64,
    len: u32,
    /// 0 when empty, else the stamp of the trace that last gave the string an index.
    epoch: u16,
    /// The string's index in the trace of `epoch`.
    idx: u16,
}

// A string's index fits its slot.
const _: () = assert!(MAX_INTERNED <= 1 << 16);

/// The most strings a table keeps from earlier traces when it is emptied: more, and it is
/// emptied outright (so a workload of ever new strings does not grow it without end).
pub(super) const KEEP_STRINGS: u32 = 1024;

/// Where a search ended without finding the string with the current stamp: the slot of the
/// string held with an older stamp, or the empty slot where it would go ([`NOWHERE`] while the
/// table has no slots). Valid until the table next changes.
pub(super) type Miss = usize;

/// The miss of a table without slots.
pub(super) const NOWHERE: Miss = usize::MAX;

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
    pub(super) fn words(s: &[u8]) -> (u64, u64) {
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

    /// The index of `s` in the current trace, or where its search ended (for [`Interner::add`]).
    #[inline(always)]
    pub(super) fn find(&self, s: &[u8]) -> Result<u32, Miss> {
        if s.len() > 16 {
            return self.find_long(s);
        }
        let (a, b) = Self::words(s);
        self.find_short(a, b, s.len() as u32)
    }

    /// [`Interner::find`] of a string of `len` bytes, at most 16, given by its
    /// [`Interner::words`].
    #[inline(always)]
    pub(super) fn find_short(&self, a: u64, b: u64, len: u32) -> Result<u32, Miss> {
        debug_assert!(len <= 16);
        // An empty table has `shift` 0, so this first slot is past its end: not found.
        let mask = self.slots.len().wrapping_sub(1);
        let epoch = self.epoch;
        let mut i = Self::bucket(a, b, len, self.shift);
        loop {
            let Some(slot) = self.slots.get(i) else {
                return Err(NOWHERE);
            };
            if slot.a == a && slot.b == b && slot.len == len {
                if slot.epoch == epoch {
                    return Ok(u32::from(slot.idx));
                }
                // Held from an earlier trace, or (the empty string) an empty slot.
                return Err(i);
            }
            if slot.epoch == 0 {
                return Err(i);
            }
            i = (i + 1) & mask;
        }
    }

    #[inline(never)]
    fn find_long(&self, s: &[u8]) -> Result<u32, Miss> {
        if self.slots.is_empty() {
            return Err(NOWHERE);
        }
        let Ok(len) = u32::try_from(s.len()) else {
            return Err(NOWHERE);
        };
        let (a, _) = Self::words(s);
        let mask = self.slots.len() - 1;
        let mut i = Self::bucket(a, 0, len, self.shift);
        loop {
            let slot = &self.slots[i];
            if slot.epoch == 0 {
                return Err(i);
            }
            let start = slot.b as usize;
            if slot.a == a && slot.len == len && self.long.get(start..start + s.len()) == Some(s) {
                return if slot.epoch == self.epoch {
                    Ok(u32::from(slot.idx))
                } else {
                    Err(i)
                };
            }
            i = (i + 1) & mask;
        }
    }

    /// Gives `s`, which the current trace has not had ([`Interner::find`] just answered
    /// `Err(miss)` and nothing changed since), the next index while the trace has room: a
    /// stamp when the table holds it from an earlier trace, else an insert. The index given,
    /// or `None` when the trace has no room (`s` then has none).
    #[inline(always)]
    pub(super) fn add(&mut self, s: &[u8], miss: Miss) -> Option<u32> {
        let idx = self.count;
        if idx as usize >= MAX_INTERNED {
            return None;
        }
        // Held from an earlier trace (the search ended at it): stamp it.
        if let Some(given) = self.restamp(miss) {
            return Some(given);
        }
        self.insert(s, miss);
        // `insert` gives an index to every string of a length that fits `u32`.
        (self.count > idx).then_some(idx)
    }

    /// [`Interner::add`] when the search ended at the string, held from an earlier trace, and
    /// the trace has room: the string is stamped and its index given; else nothing changes
    /// (`None`: [`Interner::add`] must then insert it, or it gets no index).
    #[inline(always)]
    pub(super) fn restamp(&mut self, miss: Miss) -> Option<u32> {
        let idx = self.count;
        if idx as usize >= MAX_INTERNED {
            return None;
        }
        let slot = self.slots.get_mut(miss)?;
        if slot.epoch == 0 {
            return None;
        }
        slot.epoch = self.epoch;
        slot.idx = idx as u16;
        self.count = idx + 1;
        Some(idx)
    }

    /// [`Interner::add`] of a string the table does not hold.
    #[inline(never)]
    fn insert(&mut self, s: &[u8], miss: Miss) {
        let n = s.len();
        let Ok(len) = u32::try_from(n) else {
            return;
        };
        let idx = self.count as u16;
        self.count += 1;
        let (a, b) = Self::words(s);
        let b = if n <= 16 {
            b
        } else {
            self.long.extend_from_slice(s);
            (self.long.len() - n) as u64
        };
        let slot = Slot {
            a,
            b,
            len,
            epoch: self.epoch,
            idx,
        };
        self.live += 1;
        if self.slots.is_empty() {
            self.slots = vec![Slot::default(); FIRST_SLOTS];
            self.shift = 64 - FIRST_SLOTS.trailing_zeros();
        } else if self.live as usize * 4 <= self.slots.len() {
            // The empty slot the search ended at is where `place` would put it.
            self.slots[miss] = slot;
            self.used.push(miss as u32);
            return;
        }
        if self.live as usize * 4 > self.slots.len() {
            self.grow();
        }
        self.place(slot);
    }

    /// Puts `slot` in the first free place from its bucket.
    fn place(&mut self, slot: Slot) {
        let mask = self.slots.len() - 1;
        let b = if slot.len <= 16 { slot.b } else { 0 };
        let mut i = Self::bucket(slot.a, b, slot.len, self.shift);
        while self.slots[i].epoch != 0 {
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
        for slot in old.into_iter().filter(|s| s.epoch != 0) {
            self.place(slot);
        }
    }

    /// How many slots the table has (the memory it holds).
    pub(super) fn slots(&self) -> usize {
        self.slots.len()
    }

    /// Empties the table for the next trace, which then has no string: a new stamp, keeping
    /// the strings held (and the memory) unless they are more than [`KEEP_STRINGS`], their
    /// bytes more than `KEEP_BYTES`, or the stamps have run out.
    pub(super) fn clear(&mut self) {
        self.count = 0;
        self.epoch = self.epoch.wrapping_add(1);
        if self.epoch == 0 || self.live > KEEP_STRINGS || self.long.len() > KEEP_BYTES {
            self.wipe();
        }
    }

    /// Drops every string held, keeping the memory (bar a huge `long`), with a fresh stamp.
    #[cold]
    fn wipe(&mut self) {
        for &i in &self.used {
            self.slots[i as usize] = Slot::default();
        }
        self.used.clear();
        if self.long.capacity() > KEEP_BYTES {
            self.long = Vec::new();
        }
        self.long.clear();
        self.live = 0;
        self.epoch = 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The index of `s` in the current trace, giving it the next one when it has none (what
    /// the encoder does).
    fn intern(t: &mut Interner, s: &[u8]) -> Option<u32> {
        match t.find(s) {
            Ok(i) => Some(i),
            Err(miss) => {
                let before = t.count;
                let given = t.add(s, miss);
                // The index `add` reports is the one the string got, if any.
                assert_eq!(given, (t.count > before).then_some(before));
                if let Some(i) = given {
                    assert_eq!(t.find(s), Ok(i));
                }
                None
            }
        }
    }

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
            assert_eq!(intern(&mut t, w.as_bytes()), None);
        }
        for (i, w) in words.iter().enumerate().take(MAX_INTERNED) {
            assert_eq!(t.find(w.as_bytes()), Ok(i as u32));
        }
        // Past the bound a new string is never added, so it is written out each time.
        for w in &words[MAX_INTERNED..] {
            assert!(t.find(w.as_bytes()).is_err());
        }
        assert!(t.find(b"").is_err());
        // Emptied, the table has none of them, and filled again in another order it numbers
        // them by the new order.
        t.clear();
        assert_eq!(t.count, 0);
        for w in &words {
            assert!(t.find(w.as_bytes()).is_err());
        }
        for w in words.iter().rev().take(100) {
            assert_eq!(intern(&mut t, w.as_bytes()), None);
        }
        for (i, w) in words.iter().rev().take(100).enumerate() {
            assert_eq!(t.find(w.as_bytes()), Ok(i as u32));
        }
        assert!(t.find(words[0].as_bytes()).is_err());
    }

    #[test]
    fn an_empty_table_finds_nothing() {
        let t = Interner::default();
        for w in ["", "a", "abcd", "abcdefgh", "abcdefghijklmnopq"] {
            assert_eq!(t.find(w.as_bytes()), Err(NOWHERE));
        }
    }

    /// A table kept from trace to trace numbers each trace's strings exactly as a fresh table
    /// does: over many traces with strings old and new, short and long, in other orders, past
    /// the bound of strings kept and past the per-trace bound, and across stamps running out.
    #[test]
    fn a_kept_table_numbers_every_trace_as_a_fresh_one() {
        use rand_chacha::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut kept = Interner::default();
        let pool: Vec<Vec<u8>> = (0..300)
            .map(|i| format!("{}{i}", "s".repeat(i % 23)).into_bytes())
            .collect();
        for trace in 0..70_000u32 {
            // Most traces are short; some bring many new strings (the kept strings' bound),
            // and a few exceed the per-trace bound.
            let n = match trace % 5000 {
                0 => MAX_INTERNED + 50,
                1..=3 => 600,
                _ => (rng.next_u32() % 12) as usize,
            };
            let mut fresh = Interner::default();
            for k in 0..n {
                let s: Vec<u8> = if rng.next_u32() % 4 == 0 {
                    format!("t{trace}-{k}-{}", "n".repeat(k % 20)).into_bytes()
                } else {
                    pool[(rng.next_u32() % 300) as usize].clone()
                };
                assert_eq!(
                    intern(&mut kept, &s),
                    intern(&mut fresh, &s),
                    "trace {trace}, string {k}"
                );
            }
            assert_eq!(kept.count, fresh.count);
            kept.clear();
            assert!(kept.live <= KEEP_STRINGS, "{}", kept.live);
        }
        // 70,000 traces: the 16-bit stamps ran out (a wipe) once; the table stayed bounded.
        assert!(kept.slots() <= 4 * 8192, "{}", kept.slots());
    }
}
