//! Physical comparison (DESIGN.md section 10): the real JCD543 capture in `refdata/`
//! replayed against the Trigger 6 model built from `specs/trigger6-jcd543.json`, control, bulk
//! and interrupt transfers in the order the dock saw them. It must compare clean: every
//! transfer the same, or each difference explained by a named reason from the model's state.
//! The frames its flips show are pictures, pinned by the hash of their decoded pixels, and the
//! capture itself is the evidence for how those pixels are decoded.

use calametra_capture::compare::{DataPath, Report};
use calametra_capture::{Capture, Status, XferType};
use calametra_core::host::DeviceHost;
use calametra_core::spec::Spec;
use calametra_models::trigger6::bulk::{parse_interrupt, DisplayEvent, DmaHeader, VideoHeader};
use calametra_models::trigger6::capture::{
    compare_capture, compare_capture_with, CompareOptions, Comparison, Model,
};
use calametra_models::trigger6::scanout::decode_png;
use calametra_models::trigger6::PixelFormat::{self, Nv12, Rgb24};
use calametra_models::trigger6::Scanout;
use std::cell::RefCell;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::rc::Rc;

const CAPTURE: &str = "trace-JCD543-20220514T1928-4k-edid.pcapng.gz";

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

fn spec() -> Spec {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../specs/trigger6-jcd543.json");
    Spec::load(&path).unwrap_or_else(|e| panic!("{e}"))
}

fn run(replay_hotplug: bool) -> (Report, DeviceHost) {
    let capture = Capture::load(refdata(CAPTURE)).unwrap_or_else(|e| panic!("{e}"));
    compare_capture(&capture, &spec(), replay_hotplug).unwrap_or_else(|e| panic!("{e}"))
}

#[test]
fn the_real_capture_compares_clean_against_trigger6() {
    let (report, host) = run(true);
    let s = report.summary();
    assert_eq!(report.device, Some((6, 25)));
    assert_eq!(s.total, 75, "{report}");
    assert!(s.is_clean(), "{report}");
    assert_eq!(s.same, 75, "every transfer the same:\n{report}");
    assert_eq!(s.model_gaps, 0, "{report}");
    let model = host.device::<Model>().unwrap();
    assert_eq!(model.done().len(), 1, "the hot-plug ran");
    assert!(model.inner().connected(0));
}

#[test]
fn without_the_hotplug_each_difference_is_explained_by_the_model_state() {
    let (report, _) = run(false);
    let s = report.summary();
    assert_eq!(s.total, 75);
    assert!(s.is_clean(), "{report}");
    assert!(s.explained > 0, "{report}");
    for e in report.entries.iter().filter(|e| e.reason.is_some()) {
        assert_eq!(e.reason.as_ref().unwrap().name, "hotplug_not_replayed");
    }
    assert!(report
        .render()
        .contains("[explained: hotplug_not_replayed: "));
}

fn compare_whole(frames_dir: Option<PathBuf>) -> (Comparison, Vec<Scanout>) {
    let capture = Capture::load(refdata(CAPTURE)).unwrap_or_else(|e| panic!("{e}"));
    let seen = Rc::new(RefCell::new(Vec::new()));
    let s2 = seen.clone();
    let c = compare_capture_with(
        &capture,
        &spec(),
        &CompareOptions {
            replay_hotplug: true,
            frames_dir,
        },
        move |_, scanout| s2.borrow_mut().push(scanout.clone()),
    )
    .unwrap_or_else(|e| panic!("{e}"));
    let pictures = seen.borrow().clone();
    (c, pictures)
}

fn path(xfer: XferType, endpoint: u8) -> DataPath {
    DataPath { endpoint, xfer }
}

