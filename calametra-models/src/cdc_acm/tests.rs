//! The CDC-ACM model in-process: opened as cdc-acm opens `/dev/ttyACM0` (DTR, a line coding),
//! bytes echoed in order, and what it refuses (data without DTR, a bad line coding).

use super::*;
use calametra_core::usb::Setup;
use calametra_core::{run, Failure, RunConfig, Sim};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

const SPEC: &[u8] = include_bytes!("../../specs/cdc-acm-echo.json");

fn spec() -> Spec {
    Spec::parse("specs/cdc-acm-echo.json", SPEC).expect("the spec parses")
}

fn setup(request_type: u8, request: u8, value: u16, length: u16) -> Setup {
    Setup {
        request_type,
        request,
        value,
        index: 0,
        length,
    }
}

/// Configures the port, raises DTR when `dtr`, sets `coding`, writes `data`, reads it back.
fn drive(dtr: bool, coding: [u8; 7], data: &[u8]) -> (Vec<u8>, Option<Failure>) {
    let got = Rc::new(RefCell::new(Vec::new()));
    let (g, data) = (got.clone(), data.to_vec());
    let scenario = move |sim: &mut Sim| {
        let dev = sim.attach(Acm::from_spec(&spec()));
        let iface = dev.interface();
        let (g, data) = (g.clone(), data.clone());
        sim.spawn("host", async move {
            let t = Duration::from_millis(100);
            let _ = iface.control_raw(setup(0x00, 9, 1, 0), Vec::new(), t).await;
            if dtr {
                let _ = iface
                    .control_raw(setup(0x21, 0x22, 3, 0), Vec::new(), t)
                    .await;
            }
            let _ = iface
                .control_raw(setup(0x21, 0x20, 0, 7), coding.to_vec(), t)
                .await;
            let _ = iface.bulk_out(0x02, data.clone()).await;
            while g.borrow().len() < data.len() {
                match iface.bulk_in(0x81, 512).await {
                    Ok(b) => g.borrow_mut().extend(b),
                    Err(_) => break,
                }
            }
        });
        sim.invariant("acm_host_behaved", move |w| acm_host_behaved(w.model(dev)));
    };
    let r = run(RunConfig::default(), &scenario);
    let v = got.borrow().clone();
    (v, r.failure)
}

const B115200_8N1: [u8; 7] = [0x00, 0xc2, 0x01, 0x00, 0, 0, 8];

#[test]
fn bytes_come_back_in_order() {
    let data: Vec<u8> = (0..700u32).map(|i| (i * 7) as u8).collect();
    let (got, failure) = drive(true, B115200_8N1, &data);
    assert!(failure.is_none(), "{failure:?}");
    assert_eq!(got, data);
}

#[test]
fn data_without_dtr_breaks_the_invariant() {
    let (_, failure) = drive(false, B115200_8N1, b"hello");
    let f = failure.expect("refused");
    assert_eq!(f.invariant(), Some("acm_host_behaved"));
    assert!(f.to_string().contains("while DTR is down"), "{f}");
}

#[test]
fn a_bad_line_coding_is_refused() {
    let (_, failure) = drive(true, [0x00, 0xc2, 0x01, 0x00, 0, 0, 9], b"x");
    let f = failure.expect("refused");
    assert!(f.to_string().contains("data bits 9"), "{f}");
}

#[test]
fn spec_errors_name_the_field() {
    let mut v: serde_json::Value = serde_json::from_slice(SPEC).unwrap();
    v["acm"]["echo_capacity"] = 0.into();
    let bytes = serde_json::to_vec(&v).unwrap();
    let e = Acm::try_from_spec(&Spec::parse("specs/x.json", &bytes).unwrap())
        .err()
        .expect("an error")
        .to_string();
    assert!(
        e.contains("acm.echo_capacity") && e.contains("specs/x.json"),
        "{e}"
    );
}
