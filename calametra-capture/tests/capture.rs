//! Capture import and comparison, end to end: the real link-type-220 records and the real
//! gzipped JCD543 capture from `refdata/`, synthesized pcap and pcapng files (189 and 220,
//! both byte orders), usbmon text, malformed files (each error names the file and the offset or
//! line), pseudo-random bytes (never a panic), and a comparison against the loopback device
//! showing every verdict.

use calametra_capture::compare::{self, Options, Reason, Verdict};
use calametra_capture::{
    pcap, pcapng, usbmon_bin, Capture, ControlTransfer, DataTransfer, EventKind, Format, Order,
    Status, XferType,
};
use calametra_core::host::DeviceHost;
use calametra_core::usb::{Loopback, Setup};
use calametra_core::RunConfig;
use std::io::Write;
use std::path::{Path, PathBuf};

/// A file of the repository's `refdata/` folder.
fn refdata(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../refdata")
        .join(name);
    assert!(
        p.exists(),
        "refdata file {} not found: it is part of the repository",
        p.display()
    );
    p
}

fn data(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data")
        .join(name)
}

/// The six raw link-type-220 packets of the samples file, as (packet number, bytes).
fn samples() -> Vec<(usize, Vec<u8>)> {
    let text = std::fs::read_to_string(data("usbmon-linktype220-samples.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(|l| {
            let f: Vec<&str> = l.split_whitespace().collect();
            let bytes = calametra_core::hex::decode(f[2]).unwrap();
            assert_eq!(bytes.len(), f[1].parse::<usize>().unwrap());
            (f[0].parse().unwrap(), bytes)
        })
        .collect()
}

fn samples_pcapng() -> Vec<u8> {
    let packets: Vec<Vec<u8>> = samples().into_iter().map(|(_, b)| b).collect();
    pcapng::build(220, Order::Little, &packets)
}

fn gzip(bytes: &[u8]) -> Vec<u8> {
    let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    e.write_all(bytes).unwrap();
    e.finish().unwrap()
}

fn setup(bytes: &str) -> Setup {
    Setup::from_bytes(&calametra_core::hex::decode(bytes).unwrap()).unwrap()
}

/// Checks the three control transfers of the samples (a 1-byte 0x87 read, the 128-byte EDID
/// read, a 32-byte 0x12 OUT).
fn check_sample_transfers(c: &Capture, full_data: bool) {
    let t = c.transfers();
    assert!(t.notes.is_empty(), "{:?}", t.notes);
    assert!(t.data.is_empty());
    let ctl = &t.control;
    assert_eq!(ctl.len(), 3);
    for x in ctl {
        assert_eq!((x.bus, x.device), (6, 25));
        assert_eq!(x.status, Status::Ok);
    }
    assert_eq!(ctl[0].setup, setup("c087000000000100"));
    assert_eq!(ctl[0].data, vec![0]);
    assert_eq!(ctl[1].setup, setup("c080000000008000"));
    assert_eq!(ctl[1].actual, 128);
    let edid = calametra_core::hex::decode("00ffffffffffff0008430401010000003516").unwrap();
    assert!(ctl[1].data.starts_with(&edid));
    assert_eq!(ctl[1].truncated, !full_data);
    assert_eq!(ctl[1].data.len(), if full_data { 128 } else { 32 });
    assert_eq!(ctl[2].setup, setup("4012000000002000"));
    assert!(!ctl[2].is_in());
    assert_eq!(ctl[2].actual, 32);
    assert_eq!(
        calametra_core::hex::encode(&ctl[2].data),
        "288804001e003011000fb00f5800ca08700878080a00bb02e8031d0301010000"
    );
}

#[test]
fn the_refdata_linktype_220_samples_parse_field_by_field() {
    let s = samples();
    assert_eq!(
        s.iter().map(|x| x.0).collect::<Vec<_>>(),
        [103, 104, 137, 138, 143, 144]
    );
    let e = usbmon_bin::parse_packet(&s[2].1, 220, Order::Little, 137).unwrap();
    assert_eq!(e.id, 0xffff_9de8_493e_8600);
    assert_eq!(e.kind, EventKind::Submit);
    assert_eq!(e.xfer, XferType::Control);
    assert_eq!((e.endpoint, e.device, e.bus), (0x80, 25, 6));
    assert_eq!(e.status, -115);
    assert_eq!(e.length, 128);
    assert_eq!(e.setup, Some(setup("c080000000008000")));
    assert!(e.data.is_empty());
    assert_eq!(e.t_us, 1_652_574_426 * 1_000_000 + 39_452);
    let c = usbmon_bin::parse_packet(&s[3].1, 220, Order::Little, 138).unwrap();
    assert_eq!(
        (c.kind, c.status, c.length, c.data.len()),
        (EventKind::Complete, 0, 128, 128)
    );
    assert_eq!(c.setup, None);
    // The same packets in a pcapng file of both byte orders, and a pcap file.
    let le = Capture::parse("samples.pcapng", &samples_pcapng()).unwrap();
    assert_eq!(le.format, Format::Pcapng);
    assert_eq!(le.link_types, [220]);
    assert_eq!(le.events.len(), 6);
    check_sample_transfers(&le, true);
    let rebuilt: Vec<Vec<u8>> = le
        .events
        .iter()
        .map(|e| usbmon_bin::build_packet(e, 220, Order::Big))
        .collect();
    let be = Capture::parse("be.pcapng", &pcapng::build(220, Order::Big, &rebuilt)).unwrap();
    assert_eq!(
        be.events, le.events,
        "big-endian pcapng reads the same events"
    );
    let p = Capture::parse("be.pcap", &pcap::build(220, Order::Big, &rebuilt)).unwrap();
    assert_eq!(p.format, Format::Pcap { nanos: false });
    assert_eq!(p.events.len(), 6);
    check_sample_transfers(&p, true);
}

