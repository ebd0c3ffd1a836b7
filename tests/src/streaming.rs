//! A streaming reader (an SDR or logic analyzer's shape) and the device it reads, for the
//! queued-transfer scenarios (`src/bin/streaming.rs`, `tests/streaming.rs`): the reader keeps
//! four bulk IN transfers in flight through [`calametra::usb::Endpoint`], recovers a stalled
//! endpoint with `clear_halt`, reports every gap it sees in the samples' sequence numbers, and
//! in its replug form finds and reopens its device through [`calametra::usb::UsbHost`]. The
//! driver code is generic (it would run on nusb unchanged); the device and the invariant are
//! the test's.
//!
//! The invariant `no_sample_lost`: the samples the reader keeps are in order, none twice, and
//! every sample the device produced before the last one kept (all of them once the reader is
//! done) was kept or lies in a gap the reader reported.

use calametra::prelude::*;
use calametra::usb::{
    Buffer, ControlOut, ControlType, Descriptors, HotplugEvent, HotplugWatch, Recipient,
    TransferError, TransferType, UsbHost, UsbInterface,
};
use calametra::usb::{DevCtx, Device, Reply, Setup, SimHost};
use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::Duration;

/// The bulk IN endpoint the samples come from.
pub const EP: u8 = 0x81;
/// One sample: its sequence number (u32, little-endian) and four bytes of data.
pub const PACKET: usize = 8;
/// Samples a stream carries.
pub const SAMPLES: u32 = 48;
/// The sequence number of the end-of-stream packet.
pub const END: u32 = u32::MAX;
/// The device's ids and serial, as its descriptors give them.
pub const VID: u16 = 0x1209;
/// Product id.
pub const PID: u16 = 0x5354;
/// Serial number.
pub const SERIAL: &str = "SR-0001";
/// Transfers the reader keeps in flight.
pub const IN_FLIGHT: usize = 4;
/// A sample every 50 us; the device buffers 8.
const PERIOD_NS: u64 = 50_000;
const FIFO: usize = 8;

/// A sampling device: after a vendor START request it produces [`SAMPLES`] samples, one every
/// 50 us, into an 8-deep FIFO (a sample that finds it full is dropped, as a real ADC's is),
/// then an end packet. Accepts `CLEAR_FEATURE(ENDPOINT_HALT)` and alternate setting 0.
#[derive(Default)]
pub struct Sampler {
    streaming: bool,
    ended: bool,
    /// Samples produced this stream (the ground truth).
    pub produced: u32,
    fifo: VecDeque<u32>,
    /// Samples dropped on a full FIFO this stream.
    pub dropped: u32,
}

impl Device for Sampler {
    fn name(&self) -> &str {
        "sampler"
    }

    fn control(&mut self, cx: &mut DevCtx<'_>, setup: &Setup, _data: &[u8]) -> Reply {
        match (setup.request_type, setup.request) {
            (0x40, 0x01) => {
                *self = Sampler {
                    streaming: true,
                    ..Sampler::default()
                };
                cx.wake_after(PERIOD_NS, 0);
                Reply::Ack
            }
            (0x02, 1) if setup.value == 0 && setup.index as u8 == EP => Reply::Ack,
            (0x01, 11) if setup.value == 0 => Reply::Ack,
            (0x01, 11) => Reply::Stall,
            _ => {
                cx.model_gap(
                    &format!("request {:02x}_{:02x}", setup.request_type, setup.request),
                    "not modelled",
                );
                Reply::Stall
            }
        }
    }

    fn poll_in(&mut self, cx: &mut DevCtx<'_>, ep: u8, _max: usize) -> Reply {
        if ep != EP {
            cx.model_gap(&format!("in ep {ep:#04x}"), "no such endpoint");
            return Reply::Stall;
        }
        let seq = match self.fifo.pop_front() {
            Some(s) => s,
            None if self.ended => END,
            None => return Reply::Nak,
        };
        let mut p = seq.to_le_bytes().to_vec();
        p.extend_from_slice(&[0xa5; PACKET - 4]);
        Reply::Data(p)
    }

