//! Guest scenarios: `#[calametra::scenario(guest = lockstep, ...)]` on a `fn(guest: &mut Guest)`.
//!
//! The function describes one guest run the way an in-process scenario describes one simulated
//! run: the model it attaches, what the guest runs, the invariants over the model, the external
//! events a seed may place. The harness calls it once per run and makes the same trials as for
//! an in-process scenario (`baseline`, `seed::0x..`, `regression::<id>`, `finds::<inv>`, and
//! `site::<site>::<fault>` by name); each run is a Linux guest under the lockstep QEMU, with the
//! model's clock driven by the guest's, so a seed's faults and externals land at the same guest
//! clock every time and the trace hash (frames and console included) is the run's identity.
//!
//! A case such a scenario saves records the build its runs depend on besides the code
//! ([`Runner::build`]: [`crate::snapshot::build_id`], the QEMU binary, its firmware, the guest's
//! kernel and initramfs, the start and the machine's arguments) as `guest_build`; its
//! `regression::<id>` trial replays it only with that build and is otherwise ignored at run
//! time as "made for another build". The scenarios of `examples/dfu-updater/tests/guest.rs`
//! and `examples/trigger6/tests/guest.rs` are worked examples.
//!
//! ```ignore
//! #[calametra::scenario(spec = "specs/dfu11-tolerant.json", guest = lockstep, schedules = 2, faults = [stall])]
//! fn dfu_download(guest: &mut Guest) {
//!     guest.attach(Dfu::from_spec(guest.spec()));
//!     guest.reenumerate_on(marks::WILL_DETACH_TO_DFU);
//!     guest.run_script("dfu-util -d 1209:0001 -e; ...", vec![("calametra/image.bin".into(), image)]);
//!     guest.invariant("state_machine_legal", |d: &Dfu| state_machine_legal(d));
//! }
//! ```

use crate::guest::Probe;
use crate::guest_run::{GuestRun, Via};
use crate::lockstep::{run_with_extras, External, ExternalAction, Extras, LockstepConfig};
use crate::program::Program;
use crate::{Boxed, Outcome};
use calametra_core::clock::Nanos;
use calametra_core::explore::Runner;
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_core::usb::Device;
use calametra_core::{RunConfig, RunResult};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::Arc;

/// At most this many guest runs go into minimizing one failure (each restores the guest
/// snapshot: about 3.5 s here, where a boot took 13-50 s and the budget was 6).
pub const SHRINK_RUNS: u64 = 32;

/// One guest run, as a guest scenario's function describes it.
pub struct Guest {
    spec: Option<Arc<Spec>>,
    model: Option<Box<dyn Device>>,
    probe: Option<Probe>,
    program: Option<Program>,
    extras: Extras,
    reenumerate_marks: Vec<String>,
}

impl Guest {
    fn new(spec: Option<Arc<Spec>>) -> Guest {
        Guest {
            spec,
            model: None,
            probe: None,
            program: None,
            extras: Extras::default(),
            reenumerate_marks: Vec::new(),
        }
    }

    /// The spec named in the attribute. Panics if the scenario has none (as `Sim::spec`).
    pub fn spec(&self) -> &Spec {
        self.spec.as_deref().expect(
            "calametra: this guest scenario has no spec; add `spec = \"specs/....json\"` to its attribute",
        )
    }

    /// The model the guest sees on its USB bus (one per scenario; a second replaces the first).
    pub fn attach<D: Device>(&mut self, model: D) {
        self.model = Some(Box::new(model));
    }

    /// Attaches the model registered for the spec's `format`
    /// ([`calametra_core::registry::build`]) and takes its QEMU hints (its re-enumeration
    /// marks, as [`Guest::reenumerate_on`]). Panics, naming the spec and the field, when the
    /// format is not registered in this binary or the spec is not the model's (as
    /// `Dfu::from_spec` does).
    pub fn attach_registered(&mut self) {
        let spec = self.spec();
        let def = match calametra_core::registry::for_spec(spec) {
            Ok(def) => def,
            Err(e) => panic!("calametra: {e}"),
        };
        match (def.build)(spec) {
            Ok(model) => self.model = Some(model),
            Err(e) => panic!("calametra: {e}"),
        }
        self.reenumerate_marks
            .extend(def.qemu.reenumerate_marks.iter().map(|m| m.to_string()));
    }

    /// What the guest runs once its USB modules are loaded.
    pub fn probe(&mut self, probe: Probe) {
        self.probe = Some(probe);
    }

