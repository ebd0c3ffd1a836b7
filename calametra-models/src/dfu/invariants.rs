//! Invariants over the DFU model's ground truth, each returning `Result<(), String>` with a
//! message a person can act on:
//!
//! - [`never_bricked`]: the device always holds the old image or the complete new one, and
//!   never marked anything else valid;
//! - [`state_machine_legal`]: every state change in the model's history is in the DFU 1.1
//!   transition table. The table below is transcribed from `refdata/dfu11.md` on its own; it
//!   shares no code with the model's state machine (only the vocabulary types);
//! - [`installed_as_claimed`]: when a host says it installed an image, the device holds it.
//!
//! None of them calls the code whose result it checks.

use super::device::Dfu;
use super::spec::Attributes;
use super::state::{Cause, Request, State, Transition};
use calametra_core::world::DeviceHandle;
use calametra_core::Sim;
use std::cell::Cell;
use std::rc::Rc;

/// Registers the two invariants every DFU scenario keeps on `dev`: `never_bricked` (with `old`,
/// the image it started with, and `new`, the one the host installs) and
/// `state_machine_legal`, each checking after every step only the history since its last
/// check.
pub fn watch_never_bricked_and_legal(
    sim: &mut Sim,
    dev: DeviceHandle<Dfu>,
    old: Rc<[u8]>,
    new: &'static [u8],
) {
    let images = Cell::new(0);
    sim.invariant("never_bricked", move |w| {
        let d = w.model(dev);
        never_bricked_since(d, &old, new, images.get())?;
        images.set(d.image_history().len());
        Ok::<(), String>(())
    });
    let checked = Cell::new(0);
    sim.invariant("state_machine_legal", move |w| {
        let d = w.model(dev);
        state_machine_legal_since(d, checked.get())?;
        checked.set(d.history().len());
        Ok::<(), String>(())
    });
}

/// The device holds either `old` or the complete `new` image as its valid image, and every
/// image it ever marked valid was one of the two: a partial or corrupt image was never valid.
pub fn never_bricked(dev: &Dfu, old: &[u8], new: &[u8]) -> Result<(), String> {
    never_bricked_since(dev, old, new, 0)
}

/// [`never_bricked`] looking only at the images marked valid from entry `start` of the image
/// history on (an invariant checked after every step passes the count it already checked).
pub fn never_bricked_since(dev: &Dfu, old: &[u8], new: &[u8], start: usize) -> Result<(), String> {
    let Some(valid) = dev.valid_image() else {
        return Err(format!(
            "no valid image: the device would come up in dfuERROR with errFIRMWARE (state {}, {} bytes staged)",
            dev.state(),
            dev.staged_image().len()
        ));
    };
    if valid != old && valid != new {
        return Err(format!(
            "the valid image is {}: neither the old image ({}) nor the complete new image ({})",
            describe(valid, new),
            summary(old),
            summary(new)
        ));
    }
    for (i, v) in dev.image_history().iter().enumerate().skip(start) {
        if v.bytes != old && v.bytes != new {
            return Err(format!(
                "image #{i} marked valid at {} ns was {}: neither the old image ({}) nor the complete new image ({})",
                v.at_ns,
                describe(&v.bytes, new),
                summary(old),
                summary(new)
            ));
        }
    }
    Ok(())
}

/// When a host reports that it installed `claimed`, the device's valid image is `claimed`.
pub fn installed_as_claimed(dev: &Dfu, claimed: &[u8]) -> Result<(), String> {
    match dev.valid_image() {
        Some(v) if v == claimed => Ok(()),
        Some(v) => Err(format!(
            "the host reports {} installed, but the device's valid image is {} (state {}, status {})",
            summary(claimed),
            describe(v, claimed),
            dev.state(),
            dev.status()
        )),
        None => Err(format!(
            "the host reports {} installed, but the device has no valid image (state {})",
            summary(claimed),
            dev.state()
        )),
    }
}

/// Every transition in the model's history is allowed by the DFU 1.1 table (for this device's
/// attributes), carries a status that fits its target (not OK exactly in dfuERROR), and starts
/// where the previous one ended.
pub fn state_machine_legal(dev: &Dfu) -> Result<(), String> {
    state_machine_legal_since(dev, 0)
}

