//! The usbmon text interface (`/sys/kernel/debug/usb/usbmon/<bus>u`), one event a line:
//!
//! ```text
//! d5ea89a0 3575914555 S Ci:1:001:0 s a3 00 0000 0003 0004 4 <
//! d5ea89a0 3575914560 C Ci:1:001:0 0 4 = 01050000
//! ```
//!
//! Tag, timestamp (microseconds), event type, address word `<T><d>:<bus>:<dev>:<ep>` (the old
//! `1t` format has no bus), then a setup (`s` and five hex words) or a status word
//! `status[:interval[:start_frame[:error_count]]]`, for isochronous endpoints a descriptor count
//! and up to five descriptors, the length, and a data tag: `=` and data words, or a letter
//! meaning no data. The kernel prints at most 32 data bytes (`DATA_MAX` in `mon_text.c`), so the
//! data of a longer transfer is a prefix. Blank lines and lines starting with `#` are skipped.
//! The kernel's timestamps are 32-bit and wrap every 71 minutes; a backwards jump of more than
//! half that range is read as a wrap, so times keep increasing.

use super::{Event, EventKind, Src, XferType};
use calametra_core::error::Error;
use calametra_core::usb::Setup;

/// Whether `b` plausibly starts with usbmon text: printable bytes, and a first event line of
/// a hex tag, a decimal timestamp and an event type.
pub fn looks_like_text(b: &[u8]) -> bool {
    let head = b.get(..b.len().min(512)).unwrap_or(b);
    if head
        .iter()
        .any(|&c| !(c.is_ascii_graphic() || c.is_ascii_whitespace()))
    {
        return false;
    }
    let text = String::from_utf8_lossy(head);
    let Some(line) = text
        .lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with('#'))
    else {
        // Only comments and blank lines so far: text, with no events (or more after 512 bytes).
        return true;
    };
    let mut t = line.split_ascii_whitespace();
    matches!(
        (t.next(), t.next(), t.next()),
        (Some(tag), Some(ts), Some("S" | "C" | "E"))
            if tag.bytes().all(|c| c.is_ascii_hexdigit()) && ts.bytes().all(|c| c.is_ascii_digit())
    )
}

/// Parses usbmon text into `events`.
pub(crate) fn parse(src: &Src<'_>, b: &[u8], events: &mut Vec<Event>) -> Result<(), Error> {
    const WRAP: i64 = 1 << 32;
    let mut epoch = 0i64;
    let mut last: Option<i64> = None;
    for (i, raw) in b.split(|&c| c == b'\n').enumerate() {
        let line_no = i + 1;
        let Ok(line) = std::str::from_utf8(raw) else {
            return Err(src.line(
                line_no,
                "(line)",
                "not valid UTF-8; expected a usbmon text line",
            ));
        };
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let mut ev = parse_line(line, line_no).map_err(|(what, m)| src.line(line_no, what, m))?;
        if (0..WRAP).contains(&ev.t_us) {
            if last.is_some_and(|l| l - ev.t_us > WRAP / 2) {
                epoch = epoch.saturating_add(WRAP);
            }
            last = Some(ev.t_us);
            ev.t_us = ev.t_us.saturating_add(epoch);
        }
        events.push(ev);
    }
    Ok(())
}

