//! Pairing usbmon events into transfers: each submission (`S`) with its completion (`C`) or
//! submission error (`E`), by URB id on the same bus and device. Transfers keep the order of
//! their submissions. A control transfer takes its setup (and OUT data) from the submission,
//! its status, actual length (and IN data) from the completion.
//!
//! Anything odd (a completion with no submission, an id reused before completing, a control
//! submission without a captured setup) is kept as a note, never a panic or a silent drop.

use super::{errno_name, Event, EventKind, XferType};
use calametra_core::usb::Setup;
use std::collections::BTreeMap;
use std::fmt;

/// How a transfer ended, in the capture.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Status {
    /// Completed with status 0.
    Ok,
    /// Completed with -32 (`EPIPE`): the device stalled.
    Stall,
    /// Completed with another negative errno (`-71` `EPROTO`, `-104` `ECONNRESET` on unlink).
    Error(i32),
    /// The submission itself failed (`E` event) with this errno; the device saw nothing.
    SubmitError(i32),
    /// The capture ends (or the id was reused) before a completion.
    NoCompletion,
}

impl Status {
    /// From a completion's status word.
    pub fn from_completion(status: i32) -> Status {
        match status {
            0 => Status::Ok,
            -32 => Status::Stall,
            e => Status::Error(e),
        }
    }

    /// The status as usbmon prints it (`0`, `-32`), or `none` without a completion.
    pub fn code(&self) -> String {
        match self {
            Status::Ok => "0".into(),
            Status::Stall => "-32".into(),
            Status::Error(e) | Status::SubmitError(e) => e.to_string(),
            Status::NoCompletion => "none".into(),
        }
    }
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let name = |e: i32| errno_name(e).map_or(String::new(), |n| format!(" {n}"));
        match self {
            Status::Ok => f.write_str("ok"),
            Status::Stall => f.write_str("stall (-32 EPIPE)"),
            Status::Error(e) => write!(f, "error ({e}{})", name(*e)),
            Status::SubmitError(e) => write!(f, "submission failed ({e}{})", name(*e)),
            Status::NoCompletion => f.write_str("no completion in the capture"),
        }
    }
}

/// One control transfer from a capture.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ControlTransfer {
    /// Bus number.
    pub bus: u16,
    /// Device address.
    pub device: u8,
    /// Endpoint address (0x00 or 0x80 for the default pipe).
    pub endpoint: u8,
    /// URB id.
    pub id: u64,
    /// The submission's record (packet number or line).
    pub submit_record: usize,
    /// The completion's record, when there is one.
    pub complete_record: Option<usize>,
    /// Submission time, microseconds of the capturing host's clock.
    pub t_us: i64,
    /// Completion time, when there is one.
    pub complete_t_us: Option<i64>,
    /// The setup packet.
    pub setup: Setup,
    /// How it ended.
    pub status: Status,
    /// Bytes transferred in the data stage (the completion's length; 0 without one).
    pub actual: u32,
    /// The data stage as captured: IN data from the completion, OUT data from the submission.
    pub data: Vec<u8>,
    /// Whether `data` is shorter than what crossed the bus (text captures keep 32 bytes; a
    /// snap length may cut a packet).
    pub truncated: bool,
}

impl ControlTransfer {
    /// Whether the data stage is device-to-host.
    pub fn is_in(&self) -> bool {
        self.setup.is_in()
    }

    /// The transfer as one line, in the layout of `refdata/jcd543-4k-edid-control-transfers.txt`:
    /// `1652574388.396161 bus=6 dev=25 bm=0x80 bReq=0x06 wValue=0x0100 wIndex=0x0000 wLength=18
    /// status=0 actual=18 data=1201...`. The time is the completion's (the submission's when
    /// there is none), as that file has it.
    pub fn to_line(&self) -> String {
        let s = &self.setup;
        let t = self.complete_t_us.unwrap_or(self.t_us);
        format!(
            "{}.{:06} bus={} dev={} bm={:#04x} bReq={:#04x} wValue={:#06x} wIndex={:#06x} \
             wLength={} status={} actual={} data={}",
            t.div_euclid(1_000_000),
            t.rem_euclid(1_000_000),
            self.bus,
            self.device,
            s.request_type,
            s.request,
            s.value,
            s.index,
            s.length,
            self.status.code(),
            self.actual,
            calametra_core::hex::encode(&self.data)
        )
    }
}

/// One bulk, interrupt or isochronous transfer from a capture (isochronous descriptors are not
/// kept).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DataTransfer {
    /// Bulk, interrupt or isochronous.
    pub xfer: XferType,
    /// Bus number.
    pub bus: u16,
    /// Device address.
    pub device: u8,
    /// Endpoint address, bit 7 set for IN.
    pub endpoint: u8,
    /// URB id.
    pub id: u64,
    /// The submission's record.
    pub submit_record: usize,
    /// The completion's record, when there is one.
    pub complete_record: Option<usize>,
    /// Submission time, microseconds.
    pub t_us: i64,
    /// Completion time, when there is one.
    pub complete_t_us: Option<i64>,
    /// How it ended.
    pub status: Status,
    /// Bytes asked for (IN) or offered (OUT) at submission.
    pub requested: u32,
    /// Bytes transferred (the completion's length; 0 without one).
    pub actual: u32,
    /// The data as captured: IN from the completion, OUT from the submission.
    pub data: Vec<u8>,
    /// Whether `data` is shorter than what crossed the bus.
    pub truncated: bool,
}