#[test]
fn synthesized_pcap_of_link_types_189_and_220_in_both_byte_orders() {
    let base = Capture::parse("samples.pcapng", &samples_pcapng()).unwrap();
    for link in [189u32, 220] {
        for order in [Order::Little, Order::Big] {
            let packets: Vec<Vec<u8>> = base
                .events
                .iter()
                .map(|e| usbmon_bin::build_packet(e, link, order))
                .collect();
            assert_eq!(packets[0].len(), if link == 189 { 48 } else { 64 });
            let name = format!("synth-{link}-{order:?}.pcap");
            let c = Capture::parse(&name, &pcap::build(link, order, &packets)).unwrap();
            assert_eq!(c.link_types, [link]);
            assert_eq!(c.events, base.events, "{name}");
            check_sample_transfers(&c, true);
            let name = format!("synth-{link}-{order:?}.pcapng");
            let c = Capture::parse(&name, &pcapng::build(link as u16, order, &packets)).unwrap();
            assert_eq!(c.events, base.events, "{name}");
        }
    }
}

#[test]
fn nanosecond_pcap_and_gzip_are_detected_by_magic_not_name() {
    let packets: Vec<Vec<u8>> = samples().into_iter().map(|(_, b)| b).collect();
    let mut nano = pcap::build(220, Order::Little, &packets);
    nano[..4].copy_from_slice(&0xa1b2_3c4du32.to_le_bytes());
    let c = Capture::parse("x.pcap", &nano).unwrap();
    assert_eq!(c.format, Format::Pcap { nanos: true });
    let gz = gzip(&samples_pcapng());
    let c = Capture::parse("misleading-name.txt", &gz).unwrap();
    assert!(c.gzip);
    assert_eq!(c.format, Format::Pcapng);
    check_sample_transfers(&c, true);
    let text = std::fs::read(data("usbmon-text-sample.txt")).unwrap();
    let c = Capture::parse("capture.pcapng", &gzip(&text)).unwrap();
    assert_eq!((c.format, c.gzip), (Format::UsbmonText, true));
}

#[test]
fn usbmon_text_sample_parses_and_pairs() {
    let c = Capture::load(data("usbmon-text-sample.txt")).unwrap();
    assert_eq!(c.format, Format::UsbmonText);
    assert_eq!(c.events.len(), 10);
    // The JCD543 lines are the samples as text: same transfers, data cut to 32 bytes.
    let jcd = Capture {
        events: c.events[..6].to_vec(),
        ..c.clone()
    };
    check_sample_transfers(&jcd, false);
    assert_eq!(c.events[0].record, 7, "records are line numbers");
    let t = c.transfers();
    assert_eq!(t.control.len(), 4);
    let hub = &t.control[3];
    assert_eq!((hub.bus, hub.device), (1, 1));
    assert_eq!(hub.setup, setup("a300000003000400"));
    assert_eq!(hub.data, vec![1, 5, 0, 0]);
    assert_eq!(hub.t_us, 3_575_914_555);
    assert_eq!(hub.complete_t_us, Some(3_575_914_560));
    assert_eq!(t.data.len(), 1);
    let bulk = &t.data[0];
    assert_eq!(
        (bulk.xfer, bulk.endpoint, bulk.device),
        (XferType::Bulk, 0x02, 5)
    );
    assert_eq!((bulk.requested, bulk.actual, bulk.data.len()), (31, 31, 31));
    assert!(!bulk.is_in() && !bulk.truncated);
    assert_eq!(&bulk.data[..4], b"USBC");
}

