//! Unit tests of the DFU model: spec errors, chapter 9 answers, fault sites, marks, and the
//! sabotage tests that prove each invariant catches the lie it is for.

use super::testkit::{
    edited, run_checked, run_script, spec, Check, End, Req, Step, NONTOLERANT, TOLERANT,
};
use super::{
    installed_as_claimed, marks, never_bricked, seal_image, state_machine_legal, Dfu, Sabotage,
    State, Status,
};
use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::spec::Spec;
use calametra_core::usb::{Setup, TransferError};
use std::collections::BTreeSet;
use std::rc::Rc;

fn spec_error(bytes: &[u8]) -> String {
    let s = match Spec::parse("specs/dfu11-broken.json", bytes) {
        Ok(s) => s,
        Err(e) => return e.to_string(),
    };
    match Dfu::try_from_spec(&s) {
        Ok(_) => panic!("the broken spec was accepted"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn shipped_specs_parse_and_differ_only_in_tolerance() {
    let t = Dfu::from_spec(&spec(TOLERANT));
    let n = Dfu::from_spec(&spec(NONTOLERANT));
    assert!(t.attributes().manifestation_tolerant && !n.attributes().manifestation_tolerant);
    for d in [&t, &n] {
        let a = d.attributes();
        assert!(a.can_dnload && a.can_upload && a.will_detach);
        assert_eq!(d.state(), State::AppIdle);
        assert_eq!(d.dfu_spec().transfer_size, 2048);
        assert!(d.dfu_spec().flash_size >= 64 * 1024 + 4);
        assert_eq!(d.dfu_spec().runtime.configuration[14..18], [0xfe, 1, 1, 4]);
        assert_eq!(d.dfu_spec().dfu_mode.configuration[14..18], [0xfe, 1, 2, 5]);
        assert_eq!(d.dfu_spec().dfu_mode.functional.len(), 9);
        assert!(d.valid_image().is_some());
    }
}

#[test]
fn malformed_specs_name_file_and_field() {
    let cases: Vec<(Vec<u8>, &str, &str)> = vec![
        (
            edited(TOLERANT, |v| {
                v.as_object_mut().map(|o| o.remove("transfer_size"));
            }),
            "transfer_size",
            "missing",
        ),
        (
            edited(TOLERANT, |v| v["runtime"]["device"] = "12 01 00 02".into()),
            "runtime.device",
            "expected 18 bytes",
        ),
        (
            edited(TOLERANT, |v| {
                v["dfu_mode"]["configuration"] = "09 02 zz".into()
            }),
            "dfu_mode.configuration",
            "bad hex",
        ),
        (
            edited(TOLERANT, |v| v["attributes"]["can_upload"] = false.into()),
            "runtime.configuration",
            "functional descriptor",
        ),
        (
            edited(TOLERANT, |v| {
                v["flash"]["factory_image"] = "00 01 02 03 04".into()
            }),
            "flash.factory_image",
            "CRC-32",
        ),
        (
            edited(TOLERANT, |v| v["format"] = "calametra.spec.trigger6".into()),
            "format",
            "calametra.spec.dfu",
        ),
        (
            edited(TOLERANT, |v| {
                let c = v["dfu_mode"]["configuration"]
                    .as_str()
                    .unwrap_or("")
                    .to_string();
                v["dfu_mode"]["configuration"] = c.replacen("fe 01 02", "fe 01 01", 1).into();
            }),
            "dfu_mode.configuration",
            "protocol 02",
        ),
        (
            edited(TOLERANT, |v| v["flash"]["image_check"] = "md5".into()),
            "flash.image_check",
            "crc32-trailer",
        ),
        (
            edited(TOLERANT, |v| v["poll_timeout_ms"]["dnbusy"] = "soon".into()),
            "poll_timeout_ms.dnbusy",
            "unsigned integer",
        ),
    ];
    for (bytes, field, what) in cases {
        let e = spec_error(&bytes);
        assert!(
            e.contains("specs/dfu11-broken.json") && e.contains(field) && e.contains(what),
            "expected an error naming the file, `{field}` and `{what}`, got: {e}"
        );
    }
    let caught = std::panic::catch_unwind(|| {
        Dfu::from_spec(&spec(&edited(TOLERANT, |v| v["transfer_size"] = 0.into())))
    });
    assert!(caught.is_err(), "from_spec panics on a bad spec");
}

fn std_in(request_type: u8, request: u8, value: u16, index: u16, length: u16) -> Step {
    Step::Req(Req::Raw(Setup {
        request_type,
        request,
        value,
        index,
        length,
    }))
}

#[test]
fn standard_requests_answer_from_the_spec_in_both_modes() {
    let t = spec(TOLERANT);
    let d = Dfu::from_spec(&t);
    let (rt, dm) = (d.dfu_spec().runtime.clone(), d.dfu_spec().dfu_mode.clone());
    let steps = vec![
        std_in(0x80, 6, 0x0100, 0, 64),
        std_in(0x80, 6, 0x0200, 0, 9),
        std_in(0x80, 6, 0x0200, 0, 255),
        std_in(0x81, 6, 0x2100, 0, 9),
        std_in(0x80, 6, 0x0300, 0, 255),
        std_in(0x80, 6, 0x0302, 0x0409, 255),
        std_in(0x80, 6, 0x0600, 0, 10), // device qualifier: full-speed device stalls
        std_in(0x80, 6, 0x0a00, 0, 4),  // debug descriptor: no debug port
        std_in(0x00, 5, 7, 0, 0),
        std_in(0x00, 9, 1, 0, 0),
        std_in(0x80, 8, 0, 0, 1),
        std_in(0x01, 11, 0, 0, 0),
        std_in(0x80, 0, 0, 0, 2),
        Step::Req(Req::Detach(1000)),
        Step::Sleep(21),
        std_in(0x80, 6, 0x0100, 0, 64),
        std_in(0x80, 6, 0x0200, 0, 255),
        std_in(0x80, 6, 0x0306, 0x0409, 255),
    ];
    let out = run_script(TOLERANT, &steps, End::Nothing, None);
    assert_eq!(out.failure, None);
    let r: Vec<_> = out
        .replies
        .iter()
        .map(|r| r.as_ref().ok().cloned())
        .collect();
    assert_eq!(r[0].as_deref(), Some(&rt.device[..]));
    assert_eq!(r[1].as_deref(), Some(&rt.configuration[..9]));
    assert_eq!(r[2].as_deref(), Some(&rt.configuration[..]));
    assert_eq!(r[3].as_deref(), Some(&rt.functional[..]));
    assert_eq!(r[4].as_deref(), Some(&[4, 3, 0x09, 0x04][..]));
    let product: Vec<u8> = "Calametra DFU 1.1 model"
        .encode_utf16()
        .flat_map(|u| u.to_le_bytes())
        .collect();
    assert_eq!(r[5].as_ref().map(|v| v[2..].to_vec()), Some(product));
    assert_eq!(out.replies[6], Err(TransferError::Stall));
    assert_eq!(out.replies[7], Err(TransferError::Stall));
    assert_eq!(r[10].as_deref(), Some(&[1][..]));
    assert_eq!(r[12].as_deref(), Some(&[0, 0][..]));
    assert_eq!(out.state, State::DfuIdle);
    assert_eq!(r[14].as_deref(), Some(&dm.device[..]));
    assert_eq!(r[15].as_deref(), Some(&dm.configuration[..]));
    assert!(r[16].is_some(), "the DFU-mode product string");
}

/// Standard descriptor types USB 2.0 itself settles for this full-speed device (§9.6.2 the
/// device qualifier and other-speed configuration, §9.4.3 the types its descriptor set lacks:
/// the debug descriptor `lsusb -v` asks for, BOS at bcdUSB 0x0200, interface, endpoint...)
/// stall in both modes and are no model gap; class and vendor types the spec is silent on are.
#[test]
fn standard_descriptor_types_the_spec_lacks_stall_without_a_gap() {
    let types = [6u16, 7, 0x0a, 0x0f, 4, 5, 8, 9, 0x0b, 0x10, 0x30, 0x31];
    let mut steps: Vec<Step> = types
        .iter()
        .map(|t| std_in(0x80, 6, t << 8, 0, 64))
        .collect();
    steps.push(std_in(0x80, 6, 0x0201, 0, 9)); // one configuration: no index 1
    steps.extend(to_dfu());
    steps.extend(types.iter().map(|t| std_in(0x80, 6, t << 8, 0, 64)));
    let out = run_script(TOLERANT, &steps, End::Nothing, None);
    assert_eq!(
        out.failure, None,
        "a stall the USB spec settles is no model gap"
    );
    assert_eq!(
        out.state,
        State::DfuIdle,
        "the second round ran in DFU mode"
    );
    let stalls = out
        .replies
        .iter()
        .filter(|r| **r == Err(TransferError::Stall))
        .count();
    assert_eq!(stalls, 2 * types.len() + 1, "{:?}", out.replies);

    for unknown in [0x2200u16, 0x4100, 0xff00] {
        let out = run_script(
            TOLERANT,
            &[std_in(0x80, 6, unknown, 0, 64)],
            End::Nothing,
            None,
        );
        match out.failure {
            Some(f) if f.is_model_gap() => {
                let want = format!("type {:#04x}", unknown >> 8);
                assert!(f.to_string().contains(&want), "{f}");
            }
            other => panic!("descriptor {unknown:#06x}: expected a model gap, got {other:?}"),
        }
    }
}

#[test]
fn an_unknown_request_is_a_model_gap() {
    let out = run_script(TOLERANT, &[std_in(0xc0, 0x42, 0, 0, 4)], End::Nothing, None);
    match out.failure {
        Some(f) if f.is_model_gap() => assert!(f.to_string().contains("0x42"), "{f}"),
        other => panic!("expected a model gap, got {other:?}"),
    }
}

/// A standard or class request to an interface the configuration does not have (it has one,
/// the DFU interface 0) is a Request Error, a stall USB 2.0 settles (9.2.7; 9.4.4, 9.4.5,
/// 9.4.10): a driver that trusts a damaged bInterfaceNumber (interface 108 from a corrupted
/// configuration descriptor, in a sweep of the example updater) meets a stall, not a model gap.
/// A vendor request is still one.
#[test]
fn a_request_to_an_interface_the_device_lacks_stalls_without_a_gap() {
    let steps = [
        std_in(0xa1, 0x05, 0, 108, 1), // DFU_GETSTATE to interface 108
        std_in(0x81, 0x0a, 0, 1, 1),   // GET_INTERFACE of interface 1
        std_in(0x81, 0x00, 0, 108, 2), // GET_STATUS of interface 108
        std_in(0xa1, 0x05, 0, 0, 1),   // DFU_GETSTATE to the DFU interface: answered
    ];
    let out = run_script(TOLERANT, &steps, End::Nothing, None);
    assert_eq!(out.failure, None, "a Request Error is no model gap");
    let stalls = out
        .replies
        .iter()
        .filter(|r| **r == Err(TransferError::Stall))
        .count();
    assert_eq!(stalls, 3, "{:?}", out.replies);
    assert!(out.replies[3].is_ok(), "{:?}", out.replies);
    let out = run_script(
        TOLERANT,
        &[std_in(0xc1, 0x42, 0, 108, 1)],
        End::Nothing,
        None,
    );
    assert!(
        out.failure.is_some_and(|f| f.is_model_gap()),
        "a vendor request to it is"
    );
}

fn to_dfu() -> Vec<Step> {
    vec![Step::Req(Req::Detach(1000)), Step::Sleep(21)]
}

/// A download of `image` in blocks of `size`, honouring bwPollTimeout, ending with the
/// zero-length DNLOAD and the GETSTATUS that starts manifestation, then waiting it out.
fn download(image: &[u8], size: usize) -> Vec<Step> {
    let mut s = to_dfu();
    for (i, block) in image.chunks(size).enumerate() {
        s.push(Step::Req(Req::Dnload(i as u16, block.to_vec())));
        s.push(Step::Req(Req::GetStatus));
        s.push(Step::Sleep(4));
        s.push(Step::Req(Req::GetStatus));
    }
    let n = image.len().div_ceil(size) as u16;
    s.push(Step::Req(Req::Dnload(n, Vec::new())));
    s.push(Step::Req(Req::GetStatus));
    s.push(Step::Sleep(30));
    s.push(Step::Req(Req::GetStatus));
    s
}

fn new_image(len: usize) -> Vec<u8> {
    let body: Vec<u8> = (0..len - 4).map(|i| (i * 31 + 7) as u8).collect();
    seal_image(&body)
}

#[test]
fn a_full_download_manifests_and_uploads_back_ending_on_a_short_frame() {
    let img = new_image(5000);
    let mut steps = download(&img, 2048);
    for _ in 0..3 {
        steps.push(Step::Req(Req::Upload(2048)));
    }
    let out = run_script(TOLERANT, &steps, End::Nothing, None);
    assert_eq!(out.failure, None);
    assert!(out.replies.iter().all(|r| r.is_ok()), "{:?}", out.replies);
    assert_eq!(out.valid_image.as_deref(), Some(&img[..]));
    let n = out.replies.len();
    let up: Vec<u8> = out.replies[n - 3..]
        .iter()
        .flat_map(|r| r.clone().unwrap_or_default())
        .collect();
    assert_eq!(up, img);
    assert_eq!(
        out.state,
        State::DfuIdle,
        "the short third frame ends the upload"
    );
    assert_eq!(out.marks.get(marks::UPLOAD_SHORT_FRAME), Some(&1));
    assert_eq!(out.legal, Ok(()));
    // The GETSTATUS that entered dfuDNBUSY reported the spec's bwPollTimeout.
    let busy = out.replies[2].as_ref().unwrap();
    assert_eq!(busy, &vec![0, 4, 0, 0, State::DnBusy.code(), 0]);
}

#[test]
fn the_flash_is_bounded_and_the_old_image_survives() {
    let factory = Dfu::from_spec(&spec(TOLERANT))
        .valid_image()
        .unwrap()
        .to_vec();
    let big = new_image(128 * 1024 + 8);
    let out = run_script(TOLERANT, &download(&big, 2048), End::Nothing, None);
    assert_eq!(out.state, State::Error);
    assert_eq!(out.status, Status::ErrAddress);
    assert_eq!(out.marks.get(marks::FLASH_FULL), Some(&1));
    assert_eq!(out.valid_image, Some(factory));
}

#[test]
fn faults_refuse_transitions_and_name_request_sites() {
    let img = new_image(3000);
    // Refuse the first block's move to dfuDNBUSY: the GETSTATUS stalls, nothing changes.
    let out = run_checked(
        TOLERANT,
        &download(&img, 2048)[..5],
        End::Nothing,
        None,
        Vec::new(),
        FaultPlan::single("dfu.dnload_sync->dnbusy#1", Fault::Stall),
    );
    assert_eq!(out.replies[2], Err(TransferError::Stall), "{out:#?}");
    assert_eq!(out.marks.get(marks::TRANSITION_REFUSED), Some(&1));
    assert_eq!(out.legal, Ok(()));
    // Request names make fault sites: a stall at the second DNLOAD is the bus's, not the model's.
    let out = run_checked(
        TOLERANT,
        &download(&img, 2048),
        End::Nothing,
        None,
        Vec::new(),
        FaultPlan::single("ctrl.dnload#2", Fault::Stall),
    );
    assert_eq!(out.replies[4], Err(TransferError::Stall));
    assert_eq!(
        out.replies[5].as_ref().map(|b| b[4]),
        Ok(State::DnloadIdle.code())
    );
}

fn never_bricked_check(old: Vec<u8>, new: Vec<u8>) -> Check {
    (
        "never_bricked",
        Rc::new(move |d: &Dfu| never_bricked(d, &old, &new)),
    )
}

#[test]
fn sabotage_never_bricked_catches_a_partial_image_marked_valid() {
    let old = Dfu::from_spec(&spec(TOLERANT))
        .valid_image()
        .unwrap()
        .to_vec();
    let new = new_image(6000);
    // Power is lost after two of three blocks.
    let steps: Vec<Step> = download(&new, 2048)[..10].to_vec();
    let honest = run_checked(
        TOLERANT,
        &steps,
        End::PowerCycle,
        None,
        vec![never_bricked_check(old.clone(), new.clone())],
        FaultPlan::default(),
    );
    assert_eq!(honest.failure, None);
    assert_eq!(honest.valid_image.as_deref(), Some(&old[..]));
    let lie = run_checked(
        TOLERANT,
        &steps,
        End::PowerCycle,
        Some(Sabotage::InPlaceWrite),
        vec![never_bricked_check(old, new)],
        FaultPlan::default(),
    );
    let msg = lie.failure.map(|f| f.to_string()).unwrap_or_default();
    assert!(
        msg.contains("never_bricked") && msg.contains("partial image") && msg.contains("2048"),
        "{msg}"
    );
}

#[test]
fn sabotage_state_machine_legal_catches_a_lenient_dnbusy() {
    let img = new_image(3000);
    // A host that polls before bwPollTimeout has passed.
    let steps = vec![
        Step::Req(Req::Detach(1000)),
        Step::Sleep(21),
        Step::Req(Req::Dnload(0, img[..2048].to_vec())),
        Step::Req(Req::GetStatus),
        Step::Req(Req::GetStatus),
    ];
    let honest = run_script(TOLERANT, &steps, End::Nothing, None);
    assert_eq!(honest.state, State::Error);
    assert_eq!(honest.marks.get(marks::GETSTATUS_DURING_DNBUSY), Some(&1));
    assert_eq!(honest.legal, Ok(()));
    let legal: Check = ("state_machine_legal", Rc::new(state_machine_legal));
    let lie = run_checked(
        TOLERANT,
        &steps,
        End::Nothing,
        Some(Sabotage::LenientDnbusy),
        vec![legal],
        FaultPlan::default(),
    );
    let msg = lie.failure.map(|f| f.to_string()).unwrap_or_default();
    assert!(
        msg.contains("dfuDNBUSY --DFU_GETSTATUS")
            && msg.contains("dfuDNLOAD-IDLE is not in the DFU 1.1 table")
            && msg.contains("allows dfuERROR"),
        "{msg}"
    );
}

#[test]
fn sabotage_installed_as_claimed_catches_a_manifestation_that_did_not_happen() {
    let img = new_image(3000);
    let steps = download(&img, 2048);
    let claim = img.clone();
    let check: Check = (
        "installed_as_claimed",
        Rc::new(move |d: &Dfu| {
            // The host claims success once it saw dfuIDLE after manifestation.
            if d.history()
                .iter()
                .any(|t| t.from == State::ManifestSync && t.to == State::DfuIdle)
            {
                installed_as_claimed(d, &claim)
            } else {
                Ok(())
            }
        }),
    );
    let honest = run_checked(
        TOLERANT,
        &steps,
        End::Nothing,
        None,
        vec![check.clone()],
        FaultPlan::default(),
    );
    assert_eq!(honest.failure, None);
    let lie = run_checked(
        TOLERANT,
        &steps,
        End::Nothing,
        Some(Sabotage::SkipCommit),
        vec![check],
        FaultPlan::default(),
    );
    let msg = lie.failure.map(|f| f.to_string()).unwrap_or_default();
    assert!(
        msg.contains("installed_as_claimed")
            && msg.contains("3000 bytes")
            && msg.contains("64 bytes"),
        "{msg}"
    );
}

#[test]
fn every_mark_is_reachable() {
    let img = new_image(3000);
    let mut seen = BTreeSet::new();
    let mut add = |o: super::testkit::Outcome| seen.extend(o.marks.into_keys());
    let dl = download(&img, 2048);
    add(run_script(TOLERANT, &dl, End::Nothing, None));
    add(run_script(
        NONTOLERANT,
        &[dl.clone(), vec![Step::Sleep(25)]].concat(),
        End::Nothing,
        None,
    ));
    add(run_script(NONTOLERANT, &dl, End::UsbReset, None));
    add(run_script(
        NONTOLERANT,
        &[dl.clone(), vec![Step::Req(Req::GetStatus)]].concat(),
        End::Nothing,
        None,
    ));
    add(run_script(
        TOLERANT,
        &dl[..dl.len() - 2],
        End::PowerCycle,
        None,
    ));
    let in_manifest = dl[..dl.len() - 2].to_vec();
    add(run_script(
        TOLERANT,
        &[in_manifest, vec![Step::Req(Req::GetStatus)]].concat(),
        End::Nothing,
        None,
    ));
    add(run_script(TOLERANT, &dl[..4], End::PowerCycle, None));
    add(run_script(
        TOLERANT,
        &[Step::Req(Req::Detach(1000))],
        End::UsbReset,
        None,
    ));
    add(run_script(
        &with_no_will_detach(),
        &[Step::Req(Req::Detach(5)), Step::Sleep(6)],
        End::Nothing,
        None,
    ));
    add(run_script(TOLERANT, &to_dfu(), End::UsbReset, None));
    let block = Req::Dnload(0, img[..2048].to_vec());
    for tail in [
        vec![block.clone(), Req::GetStatus, Req::Dnload(1, vec![1])],
        vec![block.clone(), Req::GetStatus, Req::GetStatus],
        vec![block.clone(), Req::GetStatus, Req::Abort],
        vec![Req::Dnload(0, vec![0; 2049])],
        vec![
            Req::Upload(8),
            Req::Abort,
            Req::Upload(2048),
            Req::ClrStatus,
        ],
    ] {
        let mut s = to_dfu();
        s.extend(tail.into_iter().map(Step::Req));
        add(run_script(TOLERANT, &s, End::Nothing, None));
    }
    let mut s = to_dfu();
    s.extend([
        Step::Req(Req::Dnload(0, b"x".to_vec())),
        Step::Req(Req::GetStatus),
        Step::Sleep(5),
        Step::Req(Req::GetStatus),
        Step::Req(Req::Dnload(5, b"y".to_vec())),
    ]);
    add(run_script(TOLERANT, &s, End::Nothing, None));
    let mut s = to_dfu();
    s.extend([
        Step::Req(Req::Dnload(0, b"no trailer".to_vec())),
        Step::Req(Req::GetStatus),
        Step::Sleep(5),
        Step::Req(Req::GetStatus),
        Step::Req(Req::Dnload(1, vec![])),
        Step::Req(Req::ClrStatus),
        Step::Req(Req::Dnload(0, img[..2048].to_vec())),
        Step::Req(Req::GetStatus),
        Step::Sleep(5),
        Step::Req(Req::GetStatus),
        Step::Req(Req::Abort),
    ]);
    add(run_script(TOLERANT, &s, End::Nothing, None));
    add(run_checked(
        TOLERANT,
        &to_dfu(),
        End::Nothing,
        None,
        Vec::new(),
        FaultPlan::single("dfu.app_detach->idle#1", Fault::Stall),
    ));
    add(run_script(
        TOLERANT,
        &download(&new_image(200 * 1024), 2048),
        End::Nothing,
        None,
    ));
    let all = [
        marks::DETACH,
        marks::WILL_DETACH_TO_DFU,
        marks::DETACH_RESET,
        marks::DETACH_TIMEOUT,
        marks::DOWNLOAD_START,
        marks::DNLOAD_DURING_DNBUSY,
        marks::GETSTATUS_DURING_DNBUSY,
        marks::REQUEST_DURING_DNBUSY,
        marks::BLOCK_OUT_OF_SEQUENCE,
        marks::FLASH_FULL,
        marks::BAD_BLOCK_LENGTH,
        marks::END_OF_IMAGE,
        marks::MANIFEST_REFUSED,
        marks::MANIFESTED,
        marks::REQUEST_DURING_MANIFEST,
        marks::MANIFEST_WAIT_RESET,
        marks::REQUEST_DURING_WAIT_RESET,
        marks::WILL_DETACH_TO_APP,
        marks::RESET_AFTER_MANIFEST,
        marks::UPLOAD_SHORT_FRAME,
        marks::ABORT_DOWNLOAD,
        marks::ABORT_UPLOAD,
        marks::STALL_TO_ERROR,
        marks::ERROR_CLEARED,
        marks::TRANSITION_REFUSED,
        marks::RESET_IN_DFU_MODE,
        marks::POWER_ON_RESET,
        marks::POWER_LOSS_DURING_DOWNLOAD,
        marks::POWER_LOSS_DURING_MANIFEST,
    ];
    let missing: Vec<&str> = all.iter().copied().filter(|m| !seen.contains(*m)).collect();
    assert!(missing.is_empty(), "marks never reached: {missing:?}");
}

fn with_no_will_detach() -> Vec<u8> {
    super::testkit::with_attributes(TOLERANT, true, true, false)
}

/// A fault that refuses the device's own timer transition (dfuDNBUSY's bwPollTimeout ending)
/// delays it; the device still finishes the block (issue 41: a refused timer transition left
/// it in dfuDNBUSY for good, and the host's next DFU_GETSTATUS looked early). The sabotage
/// brings the old behaviour back, and the same script then never leaves dfuDNBUSY.
#[test]
fn a_refused_timer_transition_is_retried_and_the_sabotage_stays_stuck() {
    let img = new_image(3000);
    // The first block: DNLOAD, GETSTATUS (-> dfuDNBUSY, 4 ms), then a wait of 10 ms: the timer
    // at 4 ms is refused, its retry at 8 ms programs the block.
    let mut steps: Vec<Step> = download(&img, 2048)[..4].to_vec();
    steps.push(Step::Sleep(10));
    steps.push(Step::Req(Req::GetStatus));
    let refuse = || FaultPlan::single("dfu.dnbusy->dnload_sync#1", Fault::Stall);
    let fixed = run_checked(TOLERANT, &steps, End::Nothing, None, Vec::new(), refuse());
    assert_eq!(
        fixed.marks.get(marks::TRANSITION_REFUSED),
        Some(&1),
        "{fixed:#?}"
    );
    let last = fixed.replies.last().unwrap().as_ref().map(|b| b[4]);
    assert_eq!(last, Ok(State::DnloadIdle.code()), "{fixed:#?}");
    assert_eq!(fixed.state, State::DnloadIdle);
    assert_eq!(fixed.legal, Ok(()));
    let stuck = run_checked(
        TOLERANT,
        &steps,
        End::Nothing,
        Some(Sabotage::StuckOnRefusedTimer),
        Vec::new(),
        refuse(),
    );
    assert_eq!(stuck.marks.get(marks::TRANSITION_REFUSED), Some(&1));
    // Stuck in dfuDNBUSY: the DFU 1.1 table stalls the GETSTATUS and goes to dfuERROR.
    assert_eq!(
        stuck.replies.last().unwrap(),
        &Err(TransferError::Stall),
        "{stuck:#?}"
    );
    assert_eq!(stuck.state, State::Error);
}
