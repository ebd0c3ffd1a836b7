//! The device models linked into a binary, found by their spec's `format`.
//!
//! A spec names its model by its `format` field (`"calametra.spec.dfu"`). A model registers
//! itself once, next to its code, with [`register_model!`](crate::register_model): the format,
//! a constructor from a [`Spec`], and what a tool must know of it besides its `Device` impl
//! ([`QemuHints`] for a guest, a [`CompareCaptureFn`] for a model that replays a whole capture
//! itself). Every tool that turns a spec into a model (`calametra compare`, `calametra qemu`,
//! a scenario that takes its model from its spec) asks [`build`] or [`for_spec`]; none keeps a
//! list of models. The registrations are collected with `inventory`, as scenarios are: a model
//! is found in a binary when its crate is linked into it. [`Boxed`] serves a model built
//! this way as a `Device`.
//!
//! A binary also finds here the capture comparison linked into it ([`CompareHook`], from
//! `calametra-capture`): how a test binary runs `calametra compare --package P --test T` with
//! the models of the user's own crate, though the facade links no capture reader.
//!
//! Likewise [`QemuHook`] (from `calametra-qemu`): how a test binary runs `calametra qemu
//! --package P --test T`, serving a model of the user's own crate to the guest.
//!
//! Nothing here runs a model, a comparison or a guest; this module only finds them.

use crate::spec::Spec;
use crate::usb::{DevCtx, Device, Reply, Setup};
use std::any::Any;
use std::path::{Path, PathBuf};

#[doc(hidden)]
pub use inventory;

/// Builds a model from its spec; `Err` names the spec's file, the field and what was expected.
pub type BuildFn = fn(&Spec) -> Result<Box<dyn Device>, String>;

/// What serving a model to a Linux guest under QEMU needs to know of it (`calametra qemu`,
/// the usb-redir bridge's and the lockstep server's options).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QemuHints {
    /// Coverage marks meaning the device re-enumerated by itself (a DFU device with
    /// bitWillDetach detaching to DFU mode and back): the guest is shown a detach and an
    /// attach when the model records one.
    pub reenumerate_marks: &'static [&'static str],
    /// Whether the virtual clock jumps to the model's next timer after each request (a model
    /// whose timeouts the guest polls through, such as DFU's bwPollTimeout).
    pub warp_after_request: bool,
}

impl QemuHints {
    /// No hints: a device that never re-enumerates by itself and whose timers need no warp.
    pub const NONE: QemuHints = QemuHints {
        reenumerate_marks: &[],
        warp_after_request: false,
    };
}

/// How a whole-capture comparison ([`CompareCaptureFn`]) is to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureOptions {
    /// Script the capture's external changes (a monitor hot-plug) into the model, as the
    /// device saw them; without it, the differences they explain are shown, explained.
    pub replay_hotplug: bool,
}

/// Where a whole-capture comparison hands each picture the device showed: the picture's file
/// name (`frame-0-3840x2160-nv12.png`) and its PNG bytes. It returns the path written, or why
/// nothing was (the comparison goes on either way; the caller reports the error).
pub type PictureSink = Box<dyn FnMut(&str, &[u8]) -> Result<PathBuf, String>>;

/// What a whole-capture comparison found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CaptureReport {
    /// The report for people (every difference, what explains it, the pictures written).
    pub text: String,
    /// How many transfers were compared (0: the capture holds none of the device's).
    pub compared: usize,
    /// Whether every difference is explained.
    pub clean: bool,
}

/// A model's own comparison with a whole capture (control, bulk and interrupt transfers), for
/// a model whose capture holds more than its control transfers can show: the capture's path
/// and bytes (gzip, pcapng, pcap or usbmon text, read by `calametra_capture::Capture::parse`),
/// the spec, the options and, when pictures are wanted, where they go. Without one, a tool
/// compares the capture's control transfers (`calametra_capture::compare::compare_with`).
pub type CompareCaptureFn = fn(
    capture_path: &Path,
    capture: &[u8],
    spec: &Spec,
    options: &CaptureOptions,
    pictures: Option<PictureSink>,
) -> Result<CaptureReport, String>;

