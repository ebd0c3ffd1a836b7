//! A published DFU host library, [dfu-core](https://docs.rs/dfu-core), as the driver under
//! test: its async API (`DfuAsync` over the `DfuAsyncIo` trait) runs through
//! [`calametra_usb::UsbInterface`] against Calametra's DFU 1.1 model, under every fault
//! primitive and seeded schedules (`tests/scenarios.rs`). The crate's README lists what the
//! exploration found, each finding with its minimized case and whose bug it is.
//!
//! - [`io`]: [`io::DfuCoreIo`], dfu-core's IO trait over a `UsbInterface`; its futures are
//!   `Send`, as dfu-core demands, through [`calametra::SimSend`] (no `unsafe` here);
//! - [`update`]: the user's update (descriptor, detach, dfu-core's download).
//!
//! ```
//! use calametra_core::spec::Spec;
//! use calametra_core::{run, RunConfig};
//! use calametra_example_dfu_core_driver::update::update;
//! use calametra_models::dfu::{seal_image, Dfu};
//! use std::{cell::RefCell, rc::Rc};
//!
//! let spec = include_bytes!("../../../specs/dfu11-tolerant.json");
//! let image: &'static [u8] = Box::leak(seal_image(&[0x5a; 4000]).into_boxed_slice());
//! let done = Rc::new(RefCell::new(None));
//! let d2 = done.clone();
//! let r = run(RunConfig::default(), &move |sim| {
//!     let spec = Spec::parse("specs/dfu11-tolerant.json", spec).unwrap();
//!     let dev = sim.attach(Dfu::from_spec(&spec));
//!     let iface = dev.interface();
//!     let d2 = d2.clone();
//!     sim.spawn("dfu-core", async move {
//!         *d2.borrow_mut() = Some(update(&iface, image).await.map_err(|e| e.to_string()));
//!     });
//! });
//! assert!(r.failure.is_none(), "{:?}", r.failure);
//! assert!(matches!(*done.borrow(), Some(Ok(_))), "{:?}", done.borrow());
//! ```

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod io;
pub mod update;
