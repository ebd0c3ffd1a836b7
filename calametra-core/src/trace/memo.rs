//! The SHA-256 of a short trace's bytes, remembered per thread: runs that explore a small
//! program by random schedules meet the same short trace again and again (workload A: about
//! 2,000 distinct traces in 20,000 runs), and its hash is then found instead of computed.
//!
//! The memo is a pure cache of SHA-256: an entry is used only when its bytes equal the bytes
//! asked for, every one compared, so which entries it holds (and how they are keyed) never
//! shows in a hash. Traces longer than [`MEMO_BYTES`] are hashed directly (long runs rarely
//! repeat, and they are not copied). Nothing here knows the encoding.

use sha2::{Digest, Sha256};
use std::cell::RefCell;

/// The longest encoding kept in the memo.
const MEMO_BYTES: usize = 512;

/// Entries in the memo (a power of two): each holds one encoding, in a slot picked by a fast
/// non-cryptographic hash of its bytes; a new encoding replaces the slot's old one.
const MEMO_SLOTS: usize = 256;

struct Memo {
    /// `MEMO_SLOTS` slots of `MEMO_BYTES` bytes (one allocation).
    bytes: Vec<u8>,
    /// Each slot's encoding length, or `u16::MAX` when the slot is empty.
    lens: Vec<u16>,
    /// Each slot's SHA-256.
    hashes: Vec<[u8; 32]>,
}

const _: () = assert!(MEMO_BYTES < u16::MAX as usize && MEMO_SLOTS.is_power_of_two());

thread_local! {
    static MEMO: RefCell<Memo> = const {
        RefCell::new(Memo {
            bytes: Vec::new(),
            lens: Vec::new(),
            hashes: Vec::new(),
        })
    };
}

/// SHA-256 of `bytes` (a trace's whole encoding): from the memo when it holds exactly these
/// bytes, else computed (and, when short, remembered).
pub(super) fn sha256(bytes: &[u8]) -> [u8; 32] {
    if bytes.len() > MEMO_BYTES {
        return Sha256::digest(bytes).into();
    }
    MEMO.try_with(|m| {
        let mut m = m.try_borrow_mut().ok()?;
        Some(m.sha256(bytes))
    })
    .ok()
    .flatten()
    .unwrap_or_else(|| Sha256::digest(bytes).into())
}

impl Memo {
    fn sha256(&mut self, bytes: &[u8]) -> [u8; 32] {
        if self.lens.is_empty() {
            self.bytes = vec![0; MEMO_SLOTS * MEMO_BYTES];
            self.lens = vec![u16::MAX; MEMO_SLOTS];
            self.hashes = vec![[0; 32]; MEMO_SLOTS];
        }
        let slot = key(bytes) & (MEMO_SLOTS - 1);
        let at = slot * MEMO_BYTES;
        let held = &mut self.bytes[at..at + MEMO_BYTES][..bytes.len()];
        if usize::from(self.lens[slot]) == bytes.len() && held == bytes {
            return self.hashes[slot];
        }
        let hash: [u8; 32] = Sha256::digest(bytes).into();
        held.copy_from_slice(bytes);
        self.lens[slot] = bytes.len() as u16;
        self.hashes[slot] = hash;
        hash
    }
}

#[inline(always)]
fn word(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// A fast hash of `bytes` that picks a slot (four independent lanes of 8 bytes): only how well
/// it spreads encodings matters, never its value.
fn key(bytes: &[u8]) -> usize {
    const K: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut h = [bytes.len() as u64, 1, 2, 3];
    let mut mix = |c: &[u8]| {
        for (i, h) in h.iter_mut().enumerate() {
            *h = (*h ^ word(c, 8 * i)).wrapping_mul(K).rotate_left(27);
        }
    };
    let mut chunks = bytes.chunks_exact(32);
    for c in &mut chunks {
        mix(c);
    }
    let rest = chunks.remainder();
    if !rest.is_empty() {
        if bytes.len() >= 32 {
            // The last 32 bytes, overlapping what was mixed (the length is mixed in too).
            mix(&bytes[bytes.len() - 32..]);
        } else {
            let mut last = [0u8; 32];
            last[..rest.len()].copy_from_slice(rest);
            mix(&last);
        }
    }
    let x = h[0] ^ h[1].rotate_left(16) ^ h[2].rotate_left(32) ^ h[3].rotate_left(48);
    (x.wrapping_mul(K) >> 32) as usize
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The memo answers exactly SHA-256, over encodings that share slots, repeat, differ in
    /// one byte or in length, and are too long to be kept.
    #[test]
    fn the_memo_is_sha256() {
        use rand_chacha::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let pool: Vec<Vec<u8>> = (0..3 * MEMO_SLOTS)
            .map(|i| {
                let n = match i % 5 {
                    0 => i % 8,
                    1 => MEMO_BYTES,
                    2 => MEMO_BYTES + 1 + i % 40,
                    _ => (rng.next_u32() as usize) % MEMO_BYTES,
                };
                let mut v = vec![0u8; n];
                rng.fill_bytes(&mut v);
                v
            })
            .collect();
        for round in 0..20_000 {
            let mut b = pool[(rng.next_u32() as usize) % pool.len()].clone();
            if round % 3 == 0 && !b.is_empty() {
                // A near miss: one byte changed, or one dropped.
                let i = (rng.next_u32() as usize) % b.len();
                if round % 2 == 0 {
                    b[i] ^= 1;
                } else {
                    b.remove(i);
                }
            }
            let want: [u8; 32] = Sha256::digest(&b).into();
            assert_eq!(sha256(&b), want, "round {round}, {} bytes", b.len());
        }
        // Every slot was used and the memo held its bound.
        MEMO.with(|m| {
            let m = m.borrow();
            assert!(m.lens.iter().all(|&l| l != u16::MAX));
            assert_eq!(m.bytes.len(), MEMO_SLOTS * MEMO_BYTES);
        });
    }
}
