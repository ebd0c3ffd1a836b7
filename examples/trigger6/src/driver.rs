//! The Trigger 6 driver: probe, interrupt-driven hotplug, EDID, modeset, a colour-bar frame over
//! DMA-framed bulk, flips with fences, and a watch loop that follows the monitor, on either of
//! the dock's outputs ([`Driver::on_output`]; output 0 by default).
//!
//! The driver is generic over [`UsbInterface`], so the code that runs against the model is the
//! code that runs on a dock through `nusb` (feature `hardware`). It keeps what it believes in a
//! shared [`Beliefs`] (`Rc<RefCell<..>>`) that a scenario's invariants compare with the model.
//! Two futures share it: [`Driver::run`] (the main sequence) and [`Driver::irq_loop`] (the
//! interrupt listener). Nothing here reads a clock or spawns a thread: time is the interface's
//! `sleep`, so it is virtual in the simulator.
//!
//! The race that feature `planted-race` plants is in [`Driver::poll_connection`]: it polls both
//! outputs' status and stores the replies even when a hotplug notification was processed while
//! the polls were in flight, so a "connected" reply taken before an unplug overwrites what the
//! listener learned after it.

use crate::edid;
use crate::frame;
use crate::protocol::{
    self, DisplayEvent, DmaHeader, Timing, VideoHeader, CMD_FLIP_PRIMARY, CMD_FLIP_SECONDARY,
    DMA_HEADER_LEN, SESSION_DISPLAY, VIDEO_HEADER_LEN,
};
use calametra_usb::{ControlIn, ControlOut, ControlType, Recipient, TransferError, UsbInterface};
use std::cell::RefCell;
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

/// Vendor requests (bRequest), from MCT's `t6.h` and the capture.
mod req {
    pub const SET_MONITOR: u8 = 0x03;
    pub const CANCEL_BULK_OUT: u8 = 0x14;
    pub const SET_MODE: u8 = 0x12;
    pub const INIT: u8 = 0x1c;
    pub const SET_LUT: u8 = 0x1d;
    pub const SET_READY: u8 = 0x31;
    pub const GET_EDID: u8 = 0x80;
    pub const GET_TIMING_COUNT: u8 = 0x84;
    pub const GET_STATUS: u8 = 0x87;
    pub const GET_VRAM_SIZE: u8 = 0x88;
    pub const GET_TIMING: u8 = 0x89;
    pub const GET_VERSION: u8 = 0xb0;
}

/// Bulk OUT endpoint of the display function.
pub const EP_BULK_OUT: u8 = 0x02;
/// Interrupt IN endpoint (hotplug and fence events).
pub const EP_INTERRUPT: u8 = 0x83;
/// The frame size the driver brings up.
pub const WIDTH: u16 = 1920;
/// The frame size the driver brings up.
pub const HEIGHT: u16 = 1080;
/// Where output 0's frame goes: MCT's first framebuffer of its 1-port 1080p VRAM map (58 MiB
/// dock).
pub const FB_ADDR: u32 = 0x2e0_0000;
/// Where output 1's frame goes: the map's second framebuffer, clear of output 0's frame.
pub const FB_ADDR_1: u32 = 0x320_0000;
/// Page flips of an already uploaded frame are 48-byte commands in a ring below it (MCT puts
/// commands in a ring apart from the framebuffers); output 1's ring follows output 0's.
pub const CMD_RING: u32 = 0;
/// Bytes of each output's command ring.
pub const CMD_RING_LEN: u32 = 0x1_0000;

/// The framebuffer address of `output`'s frame.
pub fn fb_addr(output: u16) -> u32 {
    if output == 0 {
        FB_ADDR
    } else {
        FB_ADDR_1
    }
}
/// Timeout of control transfers.
pub const CONTROL_TIMEOUT: Duration = Duration::from_millis(500);
/// Timeout of bulk transfers.
pub const BULK_TIMEOUT: Duration = Duration::from_secs(1);
/// How long the driver waits for a fence.
pub const FENCE_TIMEOUT: Duration = Duration::from_millis(500);
/// Interval of the watch loop's status polls (the Windows driver polls once a second).
pub const WATCH_INTERVAL: Duration = Duration::from_millis(50);
/// Watch-loop iterations after the first frame: poll status, flip again if connected.
pub const WATCH_FRAMES: u32 = 4;

