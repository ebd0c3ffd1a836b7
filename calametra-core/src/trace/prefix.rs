//! The SHA-256 states after the leading 64-byte blocks of this thread's recent traces, so a
//! trace that begins with the same bytes as an earlier one (runs of a sweep or a spin mostly
//! begin alike: the swarm's `config` record, the first tasks' records) takes the state its
//! prefix hashed to instead of compressing those blocks again. Only [`super::Trace`] uses it.
//!
//! Why it never changes a hash: SHA-256's state after whole blocks is a function of those
//! blocks' bytes alone, and a kept state is taken only for a prefix whose every block equals,
//! byte for byte, the blocks that state was computed from (a prefix is identified by its last
//! block and the id of the prefix one block shorter; ids are never reused, so a kept prefix
//! whose shorter prefix was since replaced can never be matched again). The hash of the bytes
//! is then the hash a fresh hasher computes over them.

use sha2::digest::core_api::{Block, CoreProxy, CoreWrapper, UpdateCore};
use sha2::{Digest, Sha256};
use std::cell::RefCell;

/// SHA-256's state without its buffer of a partial block (a trace's leading blocks are whole):
/// what [`Sha256`] wraps.
type Core = <Sha256 as CoreProxy>::Core;

/// The most leading blocks of a trace whose states are kept.
pub(super) const PREFIX_BLOCKS: usize = 4;

/// Kept prefixes of each length (a prefix goes to one slot, picked by its bytes).
const WAYS: usize = 64;

/// A SHA-256 block's bytes.
const BLOCK: usize = 64;

/// One kept prefix: the state after its blocks.
#[derive(Clone)]
struct Prefix {
    /// Unique among the prefixes this thread ever kept; 0 for a slot that holds none.
    id: u64,
    /// The id of this prefix without its last block (0 when it is one block long).
    parent: u64,
    /// Its last block.
    block: [u8; BLOCK],
    /// SHA-256 fed every block of the prefix.
    state: Core,
}

/// The kept prefixes of one thread: `PREFIX_BLOCKS` rows of [`WAYS`] slots, the row of a
/// prefix being its length in blocks less one.
struct Prefixes {
    /// Empty until first used.
    slots: Vec<Prefix>,
    /// The last id given.
    last_id: u64,
}

thread_local! {
    static PREFIXES: RefCell<Prefixes> = const {
        RefCell::new(Prefixes {
            slots: Vec::new(),
            last_id: 0,
        })
    };
}

/// The slot in its row of the prefix ending in `block` after the prefix `parent`.
#[inline(always)]
fn slot(parent: u64, block: &[u8; BLOCK]) -> usize {
    let mut sum = parent;
    for w in block.chunks_exact(8) {
        let mut word = [0u8; 8];
        word.copy_from_slice(w);
        sum = sum.wrapping_add(u64::from_le_bytes(word));
    }
    (sum.wrapping_mul(0x9e37_79b9_7f4a_7c15) >> 58) as usize % WAYS
}

/// Block `i` of `bytes` (which has it).
#[inline(always)]
fn block(bytes: &[u8], i: usize) -> &[u8; BLOCK] {
    bytes[i * BLOCK..(i + 1) * BLOCK]
        .try_into()
        .expect("a whole block")
}

impl Prefixes {
    /// SHA-256 fed the leading whole blocks of `bytes` (at most [`PREFIX_BLOCKS`]), and how
    /// many bytes that is: a kept state for as many of them as were kept, the rest compressed
    /// and kept for the next trace.
    fn start(&mut self, bytes: &[u8]) -> (Core, usize) {
        let blocks = (bytes.len() / BLOCK).min(PREFIX_BLOCKS);
        if blocks == 0 {
            return (Core::default(), 0);
        }
        if self.slots.is_empty() {
            let none = Prefix {
                id: 0,
                parent: 0,
                block: [0; BLOCK],
                state: Core::default(),
            };
            self.slots = vec![none; PREFIX_BLOCKS * WAYS];
        }
        let (mut parent, mut found, mut d) = (0, None, 0);
        while d < blocks {
            let b = block(bytes, d);
            let at = d * WAYS + slot(parent, b);
            let p = &self.slots[at];
            if p.id == 0 || p.parent != parent || p.block != *b {
                break;
            }
            parent = p.id;
            found = Some(at);
            d += 1;
        }
        let mut state = match found {
            Some(at) => self.slots[at].state.clone(),
            None => Core::default(),
        };
        for d in d..blocks {
            let b = block(bytes, d);
            state.update_blocks(std::slice::from_ref(Block::<Core>::from_slice(b)));
            self.last_id += 1;
            let p = &mut self.slots[d * WAYS + slot(parent, b)];
            p.id = self.last_id;
            p.parent = parent;
            p.block = *b;
            p.state = state.clone();
            parent = self.last_id;
        }
        (state, blocks * BLOCK)
    }
}