type LineError = (&'static str, String);

/// Parses one non-empty event line.
pub fn parse_line(line: &str, record: usize) -> Result<Event, (&'static str, String)> {
    let mut t = line.split_ascii_whitespace().peekable();
    let mut next = |what: &'static str| -> Result<&str, LineError> {
        t.next()
            .ok_or((what, format!("the line ends before the {what}")))
    };
    let tag = next("tag")?;
    let id = u64::from_str_radix(tag, 16)
        .map_err(|_| ("tag", format!("`{tag}` is not a hex URB tag")))?;
    let ts = next("timestamp")?;
    let t_us: i64 = ts.parse().map_err(|_| {
        (
            "timestamp",
            format!("`{ts}` is not a decimal microsecond count"),
        )
    })?;
    let kind = match next("event type")? {
        "S" => EventKind::Submit,
        "C" => EventKind::Complete,
        "E" => EventKind::Error,
        other => return Err(("event type", format!("`{other}`; expected S, C or E"))),
    };
    let addr = next("address")?;
    let (xfer, endpoint, device, bus) = address(addr)?;
    let first = next("status or setup")?;
    let mut setup = None;
    let status;
    if first == "s" {
        let mut w = [0u16; 5];
        for (k, (name, max)) in [
            ("bmRequestType", 0xff),
            ("bRequest", 0xff),
            ("wValue", 0xffff),
            ("wIndex", 0xffff),
            ("wLength", 0xffff),
        ]
        .into_iter()
        .enumerate()
        {
            let word = next("setup")?;
            let v = u32::from_str_radix(word, 16)
                .ok()
                .filter(|&v| v <= max)
                .ok_or((
                    "setup",
                    format!("{name} `{word}` is not hex of at most {max:#x}"),
                ))?;
            if let Some(slot) = w.get_mut(k) {
                *slot = v as u16;
            }
        }
        setup = Some(Setup {
            request_type: w[0] as u8,
            request: w[1] as u8,
            value: w[2],
            index: w[3],
            length: w[4],
        });
        // A control submission carries no status of its own.
        status = -115;
    } else if first.len() == 1 && first.bytes().all(|c| c.is_ascii_alphabetic()) {
        // A setup that could not be captured: the flag letter, then `__ __ ____ ____ ____`.
        for _ in 0..5 {
            next("setup placeholder")?;
        }
        status = -115;
    } else {
        let word = first.split(':').next().unwrap_or(first);
        status = word
            .parse()
            .map_err(|_| ("status", format!("`{first}` is not a status word; expected status[:interval[:start_frame[:error_count]]] or `s` and a setup")))?;
    }
    if xfer == XferType::Isochronous {
        let n = next("iso descriptor count")?;
        let n: usize = n.parse().map_err(|_| {
            (
                "iso descriptor count",
                format!("`{n}` is not a decimal count"),
            )
        })?;
        for _ in 0..n.min(5) {
            let d = next("iso descriptor")?;
            if !d.contains(':') {
                return Err((
                    "iso descriptor",
                    format!("`{d}`; expected status:offset:length"),
                ));
            }
        }
    }
    let len = next("length")?;
    let length: u32 = len
        .parse()
        .map_err(|_| ("length", format!("`{len}` is not a decimal length")))?;
    let mut data = Vec::new();
    if let Some(tag) = t.next() {
        if tag == "=" {
            for word in t.by_ref() {
                if word.len() > 8 || word.len() % 2 != 0 {
                    return Err((
                        "data",
                        format!("data word `{word}`; expected 1 to 4 bytes as 2 to 8 hex digits"),
                    ));
                }
                let bytes = calametra_core::hex::decode(word)
                    .map_err(|m| ("data", format!("data word `{word}`: {m}")))?;
                data.extend_from_slice(&bytes);
            }
        } else if tag.len() != 1 {
            return Err((
                "data tag",
                format!("`{tag}`; expected `=` and data words, or one letter such as `<` or `>`"),
            ));
        }
    }
    if let Some(extra) = t.next() {
        return Err((
            "data",
            format!("unexpected `{extra}` after the data tag; expected the end of the line"),
        ));
    }
    Ok(Event {
        record,
        id,
        kind,
        xfer,
        endpoint,
        device,
        bus,
        t_us,
        status,
        length,
        setup,
        data,
    })
}

/// `Ci:1:001:0` (or `Ci:001:0`) as transfer type, endpoint address, device, bus.
fn address(word: &str) -> Result<(XferType, u8, u8, u16), LineError> {
    let bad = || {
        (
            "address",
            format!("`{word}`; expected <type><dir>:<bus>:<device>:<endpoint> such as Ci:1:001:0"),
        )
    };
    let parts: Vec<&str> = word.split(':').collect();
    let (td, bus, dev, ep) = match parts.as_slice() {
        [td, bus, dev, ep] => (*td, *bus, *dev, *ep),
        [td, dev, ep] => (*td, "0", *dev, *ep),
        _ => return Err(bad()),
    };
    let mut c = td.chars();
    let xfer = match c.next() {
        Some('C') => XferType::Control,
        Some('Z') => XferType::Isochronous,
        Some('I') => XferType::Interrupt,
        Some('B') => XferType::Bulk,
        _ => return Err(bad()),
    };
    let dir_in = match c.next() {
        Some('i') => true,
        Some('o') => false,
        _ => return Err(bad()),
    };
    if c.next().is_some() {
        return Err(bad());
    }
    let bus: u16 = bus.parse().map_err(|_| bad())?;
    let dev: u8 = dev.parse().map_err(|_| bad())?;
    let ep: u8 = ep.parse().map_err(|_| bad())?;
    if ep > 15 {
        return Err(bad());
    }
    Ok((xfer, ep | if dir_in { 0x80 } else { 0 }, dev, bus))
}
