//! Reading a Trigger 6 spec (`format` `calametra.spec.trigger6`, `version` 1) into the facts the
//! model answers from: descriptors, request names, canned replies, stalls, the timing tables,
//! EDIDs, the VRAM size and the outputs' initial state.
//!
//! Every error names the spec file and the field, through the core's [`Spec`] getters. Nothing
//! here keeps state of a run.

use super::timing::{Timing, RECORD_LEN};
use calametra_core::spec::Spec;
use calametra_core::Error;
use std::collections::{BTreeMap, BTreeSet};

/// The request groups of the spec's `requests` object (the dock's display function).
pub const GROUPS: [&str; 9] = [
    "ram",
    "status",
    "edid",
    "timing",
    "init",
    "modeset",
    "ready",
    "monitor_control",
    "finalise",
];

/// Requests the model implements with state: (group, bmRequestType, bRequest).
const STATEFUL: [(&str, u8, u8); 13] = [
    ("ram", 0xc0, 0x88),
    ("ram", 0x40, 0x14),
    ("status", 0xc0, 0x87),
    ("edid", 0xc0, 0x80),
    ("timing", 0xc0, 0x84),
    ("timing", 0xc0, 0x89),
    ("init", 0x40, 0x1c),
    ("init", 0x40, 0x1d),
    ("init", 0x40, 0x30),
    ("modeset", 0x40, 0x12),
    ("ready", 0x40, 0x31),
    ("monitor_control", 0x40, 0x03),
    ("finalise", 0x40, 0x1c),
];

/// A canned reply key: (bmRequestType, bRequest, wValue, wIndex).
pub type ReplyKey = (u8, u8, u16, u16);

/// The facts of one spec file.
#[derive(Clone, Debug)]
pub struct Facts {
    /// The device's name in traces.
    pub name: String,
    /// The 18-byte device descriptor.
    pub device: Vec<u8>,
    /// The configuration descriptor with its interface and endpoints (wTotalLength bytes).
    pub configuration: Vec<u8>,
    /// The BOS descriptor (wTotalLength bytes).
    pub bos: Vec<u8>,
    /// String descriptors by index; index 0 is the language table.
    pub strings: BTreeMap<u8, Vec<u8>>,
    /// Language ids of string descriptor 0.
    pub languages: Vec<u16>,
    /// Request names by (bmRequestType, bRequest).
    pub names: BTreeMap<(u8, u8), String>,
    /// The name of `0x40/0x1c` with wValue 2.
    pub finalise_name: String,
    /// Replies the capture shows, by (bmRequestType, bRequest, wValue, wIndex).
    pub replies: BTreeMap<ReplyKey, Vec<u8>>,
    /// Vendor OUT requests that are acknowledged and stored (audio state).
    pub acked_out: BTreeSet<(u8, u8)>,
    /// Requests the capture shows stalling, by (bmRequestType, bRequest).
    pub stalls: BTreeSet<(u8, u8)>,
    /// Firmware timing tables of output 0 and 1.
    pub tables: [Vec<[u8; RECORD_LEN]>; 2],
    /// The spec's first monitor (`edid.hp_x27q`, the HP X27q's HDMI EDID).
    pub edid: Vec<u8>,
    /// Per output, the EDID of the monitor `plug_monitor` connects there: the EDID the
    /// output's `monitor` field names under `edid` (output 0 the HP X27q's HDMI EDID, output 1
    /// its DisplayPort EDID); `edid.hp_x27q` when the field is absent.
    pub monitors: [Vec<u8>; 2],
    /// The `edid` keys of those monitors.
    pub monitor_names: [String; 2],
    /// The monitor of the capture, when the spec has it.
    pub capture_edid: Option<Vec<u8>>,
    /// VRAM size in MiB, as `get_vram_size` reports it.
    pub vram_mib: u8,
    /// Whether a monitor is on each output at power-on.
    pub initial_connected: [bool; 2],
    /// The interrupt endpoint.
    pub interrupt_ep: u8,
    /// The bulk OUT endpoint.
    pub bulk_out_ep: u8,
}

fn byte(spec: &Spec, field: &str) -> Result<u8, Error> {
    let v = spec.u64(field)?;
    u8::try_from(v).map_err(|_| spec.error(field, format!("expected a byte, found {v}")))
}

fn word(spec: &Spec, field: &str) -> Result<u16, Error> {
    let v = spec.u64(field)?;
    u16::try_from(v).map_err(|_| spec.error(field, format!("expected a 16-bit value, found {v}")))
}

/// Checks a descriptor whose length is given by its own header.
fn descriptor(
    spec: &Spec,
    field: &str,
    kind: u8,
    total_at: Option<usize>,
) -> Result<Vec<u8>, Error> {
    let b = spec.hex(field, None)?;
    if b.len() < 2 {
        return Err(spec.error(
            field,
            format!("expected a descriptor, found {} bytes", b.len()),
        ));
    }
    if b[1] != kind {
        return Err(spec.error(
            field,
            format!("expected bDescriptorType {kind:#04x}, found {:#04x}", b[1]),
        ));
    }
    let want = match total_at {
        Some(i) if b.len() >= i + 2 => u16::from_le_bytes([b[i], b[i + 1]]) as usize,
        Some(_) => {
            return Err(spec.error(
                field,
                format!("{} bytes is too short for a wTotalLength", b.len()),
            ))
        }
        None => b[0] as usize,
    };
    if b.len() != want {
        let what = if total_at.is_some() {
            "wTotalLength"
        } else {
            "bLength"
        };
        return Err(spec.error(
            field,
            format!("expected {want} bytes (its {what}), found {}", b.len()),
        ));
    }
    Ok(b)
}