#[test]
fn usbmon_text_interrupt_iso_and_error_lines() {
    let text = "\
ffff1 100 S Ii:2:003:1 -115:8 4 <
ffff1 200 C Ii:2:003:1 0:8 4 = 01020304
ffff2 300 S Zi:2:003:3 -115:1:0 2 0:0:192 0:192:192 384 <
ffff2 400 C Zi:2:003:3 0:1:0:0 2 0:0:192 0:192:192 384 = 0a0b0c0d 0e
ffff3 500 S Co:2:003:0 s 21 09 0200 0000 0001 1 = 07
ffff3 501 E Co:2:003:0 -19 0
ffff4 600 S Ci:2:003:0 s 80 00 0000 0000 0002 2 <
ffff4 700 C Ci:2:003:0 -32 0
ffff5 800 S Ci:004:0 s 80 06 0100 0000 0012 18 <
";
    let c = Capture::parse("t.txt", text.as_bytes()).unwrap();
    let t = c.transfers();
    assert_eq!(t.data.len(), 2);
    assert_eq!(t.data[0].xfer, XferType::Interrupt);
    assert_eq!(t.data[0].data, [1, 2, 3, 4]);
    assert_eq!(t.data[1].xfer, XferType::Isochronous);
    assert_eq!((t.data[1].actual, t.data[1].data.len()), (384, 5));
    assert!(t.data[1].truncated);
    assert_eq!(t.control.len(), 3);
    assert_eq!(t.control[0].status, Status::SubmitError(-19));
    assert_eq!(t.control[0].data, [7]);
    assert_eq!(t.control[1].status, Status::Stall);
    assert_eq!(t.control[2].status, Status::NoCompletion);
    assert_eq!(
        (t.control[2].bus, t.control[2].device),
        (0, 4),
        "1t address without a bus"
    );
}

#[test]
fn pairing_notes_orphans_and_reused_ids() {
    let text = "\
aa 1 C Ci:1:002:0 0 1 = 01
bb 2 S Ci:1:002:0 s 80 00 0000 0000 0002 2 <
bb 3 S Ci:1:002:0 s 80 00 0000 0000 0002 2 <
bb 4 C Ci:1:002:0 0 2 = 0100
";
    let t = Capture::parse("o.txt", text.as_bytes())
        .unwrap()
        .transfers();
    assert_eq!(t.control.len(), 2);
    assert_eq!(t.control[0].status, Status::NoCompletion);
    assert_eq!(t.control[1].data, [1, 0]);
    assert_eq!(t.notes.len(), 2, "{:?}", t.notes);
    assert!(t.notes[0].contains("record 1") && t.notes[0].contains("no submission"));
    assert!(t.notes[1].contains("record 3") && t.notes[1].contains("record 2"));
}

/// The lines of `jcd543-4k-edid-control-transfers.txt`, without the comment.
fn reference_lines() -> Vec<String> {
    let text = std::fs::read_to_string(refdata("jcd543-4k-edid-control-transfers.txt")).unwrap();
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.trim().is_empty())
        .map(str::to_string)
        .collect()
}

/// One reference line's fields, parsed independently of `ControlTransfer::to_line`.
fn parse_reference(line: &str) -> (i64, u16, u8, Setup, i32, u32, Vec<u8>) {
    let mut f = std::collections::BTreeMap::new();
    let mut words = line.split_whitespace();
    let ts = words.next().unwrap();
    let (sec, usec) = ts.split_once('.').unwrap();
    let t_us = sec.parse::<i64>().unwrap() * 1_000_000 + usec.parse::<i64>().unwrap();
    for w in words {
        let (k, v) = w.split_once('=').unwrap();
        f.insert(k, v);
    }
    let num = |k: &str| -> i64 {
        let v = f[k];
        match v.strip_prefix("0x") {
            Some(h) => i64::from_str_radix(h, 16).unwrap(),
            None => v.parse().unwrap(),
        }
    };
    let setup = Setup {
        request_type: num("bm") as u8,
        request: num("bReq") as u8,
        value: num("wValue") as u16,
        index: num("wIndex") as u16,
        length: num("wLength") as u16,
    };
    (
        t_us,
        num("bus") as u16,
        num("dev") as u8,
        setup,
        num("status") as i32,
        num("actual") as u32,
        calametra_core::hex::decode(f["data"]).unwrap(),
    )
}

#[test]
fn the_real_gzipped_capture_has_the_75_reference_control_transfers() {
    let path = refdata("trace-JCD543-20220514T1928-4k-edid.pcapng.gz");
    let c = Capture::load(&path).unwrap();
    assert!(c.gzip);
    assert_eq!(c.format, Format::Pcapng);
    assert_eq!(c.link_types, [220]);
    assert_eq!(c.events.len(), 4505);
    let t = c.transfers();
    let want = reference_lines();
    assert_eq!(want.len(), 75);
    assert_eq!(t.control.len(), 75);
    for (i, (got, line)) in t.control.iter().zip(&want).enumerate() {
        let (t_us, bus, dev, setup, status, actual, data) = parse_reference(line);
        let ctx = format!("transfer {i}: {line}");
        assert_eq!(
            got.complete_t_us,
            Some(t_us),
            "{ctx}: the file has completion times"
        );
        assert!(got.t_us < t_us, "{ctx}");
        assert_eq!((got.bus, got.device), (bus, dev), "{ctx}");
        assert_eq!(got.setup, setup, "{ctx}");
        assert_eq!(got.status, Status::from_completion(status), "{ctx}");
        assert_eq!(got.actual, actual, "{ctx}");
        assert_eq!(got.data, data, "{ctx}");
        assert!(!got.truncated, "{ctx}");
        assert_eq!(&got.to_line(), line, "the decoder's own line format");
    }
    assert_eq!(
        t.control
            .iter()
            .filter(|x| x.status == Status::Stall)
            .count(),
        1,
        "one stall: vendor 0xcc"
    );
    // Bulk OUT and interrupt IN are there for later use; five interrupt INs never completed.
    assert_eq!(t.data.len(), 2168 + 12);
    assert_eq!(
        t.data
            .iter()
            .filter(|d| d.status == Status::NoCompletion)
            .count(),
        5
    );
    let intr: Vec<_> = t
        .data
        .iter()
        .filter(|d| d.xfer == XferType::Interrupt && d.status == Status::Ok)
        .collect();
    assert_eq!(intr.len(), 7);
    assert!(intr.iter().all(|d| d.endpoint == 0x83));
    assert!(t.notes.is_empty(), "{:?}", t.notes);
    let devices = c.devices();
    assert_eq!(devices.len(), 1);
    assert_eq!((devices[0].bus, devices[0].device), (6, 25));
    assert_eq!(devices[0].control, 75);
}