/// One registered model (what [`register_model!`](crate::register_model) submits).
pub struct ModelDef {
    /// The spec `format` it is built from (`"calametra.spec.dfu"`).
    pub format: &'static str,
    /// Its constructor.
    pub build: BuildFn,
    /// What a QEMU guest run needs to know of it.
    pub qemu: QemuHints,
    /// Its own whole-capture comparison, if it has one.
    pub compare_capture: Option<CompareCaptureFn>,
    /// `module_path!()` of the registration (to name both in a duplicate's error).
    pub module: &'static str,
}

inventory::collect!(ModelDef);

/// Registers a device model by its spec's `format`, in one line next to the model:
///
/// ```
/// # use calametra_core::{spec::Spec, usb::Loopback, Error};
/// fn loopback(_spec: &Spec) -> Result<Loopback, Error> {
///     Ok(Loopback::default())
/// }
/// calametra_core::register_model!("example.spec.loopback", loopback);
/// # let json = br#"{"format": "example.spec.loopback", "version": 1, "source": "an example"}"#;
/// # let spec = Spec::parse("loopback.json", json).unwrap();
/// # assert!(calametra_core::registry::build(&spec).is_ok());
/// ```
///
/// The constructor is any `fn(&Spec) -> Result<M, E>` with `M: Device` and `E: Display` (a
/// model's `try_from_spec`). Options follow, each at most once and in this order:
/// `qemu = QemuHints { .. }` ([`QemuHints`]) and `compare_capture = f` ([`CompareCaptureFn`]).
#[macro_export]
macro_rules! register_model {
    ($format:expr, $ctor:path
        $(, qemu = $qemu:expr)?
        $(, compare_capture = $compare:expr)?
        $(,)?) => {
        $crate::registry::inventory::submit! {
            $crate::registry::ModelDef {
                format: $format,
                build: |spec| $crate::registry::boxed($ctor(spec)),
                qemu: $crate::__register_model_or!($($qemu)?; $crate::registry::QemuHints::NONE),
                compare_capture: $crate::__register_model_or!($(Some($compare))?; None),
                module: module_path!(),
            }
        }
    };
}

/// `register_model!`'s optional arguments: the given expression, else the default. Not API.
#[doc(hidden)]
#[macro_export]
macro_rules! __register_model_or {
    ($given:expr; $default:expr) => {
        $given
    };
    (; $default:expr) => {
        $default
    };
}

/// A constructor's result as a [`BuildFn`]'s: the model boxed, the error as text.
pub fn boxed<M: Device, E: std::fmt::Display>(r: Result<M, E>) -> Result<Box<dyn Device>, String> {
    r.map(|m| Box::new(m) as Box<dyn Device>)
        .map_err(|e| e.to_string())
}

/// Every model registered in this binary, sorted by format (then by registering module).
pub fn models() -> Vec<&'static ModelDef> {
    let mut v: Vec<&'static ModelDef> = inventory::iter::<ModelDef>.into_iter().collect();
    v.sort_by(|a, b| (a.format, a.module).cmp(&(b.format, b.module)));
    v
}

/// The registered formats, sorted, each once: what an unknown format's error lists.
pub fn formats() -> Vec<&'static str> {
    let mut v: Vec<&'static str> = models().iter().map(|m| m.format).collect();
    v.dedup();
    v
}

