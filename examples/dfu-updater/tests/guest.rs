//! Guest scenarios: the same `#[calametra::scenario]`, with `guest = lockstep`. Each trial boots
//! Debian's Linux 6.1 under the QEMU Calametra builds (`calametra-qemu/qemu/`), serving the DFU
//! model to the guest's xHCI controller in lockstep with the guest's clock; the guest runs the
//! real `lsusb` and `dfu-util`. The trials have the names of in-process trials (`baseline`,
//! `seed::0x..`, `finds::<invariant>`, `regression::<id>`, `site::<site>::<fault>` by name) and
//! are ignored unless asked for:
//!
//! ```sh
//! scripts/install-qemu.sh && guest/build.sh && calametra-qemu/qemu/build.sh
//! cargo test -p calametra-example-dfu-updater --test guest -- --ignored
//! ```

use calametra_models::dfu::{marks, never_bricked, seal_image, state_machine_legal, Dfu, Sabotage};
use calametra_qemu::probes::{dfu_detach_and_download, pattern};
use calametra_qemu::Guest;

/// 64 KiB the model accepts: a fixed pattern sealed with its CRC-32 trailer.
fn image() -> Vec<u8> {
    seal_image(&pattern(64 * 1024 - 4))
}

/// The guest enumerates the model, `lsusb -v` reads it, `dfu-util -e` detaches it (it
/// re-enumerates in DFU mode) and `dfu-util -D` downloads 64 KiB.
fn dfu_util_session(guest: &mut Guest, sabotage: Option<Sabotage>) {
    let mut model = Dfu::from_spec(guest.spec());
    model.sabotage = sabotage;
    let factory = model.dfu_spec().factory_image.clone();
    guest.attach(model);
    guest.reenumerate_on(marks::WILL_DETACH_TO_DFU);
    guest.reenumerate_on(marks::WILL_DETACH_TO_APP);
    guest.run_script(
        &dfu_detach_and_download("1209:0001"),
        vec![("calametra/image.bin".into(), image())],
    );
    guest.invariant("state_machine_legal", |d: &Dfu| state_machine_legal(d));
    let new = image();
    guest.invariant("never_bricked", move |d: &Dfu| {
        never_bricked(d, &factory, &new)
    });
}

/// dfu-util against the manifestation-tolerant model: the baseline twice (same hash, console
/// included), and seeds that delay the model's answers (each delay reaches the guest on its
/// clock: the transfer completes that much later).
#[calametra::scenario(spec = "../../specs/dfu11-tolerant.json", guest = lockstep, schedules = 2, faults = [delay])]
fn dfu_util_download(guest: &mut Guest) {
    dfu_util_session(guest, None);
}

/// A planted bug in the model (blocks programmed over the running image): the guest's ordinary
/// download breaks `never_bricked`, on the same frame every run; the case is minimized, saved
/// and replayed from its file byte-exactly.
#[calametra::scenario(spec = "../../specs/dfu11-tolerant.json", guest = lockstep, schedules = 1, expect = "never_bricked")]
fn dfu_util_in_place_write(guest: &mut Guest) {
    dfu_util_session(guest, Some(Sabotage::InPlaceWrite));
}

calametra::main!();
