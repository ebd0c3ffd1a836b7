//! `t6-drive`: runs the example driver on the first Trigger 6 display function it finds
//! (0711:5600-561f, the JCD543 is 0711:5601), through nusb over Linux usbfs (no libusb): probe,
//! EDID, modeset to 1920x1080@60, the colour bars uploaded and flipped with a fence, then the
//! driver's watch loop. It prints one summary line and exits 0 when the driver succeeded.
//!
//! `--output 1` drives the dock's second output instead of the first (its timing table,
//! monitor, modeset and FLIP_SECONDARY).
//!
//! `--time-scale N` multiplies every timeout and sleep of the driver by N
//! ([`hardware::NusbInterface::with_time_scale`]): the guest under QEMU passes it, because its
//! instruction-count clock runs ahead while the host answers a transfer.
//!
//! On a real dock it needs write access to the device node under `/dev/bus/usb`. In the
//! Calametra guest it runs statically linked (`calametra-qemu/tests/trigger6.rs` builds it)
//! against the Trigger 6 model served over usbredir:
//!
//! ```text
//! RUSTFLAGS="-C target-feature=+crt-static" cargo build --release \
//!     -p calametra-example-trigger6 --features hardware --bin t6-drive \
//!     --target x86_64-unknown-linux-gnu
//! ```
//!
//! Output: `T6DRIVE ok ending=.. frames_shown=.. fence_done=.. vram_mib=.. edid=.. mode=..
//! frame_fnv1a64=0x.. time_scale=.. millis=..` (or `T6DRIVE error=.. phase=..`), then the
//! driver's beliefs in the shape the model's invariants read (`T6DRIVE-VIEW`, see
//! [`view_line`]), so a test outside the guest can judge them against the model's ground truth.

use calametra_example_trigger6::driver::{Beliefs, Driver, HEIGHT, WIDTH};
use calametra_example_trigger6::frame::{colour_bars_nv12, fnv1a64};
use calametra_example_trigger6::hardware;
use calametra_example_trigger6::protocol::Timing;
use std::process::ExitCode;

/// The EDID's manufacturer (three letters) and product code, as `HPN3725`.
fn monitor(edid: &[u8]) -> String {
    if edid.len() < 12 {
        return "none".into();
    }
    let id = u16::from_be_bytes([edid[8], edid[9]]);
    let letter = |shift: u16| (b'@' + ((id >> shift) & 0x1f) as u8) as char;
    let product = u16::from_le_bytes([edid[10], edid[11]]);
    format!("{}{}{}{product:04X}", letter(10), letter(5), letter(0))
}

/// The beliefs as `T6DRIVE-VIEW key=value ...`, numbers in decimal: `connection=C0,C1`
/// (`Unknown`, `Disconnected`, `Connected`), `hotplug_seen=N0,N1`, `vram_size=N|none`,
/// `mode0=`/`mode1=` (the 32-byte record in hex, or `none`), `fence_done=N`,
/// `writes=ADDR+LEN;...` and `flips=OUTPUT:FENCE:FORMAT:Y:UV:YPITCH:UVPITCH:W:H:FNV;...` (FNV
/// is FNV-1a 64 of the pixels the flip carried, in hex).
fn view_line(b: &Beliefs) -> String {
    let v = b;
    let hex = |r: &Option<[u8; 32]>| match r {
        Some(r) => r.iter().map(|x| format!("{x:02x}")).collect(),
        None => "none".to_string(),
    };
    let writes: Vec<String> = v
        .writes
        .iter()
        .map(|w| format!("{}+{}", w.addr, w.len))
        .collect();
    let flips: Vec<String> = v
        .flips
        .iter()
        .map(|f| {
            format!(
                "{}:{}:{}:{}:{}:{}:{}:{}:{}:{:#018x}",
                f.output,
                f.fence,
                f.format,
                f.y_offset,
                f.uv_offset,
                f.y_pitch,
                f.uv_pitch,
                f.width,
                f.height,
                fnv1a64(&[&f.pixels])
            )
        })
        .collect();
    format!(
        "T6DRIVE-VIEW connection={:?},{:?} hotplug_seen={},{} vram_size={} mode0={} mode1={} fence_done={} writes={} flips={}",
        v.connection[0],
        v.connection[1],
        v.hotplug_seen[0],
        v.hotplug_seen[1],
        v.vram_size.map_or("none".into(), |n| n.to_string()),
        hex(&v.modes[0]),
        hex(&v.modes[1]),
        v.fence_done,
        writes.join(";"),
        flips.join(";")
    )
}

fn mode(record: Option<[u8; 32]>) -> String {
    match record.as_ref().and_then(|r| Timing::parse(r)) {
        Some(t) => format!("{}x{}@{}", t.hactive, t.vactive, t.refresh_hz),
        None => "none".into(),
    }
}

#[allow(
    clippy::disallowed_methods,
    reason = "a real program on a real bus: it times itself on the wall clock"
)]
fn main() -> ExitCode {
    let started = std::time::Instant::now();
    let args: Vec<String> = std::env::args().skip(1).collect();
    let usage = || {
        eprintln!("usage: t6-drive [--time-scale N] [--output 0|1]");
        ExitCode::from(2)
    };
    let (mut time_scale, mut output) = (1u32, 0u16);
    let mut it = args.iter();
    while let Some(flag) = it.next() {
        let Some(n) = it.next() else {
            return usage();
        };
        match flag.as_str() {
            "--time-scale" => match n.parse::<u32>() {
                Ok(n) if n >= 1 => time_scale = n,
                _ => {
                    eprintln!("t6-drive: --time-scale takes a whole number >= 1, not {n:?}");
                    return ExitCode::from(2);
                }
            },
            "--output" => match n.parse::<u16>() {
                Ok(n) if n <= 1 => output = n,
                _ => {
                    eprintln!("t6-drive: --output takes 0 or 1, not {n:?}");
                    return ExitCode::from(2);
                }
            },
            _ => return usage(),
        }
    }
    let iface = match hardware::open_dock() {
        Ok(i) => i.with_time_scale(time_scale),
        Err(e) => {
            println!("T6DRIVE error={e:?} phase=Open");
            return ExitCode::FAILURE;
        }
    };
    let driver = Driver::new(iface).on_output(output);
    let beliefs = driver.beliefs();
    let result = hardware::run_driver(driver);
    let b = beliefs.borrow();
    let view = view_line(&b);
    let code = match result {
        Ok(summary) => {
            // What the driver uploaded: the picture the dock must now show.
            let frame = colour_bars_nv12(WIDTH as usize, HEIGHT as usize);
            println!(
                "T6DRIVE ok ending={:?} frames_shown={} fence_done={} vram_mib={} edid={} mode={} frame_fnv1a64={:#018x} time_scale={time_scale} millis={}",
                summary.ending,
                summary.frames_shown,
                b.fence_done,
                b.vram_size.unwrap_or(0) >> 20,
                b.edid.as_deref().map_or_else(|| "none".into(), monitor),
                mode(b.modes[output as usize]),
                fnv1a64(&[&frame]),
                started.elapsed().as_millis()
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!(
                "T6DRIVE error={:?} phase={:?} fence_done={} millis={}",
                e.to_string(),
                b.phase,
                b.fence_done,
                started.elapsed().as_millis()
            );
            ExitCode::FAILURE
        }
    };
    println!("{view}");
    code
}
