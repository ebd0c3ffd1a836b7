//! What the tool's tests share: the tool run with its output and exit code, and the driver
//! whose runs make their trace files.
#![allow(dead_code)] // each test file uses its part

use calametra::exec::sleep;
use calametra::usb::{ControlIn, ControlType, Loopback, Recipient};
use calametra::Sim;
use std::time::Duration;

/// A driver task named `actor` reading 4 bytes from a loopback device `reads` times, a random
/// pause (the `data` stream) after each: a small run with transfers, time and draws to trace.
pub fn loopback_reader(sim: &mut Sim, actor: &str, reads: u32) {
    let dev = sim.attach(Loopback::default());
    let iface = dev.interface();
    sim.spawn(actor, async move {
        for _ in 0..reads {
            let _ = iface
                .control_in(
                    ControlIn {
                        control_type: ControlType::Vendor,
                        recipient: Recipient::Device,
                        request: 2,
                        value: 0,
                        index: 0,
                        length: 4,
                    },
                    Duration::from_millis(5),
                )
                .await;
            sleep(Duration::from_micros(calametra::exec::data_below(100))).await;
        }
    });
}

/// Runs `calametra ARGS`: its exit code and its standard output and error together (a panic in
/// them fails the test).
pub fn tool(args: &[&str]) -> (i32, String) {
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_calametra"))
        .args(args)
        .output()
        .expect("run calametra");
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(!text.contains("panicked"), "{text}");
    (out.status.code().unwrap_or(-1), text)
}
