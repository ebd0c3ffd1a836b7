//! `export --pcapng`: a run's transfers as a usbmon pcapng file (link type 220), as Linux
//! usbmon would have captured them from the host's side, so a simulated run opens in Wireshark
//! with USB decoding and is read (compared, learned from) as a real capture is. Built from the
//! `transfer` records of a JSONL trace; packets are written by `calametra-usb`'s recorder
//! format (`calametra_usb::usbmon`, `calametra_usb::pcapng`), so an exported run and a recorded
//! one are one format.
//!
//! What the file shows of each transfer, and what a trace cannot give:
//! - a submission (`S`, status -115, the setup packet and OUT data) and a completion (`C`,
//!   the status Linux shows for the outcome, `calametra_usb::usbmon::status`: 0, a stall -32
//!   `EPIPE`, a timeout -2 `ENOENT`, a cancel -104 `ECONNRESET`, a disconnect -108
//!   `ESHUTDOWN`, a bus fault -71 `EPROTO`; a short transfer is status 0 with its short
//!   length). A transfer the run never completed (swallowed by `timeout` with no deadline,
//!   pending at the end) is in no `transfer` record, and not in the file;
//! - the trace records a transfer when it completes; its submission is placed at its task's
//!   last poll before then (the `task` record), which is when a driver that awaits each
//!   transfer submitted it (a transfer awaited beside others may show a later submission than
//!   it had), or at its completion for a transfer no task polled;
//! - a payload over 64 bytes is kept in the trace as its first 32 bytes and a digest: those
//!   32 bytes are the captured part (`len_cap`, as a snap length cuts a packet) and the URB
//!   length is the record's (`len`, `max`, `wLength`); a bulk OUT over 64 bytes that failed
//!   has no length in the trace, and shows the 32 bytes kept;
//! - every transfer is on bus [`BUS`], device [`DEVICE`], with URB ids counting from 1.

use calametra_core::trace::Record;
use calametra_usb::usbmon::{self, errno, Stage, UrbEvent, Xfer};
use calametra_usb::{Setup, TransferError, DIR_IN};
use std::collections::BTreeMap;
use std::time::Duration;

/// The bus number every exported transfer shows.
pub const BUS: u16 = 1;
/// The device address every exported transfer shows.
pub const DEVICE: u8 = 2;

/// A payload as the trace keeps it: every byte, or the head of a longer one.
struct Payload {
    bytes: Vec<u8>,
    whole: bool,
}

/// One transfer record, read.
struct Transfer {
    xfer: Xfer,
    endpoint: u8,
    setup: Option<Setup>,
    result: Result<(), TransferError>,
    /// Bytes asked for or offered at submission.
    requested: u32,
    /// Bytes transferred.
    actual: u32,
    out: Option<Payload>,
    inp: Option<Payload>,
}

/// An error in record `r`'s field `field`.
fn bad(r: &Record, field: &str, message: impl std::fmt::Display) -> String {
    format!(
        "line {} (record seq {}, kind transfer), field `{field}`: {message}",
        r.line_no, r.seq
    )
}

fn payload(r: &Record, field: &str) -> Result<Option<Payload>, String> {
    let Some(v) = r.data.get(field) else {
        return Ok(None);
    };
    let decode = |s: &str, f: &str| calametra_core::hex::decode(s).map_err(|e| bad(r, f, e));
    match v {
        serde_json::Value::String(s) => Ok(Some(Payload {
            bytes: decode(s, field)?,
            whole: true,
        })),
        serde_json::Value::Object(o) => match o.get("head").and_then(|h| h.as_str()) {
            Some(h) => Ok(Some(Payload {
                bytes: decode(h, &format!("{field}.head"))?,
                whole: false,
            })),
            None => Err(bad(
                r,
                field,
                "an object without a hex string `head`; expected hex bytes or {\"head\",\"sha256\"}",
            )),
        },
        other => Err(bad(
            r,
            field,
            format!("found {other}; expected hex bytes or {{\"head\",\"sha256\"}}"),
        )),
    }
}