/// Why the driver stopped with an error. After any of these the dock may be in any state; the
/// driver has not lied about what it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum DriverError {
    /// A transfer failed.
    Transfer {
        /// What the driver was doing.
        what: &'static str,
        /// How it failed.
        error: TransferError,
    },
    /// A reply made no sense.
    Protocol(String),
    /// The dock took fewer bulk bytes than sent.
    ShortWrite {
        /// Bytes sent.
        sent: usize,
        /// Bytes the dock took.
        taken: usize,
    },
    /// The VRAM is too small for the framebuffer.
    NotEnoughVram(u64),
    /// Neither the monitor nor the dock's table has 1920x1080@60.
    NoMode(String),
    /// A flip's fence did not come back.
    FenceTimeout(u32),
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DriverError::Transfer { what, error } => write!(f, "{what}: {error}"),
            DriverError::Protocol(s) => write!(f, "protocol: {s}"),
            DriverError::ShortWrite { sent, taken } => {
                write!(f, "bulk: the dock took {taken} of {sent} bytes")
            }
            DriverError::NotEnoughVram(n) => write!(f, "VRAM of {n} bytes is too small"),
            DriverError::NoMode(s) => write!(f, "no 1920x1080@60: {s}"),
            DriverError::FenceTimeout(n) => write!(f, "fence {n} did not complete"),
        }
    }
}

impl std::error::Error for DriverError {}

/// Where the main sequence is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Phase {
    /// Not started.
    #[default]
    Idle,
    /// Reading versions, VRAM, timing table; init and ready.
    Probe,
    /// Waiting for a monitor.
    WaitMonitor,
    /// EDID, modeset, monitor on, LUT, finalise.
    Modeset,
    /// Uploading and flipping frames.
    Present,
    /// Finished.
    Done,
}

/// How the main sequence ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ending {
    /// The frame was shown and the watch loop ran to its end.
    Completed,
    /// The monitor went away; the output was turned off.
    MonitorGone,
    /// No monitor came.
    NoMonitor,
}

/// What a successful run did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Summary {
    /// How it ended.
    pub ending: Ending,
    /// Flips whose fence came back.
    pub frames_shown: u32,
}

/// What the driver believes about a monitor on an output.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Connection {
    /// Not known (never asked, or a hotplug notification arrived since the last answer).
    #[default]
    Unknown,
    /// No monitor.
    Disconnected,
    /// A monitor is there.
    Connected,
}

/// A region of VRAM the driver wrote.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RamWrite {
    /// First byte.
    pub addr: u64,
    /// Bytes.
    pub len: u64,
}

/// A flip the driver submitted: where it put the frame and the bytes it wrote there.
#[derive(Clone, Debug)]
pub struct FlipBelief {
    /// The output (0 primary, 1 secondary).
    pub output: u8,
    /// The fence id of the flip.
    pub fence: u32,
    /// The pixel format code (TargetFormat).
    pub format: u32,
    /// VRAM address of the Y plane.
    pub y_offset: u32,
    /// VRAM address of the UV plane.
    pub uv_offset: u32,
    /// Y line pitch.
    pub y_pitch: u16,
    /// UV line pitch.
    pub uv_pitch: u16,
    /// Frame width in pixels.
    pub width: u16,
    /// Frame height in lines.
    pub height: u16,
    /// The bytes written: the Y plane, then the UV plane.
    pub pixels: Rc<[u8]>,
}

/// What the driver believes: the facts a scenario's invariants compare with the model (the
/// scenario turns them into the model's `DriverView`).
#[derive(Debug, Default)]
pub struct Beliefs {
    /// Where the main sequence is.
    pub phase: Phase,
    /// GET_VERSION image code and vendor command version.
    pub version: Option<([u8; 4], [u8; 4])>,
    /// VRAM size from `get_vram_size`, bytes.
    pub vram_size: Option<u64>,
    /// The driven output's firmware timing table.
    pub timing_table: Vec<[u8; 32]>,
    /// Per output: is a monitor there?
    pub connection: [Connection; 2],
    /// Per output: hotplug notifications processed.
    pub hotplug_seen: [u32; 2],
    /// The driven output's monitor's EDID.
    pub edid: Option<Vec<u8>>,
    /// Per output: the record of the last modeset that succeeded.
    pub modes: [Option<[u8; 32]>; 2],
    /// Whether the driver turned its output on.
    pub display_on: bool,
    /// Flips submitted (bytes shared, not copied).
    pub flips: Vec<FlipBelief>,
    /// Highest fence seen done.
    pub fence_done: u32,
    /// VRAM regions written.
    pub writes: Vec<RamWrite>,
    /// Flips whose fence came back.
    pub frames_shown: u32,
    /// Status replies discarded because a hotplug notification overtook them.
    pub stale_replies_dropped: u32,
    waiters: Vec<Waker>,
}

