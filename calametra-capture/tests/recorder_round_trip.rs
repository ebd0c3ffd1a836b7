//! What `calametra-usb`'s recorder writes (feature `record`: the usbmon packet and the pcapng
//! around it), this crate's reader reads back: every event's fields, and every transfer's
//! setup, data, status and lengths, in order. The writer and the reader are separate code over
//! one header layout (`calametra_usb::usbmon::layout`); these tests are where they must agree.

use calametra_capture::{Capture, EventKind, Format, Status, XferType};
use calametra_core::usb::{
    ControlIn, ControlOut, ControlType, Recipient, Setup, TransferError, UsbInterface,
};
use calametra_usb::record::{Recorder, Recording};
use calametra_usb::usbmon::{errno, Stage, UrbEvent, Xfer};
use std::cell::Cell;
use std::future::Future;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

/// A device whose transfers end at once, one outcome of each kind: control IN by `bRequest`
/// (0 stalls, 1 times out, otherwise half the bytes asked), a bulk OUT that takes all but one
/// byte, a bulk IN that never ends, interrupt IN from a gone device, control OUT on a bus
/// error when `wValue` is 0xdead.
struct Device;

impl UsbInterface for Device {
    async fn control_in(&self, req: ControlIn, _: Duration) -> Result<Vec<u8>, TransferError> {
        match req.request {
            0 => Err(TransferError::Stall),
            1 => Err(TransferError::Timeout),
            r => Ok(vec![r; usize::from(req.length) / 2]),
        }
    }
    async fn control_out(&self, req: ControlOut<'_>, _: Duration) -> Result<(), TransferError> {
        if req.value == 0xdead {
            Err(TransferError::Fault)
        } else {
            Ok(())
        }
    }
    async fn bulk_out(&self, _: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        Ok(data.len().saturating_sub(1))
    }
    fn bulk_in(&self, _: u8, _: usize) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
        std::future::pending()
    }
    async fn interrupt_in(&self, _: u8, _: usize) -> Result<Vec<u8>, TransferError> {
        Err(TransferError::Disconnected)
    }
    async fn sleep(&self, _: Duration) {}
}

/// Polls `f` once: its output if it is ready (the fake device never makes one wait).
fn once<F: Future>(f: F) -> Option<F::Output> {
    match pin!(f).poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(v) => Some(v),
        Poll::Pending => None,
    }
}

fn vendor_in(request: u8, length: u16) -> ControlIn {
    ControlIn {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request,
        value: 0x0102,
        index: 0x0304,
        length,
    }
}

