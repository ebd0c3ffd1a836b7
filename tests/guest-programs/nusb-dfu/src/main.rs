//! `nusb-dfu VID:PID IMAGE [--planted-bug]`: downloads IMAGE to a DFU 1.1 device in DFU mode
//! over nusb 0.2, then uploads it back and compares, as a user's flashing tool would. Written
//! against nusb directly, with no Calametra in it: Calametra builds it static for the guest
//! (`RUSTFLAGS="-C target-feature=+crt-static" cargo build --release -p
//! calametra-guest-nusb-dfu --target x86_64-unknown-linux-gnu`) and runs it there unmodified.
//!
//! A failed DFU_GETSTATUS is asked again. Any other failed request (a STALL, a timeout) puts
//! the device in dfuERROR, or leaves it where it was; the tool clears the error
//! (DFU_CLRSTATUS) and, since dfuIDLE starts a new download, starts the download again from
//! block 0, up to 8 times. With `--planted-bug` it goes on with
//! the next block instead: the device then manifests an image with a hole, which the guest
//! scenario's invariant over the model catches under seeded stalls.
//!
//! Exit status: 0 the device holds IMAGE; 1 a failure (printed on stderr); 2 usage.

use nusb::transfer::{ControlIn, ControlOut, ControlType, Recipient};
use nusb::MaybeFuture;
use std::process::ExitCode;
use std::time::Duration;

const DNLOAD: u8 = 1;
const UPLOAD: u8 = 2;
const GETSTATUS: u8 = 3;
const CLRSTATUS: u8 = 4;
const DFU_IDLE: u8 = 2;
const DNBUSY: u8 = 4;
const DNLOAD_IDLE: u8 = 5;
const MANIFEST_SYNC: u8 = 6;
const MANIFEST: u8 = 7;
const DFU_ERROR: u8 = 10;
const TIMEOUT: Duration = Duration::from_millis(500);

/// The device's DFU interface (0), opened.
struct Dfu {
    iface: nusb::Interface,
    transfer_size: usize,
}

impl Dfu {
    fn out(&self, request: u8, value: u16, data: &[u8]) -> Result<(), String> {
        self.iface
            .control_out(
                ControlOut {
                    control_type: ControlType::Class,
                    recipient: Recipient::Interface,
                    request,
                    value,
                    index: 0,
                    data,
                },
                TIMEOUT,
            )
            .wait()
            .map_err(|e| format!("request {request} (wValue {value}): {e}"))
    }

    fn input(&self, request: u8, value: u16, length: u16) -> Result<Vec<u8>, String> {
        self.iface
            .control_in(
                ControlIn {
                    control_type: ControlType::Class,
                    recipient: Recipient::Interface,
                    request,
                    value,
                    index: 0,
                    length,
                },
                TIMEOUT,
            )
            .wait()
            .map_err(|e| format!("request {request} (wValue {value}): {e}"))
    }