fn err_text(r: Result<Capture, calametra_core::Error>) -> String {
    match r {
        Ok(c) => panic!("expected an error, parsed {} events", c.events.len()),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_captures_are_errors_naming_file_and_offset() {
    let e = err_text(Capture::parse("empty.pcapng", b""));
    assert!(
        e.contains("empty.pcapng") && e.contains("byte 0") && e.contains("empty"),
        "{e}"
    );

    let e = err_text(Capture::parse("junk.bin", &[0, 1, 2, 3, 0xff, 0xfe]));
    assert!(
        e.contains("junk.bin") && e.contains("byte 0 (magic)"),
        "{e}"
    );
    assert!(
        e.contains("found 00 01 02 03") && e.contains("expected a pcapng"),
        "{e}"
    );

    let full = samples_pcapng();
    let cut = &full[..full.len() - 10];
    let e = err_text(Capture::parse("cut.pcapng", cut));
    let last_block = full.len() - (28 + 64 + 4); // the last EPB: 28-byte header, 64-byte packet
    assert!(e.contains("cut.pcapng"), "{e}");
    assert!(
        e.contains(&format!("byte {}", last_block + 4)) && e.contains("truncated"),
        "{e}"
    );

    let gz = gzip(cut);
    let e = err_text(Capture::parse("cut.pcapng.gz", &gz));
    assert!(
        e.contains(&format!("decompressed byte {}", last_block + 4)),
        "{e}"
    );
    let e = err_text(Capture::parse("cut.gz", &gz[..gz.len() / 2]));
    assert!(
        e.contains("cut.gz") && e.contains("(gzip)") && e.contains("truncated"),
        "{e}"
    );

    let mut bad_epb = full.clone();
    // The first EPB's captured length (after SHB 28 and IDB 20 bytes: type, len, iface, ts*2).
    let at = 28 + 20 + 20;
    bad_epb[at..at + 4].copy_from_slice(&0x0010_0000u32.to_le_bytes());
    let e = err_text(Capture::parse("caplen.pcapng", &bad_epb));
    assert!(
        e.contains(&format!("byte {at}")) && e.contains("captured length"),
        "{e}"
    );

    let mut bom = full.clone();
    bom[8] = 0x99;
    let e = err_text(Capture::parse("bom.pcapng", &bom));
    assert!(
        e.contains("byte 8") && e.contains("byte-order magic"),
        "{e}"
    );

    let packets: Vec<Vec<u8>> = samples().into_iter().map(|(_, b)| b).collect();
    let eth = pcap::build(1, Order::Little, &packets);
    let e = err_text(Capture::parse("eth.pcap", &eth));
    assert!(e.contains("eth.pcap") && e.contains("byte 20"), "{e}");
    assert!(e.contains("link type 1 is not supported"), "{e}");

    let e = err_text(Capture::parse(
        "usbpcap.pcapng",
        &pcapng::build(249, Order::Little, &packets),
    ));
    assert!(
        e.contains("LINKTYPE_USBPCAP") && e.contains("packet 1"),
        "{e}"
    );

    let mut absurd = pcap::build(220, Order::Little, &packets);
    absurd[24 + 8..24 + 12].copy_from_slice(&u32::MAX.to_le_bytes());
    let e = err_text(Capture::parse("absurd.pcap", &absurd));
    assert!(e.contains("byte 32") && e.contains("absurd"), "{e}");

    let short = pcap::build(220, Order::Little, &[vec![0x53; 30]]);
    let e = err_text(Capture::parse("short.pcap", &short));
    assert!(
        e.contains("byte 40") && e.contains("shorter than the 64-byte"),
        "{e}"
    );

    let mut bad_type = packets.clone();
    bad_type[0][8] = b'X';
    let e = err_text(Capture::parse(
        "type.pcap",
        &pcap::build(220, Order::Little, &bad_type),
    ));
    assert!(
        e.contains(&format!("byte {}", 24 + 16 + 8)) && e.contains("'S'"),
        "{e}"
    );

    let e = err_text(Capture::parse(
        "bad.txt",
        b"ffff1 100 S Ci:1:002:0 s 80 06 0100 0000 0012 18 <\nffff1 101 C Ci:1:002:0 0 18 = 1201zz\n",
    ));
    assert!(e.contains("bad.txt") && e.contains("line 2 (data)"), "{e}");
    let e = err_text(Capture::parse(
        "addr.txt",
        b"ffff1 100 S Qi:1:002:0 s 80 06 0100 0000 0012 18 <\n",
    ));
    assert!(
        e.contains("line 1 (address)") && e.contains("Ci:1:001:0"),
        "{e}"
    );

    let e = Capture::load("/nonexistent/capture.pcapng")
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("/nonexistent/capture.pcapng") && e.contains("cannot open the capture"),
        "{e}"
    );
    // A device is refused before it is read (it would never end).
    let e = Capture::load("/dev/zero").unwrap_err().to_string();
    assert!(
        e.contains("/dev/zero") && e.contains("character device"),
        "{e}"
    );
}

/// A deterministic byte generator (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }
}

