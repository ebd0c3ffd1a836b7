//! The standard scenario: the JCD543 model from the embedded spec with an HP X27q plugged into
//! its HDMI output, the driver's two tasks, the `unplug` external, and the four invariants.
//!
//! This is what the harness attribute wraps:
//! `#[calametra::scenario(spec = "specs/trigger6-jcd543.json", schedules = .., faults = transport)]`
//! around [`scenario`]. Only the scenario is simulation-specific; the driver is not.

use crate::driver::{self, Beliefs, Driver};
use calametra_core::scripted::Scripted;
use calametra_core::spec::Spec;
use calametra_core::world::DeviceHandle;
use calametra_core::Sim;
use calametra_models::trigger6::{self as t6, names, Trigger6};
use std::cell::RefCell;
use std::rc::Rc;

/// The spec's path as the attribute names it (relative to the workspace root).
pub const SPEC_PATH: &str = "specs/trigger6-jcd543.json";

/// The spec's bytes, embedded at compile time.
pub const SPEC_JSON: &[u8] = include_bytes!("../../../specs/trigger6-jcd543.json");

/// The embedded spec, parsed once per process. Panics only if the embedded file is malformed,
/// which the crate's tests rule out.
pub fn spec() -> Spec {
    static SPEC: std::sync::OnceLock<Result<Spec, String>> = std::sync::OnceLock::new();
    match SPEC.get_or_init(|| Spec::parse(SPEC_PATH, SPEC_JSON).map_err(|e| e.to_string())) {
        Ok(s) => s.clone(),
        Err(e) => panic!("{e}"),
    }
}

/// The driver's beliefs in the shape the model's invariants read ([`t6::DriverView`]). The
/// driver keeps its own types (its library depends on `calametra-usb` alone), so a check
/// converts them: `w.model(dock).status_matches_connection(&View::of(&beliefs).get())`.
#[derive(Clone, Debug)]
pub struct View {
    connection: [t6::Connection; 2],
    hotplug_seen: [u32; 2],
    vram_size: Option<u64>,
    modes: [Option<[u8; 32]>; 2],
    flips: Vec<t6::FlipBelief>,
    fence_done: u32,
    writes: Vec<t6::RamWrite>,
}

impl View {
    /// The beliefs, converted.
    pub fn of(b: &Beliefs) -> View {
        let connection = |c: driver::Connection| match c {
            driver::Connection::Unknown => t6::Connection::Unknown,
            driver::Connection::Disconnected => t6::Connection::Disconnected,
            driver::Connection::Connected => t6::Connection::Connected,
        };
        View {
            connection: b.connection.map(connection),
            hotplug_seen: b.hotplug_seen,
            vram_size: b.vram_size,
            modes: b.modes,
            flips: b
                .flips
                .iter()
                .map(|f| t6::FlipBelief {
                    output: f.output,
                    fence: f.fence,
                    format: f.format,
                    y_offset: f.y_offset,
                    uv_offset: f.uv_offset,
                    y_pitch: f.y_pitch,
                    uv_pitch: f.uv_pitch,
                    width: f.width,
                    height: f.height,
                    pixels: f.pixels.clone(),
                })
                .collect(),
            fence_done: b.fence_done,
            writes: b
                .writes
                .iter()
                .map(|w| t6::RamWrite {
                    addr: w.addr,
                    len: w.len,
                })
                .collect(),
        }
    }

    /// The view the invariants take.
    pub fn get(&self) -> t6::DriverView<'_> {
        t6::DriverView {
            connection: self.connection,
            hotplug_seen: self.hotplug_seen,
            vram_size: self.vram_size,
            modes: self.modes,
            flips: &self.flips,
            fence_done: self.fence_done,
            writes: &self.writes,
        }
    }
}

/// What [`build`] attached and spawned, for tests that look at the model or the beliefs.
#[derive(Clone)]
pub struct Handles {
    /// The dock.
    pub dock: DeviceHandle<Trigger6>,
    /// The driver's beliefs.
    pub beliefs: Rc<RefCell<Beliefs>>,
}

/// The standard scenario (see the module docs).
pub fn scenario(sim: &mut Sim) {
    build(sim);
}

/// The standard scenario with the fixed driver, whatever the build's features.
pub fn scenario_fixed(sim: &mut Sim) {
    build_with(sim, false);
}

/// The standard scenario with the planted race (a stale status reply accepted after a
/// disconnect), whatever the build's features.
pub fn scenario_planted(sim: &mut Sim) {
    build_with(sim, true);
}

/// Builds the standard scenario and returns its handles:
///
/// - attaches [`Trigger6`] from the embedded spec (monitors start disconnected, as in the
///   capture) and plugs the HP X27q into output 0, which queues a hotplug interrupt;
/// - spawns the driver's interrupt listener (daemon `irq`) and main sequence (task `driver`);
/// - declares the external `unplug` (the monitor leaves output 0; exploration places it);
/// - declares `flip_state_matches_ram`, `status_matches_connection`,
///   `modeset_has_valid_timing` and `ram_writes_in_bounds`, each comparing the model with the
///   driver's beliefs (as a [`View`]).
pub fn build(sim: &mut Sim) -> Handles {
    build_with(sim, cfg!(feature = "planted-race"))
}

