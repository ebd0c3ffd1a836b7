//! The Trigger 6 model against small scripted clients: the spec's bytes on the bus, the
//! stateful requests, DMA framing with fragments and interleaved sessions, the second output
//! (its table, monitor, hot-plug and flips), malformed specs and each invariant's sabotage test.
//! The coverage marks over a fixed set of seeds are the framework's floor, in `tests/marks.rs`.

use calametra_core::interface::Interface;
use calametra_core::spec::Spec;
use calametra_core::usb::{ControlIn, ControlType, Recipient, TransferError};
use calametra_core::{run, Failure, RunConfig, Sim};
use calametra_models::trigger6::bulk::{
    DmaHeader, VideoHeader, CMD_FLIP_PRIMARY, CMD_FLIP_SECONDARY, FLAG_CONTINUE, VIDEO_HEADER_LEN,
};
use calametra_models::trigger6::{
    marks, Connection, DriverView, FlipBelief, RamWrite, Sabotage, Trigger6,
};
use std::cell::RefCell;
use std::rc::Rc;

mod support;
use support::*;

fn std_in(request: u8, value: u16, index: u16, length: u16) -> ControlIn {
    ControlIn {
        control_type: ControlType::Standard,
        recipient: Recipient::Device,
        request,
        value,
        index,
        length,
    }
}

fn belief(fence: u32, w: usize, h: usize, pixels: Rc<[u8]>) -> FlipBelief {
    FlipBelief {
        output: 0,
        fence,
        format: 6,
        y_offset: FB,
        uv_offset: FB + (w * h) as u32,
        y_pitch: w as u16,
        uv_pitch: w as u16,
        width: w as u16,
        height: h as u16,
        pixels,
    }
}

