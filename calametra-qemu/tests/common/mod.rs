//! Shared pieces of the QEMU end-to-end tests: finding QEMU and the guest (or saying clearly why
//! a test is skipped), and `Gadget`, a small high-speed vendor device with realistic
//! descriptors written for these tests.
#![allow(dead_code)]

use calametra_core::usb::{DevCtx, Device, Reply, Setup};
use calametra_qemu::lockstep::LockstepConfig;
use calametra_qemu::{GuestImage, QemuConfig};
use std::path::PathBuf;
use std::process::Command;

/// The ignore reason every QEMU test carries.
pub const NEEDS_QEMU: &str = "needs QEMU and the guest: run scripts/install-qemu.sh && guest/build.sh, then cargo test -p calametra-qemu -- --ignored";

/// The workspace's target directory, where `guest/build.sh` caches the guest.
pub fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target")
}

/// QEMU and the guest. These tests run only when asked for (`--ignored`), so a missing QEMU or
/// guest fails the test with what to run, rather than passing it in silence; set
/// `CALAMETRA_QEMU_OPTIONAL=1` to skip instead (printed as SKIP).
pub fn qemu_or_skip(test: &str) -> Option<QemuConfig> {
    let qemu = std::env::var("CALAMETRA_QEMU").unwrap_or_else(|_| "qemu-system-x86_64".into());
    let ok = Command::new(&qemu)
        .arg("--version")
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    if !ok {
        return skip(
            test,
            &format!("`{qemu}` is not runnable; run scripts/install-qemu.sh"),
        );
    }
    match GuestImage::find(&target_dir()) {
        Ok(g) => {
            let mut c = QemuConfig::new(g);
            c.qemu = qemu.into();
            Some(c)
        }
        Err(e) => skip(test, &format!("{e}; run guest/build.sh")),
    }
}

/// The lockstep QEMU and the guest built under the target directory (runs start from the
/// guest snapshot); like [`qemu_or_skip`], a test asked for without them fails saying what to
/// run, or is skipped with `CALAMETRA_QEMU_OPTIONAL=1`.
pub fn lockstep_or_skip(test: &str) -> Option<LockstepConfig> {
    match LockstepConfig::find(&target_dir()) {
        Ok(c) => Some(c),
        Err(e) => skip(
            test,
            &format!("{e}; run guest/build.sh and calametra-qemu/qemu/build.sh"),
        ),
    }
}

fn skip<T>(test: &str, why: &str) -> Option<T> {
    if std::env::var_os("CALAMETRA_QEMU_OPTIONAL").is_some() {
        eprintln!("SKIP {test}: {why}");
        return None;
    }
    panic!("{test} needs QEMU and the guest: {why}");
}

/// pid.codes' test vendor and product.
pub const VID: u16 = 0x1209;
/// Product id.
pub const PID: u16 = 0x0001;

/// The device descriptor: USB 2.0, vendor-specific at interface level, 64-byte EP0.
pub const DEVICE: [u8; 18] = [
    18, 1, 0x00, 0x02, 0x00, 0x00, 0x00, 64, 0x09, 0x12, 0x01, 0x00, 0x23, 0x01, 1, 2, 3, 1,
];

/// Configuration 1: one vendor interface with bulk OUT 0x01 and IN 0x81 (512 bytes) and an
/// interrupt IN 0x82 (8 bytes, every 4 microframes... 2^(4-1)).
pub const CONFIG: [u8; 39] = [
    9, 2, 39, 0, 1, 1, 4, 0x80, 50, // configuration: 1 interface, value 1, iConfiguration 4
    9, 4, 0, 0, 3, 0xff, 0x00, 0x00, 5, // interface 0: 3 endpoints, vendor, iInterface 5
    7, 5, 0x01, 0x02, 0x00, 0x02, 0, // bulk OUT 512
    7, 5, 0x81, 0x02, 0x00, 0x02, 0, // bulk IN 512
    7, 5, 0x82, 0x03, 0x08, 0x00, 4, // interrupt IN 8, bInterval 4
];

/// The device qualifier (what it would be at full speed).
pub const QUALIFIER: [u8; 10] = [10, 6, 0x00, 0x02, 0x00, 0x00, 0x00, 64, 1, 0];

const STRINGS: [&str; 5] = [
    "Calametra",
    "Calametra Test Gadget",
    "CAL-0001",
    "Loopback",
    "Vendor loopback",
];

fn string_descriptor(s: &str) -> Vec<u8> {
    let mut d = vec![0, 3];
    for u in s.encode_utf16() {
        d.extend_from_slice(&u.to_le_bytes());
    }
    d[0] = d.len() as u8;
    d
}