/// Parsing must return, never panic; whatever parses must also pair and compare.
fn survive(bytes: &[u8]) {
    if let Ok(c) = Capture::parse("fuzz", bytes) {
        let t = c.transfers();
        let _ = c.devices();
        if !t.control.is_empty() {
            let mut host = DeviceHost::new(Loopback::default(), &RunConfig::default());
            let opts = Options {
                pace: false,
                ..Options::default()
            };
            let r =
                compare::compare_with(&t.control, &mut host, &opts, &mut compare::NoExplanations);
            let _ = r.render();
        }
    }
}

#[test]
fn arbitrary_bytes_and_truncations_never_panic() {
    let full = samples_pcapng();
    let packets: Vec<Vec<u8>> = samples().into_iter().map(|(_, b)| b).collect();
    let text = std::fs::read(data("usbmon-text-sample.txt")).unwrap();
    let seeds: Vec<Vec<u8>> = vec![
        full.clone(),
        pcap::build(220, Order::Big, &packets),
        pcap::build(189, Order::Little, &packets),
        text.clone(),
        gzip(&full),
    ];
    // Every truncation of every valid file.
    for s in &seeds {
        for n in 0..=s.len() {
            survive(&s[..n]);
        }
    }
    let mut rng = Rng(0x5eed_ca1a_3e7a);
    let magics: [&[u8]; 6] = [
        &[0x0a, 0x0d, 0x0d, 0x0a],
        &[0xd4, 0xc3, 0xb2, 0xa1],
        &[0xa1, 0xb2, 0x3c, 0x4d],
        &[0x1f, 0x8b],
        b"ffff1 1 S ",
        b"",
    ];
    for i in 0..6000 {
        let mut b = Vec::new();
        match i % 3 {
            // Random bytes behind a valid magic.
            0 => {
                b.extend_from_slice(magics[rng.below(magics.len())]);
                let n = rng.below(300);
                b.extend((0..n).map(|_| rng.next() as u8));
            }
            // A valid file with a few bytes changed.
            1 => {
                b = seeds[rng.below(seeds.len())].clone();
                for _ in 0..1 + rng.below(6) {
                    let at = rng.below(b.len());
                    b[at] = rng.next() as u8;
                }
            }
            // Text made of usbmon-looking tokens.
            _ => {
                let tokens = [
                    "ffff1",
                    "12",
                    "S",
                    "C",
                    "E",
                    "Ci:1:002:0",
                    "Zo:1:2:3",
                    "s",
                    "80",
                    "06",
                    "0100",
                    "=",
                    "<",
                    "0a0b",
                    "-32",
                    "3:4:5",
                    "\n",
                    "0",
                    "99999999999999999999",
                ];
                b.extend_from_slice(b"ffff1 1 S Ci:1:002:0 ");
                for _ in 0..rng.below(60) {
                    b.extend_from_slice(tokens[rng.below(tokens.len())].as_bytes());
                    b.push(b' ');
                }
            }
        }
        survive(&b);
    }
}

fn ctl(
    id: u64,
    dev: u8,
    t_us: i64,
    setup_hex: &str,
    status: Status,
    data: &[u8],
) -> ControlTransfer {
    let s = setup(setup_hex);
    ControlTransfer {
        bus: 1,
        device: dev,
        endpoint: s.request_type & 0x80,
        id,
        submit_record: id as usize,
        complete_record: Some(id as usize + 1),
        t_us,
        complete_t_us: Some(t_us + 100),
        setup: s,
        status,
        actual: if status == Status::Ok {
            if s.is_in() {
                data.len() as u32
            } else {
                s.length as u32
            }
        } else {
            0
        },
        data: data.to_vec(),
        truncated: false,
    }
}

