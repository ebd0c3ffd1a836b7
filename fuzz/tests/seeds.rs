//! Makes the synthesized part of the seed corpora under `fuzz/seeds/` from real inputs: the
//! JCD543 capture in `refdata/` (cut into small pcapng files, re-framed as pcap and
//! usbmon text, replayed as request sequences for the Trigger 6 model), DFU campaigns for the
//! DFU models, and usbredir streams a guest sends (and the bridge's replies to them).
//!
//! The project's own files (specs, fault schedules, the regression files and traces the
//! harness tests write) are copied into `fuzz/seeds/` by hand; see `fuzz/README.md`.
//!
//! Run: `cargo test --manifest-path fuzz/Cargo.toml --test seeds -- --ignored`.

use calametra_capture::{
    self as capture, pcap, pcapng, usbmon_bin, Capture, Event, EventKind, Order,
};
use calametra_capture::{Status, XferType};
use calametra_fuzz::{host, models_from, spec, Op};
use calametra_qemu::proto::{Caps, ControlHeader, Packet, Status as RStatus, HOST_CAPS};
use calametra_qemu::{Bridge, BridgeOptions};
use std::path::{Path, PathBuf};

/// A file of the repository's `refdata/` folder.
fn refdata(name: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../refdata")
        .join(name);
    assert!(
        p.exists(),
        "refdata {} not found: it is part of the repository",
        p.display()
    );
    p
}

fn seeds(target: &str) -> PathBuf {
    let p = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("seeds")
        .join(target);
    std::fs::create_dir_all(&p).unwrap();
    p
}

fn write(target: &str, name: &str, bytes: &[u8]) {
    std::fs::write(seeds(target).join(name), bytes).unwrap();
}

/// The decompressed real capture.
fn real_pcapng() -> Vec<u8> {
    use std::io::Read;
    let gz = std::fs::read(refdata("trace-JCD543-20220514T1928-4k-edid.pcapng.gz")).unwrap();
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(&gz[..])
        .read_to_end(&mut out)
        .unwrap();
    out
}

/// The little-endian pcapng blocks of `file`: (type, bytes of the whole block).
fn blocks(file: &[u8]) -> Vec<(u32, &[u8])> {
    let mut v = Vec::new();
    let mut at = 0;
    while at + 12 <= file.len() {
        let ty = u32::from_le_bytes(file[at..at + 4].try_into().unwrap());
        let len = u32::from_le_bytes(file[at + 4..at + 8].try_into().unwrap()) as usize;
        assert!(len >= 12 && at + len <= file.len(), "block at {at}");
        v.push((ty, &file[at..at + len]));
        at += len;
    }
    v
}

/// A valid pcapng made of the real file's non-packet blocks (section header, interface
/// descriptions, statistics) and the packet blocks in `range`.
fn cut(blocks: &[(u32, &[u8])], range: std::ops::Range<usize>) -> Vec<u8> {
    let mut out = Vec::new();
    let mut packets = 0;
    for (ty, b) in blocks {
        let is_packet = *ty == 6 || *ty == 3;
        if !is_packet || range.contains(&packets) {
            out.extend_from_slice(b);
        }
        if is_packet {
            packets += 1;
        }
    }
    out
}

/// One usbmon text line for `e` (the kernel's `1u` format, data cut to 32 bytes).
fn text_line(e: &Event) -> String {
    let ty = match e.xfer {
        XferType::Control => 'C',
        XferType::Bulk => 'B',
        XferType::Interrupt => 'I',
        XferType::Isochronous => 'Z',
    };
    let dir = if e.endpoint & 0x80 != 0 { 'i' } else { 'o' };
    let kind = match e.kind {
        EventKind::Submit => 'S',
        EventKind::Complete => 'C',
        EventKind::Error => 'E',
    };
    let mut s = format!(
        "{:016x} {} {kind} {ty}{dir}:{}:{:03}:{}",
        e.id,
        e.t_us.rem_euclid(1 << 32),
        e.bus,
        e.device,
        e.endpoint & 0x0f
    );
    match (e.kind, e.setup) {
        (EventKind::Submit, Some(st)) => s.push_str(&format!(
            " s {:02x} {:02x} {:04x} {:04x} {:04x}",
            st.request_type, st.request, st.value, st.index, st.length
        )),
        _ => s.push_str(&format!(" {}", e.status)),
    }
    s.push_str(&format!(" {}", e.length));
    if e.data.is_empty() {
        s.push_str(if e.endpoint & 0x80 != 0 { " <" } else { " >" });
    } else {
        s.push_str(" =");
        for w in e.data.chunks(4).take(8) {
            s.push(' ');
            for b in w {
                s.push_str(&format!("{b:02x}"));
            }
        }
    }
    s
}