impl Beliefs {
    fn wake(&mut self) {
        for w in self.waiters.drain(..) {
            w.wake();
        }
    }
}

/// The driver: an interface and the beliefs. Cheap to clone (the clones share the beliefs), so
/// the main sequence and the interrupt listener can each own one.
#[derive(Clone)]
pub struct Driver<I> {
    iface: I,
    beliefs: Rc<RefCell<Beliefs>>,
    fence: Rc<RefCell<u32>>,
    planted_race: bool,
    output: u16,
}

fn xfer(what: &'static str) -> impl Fn(TransferError) -> DriverError {
    move |error| DriverError::Transfer { what, error }
}

impl<I: UsbInterface> Driver<I> {
    /// A driver for a claimed Trigger 6 interface, with the race planted when the crate is
    /// built with feature `planted-race`.
    pub fn new(iface: I) -> Self {
        Self::with_planted_race(iface, cfg!(feature = "planted-race"))
    }

    /// A driver with the planted race on or off, whatever the build's features (so one test
    /// binary can hold the fixed driver and the planted one side by side).
    pub fn with_planted_race(iface: I, planted_race: bool) -> Self {
        Driver {
            iface,
            beliefs: Rc::new(RefCell::new(Beliefs::default())),
            fence: Rc::new(RefCell::new(0)),
            planted_race,
            output: 0,
        }
    }

    /// The same driver for `output` (0 the primary, HDMI; 1 the second head): its timing
    /// table, its monitor's status and EDID, its modeset and display control, its framebuffer
    /// ([`fb_addr`]) and FLIP_SECONDARY for output 1. Build it before cloning the driver for
    /// the interrupt listener.
    pub fn on_output(mut self, output: u16) -> Self {
        self.output = output.min(1);
        self
    }

    /// The output this driver drives.
    pub fn output(&self) -> u16 {
        self.output
    }

    /// The shared beliefs, for invariants and for people.
    pub fn beliefs(&self) -> Rc<RefCell<Beliefs>> {
        self.beliefs.clone()
    }

    async fn vendor_in(
        &self,
        what: &'static str,
        request: u8,
        value: u16,
        index: u16,
        length: u16,
    ) -> Result<Vec<u8>, DriverError> {
        let r = ControlIn {
            control_type: ControlType::Vendor,
            recipient: Recipient::Device,
            request,
            value,
            index,
            length,
        };
        self.iface
            .control_in(r, CONTROL_TIMEOUT)
            .await
            .map_err(xfer(what))
    }

    async fn vendor_out(
        &self,
        what: &'static str,
        request: u8,
        value: u16,
        index: u16,
        data: &[u8],
    ) -> Result<(), DriverError> {
        let r = ControlOut {
            control_type: ControlType::Vendor,
            recipient: Recipient::Device,
            request,
            value,
            index,
            data,
        };
        self.iface
            .control_out(r, CONTROL_TIMEOUT)
            .await
            .map_err(xfer(what))
    }

    /// Reads one output's monitor status (`get_status`, 0x87): exactly one byte, 0 or 1.
    pub async fn get_status(&self, output: u16) -> Result<Connection, DriverError> {
        let v = self
            .vendor_in("get_status", req::GET_STATUS, output, 0, 1)
            .await?;
        match v.as_slice() {
            [0] => Ok(Connection::Disconnected),
            [1] => Ok(Connection::Connected),
            other => Err(DriverError::Protocol(format!(
                "get_status replied {other:02x?}"
            ))),
        }
    }