impl DataTransfer {
    /// Whether data flows device-to-host.
    pub fn is_in(&self) -> bool {
        self.endpoint & calametra_core::usb::DIR_IN != 0
    }
}

/// A capture's transfers, each list in submission order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Transfers {
    /// Control transfers.
    pub control: Vec<ControlTransfer>,
    /// Bulk, interrupt and isochronous transfers.
    pub data: Vec<DataTransfer>,
    /// What could not be paired, one sentence each, naming the record.
    pub notes: Vec<String>,
}

#[derive(Clone, Copy)]
enum Slot {
    Control(usize),
    Data(usize),
}

/// Pairs `events` into transfers.
pub fn reassemble(events: &[Event]) -> Transfers {
    let mut out = Transfers::default();
    let mut pending: BTreeMap<(u16, u8, u64), Slot> = BTreeMap::new();
    for e in events {
        let key = (e.bus, e.device, e.id);
        match e.kind {
            EventKind::Submit => {
                let slot = if e.xfer == XferType::Control {
                    let Some(setup) = e.setup else {
                        out.notes.push(format!(
                            "record {}: control submission without a captured setup packet; \
                             not imported",
                            e.record
                        ));
                        continue;
                    };
                    out.control.push(ControlTransfer {
                        bus: e.bus,
                        device: e.device,
                        endpoint: e.endpoint,
                        id: e.id,
                        submit_record: e.record,
                        complete_record: None,
                        t_us: e.t_us,
                        complete_t_us: None,
                        setup,
                        status: Status::NoCompletion,
                        actual: 0,
                        data: if setup.is_in() {
                            Vec::new()
                        } else {
                            e.data.clone()
                        },
                        truncated: !setup.is_in() && e.data.len() < usize::from(setup.length),
                    });
                    Slot::Control(out.control.len() - 1)
                } else {
                    let is_in = e.endpoint & calametra_core::usb::DIR_IN != 0;
                    out.data.push(DataTransfer {
                        xfer: e.xfer,
                        bus: e.bus,
                        device: e.device,
                        endpoint: e.endpoint,
                        id: e.id,
                        submit_record: e.record,
                        complete_record: None,
                        t_us: e.t_us,
                        complete_t_us: None,
                        status: Status::NoCompletion,
                        requested: e.length,
                        actual: 0,
                        data: if is_in { Vec::new() } else { e.data.clone() },
                        truncated: !is_in && (e.data.len() as u64) < u64::from(e.length),
                    });
                    Slot::Data(out.data.len() - 1)
                };
                if let Some(old) = pending.insert(key, slot) {
                    let rec = match old {
                        Slot::Control(i) => out.control.get(i).map(|t| t.submit_record),
                        Slot::Data(i) => out.data.get(i).map(|t| t.submit_record),
                    };
                    out.notes.push(format!(
                        "record {}: URB id {:#x} submitted again before the submission at record \
                         {} completed; that one is left without a completion",
                        e.record,
                        e.id,
                        rec.unwrap_or(0)
                    ));
                }
            }
            EventKind::Complete | EventKind::Error => {
                let Some(slot) = pending.remove(&key) else {
                    out.notes.push(format!(
                        "record {}: completion of URB id {:#x} (bus {} device {}) with no \
                         submission before it; ignored",
                        e.record, e.id, e.bus, e.device
                    ));
                    continue;
                };
                let status = if e.kind == EventKind::Error {
                    Status::SubmitError(e.status)
                } else {
                    Status::from_completion(e.status)
                };
                let actual = if e.kind == EventKind::Error {
                    0
                } else {
                    e.length
                };
                match slot {
                    Slot::Control(i) => {
                        if let Some(t) = out.control.get_mut(i) {
                            t.complete_record = Some(e.record);
                            t.complete_t_us = Some(e.t_us);
                            t.status = status;
                            t.actual = actual;
                            if t.setup.is_in() {
                                t.data = e.data.clone();
                                t.truncated = (e.data.len() as u64) < u64::from(actual);
                            }
                        }
                    }
                    Slot::Data(i) => {
                        if let Some(t) = out.data.get_mut(i) {
                            t.complete_record = Some(e.record);
                            t.complete_t_us = Some(e.t_us);
                            t.status = status;
                            t.actual = actual;
                            if t.is_in() {
                                t.data = e.data.clone();
                                t.truncated = (e.data.len() as u64) < u64::from(actual);
                            }
                        }
                    }
                }
            }
        }
    }
    out
}
