//! Calametra: the bug happens in exactly one order; Calametra makes that order repeatable.
//!
//! A scenario is an ordinary function that builds a simulated world: it attaches a device model,
//! spawns the real async driver against the model's interface, declares external events that
//! exploration may place, and states invariants. `cargo test` expands it into one trial per
//! seeded schedule and per fault site, minimizes any failure by delta debugging, writes it to
//! the regression directory and replays it byte-exactly.
//!
//! Scenarios are integration tests of the crate that holds the driver. The driver itself
//! depends only on the small crate `calametra-usb` (the [`UsbInterface`](prelude::UsbInterface)
//! trait and its types); this facade is a dev-dependency, and each test file of scenarios runs
//! under Calametra's harness:
//!
//! ```toml
//! # Cargo.toml
//! [dev-dependencies]
//! calametra = "0.1"
//!
//! [[test]]
//! name = "loopback"
//! harness = false
//! ```
//!
//! ```no_run
//! // tests/loopback.rs
//! use calametra::prelude::*;
//! use std::{cell::Cell, rc::Rc, time::Duration};
//!
//! /// The driver's write: retries a stalled or timed-out request a few times, then reports the
//! /// error to its caller (as it reports an unplug). Generic, so it runs on hardware too.
//! async fn store(iface: &impl UsbInterface, data: &[u8]) -> Result<(), TransferError> {
//!     let mut retries = 0;
//!     loop {
//!         let out = ControlOut { control_type: ControlType::Vendor, recipient: Recipient::Device,
//!                                request: 1, value: 0, index: 0, data };
//!         match iface.control_out(out, Duration::from_millis(50)).await {
//!             Err(TransferError::Stall | TransferError::Timeout) if retries < 3 => retries += 1,
//!             result => return result,
//!         }
//!     }
//! }
//!
//! #[calametra::scenario(schedules = 8, faults = [stall, timeout, disconnect])]
//! fn store_bytes(sim: &mut Sim) {
//!     let dev = sim.attach(Loopback::default());
//!     let iface = dev.interface();
//!     let acked = Rc::new(Cell::new(false)); // what the driver told its caller
//!     let told = acked.clone();
//!     sim.spawn("driver", async move {
//!         // Stored or not, the driver handled it: the task returns `()`, not the error.
//!         told.set(store(&iface, &[1, 2, 3]).await.is_ok());
//!     });
//!     sim.external("unplug", move |w| w.disconnect(dev)); // exploration places it
//!     sim.invariant("acked_means_stored", move |w| {
//!         !acked.get() || w.model(dev).stored() == [1, 2, 3]
//!     });
//! }
//!
//! calametra::main!();
//! ```
//!
//! The driver retries a stalled or timed-out request and reports what it could not do; the
//! invariant checks what it reported against the model's ground truth. A task that returns `Err`
//! fails the run (``task `driver` returned an error: ...``), so a driver task returns `Ok` or `()`
//! for every outcome the driver handles. The baseline trial draws from seed 0's streams (not
//! the first option or 0), with no faults and no externals.
//!
//! A published library whose IO trait demands `Send` futures takes the simulated interface's
//! futures wrapped in [`SimSend`] (checked at run time to stay on the simulation's thread), so
//! the user's crate needs no `unsafe`.
//!
//! The crate re-exports the simulator core ([`calametra_core`]) and adds the libtest-mimic
//! [`harness`]. It links no device model, no QEMU bridge and no command-line tool: the models
//! are `calametra-models`, the bridge `calametra-qemu`, and the `calametra` command (replay,
//! diff, show and export runs, review saved cases, compare a model with a real capture, serve a
//! model to a QEMU guest) is `cargo install calametra-cli`.

#![warn(missing_docs)]

pub use calametra_core::*;

/// The crate's README, compiled as a doctest so it cannot drift from the code.
#[cfg(doctest)]
#[doc = include_str!("../README.md")]
pub struct ReadmeDoctests;
pub use calametra_macros::scenario;

pub mod env_names;
pub mod harness;
pub mod report;
pub mod send;
pub mod sweep;
pub mod tool;

pub use send::SimSend;

/// Everything a scenario usually needs.
pub mod prelude {
    pub use calametra_core::exec::{
        client_below, client_choose, data_below, mark, now, sleep, spawn, spawn_daemon, timeout,
        yield_now, JoinHandle,
    };
    pub use calametra_core::interface::Interface;
    pub use calametra_core::usb::{
        ControlIn, ControlOut, ControlType, DevCtx, Device, Loopback, Recipient, Reply, Setup,
        TransferError, UsbInterface,
    };
    pub use calametra_core::{DeviceHandle, Sim, World};
}

/// The expansion of `calametra::main!()`: the libtest-mimic main of a test binary, running
/// every scenario linked into it.
#[macro_export]
macro_rules! main {
    () => {
        fn main() {
            $crate::harness::main()
        }
    };
}

/// What `#[calametra::scenario]` expands to. Not a stable API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;

    /// A file embedded at compile time (a spec or a fault schedule).
    pub struct Embedded {
        /// The path given in the attribute, relative to the crate root.
        pub path: &'static str,
        /// Its bytes.
        pub bytes: &'static [u8],
    }

    /// The attribute's `faults = ...`.
    pub enum FaultsArg {
        /// `none`
        None,
        /// `transport`
        Transport,
        /// `all`
        All,
        /// `[stall, ...]`: each named through [`fault_kind!`], so the compiler checked it.
        Only(&'static [calametra_core::fault::FaultKind]),
    }

    /// The fault primitive a scenario's `faults = [..]` names (`fault_kind!(stall)`), from
    /// the core's table; an unknown name is a compile error listing the known ones.
    pub use calametra_core::__calametra_fault_kind as fault_kind;

    /// Builds a guest scenario's runner (`calametra_qemu::scenario::runner`); `Err` says why it
    /// cannot run here (the QEMU build or the guest is missing) and how to get it.
    pub type GuestRunner = fn() -> Result<Box<dyn calametra_core::explore::Runner>, String>;

    /// What a scenario's function is.
    pub enum Body {
        /// `fn(sim: &mut Sim)`, run in process.
        Sim(fn(&mut crate::Sim)),
        /// `guest = lockstep`: a Linux guest under lockstep QEMU.
        Guest(GuestRunner),
    }

    /// One registered scenario.
    pub struct ScenarioDef {
        /// `module_path!()` of the function.
        pub module: &'static str,
        /// The function's name.
        pub name: &'static str,
        /// The function.
        pub func: Body,
        /// `CARGO_MANIFEST_DIR` of the crate under test.
        pub manifest_dir: &'static str,
        /// `CARGO_PKG_NAME`.
        pub package: &'static str,
        /// `CARGO_CRATE_NAME` (the test target).
        pub target: &'static str,
        /// The spec.
        pub spec: Option<Embedded>,
        /// A fault schedule file.
        pub fault_schedule: Option<Embedded>,
        /// Seeded schedules.
        pub schedules: Option<u64>,
        /// Faults explored.
        pub faults: FaultsArg,
        /// A pinned seed.
        pub seed: Option<u64>,
        /// Step limit.
        pub max_steps: Option<u64>,
        /// Virtual time limit, ns.
        pub virtual_timeout_ns: Option<u64>,
        /// The invariant an `expect` scenario must break.
        pub expect: Option<&'static str>,
        /// The coverage marks the scenario declares (`marks = [...]`).
        pub marks: fn() -> Vec<String>,
        /// `marks_floor = N`: fixed seeds that must reach each declared mark.
        pub marks_floor: Option<u64>,
    }

    inventory::collect!(ScenarioDef);
}
