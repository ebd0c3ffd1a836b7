//! The DFU 1.1 conformance test: every (state, request, attribute) combination of the spec's
//! transition table (`refdata/dfu11.md`, Appendix A.2), written here as data, independent of
//! the model's code. Each row reaches its state through requests on the simulated bus, applies
//! one request (or a timer, a USB reset, a power cycle), and checks the reply (ok or stall), the
//! state the model is in afterwards, what DFU_GETSTATUS/DFU_GETSTATE reported, and the status.

use super::state::State as S;
use super::testkit::{
    edited, run_script, with_attributes, End, Outcome, Req, Step, NONTOLERANT, TOLERANT,
};
use super::{seal_image, state_machine_legal, Status};
use calametra_core::usb::TransferError;
use std::collections::{BTreeMap, BTreeSet};

/// The spec variants the table needs (all derived from the two shipped specs).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum V {
    /// specs/dfu11-tolerant.json (CanDnload, CanUpload, ManifestationTolerant, WillDetach).
    T,
    /// specs/dfu11-nontolerant.json.
    NT,
    /// bitCanDnload = 0.
    NoDnload,
    /// bitCanUpload = 0.
    NoUpload,
    /// bitWillDetach = 0 (tolerant).
    NoWillDetach,
    /// bitWillDetach = 0 (non-tolerant), powering up in DFU mode (`start: "dfu_idle"`).
    NtNoWillDetach,
    /// A device that programs a block without a dfuDNBUSY phase (bwPollTimeout 0).
    NoDnbusy,
    /// A device without a valid image.
    NoFirmware,
}

impl V {
    fn bytes(self) -> Vec<u8> {
        match self {
            V::T => TOLERANT.to_vec(),
            V::NT => NONTOLERANT.to_vec(),
            V::NoDnload => with_attributes(TOLERANT, false, true, true),
            V::NoUpload => with_attributes(TOLERANT, true, false, true),
            V::NoWillDetach => with_attributes(TOLERANT, true, true, false),
            // Without WillDetach only a USB reset enters DFU mode, so this one powers up there.
            V::NtNoWillDetach => edited(&with_attributes(NONTOLERANT, true, true, false), |v| {
                v["start"] = "dfu_idle".into()
            }),
            V::NoDnbusy => edited(TOLERANT, |v| v["poll_timeout_ms"]["dnbusy"] = 0.into()),
            V::NoFirmware => edited(TOLERANT, |v| v["flash"]["factory_image"] = "".into()),
        }
    }
}

/// Where a row starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum St {
    Fresh,
    AppDetach,
    DfuIdle,
    DnloadSync,
    DnBusy,
    DnloadIdle,
    /// dfuDNLOAD-IDLE holding an image that fails the CRC-32 check.
    DnloadIdleIncomplete,
    ManifestSync,
    /// dfuMANIFEST-SYNC after manifestation finished (tolerant device).
    ManifestSyncDone,
    Manifest,
    ManifestWaitReset,
    UploadIdle,
    Error,
}

/// What a row does in its state.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum A {
    Detach,
    /// DFU_DNLOAD, wLength > 0, the next block number.
    DnloadData,
    /// DFU_DNLOAD with a block number out of sequence.
    DnloadWrongBlock,
    /// DFU_DNLOAD longer than wTransferSize.
    DnloadTooLong,
    /// DFU_DNLOAD, wLength = 0.
    DnloadZero,
    /// DFU_UPLOAD that the device can fill.
    UploadFull,
    /// DFU_UPLOAD longer than what is left: a short frame.
    UploadShort,
    GetStatus,
    ClrStatus,
    GetState,
    Abort,
    /// An undefined class request (bRequest 7).
    Other,
    /// Wait this many virtual milliseconds (a timer runs out).
    Wait(u64),
    UsbReset,
    PowerCycle,
}

/// The reply a row expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum R {
    Ok,
    Stall,
    /// Not a request.
    Event,
}