    /// Probe: versions, VRAM size, init, software ready, the driven output's timing table.
    pub async fn probe(&self) -> Result<(), DriverError> {
        self.beliefs.borrow_mut().phase = Phase::Probe;
        let four = |v: Vec<u8>, what: &str| -> Result<[u8; 4], DriverError> {
            v.try_into().map_err(|v: Vec<u8>| {
                DriverError::Protocol(format!("{what}: {} bytes, not 4", v.len()))
            })
        };
        let image = four(
            self.vendor_in("get_version", req::GET_VERSION, 0, 2, 4)
                .await?,
            "image version",
        )?;
        let cmd = four(
            self.vendor_in("get_version", req::GET_VERSION, 0, 4, 4)
                .await?,
            "command version",
        )?;
        let vram = match self
            .vendor_in("get_vram_size", req::GET_VRAM_SIZE, 0, 0, 1)
            .await?
            .as_slice()
        {
            [mib] => (*mib as u64) << 20,
            other => {
                return Err(DriverError::Protocol(format!(
                    "get_vram_size replied {other:02x?}"
                )))
            }
        };
        let frame_end = fb_addr(self.output) as u64 + frame_len() as u64;
        if vram < frame_end {
            return Err(DriverError::NotEnoughVram(vram));
        }
        {
            let mut b = self.beliefs.borrow_mut();
            b.version = Some((image, cmd));
            b.vram_size = Some(vram);
        }
        self.vendor_out("init", req::INIT, 0x0000, 0, &[]).await?;
        self.vendor_out("init", req::INIT, 0x0100, 0, &[]).await?;
        self.vendor_out("set_ready", req::SET_READY, 0, 0, &[])
            .await?;
        let count = self
            .vendor_in("get_timing_count", req::GET_TIMING_COUNT, self.output, 0, 4)
            .await?;
        let count = match count.as_slice() {
            [a, b, c, d] => u32::from_le_bytes([*a, *b, *c, *d]) as usize,
            other => {
                return Err(DriverError::Protocol(format!(
                    "get_timing_count replied {other:02x?}"
                )))
            }
        };
        if count == 0 || count > 64 {
            return Err(DriverError::Protocol(format!("{count} timing records")));
        }
        let total = count * 32;
        let mut table = Vec::with_capacity(total);
        while table.len() < total {
            let n = (total - table.len()).min(512);
            let chunk = self
                .vendor_in(
                    "get_timing",
                    req::GET_TIMING,
                    self.output,
                    table.len() as u16,
                    n as u16,
                )
                .await?;
            if chunk.len() != n {
                return Err(DriverError::Protocol(format!(
                    "get_timing at {} gave {} of {n} bytes",
                    table.len(),
                    chunk.len()
                )));
            }
            table.extend_from_slice(&chunk);
        }
        self.beliefs.borrow_mut().timing_table = table
            .chunks(32)
            .map(|c| {
                let mut r = [0u8; 32];
                r.copy_from_slice(c);
                r
            })
            .collect();
        Ok(())
    }

    /// Polls both outputs' status and stores what they said; returns the driven output's
    /// state.
    ///
    /// A hotplug notification the listener processes while these polls are in flight makes
    /// their replies suspect (they may predate the plug or unplug), so the fixed driver drops
    /// them and asks again. With feature `planted-race` it stores them anyway: the planted bug.
    pub async fn poll_connection(&self) -> Result<Connection, DriverError> {
        for _ in 0..4 {
            let seen = self.beliefs.borrow().hotplug_seen;
            let s0 = self.get_status(0).await?;
            let s1 = self.get_status(1).await?;
            let mut b = self.beliefs.borrow_mut();
            if self.planted_race || b.hotplug_seen == seen {
                b.connection = [s0, s1];
                b.wake();
                return Ok(if self.output == 0 { s0 } else { s1 });
            }
            b.stale_replies_dropped += 1;
        }
        Ok(Connection::Unknown)
    }

    /// Waits until `done` holds or `d` passes; returns whether it holds.
    async fn wait_for(&self, d: Duration, done: impl Fn(&Beliefs) -> bool) -> bool {
        let beliefs = self.beliefs.clone();
        let wait = poll_fn(|cx| {
            let mut b = beliefs.borrow_mut();
            if done(&b) {
                Poll::Ready(())
            } else {
                b.waiters.push(cx.waker().clone());
                Poll::Pending
            }
        });
        self.iface.timeout(d, wait).await.is_ok() || done(&self.beliefs.borrow())
    }

