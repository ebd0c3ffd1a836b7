//! The mass-storage model in-process: driven over the simulated bus as usb-storage drives it
//! (a CBW, the data stage, the CSW): INQUIRY, READ CAPACITY(10), a WRITE(10) read back by
//! READ(10), an unsupported command's sense, and what it refuses.

use super::*;
use calametra_core::usb::Setup;
use calametra_core::{run, Failure, RunConfig, Sim};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

const SPEC: &[u8] = include_bytes!("../../specs/msc-disk.json");

fn spec() -> Spec {
    Spec::parse("specs/msc-disk.json", SPEC).expect("the spec parses")
}

/// A CBW: tag, bytes to move, direction, the CDB.
fn cbw(tag: u32, len: u32, to_host: bool, cdb: &[u8]) -> Vec<u8> {
    let mut v = b"USBC".to_vec();
    v.extend(tag.to_le_bytes());
    v.extend(len.to_le_bytes());
    v.push(if to_host { 0x80 } else { 0 });
    v.push(0);
    v.push(cdb.len() as u8);
    let mut c = cdb.to_vec();
    c.resize(16, 0);
    v.extend(c);
    v
}

/// One command: the CBW, its data out, the bytes of data in it expects.
type Cmd = (Vec<u8>, Vec<u8>, usize);
/// What the host got for one command: its data in and the CSW.
type Got = (Vec<u8>, Vec<u8>);

fn drive(cmds: Vec<Cmd>) -> (Vec<Got>, Option<Failure>) {
    let got = Rc::new(RefCell::new(Vec::new()));
    let g = got.clone();
    let scenario = move |sim: &mut Sim| {
        let dev = sim.attach(Msc::from_spec(&spec()));
        let iface = dev.interface();
        let (g, cmds) = (g.clone(), cmds.clone());
        sim.spawn("host", async move {
            let set_config = Setup {
                request_type: 0,
                request: 9,
                value: 1,
                index: 0,
                length: 0,
            };
            let _ = iface
                .control_raw(set_config, Vec::new(), Duration::from_millis(100))
                .await;
            for (cbw, out, want_in) in cmds {
                let _ = iface.bulk_out(0x02, cbw).await;
                if !out.is_empty() {
                    let _ = iface.bulk_out(0x02, out).await;
                }
                let data = if want_in > 0 {
                    iface.bulk_in(0x81, want_in).await.unwrap_or_default()
                } else {
                    Vec::new()
                };
                let csw = iface.bulk_in(0x81, 13).await.unwrap_or_default();
                g.borrow_mut().push((data, csw));
            }
        });
        sim.invariant("bot_well_formed", move |w| bot_well_formed(w.model(dev)));
    };
    let r = run(RunConfig::default(), &scenario);
    let v = got.borrow().clone();
    (v, r.failure)
}

fn csw_ok(csw: &[u8], tag: u32, residue: u32) {
    assert_eq!(&csw[..4], b"USBS");
    assert_eq!(csw[4..8], tag.to_le_bytes());
    assert_eq!(csw[8..12], residue.to_le_bytes(), "residue");
    assert_eq!(csw[12], 0, "status good");
}

#[test]
fn a_block_written_is_read_back_and_the_disk_is_described() {
    let block: Vec<u8> = (0..512u32).map(|i| (i * 3) as u8).collect();
    let (got, failure) = drive(vec![
        (cbw(1, 36, true, &[0x12, 0, 0, 0, 36, 0]), Vec::new(), 36),
        (
            cbw(2, 8, true, &[0x25, 0, 0, 0, 0, 0, 0, 0, 0, 0]),
            Vec::new(),
            8,
        ),
        (
            cbw(3, 512, false, &[0x2a, 0, 0, 0, 0, 5, 0, 0, 1, 0]),
            block.clone(),
            0,
        ),
        (
            cbw(4, 512, true, &[0x28, 0, 0, 0, 0, 5, 0, 0, 1, 0]),
            Vec::new(),
            512,
        ),
    ]);
    assert!(failure.is_none(), "{failure:?}");
    assert_eq!(&got[0].0[8..16], b"Calametr");
    csw_ok(&got[0].1, 1, 0);
    assert_eq!(got[1].0, [0, 0, 2, 0xff, 0, 0, 2, 0], "768 blocks of 512");
    csw_ok(&got[2].1, 3, 0);
    assert_eq!(got[3].0, block);
    csw_ok(&got[3].1, 4, 0);
}

#[test]
fn an_unsupported_command_fails_with_illegal_request_sense() {
    let (got, failure) = drive(vec![
        (cbw(7, 0, false, &[0x5a, 0, 0, 0, 0, 0]), Vec::new(), 0),
        (cbw(8, 18, true, &[0x03, 0, 0, 0, 18, 0]), Vec::new(), 18),
    ]);
    assert!(failure.is_none(), "{failure:?}");
    assert_eq!(got[0].1[12], 1, "CHECK CONDITION");
    let sense = &got[1].0;
    assert_eq!(
        (sense[2], sense[12]),
        (0x05, 0x20),
        "ILLEGAL REQUEST, INVALID OPCODE"
    );
}

#[test]
fn a_read_past_the_disk_breaks_the_invariant() {
    let (_, failure) = drive(vec![(
        cbw(9, 512, true, &[0x28, 0, 0, 0, 0x03, 0x00, 0, 0, 1, 0]),
        Vec::new(),
        512,
    )]);
    let f = failure.expect("refused");
    assert_eq!(f.invariant(), Some("bot_well_formed"), "{f}");
    assert!(f.to_string().contains("past the disk's 768"), "{f}");
}

#[test]
fn spec_errors_name_the_field() {
    let mut v: serde_json::Value = serde_json::from_slice(SPEC).unwrap();
    v["msc"]["vendor"] = "far too long a vendor".into();
    let bytes = serde_json::to_vec(&v).unwrap();
    let e = Msc::try_from_spec(&Spec::parse("specs/x.json", &bytes).unwrap())
        .err()
        .expect("an error")
        .to_string();
    assert!(e.contains("msc.vendor") && e.contains("at most 8"), "{e}");
}
