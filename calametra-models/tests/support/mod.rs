//! What the Trigger 6 model's tests share: the shipped spec and model, vendor requests, DMA
//! uploads, NV12 frames, and the coverage marks' scenario.
#![allow(dead_code)] // each test target uses its part

use calametra_core::exec::{data_below, sleep};
use calametra_core::interface::Interface;
use calametra_core::spec::Spec;
use calametra_core::usb::{ControlIn, ControlOut, ControlType, Recipient, TransferError};
use calametra_core::Sim;
use calametra_models::trigger6::bulk::{
    DmaHeader, VideoHeader, CMD_FLIP_PRIMARY, FLAG_CONTINUE, VIDEO_HEADER_LEN,
};
use calametra_models::trigger6::Trigger6;
use std::rc::Rc;
use std::time::Duration;

pub const SPEC_PATH: &str = "specs/trigger6-jcd543.json";
pub const SPEC: &[u8] = include_bytes!("../../../specs/trigger6-jcd543.json");
pub const T: Duration = Duration::from_millis(100);
/// Record 0 of output 0's table: 640x480@60, small enough to upload quickly.
pub const VGA: usize = 0;
pub const FB: u32 = 0x10_0000;

pub fn spec() -> Spec {
    Spec::parse(SPEC_PATH, SPEC).expect("the shipped spec parses")
}

pub fn dock() -> Trigger6 {
    Trigger6::try_from_spec(&spec()).expect("the shipped spec builds a model")
}

pub fn vin(request: u8, value: u16, index: u16, length: u16) -> ControlIn {
    ControlIn {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request,
        value,
        index,
        length,
    }
}

pub fn vout(request: u8, value: u16, index: u16, data: &[u8]) -> ControlOut<'_> {
    ControlOut {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request,
        value,
        index,
        data,
    }
}

/// Sends `payload` to `addr` as one DMA command in `fragments` fragments; with `split`, each
/// fragment's header and data are each split over two bulk transfers.
pub async fn upload(
    i: &Interface,
    addr: u32,
    payload: &[u8],
    fragments: usize,
    split: bool,
) -> Result<(), TransferError> {
    let size = payload.len().div_ceil(fragments.max(1));
    let mut at = 0;
    while at < payload.len() {
        let n = size.min(payload.len() - at);
        let last = at + n == payload.len();
        let h = DmaHeader {
            signature: 0,
            payload_len: payload.len() as u32,
            payload_addr: addr,
            packet_size: n as u32,
            packet_offset: at as u32,
            flags: if last { 0 } else { FLAG_CONTINUE },
            func: [0; 8],
        };
        let hb = h.to_bytes();
        if split {
            // A header may arrive in pieces too.
            i.bulk_out(0x02, hb[..12].to_vec()).await?;
            i.bulk_out(0x02, hb[12..].to_vec()).await?;
        } else {
            i.bulk_out(0x02, hb.to_vec()).await?;
        }
        let data = &payload[at..at + n];
        if split && n > 1 {
            i.bulk_out(0x02, data[..n / 2].to_vec()).await?;
            i.bulk_out(0x02, data[n / 2..].to_vec()).await?;
        } else {
            i.bulk_out(0x02, data.to_vec()).await?;
        }
        at += n;
    }
    Ok(())
}

/// An NV12 frame of `w`x`h` whose bytes are all distinct-ish, and its flip payload.
pub fn frame(w: usize, h: usize, fence: u32) -> (Rc<[u8]>, Vec<u8>) {
    let pixels: Vec<u8> = (0..w * h * 3 / 2).map(|i| (i * 7 % 251) as u8).collect();
    let header = VideoHeader {
        command: CMD_FLIP_PRIMARY,
        payload_size: pixels.len() as u32,
        fence,
        target_format: 6,
        y_pitch: w as u16,
        uv_pitch: w as u16,
        y_offset: FB,
        uv_offset: FB + (w * h) as u32,
        v_offset: FB,
        source_format: 6,
        flag: 0,
    };
    let mut payload = header.to_bytes().to_vec();
    payload.extend_from_slice(&pixels);
    (pixels.into(), payload)
}

/// A client that polls status, modesets and flips a fragmented frame while a second task
/// modesets again, with an `unplug` external: the marks' scenario.
pub fn marks_scenario(sim: &mut Sim) {
    let dev = sim.attach(dock());
    sim.with_world(|w| w.with_model(dev, |m, cx| m.plug_monitor(cx, 0)));
    let rec = dock().facts().tables[0][VGA];
    let (a, b, c) = (dev.interface(), dev.interface(), dev.interface());
    sim.spawn("status", async move {
        for _ in 0..8 {
            let _ = a.control_in(vin(0x87, 0, 0, 1), T).await;
            sleep(Duration::from_micros(300)).await;
        }
    });
    sim.spawn("video", async move {
        let _ = b.control_out(vout(0x12, 0, 0, &rec), T).await;
        let _ = b.control_out(vout(0x1c, 2, 0, &[]), T).await;
        let fragments = 1 + data_below(3) as usize;
        let (_, payload) = frame(640, 480, 1);
        let _ = upload(&b, FB - VIDEO_HEADER_LEN as u32, &payload, fragments, false).await;
    });
    sim.spawn("mode", async move {
        sleep(Duration::from_micros(200 * (1 + data_below(6)))).await;
        let _ = c.control_out(vout(0x12, 0, 0, &rec), T).await;
        sleep(Duration::from_micros(900)).await;
        let _ = c.control_out(vout(0x1c, 2, 0, &[]), T).await;
    });
    sim.external("unplug", move |w| {
        w.with_model(dev, |m, cx| m.unplug_monitor(cx, 0));
    });
}
