//! Stateful device models for Calametra, built from evidence (a real capture, a published spec),
//! each with the invariants that judge a driver against it.
//!
//! A model is a [`calametra_core::usb::Device`]: it answers packets from its spec's facts, names
//! every change of state as a transition (so faults can match there), marks the interesting
//! branches it reaches, and records a model gap (and stalls) when asked something it has no
//! evidence for. This crate knows nothing of test harnesses.

#![warn(missing_docs)]

pub mod cdc_acm;
pub mod chapter9;
pub mod class_device;
pub mod dfu;
pub mod firmware;
pub mod hid;
pub mod learned;
pub mod msc;
pub mod trigger6;
