//! `learn` on hostile input: every truncation and thousands of byte flips of a small capture
//! (as usbmon text and as pcap) either fail with an error naming the file, or learn a spec that
//! reads back to the same bytes; nothing panics. The generator is a fixed xorshift, so the
//! inputs are the same every run.

use calametra_capture::learn::format::LearnedSpec;
use calametra_capture::learn::{learn, Input, Selection};
use calametra_capture::{pcap, usbmon_bin, Order};
use calametra_core::spec::Spec;

const TEXT: &str = "\
00000002 2000 S Ci:1:002:0 s 80 06 0100 0000 0012 18 <
00000002 2050 C Ci:1:002:0 0 18 = 12010002 00000040 34120100 00010102 0001
00000003 3000 S Ci:1:002:0 s c0 01 0000 0000 0001 1 <
00000003 3040 C Ci:1:002:0 0 1 = 0a
00000004 3100 S Bi:1:002:1 -115 64 <
00000005 4000 S Bo:1:002:1 -115 2 = aabb
00000005 4020 C Bo:1:002:1 0 2 >
00000004 4300 C Bi:1:002:1 0 1 = cc
00000007 5100 S Ii:1:002:3 -115:8 8 <
00000007 7000 C Ii:1:002:3 0:8 1 = 0e
";

/// Learns `bytes` as file `name`: an error must name the file; a spec must read back whole.
fn survive(name: &str, bytes: &[u8]) -> bool {
    let input = match Input::parse(name, bytes) {
        Ok(i) => i,
        Err(e) => {
            assert!(e.to_string().contains(name), "{e}");
            return false;
        }
    };
    match learn(&[input], &Selection::Only) {
        Err(e) => {
            assert!(e.to_string().contains(name), "{e}");
            false
        }
        Ok((spec, _)) => {
            let json = spec.to_json();
            let parsed = Spec::parse("back.json", &json).expect("a learned spec is JSON");
            let back = LearnedSpec::from_spec(&parsed).expect("a learned spec reads back");
            assert_eq!(back.to_json(), json);
            true
        }
    }
}

fn pcap_of(text: &[u8]) -> Vec<u8> {
    let c = calametra_capture::Capture::parse("t.txt", text).unwrap();
    let packets: Vec<Vec<u8>> = c
        .events
        .iter()
        .map(|e| usbmon_bin::build_packet(e, 220, Order::Little))
        .collect();
    pcap::build(220, Order::Little, &packets)
}

#[test]
fn truncated_and_flipped_captures_fail_clearly_or_learn_a_spec_that_reads_back() {
    let text = TEXT.as_bytes().to_vec();
    let bin = pcap_of(&text);
    assert!(survive("whole.txt", &text) && survive("whole.pcap", &bin));
    let mut learned = 0;
    for (name, base) in [("cut.txt", &text), ("cut.pcap", &bin)] {
        for n in 0..base.len() {
            learned += usize::from(survive(name, &base[..n]));
        }
    }
    let mut x: u64 = 0x9e37_79b9_7f4a_7c15;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    for (name, base) in [("flip.txt", &text), ("flip.pcap", &bin)] {
        for _ in 0..1500 {
            let mut b = base.clone();
            for _ in 0..1 + next() % 4 {
                let at = (next() % b.len() as u64) as usize;
                b[at] ^= 1 << (next() % 8);
            }
            learned += usize::from(survive(name, &b));
        }
    }
    assert!(learned > 100, "only {learned} variants learned");
}

#[test]
fn a_cut_pcap_names_the_file_and_the_byte() {
    let bin = pcap_of(TEXT.as_bytes());
    let e = Input::parse("dock.pcap", &bin[..bin.len() - 7])
        .expect_err("a cut pcap is an error")
        .to_string();
    assert!(e.contains("dock.pcap") && e.contains("byte "), "{e}");
}

#[test]
fn a_key_answered_the_same_twice_in_a_row_is_steady_and_one_asked_between_others_is_not() {
    let read = |tag: u32, t: u64, req: &str, answer: &str| {
        format!(
            "{tag:08x} {t} S Ci:1:002:0 s c0 {req} 0000 0000 0001 1 <\n\
             {tag:08x} {} C Ci:1:002:0 0 1 = {answer}\n",
            t + 10
        )
    };
    // c0/01 answers 0a, 0b, 0b (the last two in a row); c0/02 answers 0c, c0/01 between, 0c.
    let text = [
        read(1, 100, "01", "0a"),
        read(2, 200, "02", "0c"),
        read(3, 300, "01", "0b"),
        read(4, 400, "01", "0b"),
        read(5, 500, "02", "0c"),
    ]
    .concat();
    let (spec, _) = learn(
        &[Input::parse("steady.txt", text.as_bytes()).unwrap()],
        &Selection::Only,
    )
    .unwrap();
    let steady: Vec<(&str, bool)> = spec
        .control
        .iter()
        .map(|k| (k.name.as_str(), k.steady))
        .collect();
    assert_eq!(
        steady,
        [
            ("c001.0000.0000.0001", true),
            ("c002.0000.0000.0001", false)
        ]
    );
    let json = String::from_utf8(spec.to_json()).unwrap();
    assert_eq!(json.matches("\"steady\": true").count(), 1, "{json}");
}

#[test]
fn several_captures_keep_their_outcomes_in_the_order_given_and_each_names_its_source() {
    let first = Input::parse("one.txt", TEXT.as_bytes()).unwrap();
    let other = TEXT.replace(" = 0a", " = 0b").replace(":1:002:", ":3:007:");
    let second = Input::parse("dir/two.txt", other.as_bytes()).unwrap();
    let (spec, report) = learn(&[first, second], &Selection::Only).unwrap();
    let files: Vec<(&str, u16, u8)> = spec
        .captures
        .iter()
        .map(|c| (c.file.as_str(), c.bus, c.address))
        .collect();
    assert_eq!(files, [("one.txt", 1, 2), ("two.txt", 3, 7)]);
    assert_eq!(
        spec.captures[1].sha256,
        calametra_core::trace::sha256_hex(other.as_bytes())
    );
    let read = spec
        .control
        .iter()
        .find(|k| k.name == "c001.0000.0000.0001")
        .unwrap();
    use calametra_capture::learn::format::Outcome;
    assert_eq!(
        read.outcomes,
        [Outcome::Data(vec![0x0a]), Outcome::Data(vec![0x0b])]
    );
    assert_eq!(spec.events.len(), 2);
    // The second capture's event follows the second answer of the same bulk OUT key.
    assert_eq!(spec.events[1].after, Some((spec.out[0].name.clone(), 2)));
    assert!(
        report.to_string().contains("two.txt: bus 3 device 7"),
        "{report}"
    );
}