    /// A `sh` script the guest runs (`/calametra/probe.sh`) with extra files (paths relative to
    /// `/`); its exit status is the verdict. It must wait for the device itself.
    pub fn run_script(&mut self, script: &str, files: Vec<(String, Vec<u8>)>) {
        self.probe = Some(Probe::Script {
            script: script.to_string(),
            files,
        });
    }

    /// A program the guest runs against the model once it is configured
    /// ([`Program`]: a binary with its arguments and files; `Program::from_package` builds a
    /// binary target static for the guest). Its exit status is the verdict, and its status,
    /// standard output and error are in the run's trace (a `program` record, and the console)
    /// and in a failure's text. A dynamically linked program is checked before the run: a
    /// library the guest image lacks fails the trial by name.
    pub fn run_program(&mut self, program: Program) {
        self.probe = Some(program.probe());
        self.program = Some(program);
    }

    /// An invariant over the model, checked after every frame; the first that breaks stops
    /// the guest on that frame.
    pub fn invariant<D: Device>(
        &mut self,
        name: &str,
        check: impl Fn(&D) -> Result<(), String> + 'static,
    ) {
        let name_owned = name.to_string();
        let f = move |h: &DeviceHost| match h.device::<Boxed>().and_then(|b| b.get::<D>()) {
            Some(d) => check(d),
            None => Err(format!(
                "invariant `{name_owned}`: the attached model is not a {}",
                std::any::type_name::<D>()
            )),
        };
        self.extras.invariants.push((name.to_string(), Rc::new(f)));
    }

    /// An external event a seeded run places on the guest clock, inside [`Guest::window`].
    pub fn external(&mut self, name: &str, action: ExternalAction) {
        self.extras.externals.push(External::new(name, action));
    }

    /// Where on the guest clock (ns since boot) seeded runs place the externals.
    pub fn window(&mut self, from_ns: Nanos, to_ns: Nanos) {
        self.extras.window = (from_ns, to_ns);
    }

    /// A coverage mark meaning the model re-enumerated by itself (a DFU device with
    /// bitWillDetach): the guest sees it detach and attach.
    pub fn reenumerate_on(&mut self, mark: &str) {
        self.reenumerate_marks.push(mark.to_string());
    }
}

/// Where the lockstep QEMU and the guest may have been built: `CARGO_TARGET_DIR`, the target
/// directory holding this test binary, the user's cache (`calametra guest-setup`,
/// [`crate::setup::user_cache`]), and the `target/` of the workspace this crate was built in.
pub(crate) fn target_dirs() -> Vec<PathBuf> {
    let mut v = Vec::new();
    if let Some(d) = std::env::var_os("CARGO_TARGET_DIR") {
        v.push(PathBuf::from(d));
    }
    if let Ok(exe) = std::env::current_exe() {
        if let Some(t) = calametra_core::tracefile::cargo_target_dir(&exe) {
            v.push(t);
        }
    }
    v.extend(crate::setup::user_cache());
    v.push(Path::new(env!("CARGO_MANIFEST_DIR")).join("../target"));
    v
}

/// The runner of a guest scenario (what `guest = lockstep` registers): finds the lockstep QEMU
/// and the guest, or says how to build them.
pub fn runner(scenario: fn(&mut Guest)) -> Result<Box<dyn Runner>, String> {
    let mut why = Vec::new();
    for dir in target_dirs() {
        match LockstepConfig::find(&dir) {
            Ok(lock) => return Ok(Box::new(GuestRunner::new(scenario, lock))),
            Err(e) => why.push(e),
        }
    }
    why.dedup();
    Err(format!(
        "this guest scenario needs the lockstep QEMU and the guest ({}); set them up once with `calametra guest-setup` (or, in Calametra's repository, scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh)",
        why.join("; ")
    ))
}

/// Runs a guest scenario's trials, one lockstep guest run each.
pub struct GuestRunner {
    scenario: Rc<dyn Fn(&mut Guest)>,
    lock: LockstepConfig,
}

impl GuestRunner {
    /// A runner over an explicit QEMU and guest.
    pub fn new(scenario: fn(&mut Guest), lock: LockstepConfig) -> GuestRunner {
        GuestRunner::with(scenario, lock)
    }

    /// A runner of a closure describing the guest run (a test that builds its scenario at run
    /// time: a window placed from an earlier run, a sabotaged model).
    pub fn with(scenario: impl Fn(&mut Guest) + 'static, lock: LockstepConfig) -> GuestRunner {
        GuestRunner {
            scenario: Rc::new(scenario),
            lock,
        }
    }