    fn on_timer(&mut self, cx: &mut DevCtx<'_>, _token: u64) {
        if !self.streaming || self.ended {
            return;
        }
        if self.fifo.len() < FIFO {
            self.fifo.push_back(self.produced);
        } else {
            self.dropped += 1;
            cx.mark("fifo_overflow");
        }
        self.produced += 1;
        if self.produced < SAMPLES {
            cx.wake_after(PERIOD_NS, 0);
        } else {
            self.ended = true;
        }
    }

    fn on_reset(&mut self, _cx: &mut DevCtx<'_>) {
        *self = Sampler::default();
    }

    fn descriptors(&self) -> Option<Descriptors> {
        let [vl, vh] = VID.to_le_bytes();
        let [pl, ph] = PID.to_le_bytes();
        Some(Descriptors {
            device: vec![18, 1, 0, 2, 0, 0, 0, 64, vl, vh, pl, ph, 0, 1, 0, 1, 2, 1],
            configurations: vec![vec![
                9, 2, 25, 0, 1, 1, 0, 0x80, 50, 9, 4, 0, 0, 1, 0xff, 0, 0, 0, 7, 5, EP, 2, 0, 2, 0,
            ]],
            strings: vec![(1, "Sampler".into()), (2, SERIAL.into())],
        })
    }
}

/// What the reader kept of the current stream.
#[derive(Default, Debug)]
pub struct Session {
    /// Sequence numbers of the samples kept, in the order kept.
    pub received: Vec<u32>,
    /// Gaps reported (first, last), inclusive.
    pub gaps: Vec<(u32, u32)>,
    /// The reader finished the stream (or gave up on it).
    pub done: bool,
    /// Streams the reader opened (a reopen after a replug is a new one).
    pub opened: u32,
}

impl Session {
    fn covered(&self, s: u32) -> bool {
        self.received.binary_search(&s).is_ok() || self.gaps.iter().any(|&(a, b)| a <= s && s <= b)
    }

    /// The invariant against the device's count of samples produced.
    pub fn check(&self, produced: u32) -> Result<(), String> {
        if let Some(w) = self.received.windows(2).find(|w| w[0] >= w[1]) {
            return Err(format!(
                "the reader kept sample {} after sample {}: duplicated or out of order",
                w[1], w[0]
            ));
        }
        let upto = if self.done {
            produced
        } else {
            self.received.last().copied().unwrap_or(0)
        };
        match (0..upto).find(|&s| !self.covered(s)) {
            Some(s) => Err(format!(
                "sample {s} of {produced} produced was lost without a gap reported (kept {}, gaps {:?}, done {})",
                self.received.len(),
                self.gaps,
                self.done
            )),
            None => Ok(()),
        }
    }
}

/// A mistake the reader can be built with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bug {
    /// The fixed reader.
    None,
    /// Takes the stream as lossless: a jump in the sequence is not reported.
    NoGapReport,
    /// Retries a stalled endpoint without `clear_halt` (and gives up after a few stalls).
    NoClearHalt,
}

