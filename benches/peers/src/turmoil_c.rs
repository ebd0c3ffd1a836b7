//! Workload C in turmoil: a driver client and a device host exchange 20 requests and replies
//! over simulated UDP; the device stalls (drops, never answers) request 7 once, the driver
//! times out and retries; message latency is drawn by turmoil between 1 and 10 ms.

use crate::{C_STALL_AT, C_TRANSFERS};
use std::cell::Cell;
use std::rc::Rc;
use std::time::Duration;
use turmoil::net::UdpSocket;

const PORT: u16 = 9000;

/// Runs one simulation with `seed`; returns the messages that crossed the network.
pub fn exchange(seed: u64) -> u64 {
    let mut sim = turmoil::Builder::new()
        .rng_seed(seed)
        .min_message_latency(Duration::from_millis(1))
        .max_message_latency(Duration::from_millis(10))
        .simulation_duration(Duration::from_secs(60))
        .build();
    let device_msgs = Rc::new(Cell::new(0u64));
    let dm = device_msgs.clone();
    sim.host("device", move || {
        let dm = dm.clone();
        async move {
            let sock = UdpSocket::bind(("0.0.0.0", PORT)).await?;
            let mut buf = [0u8; 8];
            let mut seen = 0u32;
            loop {
                let (n, from) = sock.recv_from(&mut buf).await?;
                dm.set(dm.get() + 1);
                seen += 1;
                if seen == C_STALL_AT + 1 {
                    continue; // the stall: this request is never answered
                }
                sock.send_to(&buf[..n], from).await?;
            }
        }
    });
    let driver_msgs = Rc::new(Cell::new(0u64));
    let cm = driver_msgs.clone();
    sim.client("driver", async move {
        let sock = UdpSocket::bind(("0.0.0.0", 0)).await?;
        let mut buf = [0u8; 8];
        for i in 0..C_TRANSFERS {
            let mut tries = 0;
            loop {
                tries += 1;
                sock.send_to(&[i as u8, 0xa5], ("device", PORT)).await?;
                match tokio::time::timeout(Duration::from_millis(30), sock.recv_from(&mut buf))
                    .await
                {
                    Ok(r) => {
                        let (n, _) = r?;
                        cm.set(cm.get() + 1);
                        if buf[..n] != [i as u8, 0xa5] {
                            return Err(format!("transfer {i}: wrong reply").into());
                        }
                        break;
                    }
                    Err(_) if tries < 3 => continue,
                    Err(_) => return Err(format!("transfer {i}: no reply").into()),
                }
            }
        }
        Ok(())
    });
    sim.run().expect("the exchange completes");
    device_msgs.get() + driver_msgs.get()
}