#[test]
fn the_capture_bulk_and_interrupt_paths_compare_clean_with_the_counts() {
    let (c, _) = compare_whole(None);
    let r = &c.report;
    assert!(c.is_clean(), "{c}");
    assert_eq!(r.summary().same, 75, "{c}");
    let sums = r.data_summaries();
    assert_eq!(
        sums.len(),
        2,
        "bulk OUT 0x02 and interrupt IN 0x83 only: {c}"
    );
    // Bulk OUT: 1,084 DMA headers and their 1,084 data packets, every one taken whole.
    let bulk = sums[&path(XferType::Bulk, 0x02)];
    assert_eq!(
        (
            bulk.total,
            bulk.same,
            bulk.bytes,
            bulk.unexplained,
            bulk.model_gaps
        ),
        (2168, 2168, 87_462_080, 0, 0),
        "{c}"
    );
    assert_eq!(c.bulk.total_commands(), 1084);
    assert_eq!(
        c.bulk.commands,
        BTreeMap::from([(0, 913), (3, 171)]),
        "913 display commands (783 RGB24 chunks + 130 NV12), 171 audio"
    );
    assert_eq!(c.bulk.payloads, BTreeMap::from([(0, 4), (3, 171)]));
    assert!(
        c.bulk.in_progress.is_empty() && c.bulk.refused.is_empty(),
        "{c}"
    );
    assert_eq!(c.bulk.model_gaps, 0);
    // RAM writes: the four display payloads, 3 x 0x17bb030 + 0xbdd830 bytes, inside 58 MiB.
    assert!(c.bulk.ram_in_bounds(), "{c}");
    assert_eq!(
        (c.bulk.ram_writes, c.bulk.ram_bytes, c.bulk.ram_refused),
        (913, 3 * 0x17b_b030 + 0xbd_d830, 0)
    );
    assert_eq!(c.bulk.ram_extent, 0x18a_aaf0 + 0x17b_b030);
    assert_eq!(c.bulk.vram_size, 58 << 20);
    // Interrupt IN: the hot-plug and the four fences the same bytes, the two audio packets
    // explained, the five URBs pending at the end silent on both sides.
    let intr = sums[&path(XferType::Interrupt, 0x83)];
    assert_eq!(
        (
            intr.total,
            intr.same,
            intr.differ,
            intr.capture_only,
            intr.model_only,
            intr.explained,
            intr.unexplained
        ),
        (12, 10, 0, 2, 0, 2, 0),
        "{c}"
    );
    let packets: Vec<(&str, Vec<DisplayEvent>)> = r
        .data
        .iter()
        .filter(|e| e.path.endpoint == 0x83 && e.status == Status::Ok)
        .map(|e| (e.verdict.word(), parse_interrupt(&e.capture_in)))
        .collect();
    assert_eq!(
        packets,
        [
            ("same", vec![DisplayEvent::Hotplug(0)]),
            ("capture only", vec![]),
            ("same", vec![DisplayEvent::FenceDone(1)]),
            ("capture only", vec![]),
            ("same", vec![DisplayEvent::FenceDone(2)]),
            ("same", vec![DisplayEvent::FenceDone(3)]),
            ("same", vec![DisplayEvent::FenceDone(4)]),
        ]
    );
    for e in r.data.iter().filter(|e| e.reason.is_some()) {
        let reason = e.reason.as_ref().unwrap();
        assert_eq!(reason.name, "audio_interrupt_not_modelled");
        assert_eq!(e.capture_in[0], 0x20, "FuncMask audio");
    }
    // Frames: three RGB24 and one NV12 3840x2160 payload, each flipped with its fence.
    let frames: Vec<_> = c
        .frames
        .iter()
        .map(|f| {
            let h = &f.record.header;
            (
                f.record.flip.fence,
                f.format,
                (f.width, f.height),
                (h.y_pitch, h.uv_pitch),
                (f.record.payload_addr, f.record.payload_len),
                f.record.fragments,
            )
        })
        .collect();
    assert_eq!(
        frames,
        [
            (1, Rgb24, (3840, 2160), (11520, 0), (0x30, 0x17b_b030), 261),
            (
                2,
                Rgb24,
                (3840, 2160),
                (11520, 0),
                (0xc5_5590, 0x17b_b030),
                261
            ),
            (
                3,
                Rgb24,
                (3840, 2160),
                (11520, 0),
                (0x18a_aaf0, 0x17b_b030),
                261
            ),
            (4, Nv12, (3840, 2160), (3840, 3840), (0, 0xbd_d830), 130),
        ]
    );
    let model = c.model().unwrap();
    assert_eq!(model.completed_fences(), [1, 2, 3, 4]);
    let text = c.to_string();
    assert!(
        text.contains(
            "bulk commands accepted: 1084 (913 display (session 0), 171 audio (session 3))"
        ),
        "{text}"
    );
    assert!(text.contains("frames reassembled and flipped: 4"), "{text}");
}