fn number(r: &Record, field: &str) -> Result<Option<u64>, String> {
    match r.data.get(field) {
        None => Ok(None),
        Some(v) => v
            .as_u64()
            .map(Some)
            .ok_or_else(|| bad(r, field, format!("found {v}; expected an unsigned integer"))),
    }
}

fn need(r: &Record, field: &str) -> Result<u64, String> {
    number(r, field)?.ok_or_else(|| bad(r, field, "missing; expected an unsigned integer"))
}

fn u32_of(n: u64) -> u32 {
    n.min(u64::from(u32::MAX)) as u32
}

/// Reads one `transfer` record.
fn transfer(r: &Record) -> Result<Transfer, String> {
    let site = r.data.get("site").and_then(|v| v.as_str()).ok_or_else(|| {
        bad(
            r,
            "site",
            "missing; expected a site name such as ctrl.get_status#1",
        )
    })?;
    let status = r
        .data
        .get("status")
        .and_then(|v| v.as_str())
        .ok_or_else(|| bad(r, "status", "missing; expected ok, stall, timeout, ..."))?;
    let result = match status {
        "ok" => Ok(()),
        "stall" => Err(TransferError::Stall),
        "disconnected" => Err(TransferError::Disconnected),
        "cancelled" => Err(TransferError::Cancelled),
        "timeout" => Err(TransferError::Timeout),
        "fault" => Err(TransferError::Fault),
        other => {
            return Err(bad(
                r,
                "status",
                format!("`{other}`; expected ok, stall, disconnected, cancelled, timeout or fault"),
            ))
        }
    };
    let len = number(r, "len")?;
    let out = payload(r, "out")?;
    let inp = payload(r, "in")?;
    if let Some(hex) = r.data.get("setup") {
        let bytes = hex
            .as_str()
            .ok_or_else(|| format!("found {hex}; expected 16 hex digits"))
            .and_then(calametra_core::hex::decode)
            .and_then(|b| Setup::from_bytes(&b))
            .map_err(|e| bad(r, "setup", e))?;
        let is_in = bytes.is_in();
        let requested = u32::from(bytes.length);
        let actual = match (&result, is_in) {
            (Err(_), _) => 0,
            (Ok(()), true) => u32_of(len.unwrap_or(0)),
            (Ok(()), false) => requested,
        };
        return Ok(Transfer {
            xfer: Xfer::Control,
            endpoint: if is_in { DIR_IN } else { 0 },
            setup: Some(bytes),
            result,
            requested,
            actual,
            out,
            inp,
        });
    }
    let ep = need(r, "ep")?;
    let ep = u8::try_from(ep).map_err(|_| bad(r, "ep", format!("{ep}; expected 0..=255")))?;
    let xfer = if site.starts_with("intr.") {
        Xfer::Interrupt
    } else {
        Xfer::Bulk
    };
    let actual = match &result {
        Ok(()) => u32_of(need(r, "len")?),
        Err(_) => 0,
    };
    if let Some(o) = &out {
        // OUT: the length offered is the payload's when the trace kept it whole, else (a long
        // payload) the length taken when it succeeded; nothing better is known when it failed.
        let requested = if o.whole || result.is_err() {
            o.bytes.len() as u32
        } else {
            actual
        };
        return Ok(Transfer {
            xfer,
            endpoint: ep & !DIR_IN,
            setup: None,
            result,
            requested: requested.max(actual),
            actual,
            out,
            inp: None,
        });
    }
    Ok(Transfer {
        xfer,
        endpoint: ep | DIR_IN,
        setup: None,
        result,
        requested: u32_of(need(r, "max")?),
        actual,
        out: None,
        inp,
    })
}

