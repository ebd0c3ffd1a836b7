//! The bridge from Calametra device models to a real Linux 6.1 guest under QEMU.
//!
//! The data flows through one file per stage: [`proto`] is the usbredir 0.7 wire format;
//! [`descriptors`] reads what a model says it is; [`bridge`] is the usbredir host that serves the
//! model to QEMU's `usb-redir` device through a [`calametra_core::host::DeviceHost`], so faults,
//! transitions, model gaps and the trace hash are those of an in-process run; [`guest`] knows
//! the disposable guest `guest/build.sh` builds and the probes it runs; [`launcher`] boots it
//! under TCG with the instruction-count clock. Both transports (the usbredir bridge and the
//! lockstep server) are sans-I/O [`runloop::Transport`]s driven by one loop
//! ([`runloop`]: QEMU's socket, the console, the watchdog, how a run ends) into one result,
//! [`GuestRun`] ([`guest_run`], with [`Via`] for what only one transport knows), and [`watchdog`]
//! ends a guest that makes no
//! progress (judged by its own clocks, its virtual clock and instruction count, read over
//! [`qmp`]) as
//! [`Outcome::EmulatorBlocked`], which is neither a pass nor a failure. [`lockstep`] is the
//! repeatable path: a QEMU built with Calametra's `usb-calametra` device
//! (`calametra-qemu/qemu/build.sh`) answers every USB packet synchronously over a framed
//! socket with the guest's virtual clock in each frame, so a guest run (its console included)
//! hashes the same on every run. Its runs restore a machine saved once after boot
//! ([`snapshot`]) instead of booting.
//!
//! What the guest runs is a [`Probe`]: `lsusb`, a DFU campaign, a script, or a user's
//! [`Program`] ([`program`]: a binary with its arguments and files, its exit status and output
//! read back from the console; [`elf`] tells what a dynamically linked one needs of the image).
//! [`kernel_log`] reads the guest kernel's log: the run's `dmesg`, and the oopses, `BUG:` lines,
//! hung tasks and panics that end a run as [`Outcome::KernelFault`].
//! `calametra qemu` runs a [`job::Job`] (the spec's registered model, one lockstep run), in its
//! own process or, for a model of the user's own crate, inside the user's test binary through
//! the [`QemuHook`](calametra_core::registry::QemuHook) this crate registers.
//!
//! The usb-redir entry point is [`run`] (or [`run_with_host`] to read the model afterwards):
//!
//! ```no_run
//! use calametra_core::usb::Device;
//! use calametra_core::RunConfig;
//! use calametra_qemu::{Boxed, GuestImage, Probe, QemuConfig};
//!
//! fn lsusb(model: Box<dyn Device>) -> Result<(), Box<dyn std::error::Error>> {
//!     let guest = GuestImage::find(std::path::Path::new("target"))?; // guest/build.sh
//!     let run = calametra_qemu::run(
//!         Boxed(model),
//!         &RunConfig::default(),
//!         &Probe::Lsusb,
//!         &QemuConfig::new(guest),
//!     )?;
//!     println!("{}", run.summary()); // outcome, timings, trace hash, console tail
//!     Ok(())
//! }
//! ```
//!
//! A `Box<dyn Device>` is served through [`Boxed`]. This crate depends on the core, never the
//! other way round. Nothing here loads kernel modules or touches USB on the host.

#![warn(missing_docs)]

pub mod bridge;
pub mod descriptors;
pub mod elf;
pub mod guest;
pub mod guest_run;
pub mod job;
pub mod kernel_log;
pub mod launcher;
pub mod lockstep;
pub mod lockstep_config;
pub mod lockstep_frame;
pub mod lockstep_server;
pub mod probes;
pub mod program;
pub mod proto;
pub mod qemu_config;
pub mod qemu_process;
pub mod qmp;
pub mod runloop;
pub mod scenario;
pub mod setup;
pub mod snapshot;
pub mod transport;
pub mod watchdog;

pub use bridge::{Bridge, BridgeError, BridgeOptions};
pub use guest::{GuestImage, Probe};
pub use guest_run::{GuestRun, Via};
pub use launcher::{run, run_with_host, Outcome, QemuConfig, QemuError, QemuRun, Timings};
pub use program::{Program, ProgramOutput};
pub use scenario::Guest;

/// A boxed device served as a device (the command line builds models from specs at run time);
/// it lives with the model registry, [`calametra_core::registry::Boxed`].
pub use calametra_core::registry::Boxed;