    /// Polls until the driven output has a monitor, waiting for hotplug notifications in
    /// between.
    async fn wait_for_monitor(&self) -> Result<bool, DriverError> {
        self.beliefs.borrow_mut().phase = Phase::WaitMonitor;
        for _ in 0..3 {
            if self.poll_connection().await? == Connection::Connected {
                return Ok(true);
            }
            let o = self.output as usize;
            let seen = self.beliefs.borrow().hotplug_seen[o];
            self.wait_for(Duration::from_secs(1), move |b| b.hotplug_seen[o] != seen)
                .await;
        }
        Ok(false)
    }

    /// Reads the monitor's EDID on `output` (base block, then its extensions).
    pub async fn read_edid(&self, output: u16) -> Result<Vec<u8>, DriverError> {
        let mut e = self
            .vendor_in("get_edid", req::GET_EDID, 0, output, 128)
            .await?;
        if e.len() != 128 {
            return Err(DriverError::Protocol(format!(
                "get_edid gave {} bytes",
                e.len()
            )));
        }
        let n = edid::extension_count(&e).min(3);
        for i in 1..=n {
            let b = self
                .vendor_in("get_edid", req::GET_EDID, (i * 128) as u16, output, 128)
                .await?;
            if b.len() != 128 {
                return Err(DriverError::Protocol(format!(
                    "get_edid block {i} gave {} bytes",
                    b.len()
                )));
            }
            e.extend_from_slice(&b);
        }
        edid::validate(&e).map_err(DriverError::Protocol)?;
        Ok(e)
    }

    /// The dock's timing record with the same video timing as `want`.
    fn pick_record(&self, want: &edid::DetailedTiming) -> Result<[u8; 32], DriverError> {
        let b = self.beliefs.borrow();
        b.timing_table
            .iter()
            .find(|r| {
                Timing::parse(&r[..]).is_some_and(|t| {
                    t.pclk_khz == want.pclk_khz
                        && t.refresh_hz as u32 == want.refresh_hz()
                        && (t.hactive, t.hsync_start, t.hsync_width, t.htotal)
                            == (
                                want.hactive,
                                want.hsync_start,
                                want.hsync_width,
                                want.htotal,
                            )
                        && (t.vactive, t.vsync_start, t.vsync_width, t.vtotal)
                            == (
                                want.vactive,
                                want.vsync_start,
                                want.vsync_width,
                                want.vtotal,
                            )
                        && (t.hsync_pol == 1, t.vsync_pol == 1)
                            == (want.hsync_positive, want.vsync_positive)
                })
            })
            .copied()
            .ok_or_else(|| DriverError::NoMode("not in the dock's timing table".into()))
    }

    /// EDID, mode choice, modeset, output on, identity LUT, finalise: the capture's order.
    async fn modeset(&self) -> Result<(), DriverError> {
        self.beliefs.borrow_mut().phase = Phase::Modeset;
        let o = self.output;
        let e = self.read_edid(o).await?;
        let (want, _) =
            edid::find_1080p60(&e).ok_or_else(|| DriverError::NoMode("not in the EDID".into()))?;
        self.beliefs.borrow_mut().edid = Some(e);
        let record = self.pick_record(&want)?;
        self.vendor_out("set_mode", req::SET_MODE, o, 0, &record)
            .await?;
        self.beliefs.borrow_mut().modes[o as usize] = Some(record);
        self.vendor_out("set_monitor", req::SET_MONITOR, o, 1, &[])
            .await?;
        self.beliefs.borrow_mut().display_on = true;
        let ramp: Vec<u8> = (0..=255u8).collect();
        for channel in [0x100, 0x200, 0x400] {
            self.vendor_out("set_lut", req::SET_LUT, 0, channel, &ramp)
                .await?;
        }
        self.vendor_out("finalise", req::INIT, 0x0002, 0, &[]).await
    }

