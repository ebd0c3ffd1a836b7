//! Site counting ([`SiteTable`]): a crossing is its interned base and its occurrence
//! ([`SiteId`]); the table counts occurrences per base for the run, finds the fault plan's
//! entries at a base once a run, and builds the name `<base>#<n>` only where it is written as
//! text.

use crate::fault::{Fault, FaultPlan};
use crate::words::edge_words;

/// A site crossing: its base ([`SiteTable`] index) and its occurrence `n` (from 1). The
/// name `<base>#<n>` is built only where it is written out as text (a logged fault, a schedule
/// label, a state dump); trace records take it by its parts ([`crate::trace::Data::site`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SiteId {
    pub(crate) base: u32,
    pub(crate) n: u32,
}

/// One interned site base (`ctrl.get_status`, `echo.empty->full`) and what this run counted
/// of it.
struct SiteBase {
    name: Box<str>,
    hash: u64,
    /// The name's words ([`edge_words`]): with its length, the whole name when it is at most
    /// 16 bytes (then a probe compares them, not the bytes).
    words: (u64, u64),
    /// Its crossings in this run.
    count: u32,
    /// Its crossings when the run's most recent anchor occurred.
    at_anchor: u32,
    /// The [`SiteTable::plan_epoch`] whose fault plan `plan` holds at this base (found at its
    /// first crossing under that plan), or 0.
    plan_epoch: u64,
    /// The plan's faults at this base: (occurrence, fault), in plan order.
    plan: Vec<(u32, Fault)>,
}

/// The site bases seen by this thread's runs, interned: a crossing counts its base by index
/// (one probe of a small open-addressing table, no string map walked, no name built), and the
/// counts at the last anchor are a field of each base (not a copy of a map at every anchor).
/// The table is a cache kept with the core across runs ([`SiteTable::reset`] zeroes what a run
/// counted): which index a base has is never seen outside (not in a trace, a log or a name),
/// so runs are the same whatever the thread ran before. Nothing iterates it in hash order.
pub(crate) struct SiteTable {
    bases: Vec<SiteBase>,
    /// Open addressing over `bases` (index, or [`NO_BASE`]); a power of two, at most half full.
    slots: Vec<u32>,
    /// The bases counted in this run (count > 0), in first-crossing order.
    touched: Vec<u32>,
    /// Names the fault plan the bases' `plan` entries were found in: it changes with the
    /// plan ([`SiteTable::forget_plan`]), not with every run, so runs under one plan (a
    /// seed sweep, a spin) look each base up in it once, not once a run.
    plan_epoch: u64,
    /// Where a base's name is put together before it is looked up.
    pub(crate) scratch: String,
    /// The bases most recently found by [`SiteTable::intern_prefixed`] (most recent first),
    /// by their prefix and request name: a driver's transfers take turns among a few request
    /// names, so most are found here without the name's words, hash and probe.
    recent: [Recent; 2],
}

/// A base found by [`SiteTable::intern_prefixed`]: its prefix's bytes (at most 16, as one
/// number; the caller's prefix is a literal, so this folds to a constant), its request name's
/// bytes (at most 8, as one number), the two lengths (the prefix's above bit 32, the name's
/// below) and the base. Found by bytes alone, never by an address. No key has
/// [`Recent::NONE`]'s lengths.
#[derive(Clone, Copy)]
struct Recent {
    prefix: u128,
    name: u64,
    lens: u64,
    base: u32,
}

impl Recent {
    const NONE: Recent = Recent {
        prefix: 0,
        name: 0,
        lens: u64::MAX,
        base: NO_BASE,
    };
}

const NO_BASE: u32 = u32::MAX;

/// More bases than this kept at a run's end and the table starts afresh (a long-lived thread
/// that saw many request names keeps no unbounded cache).
const MAX_KEPT_BASES: usize = 4096;

impl Default for SiteTable {
    fn default() -> Self {
        SiteTable {
            bases: Vec::new(),
            slots: vec![NO_BASE; 16],
            touched: Vec::new(),
            plan_epoch: 1,
            scratch: String::with_capacity(48),
            recent: [Recent::NONE; 2],
        }
    }
}