/// A loopback gadget with complete chapter 9 answers, so `lsusb -v` asks it nothing it cannot
/// answer. Bulk OUT on 0x01 queues a payload that bulk IN on 0x81 returns; 0x82 NAKs.
#[derive(Default)]
pub struct Gadget {
    /// `bConfigurationValue` set by the host.
    pub configuration: u8,
    queue: std::collections::VecDeque<Vec<u8>>,
    /// Requests served, in order (`type/request/value`).
    pub log: Vec<String>,
}

impl Device for Gadget {
    fn name(&self) -> &str {
        "gadget"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, s: &Setup, data: &[u8]) -> Reply {
        let _ = data;
        self.log.push(format!(
            "{:02x}/{:02x}/{:04x}",
            s.request_type, s.request, s.value
        ));
        match (s.request_type, s.request) {
            (0x80, 6) => {
                let (ty, index) = ((s.value >> 8) as u8, (s.value & 0xff) as usize);
                let d = match ty {
                    1 => DEVICE.to_vec(),
                    2 if index == 0 => CONFIG.to_vec(),
                    3 if index == 0 => vec![4, 3, 0x09, 0x04],
                    3 if index <= STRINGS.len() => string_descriptor(STRINGS[index - 1]),
                    6 => QUALIFIER.to_vec(),
                    7 if index == 0 => {
                        // Other-speed configuration: the same at full speed, 64-byte bulk.
                        let mut c = CONFIG.to_vec();
                        c[1] = 7;
                        c[22] = 64;
                        c[23] = 0;
                        c[29] = 64;
                        c[30] = 0;
                        c
                    }
                    // No debug port (10), no BOS (15): a USB 2.0 device stalls these.
                    10 | 15 => return Reply::Stall,
                    _ => {
                        cx.model_gap(&format!("get_descriptor {:04x}", s.value), "gadget");
                        return Reply::Stall;
                    }
                };
                Reply::Data(d)
            }
            (0x00, 9) => {
                let to = s.value as u8;
                if to > 1 {
                    return Reply::Stall;
                }
                let from = if self.configuration == 0 {
                    "addressed"
                } else {
                    "configured"
                };
                let next = if to == 0 { "addressed" } else { "configured" };
                if from != next && !cx.transition("usb", from, next) {
                    return Reply::Stall;
                }
                self.configuration = to;
                Reply::Ack
            }
            (0x80, 8) => Reply::Data(vec![self.configuration]),
            (0x80, 0) | (0x81, 0) | (0x82, 0) => Reply::Data(vec![0, 0]),
            (0x81, 10) => Reply::Data(vec![0]),
            (0x01, 11) if s.value == 0 => Reply::Ack,
            (0x02, 1) | (0x02, 3) => Reply::Ack, // clear/set endpoint halt
            _ => {
                cx.model_gap(
                    &format!("control {:02x}/{:02x}", s.request_type, s.request),
                    "gadget",
                );
                Reply::Stall
            }
        }
    }

    fn out(&mut self, _cx: &mut DevCtx<'_>, ep: u8, data: &[u8]) -> Reply {
        if ep != 0x01 {
            return Reply::Stall;
        }
        self.queue.push_back(data.to_vec());
        Reply::Ack
    }

    fn poll_in(&mut self, _cx: &mut DevCtx<'_>, ep: u8, max_len: usize) -> Reply {
        match ep {
            0x81 => match self.queue.pop_front() {
                Some(mut d) => {
                    d.truncate(max_len);
                    Reply::Data(d)
                }
                None => Reply::Nak,
            },
            0x82 => Reply::Nak,
            _ => Reply::Stall,
        }
    }

    fn on_reset(&mut self, _cx: &mut DevCtx<'_>) {
        self.configuration = 0;
    }
}

/// Writes a run's trace to `target/calametra/traces/qemu/<test>.jsonl` and says where.
pub fn keep_trace(test: &str, run: &calametra_qemu::GuestRun) {
    keep_lockstep_trace("qemu", test, run);
}

/// Writes a guest run's trace to `target/calametra/traces/<dir>/<test>.jsonl` and says where.
pub fn keep_lockstep_trace(dir: &str, test: &str, run: &calametra_qemu::GuestRun) {
    report_trace(
        &trace_path(dir, test),
        run.write_trace(&trace_path(dir, test)),
    );
}

fn trace_path(dir: &str, test: &str) -> PathBuf {
    target_dir()
        .join("calametra/traces")
        .join(dir)
        .join(format!("{test}.jsonl"))
}

fn report_trace(path: &std::path::Path, written: std::io::Result<()>) {
    match written {
        Ok(()) => eprintln!("trace: {}", path.display()),
        Err(e) => eprintln!("trace not written to {}: {e}", path.display()),
    }
}