/// A block that is a complete image (it passes the CRC-32 trailer check).
fn image() -> Vec<u8> {
    seal_image(b"calametra conformance image")
}

/// Requests (and waits) that bring a fresh device of variant `v` to `st`, and the state.
fn path(v: V, st: St) -> (Vec<Step>, S) {
    use Step::{Req as Q, Sleep};
    let to_dfu = if v == V::NtNoWillDetach {
        vec![]
    } else {
        vec![Q(Req::Detach(1000)), Sleep(21)]
    };
    let with = |mut base: Vec<Step>, more: Vec<Step>| {
        base.extend(more);
        base
    };
    let dnload_sync = with(to_dfu.clone(), vec![Q(Req::Dnload(0, image()))]);
    let dnbusy = with(dnload_sync.clone(), vec![Q(Req::GetStatus)]);
    let dnload_idle = with(dnbusy.clone(), vec![Sleep(5), Q(Req::GetStatus)]);
    let manifest_sync = with(dnload_idle.clone(), vec![Q(Req::Dnload(1, Vec::new()))]);
    let manifest = with(manifest_sync.clone(), vec![Q(Req::GetStatus)]);
    match st {
        St::Fresh if v == V::NoFirmware => (vec![], S::Error),
        St::Fresh => (vec![], S::AppIdle),
        St::AppDetach => (vec![Q(Req::Detach(1000))], S::AppDetach),
        St::DfuIdle => (to_dfu, S::DfuIdle),
        St::DnloadSync => (dnload_sync, S::DnloadSync),
        St::DnBusy => (dnbusy, S::DnBusy),
        St::DnloadIdle => (dnload_idle, S::DnloadIdle),
        St::DnloadIdleIncomplete => (
            with(
                to_dfu,
                vec![
                    Q(Req::Dnload(0, b"no trailer".to_vec())),
                    Q(Req::GetStatus),
                    Sleep(5),
                    Q(Req::GetStatus),
                ],
            ),
            S::DnloadIdle,
        ),
        St::ManifestSync => (manifest_sync, S::ManifestSync),
        St::Manifest => (manifest, S::Manifest),
        St::ManifestSyncDone => (with(manifest, vec![Sleep(31)]), S::ManifestSync),
        St::ManifestWaitReset => (with(manifest, vec![Sleep(31)]), S::ManifestWaitReset),
        St::UploadIdle => (with(to_dfu, vec![Q(Req::Upload(16))]), S::UploadIdle),
        St::Error => (with(to_dfu, vec![Q(Req::ClrStatus)]), S::Error),
    }
}

fn apply(a: A) -> (Option<Step>, End) {
    let q = |r| (Some(Step::Req(r)), End::Nothing);
    match a {
        A::Detach => q(Req::Detach(1000)),
        A::DnloadData => q(Req::Dnload(1, b"more".to_vec())),
        A::DnloadWrongBlock => q(Req::Dnload(7, b"more".to_vec())),
        A::DnloadTooLong => q(Req::Dnload(1, vec![0; 2049])),
        A::DnloadZero => q(Req::Dnload(1, Vec::new())),
        A::UploadFull => q(Req::Upload(4)),
        A::UploadShort => q(Req::Upload(2048)),
        A::GetStatus => q(Req::GetStatus),
        A::ClrStatus => q(Req::ClrStatus),
        A::GetState => q(Req::GetState),
        A::Abort => q(Req::Abort),
        A::Other => q(Req::Other(7)),
        A::Wait(ms) => (Some(Step::Sleep(ms)), End::Nothing),
        A::UsbReset => (None, End::UsbReset),
        A::PowerCycle => (None, End::PowerCycle),
    }
}

use A::*;

