//! `calametra learn` on the real JCD543 capture and on bad ones: learning then comparing the
//! learned model with the same capture leaves nothing unexplained, learning twice gives the
//! same bytes, and a capture with no device, several devices and no selection, or garbage is
//! a clear error naming the file, never a panic.

mod support;
use std::path::{Path, PathBuf};
use support::tool;

fn capture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../refdata/trace-JCD543-20220514T1928-4k-edid.pcapng.gz")
}

fn s(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn the_real_capture_learned_then_compared_leaves_nothing_unexplained_and_relearns_identically() {
    let dir = tempfile::tempdir().unwrap();
    let (a, b) = (dir.path().join("a.json"), dir.path().join("b.json"));
    let cap = capture();
    let (code, out) = tool(&["learn", "--capture", s(&cap), "--out", s(&a)]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("bus 6 device 25: learned 75 control transfers, 2168 OUT transfers, 0 IN replies, 7 IN events"),
        "{out}"
    );
    let (code, out) = tool(&[
        "learn",
        "--capture",
        s(&cap),
        "--id",
        "0711:5601",
        "--out",
        s(&b),
    ]);
    assert_eq!(code, 0, "{out}");
    let (bytes_a, bytes_b) = (std::fs::read(&a).unwrap(), std::fs::read(&b).unwrap());
    assert!(
        bytes_a == bytes_b,
        "learning twice must give the same bytes"
    );
    let spec: serde_json::Value = serde_json::from_slice(&bytes_a).unwrap();
    assert_eq!(spec["format"], "calametra.spec.learned");
    assert_eq!(spec["version"], 1);
    assert_eq!(spec["name"], "learned-0711-5601");
    let src = &spec["source"]["captures"][0];
    assert_eq!(src["file"], "trace-JCD543-20220514T1928-4k-edid.pcapng.gz");
    assert_eq!(
        src["sha256"],
        "d35c4c5a09bc7ede5175065b83a7ae47d64338ef2ebc08c4c7bdb2b72869b0d8"
    );
    // The device descriptor, byte-exact from the capture.
    assert_eq!(
        spec["descriptors"][0]["values"][0],
        "12011003ff00000911070156101001020001"
    );

    let (code, out) = tool(&["compare", "--capture", s(&cap), "--spec", s(&a)]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("75 control transfers: 75 same, 0 differ, 0 model stalls, 0 capture stalls, 0 other, 0 skipped; 0 explained, 0 unexplained; 0 model gaps"),
        "{out}"
    );
    assert!(
        out.contains("bulk OUT 0x02: 2168 transfers (87462080 bytes): 2168 same"),
        "{out}"
    );
    assert!(
        out.contains("interrupt IN 0x83: 12 transfers (448 bytes): 12 same"),
        "{out}"
    );
    assert!(!out.contains("UNEXPLAINED"), "{out}");

    // Another capture asks what this one never showed: a model gap, a failure.
    let other = dir.path().join("other.txt");
    std::fs::write(
        &other,
        "00000001 1000 S Ci:6:025:0 s c0 87 0000 0005 0001 1 <\n\
         00000001 1040 C Ci:6:025:0 0 1 = 01\n",
    )
    .unwrap();
    let (code, out) = tool(&["compare", "--capture", s(&other), "--spec", s(&a)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("[model gap: control c0 87 0000 0005 0001 in no such request in the capture; nearest known key: c087.0000.0000.0001 (wIndex 0x0005 vs 0x0000)]")
            && out.contains("UNEXPLAINED"),
        "{out}"
    );
    let (code, out) = tool(&[
        "compare",
        "--capture",
        s(&cap),
        "--spec",
        s(&a),
        "--no-hotplug",
    ]);
    // A learned model scripts its own events: --no-hotplug changes nothing for it.
    assert_eq!(code, 0, "{out}");
}

/// usbmon text of a control read of a device descriptor (vid 1234, pid 0001) from `dev`.
fn descriptor_read(tag: u32, t: u64, dev: u8) -> String {
    format!(
        "{tag:08x} {t} S Ci:1:{dev:03}:0 s 80 06 0100 0000 0012 18 <\n\
         {tag:08x} {} C Ci:1:{dev:03}:0 0 18 = 12010002 00000040 34120100 00010102 0001\n",
        t + 50
    )
}

#[test]
fn bad_captures_are_errors_naming_the_file_and_the_devices() {
    let dir = tempfile::tempdir().unwrap();
    let out_spec = dir.path().join("out.json");
    let write = |name: &str, bytes: &[u8]| {
        let p = dir.path().join(name);
        std::fs::write(&p, bytes).unwrap();
        p
    };

    // No device: comments alone.
    let empty = write("empty.txt", b"# nothing captured\n");
    let (code, out) = tool(&["learn", "--capture", s(&empty), "--out", s(&out_spec)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("empty.txt") && out.contains("shows no device"),
        "{out}"
    );

    // Two devices and no selection: both listed, with their ids.
    let two = format!(
        "{}{}",
        descriptor_read(0x10, 1000, 2),
        descriptor_read(0x20, 2000, 3)
    );
    let two = write("two.txt", two.as_bytes());
    let (code, out) = tool(&["learn", "--capture", s(&two), "--out", s(&out_spec)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("two.txt")
            && out.contains("shows 2 devices")
            && out.contains("--device 1.2  (1234:0001)")
            && out.contains("--device 1.3  (1234:0001)"),
        "{out}"
    );
    assert!(!out_spec.exists(), "nothing is written on an error");
    // An id two devices share is no choice either; an address is.
    let (code, out) = tool(&[
        "learn",
        "--capture",
        s(&two),
        "--id",
        "1234:0001",
        "--out",
        s(&out_spec),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("2 devices have id 1234:0001"), "{out}");
    let (code, out) = tool(&[
        "learn",
        "--capture",
        s(&two),
        "--device",
        "1.3",
        "--out",
        s(&out_spec),
    ]);
    assert_eq!(code, 0, "{out}");
    assert!(
        out.contains("bus 1 device 3: learned 1 control transfers"),
        "{out}"
    );
    let (code, out) = tool(&[
        "learn",
        "--capture",
        s(&two),
        "--device",
        "1.9",
        "--out",
        s(&out_spec),
    ]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("no transfer of bus 1 device 9") && out.contains("--device 1.2"),
        "{out}"
    );
    let (code, out) = tool(&[
        "learn",
        "--capture",
        s(&two),
        "--device",
        "one",
        "--out",
        s(&out_spec),
    ]);
    assert_eq!(code, 2, "{out}");
    assert!(out.contains("expected BUS.ADDR"), "{out}");

    // Nothing the tool can use: a device whose only transfer never completed.
    let pending = write(
        "pending.txt",
        b"00000010 1000 S Ci:1:002:0 s c0 01 0000 0000 0004 4 <\n",
    );
    let (code, out) = tool(&["learn", "--capture", s(&pending), "--out", s(&out_spec)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("pending.txt")
            && out.contains("nothing to learn of bus 1 device 2")
            && out.contains("no completion in the capture"),
        "{out}"
    );

    // Garbage: refused by its first bytes, naming the file.
    let garbage = write("garbage.bin", &[0x00, 0xff, 0x13, 0x37, 0x00, 0x01]);
    let (code, out) = tool(&["learn", "--capture", s(&garbage), "--out", s(&out_spec)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("garbage.bin") && out.contains("not a capture"),
        "{out}"
    );

    // A pcapng cut short: the file and the byte offset.
    let mut cut = std::fs::read(capture()).unwrap();
    cut.truncate(4096);
    let cut = write("cut.pcapng.gz", &cut);
    let (code, out) = tool(&["learn", "--capture", s(&cut), "--out", s(&out_spec)]);
    assert_eq!(code, 1, "{out}");
    assert!(
        out.contains("cut.pcapng.gz") && out.contains("gzip"),
        "{out}"
    );
    // A pcapng of one usbmon packet, cut inside the packet's block.
    let packet = vec![0u8; 64];
    let mut raw =
        calametra_capture::pcapng::build(220, calametra_capture::Order::Little, &[packet]);
    raw.truncate(raw.len() - 20);
    let cut = write("cut.pcapng", &raw);
    let (code, out) = tool(&["learn", "--capture", s(&cut), "--out", s(&out_spec)]);
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("cut.pcapng") && out.contains("byte "), "{out}");
}