fn capture_seeds(file: &[u8]) {
    let bl = blocks(file);
    let n_packets = bl.iter().filter(|(t, _)| *t == 6 || *t == 3).count();
    let events = Capture::parse("real.pcapng", file).unwrap().events;
    assert_eq!(events.len(), n_packets);
    // Windows: the enumeration, the EDID and status reads, the timing table, the modeset and
    // the first bulk and interrupt traffic, and a stretch of the end.
    let find = |pred: &dyn Fn(&Event) -> bool| events.iter().position(pred).unwrap_or(0);
    let edid = find(&|e| {
        e.setup
            .is_some_and(|s| s.request == 0x80 && s.request_type == 0xc0)
    });
    let timing = find(&|e| e.setup.is_some_and(|s| s.request == 0x89));
    let modeset = find(&|e| e.setup.is_some_and(|s| s.request == 0x12));
    let bulk = find(&|e| e.xfer == XferType::Bulk);
    let intr = find(&|e| e.xfer == XferType::Interrupt && e.kind == EventKind::Complete);
    let windows = [
        ("enumeration", 0..48),
        ("edid-status", edid.saturating_sub(8)..edid + 24),
        ("timing-table", timing.saturating_sub(4)..timing + 20),
        ("modeset", modeset.saturating_sub(10)..modeset + 20),
        ("bulk", bulk.saturating_sub(2)..bulk + 12),
        ("interrupt", intr.saturating_sub(6)..intr + 6),
        ("tail", n_packets - 16..n_packets),
    ];
    for (name, r) in windows {
        let pcapng = cut(&bl, r.clone());
        let mut picked: Vec<Event> = events[r.clone()].to_vec();
        for e in &mut picked {
            e.data.truncate(4096);
        }
        assert_eq!(
            Capture::parse("cut.pcapng", &pcapng).unwrap().events.len(),
            r.len()
        );
        if pcapng.len() <= 48 * 1024 {
            write("capture", &format!("jcd543-{name}.pcapng"), &pcapng);
        }
        let le220: Vec<Vec<u8>> = picked
            .iter()
            .map(|e| usbmon_bin::build_packet(e, 220, Order::Little))
            .collect();
        let be189: Vec<Vec<u8>> = picked
            .iter()
            .map(|e| usbmon_bin::build_packet(e, 189, Order::Big))
            .collect();
        match name {
            "enumeration" | "timing-table" | "interrupt" => {
                let p = pcap::build(220, Order::Little, &le220);
                Capture::parse("x.pcap", &p).unwrap();
                write("capture", &format!("jcd543-{name}-220le.pcap"), &p);
                let p = pcap::build(189, Order::Big, &be189);
                Capture::parse("x.pcap", &p).unwrap();
                write("capture", &format!("jcd543-{name}-189be.pcap"), &p);
                let p = pcapng::build(189, Order::Big, &be189);
                Capture::parse("x.pcapng", &p).unwrap();
                write("capture", &format!("jcd543-{name}-189be.pcapng"), &p);
            }
            _ => {}
        }
        let mut text = String::new();
        for e in &picked {
            text.push_str(&text_line(e));
            text.push('\n');
        }
        let c = Capture::parse("x.txt", text.as_bytes()).unwrap_or_else(|e| panic!("{e}\n{text}"));
        assert_eq!(c.events.len(), picked.len());
        write(
            "capture",
            &format!("jcd543-{name}.usbmon.txt"),
            text.as_bytes(),
        );
    }
    // A gzipped one, for the detection path.
    let small = cut(&bl, 0..24);
    let gz = {
        use std::io::Write;
        let mut e = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
        e.write_all(&small).unwrap();
        e.finish().unwrap()
    };
    Capture::parse("x.pcapng.gz", &gz).unwrap();
    write("capture", "jcd543-enumeration.pcapng.gz", &gz);
    let _ = capture::MAX_DECOMPRESSED;
}

