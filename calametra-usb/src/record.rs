//! Recording a driver's transfers to a usbmon pcapng file (feature `record`): [`Recorder`]
//! wraps any [`UsbInterface`] and writes every transfer the driver makes through it, with its
//! outcome and its time, to a [`Recording`], without root and without usbmon, on any platform
//! the wrapped interface runs on. The file opens in Wireshark with USB decoding and
//! `calametra-capture` reads it (`Capture::load`), so a run on hardware becomes evidence a
//! model is compared with or learned from.
//!
//! Each transfer is a submission (`S`, status -115, the setup packet and OUT data) written when
//! its future is first polled, and a completion (`C`, the status of [`usbmon::status`], the
//! length transferred and IN data) written when it ends. A transfer whose future is dropped
//! unfinished completes as cancelled (-104 `ECONNRESET`), written before the recording's next
//! event or at its end, at that moment's time (a drop may happen where no clock can be read,
//! such as a simulation's teardown). URB ids count from 1, one per transfer.
//!
//! Times come from a [`Clock`]: [`WallClock`] (time since the Unix epoch) on hardware, or the
//! simulator's virtual clock when the wrapped interface is the simulator's, so that a
//! simulated run records the same bytes every time. This module reads the wall clock only in
//! [`WallClock`].
//!
//! On hardware, with `nusb` (a transfer that `NusbInterface` keeps submitted after its future
//! is dropped, an IN whose completion the next read takes, shows here as a cancelled transfer
//! and a new one: the recording is the driver's view):
//!
//! ```no_run
//! # #[cfg(feature = "nusb")] {
//! use calametra_usb::nusb::{block_on, NusbInterface};
//! use calametra_usb::record::{Recorder, Recording};
//! use calametra_usb::{ControlIn, ControlType, Recipient, TransferError, UsbInterface};
//! use std::time::Duration;
//!
//! /// The driver: generic, so it runs unchanged through the recorder.
//! async fn status(iface: &impl UsbInterface) -> Result<Vec<u8>, TransferError> {
//!     let req = ControlIn { control_type: ControlType::Vendor, recipient: Recipient::Device,
//!                           request: 0x87, value: 0, index: 0, length: 1 };
//!     iface.control_in(req, Duration::from_millis(500)).await
//! }
//!
//! let recording = Recording::create("dock.pcapng")?; // written beside, renamed at finish
//! let dock = NusbInterface::open(0x0711, 0x5601, 0).map_err(std::io::Error::other)?;
//! let iface = Recorder::new(dock, &recording);
//! println!("{:?}", block_on(status(&iface)));
//! recording.finish()?; // dock.pcapng appears, whole
//! # }
//! # Ok::<(), std::io::Error>(())
//! ```

use crate::pcapng;
use crate::usbmon::{self, errno, Stage, UrbEvent, Xfer};
use crate::{ControlIn, ControlOut, Setup, TransferError, UsbInterface, DIR_IN};
use std::cell::RefCell;
use std::fs::File;
use std::future::Future;
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::time::Duration;

/// Where a recording's times come from: read at each submission and completion.
pub trait Clock {
    /// The time now: since the Unix epoch on hardware (what Wireshark shows as the date), or
    /// since the run's start in a simulation.
    fn now(&self) -> Duration;
}

impl<F: Fn() -> Duration> Clock for F {
    fn now(&self) -> Duration {
        self()
    }
}

/// The wall clock: the system time when it was made, advanced by a monotonic clock (so a
/// change of the system's time mid-run does not reorder the recording).
#[derive(Clone, Copy, Debug)]
pub struct WallClock {
    epoch: Duration,
    start: std::time::Instant,
}

impl WallClock {
    /// A wall clock starting now.
    #[allow(
        clippy::disallowed_methods,
        reason = "a real bus: the recording's times are the wall clock (never simulated)"
    )]
    pub fn new() -> Self {
        let epoch = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default();
        WallClock {
            epoch,
            start: std::time::Instant::now(),
        }
    }
}

impl Default for WallClock {
    fn default() -> Self {
        WallClock::new()
    }
}

impl Clock for WallClock {
    fn now(&self) -> Duration {
        self.epoch.saturating_add(self.start.elapsed())
    }
}