/// The transition table: (variant, start, action, reply, state afterwards). Transcribed from
/// refdata/dfu11.md; the comments quote it.
#[rustfmt::skip]
const TABLE: &[(V, St, A, R, S)] = &[
    // appIDLE: DETACH -> appDETACH. GETSTATUS/GETSTATE -> appIDLE. Any other DFU request ->
    // stall, stay in appIDLE.
    (V::T, St::Fresh, Detach, R::Ok, S::AppDetach),
    (V::T, St::Fresh, DnloadData, R::Stall, S::AppIdle),
    (V::T, St::Fresh, DnloadZero, R::Stall, S::AppIdle),
    (V::T, St::Fresh, UploadFull, R::Stall, S::AppIdle),
    (V::T, St::Fresh, GetStatus, R::Ok, S::AppIdle),
    (V::T, St::Fresh, ClrStatus, R::Stall, S::AppIdle),
    (V::T, St::Fresh, GetState, R::Ok, S::AppIdle),
    (V::T, St::Fresh, Abort, R::Stall, S::AppIdle),
    (V::T, St::Fresh, Other, R::Stall, S::AppIdle),
    (V::T, St::Fresh, UsbReset, R::Event, S::AppIdle),
    (V::T, St::Fresh, PowerCycle, R::Event, S::AppIdle),
    // appDETACH: GETSTATUS/GETSTATE -> appDETACH. Other requests -> stall, appIDLE. Detach
    // timer expires -> appIDLE. USB reset -> dfuIDLE. Power-on reset -> appIDLE. bitWillDetach:
    // the device detaches and re-attaches itself (into DFU mode).
    (V::T, St::AppDetach, Detach, R::Stall, S::AppIdle),
    (V::T, St::AppDetach, DnloadData, R::Stall, S::AppIdle),
    (V::T, St::AppDetach, DnloadZero, R::Stall, S::AppIdle),
    (V::T, St::AppDetach, UploadFull, R::Stall, S::AppIdle),
    (V::T, St::AppDetach, GetStatus, R::Ok, S::AppDetach),
    (V::T, St::AppDetach, ClrStatus, R::Stall, S::AppIdle),
    (V::T, St::AppDetach, GetState, R::Ok, S::AppDetach),
    (V::T, St::AppDetach, Abort, R::Stall, S::AppIdle),
    (V::T, St::AppDetach, Other, R::Stall, S::AppIdle),
    (V::T, St::AppDetach, Wait(21), R::Event, S::DfuIdle),
    (V::NoWillDetach, St::AppDetach, Wait(999), R::Event, S::AppDetach),
    (V::NoWillDetach, St::AppDetach, Wait(1001), R::Event, S::AppIdle),
    (V::NoWillDetach, St::AppDetach, UsbReset, R::Event, S::DfuIdle),
    (V::T, St::AppDetach, PowerCycle, R::Event, S::AppIdle),
    // dfuIDLE: DNLOAD wLength>0 & bitCanDnload -> dfuDNLOAD-SYNC; wLength=0 or !bitCanDnload ->
    // stall, dfuERROR. UPLOAD & bitCanUpload -> dfuUPLOAD-IDLE (a short first frame ends it at
    // once); !bitCanUpload -> stall, dfuERROR. ABORT, GETSTATUS, GETSTATE -> dfuIDLE. Any other
    // request -> stall, dfuERROR.
    (V::T, St::DfuIdle, Detach, R::Stall, S::Error),
    (V::T, St::DfuIdle, DnloadData, R::Ok, S::DnloadSync),
    (V::NoDnload, St::DfuIdle, DnloadData, R::Stall, S::Error),
    (V::T, St::DfuIdle, DnloadTooLong, R::Stall, S::Error),
    (V::T, St::DfuIdle, DnloadZero, R::Stall, S::Error),
    (V::T, St::DfuIdle, UploadFull, R::Ok, S::UploadIdle),
    (V::T, St::DfuIdle, UploadShort, R::Ok, S::DfuIdle),
    (V::NoUpload, St::DfuIdle, UploadFull, R::Stall, S::Error),
    (V::T, St::DfuIdle, GetStatus, R::Ok, S::DfuIdle),
    (V::T, St::DfuIdle, ClrStatus, R::Stall, S::Error),
    (V::T, St::DfuIdle, GetState, R::Ok, S::DfuIdle),
    (V::T, St::DfuIdle, Abort, R::Ok, S::DfuIdle),
    (V::T, St::DfuIdle, Other, R::Stall, S::Error),
    (V::T, St::DfuIdle, UsbReset, R::Event, S::AppIdle),
    // dfuDNLOAD-SYNC: GETSTATUS while the block is being written -> dfuDNBUSY; once it is done
    // -> dfuDNLOAD-IDLE. GETSTATE -> stay. Other -> stall, dfuERROR.
    (V::T, St::DnloadSync, Detach, R::Stall, S::Error),
    (V::T, St::DnloadSync, DnloadData, R::Stall, S::Error),
    (V::T, St::DnloadSync, DnloadZero, R::Stall, S::Error),
    (V::T, St::DnloadSync, UploadFull, R::Stall, S::Error),
    (V::T, St::DnloadSync, GetStatus, R::Ok, S::DnBusy),
    (V::NoDnbusy, St::DnloadSync, GetStatus, R::Ok, S::DnloadIdle),
    (V::T, St::DnloadSync, ClrStatus, R::Stall, S::Error),
    (V::T, St::DnloadSync, GetState, R::Ok, S::DnloadSync),
    (V::T, St::DnloadSync, Abort, R::Stall, S::Error),
    (V::T, St::DnloadSync, Other, R::Stall, S::Error),
    (V::T, St::DnloadSync, UsbReset, R::Event, S::AppIdle),
    // dfuDNBUSY: bwPollTimeout expires -> dfuDNLOAD-SYNC. Any request during the timeout ->
    // stall, dfuERROR.
    (V::T, St::DnBusy, Detach, R::Stall, S::Error),
    (V::T, St::DnBusy, DnloadData, R::Stall, S::Error),
    (V::T, St::DnBusy, DnloadZero, R::Stall, S::Error),
    (V::T, St::DnBusy, UploadFull, R::Stall, S::Error),
    (V::T, St::DnBusy, GetStatus, R::Stall, S::Error),
    (V::T, St::DnBusy, ClrStatus, R::Stall, S::Error),
    (V::T, St::DnBusy, GetState, R::Stall, S::Error),
    (V::T, St::DnBusy, Abort, R::Stall, S::Error),
    (V::T, St::DnBusy, Other, R::Stall, S::Error),
    (V::T, St::DnBusy, Wait(3), R::Event, S::DnBusy),
    (V::T, St::DnBusy, Wait(5), R::Event, S::DnloadSync),
    (V::T, St::DnBusy, UsbReset, R::Event, S::AppIdle),
    // dfuDNLOAD-IDLE: DNLOAD wLength>0 -> dfuDNLOAD-SYNC; wLength=0 -> dfuMANIFEST-SYNC if the
    // device agrees it has the whole image, else stall, dfuERROR. ABORT -> dfuIDLE.
    // GETSTATUS/GETSTATE -> stay. Other -> stall, dfuERROR.
    (V::T, St::DnloadIdle, Detach, R::Stall, S::Error),
    (V::T, St::DnloadIdle, DnloadData, R::Ok, S::DnloadSync),
    (V::T, St::DnloadIdle, DnloadWrongBlock, R::Stall, S::Error),
    (V::T, St::DnloadIdle, DnloadTooLong, R::Stall, S::Error),
    (V::T, St::DnloadIdle, DnloadZero, R::Ok, S::ManifestSync),
    (V::T, St::DnloadIdleIncomplete, DnloadZero, R::Stall, S::Error),
    (V::T, St::DnloadIdle, UploadFull, R::Stall, S::Error),
    (V::T, St::DnloadIdle, GetStatus, R::Ok, S::DnloadIdle),
    (V::T, St::DnloadIdle, ClrStatus, R::Stall, S::Error),
    (V::T, St::DnloadIdle, GetState, R::Ok, S::DnloadIdle),
    (V::T, St::DnloadIdle, Abort, R::Ok, S::DfuIdle),
    (V::T, St::DnloadIdle, Other, R::Stall, S::Error),
    (V::T, St::DnloadIdle, UsbReset, R::Event, S::AppIdle),
    (V::T, St::DnloadIdle, PowerCycle, R::Event, S::AppIdle),
    // dfuMANIFEST-SYNC: GETSTATUS while manifestation is pending -> dfuMANIFEST; after it is
    // complete (bitManifestationTolerant) -> dfuIDLE. GETSTATE -> stay. Other -> stall,
    // dfuERROR.
    (V::T, St::ManifestSync, Detach, R::Stall, S::Error),
    (V::T, St::ManifestSync, DnloadData, R::Stall, S::Error),
    (V::T, St::ManifestSync, DnloadZero, R::Stall, S::Error),
    (V::T, St::ManifestSync, UploadFull, R::Stall, S::Error),
    (V::T, St::ManifestSync, GetStatus, R::Ok, S::Manifest),
    (V::T, St::ManifestSyncDone, GetStatus, R::Ok, S::DfuIdle),
    (V::T, St::ManifestSync, ClrStatus, R::Stall, S::Error),
    (V::T, St::ManifestSync, GetState, R::Ok, S::ManifestSync),
    (V::T, St::ManifestSync, Abort, R::Stall, S::Error),
    (V::T, St::ManifestSync, Other, R::Stall, S::Error),
    (V::T, St::ManifestSync, UsbReset, R::Event, S::AppIdle),
    // dfuMANIFEST: when it finishes, tolerant -> dfuMANIFEST-SYNC, non-tolerant ->
    // dfuMANIFEST-WAIT-RESET. Requests here are not expected (stall; a stall moves a DFU-mode
    // device to dfuERROR).
    (V::T, St::Manifest, Detach, R::Stall, S::Error),
    (V::T, St::Manifest, DnloadData, R::Stall, S::Error),
    (V::T, St::Manifest, DnloadZero, R::Stall, S::Error),
    (V::T, St::Manifest, UploadFull, R::Stall, S::Error),
    (V::T, St::Manifest, GetStatus, R::Stall, S::Error),
    (V::T, St::Manifest, ClrStatus, R::Stall, S::Error),
    (V::T, St::Manifest, GetState, R::Stall, S::Error),
    (V::T, St::Manifest, Abort, R::Stall, S::Error),
    (V::T, St::Manifest, Other, R::Stall, S::Error),
    (V::T, St::Manifest, Wait(31), R::Event, S::ManifestSync),
    (V::NT, St::Manifest, Wait(31), R::Event, S::ManifestWaitReset),
    (V::T, St::Manifest, UsbReset, R::Event, S::AppIdle),
    (V::T, St::Manifest, PowerCycle, R::Event, S::AppIdle),
    // dfuMANIFEST-WAIT-RESET: the device may ignore all requests (it stalls them and stays).
    // USB reset, or its own detach-attach with bitWillDetach, -> the new firmware (appIDLE).
    (V::NT, St::ManifestWaitReset, Detach, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, DnloadData, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, DnloadZero, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, UploadFull, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, GetStatus, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, ClrStatus, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, GetState, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, Abort, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, Other, R::Stall, S::ManifestWaitReset),
    (V::NT, St::ManifestWaitReset, Wait(21), R::Event, S::AppIdle),
    (V::NtNoWillDetach, St::ManifestWaitReset, Wait(5000), R::Event, S::ManifestWaitReset),
    (V::NtNoWillDetach, St::ManifestWaitReset, UsbReset, R::Event, S::AppIdle),
    (V::NT, St::ManifestWaitReset, PowerCycle, R::Event, S::AppIdle),
    // dfuUPLOAD-IDLE: UPLOAD stays while the device returns full frames; a short frame ->
    // dfuIDLE. ABORT -> dfuIDLE. GETSTATUS/GETSTATE -> stay. Other -> stall, dfuERROR.
    (V::T, St::UploadIdle, Detach, R::Stall, S::Error),
    (V::T, St::UploadIdle, DnloadData, R::Stall, S::Error),
    (V::T, St::UploadIdle, DnloadZero, R::Stall, S::Error),
    (V::T, St::UploadIdle, UploadFull, R::Ok, S::UploadIdle),
    (V::T, St::UploadIdle, UploadShort, R::Ok, S::DfuIdle),
    (V::T, St::UploadIdle, GetStatus, R::Ok, S::UploadIdle),
    (V::T, St::UploadIdle, ClrStatus, R::Stall, S::Error),
    (V::T, St::UploadIdle, GetState, R::Ok, S::UploadIdle),
    (V::T, St::UploadIdle, Abort, R::Ok, S::DfuIdle),
    (V::T, St::UploadIdle, Other, R::Stall, S::Error),
    (V::T, St::UploadIdle, UsbReset, R::Event, S::AppIdle),
    // dfuERROR: CLRSTATUS -> dfuIDLE. GETSTATUS/GETSTATE -> stay. Other -> stall, stay.
    (V::T, St::Error, Detach, R::Stall, S::Error),
    (V::T, St::Error, DnloadData, R::Stall, S::Error),
    (V::T, St::Error, DnloadZero, R::Stall, S::Error),
    (V::T, St::Error, UploadFull, R::Stall, S::Error),
    (V::T, St::Error, GetStatus, R::Ok, S::Error),
    (V::T, St::Error, ClrStatus, R::Ok, S::DfuIdle),
    (V::T, St::Error, GetState, R::Ok, S::Error),
    (V::T, St::Error, Abort, R::Stall, S::Error),
    (V::T, St::Error, Other, R::Stall, S::Error),
    (V::T, St::Error, UsbReset, R::Event, S::AppIdle),
    (V::T, St::Error, PowerCycle, R::Event, S::AppIdle),
    // USB reset / power-on reset in DFU mode without valid firmware: dfuERROR (errFIRMWARE).
    (V::NoFirmware, St::Fresh, GetStatus, R::Ok, S::Error),
    (V::NoFirmware, St::Fresh, ClrStatus, R::Ok, S::DfuIdle),
    (V::NoFirmware, St::Fresh, UsbReset, R::Event, S::Error),
    (V::NoFirmware, St::Fresh, PowerCycle, R::Event, S::Error),
];