#[test]
fn every_recorded_transfer_reads_back_with_its_setup_data_status_and_time() {
    let rec = Recording::in_memory();
    let tick = Cell::new(0u64);
    // 1.25 s apart, past a second and with microseconds, so both time fields are exercised.
    let clock = || {
        tick.set(tick.get() + 1);
        Duration::from_micros(1_250_001 * tick.get())
    };
    let iface = Recorder::with_clock(Device, &rec, clock).at_address(4, 17);
    let ms = Duration::from_millis(5);
    let payload: Vec<u8> = (0..100).collect();
    assert_eq!(
        once(iface.control_in(vendor_in(0x80, 128), ms)),
        Some(Ok(vec![0x80; 64]))
    );
    let out = ControlOut {
        control_type: ControlType::Vendor,
        recipient: Recipient::Interface,
        request: 0x12,
        value: 0,
        index: 1,
        data: &payload[..32],
    };
    assert_eq!(once(iface.control_out(out, ms)), Some(Ok(())));
    assert_eq!(
        once(iface.control_in(vendor_in(0, 4), ms)),
        Some(Err(TransferError::Stall))
    );
    assert_eq!(
        once(iface.control_in(vendor_in(1, 4), ms)),
        Some(Err(TransferError::Timeout))
    );
    assert_eq!(
        once(iface.control_out(
            ControlOut {
                value: 0xdead,
                ..out
            },
            ms
        )),
        Some(Err(TransferError::Fault))
    );
    assert_eq!(once(iface.bulk_out(0x02, payload.clone())), Some(Ok(99)));
    assert_eq!(once(iface.bulk_in(0x81, 512)), None);
    assert_eq!(
        once(iface.interrupt_in(0x83, 8)),
        Some(Err(TransferError::Disconnected))
    );

    let bytes = rec.bytes().expect("an in-memory recording");
    let cap = Capture::parse("recorded.pcapng", &bytes).expect("the reader takes the recording");
    assert_eq!(cap.format, Format::Pcapng);
    assert_eq!(cap.link_types, [220]);
    assert_eq!(
        cap.events.len(),
        16,
        "a submission and a completion per transfer"
    );
    for (k, e) in cap.events.iter().enumerate() {
        assert_eq!((e.bus, e.device), (4, 17), "event {k}");
        assert_eq!(
            e.id,
            k as u64 / 2 + 1,
            "event {k}: ids count transfers from 1"
        );
        let kind = if k % 2 == 0 {
            EventKind::Submit
        } else {
            EventKind::Complete
        };
        assert_eq!(e.kind, kind, "event {k}");
        if kind == EventKind::Submit {
            assert_eq!(e.status, -115, "event {k}");
        }
    }
    // The clock was read at each submission and completion, in order; the dropped bulk IN's
    // completion takes the time of the event after it.
    let times: Vec<i64> = cap.events.iter().map(|e| e.t_us).collect();
    let ticks = (1..=13).chain([14, 14, 15]);
    let want: Vec<i64> = ticks.map(|k| 1_250_001 * k).collect();
    assert_eq!(times, want);

    let t = cap.transfers();
    assert!(t.notes.is_empty(), "{:?}", t.notes);
    let c: Vec<(Setup, Status, u32, Vec<u8>)> = t
        .control
        .iter()
        .map(|c| (c.setup, c.status, c.actual, c.data.clone()))
        .collect();
    assert_eq!(
        c,
        [
            (vendor_in(0x80, 128).setup(), Status::Ok, 64, vec![0x80; 64]),
            (out.setup(), Status::Ok, 32, payload[..32].to_vec()),
            (vendor_in(0, 4).setup(), Status::Stall, 0, vec![]),
            (
                vendor_in(1, 4).setup(),
                Status::Error(errno::ENOENT),
                0,
                vec![]
            ),
            (
                ControlOut {
                    value: 0xdead,
                    ..out
                }
                .setup(),
                Status::Error(errno::EPROTO),
                0,
                payload[..32].to_vec()
            ),
        ]
    );
    assert_eq!(t.control[0].endpoint, 0x80);
    assert_eq!(t.control[1].endpoint, 0x00);
    let d: Vec<(XferType, u8, Status, u32, u32, Vec<u8>)> = t
        .data
        .iter()
        .map(|d| {
            (
                d.xfer,
                d.endpoint,
                d.status,
                d.requested,
                d.actual,
                d.data.clone(),
            )
        })
        .collect();
    assert_eq!(
        d,
        [
            (XferType::Bulk, 0x02, Status::Ok, 100, 99, payload.clone()),
            (
                XferType::Bulk,
                0x81,
                Status::Error(errno::ECONNRESET),
                512,
                0,
                vec![]
            ),
            (
                XferType::Interrupt,
                0x83,
                Status::Error(errno::ESHUTDOWN),
                8,
                0,
                vec![]
            ),
        ]
    );
}

/// One event through `UrbEvent::encode` and the reader's `parse_packet`, field by field,
/// at a snap length that cuts its data.
#[test]
fn an_encoded_event_parses_back_field_by_field() {
    let data: Vec<u8> = (0..=255).collect();
    let e = UrbEvent {
        id: 0xffff_9de8_493e_8600,
        stage: Stage::Complete,
        xfer: Xfer::Bulk,
        endpoint: 0x81,
        device: 25,
        bus: 6,
        time: Duration::new(1_652_574_388, 396_161_999),
        status: -71,
        length: 256,
        setup: None,
        data: &data,
    };
    let mut p = Vec::new();
    e.encode(200, &mut p);
    let got = calametra_capture::usbmon_bin::parse_packet(
        &p,
        calametra_capture::usbmon_bin::LINKTYPE_USB_LINUX_MMAPPED,
        calametra_capture::Order::Little,
        1,
    )
    .expect("parses");
    assert_eq!(got.id, e.id);
    assert_eq!(got.kind, EventKind::Complete);
    assert_eq!(got.xfer, XferType::Bulk);
    assert_eq!((got.endpoint, got.device, got.bus), (0x81, 25, 6));
    assert_eq!(got.t_us, 1_652_574_388_396_161);
    assert_eq!((got.status, got.length), (-71, 256));
    assert_eq!(got.setup, None);
    assert_eq!(got.data, data[..200]);
}
