//! Shared pieces of the fuzz targets: a cursor over the fuzzer's bytes, the project's specs
//! (embedded, parsed once), the models built from them, the request interpreter that plays a
//! driver or a guest against a model through a [`DeviceHost`], and the loopback scenario that
//! fault schedules and regression files are replayed into.
//!
//! The byte encoding of a request sequence ([`Op`]) lives here only: the targets decode it and
//! the seed maker (`tests/seeds.rs`) encodes it.

use calametra_core::choices::Source;
use calametra_core::exec::sleep;
use calametra_core::fault::FaultPlan;
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_core::usb::{Device, Loopback, Setup};
use calametra_core::{run, Failure, RunConfig, RunResult, Sim};
use calametra_models::dfu::{self, Dfu};
use calametra_models::trigger6::{DriverView, Trigger6};
use calametra_qemu::Boxed;
use std::sync::OnceLock;
use std::time::Duration;

/// The project's device specs, as `(path, bytes)`.
pub const SPECS: [(&str, &[u8]); 4] = [
    (
        "specs/trigger6-jcd543.json",
        include_bytes!("../../specs/trigger6-jcd543.json"),
    ),
    (
        "specs/dfu11-tolerant.json",
        include_bytes!("../../specs/dfu11-tolerant.json"),
    ),
    (
        "specs/dfu11-nontolerant.json",
        include_bytes!("../../specs/dfu11-nontolerant.json"),
    ),
    (
        "specs/dfu11-usbd-dfu.json",
        include_bytes!("../../specs/dfu11-usbd-dfu.json"),
    ),
];

/// Reads the fuzzer's bytes front to back; past the end every read is zero or empty.
pub struct Input<'a> {
    data: &'a [u8],
    at: usize,
}

impl<'a> Input<'a> {
    /// A cursor at the start of `data`.
    pub fn new(data: &'a [u8]) -> Input<'a> {
        Input { data, at: 0 }
    }

    /// Whether every byte was read.
    pub fn is_empty(&self) -> bool {
        self.at >= self.data.len()
    }

    /// One byte.
    pub fn u8(&mut self) -> u8 {
        let b = self.data.get(self.at).copied().unwrap_or(0);
        self.at += 1;
        b
    }

    /// A little-endian u16.
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes([self.u8(), self.u8()])
    }

    /// A little-endian u32.
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes([self.u8(), self.u8(), self.u8(), self.u8()])
    }

    /// A little-endian u64.
    pub fn u64(&mut self) -> u64 {
        (self.u32() as u64) | ((self.u32() as u64) << 32)
    }

    /// Up to `n` bytes (fewer at the end).
    pub fn take(&mut self, n: usize) -> &'a [u8] {
        let start = self.at.min(self.data.len());
        let end = start.saturating_add(n).min(self.data.len());
        self.at = start + (end - start);
        &self.data[start..end]
    }

    /// Everything not read yet.
    pub fn rest(&mut self) -> &'a [u8] {
        self.take(usize::MAX)
    }
}

/// The parsed spec `i` of [`SPECS`] (parsed once per process).
pub fn spec(i: usize) -> &'static Spec {
    static PARSED: OnceLock<Vec<Spec>> = OnceLock::new();
    &PARSED.get_or_init(|| {
        SPECS
            .iter()
            .map(|(path, bytes)| Spec::parse(*path, bytes).expect("the project's specs parse"))
            .collect()
    })[i % SPECS.len()]
}

/// Every model that builds from `spec`, boxed (a spec of another format builds none).
pub fn models_from(spec: &Spec) -> Vec<Boxed> {
    let mut v = Vec::new();
    if let Ok(m) = Trigger6::try_from_spec(spec) {
        v.push(Boxed(Box::new(m)));
    }
    if let Ok(m) = Dfu::try_from_spec(spec) {
        v.push(Boxed(Box::new(m)));
    }
    if let Ok(m) = calametra_models::learned::Learned::try_from_spec(spec) {
        v.push(Boxed(Box::new(m)));
    }
    v
}

/// A host serving `device` with a default configuration (no faults, baseline choices).
pub fn host(device: impl Device) -> DeviceHost {
    DeviceHost::new(device, &RunConfig::default())
}

