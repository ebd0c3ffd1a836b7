//! The replay model on small learned specs: cursors move only when the device received the
//! transfer, a stall (on the bus or at the step's transition) then a retry gets the recorded
//! answer, unseen input is a model gap naming the nearest key, exhausted keys repeat only when
//! their answers were all equal, events and replies come at their recorded times, latency
//! delays the reply, and a bad spec names its file and field. Also: a spec learned from a
//! capture reads back to the same bytes.

use super::Learned;
use calametra_capture::learn::format::LearnedSpec;
use calametra_capture::learn::{learn, Input, Selection};
use calametra_core::explore::Probe;
use calametra_core::fault::Fault;
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_core::usb::{Setup, TransferError};
use calametra_core::RunConfig;

/// Vendor IN 0xc0/0x01 answered `0a` then `0b`; vendor OUT 0x40/0x02 with data `01`
/// (ack, latency 1 ms); GET_DESCRIPTOR(device) answered twice the same; bulk OUT 0x01 `aa`
/// answered by a bulk IN 0x81 `bb` 300 us later; an interrupt 0x83 event 2 ms after the
/// second 0xc0/0x01 answer.
const SPEC: &str = r#"{
  "format": "calametra.spec.learned", "version": 1, "name": "tiny",
  "source": {"captures": [{"file": "x.pcap", "sha256": "00", "bus": 1, "address": 2}]},
  "descriptors": [{"type": 1, "index": 0, "language": 0,
                   "values": ["120100020000004034120100000101020001"]}],
  "control": [
    {"name": "c001.0000.0000.0001", "setup": "c001000000000100", "data": "", "latency_ns": 0,
     "outcomes": [{"data": "0a"}, {"data": "0b"}]},
    {"name": "4002.0000.0000.0001.x", "setup": "4002000000000100", "data": "01",
     "latency_ns": 1125000, "outcomes": [{"ack": true}]},
    {"name": "8006.0100.0000.0012", "setup": "8006000100001200", "data": "", "latency_ns": 0,
     "outcomes": [{"data": "120100020000004034120100000101020001"},
                  {"data": "120100020000004034120100000101020001"}]}
  ],
  "out": [
    {"name": "out01.1.x", "endpoint": 1, "data": "aa", "latency_ns": 0,
     "outcomes": [{"ack": true, "replies": [{"endpoint": 129, "data": "bb", "after_ns": 320000}]}]}
  ],
  "events": [
    {"endpoint": 131, "data": "0e", "after": "c001.0000.0000.0001", "after_answer": 2,
     "after_ns": 2125000}
  ],
  "in_endpoints": [{"endpoint": 129, "type": "bulk"}, {"endpoint": 131, "type": "interrupt"}]
}"#;

fn spec() -> Spec {
    Spec::parse("specs/tiny.json", SPEC.as_bytes()).unwrap()
}

fn host(config: RunConfig) -> DeviceHost {
    DeviceHost::new(Learned::try_from_spec(&spec()).unwrap(), &config)
}

fn kept() -> RunConfig {
    RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    }
}

fn with_fault(site: &str, fault: Fault) -> RunConfig {
    Probe::Site {
        site: site.into(),
        fault,
    }
    .config(&kept())
}

const READ: Setup = Setup {
    request_type: 0xc0,
    request: 0x01,
    value: 0,
    index: 0,
    length: 1,
};

fn gaps(h: &DeviceHost) -> Vec<String> {
    h.lines()
        .iter()
        .filter(|l| l.contains("\"model_gap\""))
        .cloned()
        .collect()
}

#[test]
fn answers_come_in_capture_order_one_cursor_a_key() {
    let mut h = host(kept());
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0a]));
    // Another key in between moves only its own cursor.
    let desc = Setup {
        request_type: 0x80,
        request: 6,
        value: 0x0100,
        index: 0,
        length: 18,
    };
    assert_eq!(h.control(desc, &[]).unwrap().len(), 18);
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0b]));
    let m = h.device::<Learned>().unwrap();
    assert_eq!(m.answers_given("c001.0000.0000.0001"), Some(2));
    assert_eq!(m.answers_given("8006.0100.0000.0012"), Some(1));
    assert!(gaps(&h).is_empty());
    assert!(h
        .lines()
        .iter()
        .any(|l| l.contains("\"site\":\"c001.0000.0000.0001.1->2#1\"")));
}