/// Where the packets go.
enum Sink {
    /// Kept in memory ([`Recording::bytes`]).
    Memory(Vec<u8>),
    /// Written through.
    Writer(Box<dyn Write>),
    /// Written to `partial` and renamed to `path` when finished.
    File {
        file: BufWriter<File>,
        partial: PathBuf,
        path: PathBuf,
    },
    /// Finished (the file is in place).
    Done,
}

/// A transfer dropped unfinished, waiting for its completion to be written.
struct Dropped {
    id: u64,
    xfer: Xfer,
    endpoint: u8,
    bus: u16,
    device: u8,
}

struct Log {
    sink: Sink,
    next_id: u64,
    transfers: u64,
    snaplen: usize,
    last: Duration,
    dropped: Vec<Dropped>,
    error: Option<io::Error>,
    buf: Vec<u8>,
}

impl Log {
    fn put(&mut self, e: &UrbEvent<'_>) {
        self.buf.clear();
        e.encode(self.snaplen, &mut self.buf);
        let mut block = Vec::with_capacity(self.buf.len() + 32);
        pcapng::packet(&mut block, e.time, &self.buf);
        let r = match &mut self.sink {
            Sink::Memory(v) => {
                v.extend_from_slice(&block);
                Ok(())
            }
            Sink::Writer(w) => w.write_all(&block),
            Sink::File { file, .. } => file.write_all(&block),
            Sink::Done => Err(io::Error::other(
                "a transfer after the recording was finished is not recorded",
            )),
        };
        if let (Err(e), None) = (r, &self.error) {
            self.error = Some(e);
        }
    }

    /// Writes an event at `time`, after the completions of transfers dropped before it.
    fn event(&mut self, e: &UrbEvent<'_>) {
        self.flush_dropped(e.time);
        self.last = self.last.max(e.time);
        self.put(e);
    }

    fn flush_dropped(&mut self, time: Duration) {
        let time = time.max(self.last);
        for d in std::mem::take(&mut self.dropped) {
            self.put(&UrbEvent {
                id: d.id,
                stage: Stage::Complete,
                xfer: d.xfer,
                endpoint: d.endpoint,
                device: d.device,
                bus: d.bus,
                time,
                status: errno::ECONNRESET,
                length: 0,
                setup: None,
                data: &[],
            });
        }
    }

    fn finish(&mut self) -> io::Result<()> {
        self.flush_dropped(self.last);
        let r = match std::mem::replace(&mut self.sink, Sink::Done) {
            Sink::Memory(v) => {
                self.sink = Sink::Memory(v);
                Ok(())
            }
            Sink::Writer(mut w) => {
                let r = w.flush();
                self.sink = Sink::Writer(w);
                r
            }
            Sink::File {
                file,
                partial,
                path,
            } => finish_file(file, &partial, &path),
            Sink::Done => Ok(()),
        };
        match self.error.take() {
            Some(e) => Err(e),
            None => r,
        }
    }
}

impl Drop for Log {
    fn drop(&mut self) {
        // A driver that panicked or returned early leaves the recording most wanted: the file
        // is put in place with every transfer up to then (each block is whole).
        let _ = self.finish();
    }
}

fn finish_file(file: BufWriter<File>, partial: &Path, path: &Path) -> io::Result<()> {
    let file = file.into_inner().map_err(|e| e.into_error())?;
    file.sync_all()?;
    drop(file);
    refuse_special(path)?;
    std::fs::rename(partial, path).map_err(|e| {
        io::Error::new(
            e.kind(),
            format!(
                "{}: cannot put the recording in place (from {}): {e}",
                path.display(),
                partial.display()
            ),
        )
    })
}

/// Refuses a path that exists and is not a regular file (a symlink, a FIFO, a device, a
/// directory): the recording never replaces one.
fn refuse_special(path: &Path) -> io::Result<()> {
    match std::fs::symlink_metadata(path) {
        Ok(m) if !m.file_type().is_file() => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!(
                "{}: exists and is not a regular file (a symbolic link, FIFO, device or \
                 directory): refusing to replace it with the recording",
                path.display()
            ),
        )),
        _ => Ok(()),
    }
}

/// Where a recorder's transfers go: a usbmon pcapng file (in memory, through a writer, or a
/// file put in place when finished). Clones share the recording; several [`Recorder`]s may
/// write to one (two interfaces of a device).
#[derive(Clone)]
pub struct Recording(Rc<RefCell<Log>>);

