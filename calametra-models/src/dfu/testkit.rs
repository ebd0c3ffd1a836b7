//! Test helpers for the DFU model: the shipped specs, spec variants, and a scripted host that
//! drives the model through the simulator (requests, virtual-time sleeps, and a USB reset or a
//! power cycle at the end) and reports the replies and the model's ground truth afterwards.

use super::device::{Dfu, Sabotage};
use super::state::{Request, State, Status};
use calametra_core::choices::{Event, Source};
use calametra_core::exec::sleep;
use calametra_core::fault::FaultPlan;
use calametra_core::spec::Spec;
use calametra_core::usb::{ControlIn, ControlOut, ControlType, Device, Recipient, TransferError};
use calametra_core::{run, Failure, RunConfig, Sim};
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::rc::Rc;
use std::time::Duration;

/// The shipped manifestation-tolerant spec.
pub const TOLERANT: &[u8] = include_bytes!("../../specs/dfu11-tolerant.json");
/// The shipped manifestation non-tolerant spec.
pub const NONTOLERANT: &[u8] = include_bytes!("../../specs/dfu11-nontolerant.json");

/// Parses spec bytes (tests only: the shipped specs are known good).
pub fn spec(bytes: &[u8]) -> Spec {
    Spec::parse("specs/test.json", bytes).expect("test spec parses")
}

/// A copy of `base` with `edit` applied to its JSON document.
pub fn edited(base: &[u8], edit: impl FnOnce(&mut serde_json::Value)) -> Vec<u8> {
    let mut v: serde_json::Value = serde_json::from_slice(base).expect("base spec is JSON");
    edit(&mut v);
    serde_json::to_vec(&v).expect("serializes")
}

/// Offset of bmAttributes inside each shipped configuration descriptor (9 + 9 + 2).
const FUNC_ATTR_OFFSET: usize = 20;

/// `base` with different DFU attributes, patched consistently into both functional descriptors.
pub fn with_attributes(
    base: &[u8],
    can_dnload: bool,
    can_upload: bool,
    will_detach: bool,
) -> Vec<u8> {
    edited(base, |v| {
        let attrs = &mut v["attributes"];
        attrs["can_dnload"] = can_dnload.into();
        attrs["can_upload"] = can_upload.into();
        attrs["will_detach"] = will_detach.into();
        let tolerant = attrs["manifestation_tolerant"].as_bool().unwrap_or(false);
        let bits = can_dnload as u8
            | (can_upload as u8) << 1
            | (tolerant as u8) << 2
            | (will_detach as u8) << 3;
        for mode in ["runtime", "dfu_mode"] {
            let hex = v[mode]["configuration"].as_str().unwrap_or("").to_string();
            let mut bytes = calametra_core::hex::decode(&hex).expect("hex");
            bytes[FUNC_ATTR_OFFSET] = bits;
            v[mode]["configuration"] = calametra_core::hex::encode(&bytes).into();
        }
    })
}

/// One host request.
#[derive(Clone, Debug)]
pub enum Req {
    /// DFU_DETACH with wTimeout.
    Detach(u16),
    /// DFU_DNLOAD of block `n` with data (empty: the end of the image).
    Dnload(u16, Vec<u8>),
    /// DFU_UPLOAD of up to n bytes.
    Upload(u16),
    /// DFU_GETSTATUS.
    GetStatus,
    /// DFU_CLRSTATUS.
    ClrStatus,
    /// DFU_GETSTATE.
    GetState,
    /// DFU_ABORT.
    Abort,
    /// An undefined class request (OUT, no data).
    Other(u8),
    /// Any control transfer, from its setup packet (OUT data: `wLength` zero bytes).
    Raw(calametra_core::usb::Setup),
}

impl Req {
    fn request(&self) -> Request {
        match self {
            Req::Detach(_) => Request::Detach,
            Req::Dnload(..) => Request::Dnload,
            Req::Upload(_) => Request::Upload,
            Req::GetStatus => Request::GetStatus,
            Req::ClrStatus => Request::ClrStatus,
            Req::GetState => Request::GetState,
            Req::Abort => Request::Abort,
            Req::Other(b) | Req::Raw(calametra_core::usb::Setup { request: b, .. }) => {
                Request::Other(*b)
            }
        }
    }
}

/// One step of a script.
#[derive(Clone, Debug)]
pub enum Step {
    /// Send a request.
    Req(Req),
    /// Wait this many virtual milliseconds.
    Sleep(u64),
}

/// What happens after the script's last step.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum End {
    /// Nothing.
    Nothing,
    /// A USB reset.
    UsbReset,
    /// Unplug and plug back in: a power-on reset.
    PowerCycle,
}

/// What a script saw, and the model's ground truth at the end.
#[derive(Debug)]
pub struct Outcome {
    /// Each request's reply, in order (`Ok(data)`, empty for OUT).
    pub replies: Vec<Result<Vec<u8>, TransferError>>,
    /// The model's state at the end.
    pub state: State,
    /// Its status.
    pub status: Status,
    /// Its valid image.
    pub valid_image: Option<Vec<u8>>,
    /// Marks reached.
    pub marks: BTreeMap<String, u64>,
    /// The run's failure, if any.
    pub failure: Option<Failure>,
    /// `state_machine_legal` over the final history.
    pub legal: Result<(), String>,
}