/// [`state_machine_legal`] for the history from entry `start` on (an invariant checked after
/// every step passes the count it already checked, so a run stays linear).
pub fn state_machine_legal_since(dev: &Dfu, start: usize) -> Result<(), String> {
    let facts = Facts {
        attrs: dev.attributes(),
        boots_in_dfu_mode: dev.dfu_spec().starts_in_dfu_mode,
    };
    let history = dev.history();
    for (i, t) in history.iter().enumerate().skip(start) {
        if i > 0 && history[i - 1].to != t.from {
            return Err(format!(
                "transition #{i} starts in {} but the one before ended in {}",
                t.from,
                history[i - 1].to
            ));
        }
        check_one(i, t, &facts)?;
    }
    Ok(())
}

/// What the table's conditions read.
struct Facts {
    attrs: Attributes,
    boots_in_dfu_mode: bool,
}

/// What happened, as the table names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Stimulus {
    Detach,
    /// DFU_DNLOAD with wLength > 0.
    DnloadData,
    /// DFU_DNLOAD with wLength = 0.
    DnloadZero,
    /// DFU_UPLOAD answered with a full frame.
    UploadFull,
    /// DFU_UPLOAD answered with a short frame.
    UploadShort,
    /// DFU_UPLOAD the device did not answer with data.
    UploadRefused,
    GetStatus,
    ClrStatus,
    GetState,
    Abort,
    OtherRequest,
    BlockWritten,
    ManifestDone,
    DetachTimeout,
    SelfDetach,
    UsbReset,
    PowerOn,
}

/// When a row applies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum When {
    Always,
    CanDnload,
    CanUpload,
    Tolerant,
    NotTolerant,
    WillDetach,
    FirmwareValid,
    FirmwareInvalid,
    BootsInDfuMode,
}

struct Row {
    from: &'static [State],
    on: &'static [Stimulus],
    to: State,
    when: When,
}

use State as S;
use Stimulus::*;

const EVERY_REQUEST: &[Stimulus] = &[
    Detach,
    DnloadData,
    DnloadZero,
    UploadFull,
    UploadShort,
    UploadRefused,
    GetStatus,
    ClrStatus,
    GetState,
    Abort,
    OtherRequest,
];
/// Every request but DFU_GETSTATUS and DFU_GETSTATE.
const NOT_STATUS: &[Stimulus] = &[
    Detach,
    DnloadData,
    DnloadZero,
    UploadFull,
    UploadShort,
    UploadRefused,
    ClrStatus,
    Abort,
    OtherRequest,
];
const RESETS: &[Stimulus] = &[UsbReset, PowerOn];
/// DFU-mode states a reset leaves for the firmware (dfuMANIFEST-WAIT-RESET has its own rows).
const DFU_MODE: &[State] = &[
    S::DfuIdle,
    S::DnloadSync,
    S::DnBusy,
    S::DnloadIdle,
    S::ManifestSync,
    S::Manifest,
    S::UploadIdle,
    S::Error,
];
const EVERY_STATE: &[State] = &State::ALL;

const fn row(from: &'static [State], on: &'static [Stimulus], to: State, when: When) -> Row {
    Row { from, on, to, when }
}