    async fn bulk(&self, data: Vec<u8>) -> Result<(), DriverError> {
        let sent = data.len();
        let r = self
            .iface
            .timeout(BULK_TIMEOUT, self.iface.bulk_out(EP_BULK_OUT, data))
            .await;
        let taken = match r {
            Ok(Ok(n)) => n,
            // A timeout (`Err(Timeout)`, the transfer cancelled) or the transfer's own error.
            Ok(Err(error)) | Err(error) => {
                if error == TransferError::Stall {
                    // The endpoint stays halted until the host clears it (as xHCI and the
                    // dock have it): clear it, or every later write stalls too.
                    let _ = self.iface.clear_halt(EP_BULK_OUT).await;
                }
                self.cancel_bulk().await;
                return Err(DriverError::Transfer {
                    what: "bulk out",
                    error,
                });
            }
        };
        if taken != sent {
            self.cancel_bulk().await;
            return Err(DriverError::ShortWrite { sent, taken });
        }
        Ok(())
    }

    /// After a bulk error the dock's DMA receiver may hold half a command: drop it (MCT does
    /// the same). Best effort; the error that got us here is what the caller reports.
    async fn cancel_bulk(&self) {
        let _ = self
            .vendor_out("cancel_bulk_out", req::CANCEL_BULK_OUT, 0, 0, &[])
            .await;
    }

    fn next_fence(&self) -> u32 {
        let mut f = self.fence.borrow_mut();
        *f += 1;
        *f
    }

    /// Sends one DMA command: its header, then its payload as one data packet (MCT's Linux
    /// way), so a payload never straddles an error the driver could not see.
    async fn dma(&self, addr: u32, payload: Vec<u8>) -> Result<(), DriverError> {
        let hdr = DmaHeader {
            signature: SESSION_DISPLAY,
            payload_len: payload.len() as u32,
            payload_addr: addr,
            packet_size: payload.len() as u32,
            packet_offset: 0,
            flags: 0,
            func: [0; 8],
        };
        self.beliefs.borrow_mut().writes.push(RamWrite {
            addr: addr as u64,
            len: payload.len() as u64,
        });
        self.bulk(hdr.to_bytes().to_vec()).await?;
        debug_assert_eq!(DMA_HEADER_LEN, 32);
        self.bulk(payload).await
    }

    /// Uploads `pixels` (NV12 at the output's [`fb_addr`]) with its flip header in front, or
    /// (when `upload` is false) flips the frame already there with a 48-byte command; waits for
    /// the fence.
    async fn flip(&self, pixels: Rc<[u8]>, upload: bool) -> Result<(), DriverError> {
        let fence = self.next_fence();
        let (w, h) = (WIDTH as u32, HEIGHT as u32);
        let fb = fb_addr(self.output);
        let uv_offset = fb + w * h;
        let header = VideoHeader {
            command: if self.output == 0 {
                CMD_FLIP_PRIMARY
            } else {
                CMD_FLIP_SECONDARY
            },
            payload_size: if upload { pixels.len() as u32 } else { 0 },
            fence,
            target_format: 6,
            y_pitch: WIDTH,
            uv_pitch: WIDTH,
            y_offset: fb,
            uv_offset,
            v_offset: fb,
            source_format: 6,
            flag: 0,
        };
        self.beliefs.borrow_mut().flips.push(FlipBelief {
            output: self.output as u8,
            fence,
            format: 6,
            y_offset: fb,
            uv_offset,
            y_pitch: WIDTH,
            uv_pitch: WIDTH,
            width: WIDTH,
            height: HEIGHT,
            pixels: pixels.clone(),
        });
        let (addr, payload) = if upload {
            let mut p = Vec::with_capacity(VIDEO_HEADER_LEN + pixels.len());
            p.extend_from_slice(&header.to_bytes());
            p.extend_from_slice(&pixels);
            (fb - VIDEO_HEADER_LEN as u32, p)
        } else {
            let slot = (fence * 64) % CMD_RING_LEN;
            let ring = CMD_RING + CMD_RING_LEN * self.output as u32;
            (ring + slot, header.to_bytes().to_vec())
        };
        self.dma(addr, payload).await?;
        if !self
            .wait_for(FENCE_TIMEOUT, move |b| b.fence_done >= fence)
            .await
        {
            return Err(DriverError::FenceTimeout(fence));
        }
        self.beliefs.borrow_mut().frames_shown += 1;
        Ok(())
    }

