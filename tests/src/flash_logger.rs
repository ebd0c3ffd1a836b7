//! A flash logger, written as a downstream user would write one against the public API: a
//! driver appends numbered log records to a flash chip over bulk OUT. A stalled write is
//! recovered with CLEAR_HALT; when CLEAR_HALT fails too, the driver asks whether the logger
//! went away, and after a replug it re-sends the pending record on the new interface, and its
//! retry loop then sends it once more: the record is in the flash twice (`each_record_once`).
//! Finding it takes a stalled write, a failed CLEAR_HALT right after it and a replug within a
//! few steps of that: a bug for guided sweeps (`src/bin/flash_logger.rs` is its harness
//! binary; `tests/tests/guided_default.rs` sweeps it).

use calametra::prelude::*;
use std::time::Duration;

/// The flash: the numbers of the records written, in order.
#[derive(Default)]
pub struct Flash {
    /// The records written, in order.
    pub records: Vec<u8>,
}

impl Device for Flash {
    fn name(&self) -> &str {
        "flash-logger"
    }

    fn control(&mut self, _cx: &mut DevCtx<'_>, setup: &Setup, _data: &[u8]) -> Reply {
        match setup.request {
            0x01 if setup.request_type & 0x60 == 0 => Reply::Ack, // CLEAR_FEATURE(ENDPOINT_HALT)
            0x09 => Reply::Ack,                                   // unlock the flash
            0x10 => Reply::Data(vec![1]),                         // status: ready
            _ => Reply::Stall,
        }
    }

    fn out(&mut self, _cx: &mut DevCtx<'_>, _ep: u8, data: &[u8]) -> Reply {
        // A write cut to nothing (`short(0)`) writes nothing: the chip records what arrives.
        if let Some(&record) = data.first() {
            self.records.push(record);
        }
        Reply::Ack
    }

    fn request_name(&self, setup: &Setup) -> Option<&str> {
        match setup.request {
            0x01 if setup.request_type & 0x60 == 0 => Some("clear_halt"),
            0x09 => Some("unlock"),
            0x10 => Some("get_status"),
            _ => None,
        }
    }
}

const T: Duration = Duration::from_millis(5);

fn status() -> ControlIn {
    ControlIn {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request: 0x10,
        value: 0,
        index: 0,
        length: 1,
    }
}

/// The logger's driver: unlock, then eight records.
async fn logger(dev: DeviceHandle<Flash>) {
    let mut iface = dev.interface();
    let unlock = ControlOut {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request: 0x09,
        value: 1,
        index: 0,
        data: &[],
    };
    let _ = iface.control_out(unlock, T).await;
    let _ = iface.control_in(status(), T).await;
    let clear_halt = ControlOut {
        control_type: ControlType::Standard,
        recipient: Recipient::Endpoint,
        request: 0x01,
        value: 0,
        index: 0x01,
        data: &[],
    };
    for record in 0..8u8 {
        sleep(Duration::from_micros(200)).await;
        let mut tries = 0;
        loop {
            tries += 1;
            if tries > 4 {
                return; // the logger gives up on the chip
            }
            match timeout(T, iface.bulk_out(0x01, vec![record; 16])).await {
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
                    // CLEAR_HALT failed too: did the logger go away meanwhile?
                    yield_now().await;
                    match iface.control_in(status(), T).await {
                        Err(TransferError::Disconnected) => {
                            // The bug: the pending record is re-sent on the new interface, and
                            // the loop sends it again.
                            iface = dev.interface();
                            let _ = timeout(T, iface.bulk_out(0x01, vec![record; 16])).await;
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

/// The flash logger: the driver, a housekeeping tick every 50 us of virtual time, the `replug`
/// external and the invariant that each record is in the flash once.
pub fn scenario(sim: &mut Sim) {
    let dev = sim.attach(Flash::default());
    sim.spawn("logger", logger(dev));
    spawn_daemon("tick", async {
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
    sim.invariant("each_record_once", move |w| {
        let r = &w.model(dev).records;
        match (1..r.len()).find(|&i| r[..i].contains(&r[i])) {
            Some(i) => Err(format!("record {} is in the flash twice", r[i])),
            None => Ok(()),
        }
    });
}
