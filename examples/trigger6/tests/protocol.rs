//! The driver's wire encoding (`protocol`) against the model's decoding
//! (`calametra_models::trigger6::bulk` and `Timing`): the two are written apart, so the driver's
//! production code needs neither the model nor its dependencies, and a mistake in either one is
//! a difference here before it is a failed scenario.

use calametra_example_trigger6::protocol::{self, DisplayEvent, DmaHeader, Timing, VideoHeader};
use calametra_models::trigger6::bulk;
use calametra_models::trigger6::Timing as ModelTiming;

#[test]
fn the_drivers_headers_decode_as_the_model_reads_them() {
    let d = DmaHeader {
        signature: protocol::SESSION_DISPLAY,
        payload_len: 0x17bb030,
        payload_addr: 0x2ff_ffd0,
        packet_size: 0x19000,
        packet_offset: 0x32000,
        flags: 1,
        func: [1, 2, 3, 4, 5, 6, 7, 8],
    };
    let m = bulk::DmaHeader::parse(&d.to_bytes());
    assert_eq!(
        (
            m.signature,
            m.payload_len,
            m.payload_addr,
            m.packet_size,
            m.packet_offset,
            m.flags,
            m.func
        ),
        (
            d.signature,
            d.payload_len,
            d.payload_addr,
            d.packet_size,
            d.packet_offset,
            d.flags,
            d.func
        )
    );
    assert_eq!(protocol::DMA_HEADER_LEN, bulk::DMA_HEADER_LEN);
    let v = VideoHeader {
        command: protocol::CMD_FLIP_SECONDARY,
        payload_size: 1920 * 1080 * 3 / 2,
        fence: 7,
        target_format: 6,
        y_pitch: 1920,
        uv_pitch: 1920,
        y_offset: 0x320_0000,
        uv_offset: 0x320_0000 + 1920 * 1080,
        v_offset: 0x320_0000,
        source_format: 6,
        flag: 0x80,
    };
    let m = bulk::VideoHeader::parse(&v.to_bytes());
    assert_eq!(
        (m.command, m.payload_size, m.fence, m.target_format),
        (bulk::CMD_FLIP_SECONDARY, v.payload_size, 7, 6)
    );
    assert_eq!(
        (m.y_pitch, m.uv_pitch, m.y_offset, m.uv_offset, m.v_offset),
        (v.y_pitch, v.uv_pitch, v.y_offset, v.uv_offset, v.v_offset)
    );
    assert_eq!((m.source_format, m.flag), (6, 0x80));
    assert_eq!(protocol::VIDEO_HEADER_LEN, bulk::VIDEO_HEADER_LEN);
    assert_eq!(protocol::CMD_FLIP_PRIMARY, bulk::CMD_FLIP_PRIMARY);
}

#[test]
fn the_models_interrupts_and_timing_records_read_as_the_driver_expects() {
    assert_eq!(protocol::INTERRUPT_LEN, bulk::INTERRUPT_LEN);
    for (event, data, want) in [
        (
            bulk::EVENT_FENCE_DONE,
            42,
            vec![DisplayEvent::FenceDone(42)],
        ),
        (bulk::EVENT_HOTPLUG_0, 0, vec![DisplayEvent::Hotplug(0)]),
        (bulk::EVENT_HOTPLUG_1, 0, vec![DisplayEvent::Hotplug(1)]),
        (
            bulk::EVENT_HOTPLUG_1 | bulk::EVENT_FENCE_DONE,
            3,
            vec![DisplayEvent::Hotplug(1), DisplayEvent::FenceDone(3)],
        ),
    ] {
        let packet = bulk::display_interrupt(event, data);
        assert_eq!(protocol::parse_interrupt(&packet), want, "event {event:#x}");
    }
    let t = ModelTiming {
        pclk_khz: 148_500,
        refresh_hz: 60,
        rsvd: 0,
        htotal: 2200,
        hactive: 1920,
        hsync_start: 2008,
        hsync_width: 44,
        vtotal: 1125,
        vactive: 1080,
        vsync_start: 1084,
        vsync_width: 5,
        fnum: 1,
        fden: 2,
        idiv: 3,
        output_select: 4,
        hsync_pol: 1,
        vsync_pol: 0,
        reduced: 0,
        flag: 1,
    };
    let d = Timing::parse(&t.to_bytes()).expect("a 32-byte record");
    assert_eq!(
        (
            d.pclk_khz,
            d.refresh_hz,
            d.htotal,
            d.hactive,
            d.hsync_start,
            d.hsync_width
        ),
        (148_500, 60, 2200, 1920, 2008, 44)
    );
    assert_eq!(
        (
            d.vtotal,
            d.vactive,
            d.vsync_start,
            d.vsync_width,
            d.hsync_pol,
            d.vsync_pol
        ),
        (1125, 1080, 1084, 5, 1, 0)
    );
}
