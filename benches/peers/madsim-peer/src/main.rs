//! Workload C in madsim: a driver node and a device node exchange 20 requests and replies over
//! simulated UDP; the device stalls (drops, never answers) request 7 once, the driver times
//! out and retries; madsim draws each packet's latency between 1 and 10 ms (its default).
//!
//! Prints its rows as tab-separated lines for `peers --merge` (see `run.sh`). Needs
//! `RUSTFLAGS="--cfg madsim"`; without it madsim is a thin layer over tokio and this refuses
//! to run.

#[path = "../../src/measure.rs"]
#[allow(dead_code)]
mod measure;

use measure::{throughput, Row};
use std::cell::Cell;
use std::net::SocketAddr;
use std::rc::Rc;
use std::time::Duration;

// The same constants as the main package's lib.rs (this binary shares no crate with it).
const C_TRANSFERS: u32 = 20;
const C_STALL_AT: u32 = 6;
const THROUGHPUT_SEED: u64 = 0x5eed;
const REPS: usize = 5;

#[cfg(madsim)]
fn exchange(seed: u64) -> u64 {
    use madsim::net::UdpSocket;
    let rt = madsim::runtime::Runtime::with_seed_and_config(seed, madsim::Config::default());
    let msgs = Rc::new(Cell::new(0u64));
    let m = msgs.clone();
    let n = rt.block_on(async move {
        let h = madsim::runtime::Handle::current();
        let dev_addr: SocketAddr = "10.0.0.1:9000".parse().expect("address");
        let device = h.create_node().name("device").ip(dev_addr.ip()).build();
        let driver = h
            .create_node()
            .name("driver")
            .ip("10.0.0.2".parse().expect("address"))
            .build();
        device.spawn(async move {
            let sock = UdpSocket::bind(dev_addr).await.expect("bind");
            let mut buf = [0u8; 8];
            let mut seen = 0u32;
            loop {
                let (n, from) = sock.recv_from(&mut buf).await.expect("recv");
                seen += 1;
                if seen == C_STALL_AT + 1 {
                    continue; // the stall: this request is never answered
                }
                sock.send_to(from, &buf[..n]).await.expect("send");
            }
        });
        driver
            .spawn(async move {
                let sock = UdpSocket::bind("0.0.0.0:0").await.expect("bind");
                let mut buf = [0u8; 8];
                let mut msgs = 0u64;
                for i in 0..C_TRANSFERS {
                    let mut tries = 0;
                    loop {
                        tries += 1;
                        sock.send_to(dev_addr, &[i as u8, 0xa5])
                            .await
                            .expect("send");
                        msgs += 1;
                        match madsim::time::timeout(
                            Duration::from_millis(30),
                            sock.recv_from(&mut buf),
                        )
                        .await
                        {
                            Ok(r) => {
                                let (n, _) = r.expect("recv");
                                msgs += 1;
                                assert_eq!(buf[..n], [i as u8, 0xa5], "transfer {i}");
                                break;
                            }
                            Err(_) if tries < 3 => continue,
                            Err(_) => panic!("transfer {i}: no reply"),
                        }
                    }
                }
                msgs
            })
            .await
            .expect("driver")
    });
    m.set(n);
    msgs.get()
}

#[cfg(not(madsim))]
fn exchange(_seed: u64) -> u64 {
    eprintln!("madsim-peer: build with RUSTFLAGS=\"--cfg madsim\" (see run.sh)");
    std::process::exit(2);
}

/// `madsim-peer [--quick] [--rep K]`: all repetitions, or only repetition `K` (the main binary
/// runs one at a time, interleaved with the other tools' repetitions).
fn main() {
    let args: Vec<String> = std::env::args().collect();
    let quick = args.iter().any(|a| a == "--quick");
    let only: Option<usize> = args
        .iter()
        .position(|a| a == "--rep")
        .and_then(|i| args.get(i + 1))
        .and_then(|k| k.parse().ok());
    let n: u64 = if quick { 500 } else { 5_000 };
    let msgs = exchange(THROUGHPUT_SEED);
    let reps: Vec<usize> = match only {
        Some(k) => vec![k],
        None => (0..REPS).collect(),
    };
    let s: Vec<f64> = reps
        .iter()
        .flat_map(|&rep| {
            throughput(1, n, |_| {
                for i in 0..n {
                    exchange((THROUGHPUT_SEED + rep as u64) * 1_000_003 + i);
                }
            })
        })
        .collect();
    let rows = [
        Row::samples(
            "madsim",
            "C",
            "sims/s",
            s.clone(),
            &format!("{n} seeds a rep; {msgs} messages a sim"),
        ),
        Row::samples(
            "madsim",
            "C",
            "messages/s",
            s.iter().map(|x| x * msgs as f64).collect(),
            "",
        ),
    ];
    for r in rows {
        println!("{}", r.to_tsv());
    }
}