/// The model registered for `format`; `Err` when none is (the error lists the registered
/// formats) or when two are (it names both registrations).
pub fn find(format: &str) -> Result<&'static ModelDef, String> {
    let found: Vec<&'static ModelDef> = models()
        .into_iter()
        .filter(|m| m.format == format)
        .collect();
    match found.as_slice() {
        [one] => Ok(one),
        [] => {
            let known = formats();
            Err(format!(
                "`{format}` is not a model registered in this binary; registered: {} (a model registers itself with calametra_core::register_model!, and is found when its crate is linked)",
                if known.is_empty() {
                    "none".to_string()
                } else {
                    known.join(", ")
                }
            ))
        }
        many => Err(format!(
            "`{format}` is registered {} times (by {}); a format names one model",
            many.len(),
            many.iter().map(|m| m.module).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The model registered for `spec`'s `format`. Errors name the spec's file and the field.
pub fn for_spec(spec: &Spec) -> Result<&'static ModelDef, String> {
    let format = spec.str("format").map_err(|e| e.to_string())?;
    find(format).map_err(|e| format!("{}: field `format`: {e}", spec.path().display()))
}

/// The model `spec` describes, built by the constructor registered for its `format`.
pub fn build(spec: &Spec) -> Result<Box<dyn Device>, String> {
    (for_spec(spec)?.build)(spec)
}

/// What `calametra compare --package P --test T` asks of a test binary: compare the capture
/// with the spec's model as registered in that binary (a model of the user's own crate is
/// found there, where the `calametra` tool cannot link it). The harness reads it from the
/// environment (`CALAMETRA_COMPARE_*`) and runs the [`CompareHook`] linked in.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CompareRequest {
    /// The capture file.
    pub capture: PathBuf,
    /// The spec file.
    pub spec: PathBuf,
    /// Only this device's control transfers, as `(bus, address)`.
    pub device: Option<(u16, u8)>,
    /// Do not script the capture's external changes into a whole-capture comparison.
    pub no_hotplug: bool,
}

/// The capture comparison a binary links (`calametra-capture` submits it, with
/// `calametra_capture::by_spec::compare_request`): the harness cannot name the capture
/// readers (the facade links none), so it finds them here.
pub struct CompareHook(pub fn(&CompareRequest) -> Result<CaptureReport, String>);

inventory::collect!(CompareHook);

/// The capture comparison linked into this binary; `Err` says how to link it.
pub fn compare_hook() -> Result<&'static CompareHook, String> {
    inventory::iter::<CompareHook>.into_iter().next().ok_or_else(|| {
        "this test binary links no capture comparison: add `use calametra_capture as _;` to it (calametra-capture as a dev-dependency)".to_string()
    })
}

/// What a guest run that `calametra qemu --package P --test T` asked a test binary for
/// ended as: the run's summary for people and whether it passed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestReport {
    /// The run's summary (outcome, trace hash, the program's output, the console's tail).
    pub text: String,
    /// Whether the guest run passed.
    pub passed: bool,
}

/// The guest run a binary links (`calametra-qemu` submits it): `calametra qemu --package P
/// --test T` runs inside that test binary so that a model registered there (one of the
/// user's own crate) is served to the guest. Its argument is the job as the tool wrote it
/// (JSON `calametra_qemu::job::Job` reads); the facade cannot name the QEMU crate (it links
/// none), so the harness finds it here.
pub struct QemuHook(pub fn(job: &str) -> Result<GuestReport, String>);

inventory::collect!(QemuHook);

/// The guest run linked into this binary; `Err` says how to link it.
pub fn qemu_hook() -> Result<&'static QemuHook, String> {
    inventory::iter::<QemuHook>.into_iter().next().ok_or_else(|| {
        "this test binary links no guest run: add `use calametra_qemu as _;` to it (calametra-qemu as a dev-dependency)".to_string()
    })
}

/// A model built at run time ([`build`]) served as a device: what a tool or a scenario
/// attaches when it knows a model only by its spec (`sim.attach(Boxed(registry::build(spec)?))`,
/// then `w.model(dev).get::<MyModel>()`). Every [`Device`] method goes to the model inside,
/// its description in state dumps included.
pub struct Boxed(pub Box<dyn Device>);

impl Boxed {
    /// The model inside, when it is a `D`.
    pub fn get<D: Device>(&self) -> Option<&D> {
        let any: &dyn Any = &*self.0;
        any.downcast_ref::<D>()
    }
}

