//! Small test models shared by the end-to-end harness binaries: a status device with a planted
//! bug (its disconnect forgets the cached status) and its driver. Independent of the real models.
//!
//! The crate also compiles the workspace README's examples as doctests ([`ReadmeDoctests`]); the
//! published crates doctest their own READMEs.

use calametra::prelude::*;

pub mod flash_logger;
pub mod streaming;

/// The workspace README's examples, compiled as doctests so they cannot drift from the code.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;

/// The client actions of the status driver, as they read in a minimal run.
pub const OPS: [&str; 6] = [
    "get_status",
    "flip",
    "disconnect",
    "reconnect",
    "modeset",
    "poll",
];

const T: Duration = Duration::from_millis(20);

/// A device whose status register is cached; with `planted_bug`, a disconnect forgets to clear
/// the cache, so a status read while disconnected returns the stale value instead of stalling.
pub struct StatusDevice {
    connected: bool,
    status: u8,
    cache: Option<u8>,
    planted_bug: bool,
}

impl StatusDevice {
    /// A connected device with status 0x5a.
    pub fn new(planted_bug: bool) -> Self {
        StatusDevice {
            connected: true,
            status: 0x5a,
            cache: None,
            planted_bug,
        }
    }

    /// Ground truth: whether the monitor is connected.
    pub fn connected(&self) -> bool {
        self.connected
    }
}

impl Device for StatusDevice {
    fn name(&self) -> &str {
        "status-device"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, _data: &[u8]) -> Reply {
        match setup.request {
            0x87 => {
                if self.connected {
                    self.cache = Some(self.status);
                    Reply::Data(vec![self.status])
                } else if let Some(c) = self.cache {
                    cx.mark("StaleStatusAfterDisconnect");
                    Reply::Data(vec![c])
                } else {
                    Reply::Stall
                }
            }
            0x10 => {
                if self.connected && cx.transition("monitor", "connected", "disconnected") {
                    self.connected = false;
                    if !self.planted_bug {
                        self.cache = None;
                    }
                }
                Reply::Ack
            }
            0x11 => {
                if !self.connected && cx.transition("monitor", "disconnected", "connected") {
                    self.connected = true;
                }
                Reply::Ack
            }
            0x12..=0x14 => Reply::Ack,
            _ => {
                cx.model_gap(&format!("request {:#04x}", setup.request), "any");
                Reply::Stall
            }
        }
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        Some(match setup.request {
            0x87 => "get_status",
            0x10 => "disconnect",
            0x11 => "reconnect",
            0x12 => "flip",
            0x13 => "modeset",
            0x14 => "poll",
            _ => return None,
        })
    }
}

/// What the driver believes.
#[derive(Clone, Default)]
pub struct Belief {
    /// Whether the driver believes the monitor is connected.
    pub connected: Rc<Cell<bool>>,
}

/// The status driver: performs up to `max_ops` client actions.
pub async fn status_driver(iface: Interface, belief: Belief, max_ops: usize) {
    for _ in 0..max_ops {
        let Some(op) = client_choose(&OPS) else {
            return;
        };
        let out = |request| ControlOut {
            control_type: ControlType::Vendor,
            recipient: Recipient::Device,
            request,
            value: 0,
            index: 0,
            data: &[],
        };
        match OPS[op] {
            "get_status" => {
                let r = iface
                    .control_in(
                        ControlIn {
                            control_type: ControlType::Vendor,
                            recipient: Recipient::Device,
                            request: 0x87,
                            value: 0,
                            index: 0,
                            length: 1,
                        },
                        T,
                    )
                    .await;
                belief.connected.set(r.is_ok());
            }
            "disconnect" => {
                belief.connected.set(false);
                let _ = iface.control_out(out(0x10), T).await;
            }
            "reconnect" => {
                let _ = iface.control_out(out(0x11), T).await;
            }
            "flip" => {
                let _ = iface.control_out(out(0x12), T).await;
            }
            "modeset" => {
                let _ = iface.control_out(out(0x13), T).await;
            }
            _ => {
                let _ = iface.control_out(out(0x14), T).await;
            }
        }
    }
}

/// The status scenario: the driver against the device, and the invariant that judges them.
pub fn status_scenario(sim: &mut Sim, planted_bug: bool, max_ops: usize) {
    let dev = sim.attach(StatusDevice::new(planted_bug));
    let belief = Belief::default();
    sim.spawn(
        "driver",
        status_driver(dev.interface(), belief.clone(), max_ops),
    );
    sim.invariant("belief_matches_connection", move |w| {
        if belief.connected.get() && !w.model(dev).connected() {
            Err(
                "driver believes the monitor is connected; the device says disconnected"
                    .to_string(),
            )
        } else {
            Ok(())
        }
    });
}

/// The shipped models' example scenarios, for the soak.
pub fn model_scenarios() -> Vec<(&'static str, fn(&mut Sim))> {
    vec![
        ("trigger6", calametra_example_trigger6::scenario_fixed),
        ("dfu-updater", calametra_example_dfu_updater::scenario),
    ]
}