/// SHA-256 of the decoded RGB pixels of the capture's four frames (fences 1 to 4): two black
/// RGB24 frames, the RGB24 frame that carries NV12 bytes, and the NV12 Windows desktop.
const CAPTURE_FRAMES: [&str; 4] = [
    "5319c5a4fa603cd501927bb6001fa64460eab83705c923c14afec98cf7bfc1bc",
    "5319c5a4fa603cd501927bb6001fa64460eab83705c923c14afec98cf7bfc1bc",
    "c968b50e0ca3715d8dca50f5e5d057025b552ff6f1e22f7ae7182698a070d6fb",
    "08e547ac9b216cf1aa5925d565b21d1de528b6a8ca80d5d9ba8085d51c863c09",
];

#[test]
fn the_capture_frames_are_pictures_whose_size_and_format_match_their_flip_headers() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("capture-frames");
    let _ = std::fs::remove_dir_all(&dir);
    let (c, pictures) = compare_whole(Some(dir.clone()));
    assert_eq!(c.frames.len(), 4, "{c}");
    assert_eq!(pictures.len(), 4);
    for (i, (f, pic)) in c.frames.iter().zip(&pictures).enumerate() {
        let h = &f.record.header;
        // The picture's size and format are the flip header's: the pitch holds exactly one
        // line of the format, and the payload after the header is exactly its planes.
        let format = PixelFormat::from_code(h.target_format).unwrap();
        assert_eq!(format, pic.format);
        assert_eq!(h.source_format, h.target_format);
        assert_eq!(
            format.line_bytes(pic.width),
            u32::from(h.y_pitch),
            "frame {i}"
        );
        let planes = match format {
            Nv12 => u32::from(h.y_pitch) * pic.height + u32::from(h.uv_pitch) * pic.height / 2,
            _ => u32::from(h.y_pitch) * pic.height,
        };
        assert_eq!(planes, h.payload_size, "frame {i}");
        assert_eq!(f.record.payload_len, 48 + h.payload_size);
        assert_eq!(
            h.y_offset,
            f.record.payload_addr + 48,
            "plane right after the header"
        );
        if format == Nv12 {
            assert_eq!(h.uv_offset, h.y_offset + u32::from(h.y_pitch) * pic.height);
        }
        assert_eq!((pic.width, pic.height), (3840, 2160));
        // The pinned pixels, and the PNG a person opens decodes back to them.
        assert_eq!(pic.sha256(), f.sha256);
        assert_eq!(
            f.sha256, CAPTURE_FRAMES[i],
            "frame {i} (fence {})",
            pic.fence
        );
        let png = f.png.as_ref().expect("written");
        assert!(png.starts_with(&dir), "{}", png.display());
        let (w, hgt, px) = decode_png(&std::fs::read(png).unwrap()).unwrap();
        assert_eq!((w, hgt), (pic.width, pic.height));
        assert_eq!(
            calametra_core::trace::sha256_hex(&px),
            f.sha256,
            "{}",
            png.display()
        );
    }
    let names: Vec<String> = c
        .frames
        .iter()
        .map(|f| {
            f.png
                .as_ref()
                .unwrap()
                .file_name()
                .unwrap()
                .to_string_lossy()
                .into_owned()
        })
        .collect();
    assert_eq!(
        names,
        [
            "01-out0-fence1-rgb24-3840x2160.png",
            "02-out0-fence2-rgb24-3840x2160.png",
            "03-out0-fence3-rgb24-3840x2160.png",
            "04-out0-fence4-nv12-3840x2160.png",
        ]
    );
    // Fences 1 and 2: the Windows driver's first frames are black.
    assert!(pictures[0].rgb.iter().all(|b| *b == 0));
    // Fence 4, the Windows 10 desktop: the blue wallpaper, the dark taskbar at the bottom.
    let nv12 = &pictures[3];
    let [r, g, b] = nv12.pixel(40, 40).unwrap();
    assert!(b > 200 && g > 100 && r < 40, "wallpaper {r} {g} {b}");
    let [r, g, b] = nv12.pixel(400, 2150).unwrap();
    assert!(r < 40 && g < 40 && b < 50, "taskbar {r} {g} {b}");
}