/// [`build`] with the planted race chosen explicitly.
pub fn build_with(sim: &mut Sim, planted_race: bool) -> Handles {
    let dock = sim.attach(Trigger6::from_spec(&spec()));
    sim.with_world(|w| w.with_model(dock, |m, cx| m.plug_monitor(cx, 0)));
    let driver = Driver::with_planted_race(dock.interface(), planted_race);
    let beliefs = driver.beliefs();
    sim.spawn_daemon("irq", driver.clone().irq_loop());
    // The driver may give up with an error after a fault or an unplug; without either it must
    // succeed. Its ending is kept for the invariant below rather than failing the task.
    let ending: Rc<RefCell<Option<Result<(), String>>>> = Rc::new(RefCell::new(None));
    let e2 = ending.clone();
    let run = driver.run();
    sim.spawn("driver", async move {
        let r = run.await;
        *e2.borrow_mut() = Some(r.map(|_| ()).map_err(|e| format!("{e:?}")));
    });
    sim.invariant("driver_succeeds_unperturbed", move |w| {
        match &*ending.borrow() {
            Some(Err(e)) if w.faults_injected() == 0 && w.externals_fired() == 0 => Err(format!(
                "the driver failed with no fault injected and no external event: {e}"
            )),
            _ => Ok(()),
        }
    });
    sim.external("unplug", move |w| {
        w.with_model(dock, |m, cx| m.unplug_monitor(cx, 0));
    });
    let b = beliefs.clone();
    sim.invariant(names::FLIP_STATE_MATCHES_RAM, move |w| {
        w.model(dock)
            .flip_state_matches_ram(&View::of(&b.borrow()).get())
    });
    let b = beliefs.clone();
    sim.invariant(names::STATUS_MATCHES_CONNECTION, move |w| {
        w.model(dock)
            .status_matches_connection(&View::of(&b.borrow()).get())
    });
    let b = beliefs.clone();
    sim.invariant(names::MODESET_HAS_VALID_TIMING, move |w| {
        w.model(dock)
            .modeset_has_valid_timing(&View::of(&b.borrow()).get())
    });
    let b = beliefs.clone();
    sim.invariant(names::RAM_WRITES_IN_BOUNDS, move |w| {
        w.model(dock)
            .ram_writes_in_bounds(&View::of(&b.borrow()).get())
    });
    Handles { dock, beliefs }
}

/// When [`scenario_second_output`] plugs the second monitor: while the driver, probe done,
/// waits for one.
pub const SECOND_MONITOR_AT: std::time::Duration = std::time::Duration::from_millis(300);

/// What [`build_second_output`] attached and spawned.
#[derive(Clone)]
pub struct SecondOutput {
    /// The dock, with the hot-plug scripted in ([`Scripted::inner`] is the model).
    pub dock: DeviceHandle<Scripted<Trigger6>>,
    /// The driver's beliefs.
    pub beliefs: Rc<RefCell<Beliefs>>,
}

/// The second output: nothing is plugged in at power-on; the driver drives output 1 and waits
/// for a monitor; at [`SECOND_MONITOR_AT`] the spec's second monitor (the HP X27q's
/// DisplayPort EDID) is hot-plugged into output 1 (a DisplayEvent 0x02 interrupt), and the
/// driver reads its EDID, sets 1920x1080@60 from output 1's table and flips the colour bars
/// there with FLIP_SECONDARY. The four invariants hold throughout.
pub fn scenario_second_output(sim: &mut Sim) {
    build_second_output(sim);
}

/// Builds [`scenario_second_output`] and returns its handles.
pub fn build_second_output(sim: &mut Sim) -> SecondOutput {
    let model = Scripted::new(Trigger6::from_spec(&spec())).at(
        SECOND_MONITOR_AT.as_nanos() as u64,
        "hotplug out1",
        |m: &mut Trigger6, cx| {
            m.plug_monitor(cx, 1);
        },
    );
    let dock = sim.attach(model);
    let driver = Driver::with_planted_race(dock.interface(), false).on_output(1);
    let beliefs = driver.beliefs();
    sim.spawn_daemon("irq", driver.clone().irq_loop());
    // As in the standard scenario, the driver may give up after a fault; unperturbed it must
    // succeed.
    let ending: Rc<RefCell<Option<Result<(), String>>>> = Rc::new(RefCell::new(None));
    let e2 = ending.clone();
    let run = driver.run();
    sim.spawn("driver", async move {
        let r = run.await;
        *e2.borrow_mut() = Some(r.map(|_| ()).map_err(|e| format!("{e:?}")));
    });
    sim.invariant("driver_succeeds_unperturbed", move |w| {
        match &*ending.borrow() {
            Some(Err(e)) if w.faults_injected() == 0 && w.externals_fired() == 0 => Err(format!(
                "the driver failed with no fault injected and no external event: {e}"
            )),
            _ => Ok(()),
        }
    });
    let b = beliefs.clone();
    sim.invariant(names::FLIP_STATE_MATCHES_RAM, move |w| {
        w.model(dock)
            .inner()
            .flip_state_matches_ram(&View::of(&b.borrow()).get())
    });
    let b = beliefs.clone();
    sim.invariant(names::STATUS_MATCHES_CONNECTION, move |w| {
        w.model(dock)
            .inner()
            .status_matches_connection(&View::of(&b.borrow()).get())
    });
    let b = beliefs.clone();
    sim.invariant(names::MODESET_HAS_VALID_TIMING, move |w| {
        w.model(dock)
            .inner()
            .modeset_has_valid_timing(&View::of(&b.borrow()).get())
    });
    let b = beliefs.clone();
    sim.invariant(names::RAM_WRITES_IN_BOUNDS, move |w| {
        w.model(dock)
            .inner()
            .ram_writes_in_bounds(&View::of(&b.borrow()).get())
    });
    SecondOutput { dock, beliefs }
}