#[test]
fn a_request_stalled_on_the_bus_never_reached_the_device_and_its_retry_gets_the_recorded_answer() {
    let mut h = host(with_fault("ctrl.c0_01#1", Fault::Stall));
    assert_eq!(h.control(READ, &[]), Err(TransferError::Stall));
    assert_eq!(
        h.device::<Learned>()
            .unwrap()
            .answers_given("c001.0000.0000.0001"),
        Some(0),
        "the cursor moves only when the device received the transfer"
    );
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0a]));
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0b]));
}

#[test]
fn a_refused_step_stalls_and_keeps_the_cursor_so_the_retry_gets_the_recorded_answer() {
    let mut h = host(with_fault("c001.0000.0000.0001.0->1#1", Fault::Stall));
    assert_eq!(h.control(READ, &[]), Err(TransferError::Stall));
    assert_eq!(
        h.device::<Learned>()
            .unwrap()
            .answers_given("c001.0000.0000.0001"),
        Some(0)
    );
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0a]));
    assert!(gaps(&h).is_empty());
}

#[test]
fn unseen_input_is_a_model_gap_naming_the_request_and_the_nearest_key() {
    let mut h = host(kept());
    let other = Setup { value: 7, ..READ };
    assert_eq!(h.control(other, &[]), Err(TransferError::Stall));
    let g = gaps(&h);
    assert_eq!(g.len(), 1, "{g:?}");
    assert!(
        g[0].contains("control c0 01 0007 0000 0001")
            && g[0].contains("nearest known key: c001.0000.0000.0001 (wValue 0x0007 vs 0x0000)"),
        "{}",
        g[0]
    );
    // OUT data the capture never showed: the nearest key and where the data parts.
    let mut h = host(kept());
    let write = Setup {
        request_type: 0x40,
        request: 0x02,
        value: 0,
        index: 0,
        length: 1,
    };
    assert_eq!(h.control(write, &[0x02]), Err(TransferError::Stall));
    let g = gaps(&h);
    assert!(
        g[0].contains("with 1 bytes of OUT data")
            && g[0].contains("nearest known key: 4002.0000.0000.0001.x (data differs from byte 0)"),
        "{}",
        g[0]
    );
    // A bulk OUT nobody saw, and an IN on an endpoint the capture never read.
    let mut h = host(kept());
    assert_eq!(h.out(0x01, &[0xab, 0xcd]), Err(TransferError::Stall));
    assert!(
        gaps(&h)[0].contains("nearest known key: out01.1.x (2 data bytes vs 1)"),
        "{:?}",
        gaps(&h)
    );
    let mut h = host(kept());
    assert_eq!(h.poll_in(0x82, 64, false), Some(Err(TransferError::Stall)));
    assert!(gaps(&h)[0].contains("no IN transfer on this endpoint"));
}

#[test]
fn exhausted_keys_repeat_only_when_their_answers_were_all_the_same() {
    let mut h = host(kept());
    let desc = Setup {
        request_type: 0x80,
        request: 6,
        value: 0x0100,
        index: 0,
        length: 18,
    };
    for _ in 0..4 {
        assert_eq!(h.control(desc, &[]).unwrap()[..2], [0x12, 0x01]);
    }
    assert!(gaps(&h).is_empty());
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0a]));
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0b]));
    assert_eq!(h.control(READ, &[]), Err(TransferError::Stall));
    let g = gaps(&h);
    assert!(
        g[0].contains("control key c001.0000.0000.0001")
            && g[0].contains("answer 3 asked; the capture shows 2 answers to it and they differ"),
        "{g:?}"
    );
}

#[test]
fn a_steady_key_repeats_its_last_answer_once_its_answers_run_out() {
    let steady = SPEC.replacen(
        r#""latency_ns": 0,
     "outcomes": [{"data": "0a"}, {"data": "0b"}]}"#,
        r#""latency_ns": 0, "steady": true,
     "outcomes": [{"data": "0a"}, {"data": "0b"}, {"data": "0b"}]}"#,
        1,
    );
    assert_ne!(steady, SPEC);
    let spec = Spec::parse("specs/steady.json", steady.as_bytes()).unwrap();
    let mut h = DeviceHost::new(Learned::try_from_spec(&spec).unwrap(), &kept());
    for want in [0x0a, 0x0b, 0x0b, 0x0b, 0x0b] {
        assert_eq!(h.control(READ, &[]), Ok(vec![want]));
    }
    assert!(gaps(&h).is_empty());
}