impl Device for Boxed {
    fn name(&self) -> &str {
        self.0.name()
    }
    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        self.0.control(cx, setup, data)
    }
    fn out(&mut self, cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        self.0.out(cx, ep, data)
    }
    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        self.0.poll_in(cx, ep, max_len)
    }
    fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
        self.0.on_timer(cx, token)
    }
    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        self.0.on_reset(cx)
    }
    fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
        self.0.on_disconnect(cx)
    }
    fn request_name(&self, setup: &Setup) -> Option<&str> {
        self.0.request_name(setup)
    }
    fn describe(&self) -> Vec<(String, String)> {
        crate::state::describe_device(&*self.0)
    }
    fn pictures(&self) -> Vec<String> {
        self.0.pictures()
    }
    fn picture(&self, name: &str) -> Option<crate::picture::Picture> {
        self.0.picture(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::usb::Loopback;

    fn loopback(spec: &Spec) -> Result<Loopback, crate::Error> {
        match spec.doc().get("refuse") {
            Some(_) => Err(spec.error("refuse", "a test's refusal")),
            None => Ok(Loopback::default()),
        }
    }

    crate::register_model!("test.registry.loopback", loopback);
    crate::register_model!(
        "test.registry.hinted",
        loopback,
        qemu = QemuHints {
            reenumerate_marks: &["Detached"],
            warp_after_request: true,
        },
    );
    crate::register_model!("test.registry.twice", loopback);
    crate::register_model!("test.registry.twice", loopback);

    /// A spec of `format` with `extra` fields (`, "refuse": 1`).
    fn spec(format: &str, extra: &str) -> Spec {
        let json = format!(r#"{{"format": "{format}", "version": 1, "source": "a test"{extra}}}"#);
        Spec::parse("specs/test.json", json.as_bytes()).unwrap()
    }

    #[test]
    fn a_registered_format_builds_its_model() {
        let m = build(&spec("test.registry.loopback", "")).unwrap();
        assert_eq!(m.name(), "loopback");
        let def = find("test.registry.loopback").unwrap();
        assert_eq!(def.qemu, QemuHints::NONE);
        assert!(def.compare_capture.is_none());
        assert!(def.module.ends_with("registry::tests"), "{}", def.module);
    }

    #[test]
    fn options_reach_the_registration() {
        let def = find("test.registry.hinted").unwrap();
        assert_eq!(def.qemu.reenumerate_marks, &["Detached"]);
        assert!(def.qemu.warp_after_request);
    }

    #[test]
    fn a_constructors_error_is_the_models_error() {
        let e = build(&spec("test.registry.loopback", r#", "refuse": 1"#))
            .err()
            .unwrap();
        assert!(e.contains("specs/test.json") && e.contains("refuse"), "{e}");
    }

    #[test]
    fn an_unknown_format_lists_the_registered_ones_sorted() {
        let e = build(&spec("test.registry.nothing", "")).err().unwrap();
        assert!(
            e.starts_with("specs/test.json: field `format`: `test.registry.nothing`"),
            "{e}"
        );
        assert!(
            e.contains(
                "registered: test.registry.hinted, test.registry.loopback, test.registry.twice"
            ),
            "{e}"
        );
    }

    #[test]
    fn a_boxed_model_is_the_model_inside() {
        let b = Boxed(build(&spec("test.registry.loopback", "")).unwrap());
        assert!(b.get::<Loopback>().is_some());
        assert!(b.get::<Boxed>().is_none());
        assert_eq!(b.name(), "loopback");
        assert_eq!(b.describe(), Loopback::default().describe());
    }

    #[test]
    fn a_format_registered_twice_is_an_error_naming_both() {
        let e = find("test.registry.twice").err().unwrap();
        assert!(e.contains("registered 2 times"), "{e}");
        assert_eq!(e.matches("registry::tests").count(), 2, "{e}");
        assert_eq!(formats().iter().filter(|f| f.contains("twice")).count(), 1);
    }
}