#[test]
fn compare_against_loopback_shows_every_verdict() {
    let transfers = vec![
        ctl(1, 5, 1_000, "0005070000000000", Status::Ok, &[]), // set_address: skipped
        ctl(2, 5, 2_000, "4001000000000200", Status::Ok, &[7, 8]), // store: same
        ctl(3, 5, 3_000, "c002000000000400", Status::Ok, &[7, 8]), // load: same
        ctl(4, 5, 4_000, "c002000000000400", Status::Ok, &[7, 9]), // differs at 1
        ctl(5, 5, 5_000, "c005000000000100", Status::Ok, &[1]), // model stalls
        ctl(6, 5, 6_000, "c002000000000400", Status::Stall, &[]), // capture stalls
        ctl(7, 5, 7_000, "c005000000000100", Status::Stall, &[]), // both stall: same
        ctl(8, 5, 8_000, "c002000000000400", Status::Error(-71), &[]), // other
        ctl(9, 5, 9_000, "c002000000000200", Status::Ok, &[0xee, 8]), // differs, explained
        ctl(10, 9, 9_500, "c002000000000400", Status::Ok, &[1]), // another device
    ];
    assert_eq!(compare::busiest_device(&transfers), Some((1, 5)));
    let keep = RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    };
    let mut host = DeviceHost::new(Loopback::default(), &keep);
    let mut explain =
        compare::explain_with(|host: &DeviceHost, t: &ControlTransfer, v: &Verdict| {
            let stored = host.device::<Loopback>()?.stored().to_vec();
            match v {
                Verdict::Differs { capture, .. } if t.setup.length == 2 && capture[0] == 0xee => {
                    Some(Reason::new(
                        "first_byte_poked",
                        format!(
                            "the capture's device had byte 0 poked; model stores {stored:02x?}"
                        ),
                    ))
                }
                _ => None,
            }
        });
    let r = compare::compare_with(&transfers, &mut host, &Options::default(), &mut explain);
    let s = r.summary();
    assert_eq!(
        s,
        compare::Summary {
            total: 9,
            same: 3,
            differ: 2,
            model_stalls: 1,
            capture_stalls: 1,
            other: 1,
            skipped: 1,
            explained: 1,
            unexplained: 4,
            model_gaps: 2,
        }
    );
    assert!(!s.is_clean());
    assert_eq!(r.device, Some((1, 5)));
    assert_eq!(r.other_devices.get(&(1, 9)), Some(&1));
    let verdicts: Vec<&str> = r.entries.iter().map(|e| e.verdict.word()).collect();
    assert_eq!(
        verdicts,
        [
            "skipped",
            "same",
            "same",
            "differs",
            "model stalls",
            "capture stalls",
            "same",
            "other",
            "differs"
        ]
    );
    assert_eq!(
        r.entries[3].verdict,
        Verdict::Differs {
            capture: vec![7, 9],
            model: vec![7, 8],
            first_difference: 1
        }
    );
    assert_eq!(
        r.entries[5].verdict,
        Verdict::CaptureStalls { model: vec![7, 8] }
    );
    assert_eq!(
        r.entries[8].reason.as_ref().unwrap().name,
        "first_byte_poked"
    );
    assert!(host.now() >= 7_000_000, "paced by the capture's 7 ms");
    let text = r.render();
    let lines: Vec<&str> = text.lines().collect();
    assert!(lines[0].contains("bus 1 device 5"), "{text}");
    assert!(
        lines[1].contains("1 control transfers of bus 1 device 9"),
        "{text}"
    );
    assert!(text.contains("00 05 0007 0000 0000  set_address"), "{text}");
    assert!(text.contains("c0 02 0000 0000 0004  vendor_02"), "{text}");
    assert!(text.contains("differs at byte 1 (capture 2 bytes, model 2 bytes) [UNEXPLAINED]"));
    assert!(text.contains("capture 2 bytes: 0709"), "{text}");
    assert!(text.contains("model   2 bytes: 0708"), "{text}");
    assert!(text.contains("[explained: first_byte_poked: "), "{text}");
    assert!(
        text.contains("model stalls; capture: ok [UNEXPLAINED]"),
        "{text}"
    );
    assert!(text.contains("other: capture error (-71 EPROTO), model answered 2 bytes"));
    assert_eq!(
        lines.last().copied(),
        Some(
            "9 control transfers: 3 same, 2 differ, 1 model stalls, 1 capture stalls, 1 other, \
             1 skipped; 1 explained, 4 unexplained; 2 model gaps (bus 1 device 5)"
        ),
        "{text}"
    );
}

#[test]
fn compare_checks_a_truncated_text_capture_by_its_prefix() {
    let mut t = ctl(1, 2, 0, "c002000000000400", Status::Ok, &[1]);
    t.actual = 2;
    t.truncated = true;
    let mut host = DeviceHost::new(Loopback::default(), &RunConfig::default());
    assert_eq!(host.control(setup("4001000000000200"), &[1, 2]), Ok(vec![]));
    let r = compare::compare(&[t.clone()], &mut host);
    assert_eq!(r.entries[0].verdict, Verdict::Same);
    assert_eq!(
        r.entries[0].note.as_deref(),
        Some("compared the 1 captured bytes of 2")
    );
    // An OUT whose data the capture cut cannot be resent.
    let mut out = ctl(2, 2, 0, "4001000000000400", Status::Ok, &[1, 2]);
    out.truncated = true;
    let r = compare::compare(&[out], &mut host);
    assert!(matches!(r.entries[0].verdict, Verdict::Skipped { .. }));
    assert!(r.summary().is_clean());
}