#[test]
fn the_bus_business_and_unchanged_descriptors_need_no_key() {
    let mut h = host(kept());
    let set_address = Setup {
        request_type: 0,
        request: 5,
        value: 9,
        index: 0,
        length: 0,
    };
    assert_eq!(h.control(set_address, &[]), Ok(vec![]));
    // The device descriptor never changed: any wLength reads its prefix.
    let short = Setup {
        request_type: 0x80,
        request: 6,
        value: 0x0100,
        index: 0,
        length: 8,
    };
    assert_eq!(
        h.control(short, &[]),
        Ok(vec![0x12, 0x01, 0x00, 0x02, 0, 0, 0, 0x40])
    );
    // An endpoint descriptor is returned only inside a configuration (USB 2.0 §9.4.3).
    let endpoint = Setup {
        value: 0x0500,
        ..short
    };
    assert_eq!(h.control(endpoint, &[]), Err(TransferError::Stall));
    assert!(gaps(&h).is_empty());
    // A string the capture never read is unknown.
    let string = Setup {
        value: 0x0301,
        index: 0x0409,
        ..short
    };
    assert_eq!(h.control(string, &[]), Err(TransferError::Stall));
    assert_eq!(gaps(&h).len(), 1);
}

#[test]
fn replies_events_and_latency_come_at_their_recorded_times() {
    let mut h = host(kept());
    // The OUT's reply, 320 us after its submission: the bus charged 20 us + 2 ns before the
    // device saw it, so the model waits the rest.
    let t0 = h.now();
    assert_eq!(h.out(0x01, &[0xaa]), Ok(1));
    assert_eq!(h.poll_in(0x81, 64, false), None, "not yet");
    h.advance_to(t0 + 320_000);
    assert_eq!(h.poll_in(0x81, 64, false), Some(Ok(vec![0xbb])));
    assert_eq!(h.poll_in(0x81, 64, false), None, "one reply, then NAKs");
    // A latency of 1.125 ms: 125 us of bus and 2 ns a byte, then the device's own 999,998 ns.
    let t1 = h.now();
    let write = Setup {
        request_type: 0x40,
        request: 0x02,
        value: 0,
        index: 0,
        length: 1,
    };
    assert_eq!(h.control(write, &[0x01]), Ok(vec![]));
    assert_eq!(h.now() - t1, 1_125_000);
    // The event follows the second answer of c001 by 2.125 ms (from that request's submission).
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0a]));
    assert_eq!(h.poll_in(0x83, 64, true), None);
    let t2 = h.now();
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0b]));
    let submitted = t2;
    // A poll takes 20 us to reach the device: this one arrives 1 us early.
    h.advance_to(submitted + 2_104_000);
    assert_eq!(h.poll_in(0x83, 64, true), None, "not before its time");
    h.advance_to(submitted + 2_125_000);
    assert_eq!(h.poll_in(0x83, 64, true), Some(Ok(vec![0x0e])));
    assert!(h
        .lines()
        .iter()
        .any(|l| l.contains("\"site\":\"in83.0->1#1\"")));
    assert!(gaps(&h).is_empty(), "{:?}", gaps(&h));
}