/// The application a recording names in its section header.
const APPLICATION: &str = concat!("calametra-usb ", env!("CARGO_PKG_VERSION"), " recorder");

impl Recording {
    fn with_sink(sink: Sink) -> Recording {
        Recording(Rc::new(RefCell::new(Log {
            sink,
            next_id: 1,
            transfers: 0,
            snaplen: usize::MAX,
            last: Duration::ZERO,
            dropped: Vec::new(),
            error: None,
            buf: Vec::new(),
        })))
    }

    /// A recording kept in memory; [`Recording::bytes`] gives the file.
    pub fn in_memory() -> Recording {
        Recording::with_sink(Sink::Memory(pcapng::header(APPLICATION, "calametra")))
    }

    /// A recording written through `out` as it goes (the header now).
    pub fn to_writer(mut out: impl Write + 'static) -> io::Result<Recording> {
        out.write_all(&pcapng::header(APPLICATION, "calametra"))?;
        Ok(Recording::with_sink(Sink::Writer(Box::new(out))))
    }

    /// A recording to the file `path`, written as it goes to a temporary file beside it and
    /// renamed to `path` by [`Recording::finish`] (or when the last clone is dropped), so
    /// `path` is either as it was or the whole recording. An existing `path` that is not a
    /// regular file (a symlink, a FIFO, a device) is refused, now and at the rename.
    pub fn create(path: impl AsRef<Path>) -> io::Result<Recording> {
        let path = path.as_ref().to_path_buf();
        refuse_special(&path)?;
        let name = path.file_name().ok_or_else(|| {
            io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("{}: names no file", path.display()),
            )
        })?;
        let mut partial_name = std::ffi::OsString::from(".");
        partial_name.push(name);
        partial_name.push(format!(".{}.partial", std::process::id()));
        let partial = path.with_file_name(partial_name);
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&partial)
            .map_err(|e| {
                io::Error::new(
                    e.kind(),
                    format!("{}: cannot create the recording: {e}", partial.display()),
                )
            })?;
        let mut file = BufWriter::with_capacity(1 << 20, file);
        file.write_all(&pcapng::header(APPLICATION, "calametra"))?;
        Ok(Recording::with_sink(Sink::File {
            file,
            partial,
            path,
        }))
    }

    /// Keeps at most `snaplen` bytes of each transfer's data (as a capture's snap length; the
    /// URB length still says what crossed the bus). Default: all of it.
    pub fn set_snaplen(&self, snaplen: usize) {
        self.0.borrow_mut().snaplen = snaplen;
    }

    /// The transfers submitted so far.
    pub fn transfers(&self) -> u64 {
        self.0.borrow().transfers
    }

    /// The file so far, for a recording in memory (with the completions of transfers dropped
    /// unfinished); `None` for the others.
    pub fn bytes(&self) -> Option<Vec<u8>> {
        let mut log = self.0.borrow_mut();
        let last = log.last;
        log.flush_dropped(last);
        match &log.sink {
            Sink::Memory(v) => Some(v.clone()),
            _ => None,
        }
    }

    /// Ends the recording: writes what is pending, flushes, and puts a file in place. Returns
    /// the first error met while recording (a full disk), if any. Later transfers are not
    /// recorded (to memory or a writer they still are).
    pub fn finish(&self) -> io::Result<()> {
        self.0.borrow_mut().finish()
    }

    /// Records a submission; returns its URB id.
    fn submit(
        &self,
        clock: &impl Clock,
        at: Address,
        xfer: Xfer,
        setup: Option<Setup>,
        length: usize,
        data: &[u8],
    ) -> Pending<'_> {
        let time = clock.now();
        let mut log = self.0.borrow_mut();
        let id = log.next_id;
        log.next_id += 1;
        log.transfers += 1;
        let endpoint = at.endpoint;
        log.event(&UrbEvent {
            id,
            stage: Stage::Submit,
            xfer,
            endpoint,
            device: at.device,
            bus: at.bus,
            time,
            status: errno::EINPROGRESS,
            length: length.min(u32::MAX as usize) as u32,
            setup,
            data,
        });
        Pending {
            rec: self,
            id,
            xfer,
            at,
            done: false,
        }
    }
}

/// Where a transfer goes: bus, device, endpoint.
#[derive(Clone, Copy)]
struct Address {
    bus: u16,
    device: u8,
    endpoint: u8,
}