/// The request kinds every state must be tried with.
const REQUEST_KINDS: [&str; 9] = [
    "detach",
    "dnload",
    "dnload0",
    "upload",
    "getstatus",
    "clrstatus",
    "getstate",
    "abort",
    "other",
];

fn kind(a: A) -> Option<&'static str> {
    Some(match a {
        Detach => "detach",
        DnloadData | DnloadWrongBlock | DnloadTooLong => "dnload",
        DnloadZero => "dnload0",
        UploadFull | UploadShort => "upload",
        GetStatus => "getstatus",
        ClrStatus => "clrstatus",
        GetState => "getstate",
        Abort => "abort",
        Other => "other",
        Wait(_) | UsbReset | PowerCycle => return None,
    })
}

fn run_row(v: V, st: St, a: A) -> (Outcome, S) {
    let (mut steps, reached) = path(v, st);
    let (step, end) = apply(a);
    steps.extend(step);
    (run_script(&v.bytes(), &steps, end, None), reached)
}

#[test]
fn every_path_reaches_its_state() {
    let mut starts: BTreeSet<(V, St)> = BTreeSet::new();
    for &(v, st, ..) in TABLE {
        starts.insert((v, st));
    }
    for (v, st) in starts {
        let (steps, want) = path(v, st);
        let out = run_script(&v.bytes(), &steps, End::Nothing, None);
        assert_eq!(out.failure, None, "{v:?} {st:?}");
        assert_eq!(
            out.state, want,
            "{v:?}: the path to {st:?} ends in {}",
            out.state
        );
        // The path to dfuERROR ends on the request that stalls.
        let n = out.replies.len() - usize::from(st == St::Error);
        assert!(
            out.replies[..n].iter().all(|r| r.is_ok()),
            "{v:?} {st:?}: every request on the path succeeds: {:?}",
            out.replies
        );
    }
}