#[test]
fn a_bad_learned_spec_names_its_file_and_field() {
    let cases = [
        (
            r#""data": "0a""#,
            r#""data": "0z""#,
            "control.0.outcomes.0.data",
        ),
        (r#""version": 1"#, r#""version": 2"#, "version"),
        (
            r#""after_answer": 2"#,
            r#""after_answer": 0"#,
            "events.0.after_answer",
        ),
        (
            r#""after": "c001.0000.0000.0001""#,
            r#""after": "nope""#,
            "events.0.after",
        ),
        (r#""endpoint": 1,"#, r#""endpoint": 129,"#, "out.0.endpoint"),
        (
            r#""name": "out01.1.x""#,
            r#""name": "c001.0000.0000.0001""#,
            "out.0.name",
        ),
        (
            r#""setup": "c001000000000100""#,
            r#""setup": "c0010000""#,
            "control.0",
        ),
        (
            r#"{"ack": true}]},"#,
            r#"{"data": "00"}]},"#,
            "control.1.outcomes.0",
        ),
        // A second key with the first's setup and data: keys are unique.
        (
            r#""setup": "8006000100001200""#,
            r#""setup": "c001000000000100""#,
            "control.2",
        ),
    ];
    for (from, to, field) in cases {
        assert!(SPEC.contains(from), "{from}");
        let bad = SPEC.replacen(from, to, 1);
        let spec = Spec::parse("specs/bad.json", bad.as_bytes()).unwrap();
        let e = match Learned::try_from_spec(&spec) {
            Ok(_) => panic!("{field}: accepted"),
            Err(e) => e.to_string(),
        };
        assert!(
            e.contains("specs/bad.json") && e.contains(&format!("field `{field}`")),
            "{field}: {e}"
        );
        if field == "control.2" {
            assert!(e.contains("keys are unique"), "{e}");
        }
    }
}

/// usbmon text: a device descriptor read, a vendor read answered twice differently, a bulk
/// OUT answered on bulk IN, an interrupt IN nobody asked for; and a SET_ADDRESS (not learned).
const TEXT: &str = "\
00000001 1000 S Co:1:002:0 s 00 05 0002 0000 0000 0
00000001 1010 C Co:1:002:0 0 0
00000002 2000 S Ci:1:002:0 s 80 06 0100 0000 0012 18 <
00000002 2050 C Ci:1:002:0 0 18 = 12010002 00000040 34120100 00010102 0001
00000003 3000 S Ci:1:002:0 s c0 01 0000 0000 0001 1 <
00000003 3040 C Ci:1:002:0 0 1 = 0a
00000004 3100 S Bi:1:002:1 -115 64 <
00000005 4000 S Bo:1:002:1 -115 2 = aabb
00000005 4020 C Bo:1:002:1 0 2 >
00000004 4300 C Bi:1:002:1 0 1 = cc
00000006 5000 S Ci:1:002:0 s c0 01 0000 0000 0001 1 <
00000006 5040 C Ci:1:002:0 -32 0
00000007 5100 S Ii:1:002:3 -115:8 8 <
00000007 7000 C Ii:1:002:3 0:8 1 = 0e
";

#[test]
fn a_learned_spec_reads_back_to_the_same_bytes_and_replays_its_capture() {
    let input = Input::parse("dev.txt", TEXT.as_bytes()).unwrap();
    let (learned, report) = learn(&[input], &Selection::Only).unwrap();
    let text = report.to_string();
    assert!(
        text.contains("learned 3 control transfers, 1 OUT transfers, 1 IN replies, 1 IN events"),
        "{text}"
    );
    assert!(text.contains("skipped 1: control: SET_ADDRESS"), "{text}");
    let bytes = learned.to_json();
    let spec = Spec::parse("specs/dev.json", &bytes).unwrap();
    let back = LearnedSpec::from_spec(&spec).unwrap();
    assert_eq!(back, learned);
    assert_eq!(
        back.to_json(),
        bytes,
        "written, read and written again: the same bytes"
    );
    assert_eq!(learned.name, "learned-1234-0001");
    let key = learned
        .control
        .iter()
        .find(|k| k.name == "c001.0000.0000.0001")
        .unwrap();
    assert_eq!(key.latency_ns, 40_000);
    assert_eq!(key.outcomes.len(), 2);
    let e = &learned.events[0];
    // The interrupt IN follows the last answer the device gave (the stall), not the bulk OUT.
    assert_eq!(e.after, Some(("c001.0000.0000.0001".to_string(), 2)));
    assert_eq!(e.packet.after_ns, 2_000_000);
    assert_eq!(learned.out[0].outcomes[0].replies[0].after_ns, 300_000);

    // The model answers the capture's requests as the device did.
    let mut h = DeviceHost::new(Learned::try_from_spec(&spec).unwrap(), &kept());
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0a]));
    assert_eq!(h.control(READ, &[]), Err(TransferError::Stall));
    assert_eq!(h.out(0x01, &[0xaa, 0xbb]), Ok(2));
    h.advance_to(h.now() + 300_000);
    assert_eq!(h.poll_in(0x81, 64, false), Some(Ok(vec![0xcc])));
    h.advance_to(h.now() + 3_000_000);
    assert_eq!(h.poll_in(0x83, 8, true), Some(Ok(vec![0x0e])));
    assert!(gaps(&h).is_empty(), "{:?}", gaps(&h));
}

#[test]
fn a_refused_event_step_loses_the_packet_and_leaves_the_request_it_followed_alone() {
    let mut h = host(with_fault("in83.0->1#1", Fault::Stall));
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0a]));
    assert_eq!(h.control(READ, &[]), Ok(vec![0x0b]));
    h.advance_to(h.now() + 5_000_000);
    assert_eq!(h.poll_in(0x83, 64, true), None, "the notification was lost");
    assert!(h
        .lines()
        .iter()
        .any(|l| l.contains("\"kind\":\"fault\"") && l.contains("in83.0->1#1")));
}