/// The usbmon pcapng file of `records` (a trace's records, in order): see the module docs.
/// A `transfer` record missing a field or holding one of the wrong type is an error naming its
/// line, `seq` and field.
pub fn pcapng(src: &(impl super::Source + ?Sized)) -> Result<Vec<u8>, String> {
    // The packets to write after each record that has any: (time, packet bytes). Records are
    // read one at a time; only packets are kept (a payload's head, so less than the trace).
    let mut after: BTreeMap<usize, Vec<(u64, Vec<u8>)>> = BTreeMap::new();
    // Each task's last poll: the index of its `task` record and its time.
    let mut poll: BTreeMap<String, (usize, u64)> = BTreeMap::new();
    let mut id = 0u64;
    let mut i = 0usize;
    src.each(&mut |r| {
        match r.kind.as_str() {
            "task" if r.data.get("done").is_none() => {
                poll.insert(r.actor.clone(), (i, r.t_ns));
            }
            "transfer" => {
                let t = transfer(r)?;
                id += 1;
                let (at, t_sub) = poll.get(r.actor.as_str()).copied().unwrap_or((i, r.t_ns));
                let event = |stage, time: u64, status, length, setup, data: &[u8]| {
                    let mut p = Vec::new();
                    UrbEvent {
                        id,
                        stage,
                        xfer: t.xfer,
                        endpoint: t.endpoint,
                        device: DEVICE,
                        bus: BUS,
                        time: Duration::from_nanos(time),
                        status,
                        length,
                        setup,
                        data,
                    }
                    .encode(usize::MAX, &mut p);
                    (time, p)
                };
                let out = t.out.as_ref().map_or(&[][..], |p| &p.bytes[..]);
                let s = event(
                    Stage::Submit,
                    t_sub,
                    errno::EINPROGRESS,
                    t.requested,
                    t.setup,
                    out,
                );
                after.entry(at).or_default().push(s);
                let inp = match (&t.result, &t.inp) {
                    (Ok(()), Some(p)) => &p.bytes[..],
                    _ => &[][..],
                };
                let c = event(
                    Stage::Complete,
                    r.t_ns,
                    usbmon::status(&t.result),
                    t.actual,
                    None,
                    inp,
                );
                after.entry(i).or_default().push(c);
            }
            _ => {}
        }
        i += 1;
        Ok(())
    })?;
    let mut file = calametra_usb::pcapng::header(
        concat!("calametra ", env!("CARGO_PKG_VERSION"), " export --pcapng"),
        "calametra",
    );
    for (time, p) in after.into_values().flatten() {
        calametra_usb::pcapng::packet(&mut file, Duration::from_nanos(time), &p);
    }
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;
    use calametra_capture::{Capture, EventKind, Status, XferType};
    use calametra_core::trace::{parse_kept, Trace};

    /// A run with one transfer of each outcome, in the trace's own format.
    fn run() -> Vec<Record> {
        let mut t = Trace::new(true);
        let long: Vec<u8> = (0..100).collect();
        t.emit(0, "task", "driver", true, |_| {});
        t.emit(125_000, "transfer", "driver", true, |d| {
            d.site("site", "ctrl.get_edid", 1)
                .hex("setup", &[0xc0, 0x80, 0, 0, 0, 0, 0x80, 0])
                .str("status", "ok")
                .u64("len", 100)
                .payload("in", &long);
        });
        t.emit(125_000, "task", "driver", true, |_| {});
        t.emit(125_000, "fault", "bus", true, |d| {
            d.site("site", "ctrl.modeset", 1).str("fault", "stall");
        });
        t.emit(250_000, "transfer", "driver", true, |d| {
            d.site("site", "ctrl.modeset", 1)
                .hex("setup", &[0x40, 0x12, 0, 0, 0, 0, 2, 0])
                .hex("out", &[1, 2])
                .str("status", "stall");
        });
        t.emit(250_000, "task", "driver", true, |_| {});
        t.emit(300_000, "transfer", "driver", true, |d| {
            d.site("site", "bulk.out", 1)
                .u64("ep", 1)
                .hex("out", &[9; 8])
                .str("status", "ok")
                .u64("len", 5);
        });
        t.emit(300_000, "task", "driver", true, |_| {});
        t.emit(5_300_000, "transfer", "driver", true, |d| {
            d.site("site", "ctrl.get_status", 1)
                .hex("setup", &[0xc0, 0x87, 0, 0, 0, 0, 4, 0])
                .str("status", "timeout");
        });
        t.emit(5_300_000, "transfer", "irq", true, |d| {
            d.site("site", "intr.in", 1)
                .u64("ep", 0x81)
                .u64("max", 64)
                .str("status", "disconnected");
        });
        t.emit(5_300_000, "transfer", "driver", true, |d| {
            d.site("site", "bulk.out", 2)
                .u64("ep", 1)
                .payload("out", &long)
                .str("status", "ok")
                .u64("len", 100);
        });
        t.emit(5_300_000, "task", "driver", true, |d| {
            d.str("task", "driver").bool("done", true);
        });
        parse_kept(t.lines())
    }

    #[test]
    fn each_outcome_shows_as_the_host_sees_it_and_reads_back() {
        let file = pcapng(&run()[..]).unwrap();
        let cap = Capture::parse("run.pcapng", &file).unwrap();
        assert_eq!(cap.link_types, [220]);
        let t = cap.transfers();
        assert!(t.notes.is_empty(), "{:?}", t.notes);
        let c: Vec<(u8, Status, u32, i64, Option<i64>, usize)> = t
            .control
            .iter()
            .map(|c| {
                let s = c.setup;
                (
                    s.request,
                    c.status,
                    c.actual,
                    c.t_us,
                    c.complete_t_us,
                    c.data.len(),
                )
            })
            .collect();
        assert_eq!(
            c,
            [
                // Submitted at the task's poll at 0, the 100-byte reply kept as its 32-byte head.
                (0x80, Status::Ok, 100, 0, Some(125), 32),
                (0x12, Status::Stall, 0, 125, Some(250), 2),
                (0x87, Status::Error(-2), 0, 300, Some(5300), 0),
            ]
        );
        let d: Vec<(XferType, u8, Status, u32, u32, i64)> = t
            .data
            .iter()
            .map(|d| (d.xfer, d.endpoint, d.status, d.requested, d.actual, d.t_us))
            .collect();
        assert_eq!(
            d,
            [
                // A short bulk OUT: status 0, 5 of 8 bytes.
                (XferType::Bulk, 0x01, Status::Ok, 8, 5, 250),
                // Long: its head kept, its length the record's; submitted at the poll at 300.
                (XferType::Bulk, 0x01, Status::Ok, 100, 100, 300),
                // No task named irq polled: submitted at its completion.
                (XferType::Interrupt, 0x81, Status::Error(-108), 64, 0, 5300),
            ]
        );
        assert!(
            cap.events.windows(2).all(|w| w[0].t_us <= w[1].t_us),
            "packets in time order"
        );
        assert_eq!(
            cap.events
                .iter()
                .filter(|e| e.kind == EventKind::Submit)
                .count(),
            6
        );
    }

    #[test]
    fn a_malformed_transfer_record_is_an_error_naming_its_line_and_field() {
        let mut t = Trace::new(true);
        t.emit(0, "transfer", "driver", true, |d| {
            d.site("site", "bulk.in", 1)
                .str("status", "ok")
                .u64("len", 1);
        });
        t.emit(0, "transfer", "driver", true, |d| {
            d.site("site", "ctrl.x", 1)
                .hex("setup", &[1, 2, 3])
                .str("status", "ok");
        });
        t.emit(0, "transfer", "driver", true, |d| {
            d.site("site", "ctrl.x", 1)
                .hex("setup", &[0; 8])
                .str("status", "melted");
        });
        let recs = parse_kept(t.lines());
        for (k, want) in [
            (
                0,
                "line 1 (record seq 0, kind transfer), field `ep`: missing",
            ),
            (1, "field `setup`: a setup packet is 8 bytes, found 3"),
            (2, "field `status`: `melted`; expected ok"),
        ] {
            let e = pcapng(&recs[k..=k]).err().unwrap();
            assert!(e.contains(want), "{e}");
        }
    }
}