const T: Duration = Duration::from_millis(500);

/// Sends one request through a simulated interface.
pub async fn send(
    iface: &calametra_core::usb::Interface,
    interface: u16,
    req: &Req,
) -> Result<Vec<u8>, TransferError> {
    if let Req::Raw(setup) = req {
        let data = if setup.is_in() {
            Vec::new()
        } else {
            vec![0; setup.length as usize]
        };
        return iface.control_raw(*setup, data, T).await;
    }
    let r = req.request();
    let (value, data, len) = match req {
        Req::Detach(t) => (*t, Vec::new(), 0),
        Req::Dnload(n, d) => (*n, d.clone(), 0),
        Req::Upload(n) => (0, Vec::new(), *n),
        Req::GetStatus => (0, Vec::new(), 6),
        Req::GetState => (0, Vec::new(), 1),
        _ => (0, Vec::new(), 0),
    };
    if r.is_in() {
        iface
            .control_in(
                ControlIn {
                    control_type: ControlType::Class,
                    recipient: Recipient::Interface,
                    request: r.code(),
                    value,
                    index: interface,
                    length: len,
                },
                T,
            )
            .await
    } else {
        iface
            .control_out(
                ControlOut {
                    control_type: ControlType::Class,
                    recipient: Recipient::Interface,
                    request: r.code(),
                    value,
                    index: interface,
                    data: &data,
                },
                T,
            )
            .await
            .map(|()| Vec::new())
    }
}

struct Snapshot {
    state: State,
    status: Status,
    valid_image: Option<Vec<u8>>,
    legal: Result<(), String>,
}

/// Runs `steps` against a fresh model of `spec_bytes`, then `end`.
pub fn run_script(
    spec_bytes: &[u8],
    steps: &[Step],
    end: End,
    sabotage: Option<Sabotage>,
) -> Outcome {
    run_checked(
        spec_bytes,
        steps,
        end,
        sabotage,
        Vec::new(),
        FaultPlan::default(),
    )
}

/// An invariant over the model, for [`run_checked`].
pub type Check = (&'static str, Rc<dyn Fn(&Dfu) -> Result<(), String>>);

/// [`run_script`] with invariants checked after every step and faults pinned to sites.
pub fn run_checked(
    spec_bytes: &[u8],
    steps: &[Step],
    end: End,
    sabotage: Option<Sabotage>,
    checks: Vec<Check>,
    faults: FaultPlan,
) -> Outcome {
    let spec = spec(spec_bytes);
    let replies = Rc::new(RefCell::new(Vec::new()));
    let snap: Rc<RefCell<Option<Snapshot>>> = Rc::new(RefCell::new(None));
    let scenario = {
        let (replies, snap, steps) = (replies.clone(), snap.clone(), steps.to_vec());
        move |sim: &mut Sim| {
            let checks = checks.clone();
            let mut dfu = Dfu::from_spec(&spec);
            dfu.sabotage = sabotage;
            let interface = dfu.dfu_spec().interface as u16;
            let dev = sim.attach(dfu);
            let iface = dev.interface();
            let (replies, steps) = (replies.clone(), steps.clone());
            sim.spawn("host", async move {
                for s in &steps {
                    match s {
                        Step::Sleep(ms) => sleep(Duration::from_millis(*ms)).await,
                        Step::Req(r) => {
                            let got = send(&iface, interface, r).await;
                            replies.borrow_mut().push(got);
                        }
                    }
                }
            });
            for (name, check) in checks {
                sim.invariant(name, move |w| check(w.model(dev)));
            }
            let snap = snap.clone();
            sim.invariant("snapshot", move |w| {
                let d = w.model(dev);
                *snap.borrow_mut() = Some(Snapshot {
                    state: d.state(),
                    status: d.status(),
                    valid_image: d.valid_image().map(<[u8]>::to_vec),
                    legal: super::state_machine_legal(d),
                });
                Ok::<(), String>(())
            });
            match end {
                End::Nothing => {}
                End::UsbReset => sim.external("usb_reset", move |w| {
                    w.with_model(dev, |d, cx| d.on_reset(cx))
                }),
                End::PowerCycle => sim.external("power_cycle", move |w| {
                    w.disconnect(dev);
                    w.reconnect(dev);
                }),
            }
        }
    };
    let cfg = |events| RunConfig {
        source: Source::Replay(events),
        faults: faults.clone(),
        ..RunConfig::default()
    };
    let mut r = run(cfg(Vec::new()), &scenario);
    if end != End::Nothing && r.failure.is_none() {
        // The same run again, with the end event placed right after the host's last step.
        let name = if end == End::UsbReset {
            "usb_reset"
        } else {
            "power_cycle"
        };
        replies.borrow_mut().clear();
        let point = r.steps;
        r = run(
            cfg(vec![Event::External {
                name: name.into(),
                point,
            }]),
            &scenario,
        );
        assert!(
            r.events.iter().any(|e| matches!(e, Event::External { .. })),
            "the end event fired"
        );
    }
    let s = snap
        .borrow_mut()
        .take()
        .expect("the snapshot invariant ran");
    let replies = std::mem::take(&mut *replies.borrow_mut());
    Outcome {
        replies,
        state: s.state,
        status: s.status,
        valid_image: s.valid_image,
        marks: r.marks,
        failure: r.failure,
        legal: s.legal,
    }
}