    /// DFU_GETSTATUS: (bStatus, bState), after waiting out bwPollTimeout.
    #[allow(
        clippy::disallowed_methods,
        reason = "a real program on a real bus (the guest's, in lockstep): it waits on its own clock"
    )]
    fn status(&self) -> Result<(u8, u8), String> {
        let s = self.input(GETSTATUS, 0, 6)?;
        if s.len() < 6 {
            return Err(format!("GETSTATUS answered {} bytes, not 6", s.len()));
        }
        let poll = u32::from_le_bytes([s[1], s[2], s[3], 0]);
        std::thread::sleep(Duration::from_millis(u64::from(poll)));
        Ok((s[0], s[4]))
    }

    /// Polls until the device leaves a busy state; the state it settles in. A GETSTATUS that
    /// fails is asked again (up to 4 times in a row): it changes nothing on the device.
    fn settle(&self) -> Result<u8, String> {
        let mut failed = 0;
        loop {
            let (status, state) = match self.status() {
                Ok(s) => {
                    failed = 0;
                    s
                }
                Err(e) if failed < 4 => {
                    failed += 1;
                    eprintln!("nusb-dfu: {e}; asking again");
                    continue;
                }
                Err(e) => return Err(e),
            };
            match state {
                DNBUSY | MANIFEST_SYNC | MANIFEST => continue,
                DFU_ERROR => return Err(format!("the device is in dfuERROR (status {status})")),
                s => return Ok(s),
            }
        }
    }

    /// Back to dfuIDLE after a failed request: clears dfuERROR, aborts nothing else.
    fn recover(&self) -> Result<(), String> {
        for _ in 0..8 {
            match self.status() {
                Ok((_, DFU_IDLE)) => return Ok(()),
                Ok((_, DFU_ERROR)) | Ok(_) => {
                    let _ = self.out(CLRSTATUS, 0, &[]);
                }
                Err(_) => {}
            }
        }
        Err("the device did not return to dfuIDLE".into())
    }

    /// Downloads `image` from block 0 and manifests it.
    fn download(&self, image: &[u8], bug: bool) -> Result<(), String> {
        let blocks: Vec<&[u8]> = image.chunks(self.transfer_size).collect();
        let mut attempt = 0;
        'again: loop {
            attempt += 1;
            if attempt > 8 {
                return Err("gave up after 8 attempts".into());
            }
            let mut n = 0;
            while n < blocks.len() {
                let sent = self
                    .out(DNLOAD, n as u16, blocks[n])
                    .and_then(|()| self.settle());
                match sent {
                    Ok(DNLOAD_IDLE) => n += 1,
                    Ok(s) => return Err(format!("block {n}: the device settled in state {s}")),
                    Err(e) => {
                        eprintln!("nusb-dfu: block {n}: {e}; recovering");
                        self.recover()?;
                        if bug {
                            // The planted bug: the device is in dfuIDLE, where a DNLOAD
                            // begins a new download, yet the tool goes on with the next block.
                            n += 1;
                            continue;
                        }
                        continue 'again;
                    }
                }
            }
            let end = self
                .out(DNLOAD, blocks.len() as u16, &[])
                .and_then(|()| self.settle());
            match end {
                Ok(DFU_IDLE) => return Ok(()),
                Ok(s) => return Err(format!("manifestation ended in state {s}")),
                Err(e) => {
                    eprintln!("nusb-dfu: manifestation: {e}; recovering");
                    self.recover()?;
                    continue 'again;
                }
            }
        }
    }

    /// Uploads up to `len` bytes from block 0.
    fn upload(&self, len: usize) -> Result<Vec<u8>, String> {
        let mut out = Vec::new();
        let mut block = 0u16;
        while out.len() < len {
            let part = self.input(UPLOAD, block, self.transfer_size as u16)?;
            let short = part.len() < self.transfer_size;
            out.extend_from_slice(&part);
            block += 1;
            if short {
                break;
            }
        }
        // An upload ends with a short packet; abort it either way (back to dfuIDLE).
        let _ = self.out(6, 0, &[]);
        Ok(out)
    }
}

fn run(vid: u16, pid: u16, image: &[u8], bug: bool) -> Result<(), String> {
    let info = nusb::list_devices()
        .wait()
        .map_err(|e| format!("listing USB devices: {e}"))?
        .find(|d| d.vendor_id() == vid && d.product_id() == pid)
        .ok_or_else(|| format!("no device {vid:04x}:{pid:04x}"))?;
    let device = info.open().wait().map_err(|e| format!("opening: {e}"))?;
    let iface = device
        .claim_interface(0)
        .wait()
        .map_err(|e| format!("claiming interface 0: {e}"))?;
    // wTransferSize from the DFU functional descriptor (type 0x21) of the configuration.
    let config = device
        .active_configuration()
        .map_err(|e| format!("the active configuration: {e}"))?;
    let functional = config
        .as_bytes()
        .windows(9)
        .find(|w| w[0] == 9 && w[1] == 0x21)
        .ok_or("no DFU functional descriptor")?;
    let transfer_size = usize::from(u16::from_le_bytes([functional[5], functional[6]]));
    let dfu = Dfu {
        iface,
        transfer_size,
    };
    dfu.recover()?;
    dfu.download(image, bug)?;
    println!(
        "downloaded {} bytes in {} blocks of {transfer_size}",
        image.len(),
        image.len().div_ceil(transfer_size)
    );
    let back = dfu.upload(image.len())?;
    if back != image {
        let at = back.iter().zip(image).position(|(a, b)| a != b);
        return Err(format!(
            "the device holds {} bytes that differ from the image (first at {at:?})",
            back.len()
        ));
    }
    println!("verified: the device holds the image");
    Ok(())
}

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (ids, path, bug) = match args.as_slice() {
        [ids, path] => (ids, path, false),
        [ids, path, flag] if flag == "--planted-bug" => (ids, path, true),
        _ => {
            eprintln!("usage: nusb-dfu VID:PID IMAGE [--planted-bug]");
            return ExitCode::from(2);
        }
    };
    let parsed = ids.split_once(':').and_then(|(v, p)| {
        Some((
            u16::from_str_radix(v, 16).ok()?,
            u16::from_str_radix(p, 16).ok()?,
        ))
    });
    let Some((vid, pid)) = parsed else {
        eprintln!("nusb-dfu: `{ids}`: expected VID:PID in hex");
        return ExitCode::from(2);
    };
    let image = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) => {
            eprintln!("nusb-dfu: {path}: {e}");
            return ExitCode::from(2);
        }
    };
    match run(vid, pid, &image, bug) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("nusb-dfu: {e}");
            ExitCode::from(1)
        }
    }
}