/// A submitted transfer until its completion is recorded; dropped before, it is recorded as
/// cancelled.
struct Pending<'a> {
    rec: &'a Recording,
    id: u64,
    xfer: Xfer,
    at: Address,
    done: bool,
}

impl Pending<'_> {
    fn complete<T>(
        mut self,
        clock: &impl Clock,
        r: &Result<T, TransferError>,
        length: usize,
        data: &[u8],
    ) {
        self.done = true;
        let time = clock.now();
        self.rec.0.borrow_mut().event(&UrbEvent {
            id: self.id,
            stage: Stage::Complete,
            xfer: self.xfer,
            endpoint: self.at.endpoint,
            device: self.at.device,
            bus: self.at.bus,
            time,
            status: usbmon::status(r),
            length: length.min(u32::MAX as usize) as u32,
            setup: None,
            data,
        });
    }
}

impl Drop for Pending<'_> {
    fn drop(&mut self) {
        if self.done {
            return;
        }
        if let Ok(mut log) = self.rec.0.try_borrow_mut() {
            log.dropped.push(Dropped {
                id: self.id,
                xfer: self.xfer,
                endpoint: self.at.endpoint,
                bus: self.at.bus,
                device: self.at.device,
            });
        }
    }
}

/// A [`UsbInterface`] that records every transfer made through it to a [`Recording`], then
/// passes it to the interface it wraps. Clones share the wrapped interface's clone and the
/// recording.
#[derive(Clone)]
pub struct Recorder<I, C = WallClock> {
    inner: I,
    recording: Recording,
    clock: C,
    bus: u16,
    device: u8,
}

impl<I: UsbInterface> Recorder<I, WallClock> {
    /// Records `inner`'s transfers to `recording` at wall-clock times, as device 2 on bus 1.
    pub fn new(inner: I, recording: &Recording) -> Self {
        Recorder::with_clock(inner, recording, WallClock::new())
    }
}

impl<I: UsbInterface, C: Clock> Recorder<I, C> {
    /// Records `inner`'s transfers to `recording` at `clock`'s times (in a simulation, its
    /// virtual clock: `|| Duration::from_nanos(calametra::exec::now())`), as device 2 on bus 1.
    pub fn with_clock(inner: I, recording: &Recording, clock: C) -> Self {
        Recorder {
            inner,
            recording: recording.clone(),
            clock,
            bus: 1,
            device: 2,
        }
    }

    /// The bus number and device address the recording shows.
    pub fn at_address(mut self, bus: u16, device: u8) -> Self {
        self.bus = bus;
        self.device = device;
        self
    }

    /// The interface underneath.
    pub fn inner(&self) -> &I {
        &self.inner
    }

    /// The recording.
    pub fn recording(&self) -> &Recording {
        &self.recording
    }

    fn at(&self, endpoint: u8) -> Address {
        Address {
            bus: self.bus,
            device: self.device,
            endpoint,
        }
    }
}

impl<I: UsbInterface, C: Clock> UsbInterface for Recorder<I, C> {
    async fn control_in(
        &self,
        req: ControlIn,
        timeout: Duration,
    ) -> Result<Vec<u8>, TransferError> {
        let setup = req.setup();
        let p = self.recording.submit(
            &self.clock,
            self.at(DIR_IN),
            Xfer::Control,
            Some(setup),
            usize::from(setup.length),
            &[],
        );
        let r = self.inner.control_in(req, timeout).await;
        let data = r.as_deref().unwrap_or(&[]);
        p.complete(&self.clock, &r, data.len(), data);
        r
    }

    async fn control_out(
        &self,
        req: ControlOut<'_>,
        timeout: Duration,
    ) -> Result<(), TransferError> {
        let setup = req.setup();
        let p = self.recording.submit(
            &self.clock,
            self.at(0),
            Xfer::Control,
            Some(setup),
            req.data.len(),
            req.data,
        );
        let r = self.inner.control_out(req, timeout).await;
        let n = if r.is_ok() { req.data.len() } else { 0 };
        p.complete(&self.clock, &r, n, &[]);
        r
    }

