//! The Trigger 6 invariants: plain checks that compare the model's ground truth with what a
//! driver believes, handed in as a [`DriverView`]. Each returns `Err(message)` naming the fact
//! that broke, with the numbers a person needs to see why.
//!
//! An invariant never calls the code whose result it checks: the timing check compares raw
//! record bytes under a mask instead of the model's field-by-field validation, the bounds
//! check reads the VRAM store's own extent instead of the model's bounds logic, and the flip
//! check reads VRAM bytes instead of anything the bulk receiver decided. Each has a sabotage
//! test (see `tests/trigger6.rs`) with a [`Sabotage`](super::Sabotage) lie it must catch.

use super::bulk::PixelFormat;
pub use super::model::RamWrite;
use super::model::Trigger6;
use super::timing::RECORD_LEN;
use std::rc::Rc;

/// What a driver believes about the monitor on an output.
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

/// A flip a driver submitted: where it put the frame and the bytes it wrote there.
#[derive(Clone, Debug)]
pub struct FlipBelief {
    /// The output (0 primary, 1 secondary).
    pub output: u8,
    /// The fence id of the flip.
    pub fence: u32,
    /// The pixel format code (TargetFormat).
    pub format: u32,
    /// VRAM address of the Y (or RGB) plane.
    pub y_offset: u32,
    /// VRAM address of the UV plane (NV12).
    pub uv_offset: u32,
    /// Y (or RGB) line pitch.
    pub y_pitch: u16,
    /// UV line pitch.
    pub uv_pitch: u16,
    /// Frame width in pixels.
    pub width: u16,
    /// Frame height in lines.
    pub height: u16,
    /// The bytes written: the Y (or RGB) plane, `y_pitch * height` bytes, then for NV12 the
    /// UV plane, `uv_pitch * ceil(height / 2)` bytes.
    pub pixels: Rc<[u8]>,
}

/// What a driver believes, in the shape the invariants read. Drivers build it from their own
/// state; nothing in it comes from the model.
#[derive(Clone, Debug, Default)]
pub struct DriverView<'a> {
    /// Per output: what the driver believes about the monitor.
    pub connection: [Connection; 2],
    /// Per output: hotplug notifications the driver has processed.
    pub hotplug_seen: [u32; 2],
    /// The VRAM size the driver believes in, bytes.
    pub vram_size: Option<u64>,
    /// Per output: the record of the last modeset the driver saw succeed.
    pub modes: [Option<[u8; RECORD_LEN]>; 2],
    /// Flips the driver submitted (the recent ones are enough).
    pub flips: &'a [FlipBelief],
    /// The highest fence the driver saw done (0 for none).
    pub fence_done: u32,
    /// VRAM regions the driver wrote.
    pub writes: &'a [RamWrite],
}

/// Mask of the bytes of a timing record that name the mode a monitor sees: everything but the
/// reserved byte, the PLL fields (FNUM, FDEN, IDIV, OutputSelect), Reduced and Flag.
const GEOMETRY: [bool; RECORD_LEN] = {
    let mut m = [true; RECORD_LEN];
    m[5] = false;
    let mut i = 22;
    while i < 28 {
        m[i] = false;
        i += 1;
    }
    m[30] = false;
    m[31] = false;
    m
};

fn same_mode_bytes(a: &[u8; RECORD_LEN], b: &[u8; RECORD_LEN]) -> bool {
    (0..RECORD_LEN).all(|i| !GEOMETRY[i] || a[i] == b[i])
}

fn hex(b: &[u8]) -> String {
    calametra_core::hex::encode(b)
}

