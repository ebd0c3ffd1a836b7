//! The deterministic core of Calametra.
//!
//! The modules follow the data: a [`spec`] becomes a model (found by its format in the
//! [`registry`]); the model is a [`device::Device`]
//! (the USB vocabulary is in [`usb`]) on the bus of the [`world`] (the bus's queue, transfer
//! table and completion in `bus`); a driver's transfers, through its [`interface::Interface`],
//! cross the bus on the virtual [`clock`], run by the single-threaded executor ([`exec`], the
//! task table in `tasks`, the thread-local context in `context`) under the loop in [`sim`];
//! every decision comes from a named stream ([`stream`]) and is logged by [`choices`]; every
//! step becomes a [`trace`] record and the records a hash; [`fault`] names the sites and primitives that exploration
//! varies and applies them; [`picture`] watches what a display model shows.
//!
//! Users depend on the `calametra` facade, which re-exports this crate and adds the harness.
//! Nothing in this crate reads the wall clock, spawns a thread, or uses OS randomness while a
//! simulation runs.

#![warn(missing_docs)]

mod bus;
pub mod chain;
pub mod choices;
pub mod clock;
pub mod context;
pub mod device;
pub mod discovery;
pub mod divergence;
pub mod error;
pub mod exec;
pub mod explore;
pub mod fault;
pub mod hex;
pub mod host;
pub mod input;
pub mod interface;
pub mod names;
pub mod picture;
mod pool;
pub mod registry;
pub mod regress;
pub mod scripted;
pub mod shrink;
pub mod sim;
pub mod spec;
pub mod state;
pub mod stream;
pub mod swarm;
pub mod sweep;
pub mod sync;
mod tasks;
pub mod trace;
pub mod tracefile;
pub mod usb;
mod words;
pub mod world;

pub use error::Error;
pub use sim::{run, Failure, RunConfig, RunResult, Sim};
pub use world::{DeviceHandle, World};