#[test]
fn usbmon_text_timestamps_unwrap_past_32_bits() {
    let text = "\
a1 4294967000 S Ci:1:002:0 s 80 00 0000 0000 0002 2 <
a1 100 C Ci:1:002:0 0 2 = 0100
";
    let c = Capture::parse("wrap.txt", text.as_bytes()).unwrap();
    assert_eq!(c.events[1].t_us, (1 << 32) + 100);
}

#[test]
fn scripted_events_reach_the_model_at_capture_time() {
    // The capture's device changed (its first byte began to read flipped) between 4 and 5 ms.
    let transfers = vec![
        ctl(1, 5, 1_000, "4001000000000200", Status::Ok, &[7, 8]),
        ctl(2, 5, 4_000, "c002000000000400", Status::Ok, &[7, 8]),
        ctl(3, 5, 5_000, "c002000000000400", Status::Ok, &[0xf8, 8]),
    ];
    let origin = transfers[0].t_us;
    let flip_at = compare::capture_to_virtual(origin, 4_500);
    assert_eq!(flip_at, 3_500_000);
    let model = compare::Scripted::new(Loopback::default()).at(flip_at, "flip", |d, _cx| {
        d.sabotage_flip = true;
    });
    let keep = RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    };
    let mut host = DeviceHost::new(model, &keep);
    let opts = Options {
        origin_us: Some(origin),
        ..Options::default()
    };
    let r = compare::compare_with(&transfers, &mut host, &opts, &mut compare::NoExplanations);
    assert!(r.summary().is_clean(), "{r}");
    assert_eq!(r.summary().same, 3);
    let d = host.device::<compare::Scripted<Loopback>>().unwrap();
    assert_eq!(d.done(), ["flip"]);
    assert!(d.inner().sabotage_flip);
    let external = host
        .lines()
        .iter()
        .find(|l| l.contains("\"external\""))
        .unwrap();
    assert!(external.contains("\"t_ns\":3500000") && external.contains("\"name\":\"flip\""));
}

/// A bulk, interrupt or isochronous transfer of bus 1, submitted at record `sub` and (with
/// `done`) completed at record `done.0` with `done.1`.
fn dt(
    dev: u8,
    xfer: XferType,
    endpoint: u8,
    sub: usize,
    done: Option<(usize, Status)>,
    data: &[u8],
) -> DataTransfer {
    let is_in = endpoint & 0x80 != 0;
    let status = done.map_or(Status::NoCompletion, |d| d.1);
    DataTransfer {
        xfer,
        bus: 1,
        device: dev,
        endpoint,
        id: sub as u64,
        submit_record: sub,
        complete_record: done.map(|d| d.0),
        t_us: sub as i64 * 1_000,
        complete_t_us: done.map(|d| d.0 as i64 * 1_000),
        status,
        requested: if is_in { 64 } else { data.len() as u32 },
        actual: match status {
            Status::Ok => data.len() as u32,
            _ => 0,
        },
        data: data.to_vec(),
        truncated: false,
    }
}

