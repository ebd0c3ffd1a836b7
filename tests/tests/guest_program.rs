//! A user's program in the guest: `nusb-dfu` (`tests/guest-programs/nusb-dfu`), a DFU download
//! written against nusb directly, built static for the guest by `Program::from_package` and run
//! unmodified in the lockstep guest against the DFU model of `specs/dfu11-usbd-dfu.json` (a
//! device that powers up in DFU mode). Its exit status is the verdict; its status, stdout and
//! stderr are in the trace and in a failure's text. The trials are ignored unless asked for:
//!
//! ```sh
//! scripts/install-qemu.sh && guest/build.sh && calametra-qemu/qemu/build.sh
//! cargo test -p calametra-tests --test guest_program -- --ignored --test-threads 1
//! ```
//!
//! - `nusb_dfu_download`: the download and its read-back pass, under seeded stalls too (the
//!   program starts the download again after a failed request, as DFU 1.1 requires).
//! - `nusb_dfu_planted_bug`: the same program with `--planted-bug` goes on with the next block
//!   after a failed request; a seeded stall makes the device manifest an image with a hole,
//!   the model's invariant breaks, and the harness minimizes, saves and replays the case
//!   byte-exactly (`finds::only_whole_images`).

use calametra_models::dfu::Dfu;
use calametra_qemu::{Guest, Program};
use std::path::Path;

/// 1 KiB the program downloads (8 blocks of the device's 128-byte wTransferSize).
fn image() -> Vec<u8> {
    calametra_qemu::probes::pattern(1024)
}

/// The static `nusb-dfu` for the guest, built once a process.
fn nusb_dfu() -> Result<Program, String> {
    static BIN: std::sync::OnceLock<Result<Program, String>> = std::sync::OnceLock::new();
    BIN.get_or_init(|| {
        let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
        let target = std::env::var_os("CARGO_TARGET_DIR")
            .map(std::path::PathBuf::from)
            .unwrap_or_else(|| root.join("target"));
        Program::from_package(&root, "calametra-guest-nusb-dfu", "nusb-dfu", &target)
    })
    .clone()
}

/// The DFU-mode model, `nusb-dfu` downloading [`image`], and the invariant that every image
/// the device marks valid is the whole image (its flash starts empty).
fn session(guest: &mut Guest, bug: bool) {
    let program = match nusb_dfu() {
        Ok(p) => p,
        Err(e) => panic!("calametra: building nusb-dfu for the guest: {e}"),
    };
    guest.attach(Dfu::from_spec(guest.spec()));
    let mut program = program
        .args(["1209:0001", "/calametra/image.bin"])
        .file("calametra/image.bin", image());
    if bug {
        program = program.arg("--planted-bug");
    }
    guest.run_program(program);
    let whole = image();
    guest.invariant("only_whole_images", move |d: &Dfu| {
        match d.image_history().iter().find(|v| v.bytes != whole) {
            None => Ok(()),
            Some(v) => Err(format!(
                "the device marked a {}-byte image valid at {} ns that is not the {}-byte image downloaded",
                v.bytes.len(),
                v.at_ns,
                whole.len()
            )),
        }
    });
}

/// The program downloads, manifests and reads back the image; seeded stalls do not break it.
#[calametra::scenario(spec = "../specs/dfu11-usbd-dfu.json", guest = lockstep, schedules = 2, faults = [stall])]
fn nusb_dfu_download(guest: &mut Guest) {
    session(guest, false);
}

/// The planted bug: after a failed request the program skips the block; seeded stalls find it.
#[calametra::scenario(spec = "../specs/dfu11-usbd-dfu.json", guest = lockstep, schedules = 6, faults = [stall], expect = "only_whole_images")]
fn nusb_dfu_planted_bug(guest: &mut Guest) {
    session(guest, true);
}

calametra::main!();