/// DFU 1.1 Appendix A.2, as `refdata/dfu11.md` transcribes it. Self-loops (a request that
/// leaves the state as it is) are not transitions and are not listed.
const TABLE: &[Row] = &[
    // appIDLE
    row(&[S::AppIdle], &[Detach], S::AppDetach, When::Always),
    // appDETACH: other requests stall and return to appIDLE; the timer does too; a USB reset
    // (or a WillDetach device's own detach-attach) enters DFU mode.
    row(&[S::AppDetach], NOT_STATUS, S::AppIdle, When::Always),
    row(&[S::AppDetach], &[DetachTimeout], S::AppIdle, When::Always),
    row(&[S::AppDetach], &[UsbReset], S::DfuIdle, When::Always),
    row(&[S::AppDetach], &[SelfDetach], S::DfuIdle, When::WillDetach),
    // dfuIDLE
    row(&[S::DfuIdle], &[DnloadData], S::DnloadSync, When::CanDnload),
    // bitCanDnload = 0, or a block the device refuses (a stall moves DFU mode to dfuERROR).
    row(&[S::DfuIdle], &[DnloadData], S::Error, When::Always),
    row(&[S::DfuIdle], &[DnloadZero], S::Error, When::Always),
    row(&[S::DfuIdle], &[UploadFull], S::UploadIdle, When::CanUpload),
    row(&[S::DfuIdle], &[UploadRefused], S::Error, When::Always),
    row(
        &[S::DfuIdle],
        &[Detach, ClrStatus, OtherRequest],
        S::Error,
        When::Always,
    ),
    // dfuDNLOAD-SYNC: GETSTATUS gives dfuDNBUSY while the block is written, else DNLOAD-IDLE.
    row(&[S::DnloadSync], &[GetStatus], S::DnBusy, When::Always),
    row(&[S::DnloadSync], &[GetStatus], S::DnloadIdle, When::Always),
    row(&[S::DnloadSync], NOT_STATUS, S::Error, When::Always),
    // dfuDNBUSY: the poll timeout ends it; any request during it stalls.
    row(&[S::DnBusy], &[BlockWritten], S::DnloadSync, When::Always),
    row(&[S::DnBusy], EVERY_REQUEST, S::Error, When::Always),
    // dfuDNLOAD-IDLE
    row(&[S::DnloadIdle], &[DnloadData], S::DnloadSync, When::Always),
    row(&[S::DnloadIdle], &[DnloadData], S::Error, When::Always),
    row(
        &[S::DnloadIdle],
        &[DnloadZero],
        S::ManifestSync,
        When::Always,
    ),
    row(&[S::DnloadIdle], &[DnloadZero], S::Error, When::Always),
    row(&[S::DnloadIdle], &[Abort], S::DfuIdle, When::Always),
    row(
        &[S::DnloadIdle],
        &[
            Detach,
            UploadFull,
            UploadShort,
            UploadRefused,
            ClrStatus,
            OtherRequest,
        ],
        S::Error,
        When::Always,
    ),
    // dfuMANIFEST-SYNC
    row(&[S::ManifestSync], &[GetStatus], S::Manifest, When::Always),
    row(&[S::ManifestSync], &[GetStatus], S::DfuIdle, When::Tolerant),
    row(&[S::ManifestSync], NOT_STATUS, S::Error, When::Always),
    // dfuMANIFEST
    row(
        &[S::Manifest],
        &[ManifestDone],
        S::ManifestSync,
        When::Tolerant,
    ),
    row(
        &[S::Manifest],
        &[ManifestDone],
        S::ManifestWaitReset,
        When::NotTolerant,
    ),
    // Requests are not expected here; stalling them moves DFU mode to dfuERROR.
    row(&[S::Manifest], EVERY_REQUEST, S::Error, When::Always),
    // dfuMANIFEST-WAIT-RESET: a reset (or the device's own detach-attach) runs the new image.
    row(
        &[S::ManifestWaitReset],
        RESETS,
        S::AppIdle,
        When::FirmwareValid,
    ),
    row(
        &[S::ManifestWaitReset],
        &[SelfDetach],
        S::AppIdle,
        When::WillDetach,
    ),
    // dfuUPLOAD-IDLE
    row(
        &[S::UploadIdle],
        &[UploadShort, Abort],
        S::DfuIdle,
        When::Always,
    ),
    row(
        &[S::UploadIdle],
        &[
            Detach,
            DnloadData,
            DnloadZero,
            UploadRefused,
            ClrStatus,
            OtherRequest,
        ],
        S::Error,
        When::Always,
    ),
    // dfuERROR
    row(&[S::Error], &[ClrStatus], S::DfuIdle, When::Always),
    // USB reset or power-on reset in DFU mode: the firmware if valid, else dfuERROR.
    row(DFU_MODE, RESETS, S::AppIdle, When::FirmwareValid),
    row(DFU_MODE, RESETS, S::Error, When::FirmwareInvalid),
    // Power-on in run-time mode.
    row(&[S::AppDetach], &[PowerOn], S::AppIdle, When::FirmwareValid),
    row(
        &[S::AppIdle, S::AppDetach],
        &[PowerOn],
        S::Error,
        When::FirmwareInvalid,
    ),
    // A device whose spec says it powers up in DFU mode.
    row(EVERY_STATE, &[PowerOn], S::DfuIdle, When::BootsInDfuMode),
];