/// The capture's traffic to the dock, as requests for the model: control transfers and bulk
/// OUT payloads in submission order, interrupt polls, the capture's gaps as time.
fn trigger6_ops(file: &[u8]) -> Vec<Vec<Op>> {
    let c = Capture::parse("real.pcapng", file).unwrap();
    let t = c.transfers();
    let dev = calametra_capture::compare::busiest_device(&t.control).unwrap();
    enum Item<'a> {
        C(&'a capture::ControlTransfer),
        D(&'a capture::DataTransfer),
    }
    let mut items: Vec<(i64, Item)> = Vec::new();
    for x in t.control.iter().filter(|x| (x.bus, x.device) == dev) {
        items.push((x.t_us, Item::C(x)));
    }
    for x in t.data.iter().filter(|x| (x.bus, x.device) == dev) {
        items.push((x.t_us, Item::D(x)));
    }
    items.sort_by_key(|(t, _)| *t);
    let mut ops = Vec::new();
    let mut last = items.first().map(|(t, _)| *t).unwrap_or(0);
    for (t, item) in &items {
        let gap = (t - last).clamp(0, u32::MAX as i64) as u32;
        if gap > 100 {
            ops.push(Op::Advance { us: gap });
        }
        last = *t;
        match item {
            Item::C(x) => ops.push(Op::Control {
                setup: x.setup.to_bytes(),
                data: if x.is_in() {
                    Vec::new()
                } else {
                    x.data.clone()
                },
            }),
            Item::D(x) if x.is_in() => ops.push(Op::In {
                ep: x.endpoint,
                len: x.requested.min(u16::MAX as u32) as u16,
                interrupt: x.xfer == XferType::Interrupt,
            }),
            Item::D(x) if x.status == Status::Ok => {
                let mut data = x.data.clone();
                data.truncate(8192);
                ops.push(Op::Out {
                    ep: x.endpoint,
                    data,
                })
            }
            Item::D(_) => {}
        }
    }
    // The whole session is long; keep a few cuts of it, each under 24 KiB encoded.
    let mut cuts = Vec::new();
    let mut cur = Vec::new();
    let mut size = 0;
    for op in ops {
        let mut b = Vec::new();
        op.encode(&mut b);
        if size + b.len() > 24 * 1024 && !cur.is_empty() {
            cuts.push(std::mem::take(&mut cur));
            size = 0;
        }
        size += b.len();
        cur.push(op);
    }
    cuts.push(cur);
    cuts.truncate(4);
    cuts
}

fn ctl(bm: u8, req: u8, value: u16, index: u16, length: u16, data: &[u8]) -> Op {
    let v = value.to_le_bytes();
    let i = index.to_le_bytes();
    let l = length.to_le_bytes();
    Op::Control {
        setup: [bm, req, v[0], v[1], i[0], i[1], l[0], l[1]],
        data: data.to_vec(),
    }
}

/// A DFU session: enumerate, detach, download an image in blocks with status polls and the
/// poll timeouts waited, manifest, reset, upload it back; then abort and error recovery.
fn dfu_ops(blocks: usize, block_len: u16, wait: bool) -> Vec<Op> {
    let mut v = vec![
        ctl(0x80, 6, 0x0100, 0, 18, &[]),
        ctl(0x00, 5, 3, 0, 0, &[]),
        ctl(0x80, 6, 0x0200, 0, 255, &[]),
        ctl(0x80, 6, 0x0300, 0, 255, &[]),
        ctl(0x80, 6, 0x0301, 0x0409, 255, &[]),
        ctl(0x00, 9, 1, 0, 0, &[]),
        ctl(0xa1, 3, 0, 0, 6, &[]),
        ctl(0x21, 0, 1000, 0, 0, &[]),
        Op::Advance { us: 30_000 },
        Op::Reset,
        ctl(0x80, 6, 0x0100, 0, 18, &[]),
        ctl(0x00, 5, 4, 0, 0, &[]),
        ctl(0x00, 9, 1, 0, 0, &[]),
        ctl(0xa1, 5, 0, 0, 1, &[]),
    ];
    let mut image = Vec::new();
    for b in 0..blocks {
        let data: Vec<u8> = (0..block_len).map(|i| (i as usize * 7 + b) as u8).collect();
        image.extend_from_slice(&data);
        v.push(ctl(0x21, 1, b as u16, 0, block_len, &data));
        v.push(ctl(0xa1, 3, 0, 0, 6, &[]));
        if wait {
            v.push(Op::Advance { us: 5_000 });
        }
        v.push(ctl(0xa1, 3, 0, 0, 6, &[]));
    }
    v.push(ctl(0x21, 1, blocks as u16, 0, 0, &[]));
    for _ in 0..4 {
        v.push(ctl(0xa1, 3, 0, 0, 6, &[]));
        v.push(Op::Advance { us: 40_000 });
    }
    v.push(Op::Reset);
    v.push(Op::Advance { us: 30_000 });
    v.push(ctl(0x21, 0, 1000, 0, 0, &[]));
    v.push(Op::Reset);
    v.push(ctl(0xa1, 2, 0, 0, 2048, &[]));
    v.push(ctl(0xa1, 2, 1, 0, 2048, &[]));
    v.push(ctl(0x21, 6, 0, 0, 0, &[]));
    v.push(ctl(0x21, 1, 5, 0, 16, &[0; 16]));
    v.push(ctl(0xa1, 3, 0, 0, 6, &[]));
    v.push(ctl(0x21, 4, 0, 0, 0, &[]));
    v.push(ctl(0xa1, 5, 0, 0, 1, &[]));
    v
}

fn encode(prefix: &[u8], ops: &[Op]) -> Vec<u8> {
    let mut b = prefix.to_vec();
    for op in ops {
        op.encode(&mut b);
    }
    b
}

/// What a Linux guest sends a usbredir host: its hello, the enumeration as control packets,
/// configuration, then the device's own traffic.
fn guest_stream(model: usize) -> Vec<u8> {
    let caps = Caps {
        ours: HOST_CAPS,
        peer: Some(0xff),
    };
    let mut id = 0u64;
    let mut out = Vec::new();
    let mut push = |p: Packet, out: &mut Vec<u8>| {
        out.extend_from_slice(&p.encode(id, &caps));
        id += 1;
    };
    let mut v = [0u8; 64];
    v[..20].copy_from_slice(b"qemu usb-redir guest");
    out.extend_from_slice(&[0, 0, 0, 0, 68, 0, 0, 0, 0, 0, 0, 0]);
    out.extend_from_slice(&v);
    out.extend_from_slice(&[0xff, 0, 0, 0]);
    let control =
        |bm: u8, req: u8, value: u16, index: u16, length: u16, data: &[u8]| Packet::Control {
            header: ControlHeader {
                endpoint: bm & 0x80,
                request: req,
                requesttype: bm,
                status: RStatus::Success,
                value,
                index,
                length,
            },
            data: data.to_vec(),
        };
    push(Packet::Reset, &mut out);
    push(control(0x80, 6, 0x0100, 0, 64, &[]), &mut out);
    push(Packet::Reset, &mut out);
    push(control(0x80, 6, 0x0100, 0, 18, &[]), &mut out);
    push(control(0x80, 6, 0x0200, 0, 9, &[]), &mut out);
    push(control(0x80, 6, 0x0200, 0, 255, &[]), &mut out);
    push(control(0x80, 6, 0x0f00, 0, 5, &[]), &mut out);
    push(control(0x80, 6, 0x0300, 0, 255, &[]), &mut out);
    push(control(0x80, 6, 0x0302, 0x0409, 255, &[]), &mut out);
    push(control(0x80, 6, 0x0301, 0x0409, 255, &[]), &mut out);
    push(Packet::SetConfiguration { configuration: 1 }, &mut out);
    push(Packet::GetConfiguration, &mut out);
    push(
        Packet::SetAltSetting {
            interface: 0,
            alt: 0,
        },
        &mut out,
    );
    push(Packet::GetAltSetting { interface: 0 }, &mut out);
    if model == 0 {
        push(control(0xc0, 0x88, 0, 0, 4, &[]), &mut out);
        push(control(0xc0, 0x87, 0, 0, 1, &[]), &mut out);
        push(control(0xc0, 0x80, 0, 0, 128, &[]), &mut out);
        push(control(0xc0, 0x84, 0, 0, 4, &[]), &mut out);
        push(control(0x40, 0x1c, 0, 0, 0, &[]), &mut out);
        push(control(0x40, 0x31, 0, 0, 0, &[]), &mut out);
        push(Packet::StartInterruptReceiving { endpoint: 0x83 }, &mut out);
        push(
            Packet::Bulk {
                endpoint: 0x02,
                status: RStatus::Success,
                length: 32,
                stream_id: 0,
                data: vec![0; 32],
            },
            &mut out,
        );
        push(
            Packet::Bulk {
                endpoint: 0x81,
                status: RStatus::Success,
                length: 64,
                stream_id: 0,
                data: Vec::new(),
            },
            &mut out,
        );
        push(Packet::CancelDataPacket, &mut out);
        push(Packet::StopInterruptReceiving { endpoint: 0x83 }, &mut out);
    } else {
        push(control(0xa1, 3, 0, 0, 6, &[]), &mut out);
        push(control(0x21, 0, 1000, 0, 0, &[]), &mut out);
        push(Packet::Reset, &mut out);
        push(control(0x80, 6, 0x0100, 0, 18, &[]), &mut out);
        push(Packet::SetConfiguration { configuration: 1 }, &mut out);
        push(control(0x21, 1, 0, 0, 16, &[0x5a; 16]), &mut out);
        push(control(0xa1, 3, 0, 0, 6, &[]), &mut out);
        push(control(0xa1, 3, 0, 0, 6, &[]), &mut out);
        push(control(0x21, 1, 1, 0, 0, &[]), &mut out);
        push(control(0xa1, 3, 0, 0, 6, &[]), &mut out);
        push(control(0xa1, 2, 0, 0, 64, &[]), &mut out);
        push(control(0x21, 6, 0, 0, 0, &[]), &mut out);
    }
    push(Packet::DeviceDisconnectAck, &mut out);
    push(
        Packet::FilterFilter {
            rules: "-1,-1,-1,-1,1".into(),
        },
        &mut out,
    );
    out
}

#[test]
#[ignore = "writes fuzz/seeds; run by hand when the inputs change"]
fn make_seeds() {
    let file = real_pcapng();
    capture_seeds(&file);

    // setup: the capture for the dock, DFU sessions for the DFU models.
    for (i, ops) in trigger6_ops(&file).iter().enumerate() {
        write(
            "setup",
            &format!("trigger6-capture-{i}"),
            &encode(&[0], ops),
        );
        if i == 0 {
            let head = &ops[..ops.len().min(48)];
            write("spec_fields", "trigger6-capture-0", &encode(&[0, 0], head));
            // One edit: a string of the spec shortened, then the session.
            write(
                "spec_fields",
                "trigger6-edit",
                &encode(&[0, 1, 40, 0, 11, 8, 0], head),
            );
        }
    }
    for (which, name) in [(1u8, "tolerant"), (2, "nontolerant")] {
        write(
            "setup",
            &format!("dfu-{name}-download"),
            &encode(&[which], &dfu_ops(3, 2048, true)),
        );
        write(
            "setup",
            &format!("dfu-{name}-impatient"),
            &encode(&[which], &dfu_ops(2, 64, false)),
        );
        write(
            "spec_fields",
            &format!("dfu-{name}"),
            &encode(&[which, 0], &dfu_ops(1, 256, true)),
        );
        write(
            "spec_fields",
            &format!("dfu-{name}-edit"),
            &encode(
                &[which, 2, 10, 0, 2, 7, 30, 0, 6, 0, 4, 0],
                &dfu_ops(1, 64, true),
            ),
        );
    }

    // usbredir: what the guest sends, and what the bridge sends back.
    for (which, name) in [(0usize, "trigger6"), (1, "dfu")] {
        let g = guest_stream(which);
        write(
            "usbredir",
            &format!("guest-{name}"),
            &[&[0u8][..], &g].concat(),
        );
        write(
            "usbredir_bridge",
            &format!("guest-{name}"),
            &[&[which as u8, 0][..], &g].concat(),
        );
        write(
            "usbredir_bridge",
            &format!("guest-{name}-faults"),
            &[&[which as u8, 0x85][..], &g].concat(),
        );
        let model = models_from(spec(which)).pop().unwrap();
        let mut b = Bridge::new(host(model), BridgeOptions::default()).unwrap();
        b.start();
        b.feed(&g).unwrap();
        let reply = b.take_output();
        assert!(!reply.is_empty());
        write(
            "usbredir",
            &format!("host-{name}"),
            &[&[1u8][..], &reply].concat(),
        );
    }
}