    /// The main sequence: probe, wait for a monitor, modeset, show the colour bars, then watch
    /// the monitor for [`WATCH_FRAMES`] intervals, flipping again while it is there.
    pub async fn run(self) -> Result<Summary, DriverError> {
        self.probe().await?;
        let mut tries = 0;
        loop {
            if !self.wait_for_monitor().await? {
                return Ok(self.finish(Ending::NoMonitor));
            }
            match self.modeset().await {
                Ok(()) => break,
                // The monitor went away between its status and its EDID: start over.
                Err(DriverError::Transfer {
                    what: "get_edid",
                    error: TransferError::Stall,
                }) if tries < 3 => {
                    tries += 1;
                }
                Err(e) => return Err(e),
            }
        }
        self.beliefs.borrow_mut().phase = Phase::Present;
        let pixels: Rc<[u8]> = frame::colour_bars_nv12(WIDTH as usize, HEIGHT as usize).into();
        self.flip(pixels.clone(), true).await?;
        for _ in 0..WATCH_FRAMES {
            self.iface.sleep(WATCH_INTERVAL).await;
            match self.poll_connection().await? {
                Connection::Connected => self.flip(pixels.clone(), false).await?,
                Connection::Disconnected => {
                    self.vendor_out("set_monitor", req::SET_MONITOR, self.output, 0, &[])
                        .await?;
                    self.beliefs.borrow_mut().display_on = false;
                    return Ok(self.finish(Ending::MonitorGone));
                }
                Connection::Unknown => {}
            }
        }
        Ok(self.finish(Ending::Completed))
    }

    fn finish(&self, ending: Ending) -> Summary {
        let mut b = self.beliefs.borrow_mut();
        b.phase = Phase::Done;
        Summary {
            ending,
            frames_shown: b.frames_shown,
        }
    }

    /// The interrupt listener: reads endpoint 0x83 until the dock goes away. A hotplug event
    /// makes the output's state unknown, then asks the dock (storing the answer only if no
    /// newer notification overtook it); a fence event records the fence as done.
    pub async fn irq_loop(self) -> Result<(), DriverError> {
        let mut errors = 0;
        loop {
            let r = self
                .iface
                .timeout(
                    Duration::from_secs(1),
                    self.iface
                        .interrupt_in(EP_INTERRUPT, protocol::INTERRUPT_LEN),
                )
                .await;
            let packet = match r {
                Err(_) => continue,
                Ok(Ok(p)) => p,
                Ok(Err(TransferError::Disconnected)) => return Ok(()),
                Ok(Err(error)) => {
                    if error == TransferError::Stall {
                        // A halted endpoint stalls every read until it is cleared.
                        let _ = self.iface.clear_halt(EP_INTERRUPT).await;
                    }
                    errors += 1;
                    if errors > 8 {
                        return Err(DriverError::Transfer {
                            what: "interrupt in",
                            error,
                        });
                    }
                    self.iface.sleep(Duration::from_millis(10)).await;
                    continue;
                }
            };
            errors = 0;
            for ev in protocol::parse_interrupt(&packet) {
                match ev {
                    // Only a fence this driver submitted: a notification of another one (a
                    // damaged byte from the dock) would claim frames done that never were.
                    DisplayEvent::FenceDone(id) if id <= *self.fence.borrow() => {
                        let mut b = self.beliefs.borrow_mut();
                        b.fence_done = b.fence_done.max(id);
                        b.wake();
                    }
                    DisplayEvent::FenceDone(_) => {}
                    DisplayEvent::Hotplug(o) => {
                        let o = o as usize;
                        let seen = {
                            let mut b = self.beliefs.borrow_mut();
                            b.hotplug_seen[o] += 1;
                            b.connection[o] = Connection::Unknown;
                            b.wake();
                            b.hotplug_seen
                        };
                        match self.get_status(o as u16).await {
                            Ok(c) => {
                                let mut b = self.beliefs.borrow_mut();
                                if b.hotplug_seen == seen {
                                    b.connection[o] = c;
                                    b.wake();
                                }
                            }
                            Err(DriverError::Transfer {
                                error: TransferError::Disconnected,
                                ..
                            }) => return Ok(()),
                            Err(_) => {} // the state stays unknown; the main loop polls again
                        }
                    }
                }
            }
        }
    }
}

/// Bytes of one NV12 frame at [`WIDTH`] x [`HEIGHT`].
pub fn frame_len() -> usize {
    WIDTH as usize * HEIGHT as usize * 3 / 2
}
