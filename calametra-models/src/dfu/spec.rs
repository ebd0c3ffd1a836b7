//! Reading a DFU spec (`specs/dfu11-*.json`, format `calametra.spec.dfu`) into checked facts.
//!
//! Every field is read through [`calametra_core::spec::Spec`], so a missing field, a descriptor
//! of the wrong length or bad hex is an error naming the file and the field. The descriptors are
//! exact bytes; this module cross-checks them (lengths, types, class codes, the DFU functional
//! descriptor) against the spec's scalar fields so the two can never disagree silently. Nothing
//! here keeps state or talks to the bus.

use super::image::image_complete;
pub use super::image::ImageCheck;
use calametra_core::spec::Spec;
use calametra_core::Error;
use std::collections::BTreeMap;

/// The `format` a DFU spec declares.
pub const FORMAT: &str = "calametra.spec.dfu";

/// The DFU functional descriptor's `bDescriptorType`.
pub const DFU_FUNCTIONAL: u8 = 0x21;

/// The `bmAttributes` of the DFU functional descriptor, decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Attributes {
    /// bitCanDnload: the device accepts DFU_DNLOAD.
    pub can_dnload: bool,
    /// bitCanUpload: the device accepts DFU_UPLOAD.
    pub can_upload: bool,
    /// bitManifestationTolerant: the device answers on the bus after manifestation (else it
    /// waits for a reset in dfuMANIFEST-WAIT-RESET).
    pub manifestation_tolerant: bool,
    /// bitWillDetach: the device detaches and re-attaches itself on DFU_DETACH; the host must
    /// not reset it.
    pub will_detach: bool,
}

impl Attributes {
    /// The attribute byte (bits 0..3).
    pub fn bits(&self) -> u8 {
        (self.can_dnload as u8)
            | (self.can_upload as u8) << 1
            | (self.manifestation_tolerant as u8) << 2
            | (self.will_detach as u8) << 3
    }

    /// Decodes an attribute byte (reserved bits ignored).
    pub fn from_bits(b: u8) -> Attributes {
        Attributes {
            can_dnload: b & 1 != 0,
            can_upload: b & 2 != 0,
            manifestation_tolerant: b & 4 != 0,
            will_detach: b & 8 != 0,
        }
    }
}

/// One mode's descriptor set: the device descriptor and the whole configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DescriptorSet {
    /// The 18-byte device descriptor.
    pub device: Vec<u8>,
    /// The configuration descriptor with its interface and functional descriptors.
    pub configuration: Vec<u8>,
    /// The 9-byte DFU functional descriptor found inside `configuration`.
    pub functional: Vec<u8>,
}

/// The facts of a DFU spec, checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DfuSpec {
    /// The spec's `name`.
    pub name: String,
    /// The interface number of the DFU interface (`usb.interface`).
    pub interface: u8,
    /// Descriptors in run-time mode (appIDLE, appDETACH).
    pub runtime: DescriptorSet,
    /// Descriptors in DFU mode (dfuIDLE and after).
    pub dfu_mode: DescriptorSet,
    /// String descriptor 0: the language IDs, as the bytes after the 2-byte header.
    pub language_ids: Vec<u8>,
    /// Strings by index.
    pub strings: BTreeMap<u8, String>,
    /// The functional descriptor's attributes.
    pub attributes: Attributes,
    /// wDetachTimeOut in milliseconds.
    pub detach_timeout_ms: u16,
    /// wTransferSize in bytes.
    pub transfer_size: u16,
    /// bcdDFUVersion.
    pub dfu_version: u16,
    /// bwPollTimeout reported on entering dfuDNBUSY: the time to program one block.
    pub dnbusy_poll_ms: u32,
    /// bwPollTimeout reported on entering dfuMANIFEST: the time to manifest.
    pub manifest_poll_ms: u32,
    /// How long a WillDetach device takes to detach and re-attach itself.
    pub reenumerate_ms: u32,
    /// Bytes in the staging bank (the largest image a download can hold).
    pub flash_size: usize,
    /// The completeness check at the end of a download.
    pub image_check: ImageCheck,
    /// The image the device runs when it leaves the factory (empty: none, so it starts in DFU
    /// mode with errFIRMWARE).
    pub factory_image: Vec<u8>,
    /// Whether the device powers up in DFU mode (`start: "dfu_idle"`) instead of run-time mode.
    pub starts_in_dfu_mode: bool,
}