/// A name's hash for the table, from its length and words ([`edge_words`]): one multiply (no
/// loop over the bytes: names that share both ends only probe further). Deterministic: no
/// per-process key.
#[inline(always)]
fn words_hash((a, z): (u64, u64), n: usize) -> u64 {
    const K: u64 = 0x517c_c1b7_2722_0a95;
    (a.rotate_left(29) ^ z ^ n as u64).wrapping_mul(K)
}

/// The bytes of a name of at most 16 bytes as one little-endian number (its byte `i` is bits
/// `8i..8i + 8`), read as whole words where it is long enough (no byte-by-byte copy).
#[inline(always)]
fn short_value(name: &[u8]) -> u128 {
    let m = name.len();
    debug_assert!(m <= 16);
    let word8 = |at: usize| {
        let mut w = [0u8; 8];
        w.copy_from_slice(&name[at..at + 8]);
        u64::from_le_bytes(w)
    };
    let word4 = |at: usize| {
        let mut w = [0u8; 4];
        w.copy_from_slice(&name[at..at + 4]);
        u32::from_le_bytes(w)
    };
    // The two words overlap (the same bytes at the same places), so they are or-ed.
    if m >= 8 {
        u128::from(word8(0)) | u128::from(word8(m - 8)) << (8 * (m - 8))
    } else if m >= 4 {
        u128::from(word4(0)) | u128::from(word4(m - 4)) << (8 * (m - 4))
    } else {
        name.iter()
            .enumerate()
            .fold(0, |v, (i, &b)| v | u128::from(b) << (8 * i))
    }
}

/// The words ([`edge_words`]) of `prefix` followed by `name`, together at most 16 bytes,
/// without putting them together: read from where they are (a name put together in a buffer
/// just written is read back before its stores have landed, a stall a crossing).
#[inline(always)]
fn prefixed_words(prefix: &[u8], name: &[u8]) -> (u64, u64) {
    let (p, m) = (prefix.len(), name.len());
    let n = p + m;
    debug_assert!(n <= 16);
    let v = match m {
        0 => short_value(prefix),
        _ => short_value(prefix) | short_value(name) << (8 * p),
    };
    if n >= 8 {
        (v as u64, (v >> (8 * (n - 8))) as u64)
    } else if n >= 4 {
        (u64::from(v as u32), u64::from((v >> (8 * (n - 4))) as u32))
    } else {
        // As `edge_words` folds a short name: its first byte highest.
        let fold = (0..n).fold(0, |h, i| (h << 8) | (v >> (8 * i)) as u64 & 0xff);
        (fold, 0)
    }
}

/// A name's words and hash.
#[inline(always)]
fn name_key(name: &[u8]) -> ((u64, u64), u64) {
    let words = edge_words(name);
    (words, words_hash(words, name.len()))
}

impl SiteTable {
    /// Zeroes what the run counted (the bases stay interned, see the type's docs).
    pub(crate) fn reset(&mut self) {
        for &i in &self.touched {
            let b = &mut self.bases[i as usize];
            b.count = 0;
            b.at_anchor = 0;
        }
        self.touched.clear();
        if self.bases.len() > MAX_KEPT_BASES {
            self.bases.clear();
            self.slots.clear();
            self.slots.resize(16, NO_BASE);
            self.recent = [Recent::NONE; 2];
        }
    }

