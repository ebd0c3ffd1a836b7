//! The deterministic core of Calametra.
//!
//! The modules follow the data: a [`spec`] becomes a model; the model is a [`usb::Device`] on the
//! bus of the [`world`]; a driver's transfers cross the bus on the virtual [`clock`], run by the
//! single-threaded executor in [`exec`] under the loop in [`sim`]; every decision comes from a
//! named stream in [`choices`]; every step becomes a [`trace`] record and the records a hash;
//! [`fault`] names the sites and primitives that exploration varies; [`picture`] watches what a
//! display model shows.
//!
//! Users depend on the `calametra` facade, which re-exports this crate and adds the harness.
//! Nothing in this crate reads the wall clock, spawns a thread, or uses OS randomness while a
//! simulation runs.

#![warn(missing_docs)]

pub mod chain;
pub mod choices;
pub mod clock;
pub mod divergence;
pub mod error;
pub mod exec;
pub mod explore;
pub mod fault;
pub mod hex;
pub mod host;
pub mod input;
pub mod picture;
pub mod regress;
pub mod scripted;
pub mod shrink;
pub mod sim;
pub mod spec;
pub mod state;
pub mod swarm;
pub mod sweep;
pub mod sync;
pub mod trace;
pub mod tracefile;
pub mod usb;
pub mod world;

pub use error::Error;
pub use sim::{run, Failure, RunConfig, RunResult, Sim};
pub use world::{DeviceHandle, World};