/// SHA-256 fed all of `bytes`, its leading blocks by this thread's kept prefixes (the state a
/// fresh hasher reaches over them, see the module docs).
pub(super) fn hasher_over(bytes: &[u8]) -> Sha256 {
    let started = PREFIXES
        .try_with(|p| p.try_borrow_mut().ok().map(|mut p| p.start(bytes)))
        .ok()
        .flatten();
    let (core, done) = started.unwrap_or_default();
    let mut state = CoreWrapper::from_core(core);
    state.update(&bytes[done..]);
    state
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Over traces that share with earlier ones prefixes of 0 to past [`PREFIX_BLOCKS`]
    /// blocks and then differ right after a block's end, inside a block or not at all, are
    /// shorter or longer than them, or have no whole block: the state reached by kept prefixes
    /// hashes exactly as plain SHA-256 of the bytes, and kept states are used.
    #[test]
    fn kept_prefixes_hash_as_plain_sha256() {
        use rand_chacha::rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(11);
        let mut base = vec![0u8; BLOCK * (PREFIX_BLOCKS + 2)];
        rng.fill_bytes(&mut base);
        let mut bases = vec![base.clone()];
        let mut reused = 0;
        for case in 0..4000u32 {
            // One of the last few kept (so most share a prefix with a recent trace).
            let back = 1 + rng.next_u32() as usize % bases.len().min(3);
            let mut bytes = bases[bases.len() - back].clone();
            // Where it starts to differ: at a block's start, inside a block, or nowhere.
            let blocks = rng.next_u32() as usize % (PREFIX_BLOCKS + 2);
            let at = match rng.next_u32() % 3 {
                0 => blocks * BLOCK,
                1 => blocks * BLOCK + 1 + rng.next_u32() as usize % (BLOCK - 1),
                _ => bytes.len(),
            };
            if at < bytes.len() {
                bytes[at] ^= 1 + (rng.next_u32() % 255) as u8;
            }
            if case % 7 == 0 {
                bases.push(bytes.clone());
            }
            // Shorter than the traces it shares its prefix with, down to no whole block.
            if rng.next_u32().is_multiple_of(4) {
                bytes.truncate(rng.next_u32() as usize % (bytes.len() + 1));
            }
            let before = PREFIXES.with(|p| p.borrow().last_id);
            let h = hasher_over(&bytes);
            let after = PREFIXES.with(|p| p.borrow().last_id);
            let whole = (bytes.len() / BLOCK).min(PREFIX_BLOCKS) as u64;
            reused += whole - (after - before);
            assert_eq!(
                h.finalize()[..],
                Sha256::digest(&bytes)[..],
                "case {case}: {} bytes, differing at {at}",
                bytes.len()
            );
        }
        assert!(reused > 3000, "kept states used {reused} times");
    }

    /// A prefix whose shorter prefix was replaced in its slot is never matched again: with a
    /// first-row slot shared by two first blocks, the second block's state is not reused under
    /// the other first block.
    #[test]
    fn a_replaced_prefix_orphans_its_longer_ones() {
        let first = [1u8; BLOCK];
        // Another first block in the same slot.
        let other = (0..=255u8)
            .flat_map(|a| (0..=255u8).map(move |b| (a, b)))
            .map(|(a, b)| {
                let mut other = first;
                other[0] = a;
                other[9] = b;
                other
            })
            .find(|o| *o != first && slot(0, o) == slot(0, &first))
            .expect("some block shares the slot");
        let tail = [7u8; BLOCK];
        let one: Vec<u8> = first.iter().chain(&tail).copied().collect();
        let two: Vec<u8> = other.iter().chain(&tail).copied().collect();
        for bytes in [&one, &two, &one, &two, &two, &one] {
            assert_eq!(hasher_over(bytes).finalize()[..], Sha256::digest(bytes)[..]);
        }
    }
}