impl Trigger6 {
    /// The frame the model shows is the bytes the driver wrote and flipped: every fence the
    /// driver believes done was completed by the dock; the flip the dock shows is one the
    /// driver submitted, at the same place and format; and the VRAM bytes of the shown planes
    /// (at the output's mode size) are the bytes the driver wrote for that flip.
    pub fn flip_state_matches_ram(&self, view: &DriverView<'_>) -> Result<(), String> {
        if view.fence_done != 0 && !self.completed_fences().contains(&view.fence_done) {
            return Err(format!(
                "the driver believes fence {} is done, but the dock completed only fences {:?}",
                view.fence_done,
                self.completed_fences()
            ));
        }
        for output in 0..2usize {
            let Some(shown) = self.flip_state(output).shown else {
                continue;
            };
            let Some(b) = view
                .flips
                .iter()
                .rev()
                .find(|b| b.fence == shown.fence && b.output as usize == output)
            else {
                return Err(format!(
                    "output {output} shows fence {} (Y at {:#x}), which the driver never flipped",
                    shown.fence, shown.y_offset
                ));
            };
            let (have, want) = (
                (shown.format, shown.y_offset, shown.y_pitch),
                (b.format, b.y_offset, b.y_pitch),
            );
            if have != want {
                return Err(format!(
                    "output {output} shows fence {} as (format, Y offset, pitch) {have:?}, the driver flipped {want:?}",
                    shown.fence
                ));
            }
            let Some(mode) = self.mode(output) else {
                continue; // nothing is scanned out without a mode
            };
            let Some(format) = PixelFormat::from_code(shown.format) else {
                return Err(format!(
                    "output {output} shows format {}, which nobody can decode",
                    shown.format
                ));
            };
            if (mode.hactive, mode.vactive) != (b.width, b.height) {
                return Err(format!(
                    "output {output} runs {}x{}, but the driver flipped a {}x{} frame (fence {})",
                    mode.hactive, mode.vactive, b.width, b.height, b.fence
                ));
            }
            let key = (
                shown.serial,
                self.vram().generation(),
                b.pixels.as_ptr() as usize,
                b.pixels.len(),
            );
            if *self.check_cache.borrow() == Some(key) {
                continue;
            }
            let (w, h) = (b.width as usize, b.height as usize);
            let line = format.line_bytes(w as u32) as usize;
            let mut planes = vec![("Y", shown.y_offset as u64, b.y_pitch as usize, h, 0usize)];
            if format == PixelFormat::Nv12 {
                if (shown.uv_offset, shown.uv_pitch) != (b.uv_offset, b.uv_pitch) {
                    return Err(format!(
                        "output {output} shows fence {} with its UV plane at {:#x} pitch {}, the driver flipped {:#x} pitch {}",
                        shown.fence, shown.uv_offset, shown.uv_pitch, b.uv_offset, b.uv_pitch
                    ));
                }
                planes.push((
                    "UV",
                    shown.uv_offset as u64,
                    b.uv_pitch as usize,
                    h.div_ceil(2),
                    b.y_pitch as usize * h,
                ));
            }
            for (name, addr, pitch, rows, base) in planes {
                if pitch < line || b.pixels.len() < base + pitch * (rows - 1) + line {
                    return Err(format!(
                        "the driver's fence {} frame holds {} bytes, too few for its {name} plane ({rows} lines of {line} at pitch {pitch})",
                        b.fence,
                        b.pixels.len()
                    ));
                }
                for r in 0..rows {
                    let want = &b.pixels[base + r * pitch..base + r * pitch + line];
                    if let Some(i) = self
                        .vram()
                        .first_difference(addr + (r * pitch) as u64, want)
                    {
                        let at = addr + (r * pitch + i) as u64;
                        let have = self.vram_bytes(at, 1)[0];
                        return Err(format!(
                            "output {output} shows fence {} but its {name} plane differs from what the driver wrote at line {r}, byte {i} (VRAM {at:#x}): dock has {have:#04x}, driver wrote {:#04x}",
                            shown.fence, want[i]
                        ));
                    }
                }
            }
            *self.check_cache.borrow_mut() = Some(key);
        }
        Ok(())
    }

    /// Status is consistent with connection: once the driver has processed every hotplug
    /// notification the dock raised for an output, what it believes about the monitor is
    /// what is there. (While a notification is still in flight the driver cannot know.)
    pub fn status_matches_connection(&self, view: &DriverView<'_>) -> Result<(), String> {
        for output in 0..2usize {
            let raised = self.hotplug_raised(output);
            let seen = view.hotplug_seen[output];
            if seen > raised {
                return Err(format!(
                    "output {output}: the driver processed {seen} hotplug notifications, the dock raised {raised}"
                ));
            }
            if seen != raised {
                continue;
            }
            let there = self.connected(output);
            let believed = view.connection[output];
            let wrong = match believed {
                Connection::Connected => !there,
                Connection::Disconnected => there,
                Connection::Unknown => false,
            };
            if wrong {
                return Err(format!(
                    "output {output}: the driver believes {believed:?}, but the monitor is {} and the driver has processed all {raised} hotplug notifications (a stale status reply?)",
                    if there { "connected" } else { "disconnected" }
                ));
            }
        }
        Ok(())
    }

    /// A modeset only with a valid timing: the mode set on each output is a record of that
    /// output's firmware table (compared on the bytes a monitor sees), and a mode the driver
    /// believes it set is the mode the dock has.
    pub fn modeset_has_valid_timing(&self, view: &DriverView<'_>) -> Result<(), String> {
        for output in 0..2usize {
            if let Some(m) = self.mode_bytes(output) {
                let table = &self.facts().tables[output];
                if !table.iter().any(|r| same_mode_bytes(r, &m)) {
                    return Err(format!(
                        "output {output} runs a mode that is not in its timing table: {}",
                        hex(&m)
                    ));
                }
            }
            if let Some(want) = view.modes[output] {
                match self.mode_bytes(output) {
                    Some(have) if have == want => {}
                    Some(have) => {
                        return Err(format!(
                            "output {output}: the driver believes it set {}, the dock runs {}",
                            hex(&want),
                            hex(&have)
                        ))
                    }
                    None => {
                        return Err(format!(
                            "output {output}: the driver believes it set {}, the dock has no mode",
                            hex(&want)
                        ))
                    }
                }
            }
        }
        Ok(())
    }

    /// Every RAM write in bounds: the dock refused no write past its VRAM, nothing in VRAM
    /// lies past its size, and every region the driver wrote lies inside it.
    pub fn ram_writes_in_bounds(&self, view: &DriverView<'_>) -> Result<(), String> {
        let size = self.vram_size();
        if let Some(w) = self.rejected_writes().first() {
            return Err(format!(
                "a RAM write of {:#x} bytes at {:#x} reached past the VRAM end {size:#x} ({} MiB)",
                w.len,
                w.addr,
                size >> 20
            ));
        }
        let extent = self.vram().extent();
        if extent > size {
            return Err(format!(
                "VRAM holds bytes up to {extent:#x}, past its end {size:#x} ({} MiB)",
                size >> 20
            ));
        }
        if let Some(w) = view.writes.iter().find(|w| w.addr + w.len > size) {
            return Err(format!(
                "the driver wrote {:#x} bytes at {:#x}, past the VRAM end {size:#x} ({} MiB){}",
                w.len,
                w.addr,
                size >> 20,
                match view.vram_size {
                    Some(s) => format!(" (it believes the VRAM has {s:#x} bytes)"),
                    None => String::new(),
                }
            ));
        }
        Ok(())
    }
}