/// The largest bwPollTimeout the 3-byte field can carry.
const MAX_POLL_MS: u64 = 0x00ff_ffff;

impl DfuSpec {
    /// Reads and checks a DFU spec. Errors name the file and the field.
    pub fn parse(spec: &Spec) -> Result<DfuSpec, Error> {
        let format = spec.str("format")?;
        if format != FORMAT {
            return Err(spec.error(
                "format",
                format!("expected \"{FORMAT}\", found \"{format}\""),
            ));
        }
        let version = spec.u64("version")?;
        if version != 1 {
            return Err(spec.error("version", format!("expected 1, found {version}")));
        }
        spec.str("source")?;
        let name = spec.str("name")?.to_string();
        let interface = small(spec, "usb.interface", 0xff)? as u8;
        let vid = small(spec, "usb.vid", 0xffff)? as u16;
        let pid = small(spec, "usb.pid", 0xffff)? as u16;
        let speed = spec.str("usb.speed")?;
        if speed != "full" {
            return Err(spec.error(
                "usb.speed",
                format!(
                    "expected \"full\" (the only speed this model answers for), found \"{speed}\""
                ),
            ));
        }

        let attributes = Attributes {
            can_dnload: flag(spec, "attributes.can_dnload")?,
            can_upload: flag(spec, "attributes.can_upload")?,
            manifestation_tolerant: flag(spec, "attributes.manifestation_tolerant")?,
            will_detach: flag(spec, "attributes.will_detach")?,
        };
        let detach_timeout_ms = small(spec, "detach_timeout_ms", 0xffff)? as u16;
        let transfer_size = small(spec, "transfer_size", 0xffff)? as u16;
        if transfer_size == 0 {
            return Err(spec.error("transfer_size", "must be at least 1 byte"));
        }
        let dfu_version = small(spec, "dfu_version", 0xffff)? as u16;

        let language_ids = spec.hex("language_ids", None)?;
        if language_ids.is_empty() || language_ids.len() % 2 != 0 || language_ids.len() > 252 {
            return Err(spec.error(
                "language_ids",
                format!(
                    "expected one or more 2-byte language IDs, found {} bytes",
                    language_ids.len()
                ),
            ));
        }
        let mut strings = BTreeMap::new();
        let table = spec
            .at("strings")?
            .as_object()
            .ok_or_else(|| spec.error("strings", "expected an object of index to text"))?;
        for (k, v) in table {
            let field = format!("strings.{k}");
            let idx: u8 = k
                .parse()
                .ok()
                .filter(|&i: &u8| i != 0)
                .ok_or_else(|| spec.error(&field, "the key must be a string index 1..=255"))?;
            let text = v
                .as_str()
                .ok_or_else(|| spec.error(&field, "expected a string"))?;
            if text.encode_utf16().count() > 126 {
                return Err(spec.error(&field, "longer than a string descriptor can hold"));
            }
            strings.insert(idx, text.to_string());
        }

        let want_func = functional_bytes(attributes, detach_timeout_ms, transfer_size, dfu_version);
        let runtime = descriptor_set(
            spec, "runtime", 1, interface, vid, pid, &want_func, &strings,
        )?;
        let dfu_mode = descriptor_set(
            spec, "dfu_mode", 2, interface, vid, pid, &want_func, &strings,
        )?;

        let dnbusy_poll_ms = small(spec, "poll_timeout_ms.dnbusy", MAX_POLL_MS)? as u32;
        let manifest_poll_ms = small(spec, "poll_timeout_ms.manifest", MAX_POLL_MS)? as u32;
        let reenumerate_ms = small(spec, "reenumerate_ms", 60_000)? as u32;

        let flash_size = small(spec, "flash.size", 1 << 30)? as usize;
        if flash_size == 0 {
            return Err(spec.error("flash.size", "must be at least 1 byte"));
        }
        let image_check = match spec.str("flash.image_check")? {
            "none" => ImageCheck::None,
            "crc32-trailer" => ImageCheck::Crc32Trailer,
            other => {
                return Err(spec.error(
                    "flash.image_check",
                    format!("expected \"none\" or \"crc32-trailer\", found \"{other}\""),
                ))
            }
        };
        let factory_image = spec.hex("flash.factory_image", None)?;
        if factory_image.len() > flash_size {
            return Err(spec.error(
                "flash.factory_image",
                format!(
                    "{} bytes do not fit the {flash_size}-byte flash bank",
                    factory_image.len()
                ),
            ));
        }
        if !factory_image.is_empty() && !image_complete(image_check, &factory_image) {
            return Err(spec.error(
                "flash.factory_image",
                "fails the spec's own flash.image_check (a CRC-32 trailer over the bytes before it)",
            ));
        }
        let starts_in_dfu_mode = match spec.str("start")? {
            "app_idle" => false,
            "dfu_idle" => true,
            other => {
                return Err(spec.error(
                    "start",
                    format!("expected \"app_idle\" or \"dfu_idle\", found \"{other}\""),
                ))
            }
        };

        Ok(DfuSpec {
            name,
            interface,
            runtime,
            dfu_mode,
            language_ids,
            strings,
            attributes,
            detach_timeout_ms,
            transfer_size,
            dfu_version,
            dnbusy_poll_ms,
            manifest_poll_ms,
            reenumerate_ms,
            flash_size,
            image_check,
            factory_image,
            starts_in_dfu_mode,
        })
    }
}