    /// The base named `name` (whose words and hash are given), or the free slot its search
    /// ended at. A name of at most 16 bytes is compared by its words and length (no call to
    /// compare bytes: site bases are short, `ctrl.get_status`), a longer one by its bytes.
    #[inline(always)]
    pub(super) fn find(&self, name: &str, words: (u64, u64), hash: u64) -> Result<u32, usize> {
        let mask = self.slots.len() - 1;
        let mut i = (hash >> 40) as usize & mask;
        loop {
            match self.slots[i] {
                NO_BASE => return Err(i),
                b => {
                    let base = &self.bases[b as usize];
                    if base.hash == hash
                        && base.words == words
                        && base.name.len() == name.len()
                        && (name.len() <= 16 || *base.name == *name)
                    {
                        return Ok(b);
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// The index of the base named in `scratch`, interned if new.
    pub(crate) fn intern_scratch(&mut self) -> u32 {
        let (words, hash) = name_key(self.scratch.as_bytes());
        match self.find(&self.scratch, words, hash) {
            Ok(b) => b,
            Err(slot) => {
                let b = self.bases.len() as u32;
                self.bases.push(SiteBase {
                    name: self.scratch.as_str().into(),
                    hash,
                    words,
                    count: 0,
                    at_anchor: 0,
                    plan_epoch: 0,
                    plan: Vec::new(),
                });
                self.slots[slot] = b;
                if self.bases.len() * 2 > self.slots.len() {
                    let n = self.slots.len() * 2;
                    self.slots.clear();
                    self.slots.resize(n, NO_BASE);
                    for (j, base) in self.bases.iter().enumerate() {
                        let mut i = (base.hash >> 40) as usize & (n - 1);
                        while self.slots[i] != NO_BASE {
                            i = (i + 1) & (n - 1);
                        }
                        self.slots[i] = j as u32;
                    }
                }
                b
            }
        }
    }

    /// The index of the base named `prefix` followed by `name` (`ctrl.` and a request's
    /// name), interned if new: found by the words of the two parts where they are; put
    /// together (in `scratch`) only when new or longer than 16 bytes.
    ///
    /// A request name of at most 8 bytes is first looked for among the [`SiteTable::recent`]
    /// bases (by its bytes, not its address: a device may name requests from its own memory).
    #[inline(always)]
    pub(crate) fn intern_prefixed(&mut self, prefix: &'static str, name: &str) -> u32 {
        let n = prefix.len() + name.len();
        if n > 16 {
            return self.intern_joined(prefix, name);
        }
        if name.len() > 8 {
            return self.find_prefixed(prefix, name);
        }
        let (p, v) = (
            short_value(prefix.as_bytes()),
            short_value(name.as_bytes()) as u64,
        );
        let lens = (prefix.len() as u64) << 32 | name.len() as u64;
        for r in &self.recent {
            if r.name == v && r.lens == lens && r.prefix == p {
                return r.base;
            }
        }
        self.intern_recent(
            prefix,
            name,
            Recent {
                prefix: p,
                name: v,
                lens,
                base: NO_BASE,
            },
        )
    }

    /// [`SiteTable::intern_prefixed`] of a name not among the recent ones: found by the table
    /// and remembered (`key` with its base), the older recent entry giving way.
    #[inline(never)]
    fn intern_recent(&mut self, prefix: &'static str, name: &str, key: Recent) -> u32 {
        let base = self.find_prefixed(prefix, name);
        self.recent[1] = self.recent[0];
        self.recent[0] = Recent { base, ..key };
        base
    }

    /// [`SiteTable::intern_prefixed`] of a name of at most 16 bytes in all, by the table.
    #[inline(always)]
    fn find_prefixed(&mut self, prefix: &'static str, name: &str) -> u32 {
        let n = prefix.len() + name.len();
        let words = prefixed_words(prefix.as_bytes(), name.as_bytes());
        let hash = words_hash(words, n);
        let mask = self.slots.len() - 1;
        let mut i = (hash >> 40) as usize & mask;
        loop {
            match self.slots[i] {
                NO_BASE => return self.intern_joined(prefix, name),
                b => {
                    let base = &self.bases[b as usize];
                    if base.hash == hash && base.words == words && base.name.len() == n {
                        return b;
                    }
                }
            }
            i = (i + 1) & mask;
        }
    }

    /// [`SiteTable::intern_prefixed`] by the name put together in `scratch`.
    #[inline(never)]
    fn intern_joined(&mut self, prefix: &str, name: &str) -> u32 {
        self.scratch.clear();
        self.scratch.push_str(prefix);
        self.scratch.push_str(name);
        self.intern_scratch()
    }

    /// The index of the base named `name` (a literal: `bulk.out`), interned if new.
    #[inline(always)]
    pub(crate) fn intern_str(&mut self, name: &'static str) -> u32 {
        let (words, hash) = name_key(name.as_bytes());
        match self.find(name, words, hash) {
            Ok(b) => b,
            Err(_) => self.intern_joined(name, ""),
        }
    }

    /// Counts a crossing of base `b`; its occurrence number.
    pub(super) fn cross(&mut self, b: u32) -> u32 {
        let base = &mut self.bases[b as usize];
        if base.count == 0 {
            self.touched.push(b);
        }
        base.count += 1;
        base.count
    }

    /// A base's name.
    pub(crate) fn base(&self, b: u32) -> &str {
        &self.bases[b as usize].name
    }

    /// This run's crossings of the base named `name` (0 for one not seen).
    pub(super) fn count_of(&self, name: &str) -> u32 {
        let (words, hash) = name_key(name.as_bytes());
        match self.find(name, words, hash) {
            Ok(b) => self.bases[b as usize].count,
            Err(_) => 0,
        }
    }

    /// A base's crossings in this run, now and at the most recent anchor.
    pub(super) fn counts(&self, b: u32) -> (u32, u32) {
        let base = &self.bases[b as usize];
        (base.count, base.at_anchor)
    }

    /// Notes every base's crossings as those at the most recent anchor.
    pub(super) fn note_anchor(&mut self) {
        for &i in &self.touched {
            let b = &mut self.bases[i as usize];
            b.at_anchor = b.count;
        }
    }

    /// Appends a site's name, `<base>#<n>`.
    pub(crate) fn push_name(&self, site: SiteId, out: &mut String) {
        self.push_name_from(site, out, 0);
    }

    /// Appends a site's name without its base's first `skip` bytes (`ctrl.`, say).
    pub(super) fn push_name_from(&self, site: SiteId, out: &mut String, skip: usize) {
        out.push_str(self.base(site.base).get(skip..).unwrap_or_default());
        out.push('#');
        crate::clock::push_decimal(out, u64::from(site.n));
    }

    /// Appends a site's name without a control transfer's `ctrl.` (`get_status#2`).
    pub(crate) fn push_short_name(&self, site: SiteId, out: &mut String) {
        let skip = if self.base(site.base).starts_with("ctrl.") {
            5
        } else {
            0
        };
        self.push_name_from(site, out, skip);
    }

    /// A site's name, `<base>#<n>`.
    pub(crate) fn name(&self, site: SiteId) -> String {
        let mut s = String::with_capacity(self.base(site.base).len() + 4);
        self.push_name(site, &mut s);
        s
    }

    /// The plan the bases' entries were found in is not the run's: each base looks its
    /// entries up again at its next crossing.
    pub(crate) fn forget_plan(&mut self) {
        self.plan_epoch += 1;
    }

    /// Whether the plan may pin a fault at `site`: it has faults, and `site`'s base has either
    /// not yet found its entries under this plan or has one at `site`'s occurrence. When this is
    /// false, [`SiteTable::planned`] answers `None` (so a crossing the plan does not name is
    /// told apart in a few compares, without the call).
    #[inline(always)]
    pub(super) fn may_plan(&self, plan: &FaultPlan, site: SiteId) -> bool {
        if plan.faults.is_empty() {
            return false;
        }
        let base = &self.bases[site.base as usize];
        base.plan_epoch != self.plan_epoch || base.plan.iter().any(|(n, _)| *n == site.n)
    }

    /// The plan's fault at `site`: the plan's entry named `<base>#<n>`. A base's entries are
    /// found once a plan (at its first crossing under it: a range of the plan's sorted names),
    /// so a crossing compares occurrence numbers, not names.
    #[inline(always)]
    pub(super) fn planned(&mut self, plan: &FaultPlan, site: SiteId) -> Option<Fault> {
        if plan.faults.is_empty() {
            return None;
        }
        self.planned_at(plan, site)
    }

    /// [`SiteTable::planned`] under a plan that has faults.
    #[inline(never)]
    fn planned_at(&mut self, plan: &FaultPlan, site: SiteId) -> Option<Fault> {
        let base = &mut self.bases[site.base as usize];
        if base.plan_epoch != self.plan_epoch {
            base.plan_epoch = self.plan_epoch;
            base.plan.clear();
            let mut prefix = std::mem::take(&mut self.scratch);
            prefix.clear();
            prefix.push_str(&base.name);
            prefix.push('#');
            let from = (
                std::ops::Bound::Included(prefix.as_str()),
                std::ops::Bound::Unbounded,
            );
            for (k, f) in plan.faults.range::<str, _>(from) {
                let Some(digits) = k.strip_prefix(prefix.as_str()) else {
                    break;
                };
                // The entry names this base only if the rest is `n` as a site name writes it
                // (decimal, no leading zero); `<base>#x#3` belongs to the base `<base>#x`.
                if let Some(n) = canonical_u32(digits) {
                    base.plan.push((n, f.clone()));
                }
            }
            self.scratch = prefix;
        }
        base.plan
            .iter()
            .find(|(n, _)| *n == site.n)
            .map(|(_, f)| f.clone())
    }
}

/// `digits` as a site name's occurrence writes it: decimal, no leading zero, fits a `u32`.
fn canonical_u32(digits: &str) -> Option<u32> {
    let b = digits.as_bytes();
    if b.is_empty() || (b[0] == b'0' && b.len() > 1) || !b.iter().all(u8::is_ascii_digit) {
        return None;
    }
    digits.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Names are told apart by their words and length up to 16 bytes, by their bytes beyond:
    /// names that share their first and last eight bytes, or whose words match once padded,
    /// are different bases.
    #[test]
    fn names_that_share_their_ends_are_different_bases() {
        let names = [
            "a",
            "b",
            "ab",
            "ba",
            "abc",
            "abcd",
            "abce",
            "abcde",
            "ctrl.load",
            "ctrl.store",
            "ctrl.loadx",
            "12345678",
            "123456789",
            "1234567X9",
            "0123456789abcdef",
            "0123456789abcdeF",
            "0123456789abcdefg",
            "01234567_x_89abcdef",
            "01234567_y_89abcdef",
            "01234567__x__89abcdef",
            "",
            "\0",
            "\0\0",
        ];
        let mut t = SiteTable::default();
        let mut got = Vec::new();
        for round in 0..2 {
            for (i, name) in names.iter().enumerate() {
                t.scratch.clear();
                t.scratch.push_str(name);
                let b = t.intern_scratch();
                assert_eq!(t.base(b), *name);
                if round == 0 {
                    assert_eq!(b as usize, i, "{name:?} is new");
                    got.push(b);
                } else {
                    assert_eq!(b, got[i], "{name:?} is found again");
                }
            }
        }
    }

    /// A prefixed name's words, read from its two parts, are those of the name put together,
    /// for every length of either part up to 16 bytes together; so it finds the same base.
    #[test]
    fn a_prefixed_name_has_the_words_of_the_name_put_together() {
        let bytes: Vec<u8> = (0..40u8)
            .map(|i| i.wrapping_mul(37).wrapping_add(11))
            .collect();
        for p in 0..=9 {
            for m in 0..=16 - p {
                let (prefix, name) = (&bytes[..p], &bytes[p..p + m]);
                let mut whole = prefix.to_vec();
                whole.extend_from_slice(name);
                assert_eq!(
                    prefixed_words(prefix, name),
                    edge_words(&whole),
                    "{p} + {m}"
                );
            }
        }
        let mut t = SiteTable::default();
        for name in [
            "",
            "a",
            "ab",
            "load",
            "store",
            "get_status",
            "c0_0a",
            "get_descriptor_x",
        ] {
            t.scratch.clear();
            t.scratch.push_str("ctrl.");
            t.scratch.push_str(name);
            let b = t.intern_scratch();
            assert_eq!(t.intern_prefixed("ctrl.", name), b, "{name}");
        }
        let b = t.intern_prefixed("ctrl.", "set_interface_alt");
        assert_eq!(t.base(b), "ctrl.set_interface_alt");
        assert_eq!(t.intern_prefixed("ctrl.", "set_interface_alt"), b);
        let bulk = t.intern_str("bulk.out");
        assert_eq!(t.intern_str("bulk.out"), bulk);
        assert_eq!(t.base(bulk), "bulk.out");
    }

    /// A request name is found among the recent ones by its bytes: a name rewritten in place
    /// (the same address, other bytes) finds its own base, names taking turns find theirs, and
    /// the table started afresh forgets the recent ones.
    #[test]
    fn recent_request_names_are_told_apart_by_their_bytes() {
        let mut t = SiteTable::default();
        let want = |t: &mut SiteTable, name: &str| {
            t.scratch.clear();
            t.scratch.push_str("ctrl.");
            t.scratch.push_str(name);
            t.intern_scratch()
        };
        let mut name = String::from("load");
        for round in 0..3 {
            for other in [
                "store",
                "load",
                "",
                "a",
                "abcdefgh",
                "abcdefgi",
                "get_status",
            ] {
                let b = t.intern_prefixed("ctrl.", other);
                assert_eq!(b, want(&mut t, other), "{other} round {round}");
                assert_eq!(t.intern_prefixed("ctrl.", other), b);
                // The same buffer, other bytes.
                name.clear();
                name.push_str(if round % 2 == 0 { "load" } else { "lost" });
                let b = t.intern_prefixed("ctrl.", &name);
                assert_eq!(t.base(b), format!("ctrl.{name}"));
                name.replace_range(0..4, "lead");
                let b = t.intern_prefixed("ctrl.", &name);
                assert_eq!(t.base(b), "ctrl.lead");
                // Another prefix, same name bytes as a recent one's start: its own base.
                let b = t.intern_prefixed("bulk.", "in");
                assert_eq!(t.base(b), "bulk.in");
                // The same prefix bytes at another address: the same base, found among the
                // recent ones (they do not change), by bytes, not by address.
                let elsewhere: &'static str = String::from("ctrl.").leak();
                let b = t.intern_prefixed("ctrl.", "store");
                let keys = |t: &SiteTable| t.recent.map(|r| (r.prefix, r.name, r.lens, r.base));
                let before = keys(&t);
                assert_eq!(t.intern_prefixed(elsewhere, "store"), b);
                assert!(keys(&t) == before, "found among the recent bases by bytes");
            }
        }
        // Started afresh: the recent bases are forgotten with the rest.
        for i in 0..=MAX_KEPT_BASES {
            t.scratch.clear();
            t.scratch.push_str(&format!("x{i}"));
            t.intern_scratch();
        }
        t.reset();
        assert!(t.bases.is_empty());
        let b = t.intern_prefixed("ctrl.", "store");
        assert_eq!(t.base(b), "ctrl.store");
    }

    /// A base finds its plan entries once a plan: runs under the same plan keep them, a new
    /// plan ([`SiteTable::forget_plan`]) has them found again.
    #[test]
    fn a_base_finds_its_plan_entries_again_only_under_a_new_plan() {
        let mut t = SiteTable::default();
        let run = |t: &mut SiteTable, plan: &FaultPlan| -> Vec<Option<Fault>> {
            t.reset();
            (0..3)
                .map(|_| {
                    t.scratch.clear();
                    t.scratch.push_str("ctrl.load");
                    let base = t.intern_scratch();
                    let n = t.cross(base);
                    t.planned(plan, SiteId { base, n })
                })
                .collect()
        };
        let a = FaultPlan::single("ctrl.load#2", Fault::Stall);
        let b = FaultPlan::single("ctrl.load#1", Fault::Timeout);
        assert_eq!(run(&mut t, &a), [None, Some(Fault::Stall), None]);
        assert_eq!(run(&mut t, &a), [None, Some(Fault::Stall), None]);
        t.forget_plan();
        assert_eq!(run(&mut t, &b), [Some(Fault::Timeout), None, None]);
        t.forget_plan();
        assert_eq!(run(&mut t, &a), [None, Some(Fault::Stall), None]);
    }

    /// `may_plan` is false only where `planned` answers `None`: under an empty plan, and at a
    /// base that found its entries under this plan at an occurrence they do not name; it is
    /// true at a base that has not looked (first crossing, or after a new plan) and at a
    /// named occurrence.
    #[test]
    fn may_plan_is_false_only_where_no_fault_is_planned() {
        let mut t = SiteTable::default();
        let plan = FaultPlan::single("ctrl.store#3", Fault::Stall);
        let empty = FaultPlan::default();
        for round in 0..3 {
            if round == 2 {
                t.forget_plan();
            }
            t.reset();
            for name in ["ctrl.store", "ctrl.load"] {
                t.scratch.clear();
                t.scratch.push_str(name);
                t.intern_scratch();
            }
            for i in 0..10u32 {
                let name = if i % 2 == 0 {
                    "ctrl.store"
                } else {
                    "ctrl.load"
                };
                let base = t.intern_prefixed("ctrl.", &name[5..]);
                let site = SiteId {
                    base,
                    n: t.cross(base),
                };
                assert!(!t.may_plan(&empty, site));
                let looked = t.bases[base as usize].plan_epoch == t.plan_epoch;
                let may = t.may_plan(&plan, site);
                let got = t.planned(&plan, site);
                let named = name == "ctrl.store" && site.n == 3;
                assert_eq!(got, named.then_some(Fault::Stall), "{name}#{}", site.n);
                assert_eq!(may, !looked || named, "{name}#{} round {round}", site.n);
                assert!(may || got.is_none());
            }
        }
    }
}