    /// One guest run under `config`, whole: the console, the timings and QEMU's stderr
    /// besides the trace (what [`Runner::run`] reduces to a [`RunResult`]). An
    /// `emulator_blocked` run is returned as it ended.
    pub fn run_guest(&self, config: &RunConfig) -> Result<GuestRun, String> {
        let mut g = Guest::new(config.spec.clone());
        (self.scenario)(&mut g);
        let model = g
            .model
            .take()
            .ok_or("the guest scenario attached no model (call guest.attach(..))")?;
        let probe = g
            .probe
            .take()
            .ok_or("the guest scenario gave the guest nothing to run (guest.run_program(..) or guest.run_script(..))")?;
        if let Some(p) = &g.program {
            p.check_libraries(&self.lock.qemu.guest)?;
        }
        let mut lock = self.lock.clone();
        lock.options
            .reenumerate_marks
            .extend(g.reenumerate_marks.iter().cloned());
        let (run, _host) = run_with_extras(Boxed(model), config, &g.extras, &probe, &lock)
            .map_err(|e| e.to_string())?;
        Ok(run)
    }
}

/// The harness's view of a lockstep guest run: `Err` for `emulator_blocked` (no verdict) and
/// for a run usb-redir served (no frames, not repeatable), the trace lines only when
/// `keep_trace`.
pub fn run_result(run: GuestRun, keep_trace: bool) -> Result<RunResult, String> {
    if let Outcome::EmulatorBlocked { reason } = &run.outcome {
        return Err(format!("emulator_blocked: {reason}"));
    }
    let Via::Lockstep {
        frames,
        end_clock_ns,
    } = run.via
    else {
        return Err("a usb-redir run is no harness run (not repeatable); use lockstep".into());
    };
    Ok(RunResult {
        hash: run.hash,
        records: run.records,
        events: run.events,
        failure: run.failure,
        lines: if keep_trace { run.trace } else { Vec::new() },
        sites: Vec::new(),
        marks: BTreeMap::new(),
        steps: frames,
        choices: 0,
        end_ns: end_clock_ns,
        // Guest runs draw no swarm yet: their faults follow the fault set at the fixed
        // density and their externals are placed by the lockstep loop.
        swarm: None,
        // A guest run does not stop at a step (`RunConfig::stop_at`) yet.
        state: None,
        // The lockstep loop's externals are not named to the run result.
        externals: None,
        // A guest run reaches no in-process coverage and watches no pictures.
        coverage: Default::default(),
        pictures: None,
    })
}

impl Runner for GuestRunner {
    fn run(&self, config: RunConfig) -> Result<RunResult, String> {
        let run = self.run_guest(&config)?;
        run_result(run, config.keep_trace)
    }

    fn shrink_budget(&self) -> Option<u64> {
        Some(SHRINK_RUNS)
    }

    /// The QEMU build and the guest image ([`crate::snapshot::build_id`]): a saved case
    /// records it and replays only with the same.
    fn build(&self) -> Result<Option<String>, String> {
        crate::snapshot::build_id(&self.lock)
            .map(Some)
            .map_err(|e| e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use calametra_core::registry::QemuHints;
    use calametra_models::dfu::{marks, Dfu};

    fn dfu_spec() -> Arc<Spec> {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/dfu11-tolerant.json");
        Arc::new(Spec::load(&path).unwrap())
    }

    #[test]
    fn a_registered_model_is_attached_with_its_reenumeration_marks() {
        let mut g = Guest::new(Some(dfu_spec()));
        g.attach_registered();
        let model = g.model.take().expect("attached");
        let any: &dyn std::any::Any = &*model;
        assert!(any.downcast_ref::<Dfu>().is_some());
        assert_eq!(
            g.reenumerate_marks,
            [marks::WILL_DETACH_TO_DFU, marks::WILL_DETACH_TO_APP]
        );
    }

    #[test]
    fn hints_reach_both_transports_options() {
        let hints = QemuHints {
            reenumerate_marks: &["Detached"],
            warp_after_request: true,
        };
        let mut bridge = crate::BridgeOptions::default();
        bridge.apply(&hints);
        assert_eq!(bridge.reenumerate_marks, ["Detached"]);
        assert!(bridge.warp_after_request);
        let mut lock = crate::lockstep::LockstepOptions::default();
        lock.apply(&hints);
        lock.apply(&QemuHints::NONE);
        assert_eq!(lock.reenumerate_marks, ["Detached"]);
    }
}