/// The requests a host makes when a device appears, then a few of each model's own: so a
/// model built from a mutated spec is asked what its spec says it answers.
pub const ENUMERATION: &[[u8; 8]] = &[
    [0x80, 6, 0, 1, 0, 0, 64, 0],     // device descriptor, 64
    [0x00, 5, 5, 0, 0, 0, 0, 0],      // set_address 5
    [0x80, 6, 0, 1, 0, 0, 18, 0],     // device descriptor, 18
    [0x80, 6, 0, 2, 0, 0, 9, 0],      // configuration descriptor head
    [0x80, 6, 0, 2, 0, 0, 0xff, 0],   // configuration descriptor
    [0x80, 6, 0, 0x0f, 0, 0, 5, 0],   // BOS head
    [0x80, 6, 0, 3, 0, 0, 0xff, 0],   // string languages
    [0x80, 6, 1, 3, 9, 4, 0xff, 0],   // string 1
    [0x80, 6, 2, 3, 9, 4, 0xff, 0],   // string 2
    [0x80, 6, 3, 3, 9, 4, 0xff, 0],   // string 3
    [0x00, 9, 1, 0, 0, 0, 0, 0],      // set_configuration 1
    [0xc0, 0x88, 0, 0, 0, 0, 4, 0],   // trigger6: vram size
    [0xc0, 0x87, 0, 0, 0, 0, 1, 0],   // trigger6: monitor status, output 0
    [0xc0, 0x80, 0, 0, 0, 0, 128, 0], // trigger6: EDID block 0
    [0xc0, 0x84, 0, 0, 0, 0, 4, 0],   // trigger6: timing count
    [0xc0, 0x89, 0, 0, 0, 0, 0, 2],   // trigger6: timing table
    [0xa1, 3, 0, 0, 0, 0, 6, 0],      // dfu: getstatus
    [0xa1, 5, 0, 0, 0, 0, 1, 0],      // dfu: getstate
    [0x21, 0, 0xe8, 3, 0, 0, 0, 0],   // dfu: detach
];

/// One request of a driver or a guest, as the interpreter decodes it from fuzzer bytes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Op {
    /// A control transfer: the 8 setup bytes and the OUT data stage (ignored for IN).
    Control {
        /// The SETUP packet as sent on the wire.
        setup: [u8; 8],
        /// The data stage; its length need not match `wLength`.
        data: Vec<u8>,
    },
    /// A bulk or interrupt OUT transfer.
    Out {
        /// Endpoint address.
        ep: u8,
        /// Payload.
        data: Vec<u8>,
    },
    /// One IN poll.
    In {
        /// Endpoint address.
        ep: u8,
        /// Bytes asked for.
        len: u16,
        /// Interrupt (else bulk) site naming.
        interrupt: bool,
    },
    /// Virtual time passes.
    Advance {
        /// Microseconds.
        us: u32,
    },
    /// A USB bus reset.
    Reset,
    /// The device is unplugged (the rest of the input is ignored).
    Disconnect,
}

impl Op {
    /// Decodes one op; `None` at the end of the input.
    pub fn decode(input: &mut Input<'_>) -> Option<Op> {
        if input.is_empty() {
            return None;
        }
        let tag = input.u8();
        Some(match tag {
            0..=99 => {
                let mut setup = [0u8; 8];
                setup.copy_from_slice(&{
                    let mut s = input.take(8).to_vec();
                    s.resize(8, 0);
                    s
                });
                let n = input.u16() as usize;
                Op::Control {
                    setup,
                    data: input.take(n).to_vec(),
                }
            }
            100..=159 => {
                let ep = input.u8();
                let n = input.u16() as usize;
                Op::Out {
                    ep,
                    data: input.take(n).to_vec(),
                }
            }
            160..=219 => {
                let ep = input.u8();
                let len = input.u16();
                Op::In {
                    ep,
                    len,
                    interrupt: tag & 1 == 1,
                }
            }
            220..=239 => Op::Advance { us: input.u32() },
            240..=251 => Op::Reset,
            _ => Op::Disconnect,
        })
    }

    /// Encodes the op so that [`Op::decode`] reads it back.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let len16 = |n: usize| u16::try_from(n).expect("an op's payload fits 16 bits");
        match self {
            Op::Control { setup, data } => {
                out.push(0);
                out.extend_from_slice(setup);
                out.extend_from_slice(&len16(data.len()).to_le_bytes());
                out.extend_from_slice(data);
            }
            Op::Out { ep, data } => {
                out.push(100);
                out.push(*ep);
                out.extend_from_slice(&len16(data.len()).to_le_bytes());
                out.extend_from_slice(data);
            }
            Op::In { ep, len, interrupt } => {
                out.push(if *interrupt { 161 } else { 160 });
                out.push(*ep);
                out.extend_from_slice(&len.to_le_bytes());
            }
            Op::Advance { us } => {
                out.push(220);
                out.extend_from_slice(&us.to_le_bytes());
            }
            Op::Reset => out.push(240),
            Op::Disconnect => out.push(255),
        }
    }
}