#[test]
fn descriptors_and_captured_replies_come_from_the_spec() {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = seen.clone();
    let r = run(RunConfig::default(), &move |sim: &mut Sim| {
        let dev = sim.attach(dock());
        let i = dev.interface();
        let seen = s2.clone();
        sim.spawn("client", async move {
            let mut s = Vec::new();
            s.push(i.control_in(std_in(6, 0x0100, 0, 18), T).await);
            s.push(i.control_in(std_in(6, 0x0200, 0, 255), T).await);
            s.push(i.control_in(std_in(6, 0x0f00, 0, 5), T).await);
            s.push(i.control_in(std_in(6, 0x0301, 0x0409, 255), T).await);
            s.push(i.control_in(vin(0x88, 0, 0, 1), T).await);
            s.push(i.control_in(vin(0xb0, 0, 3, 16), T).await);
            s.push(i.control_in(vin(0xcc, 1, 0, 104), T).await);
            s.push(i.control_in(vin(0x87, 0, 0, 1), T).await);
            s.push(i.control_in(vin(0x84, 1, 0, 4), T).await);
            s.push(i.control_in(vin(0x89, 0, 0x400, 128), T).await);
            *seen.borrow_mut() = s;
        });
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let h = |s: &str| Ok(calametra_core::hex::decode(s).unwrap());
    let s = seen.borrow();
    assert_eq!(s[0], h("12011003ff00000911070156101001020001"));
    assert_eq!(s[1].as_ref().map(|v| v.len()), Ok(57));
    assert_eq!(s[2], h("050f160002"));
    assert_eq!(s[3], h("14034d0043005400200043006f00720070002e00"));
    assert_eq!(s[4], h("3a"));
    assert_eq!(s[5], h("44393035384856000000000000000000"));
    assert_eq!(s[6], Err(TransferError::Stall), "0xcc stalls, as captured");
    assert_eq!(s[7], h("00"), "no monitor at power-on, as captured");
    assert_eq!(s[8], h("1e000000"), "30 records for output 1");
    assert_eq!(s[9].clone().map(|v| v[..4].to_vec()), h("d4180400"));
}

#[test]
fn requests_and_sites_carry_the_spec_names_and_unknown_requests_are_model_gaps() {
    let r = run(
        RunConfig {
            record_sites: true,
            ..RunConfig::default()
        },
        &|sim: &mut Sim| {
            let dev = sim.attach(dock());
            sim.with_world(|w| w.with_model(dev, |m, cx| m.plug_monitor(cx, 0)));
            let i = dev.interface();
            sim.spawn("client", async move {
                let _ = i.control_in(vin(0x87, 0, 0, 1), T).await;
                let _ = i.control_in(vin(0x80, 0, 0, 128), T).await;
                let _ = i.control_out(vout(0x1c, 2, 0, &[]), T).await;
                let _ = i.control_in(vin(0x42, 0, 0, 1), T).await;
            });
        },
    );
    let names: Vec<&str> = r.sites.iter().map(|s| s.name.as_str()).collect();
    assert!(names.contains(&"ctrl.get_status#1"), "{names:?}");
    assert!(names.contains(&"ctrl.get_edid#1"), "{names:?}");
    assert!(names.contains(&"ctrl.finalise#1"), "{names:?}");
    assert!(names.contains(&"init.cold->finalised#1"), "{names:?}");
    match r.failure {
        Some(Failure::ModelGap(g)) => {
            assert!(g.request.contains("c0/42"), "{}", g.request);
            assert!(g.state.contains("init finalised"), "{}", g.state);
        }
        other => panic!("expected a model gap, got {other:?}"),
    }
}

/// GET_DESCRIPTOR for standard types the capture's descriptor set lacks stalls without a model
/// gap, because USB itself settles the answer: a SuperSpeed device answers the device qualifier
/// and other-speed configuration with a Request Error (USB 3.2 §9.4.3, §9.6.2), and any
/// standard type it does not have likewise (§9.4.3: debug, interface, endpoint, companion...,
/// and a configuration index past bNumConfigurations). Types USB leaves to classes and vendors,
/// and strings the capture does not show, stay model gaps.
#[test]
fn standard_descriptors_the_capture_lacks_stall_and_are_no_model_gap() {
    let values: Vec<u16> = [6u16, 7, 0x0a, 4, 5, 8, 9, 0x0b, 0x10, 0x30, 0x31]
        .iter()
        .map(|t| t << 8)
        .chain([0x0201])
        .collect();
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = seen.clone();
    let v2 = values.clone();
    let r = run(RunConfig::default(), &move |sim: &mut Sim| {
        let dev = sim.attach(dock());
        let i = dev.interface();
        let (seen, values) = (s2.clone(), v2.clone());
        sim.spawn("client", async move {
            for v in values {
                let got = i.control_in(std_in(6, v, 0, 255), T).await;
                seen.borrow_mut().push((v, got));
            }
            // The device still answers what it has.
            let got = i.control_in(std_in(6, 0x0100, 0, 18), T).await;
            seen.borrow_mut().push((0x0100, got));
        });
    });
    assert!(r.failure.is_none(), "no model gap: {:?}", r.failure);
    let seen = seen.borrow();
    assert_eq!(seen.len(), values.len() + 1);
    for (v, got) in &seen[..values.len()] {
        assert_eq!(*got, Err(TransferError::Stall), "GET_DESCRIPTOR {v:#06x}");
    }
    assert_eq!(seen[values.len()].1.as_ref().map(|d| d.len()), Ok(18));

    for (value, index) in [(0x2100u16, 0u16), (0x4100, 0), (0x0309, 0x0409)] {
        let r = run(RunConfig::default(), &move |sim: &mut Sim| {
            let dev = sim.attach(dock());
            let i = dev.interface();
            sim.spawn("client", async move {
                let got = i.control_in(std_in(6, value, index, 255), T).await;
                assert_eq!(got, Err(TransferError::Stall));
            });
        });
        match r.failure {
            Some(Failure::ModelGap(g)) => {
                assert!(
                    g.request.contains(&format!("{value:#06x}")),
                    "{}",
                    g.request
                )
            }
            other => panic!("GET_DESCRIPTOR {value:#06x}: expected a model gap, got {other:?}"),
        }
    }
}

#[test]
fn modeset_validates_against_the_table_and_edid_needs_a_monitor() {
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = seen.clone();
    let r = run(RunConfig::default(), &move |sim: &mut Sim| {
        let dev = sim.attach(dock());
        let i = dev.interface();
        let seen = s2.clone();
        sim.spawn("client", async move {
            let mut s = Vec::new();
            // The capture's 4K30 modeset: record 35 with Reduced cleared.
            let cap = calametra_core::hex::decode(
                "288804001e003011000fb00f5800ca08700878080a00bb02e8031d0301010000",
            )
            .unwrap();
            s.push(i.control_out(vout(0x12, 0, 0, &cap), T).await);
            let mut bad = cap.clone();
            bad[8] ^= 1; // hactive
            s.push(i.control_out(vout(0x12, 0, 0, &bad), T).await);
            s.push(i.control_out(vout(0x12, 0, 0, &cap[..16]), T).await);
            s.push(i.control_in(vin(0x80, 0, 0, 128), T).await.map(|_| ()));
            *seen.borrow_mut() = s;
        });
        sim.invariant("modeset_has_valid_timing", move |w| {
            w.model(dev)
                .modeset_has_valid_timing(&DriverView::default())
        });
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(
        *seen.borrow(),
        vec![
            Ok(()),
            Err(TransferError::Stall),
            Err(TransferError::Stall),
            Err(TransferError::Stall)
        ]
    );
}

#[test]
fn a_fragmented_frame_lands_in_vram_and_flips_with_its_fence() {
    let out = Rc::new(RefCell::new(None));
    let o2 = out.clone();
    let r = run(RunConfig::default(), &move |sim: &mut Sim| {
        let dev = sim.attach(dock());
        let i = dev.interface();
        let table = dock().facts().tables[0][VGA];
        let got = Rc::new(RefCell::new(Vec::new()));
        let g2 = got.clone();
        sim.spawn("client", async move {
            i.control_out(vout(0x12, 0, 0, &table), T).await.unwrap();
            let (_, payload) = frame(640, 480, 7);
            upload(&i, FB - VIDEO_HEADER_LEN as u32, &payload, 3, true)
                .await
                .unwrap();
            let irq = i.interrupt_in(0x83, 64).await.unwrap();
            g2.borrow_mut().push(irq);
        });
        let o2 = o2.clone();
        sim.invariant("peek", move |w| {
            if !got.borrow().is_empty() && o2.borrow().is_none() {
                let m = w.model(dev);
                *o2.borrow_mut() =
                    Some((m.flip_state(0), m.shown_frame(0), got.borrow()[0].clone()));
            }
            true
        });
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    assert_eq!(r.marks.get(marks::FRAGMENTED_FRAME), Some(&1));
    let (state, shown, irq) = out.borrow_mut().take().expect("the fence came back");
    assert_eq!(irq[0x13], 0x04, "fence-done event");
    assert_eq!(irq[0x0c], 7, "fence id");
    let f = state.shown.expect("shown");
    assert_eq!((f.fence, f.y_offset, f.y_pitch), (7, FB, 640));
    let shown = shown.expect("decodes");
    let (pixels, _) = frame(640, 480, 7);
    assert_eq!(shown.planes[0], pixels[..640 * 480]);
    assert_eq!(shown.planes[1], pixels[640 * 480..]);
    assert_eq!(
        shown.ycbcr(1, 0),
        Some((pixels[1], pixels[640 * 480], pixels[640 * 480 + 1]))
    );
}

/// The capture interleaves audio DMA commands (session 3) between the fragments of a frame
/// (session 0): `refdata/jcd543-4k-edid-bulk-and-interrupt.txt` has a 0x780-byte audio command
/// at 1652574426.215458 between the first frame's fragments at 0x64000 and 0x7d000. Each
/// session has its own command in progress, so neither disturbs the other.
#[test]
fn audio_commands_between_the_fragments_of_a_frame_are_their_own_session() {
    let out = Rc::new(RefCell::new(None));
    let o2 = out.clone();
    let r = run(RunConfig::default(), &move |sim: &mut Sim| {
        let dev = sim.attach(dock());
        let i = dev.interface();
        let table = dock().facts().tables[0][VGA];
        let got = Rc::new(RefCell::new(None));
        let g2 = got.clone();
        sim.spawn("client", async move {
            i.control_out(vout(0x12, 0, 0, &table), T).await.unwrap();
            let (_, payload) = frame(640, 480, 9);
            let half = payload.len() / 2;
            let display = |off: usize, n: usize, last: bool| DmaHeader {
                signature: 0,
                payload_len: payload.len() as u32,
                payload_addr: FB - VIDEO_HEADER_LEN as u32,
                packet_size: n as u32,
                packet_offset: off as u32,
                flags: if last { 0 } else { FLAG_CONTINUE },
                func: [0; 8],
            };
            let audio = DmaHeader {
                signature: 3,
                payload_len: 0x780,
                payload_addr: 0,
                packet_size: 0x780,
                packet_offset: 0,
                flags: 0,
                func: [0; 8],
            };
            let mut s = Vec::new();
            let h = display(0, half, false);
            s.push(i.bulk_out(0x02, h.to_bytes().to_vec()).await);
            s.push(i.bulk_out(0x02, payload[..half].to_vec()).await);
            s.push(i.bulk_out(0x02, audio.to_bytes().to_vec()).await);
            s.push(i.bulk_out(0x02, vec![0x5a; 0x780]).await);
            let h = display(half, payload.len() - half, true);
            s.push(i.bulk_out(0x02, h.to_bytes().to_vec()).await);
            s.push(i.bulk_out(0x02, payload[half..].to_vec()).await);
            let irq = i.interrupt_in(0x83, 64).await;
            *g2.borrow_mut() = Some((s, irq));
        });
        let o2 = o2.clone();
        sim.invariant("peek", move |w| {
            if got.borrow().is_some() && o2.borrow().is_none() {
                let m = w.model(dev);
                *o2.borrow_mut() = Some((
                    got.borrow_mut().take(),
                    m.flip_state(0),
                    m.dma_stats().clone(),
                    m.rejected().to_vec(),
                    m.flip_log().to_vec(),
                ));
            }
            true
        });
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let (got, state, stats, rejected, log) = out.borrow_mut().take().expect("the client ran");
    let (sent, irq) = got.unwrap();
    let (_, payload) = frame(640, 480, 9);
    let lens = [
        32,
        payload.len() / 2,
        32,
        0x780,
        32,
        payload.len() - payload.len() / 2,
    ];
    assert_eq!(sent, lens.map(Ok).to_vec(), "every transfer taken whole");
    assert!(rejected.is_empty(), "{rejected:?}");
    assert_eq!(irq.unwrap()[0x0c], 9, "fence 9 done");
    assert_eq!(state.shown.map(|f| f.fence), Some(9));
    assert_eq!(stats.fragments, [(0, 2), (3, 1)].into_iter().collect());
    assert_eq!(stats.payloads, [(0, 1), (3, 1)].into_iter().collect());
    assert_eq!(stats.display_bytes, payload.len() as u64);
    assert_eq!(log.len(), 1);
    assert_eq!(
        (log[0].fragments, log[0].payload_len),
        (2, payload.len() as u32)
    );
    assert_eq!(log[0].header.fence, 9);
}

/// Output 1 has its own timing table (the capture's 30 records of 0x89 wValue 1), its own
/// monitor (the HP X27q's DisplayPort EDID, 384 bytes), its own hot-plug event (0x02) and its
/// own flips (FLIP_SECONDARY), shown as a picture.
#[test]
fn the_second_output_has_its_table_monitor_hotplug_and_flips() {
    let out = Rc::new(RefCell::new(None));
    let o2 = out.clone();
    let r = run(RunConfig::default(), &move |sim: &mut Sim| {
        let dev = sim.attach(dock());
        let i = dev.interface();
        sim.with_world(|w| w.with_model(dev, |m, cx| m.plug_monitor(cx, 1)));
        let facts = dock().facts().clone();
        let got = Rc::new(RefCell::new(None));
        let g2 = got.clone();
        sim.spawn("client", async move {
            let irq = i.interrupt_in(0x83, 64).await.unwrap();
            let status = i.control_in(vin(0x87, 1, 0, 1), T).await.unwrap();
            let status0 = i.control_in(vin(0x87, 0, 0, 1), T).await.unwrap();
            let count = i.control_in(vin(0x84, 1, 0, 4), T).await.unwrap();
            let mut table = i.control_in(vin(0x89, 1, 0, 512), T).await.unwrap();
            table.extend(i.control_in(vin(0x89, 1, 0x200, 448), T).await.unwrap());
            let mut edid = Vec::new();
            for at in [0u16, 128, 256] {
                edid.extend(i.control_in(vin(0x80, at, 1, 128), T).await.unwrap());
            }
            // 1080p60, record 26 of output 1's table; a 64x64 RGB24 test card would not be a
            // mode, so the picture is the mode's size.
            let rec = facts.tables[1][26];
            i.control_out(vout(0x12, 1, 0, &rec), T).await.unwrap();
            let (w, h) = (1920usize, 1080usize);
            let pixels: Vec<u8> = (0..w * h * 3).map(|n| (n % 3 * 100) as u8).collect();
            let header = VideoHeader {
                command: CMD_FLIP_SECONDARY,
                payload_size: pixels.len() as u32,
                fence: 5,
                target_format: 9,
                y_pitch: (w * 3) as u16,
                uv_pitch: 0,
                y_offset: FB,
                uv_offset: FB,
                v_offset: FB,
                source_format: 9,
                flag: 0,
            };
            let mut payload = header.to_bytes().to_vec();
            payload.extend_from_slice(&pixels);
            upload(&i, FB - VIDEO_HEADER_LEN as u32, &payload, 4, false)
                .await
                .unwrap();
            let fence = i.interrupt_in(0x83, 64).await.unwrap();
            *g2.borrow_mut() = Some((irq, status, status0, count, table, edid, fence));
        });
        let o2 = o2.clone();
        sim.invariant("peek", move |w| {
            if got.borrow().is_some() && o2.borrow().is_none() {
                let m = w.model(dev);
                *o2.borrow_mut() = Some((
                    got.borrow_mut().take().unwrap(),
                    m.scanout(1),
                    m.flip_state(0),
                    m.monitor_edid(1).map(<[u8]>::to_vec),
                ));
            }
            true
        });
    });
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let ((irq, status, status0, count, table, edid, fence), scanout, flips0, monitor) =
        out.borrow_mut().take().expect("the client ran");
    assert_eq!(
        irq[0x13], 0x02,
        "DisplayEvent 0x02: output 1 connection change"
    );
    assert_eq!((status, status0), (vec![1], vec![0]));
    assert_eq!(count, 30u32.to_le_bytes());
    let want: Vec<u8> = dock().facts().tables[1].concat();
    assert_eq!(table, want, "the capture's 0x89 wValue 1 replies");
    assert_eq!(table.len(), 30 * 32);
    let dp = std::fs::read(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../refdata/hp-x27q-dp.edid.bin"),
    )
    .unwrap();
    assert_eq!(edid, dp, "the HP X27q's DisplayPort EDID, all three blocks");
    assert_eq!(monitor.as_deref(), Some(dp.as_slice()));
    assert_eq!((fence[0x13], fence[0x0c]), (0x04, 5));
    assert!(flips0.shown.is_none(), "output 0 shows nothing");
    let s = scanout.expect("output 1 shows the frame");
    assert_eq!((s.output, s.width, s.height, s.fence), (1, 1920, 1080, 5));
    // B, G, R bytes 0, 100, 200: red 200, green 100, blue 0.
    assert_eq!(s.pixel(0, 0), Some([200, 100, 0]));
    assert_eq!(s.pixel(1919, 1079), Some([200, 100, 0]));
}

// ----- malformed specs -----

fn mutated(f: impl FnOnce(&mut serde_json::Value)) -> String {
    let mut v: serde_json::Value = serde_json::from_slice(SPEC).unwrap();
    f(&mut v);
    let bytes = serde_json::to_vec(&v).unwrap();
    let spec = Spec::parse("specs/broken-t6.json", &bytes).expect("still a spec document");
    match Trigger6::try_from_spec(&spec) {
        Ok(_) => panic!("a malformed spec built a model"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn malformed_specs_name_the_file_and_the_field() {
    let e = mutated(|v| {
        v["requests"]["status"][0]
            .as_object_mut()
            .unwrap()
            .remove("bRequest");
    });
    assert!(
        e.contains("specs/broken-t6.json")
            && e.contains("requests.status.0.bRequest")
            && e.contains("missing"),
        "{e}"
    );
    let e = mutated(|v| {
        v["descriptors"]["device"] = "12011003ff0000091107015610100102".into();
    });
    assert!(
        e.contains("specs/broken-t6.json") && e.contains("descriptors.device") && e.contains("18"),
        "{e}"
    );
    let e = mutated(|v| {
        v["descriptors"]["configuration"] = "09023900010100801f".into();
    });
    assert!(
        e.contains("descriptors.configuration") && e.contains("57") && e.contains("wTotalLength"),
        "{e}"
    );
    let e = mutated(|v| {
        v["timing_table"]["outputs"][0]["records"][3] = "zz".repeat(32).into();
    });
    assert!(
        e.contains("specs/broken-t6.json")
            && e.contains("timing_table.outputs.0.records.3")
            && e.contains("bad hex"),
        "{e}"
    );
    let e = mutated(|v| {
        v["edid"]["hp_x27q"]["bytes"] = "00ffffffffffff00".into();
    });
    assert!(e.contains("edid.hp_x27q.bytes") && e.contains("128"), "{e}");
    let e = mutated(|v| {
        v["requests"]["modeset"] = serde_json::json!([]);
    });
    assert!(e.contains("requests.modeset") && e.contains("0x12"), "{e}");
    let e = mutated(|v| {
        v["ram"]["vram_mib"] = 300.into();
    });
    assert!(e.contains("ram.vram_mib"), "{e}");
    let e = mutated(|v| {
        v["outputs"][1]["monitor"] = "hp_x27q_vga".into();
    });
    assert!(
        e.contains("outputs.1.monitor") && e.contains("hp_x27q_vga"),
        "{e}"
    );
    let e = mutated(|v| {
        v["edid"]["hp_x27q_dp"]["bytes"] = "00ffffffffffff00".repeat(16).into();
    });
    assert!(
        e.contains("edid.hp_x27q_dp.bytes") && e.contains("checksum"),
        "{e}"
    );

    let bad = Spec::parse(
        "specs/broken-t6.json",
        br#"{"format":"calametra.spec.trigger6","version":1,"source":"test"}"#,
    )
    .unwrap();
    let panic = std::panic::catch_unwind(|| Trigger6::from_spec(&bad)).unwrap_err();
    let msg = panic.downcast_ref::<String>().cloned().unwrap_or_default();
    assert!(
        msg.contains("specs/broken-t6.json") && msg.contains("device.name"),
        "{msg}"
    );
}

// ----- sabotage: each invariant catches its lie -----

/// Runs a client against the dock (with `sabotage`), then checks `check` once the client is
/// done; returns the check's verdict.
fn judged(
    sabotage: Option<Sabotage>,
    setup: impl Fn(&mut Trigger6),
    client: impl Fn(
            Interface,
            Rc<RefCell<Client>>,
        ) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>>
        + 'static,
    check: fn(&Trigger6, &DriverView<'_>) -> Result<(), String>,
) -> Result<(), String> {
    let verdict = Rc::new(RefCell::new(None));
    let v2 = verdict.clone();
    let client = Rc::new(client);
    let setup = Rc::new(setup);
    let r = run(RunConfig::default(), &move |sim: &mut Sim| {
        let mut m = dock();
        m.sabotage = sabotage;
        setup(&mut m);
        let dev = sim.attach(m);
        let state = Rc::new(RefCell::new(Client::default()));
        sim.spawn("client", client(dev.interface(), state.clone()));
        let v2 = v2.clone();
        sim.invariant("judge", move |w| {
            let s = state.borrow();
            let view = DriverView {
                connection: s.connection,
                hotplug_seen: [0, 0],
                vram_size: s.vram_size,
                modes: s.modes,
                flips: &s.flips,
                fence_done: s.fence_done,
                writes: &s.writes,
            };
            let r = check(w.model(dev), &view);
            if r.is_err() && v2.borrow().is_none() {
                *v2.borrow_mut() = Some(r.clone());
            }
            r
        });
    });
    let v = verdict.borrow_mut().take();
    match (v, r.failure) {
        (Some(v), _) => v,
        (None, None) => Ok(()),
        (None, Some(f)) => panic!("the client failed: {f}"),
    }
}

/// What a scripted client believes.
#[derive(Default)]
struct Client {
    connection: [Connection; 2],
    vram_size: Option<u64>,
    modes: [Option<[u8; 32]>; 2],
    flips: Vec<FlipBelief>,
    fence_done: u32,
    writes: Vec<RamWrite>,
}

#[test]
fn sabotage_status_matches_connection() {
    let client = |i: Interface,
                  s: Rc<RefCell<Client>>|
     -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move {
            let v = i.control_in(vin(0x87, 0, 0, 1), T).await.unwrap();
            s.borrow_mut().connection[0] = if v == [1] {
                Connection::Connected
            } else {
                Connection::Disconnected
            };
        })
    };
    assert_eq!(
        judged(None, |_| {}, client, Trigger6::status_matches_connection),
        Ok(())
    );
    let e = judged(
        Some(Sabotage::StatusStuckConnected),
        |_| {},
        client,
        Trigger6::status_matches_connection,
    )
    .unwrap_err();
    assert!(
        e.contains("output 0") && e.contains("believes Connected") && e.contains("disconnected"),
        "{e}"
    );
}

#[test]
fn sabotage_modeset_has_valid_timing() {
    let client = |i: Interface,
                  s: Rc<RefCell<Client>>|
     -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move {
            let mut rec = dock().facts().tables[0][26];
            rec[8] = 0x81; // hactive 1921: in no table
            if i.control_out(vout(0x12, 0, 0, &rec), T).await.is_ok() {
                s.borrow_mut().modes[0] = Some(rec);
            }
        })
    };
    assert_eq!(
        judged(None, |_| {}, client, Trigger6::modeset_has_valid_timing),
        Ok(())
    );
    let e = judged(
        Some(Sabotage::AcceptAnyTiming),
        |_| {},
        client,
        Trigger6::modeset_has_valid_timing,
    )
    .unwrap_err();
    assert!(
        e.contains("output 0 runs a mode that is not in its timing table")
            && e.contains("8107d807"),
        "{e}"
    );
}

#[test]
fn sabotage_flip_state_matches_ram() {
    let client = |i: Interface,
                  s: Rc<RefCell<Client>>|
     -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move {
            let rec = dock().facts().tables[0][VGA];
            i.control_out(vout(0x12, 0, 0, &rec), T).await.unwrap();
            s.borrow_mut().modes[0] = Some(rec);
            let (pixels, payload) = frame(640, 480, 1);
            s.borrow_mut().flips.push(belief(1, 640, 480, pixels));
            upload(&i, FB - VIDEO_HEADER_LEN as u32, &payload, 2, false)
                .await
                .unwrap();
            let irq = i.interrupt_in(0x83, 64).await.unwrap();
            s.borrow_mut().fence_done = irq[0x0c] as u32;
        })
    };
    assert_eq!(
        judged(None, |_| {}, client, Trigger6::flip_state_matches_ram),
        Ok(())
    );
    let bad = FB as u64 + 640 * 100 + 5;
    let e = judged(
        Some(Sabotage::FlipVramBit(bad)),
        |_| {},
        client,
        Trigger6::flip_state_matches_ram,
    )
    .unwrap_err();
    assert!(
        e.contains("fence 1") && e.contains("Y plane") && e.contains("line 100, byte 5"),
        "{e}"
    );
    // A driver that believes a fence the dock never completed is caught too.
    let liar = |i: Interface,
                s: Rc<RefCell<Client>>|
     -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move {
            let _ = i.control_in(vin(0x88, 0, 0, 1), T).await;
            s.borrow_mut().fence_done = 9;
        })
    };
    let e = judged(None, |_| {}, liar, Trigger6::flip_state_matches_ram).unwrap_err();
    assert!(e.contains("fence 9"), "{e}");
}

#[test]
fn sabotage_ram_writes_in_bounds() {
    // Writes a header-only flip into the last 48 bytes of the VRAM the dock reports.
    let client = |i: Interface,
                  s: Rc<RefCell<Client>>|
     -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> {
        Box::pin(async move {
            let mib = i.control_in(vin(0x88, 0, 0, 1), T).await.unwrap()[0] as u64;
            let size = mib << 20;
            s.borrow_mut().vram_size = Some(size);
            let addr = (size - VIDEO_HEADER_LEN as u64) as u32;
            let h = VideoHeader {
                command: CMD_FLIP_PRIMARY,
                payload_size: 0,
                fence: 1,
                target_format: 6,
                y_pitch: 640,
                uv_pitch: 640,
                y_offset: FB,
                uv_offset: FB,
                v_offset: FB,
                source_format: 6,
                flag: 0,
            };
            s.borrow_mut().writes.push(RamWrite {
                addr: addr as u64,
                len: VIDEO_HEADER_LEN as u64,
            });
            let _ = upload(&i, addr, &h.to_bytes(), 1, false).await;
        })
    };
    assert_eq!(
        judged(None, |_| {}, client, Trigger6::ram_writes_in_bounds),
        Ok(())
    );
    let e = judged(
        Some(Sabotage::ReportVramMib(64)),
        |_| {},
        client,
        Trigger6::ram_writes_in_bounds,
    )
    .unwrap_err();
    assert!(
        e.contains("0x3ffffd0")
            && e.contains("past the VRAM end 0x3a00000")
            && e.contains("58 MiB"),
        "{e}"
    );
    // The lie that the bounds check is gone: the store's own extent gives it away.
    let e = judged(
        Some(Sabotage::IgnoreVramBounds),
        |m| m.sabotage = Some(Sabotage::IgnoreVramBounds),
        move |i, s| {
            Box::pin(async move {
                let addr = (58u32 << 20) - 16;
                s.borrow_mut().vram_size = Some(58 << 20);
                let _ = upload(&i, addr, &[0u8; 48], 1, false).await;
            })
        },
        Trigger6::ram_writes_in_bounds,
    )
    .unwrap_err();
    assert!(e.contains("VRAM holds bytes up to 0x3a00020"), "{e}");
}