/// The 9 bytes of the DFU functional descriptor these scalar facts describe.
pub fn functional_bytes(
    attributes: Attributes,
    detach_timeout_ms: u16,
    transfer_size: u16,
    dfu_version: u16,
) -> Vec<u8> {
    let d = detach_timeout_ms.to_le_bytes();
    let t = transfer_size.to_le_bytes();
    let v = dfu_version.to_le_bytes();
    vec![
        9,
        DFU_FUNCTIONAL,
        attributes.bits(),
        d[0],
        d[1],
        t[0],
        t[1],
        v[0],
        v[1],
    ]
}

fn flag(spec: &Spec, field: &str) -> Result<bool, Error> {
    spec.at(field)?
        .as_bool()
        .ok_or_else(|| spec.error(field, "expected true or false"))
}

fn small(spec: &Spec, field: &str, max: u64) -> Result<u64, Error> {
    let v = spec.u64(field)?;
    if v > max {
        return Err(spec.error(field, format!("{v} is larger than {max}")));
    }
    Ok(v)
}

fn hex_str(b: &[u8]) -> String {
    b.iter()
        .map(|x| format!("{x:02x}"))
        .collect::<Vec<_>>()
        .join(" ")
}

#[allow(clippy::too_many_arguments)]
fn descriptor_set(
    spec: &Spec,
    mode: &str,
    protocol: u8,
    interface: u8,
    vid: u16,
    pid: u16,
    want_func: &[u8],
    strings: &BTreeMap<u8, String>,
) -> Result<DescriptorSet, Error> {
    let dev_field = format!("{mode}.device");
    let device = spec.hex(&dev_field, Some(18))?;
    let bad = |field: &str, msg: String| spec.error(field, msg);
    if device[0] != 18 || device[1] != 1 {
        return Err(bad(
            &dev_field,
            format!(
                "expected bLength 18 and bDescriptorType 1, found {} and {}",
                device[0], device[1]
            ),
        ));
    }
    if !matches!(device[7], 8 | 16 | 32 | 64) {
        return Err(bad(
            &dev_field,
            format!("bMaxPacketSize0 {} is not 8, 16, 32 or 64", device[7]),
        ));
    }
    let (dvid, dpid) = (
        u16::from_le_bytes([device[8], device[9]]),
        u16::from_le_bytes([device[10], device[11]]),
    );
    if (dvid, dpid) != (vid, pid) {
        return Err(bad(
            &dev_field,
            format!("idVendor:idProduct {dvid:04x}:{dpid:04x} differ from usb.vid:usb.pid {vid:04x}:{pid:04x}"),
        ));
    }
    if device[17] != 1 {
        return Err(bad(
            &dev_field,
            format!("bNumConfigurations must be 1, found {}", device[17]),
        ));
    }
    for (off, what) in [
        (14, "iManufacturer"),
        (15, "iProduct"),
        (16, "iSerialNumber"),
    ] {
        let i = device[off];
        if i != 0 && !strings.contains_key(&i) {
            return Err(bad(
                &dev_field,
                format!("{what} names string {i}, which `strings` does not have"),
            ));
        }
    }

    let cfg_field = format!("{mode}.configuration");
    let configuration = spec.hex(&cfg_field, None)?;
    if configuration.len() < 9 || configuration[0] != 9 || configuration[1] != 2 {
        return Err(bad(
            &cfg_field,
            "expected a configuration descriptor (bLength 9, bDescriptorType 2) first".into(),
        ));
    }
    let total = u16::from_le_bytes([configuration[2], configuration[3]]) as usize;
    if total != configuration.len() {
        return Err(bad(
            &cfg_field,
            format!(
                "wTotalLength says {total} bytes, found {}",
                configuration.len()
            ),
        ));
    }
    if configuration[4] != 1 || configuration[5] != 1 {
        return Err(bad(
            &cfg_field,
            "expected one interface (bNumInterfaces 1) and bConfigurationValue 1".into(),
        ));
    }
    // Walk the descriptors after the configuration header.
    let mut at = 9;
    let mut found_iface = false;
    let mut functional = None;
    while at < configuration.len() {
        let len = configuration[at] as usize;
        if len < 2 || at + len > configuration.len() {
            return Err(bad(
                &cfg_field,
                format!("the descriptor at byte {at} has bLength {len}, which runs past the end"),
            ));
        }
        let d = &configuration[at..at + len];
        match d[1] {
            4 => {
                if len != 9 {
                    return Err(bad(
                        &cfg_field,
                        format!("the interface descriptor at byte {at} has bLength {len}, expected 9"),
                    ));
                }
                if d[2] != interface || d[3] != 0 || d[4] != 0 {
                    return Err(bad(
                        &cfg_field,
                        format!(
                            "expected interface {interface}, alternate setting 0 and no endpoints, found {} / {} / {}",
                            d[2], d[3], d[4]
                        ),
                    ));
                }
                if (d[5], d[6], d[7]) != (0xfe, 0x01, protocol) {
                    return Err(bad(
                        &cfg_field,
                        format!(
                            "expected interface class FE subclass 01 protocol {protocol:02x} ({}), found {:02x} {:02x} {:02x}",
                            if protocol == 1 { "run-time" } else { "DFU mode" },
                            d[5],
                            d[6],
                            d[7]
                        ),
                    ));
                }
                if d[8] != 0 && !strings.contains_key(&d[8]) {
                    return Err(bad(
                        &cfg_field,
                        format!("iInterface names string {}, which `strings` does not have", d[8]),
                    ));
                }
                found_iface = true;
            }
            DFU_FUNCTIONAL => {
                if !found_iface {
                    return Err(bad(
                        &cfg_field,
                        "the DFU functional descriptor must follow the DFU interface descriptor"
                            .into(),
                    ));
                }
                if d != want_func {
                    return Err(bad(
                        &cfg_field,
                        format!(
                            "the DFU functional descriptor is [{}], but attributes, detach_timeout_ms, transfer_size and dfu_version say [{}]",
                            hex_str(d),
                            hex_str(want_func)
                        ),
                    ));
                }
                functional = Some(d.to_vec());
            }
            other => {
                return Err(bad(
                    &cfg_field,
                    format!("unexpected descriptor type {other:#04x} at byte {at}; a DFU interface has no endpoints"),
                ))
            }
        }
        at += len;
    }
    let functional = functional.ok_or_else(|| {
        bad(
            &cfg_field,
            "no DFU functional descriptor (9 bytes, type 0x21) after the interface".into(),
        )
    })?;
    Ok(DescriptorSet {
        device,
        configuration,
        functional,
    })
}