/// The most requests one input makes (keeps every execution short).
pub const MAX_OPS: usize = 512;

/// Plays at most `max_ops` ops from `input` against the model behind `host`, as a driver or a
/// guest would: nothing a device is sent may panic it. Errors (stalls, model gaps, timeouts)
/// are fine.
pub fn drive(host: &mut DeviceHost, input: &mut Input<'_>, max_ops: usize) {
    for _ in 0..max_ops {
        let Some(op) = Op::decode(input) else { break };
        apply(host, &op);
        if op == Op::Disconnect {
            break;
        }
    }
}

/// Applies one op.
pub fn apply(host: &mut DeviceHost, op: &Op) {
    match op {
        Op::Control { setup, data } => {
            if let Ok(setup) = Setup::from_bytes(setup) {
                let _ = host.control(setup, data);
            }
        }
        Op::Out { ep, data } => {
            let _ = host.out(*ep, data);
        }
        Op::In { ep, len, interrupt } => {
            let _ = host.poll_in(*ep, *len as usize, *interrupt);
        }
        Op::Advance { us } => {
            let t = host.now().saturating_add(*us as u64 * 1000);
            host.advance_to(t);
        }
        Op::Reset => host.reset(),
        Op::Disconnect => host.disconnect(),
    }
}

/// Reads a model's ground truth the way invariants and reports do (none of it may panic
/// whatever state the requests left the model in).
pub fn observe(host: &mut DeviceHost) {
    let _ = host.hash();
    let Some(boxed) = host.device::<Boxed>() else {
        return;
    };
    if let Some(t6) = boxed.get::<Trigger6>() {
        let _ = t6.state_summary();
        for o in 0..2 {
            let _ = (t6.connected(o), t6.mode(o), t6.flip_state(o));
            let _ = t6.shown_frame(o);
        }
        let view = DriverView::default();
        let _ = t6.flip_state_matches_ram(&view);
        let _ = t6.status_matches_connection(&view);
        let _ = t6.modeset_has_valid_timing(&view);
        let _ = t6.ram_writes_in_bounds(&view);
    }
    if let Some(d) = boxed.get::<Dfu>() {
        let _ = (d.state(), d.status(), d.poll_timeout_ms(), d.valid_image());
        let _ = dfu::state_machine_legal(d);
        let _ = dfu::installed_as_claimed(d, d.staged_image());
    }
}

/// Asks a freshly built model the [`ENUMERATION`] requests.
pub fn enumerate(host: &mut DeviceHost) {
    for s in ENUMERATION {
        if let Ok(setup) = Setup::from_bytes(s) {
            let data = vec![0u8; setup.length.min(16) as usize];
            let _ = host.control(setup, &data);
        }
    }
}

const T: Duration = Duration::from_millis(50);

/// The loopback scenario that fault schedules and regression files are replayed into: a driver
/// that stores, loads, queues and reads back through every transfer type, an external that
/// unplugs and one that plugs back in, and an invariant. Only the core runs here, so any panic
/// it reports is the core's.
pub fn loopback_scenario(sim: &mut Sim) {
    let dev = sim.attach(Loopback::default());
    let iface = dev.interface();
    sim.spawn("driver", async move {
        for round in 0..3u8 {
            let payload = [round, 1, 2, 3, 4, 5, 6, 7];
            let _ = iface.control_out(Loopback::store(&payload), T).await;
            let _ = iface.control_in(Loopback::load(8), T).await;
            let _ = iface.bulk_out(0x01, payload.to_vec()).await;
            let _ = iface.interrupt_in(0x82, 4).await;
            let _ = iface.bulk_in(0x81, 8).await;
            sleep(Duration::from_micros(100)).await;
        }
    });
    sim.external("unplug", move |w| w.disconnect(dev));
    sim.external("replug", move |w| w.reconnect(dev));
    sim.invariant("stored_fits", move |w| w.model(dev).stored().len() <= 8);
}

/// A run of [`loopback_scenario`] with `faults` and `source`, kept short.
pub fn run_loopback(faults: FaultPlan, source: Source) -> RunResult {
    let config = RunConfig {
        source,
        faults,
        max_steps: 2_000,
        virtual_timeout: 10_000_000_000,
        keep_trace: true,
        ..RunConfig::default()
    };
    run(config, &loopback_scenario)
}

/// Panics (a crash the fuzzer keeps) when a run failed by a panic: the scenario's own code
/// never panics, so the panic came from the core or a model.
pub fn no_panic(r: &RunResult) {
    if let Some(Failure::Panic { task, message }) = &r.failure {
        panic!("the core panicked in `{task}`: {message}");
    }
}
