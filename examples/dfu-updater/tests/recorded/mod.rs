//! The updater's run recorded at the device as a capture, and a model learned from it: shared
//! by `tests/learned.rs` and `benches/learned.rs`.

use calametra_capture::learn::{learn, Input, Selection};
use calametra_capture::{pcap, usbmon_bin, Event, EventKind, Order, XferType};
use calametra_core::explore::Probe;
use calametra_core::spec::Spec;
use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use calametra_core::world::Timing;
use calametra_core::{run, RunConfig, Sim};
use calametra_example_dfu_updater::{new_image, update, Options, UpdateError};
use calametra_models::dfu::Dfu;
use std::cell::RefCell;
use std::rc::Rc;

/// The DFU model, with every control transfer it answers written down as usbmon events: a
/// submission the bus's cost before the device saw it, a completion when it answered.
pub struct Recorder {
    inner: Dfu,
    events: Rc<RefCell<Vec<Event>>>,
}

impl Device for Recorder {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, data: &[u8]) -> Reply {
        let reply = self.inner.control(cx, setup, data);
        let t = Timing::default();
        let out = if setup.is_in() { 0 } else { data.len() as u64 };
        let cost_us = (t.control_ns + t.per_byte_ns * out) / 1000;
        let done_us = (cx.now() / 1000) as i64;
        let mut ev = self.events.borrow_mut();
        let id = 0x1000 + ev.len() as u64;
        let (status, got) = match &reply {
            Reply::Data(d) if setup.is_in() => {
                (0, d[..d.len().min(setup.length as usize)].to_vec())
            }
            Reply::Ack | Reply::Data(_) => (0, Vec::new()),
            _ => (-32, Vec::new()),
        };
        let endpoint = if setup.is_in() { 0x80 } else { 0 };
        let base = Event {
            record: 0,
            id,
            kind: EventKind::Submit,
            xfer: XferType::Control,
            endpoint,
            device: 2,
            bus: 1,
            t_us: done_us - cost_us as i64,
            status: -115,
            length: if setup.is_in() {
                setup.length as u32
            } else {
                data.len() as u32
            },
            setup: Some(*setup),
            data: if setup.is_in() {
                Vec::new()
            } else {
                data.to_vec()
            },
        };
        ev.push(base.clone());
        ev.push(Event {
            kind: EventKind::Complete,
            t_us: done_us,
            status,
            length: if setup.is_in() {
                got.len() as u32
            } else if status == 0 {
                data.len() as u32
            } else {
                0
            },
            setup: None,
            data: got,
            ..base
        });
        reply
    }

    fn on_timer(&mut self, cx: &mut DevCtx<'_>, token: u64) {
        self.inner.on_timer(cx, token)
    }

    fn on_reset(&mut self, cx: &mut DevCtx<'_>) {
        self.inner.on_reset(cx)
    }

    fn on_disconnect(&mut self, cx: &mut DevCtx<'_>) {
        self.inner.on_disconnect(cx)
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        self.inner.request_name(setup)
    }
}

/// The hand model's baseline, recorded as a pcap.
pub fn record_baseline() -> Vec<u8> {
    let events: Rc<RefCell<Vec<Event>>> = Rc::default();
    let spec = Spec::parse(
        "specs/dfu11-tolerant.json",
        calametra_example_dfu_updater::scenario::TOLERANT_SPEC,
    )
    .unwrap();
    let sink = events.clone();
    let r = run(
        Probe::Baseline.config(&RunConfig::default()),
        &move |sim: &mut Sim| {
            let dev = sim.attach(Recorder {
                inner: Dfu::from_spec(&spec),
                events: sink.clone(),
            });
            updater(sim, dev.interface());
        },
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let packets: Vec<Vec<u8>> = events
        .borrow()
        .iter()
        .map(|e| usbmon_bin::build_packet(e, 220, Order::Little))
        .collect();
    pcap::build(220, Order::Little, &packets)
}

/// The updater's task, judged as the hand scenario judges it (the DFU invariants need the DFU
/// model's ground truth, which a learned model does not have).
pub fn updater(sim: &mut Sim, iface: calametra_core::interface::Interface) {
    sim.spawn("updater", async move {
        match update(&iface, &new_image(), &Options::default()).await {
            Ok(_) | Err(UpdateError::Disconnected | UpdateError::Reattached { .. }) => Ok(()),
            Err(e) => Err(e),
        }
    });
}

/// The spec learned from [`record_baseline`], and what `learn` said of it.
pub fn learned_spec() -> (Spec, String) {
    let pcap = record_baseline();
    let input = Input::parse("dfu-updater-baseline.pcap", &pcap).unwrap();
    let (learned, report) = learn(&[input], &Selection::Only).unwrap();
    let spec = Spec::parse("specs/dfu-learned.json", &learned.to_json()).unwrap();
    (spec, report.to_string())
}