/// The display payloads of the capture, reassembled straight from its bulk OUT packets (not
/// through the model), by payload address in the order they started.
fn capture_payloads() -> Vec<(u32, Vec<u8>)> {
    let capture = Capture::load(refdata(CAPTURE)).unwrap_or_else(|e| panic!("{e}"));
    let t = capture.transfers();
    let outs: Vec<_> = t
        .data
        .iter()
        .filter(|d| d.endpoint == 0x02 && d.xfer == XferType::Bulk)
        .collect();
    let mut payloads: Vec<(u32, Vec<u8>)> = Vec::new();
    for pair in outs.chunks(2) {
        let mut b = [0u8; 32];
        b.copy_from_slice(&pair[0].data);
        let h = DmaHeader::parse(&b);
        if h.signature != 0 {
            continue;
        }
        if h.packet_offset == 0 {
            payloads.push((h.payload_addr, vec![0; h.payload_len as usize]));
        }
        let p = payloads.last_mut().unwrap();
        let at = h.packet_offset as usize;
        p.1[at..at + pair[1].data.len()].copy_from_slice(&pair[1].data);
    }
    payloads
}

/// The evidence for how the picture decoder reads the capture's two payload formats.
#[test]
fn the_capture_settles_the_nv12_colour_equations_and_explains_the_third_rgb24_frame() {
    let p = capture_payloads();
    assert_eq!(p.len(), 4);
    let (w, h) = (3840usize, 2160usize);
    // The 0xbdd830-byte payload: a FLIP_PRIMARY header (fence 4, TargetFormat and
    // SourceFormat 6 = NV12, pitch 3840 for Y and UV, UV right after Y) and 3840 x 2160 x 1.5
    // bytes.
    let nv12 = &p[3].1;
    assert_eq!(nv12.len(), 0xbd_d830);
    assert_eq!(nv12.len(), 48 + w * h * 3 / 2);
    let mut hb = [0u8; 48];
    hb.copy_from_slice(&nv12[..48]);
    let hdr = VideoHeader::parse(&hb);
    assert_eq!(
        (
            hdr.command,
            hdr.fence,
            hdr.target_format,
            hdr.y_pitch,
            hdr.uv_pitch
        ),
        (3, 4, 6, 3840, 3840)
    );
    let (y, uv) = nv12[48..].split_at(w * h);
    // Under which YCbCr equations does the Windows desktop stay in gamut? Count samples that
    // land outside [-4, 259] (a converter from RGB never produces those, chroma subsampling
    // aside).
    let out_of_gamut = |kr: f64, kb: f64, full: bool| {
        let (ys, cs, off) = if full {
            (1.0, 1.0, 0.0)
        } else {
            (255.0 / 219.0, 255.0 / 224.0, 16.0)
        };
        let kg = 1.0 - kr - kb;
        let (rv, bu) = (2.0 * (1.0 - kr) * cs, 2.0 * (1.0 - kb) * cs);
        let (gu, gv) = (bu * kb / kg, rv * kr / kg);
        let (mut n, mut bad) = (0, 0);
        for row in (0..h).step_by(7) {
            for x in (0..w).step_by(13) {
                let l = ys * (f64::from(y[row * w + x]) - off);
                let i = (row / 2) * w + (x & !1);
                let (u, v) = (f64::from(uv[i]) - 128.0, f64::from(uv[i + 1]) - 128.0);
                let rgb = [l + rv * v, l - gu * u - gv * v, l + bu * u];
                n += 1;
                if rgb.iter().any(|c| *c < -4.0 || *c > 259.0) {
                    bad += 1;
                }
            }
        }
        bad as f64 / n as f64
    };
    let bt601_full = out_of_gamut(0.299, 0.114, true);
    let bt709_full = out_of_gamut(0.2126, 0.0722, true);
    let bt601_limited = out_of_gamut(0.299, 0.114, false);
    let bt709_limited = out_of_gamut(0.2126, 0.0722, false);
    assert!(bt601_full < 0.001, "BT.601 full range: {bt601_full}");
    for (name, f) in [
        ("BT.709 full", bt709_full),
        ("BT.601 limited", bt601_limited),
        ("BT.709 limited", bt709_limited),
    ] {
        assert!(f > 0.5, "{name}: {f}");
    }
    // The third RGB24 flip (fence 3) carries the NV12 frame's bytes in its first 12441600
    // data bytes and zeros after: its picture is NV12 planes read as BGR.
    let third = &p[2].1;
    assert_eq!(third.len(), 0x17b_b030);
    assert_eq!(&third[48..48 + w * h * 3 / 2], &nv12[48..]);
    assert!(third[48 + w * h * 3 / 2..].iter().all(|b| *b == 0));
    // The first two are all zeros: black.
    assert!(p[0].1[48..].iter().all(|b| *b == 0) && p[1].1[48..].iter().all(|b| *b == 0));
}
