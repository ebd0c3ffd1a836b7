//! The project's headline story on the Trigger 6: a COPY of the example driver
//! (`calametra-example-trigger6`) with a race planted in it ([`driver`]: it trusts a
//! "disconnected" status across the disconnect and uploads a fresh frame into the buffer the
//! dock still shows), and the scenario that runs it against the JCD543 model ([`scenario`]:
//! the `unplug` and `replug` externals and the example's four invariants). Exploration over
//! the transport fault sites and seeded schedules breaks `flip_state_matches_ram`;
//! `scripts/explore.sh` shows the find, its minimization, the saved case and its replay.
//!
//! The shipped example driver is not changed by any of this: it lives in its own crate and
//! this crate only reads its protocol, EDID and picture code and its spec.

#![warn(missing_docs)]

pub mod driver;
pub mod scenario;

pub use scenario::scenario;
