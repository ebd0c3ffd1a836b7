//! The seed digest against the fault primitives' table as shipped: the same value the test
//! build's table, with one primitive added, gives (`fault::tests`), so adding a primitive
//! changed no seed's run of a scenario that does not ask for it.

use calametra_core as cc;

#[path = "support/seed_digest.rs"]
mod seed_digest;

#[test]
fn the_seed_digest_of_the_shipped_table_is_the_pinned_one() {
    let (digest, faulted) = seed_digest::digest(64);
    // Many runs under a fault set inject something (134 of the 320 that may).
    assert!(faulted > 100, "only {faulted} faulted runs");
    assert_eq!(digest, seed_digest::PINNED_64);
}