fn classify(cause: &Cause) -> Stimulus {
    match *cause {
        Cause::Request { request, length } => match request {
            Request::Detach => Detach,
            Request::Dnload if length > 0 => DnloadData,
            Request::Dnload => DnloadZero,
            Request::Upload => UploadRefused,
            Request::GetStatus => GetStatus,
            Request::ClrStatus => ClrStatus,
            Request::GetState => GetState,
            Request::Abort => Abort,
            Request::Other(_) => OtherRequest,
        },
        Cause::Upload { length, returned } if returned < length => UploadShort,
        Cause::Upload { .. } => UploadFull,
        Cause::BlockWritten => BlockWritten,
        Cause::ManifestDone => ManifestDone,
        Cause::DetachTimeout => DetachTimeout,
        Cause::SelfDetach => SelfDetach,
        Cause::UsbReset => UsbReset,
        Cause::PowerOn => PowerOn,
    }
}

fn holds(when: When, f: &Facts, t: &Transition) -> bool {
    match when {
        When::Always => true,
        When::CanDnload => f.attrs.can_dnload,
        When::CanUpload => f.attrs.can_upload,
        When::Tolerant => f.attrs.manifestation_tolerant,
        When::NotTolerant => !f.attrs.manifestation_tolerant,
        When::WillDetach => f.attrs.will_detach,
        When::FirmwareValid => t.firmware_valid,
        When::FirmwareInvalid => !t.firmware_valid,
        When::BootsInDfuMode => f.boots_in_dfu_mode,
    }
}

fn check_one(i: usize, t: &Transition, f: &Facts) -> Result<(), String> {
    let on = classify(&t.cause);
    let rows: Vec<&Row> = TABLE
        .iter()
        .filter(|r| r.from.contains(&t.from) && r.on.contains(&on) && holds(r.when, f, t))
        .collect();
    if !rows.iter().any(|r| r.to == t.to) {
        let mut allowed: Vec<&str> = rows.iter().map(|r| r.to.spec_name()).collect();
        allowed.dedup();
        let allowed = if allowed.is_empty() {
            "no change of state".to_string()
        } else {
            allowed.join(" or ")
        };
        return Err(format!(
            "transition #{i} at {} ns: {} --{}--> {} is not in the DFU 1.1 table (from {} on {} it allows {allowed})",
            t.at_ns, t.from, t.cause, t.to, t.from, t.cause
        ));
    }
    let error_status = t.status != super::state::Status::Ok;
    if (t.to == S::Error) != error_status {
        return Err(format!(
            "transition #{i} at {} ns: {} --{}--> {} left bStatus {}; dfuERROR needs an error status and every other state OK",
            t.at_ns, t.from, t.cause, t.to, t.status
        ));
    }
    Ok(())
}

/// Length and a digest prefix. (Not a CRC-32: every image sealed with a CRC-32 trailer has the
/// same CRC-32 residue, 0x2144df1c.)
fn summary(b: &[u8]) -> String {
    let digest = calametra_core::trace::sha256_hex(b);
    format!("{} bytes, sha256 {}..", b.len(), &digest[..12])
}

/// An image described against the one it should have been.
fn describe(v: &[u8], new: &[u8]) -> String {
    let mut s = summary(v);
    if v.len() < new.len() && new.starts_with(v) {
        s.push_str(&format!(
            ", the first {} of the new image's {} bytes: a partial image",
            v.len(),
            new.len()
        ));
    } else if let Some(at) = v.iter().zip(new).position(|(a, b)| a != b) {
        s.push_str(&format!(", differing from the new image at byte {at}"));
    } else if v.len() != new.len() {
        s.push_str(&format!(
            ", the new image's {} bytes followed by {} more",
            new.len(),
            v.len() - new.len()
        ));
    }
    s
}
