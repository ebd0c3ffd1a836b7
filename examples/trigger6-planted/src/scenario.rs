//! The scenario of the planted copy: the JCD543 model from the example's embedded spec with the
//! HP X27q plugged into output 0, the copy's two tasks, the externals `unplug` (the monitor
//! leaves output 0) and `replug` (it comes back), and the example's invariants
//! (`flip_state_matches_ram`, `status_matches_connection`, `modeset_has_valid_timing`,
//! `ram_writes_in_bounds`, `driver_succeeds_unperturbed`), each comparing the model with the
//! copy's beliefs. Nothing here but the driver differs from the example's standard scenario,
//! and `replug`.

use crate::driver::{self, Beliefs, Driver};
use calametra_core::Sim;
use calametra_models::trigger6::{self as t6, names, Trigger6};
use std::cell::RefCell;
use std::rc::Rc;

/// The copy's beliefs in the shape the model's invariants read ([`t6::DriverView`]).
struct View {
    connection: [t6::Connection; 2],
    hotplug_seen: [u32; 2],
    vram_size: Option<u64>,
    modes: [Option<[u8; 32]>; 2],
    flips: Vec<t6::FlipBelief>,
    fence_done: u32,
    writes: Vec<t6::RamWrite>,
}

impl View {
    fn of(b: &Beliefs) -> View {
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

    fn get(&self) -> t6::DriverView<'_> {
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

/// The scenario (see the module docs).
pub fn scenario(sim: &mut Sim) {
    let dock = sim.attach(Trigger6::from_spec(&calametra_example_trigger6::spec()));
    sim.with_world(|w| w.with_model(dock, |m, cx| m.plug_monitor(cx, 0)));
    let driver = Driver::new(dock.interface());
    let beliefs: Rc<RefCell<Beliefs>> = driver.beliefs();
    sim.spawn_daemon("irq", driver.clone().irq_loop());
    // As in the example's scenario: the driver may give up after a fault or an external event;
    // without either it must succeed.
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
    sim.external("replug", move |w| {
        w.with_model(dock, |m, cx| m.plug_monitor(cx, 0));
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
    sim.invariant(names::RAM_WRITES_IN_BOUNDS, move |w| {
        w.model(dock)
            .ram_writes_in_bounds(&View::of(&beliefs.borrow()).get())
    });
}
