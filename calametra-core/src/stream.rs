//! The named ChaCha streams: how a seed's streams and a scenario's seeds are derived.
//!
//! Owns [`StreamName`] (the fixed streams), the derivation of a stream from `(seed, name)`
//! ([`stream`], [`stream_named`]: SHA-256 of a versioned prefix, the seed and the name, as a
//! ChaCha8 key), the names of per-actor and per-scenario streams ([`data_stream`],
//! [`user_stream`]), unbiased draws ([`below`]) and the seeds of a scenario's trials
//! ([`derive_seed`]). What each stream decides, and how decisions are logged, is
//! [`crate::choices`]'s; the swarm draws its configuration from the `swarm` stream, but for
//! the strategy of a scenario without faults, which is `schedule`'s first two draws
//! ([`crate::swarm`]). Pure functions: nothing here keeps state or reads OS randomness.

use rand_chacha::ChaCha8Rng;
use rand_core::{RngCore, SeedableRng};
use sha2::{Digest, Sha256};

/// The named choice streams.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamName {
    /// Which ready task runs, which simultaneous event fires first.
    Schedule,
    /// Which fault a seeded schedule injects, and where.
    Faults,
    /// Actions a scenario's client draws.
    Client,
    /// The stream data draws came from before they were per actor; runs now draw data from
    /// `data/<actor>` streams ([`stream_named`]). Kept for tools that want a stream of numbers.
    Data,
    /// Where a seeded run's externals land.
    Externals,
    /// A seeded run's swarm configuration.
    Swarm,
}

impl StreamName {
    /// The stream's name as it is hashed and traced.
    pub fn as_str(self) -> &'static str {
        match self {
            StreamName::Schedule => "schedule",
            StreamName::Faults => "faults",
            StreamName::Client => "client",
            StreamName::Data => "data",
            StreamName::Externals => "externals",
            StreamName::Swarm => "swarm",
        }
    }
}

/// A ChaCha8 stream derived from `(seed, name)`.
#[inline]
pub fn stream(seed: u64, name: StreamName) -> ChaCha8Rng {
    stream_named(seed, name.as_str())
}

/// A ChaCha8 stream derived from `(seed, name)` for any name: `data/driver`, `user/retries`.
/// The fixed streams are `stream_named(seed, "schedule")` and so on.
///
/// Inlined, so the generator (some 300 bytes) is built where the caller keeps it, not built
/// here and copied there.
#[inline]
pub fn stream_named(seed: u64, name: &str) -> ChaCha8Rng {
    ChaCha8Rng::from_seed(stream_key(seed, name))
}

/// The ChaCha8 key of stream `(seed, name)`: SHA-256 of a versioned prefix, the seed and the
/// name.
fn stream_key(seed: u64, name: &str) -> [u8; 32] {
    let mut h = Sha256::new();
    h.update(b"calametra.stream.v1\0");
    h.update(seed.to_le_bytes());
    h.update(name.as_bytes());
    h.finalize().into()
}

/// The name of an actor's data stream: `data/<actor>`.
pub fn data_stream(actor: &str) -> String {
    prefixed("data/", actor)
}

/// The name of a scenario's own stream: `user/<name>`.
pub fn user_stream(name: &str) -> String {
    prefixed("user/", name)
}

/// `prefix` then `name`, in one allocation of the right size and without the formatting
/// machinery (a data draw names its stream every time).
fn prefixed(prefix: &str, name: &str) -> String {
    let mut s = String::with_capacity(prefix.len() + name.len());
    s.push_str(prefix);
    s.push_str(name);
    s
}

/// Uniform in `0..n` (n > 0) without modulo bias.
pub fn below(rng: &mut ChaCha8Rng, n: u64) -> u64 {
    debug_assert!(n > 0);
    if n <= 1 {
        return 0;
    }
    let zone = u64::MAX - (u64::MAX % n) - 1;
    loop {
        let v = rng.next_u64();
        if v <= zone {
            return v % n;
        }
    }
}

/// Derives the `i`th seed of a scenario from a base seed and the scenario's path, so seeds are
/// stable across runs and builds and differ between scenarios.
pub fn derive_seed(base: u64, scenario: &str, i: u64) -> u64 {
    let mut h = Sha256::new();
    h.update(b"calametra.seed.v1\0");
    h.update(base.to_le_bytes());
    h.update(scenario.as_bytes());
    h.update([0]);
    h.update(i.to_le_bytes());
    let d = h.finalize();
    // 48 bits keep trial names short (`seed::0x4f21a93c0d11`) and are plenty per scenario.
    u64::from_le_bytes([d[0], d[1], d[2], d[3], d[4], d[5], 0, 0])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn streams_are_independent_and_stable() {
        let mut a = stream(7, StreamName::Schedule);
        let mut b = stream(7, StreamName::Schedule);
        let mut c = stream(7, StreamName::Client);
        let xa: Vec<u64> = (0..4).map(|_| a.next_u64()).collect();
        let xb: Vec<u64> = (0..4).map(|_| b.next_u64()).collect();
        let xc: Vec<u64> = (0..4).map(|_| c.next_u64()).collect();
        assert_eq!(xa, xb);
        assert_ne!(xa, xc);
        assert_ne!(derive_seed(0, "a::b", 0), derive_seed(0, "a::b", 1));
        assert_ne!(derive_seed(0, "a::b", 0), derive_seed(1, "a::b", 0));
        assert!(derive_seed(0, "a::b", 0) < 1 << 48);
        assert_eq!(data_stream("driver"), "data/driver");
        assert_eq!(user_stream("retries"), "user/retries");
        assert_eq!(data_stream(""), "data/");
    }

    #[test]
    fn below_is_in_range() {
        let mut r = stream(1, StreamName::Data);
        for n in 1..50 {
            assert!(below(&mut r, n) < n);
        }
    }
}