/// The reader: starts the stream, keeps [`IN_FLIGHT`] bulk IN transfers in flight, and keeps
/// each sample, reporting gaps; `Err(Disconnected)` when the device goes away.
pub async fn read_stream<I: UsbInterface>(
    iface: &I,
    session: &RefCell<Session>,
    bug: Bug,
) -> Result<(), TransferError> {
    let start = ControlOut {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request: 1,
        value: 0,
        index: 0,
        data: &[],
    };
    iface.control_out(start, Duration::from_millis(100)).await?;
    let mut ep = iface.endpoint(EP, TransferType::Bulk)?;
    for _ in 0..IN_FLIGHT {
        ep.submit(Buffer::new(PACKET));
    }
    let mut last: Option<u32> = None;
    let mut stalls = 0;
    let keep = |buf: &[u8], last: &mut Option<u32>| -> bool {
        // A short packet carries no sequence number: the next one shows the gap.
        let Some(b) = buf.get(..4) else {
            return false;
        };
        let seq = u32::from_le_bytes([b[0], b[1], b[2], b[3]]);
        let next = last.map_or(0, |l| l + 1);
        let mut s = session.borrow_mut();
        if seq == END {
            if next < SAMPLES && bug != Bug::NoGapReport {
                s.gaps.push((next, SAMPLES - 1));
            }
            s.done = true;
            return true;
        }
        if seq < next {
            return false;
        }
        if seq > next && bug != Bug::NoGapReport {
            s.gaps.push((next, seq - 1));
        }
        s.received.push(seq);
        *last = Some(seq);
        false
    };
    loop {
        let c = iface
            .timeout(Duration::from_millis(2), ep.next_complete())
            .await;
        let c = match c {
            Ok(c) => c,
            Err(_) => {
                // The oldest transfer is late: cancel the queue, keep what arrived, start over.
                ep.cancel_all();
                while ep.pending() > 0 {
                    let c = ep.next_complete().await;
                    if c.status.is_ok() && keep(&c.buffer, &mut last) {
                        return Ok(());
                    }
                }
                for _ in 0..IN_FLIGHT {
                    ep.submit(Buffer::new(PACKET));
                }
                continue;
            }
        };
        match c.status {
            Ok(()) => {
                stalls = 0;
                if keep(&c.buffer, &mut last) {
                    return Ok(());
                }
                ep.submit(Buffer::new(PACKET));
            }
            Err(TransferError::Disconnected) => return Err(TransferError::Disconnected),
            Err(TransferError::Stall) => {
                // Every transfer behind the stall fails too: drain them, then clear the halt.
                ep.cancel_all();
                while ep.pending() > 0 {
                    let c = ep.next_complete().await;
                    if c.status.is_ok() && keep(&c.buffer, &mut last) {
                        return Ok(());
                    }
                }
                stalls += 1;
                if bug == Bug::NoClearHalt {
                    if stalls > 3 {
                        session.borrow_mut().done = true;
                        return Ok(());
                    }
                } else {
                    ep.clear_halt().await?;
                }
                for _ in 0..IN_FLIGHT {
                    ep.submit(Buffer::new(PACKET));
                }
            }
            Err(_) => ep.submit(Buffer::new(PACKET)),
        }
    }
}

/// The stream scenario: the sampler and a reader with `bug`.
pub fn stream_scenario(sim: &mut Sim, bug: Bug) {
    let dev = sim.attach(Sampler::default());
    let iface = dev.interface();
    let session = Rc::new(RefCell::new(Session::default()));
    let s = session.clone();
    sim.spawn("reader", async move {
        let _ = read_stream(&iface, &s, bug).await;
    });
    sim.invariant("no_sample_lost", move |w| {
        session.borrow().check(w.model(dev).produced)
    });
}

/// The replug reader: finds the sampler by ids and serial through the host, reads its stream,
/// and after an unplug waits for it to come back (a hotplug watch) and reads it again.
pub async fn replug_reader<H: UsbHost>(host: &H, session: &RefCell<Session>) {
    let Ok(mut watch) = host.watch_devices() else {
        return;
    };
    loop {
        if let Ok((_, iface)) = host.open_matching(VID, PID, Some(SERIAL), 0).await {
            let opened = session.borrow().opened + 1;
            *session.borrow_mut() = Session {
                opened,
                ..Session::default()
            };
            match read_stream(&iface, session, Bug::None).await {
                Err(TransferError::Disconnected) => {}
                _ => return,
            }
        }
        // Gone (or not there yet): wait until a device with our serial is plugged in.
        loop {
            if let HotplugEvent::Connected(info) = watch.next_event().await {
                if info.serial_number.as_deref() == Some(SERIAL) {
                    break;
                }
            }
        }
    }
}

/// The replug scenario: the `unplug` external pulls the cable and plugs it back in; the
/// reader must find the device again and read a whole stream.
pub fn replug_scenario(sim: &mut Sim) {
    let dev = sim.attach(Sampler::default());
    let session = Rc::new(RefCell::new(Session::default()));
    let s = session.clone();
    sim.spawn("reader", async move {
        replug_reader(&SimHost::current(), &s).await;
        if s.borrow().opened >= 2 {
            mark("reopened_after_replug");
        }
    });
    sim.external("unplug", move |w| {
        w.disconnect(dev);
        w.reconnect(dev);
    });
    sim.invariant("no_sample_lost", move |w| {
        let s = session.borrow();
        if s.done && s.opened == 0 {
            return Err("the reader ended without opening the device".to_string());
        }
        s.check(w.model(dev).produced)
    });
}