    async fn bulk_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        let p = self.recording.submit(
            &self.clock,
            self.at(ep & !DIR_IN),
            Xfer::Bulk,
            None,
            data.len(),
            &data,
        );
        let r = self.inner.bulk_out(ep, data).await;
        let n = r.as_ref().map_or(0, |n| *n);
        p.complete(&self.clock, &r, n, &[]);
        r
    }

    async fn bulk_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        let p = self.recording.submit(
            &self.clock,
            self.at(ep | DIR_IN),
            Xfer::Bulk,
            None,
            len,
            &[],
        );
        let r = self.inner.bulk_in(ep, len).await;
        let data = r.as_deref().unwrap_or(&[]);
        p.complete(&self.clock, &r, data.len(), data);
        r
    }

    async fn interrupt_in(&self, ep: u8, len: usize) -> Result<Vec<u8>, TransferError> {
        let p = self.recording.submit(
            &self.clock,
            self.at(ep | DIR_IN),
            Xfer::Interrupt,
            None,
            len,
            &[],
        );
        let r = self.inner.interrupt_in(ep, len).await;
        let data = r.as_deref().unwrap_or(&[]);
        p.complete(&self.clock, &r, data.len(), data);
        r
    }

    fn sleep(&self, d: Duration) -> impl Future<Output = ()> {
        self.inner.sleep(d)
    }

    fn reset(&self) -> impl Future<Output = Result<(), TransferError>> {
        // A bus reset is no URB: usbmon shows none, and neither does the recording.
        self.inner.reset()
    }

    async fn interrupt_out(&self, ep: u8, data: Vec<u8>) -> Result<usize, TransferError> {
        let p = self.recording.submit(
            &self.clock,
            self.at(ep & !DIR_IN),
            Xfer::Interrupt,
            None,
            data.len(),
            &data,
        );
        let r = self.inner.interrupt_out(ep, data).await;
        let n = r.as_ref().map_or(0, |n| *n);
        p.complete(&self.clock, &r, n, &[]);
        r
    }

    // Forwarded without a recording of their own (issue 37): `clear_halt` and
    // `set_alt_setting` are control requests the inner interface makes, and queued transfers
    // go to the inner interface's queue; the recording shows none of them yet.

    fn clear_halt(&self, ep: u8) -> impl Future<Output = Result<(), TransferError>> {
        self.inner.clear_halt(ep)
    }

    fn set_alt_setting(&self, alt: u8) -> impl Future<Output = Result<(), TransferError>> {
        self.inner.set_alt_setting(alt)
    }

    fn descriptors(&self) -> Result<crate::Descriptors, TransferError> {
        self.inner.descriptors()
    }

    fn queue_open(&self, ep: u8, ty: crate::TransferType) -> Result<(), TransferError> {
        self.inner.queue_open(ep, ty)
    }

    fn queue_submit(&self, ep: u8, ty: crate::TransferType, buf: crate::Buffer) {
        self.inner.queue_submit(ep, ty, buf)
    }

    fn queue_poll(
        &self,
        ep: u8,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<crate::Completion> {
        self.inner.queue_poll(ep, cx)
    }

    fn queue_cancel_all(&self, ep: u8) {
        self.inner.queue_cancel_all(ep)
    }

    fn queue_close(&self, ep: u8) {
        self.inner.queue_close(ep)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;
    use std::pin::pin;
    use std::task::{Context, Poll, Waker};

    /// An interface whose transfers complete at once: a stalled control IN, echoed OUT data,
    /// a short bulk OUT, a bulk IN that never completes.
    struct Fake;

    impl UsbInterface for Fake {
        async fn control_in(&self, req: ControlIn, _: Duration) -> Result<Vec<u8>, TransferError> {
            if req.request == 0 {
                Err(TransferError::Stall)
            } else {
                Ok(vec![0xaa; usize::from(req.length) / 2])
            }
        }
        async fn control_out(&self, _: ControlOut<'_>, _: Duration) -> Result<(), TransferError> {
            Ok(())
        }
        async fn bulk_out(&self, _: u8, data: Vec<u8>) -> Result<usize, TransferError> {
            Ok(data.len() - 1)
        }
        fn bulk_in(&self, _: u8, _: usize) -> impl Future<Output = Result<Vec<u8>, TransferError>> {
            std::future::pending()
        }
        async fn interrupt_in(&self, _: u8, _: usize) -> Result<Vec<u8>, TransferError> {
            Err(TransferError::Disconnected)
        }
        async fn sleep(&self, _: Duration) {}
    }

    fn now<F: Future>(f: F) -> Option<F::Output> {
        let mut f = pin!(f);
        match f.as_mut().poll(&mut Context::from_waker(Waker::noop())) {
            Poll::Ready(v) => Some(v),
            Poll::Pending => None,
        }
    }

    /// The packets of a pcapng file written here: (type, status, length, data) of each.
    fn packets(b: &[u8]) -> Vec<(u8, u64, i32, u32, Vec<u8>)> {
        let mut out = Vec::new();
        let mut off = 0;
        while off < b.len() {
            let t = u32::from_le_bytes(b[off..off + 4].try_into().unwrap());
            let n = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap()) as usize;
            if t == 6 {
                let cap = u32::from_le_bytes(b[off + 20..off + 24].try_into().unwrap()) as usize;
                let p = &b[off + 28..off + 28 + cap];
                let f = |at: usize| i32::from_le_bytes(p[at..at + 4].try_into().unwrap());
                out.push((
                    p[8],
                    u64::from_le_bytes(p[..8].try_into().unwrap()),
                    f(28),
                    f(32) as u32,
                    p[64..].to_vec(),
                ));
            }
            off += n;
        }
        out
    }

    #[test]
    fn every_transfer_is_a_submission_and_a_completion_with_its_outcome() {
        let rec = Recording::in_memory();
        let t = Cell::new(0u64);
        let clock = || {
            t.set(t.get() + 1);
            Duration::from_micros(t.get())
        };
        let iface = Recorder::with_clock(Fake, &rec, clock).at_address(3, 9);
        let req = |request| ControlIn {
            control_type: crate::ControlType::Vendor,
            recipient: crate::Recipient::Device,
            request,
            value: 0,
            index: 0,
            length: 8,
        };
        let ms = Duration::from_millis(1);
        assert_eq!(
            now(iface.control_in(req(0), ms)),
            Some(Err(TransferError::Stall))
        );
        assert_eq!(now(iface.control_in(req(1), ms)), Some(Ok(vec![0xaa; 4])));
        assert_eq!(now(iface.bulk_out(2, vec![1, 2, 3])), Some(Ok(2)));
        assert_eq!(now(iface.bulk_in(0x81, 64)), None); // dropped unfinished
        assert_eq!(
            now(iface.interrupt_in(0x83, 8)),
            Some(Err(TransferError::Disconnected))
        );
        assert_eq!(rec.transfers(), 5);
        let p = packets(&rec.bytes().unwrap());
        let summary: Vec<(u8, u64, i32, u32)> = p.iter().map(|p| (p.0, p.1, p.2, p.3)).collect();
        assert_eq!(
            summary,
            [
                (b'S', 1, -115, 8),
                (b'C', 1, -32, 0),
                (b'S', 2, -115, 8),
                (b'C', 2, 0, 4),
                (b'S', 3, -115, 3),
                (b'C', 3, 0, 2),
                (b'S', 4, -115, 64),
                (b'C', 4, -104, 0), // the dropped bulk IN, before the next event
                (b'S', 5, -115, 8),
                (b'C', 5, -108, 0),
            ]
        );
        assert_eq!(p[3].4, vec![0xaa; 4], "IN data on the completion");
        assert_eq!(p[4].4, vec![1, 2, 3], "OUT data on the submission");
    }

    #[test]
    fn a_file_recording_appears_whole_at_finish_and_never_replaces_a_symlink() {
        let dir = std::env::temp_dir().join(format!("calametra-usb-record-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.pcapng");
        let rec = Recording::create(&path).unwrap();
        let iface = Recorder::with_clock(Fake, &rec, || Duration::from_secs(1));
        assert!(now(iface.bulk_out(2, vec![1, 2])).is_some());
        assert!(!path.exists(), "nothing at the path before finish");
        rec.finish().unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(packets(&bytes).len(), 2);
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            1,
            "no partial file left"
        );
        #[cfg(unix)]
        {
            let link = dir.join("link.pcapng");
            std::os::unix::fs::symlink(&path, &link).unwrap();
            let e = Recording::create(&link)
                .err()
                .expect("a symlink is refused");
            assert!(e.to_string().contains("not a regular file"), "{e}");
            assert_eq!(
                std::fs::read(&path).unwrap(),
                bytes,
                "the target is untouched"
            );
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
