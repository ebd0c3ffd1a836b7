//! The HID model in-process: enumerated and driven over the simulated bus as usbhid and hidraw
//! drive it in the guest (configuration, SET_IDLE, the report descriptor, an input report, an
//! output report on the interrupt OUT endpoint and by SET_REPORT), and its spec's errors.

use super::*;
use calametra_core::usb::Setup;
use calametra_core::{run, RunConfig, Sim};
use std::cell::RefCell;
use std::rc::Rc;
use std::time::Duration;

const SPEC: &[u8] = include_bytes!("../../specs/hid-reports.json");

fn spec(bytes: &[u8]) -> Spec {
    Spec::parse("specs/hid-reports.json", bytes).expect("the spec parses")
}

fn setup(request_type: u8, request: u8, value: u16, index: u16, length: u16) -> Setup {
    Setup {
        request_type,
        request,
        value,
        index,
        length,
    }
}

/// Runs `host` against the model with the invariant, returning what the host collected and the
/// run's failure.
fn drive(out: Vec<u8>, by_set_report: bool) -> (Vec<Vec<u8>>, Option<calametra_core::Failure>) {
    let got = Rc::new(RefCell::new(Vec::new()));
    let g = got.clone();
    let scenario = move |sim: &mut Sim| {
        let dev = sim.attach(Hid::from_spec(&spec(SPEC)));
        let iface = dev.interface();
        let (g, out) = (g.clone(), out.clone());
        sim.spawn("host", async move {
            let t = Duration::from_millis(100);
            let c = |s| iface.control_raw(s, Vec::new(), t);
            c(setup(0x00, 9, 1, 0, 0)).await.expect("configured");
            c(setup(0x21, 0x0a, 0, 0, 0)).await.expect("SET_IDLE");
            let report = c(setup(0x81, 6, 0x2200, 0, 25))
                .await
                .expect("report descriptor");
            g.borrow_mut().push(report);
            let input = iface.interrupt_in(0x81, 8).await.expect("input report");
            g.borrow_mut().push(input);
            if by_set_report {
                iface
                    .control_raw(setup(0x21, 0x09, 0x0200, 0, out.len() as u16), out, t)
                    .await
                    .expect("SET_REPORT");
            } else {
                iface.interrupt_out(0x02, out).await.expect("output report");
            }
            let answer = iface.interrupt_in(0x81, 8).await.expect("answer");
            g.borrow_mut().push(answer);
        });
        sim.invariant("output_reports_well_formed", move |w| {
            output_reports_well_formed(w.model(dev))
        });
    };
    let r = run(RunConfig::default(), &scenario);
    let v = got.borrow().clone();
    (v, r.failure)
}

#[test]
fn an_output_report_is_answered_with_an_input_report_echoing_it() {
    for by_set_report in [false, true] {
        let (got, failure) = drive(vec![0x5a, 1, 2, 3, 4, 5, 6, 7], by_set_report);
        assert!(failure.is_none(), "{failure:?}");
        assert_eq!(got[0].len(), 25, "the whole report descriptor");
        assert_eq!(
            got[1],
            [0xca, 0x01, 0x43, 0x41, 0x4c, 0x41, 0, 0],
            "the first sample"
        );
        assert_eq!(got[2], [0xac, 0x01, 0x5a, 1, 2, 3, 4, 5]);
    }
}

#[test]
fn a_malformed_output_report_is_refused_and_breaks_the_invariant() {
    let scenario = |sim: &mut Sim| {
        let dev = sim.attach(Hid::from_spec(&spec(SPEC)));
        let iface = dev.interface();
        sim.spawn("host", async move {
            let t = Duration::from_millis(100);
            let _ = iface
                .control_raw(setup(0x00, 9, 1, 0, 0), Vec::new(), t)
                .await;
            // The wrong tag: the device stalls it and records why.
            let _ = iface.interrupt_out(0x02, vec![0x00; 8]).await;
        });
        sim.invariant("output_reports_well_formed", move |w| {
            output_reports_well_formed(w.model(dev))
        });
    };
    let r = run(RunConfig::default(), &scenario);
    let f = r.failure.expect("the invariant breaks");
    assert_eq!(f.invariant(), Some("output_reports_well_formed"), "{f}");
    assert!(f.to_string().contains("0000000000000000"), "{f}");
}

#[test]
fn spec_errors_name_the_field() {
    let edited = |f: &dyn Fn(&mut serde_json::Value)| {
        let mut v: serde_json::Value = serde_json::from_slice(SPEC).unwrap();
        f(&mut v);
        Hid::try_from_spec(&spec(&serde_json::to_vec(&v).unwrap()))
            .err()
            .expect("an error")
            .to_string()
    };
    let e = edited(&|v| v["hid"]["report_len"] = 2.into());
    assert!(e.contains("hid.report_len") && e.contains("3..=64"), "{e}");
    let e = edited(&|v| v["hid"]["input_report"] = "ca 01".into());
    assert!(
        e.contains("hid.input_report") && e.contains("expected 8 bytes"),
        "{e}"
    );
    let e = edited(&|v| v["hid"]["report_descriptor"] = "06 00 ff".into());
    assert!(
        e.contains("usb.configuration") && e.contains("25 bytes"),
        "{e}"
    );
    let e = edited(&|v| v["usb"]["device"] = "12 01".into());
    assert!(e.contains("usb.device"), "{e}");
    let e = edited(&|v| v["usb"]["strings"]["0"] = "x".into());
    assert!(e.contains("usb.strings.0"), "{e}");
}
