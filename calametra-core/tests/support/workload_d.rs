//! Workload D (the peers' benchmark; `calametra-core/tests/anchors.rs`,
//! `calametra/tests/guided.rs`): a driver writes eight sequence numbers over bulk OUT; a
//! stalled write is recovered with CLEAR_HALT, and when CLEAR_HALT fails too, the driver checks
//! whether the device went away; a replug in that window of a few steps makes it re-send the
//! pending write and then retry it, so the device receives it twice. Finding it takes a stall
//! at a write, a stall at the CLEAR_HALT that follows, and the `replug` external within a few
//! steps after that. Included with `#[path]` by each user, one source.

use calametra_core::exec::{sleep, spawn_daemon, timeout, yield_now};
use calametra_core::usb::{
    ControlIn, ControlOut, ControlType, DevCtx, Device, Recipient, Reply, Setup, TransferError,
};
use calametra_core::{DeviceHandle, Sim};
use std::time::Duration;

/// A device with one bulk OUT endpoint that records the sequence numbers it receives.
#[derive(Default)]
pub struct Pipe {
    /// The first byte of every write received, in order.
    pub received: Vec<u8>,
}

impl Device for Pipe {
    fn name(&self) -> &str {
        "pipe"
    }

    fn control(&mut self, _cx: &mut DevCtx<'_>, setup: &Setup, _data: &[u8]) -> Reply {
        match setup.request {
            0x01 if setup.request_type & 0x60 == 0 => Reply::Ack, // CLEAR_FEATURE(ENDPOINT_HALT)
            0x09 => Reply::Ack,
            0x10 => Reply::Data(vec![1]),
            0x11 => Reply::Data(vec![1, 0]),
            _ => Reply::Stall,
        }
    }

    fn out(&mut self, _cx: &mut DevCtx<'_>, _ep: u8, data: &[u8]) -> Reply {
        self.received.push(data.first().copied().unwrap_or(0));
        Reply::Ack
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        match setup.request {
            0x01 if setup.request_type & 0x60 == 0 => Some("clear_halt"),
            0x09 => Some("set_config"),
            0x10 => Some("get_status"),
            0x11 => Some("get_version"),
            _ => None,
        }
    }
}

const T: Duration = Duration::from_millis(5);

fn vendor_in(request: u8, length: u16) -> ControlIn {
    ControlIn {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request,
        value: 0,
        index: 0,
        length,
    }
}

/// The driver. `extra` adds one unrelated transfer to its start-up (`get_version`).
pub async fn driver(dev: DeviceHandle<Pipe>, extra: bool) {
    let mut iface = dev.interface();
    let config = ControlOut {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request: 0x09,
        value: 1,
        index: 0,
        data: &[],
    };
    let _ = iface.control_out(config, T).await;
    let _ = iface.control_in(vendor_in(0x10, 1), T).await;
    if extra {
        let _ = iface.control_in(vendor_in(0x11, 2), T).await;
    }
    let clear_halt = ControlOut {
        control_type: ControlType::Standard,
        recipient: Recipient::Endpoint,
        request: 0x01,
        value: 0,
        index: 0x01,
        data: &[],
    };
    for seq in 0..8u8 {
        sleep(Duration::from_micros(200)).await;
        let mut tries = 0;
        loop {
            tries += 1;
            if tries > 4 {
                return; // gives up on the device, as a driver does
            }
            let r = timeout(T, iface.bulk_out(0x01, vec![seq; 16])).await;
            match r {
                Ok(Ok(_)) => break,
                Ok(Err(TransferError::Disconnected)) => {
                    sleep(Duration::from_micros(100)).await;
                    iface = dev.interface();
                }
                Ok(Err(TransferError::Stall)) => {
                    match iface.control_out(clear_halt, T).await {
                        Ok(()) => continue,
                        Err(TransferError::Disconnected) => {
                            sleep(Duration::from_micros(100)).await;
                            iface = dev.interface();
                            continue;
                        }
                        Err(_) => {}
                    }
                    // CLEAR_HALT failed too: did the device go away since?
                    yield_now().await;
                    match iface.control_in(vendor_in(0x10, 1), T).await {
                        Err(TransferError::Disconnected) => {
                            // The planted bug: re-sends the pending write on the new interface,
                            // and the loop then retries it once more.
                            iface = dev.interface();
                            let _ = timeout(T, iface.bulk_out(0x01, vec![seq; 16])).await;
                        }
                        _ => {
                            let _ = iface.reset().await;
                        }
                    }
                }
                _ => {}
            }
        }
    }
}

/// Workload D: the driver, a heartbeat (a step every 50 us of virtual time, so a delay moves
/// every later step), the `replug` external and the invariant.
pub fn pipe_scenario(sim: &mut Sim, extra: bool) {
    let dev = sim.attach(Pipe::default());
    sim.spawn("driver", driver(dev, extra));
    spawn_daemon("heartbeat", async {
        loop {
            sleep(Duration::from_micros(50)).await;
        }
        #[allow(unreachable_code)]
        ()
    });
    sim.external("replug", move |w| {
        w.disconnect(dev);
        w.reconnect(dev);
    });
    sim.invariant("each_write_once", move |w| {
        let r = &w.model(dev).received;
        match (1..r.len()).find(|&i| r[..i].contains(&r[i])) {
            Some(i) => Err(format!("write {} received twice", r[i])),
            None => Ok(()),
        }
    });
}