/// Checks EDID bytes: whole 128-byte blocks, the fixed header, each block's checksum.
fn edid(spec: &Spec, field: &str) -> Result<Vec<u8>, Error> {
    let b = spec.hex(field, None)?;
    if b.is_empty() || b.len() % 128 != 0 {
        return Err(spec.error(
            field,
            format!(
                "expected whole 128-byte EDID blocks, found {} bytes",
                b.len()
            ),
        ));
    }
    if b[..8] != [0, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0] {
        return Err(spec.error(field, "expected the EDID header 00ffffffffffff00"));
    }
    for (i, block) in b.chunks(128).enumerate() {
        let sum = block.iter().fold(0u8, |a, x| a.wrapping_add(*x));
        if sum != 0 {
            return Err(spec.error(field, format!("block {i} checksum is off by {sum:#04x}")));
        }
    }
    Ok(b)
}

impl Facts {
    /// Reads the facts of a spec.
    pub fn from_spec(spec: &Spec) -> Result<Facts, Error> {
        let format = spec.str("format")?;
        if format != "calametra.spec.trigger6" {
            return Err(spec.error(
                "format",
                format!("expected \"calametra.spec.trigger6\", found {format:?}"),
            ));
        }
        let version = spec.u64("version")?;
        if version != 1 {
            return Err(spec.error("version", format!("expected 1, found {version}")));
        }
        let name = spec.str("device.name")?.to_string();

        let device = spec.hex("descriptors.device", Some(18))?;
        if device[0] != 18 || device[1] != 1 {
            return Err(spec.error(
                "descriptors.device",
                "expected bLength 18 and bDescriptorType 1",
            ));
        }
        let configuration = descriptor(spec, "descriptors.configuration", 2, Some(2))?;
        let bos = descriptor(spec, "descriptors.bos", 0x0f, Some(2))?;
        let mut strings = BTreeMap::new();
        let languages_raw = descriptor(spec, "descriptors.strings.languages", 3, None)?;
        let languages: Vec<u16> = languages_raw[2..]
            .chunks(2)
            .filter(|c| c.len() == 2)
            .map(|c| u16::from_le_bytes([c[0], c[1]]))
            .collect();
        strings.insert(0u8, languages_raw);
        let keys: Vec<String> = match spec.at("descriptors.strings")?.as_object() {
            Some(m) => m.keys().cloned().collect(),
            None => return Err(spec.error("descriptors.strings", "expected an object")),
        };
        for k in keys.iter().filter(|k| k.as_str() != "languages") {
            let field = format!("descriptors.strings.{k}");
            let index: u8 =
                k.parse().ok().filter(|i| *i > 0).ok_or_else(|| {
                    spec.error(&field, "expected a string index 1..=255 as the key")
                })?;
            strings.insert(index, descriptor(spec, &field, 3, None)?);
        }

        let mut names = BTreeMap::new();
        let mut finalise_name = None;
        let mut replies = BTreeMap::new();
        let mut acked_out = BTreeSet::new();
        let mut seen = BTreeSet::new();
        let mut entries: Vec<String> = Vec::new();
        for g in GROUPS {
            let n = spec.array(&format!("requests.{g}"))?.len();
            entries.extend((0..n).map(|i| format!("requests.{g}.{i}")));
        }
        if let Some(other) = spec.doc().get("other_requests").and_then(|o| o.as_object()) {
            for (g, list) in other {
                let n = list.as_array().map(|a| a.len()).ok_or_else(|| {
                    spec.error(&format!("other_requests.{g}"), "expected an array")
                })?;
                entries.extend((0..n).map(|i| format!("other_requests.{g}.{i}")));
            }
        }
        if spec.doc().get("standard_requests").is_some() {
            let n = spec.array("standard_requests")?.len();
            entries.extend((0..n).map(|i| format!("standard_requests.{i}")));
        }
        for e in &entries {
            let name = spec.str(&format!("{e}.name"))?.to_string();
            let ty = byte(spec, &format!("{e}.bmRequestType"))?;
            let req = byte(spec, &format!("{e}.bRequest"))?;
            if e.starts_with("requests.finalise.") {
                finalise_name = Some(name);
                seen.insert(("finalise", ty, req));
                continue;
            }
            if let Some(g) = GROUPS
                .iter()
                .find(|g| e.starts_with(&format!("requests.{g}.")))
            {
                seen.insert((g, ty, req));
            }
            if let Some(list) = spec
                .doc()
                .pointer(&format!("/{}/replies", e.replace('.', "/")))
            {
                let n = list.as_array().map(|a| a.len()).unwrap_or(0);
                for i in 0..n {
                    let f = format!("{e}.replies.{i}");
                    let key = (
                        ty,
                        req,
                        word(spec, &format!("{f}.wValue"))?,
                        word(spec, &format!("{f}.wIndex"))?,
                    );
                    replies.insert(key, spec.hex(&format!("{f}.data"), None)?);
                }
            } else if ty & 0x80 == 0 && e.starts_with("other_requests.") {
                acked_out.insert((ty, req));
            }
            names.insert((ty, req), name);
        }
        for (g, ty, req) in STATEFUL {
            if !seen.contains(&(g, ty, req)) {
                return Err(spec.error(
                    &format!("requests.{g}"),
                    format!("no entry for bmRequestType {ty:#04x} bRequest {req:#04x}; the model implements it"),
                ));
            }
        }
        let finalise_name = finalise_name.unwrap_or_else(|| "finalise".into());

        let mut stalls = BTreeSet::new();
        let n = spec.array("stalling_requests")?.len();
        for i in 0..n {
            let e = format!("stalling_requests.{i}");
            let name = spec.str(&format!("{e}.name"))?.to_string();
            let key = (
                byte(spec, &format!("{e}.bmRequestType"))?,
                byte(spec, &format!("{e}.bRequest"))?,
            );
            stalls.insert(key);
            names.insert(key, name);
        }

        let size = spec.u64("timing_table.record_size")?;
        if size != RECORD_LEN as u64 {
            return Err(spec.error(
                "timing_table.record_size",
                format!("expected {RECORD_LEN}, found {size}"),
            ));
        }
        let mut tables: [Vec<[u8; RECORD_LEN]>; 2] = [Vec::new(), Vec::new()];
        for (o, table) in tables.iter_mut().enumerate() {
            let out = spec.u64(&format!("timing_table.outputs.{o}.output"))?;
            if out != o as u64 {
                return Err(spec.error(
                    &format!("timing_table.outputs.{o}.output"),
                    format!("expected {o}, found {out}"),
                ));
            }
            let n = spec
                .array(&format!("timing_table.outputs.{o}.records"))?
                .len();
            for i in 0..n {
                let f = format!("timing_table.outputs.{o}.records.{i}");
                let b = spec.hex(&f, Some(RECORD_LEN))?;
                let mut r = [0u8; RECORD_LEN];
                r.copy_from_slice(&b);
                let t = Timing::parse(&r).ok_or_else(|| spec.error(&f, "not a timing record"))?;
                if t.hactive == 0 || t.vactive == 0 || t.hactive > t.htotal || t.vactive > t.vtotal
                {
                    return Err(spec.error(&f, format!("implausible timing {t}")));
                }
                table.push(r);
            }
        }

        let edid_main = edid(spec, "edid.hp_x27q.bytes")?;
        let capture_edid = match spec.doc().pointer("/edid/capture_monitor") {
            Some(_) => Some(edid(spec, "edid.capture_monitor.bytes")?),
            None => None,
        };
        let mib = spec.u64("ram.vram_mib")?;
        let vram_mib = u8::try_from(mib).ok().filter(|m| *m > 0).ok_or_else(|| {
            spec.error(
                "ram.vram_mib",
                format!("expected 1..=255 (a one-byte reply), found {mib}"),
            )
        })?;
        let mut monitors = [edid_main.clone(), edid_main.clone()];
        let mut monitor_names = ["hp_x27q".to_string(), "hp_x27q".to_string()];
        for o in 0..2 {
            let f = format!("outputs.{o}.monitor");
            if spec
                .doc()
                .pointer(&format!("/outputs/{o}/monitor"))
                .is_none()
            {
                continue;
            }
            let name = spec.str(&f)?.to_string();
            if name == "capture_monitor" || spec.doc().pointer(&format!("/edid/{name}")).is_none() {
                return Err(spec.error(
                    &f,
                    format!("`{name}` is not a monitor under `edid` (hp_x27q, hp_x27q_dp)"),
                ));
            }
            monitors[o] = edid(spec, &format!("edid.{name}.bytes"))?;
            monitor_names[o] = name;
        }
        let mut initial_connected = [false; 2];
        for (o, c) in initial_connected.iter_mut().enumerate() {
            let f = format!("outputs.{o}.initial");
            *c = match spec.str(&f)? {
                "connected" => true,
                "disconnected" => false,
                other => {
                    return Err(spec.error(
                        &f,
                        format!("expected \"connected\" or \"disconnected\", found {other:?}"),
                    ))
                }
            };
        }
        Ok(Facts {
            name,
            device,
            configuration,
            bos,
            strings,
            languages,
            names,
            finalise_name,
            replies,
            acked_out,
            stalls,
            tables,
            edid: edid_main,
            monitors,
            monitor_names,
            capture_edid,
            vram_mib,
            initial_connected,
            interrupt_ep: byte(spec, "interrupt.endpoint")?,
            bulk_out_ep: byte(spec, "bulk.out_endpoint")?,
        })
    }

    /// VRAM size in bytes.
    pub fn vram_bytes(&self) -> u64 {
        (self.vram_mib as u64) << 20
    }
}