#[test]
fn compare_all_interleaves_bulk_and_interrupt_with_control_and_shows_every_data_verdict() {
    use calametra_capture::Transfers;
    use compare::{DataVerdict, ModelAnswer};
    let (bulk, intr) = (XferType::Bulk, XferType::Interrupt);
    let ok = Status::Ok;
    let mut truncated = dt(5, bulk, 0x01, 16, Some((17, ok)), &[1, 2]);
    truncated.requested = 4;
    truncated.truncated = true;
    let transfers = Transfers {
        control: vec![
            ctl(1, 5, 1_000, "4001000000000200", ok, &[7, 8]), // record 1: store
            ctl(20, 5, 20_000, "c002000000000400", ok, &[7, 8]), // record 20: load
        ],
        data: vec![
            // Submitted early, completed after the OUT at record 5: replayed at record 7.
            dt(5, intr, 0x82, 3, Some((7, ok)), &[0]),
            dt(5, bulk, 0x01, 5, Some((6, ok)), &[1, 2, 3]), // same: taken whole
            dt(5, bulk, 0x81, 8, Some((9, ok)), &[1, 2, 3]), // same bytes
            dt(5, bulk, 0x81, 10, Some((11, ok)), &[9]),     // capture only: the queue is empty
            dt(5, bulk, 0x05, 12, Some((13, ok)), &[4]),     // model stalls, explained
            dt(5, intr, 0x82, 14, Some((15, ok)), &[0x20, 0]), // not offered: explained
            truncated,                                       // skipped
            dt(5, XferType::Isochronous, 0x83, 18, Some((19, ok)), &[]), // skipped
            dt(5, bulk, 0x01, 21, Some((22, ok)), &[4]),     // same; raises an interrupt
            dt(5, intr, 0x82, 23, None, &[]), // pending at the end: the model has one
            dt(5, bulk, 0x81, 24, None, &[]), // pending at the end: the model has [4]
            dt(9, bulk, 0x01, 25, Some((26, ok)), &[1]), // another device
        ],
        notes: Vec::new(),
    };
    struct Hook(Vec<String>);
    impl compare::Explain for Hook {
        fn explain(&mut self, _: &DeviceHost, _: &ControlTransfer, _: &Verdict) -> Option<Reason> {
            None
        }
        fn before_data(
            &mut self,
            _: &mut DeviceHost,
            _: usize,
            t: &DataTransfer,
        ) -> Option<Reason> {
            (t.endpoint == 0x82 && t.data.first() == Some(&0x20))
                .then(|| Reason::new("audio_not_modelled", "the loopback has no audio"))
        }
        fn after_data(&mut self, _: &mut DeviceHost, t: &DataTransfer, e: &compare::DataEntry) {
            self.0.push(format!(
                "{:#04x}@{} {}",
                t.endpoint,
                e.record,
                e.verdict.word()
            ));
        }
        fn explain_data(
            &mut self,
            host: &DeviceHost,
            t: &DataTransfer,
            v: &DataVerdict,
        ) -> Option<Reason> {
            let stored = host.device::<Loopback>()?.stored().len();
            (t.endpoint == 0x05 && *v == DataVerdict::ModelStalls).then(|| {
                Reason::new(
                    "no_endpoint_5",
                    format!("the loopback has no OUT endpoint 5 ({stored} bytes stored)"),
                )
            })
        }
    }
    let keep = RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    };
    let mut host = DeviceHost::new(Loopback::default(), &keep);
    let mut hook = Hook(Vec::new());
    let r = compare::compare_all(&transfers, &mut host, &Options::default(), &mut hook);
    assert_eq!(r.device, Some((1, 5)));
    assert_eq!(r.summary().same, 2, "{r}");
    assert_eq!(r.other_devices_data.get(&(1, 9)), Some(&1));
    let got: Vec<(u8, usize, &str)> = r
        .data
        .iter()
        .map(|e| (e.path.endpoint, e.record, e.verdict.word()))
        .collect();
    assert_eq!(
        got,
        [
            (0x01, 5, "same"),
            (0x82, 7, "same"),
            (0x81, 9, "same"),
            (0x81, 11, "capture only"),
            (0x05, 12, "model stalls"),
            (0x82, 15, "capture only"),
            (0x01, 16, "skipped"),
            (0x83, 19, "skipped"),
            (0x01, 21, "same"),
            (0x82, 23, "model only"),
            (0x81, 24, "model only"),
        ],
        "{r}"
    );
    assert_eq!(hook.0.len(), 11);
    assert_eq!(hook.0[1], "0x82@7 same");
    // Indices count the device's data transfers in submission order.
    assert_eq!(r.data[0].index, 1);
    assert_eq!(r.data[1].index, 0);
    assert_eq!(r.data[9].verdict, DataVerdict::ModelOnly { model: vec![0] });
    assert_eq!(r.data[1].model, Some(ModelAnswer::Data(vec![0])));
    assert_eq!(r.data[3].model, Some(ModelAnswer::Nothing));
    assert_eq!(r.data[0].model, Some(ModelAnswer::Accepted(3)));
    assert_eq!(r.data[4].reason.as_ref().unwrap().name, "no_endpoint_5");
    assert_eq!(
        r.data[5].reason.as_ref().unwrap().name,
        "audio_not_modelled"
    );
    assert_eq!(r.data[5].model, None);
    let sums = r.data_summaries();
    let bulk_out = sums[&compare::DataPath {
        xfer: bulk,
        endpoint: 0x01,
    }];
    assert_eq!((bulk_out.total, bulk_out.same, bulk_out.skipped), (3, 2, 1));
    let intr_in = sums[&compare::DataPath {
        xfer: intr,
        endpoint: 0x82,
    }];
    assert_eq!(
        (
            intr_in.same,
            intr_in.capture_only,
            intr_in.model_only,
            intr_in.explained
        ),
        (1, 1, 1, 1)
    );
    assert_eq!(r.unexplained_data().count(), 3, "{r}");
    assert!(!r.is_clean());
    assert!(
        r.summary().is_clean(),
        "the control transfers alone are clean"
    );
    let text = r.render();
    assert!(text.contains("interrupt IN 0x82"), "{text}");
    assert!(
        text.contains("capture only; the model had nothing (NAK) [UNEXPLAINED]"),
        "{text}"
    );
    assert!(text.contains("[explained: audio_not_modelled: "), "{text}");
    assert!(
        text.contains("model only: 1 bytes where the capture has none"),
        "{text}"
    );
    assert!(
        text.contains("bulk OUT 0x01: 3 transfers (8 bytes): 2 same, 0 differ"),
        "{text}"
    );
    assert!(
        !text.contains("same (taken whole)"),
        "OUTs taken whole are only counted: {text}"
    );
    assert!(host.now() >= 23_000_000, "paced to the end of the capture");
}