#[test]
fn every_row_of_the_transition_table() {
    let mut failures = Vec::new();
    for &(v, st, a, want_reply, want_state) in TABLE {
        let (out, reached) = run_row(v, st, a);
        let mut wrong = Vec::new();
        if let Some(f) = &out.failure {
            wrong.push(format!("run failed: {f}"));
        }
        match (want_reply, out.replies.last()) {
            (R::Event, _) => {}
            (R::Ok, Some(Ok(_))) | (R::Stall, Some(Err(TransferError::Stall))) => {}
            (want, got) => wrong.push(format!("reply {got:?}, expected {want:?}")),
        }
        if out.state != want_state {
            wrong.push(format!("state {}, expected {want_state}", out.state));
        }
        // What the device reported on the wire agrees with its ground truth.
        if want_reply == R::Ok {
            match (a, out.replies.last()) {
                (GetStatus, Some(Ok(b))) if b.len() != 6 || b[4] != want_state.code() => wrong
                    .push(format!(
                        "GETSTATUS answered {b:02x?}, expected bState {}",
                        want_state.code()
                    )),
                (GetState, Some(Ok(b))) if b != &[want_state.code()] => {
                    wrong.push(format!("GETSTATE answered {b:02x?}"))
                }
                _ => {}
            }
        }
        // dfuERROR always carries an error status, every other state OK.
        if (out.state == S::Error) == (out.status == Status::Ok) {
            wrong.push(format!("status {} in {}", out.status, out.state));
        }
        if let Err(e) = &out.legal {
            wrong.push(format!("state_machine_legal: {e}"));
        }
        if !wrong.is_empty() {
            failures.push(format!(
                "{v:?}: in {reached} ({st:?}) on {a:?}: {}",
                wrong.join("; ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} rows disagree with the DFU 1.1 table:\n{}",
        failures.len(),
        TABLE.len(),
        failures.join("\n")
    );
}

#[test]
fn the_table_covers_every_state_and_every_request() {
    let mut seen: BTreeMap<S, BTreeSet<&str>> = BTreeMap::new();
    for &(v, st, a, ..) in TABLE {
        let state = path(v, st).1;
        if let Some(k) = kind(a) {
            seen.entry(state).or_default().insert(k);
        }
    }
    for s in S::ALL {
        let got = seen.get(&s).cloned().unwrap_or_default();
        let missing: Vec<&str> = REQUEST_KINDS
            .iter()
            .copied()
            .filter(|k| !got.contains(k))
            .collect();
        assert!(missing.is_empty(), "{s}: no row applies {missing:?}");
    }
}

#[test]
fn detach_with_will_detach_needs_no_reset_and_errors_say_why() {
    // The status code a refused image gets, and the attribute byte a variant reports.
    let (out, _) = run_row(V::T, St::DnloadIdleIncomplete, DnloadZero);
    assert_eq!(out.status, Status::ErrFile);
    let (out, _) = run_row(V::T, St::DnloadIdle, DnloadWrongBlock);
    assert_eq!(out.status, Status::ErrAddress);
    let (out, _) = run_row(V::T, St::DfuIdle, ClrStatus);
    assert_eq!(out.status, Status::ErrStalledPkt);
    let (out, _) = run_row(V::NoFirmware, St::Fresh, UsbReset);
    assert_eq!(out.status, Status::ErrFirmware);
    // The whole history of a full download is legal.
    let (out, _) = run_row(V::NT, St::ManifestWaitReset, Wait(21));
    assert_eq!(out.valid_image.as_deref(), Some(&image()[..]));
    let dfu = super::Dfu::from_spec(&super::testkit::spec(NONTOLERANT));
    assert!(state_machine_legal(&dfu).is_ok());
}
