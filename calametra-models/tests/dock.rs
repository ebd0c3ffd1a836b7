//! The staged dock (`trigger6::Dock`) driven call by call through a `DeviceHost`: the monitor
//! plugged at the first vendor request and only once, unplugged only at output 0's status
//! query once the model shows the fence, each event's `external` record, and every other
//! `Device` call answered by the model.

use calametra_core::host::DeviceHost;
use calametra_core::usb::{Device, Setup};
use calametra_core::RunConfig;
use calametra_models::trigger6::bulk::{DmaHeader, VIDEO_HEADER_LEN};
use calametra_models::trigger6::Dock;

mod support;
use support::*;

const PLUG: &str = r#""event":"plug_monitor","output":0"#;
const UNPLUG: &str = r#""event":"unplug_monitor","output":0"#;

fn host(dock: Dock) -> DeviceHost {
    let config = RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    };
    DeviceHost::new(dock, &config)
}

fn the_dock(h: &DeviceHost) -> &Dock {
    h.device::<Dock>().expect("the dock")
}

/// The trace's `external` records, in order.
fn externals(h: &DeviceHost) -> Vec<String> {
    h.lines()
        .iter()
        .filter(|l| l.contains(r#""external""#))
        .cloned()
        .collect()
}

fn setup(request_type: u8, request: u8, value: u16, length: u16) -> Setup {
    Setup {
        request_type,
        request,
        value,
        index: 0,
        length,
    }
}

/// Output `value`'s status query (vendor IN 0x87).
fn status(h: &mut DeviceHost, output: u16) -> Vec<u8> {
    h.control(setup(0xc0, 0x87, output, 1), &[])
        .expect("the status query is answered")
}

/// GET_DESCRIPTOR(device): a standard request.
fn device_descriptor(h: &mut DeviceHost) -> Vec<u8> {
    h.control(setup(0x80, 6, 0x0100, 18), &[])
        .expect("the device descriptor")
}

/// Sets 640x480@60 on output 0 and flips a frame with `fence` there, one DMA command.
fn modeset_and_flip(h: &mut DeviceHost, fence: u32) {
    let table = dock().facts().tables[0][VGA];
    h.control(setup(0x40, 0x12, 0, table.len() as u16), &table)
        .expect("the modeset");
    let (_, payload) = frame(640, 480, fence);
    let header = DmaHeader {
        signature: 0,
        payload_len: payload.len() as u32,
        payload_addr: FB - VIDEO_HEADER_LEN as u32,
        packet_size: payload.len() as u32,
        packet_offset: 0,
        flags: 0,
        func: [0; 8],
    };
    h.out(0x02, &header.to_bytes()).expect("the DMA header");
    h.out(0x02, &payload).expect("the DMA payload");
    let shown = the_dock(h).model().flip_state(0).shown.map(|f| f.fence);
    assert_eq!(shown, Some(fence), "the flip is shown");
}

#[test]
fn the_monitor_is_plugged_at_the_first_vendor_request_and_only_once() {
    let mut h = host(Dock::new(dock()));
    assert!(!the_dock(&h).model().connected(0), "the model starts bare");
    device_descriptor(&mut h);
    assert!(externals(&h).is_empty(), "a standard request plugs nothing");
    assert!(!the_dock(&h).plugged() && !the_dock(&h).model().connected(0));

    // The first vendor request: the monitor is there before the model answers it.
    assert_eq!(
        status(&mut h, 0),
        [1],
        "the first status query sees the monitor"
    );
    let ext = externals(&h);
    assert_eq!(ext.len(), 1, "{ext:?}");
    assert!(ext[0].contains(PLUG), "{}", ext[0]);
    let d = the_dock(&h);
    assert!(d.plugged() && d.model().connected(0));
    assert_eq!(d.model().hotplug_raised(0), 1);

    // Later vendor requests plug nothing more; with no unplug asked for, none happens.
    status(&mut h, 0);
    h.control(setup(0xc0, 0x88, 0, 1), &[]).unwrap();
    modeset_and_flip(&mut h, 3);
    status(&mut h, 0);
    assert_eq!(externals(&h).len(), 1, "{:?}", externals(&h));
    let d = the_dock(&h);
    assert_eq!(d.model().hotplug_raised(0), 1);
    assert!(d.model().connected(0) && !d.unplugged());
}

#[test]
fn the_monitor_is_unplugged_only_after_the_fence_and_only_at_output_0s_status_query() {
    let mut h = host(Dock::new(dock()).unplug_after_fence(7));
    assert_eq!(
        status(&mut h, 0),
        [1],
        "plugged, not unplugged: no flip shown"
    );
    modeset_and_flip(&mut h, 6);
    assert_eq!(
        status(&mut h, 0),
        [1],
        "fence 6 is before the one asked for"
    );
    modeset_and_flip(&mut h, 7);
    h.control(setup(0xc0, 0x88, 0, 1), &[]).unwrap();
    assert_eq!(
        status(&mut h, 1),
        [0],
        "output 1's status query unplugs nothing"
    );
    device_descriptor(&mut h);
    assert_eq!(externals(&h).len(), 1, "{:?}", externals(&h));
    assert!(the_dock(&h).model().connected(0) && !the_dock(&h).unplugged());

    // Output 0's status query after fence 7: the monitor goes before the model answers.
    assert_eq!(status(&mut h, 0), [0], "the query sees the monitor gone");
    let ext = externals(&h);
    assert_eq!(ext.len(), 2, "{ext:?}");
    assert!(ext[0].contains(PLUG) && ext[1].contains(UNPLUG), "{ext:?}");
    let d = the_dock(&h);
    assert!(d.unplugged() && !d.model().connected(0));
    assert_eq!(
        d.model().hotplug_raised(0),
        2,
        "plug and unplug each raise one"
    );

    // Only once, and no second plug either.
    status(&mut h, 0);
    modeset_and_flip(&mut h, 8);
    status(&mut h, 0);
    assert_eq!(externals(&h).len(), 2, "{:?}", externals(&h));
}

#[test]
fn a_later_fence_unplugs_too() {
    let mut h = host(Dock::new(dock()).unplug_after_fence(2));
    modeset_and_flip(&mut h, 5);
    assert_eq!(status(&mut h, 0), [0]);
    let ext = externals(&h);
    assert!(ext.len() == 2 && ext[1].contains(UNPLUG), "{ext:?}");
}

#[test]
fn every_other_call_goes_to_the_model() {
    let mut h = host(Dock::new(dock()));
    let bare = dock();
    let d = the_dock(&h);
    assert_eq!(d.name(), bare.name());
    assert_eq!(
        h.request_name(&setup(0x40, 0x1c, 2, 0)),
        Some(
            bare.request_name(&setup(0x40, 0x1c, 2, 0))
                .unwrap()
                .to_string()
        ),
        "request names are the model's"
    );
    assert_eq!(
        the_dock(&h).describe(),
        bare.describe_fields(),
        "a state dump shows the model's fields"
    );

    // Standard requests are the model's replies.
    let mut alone = DeviceHost::new(dock(), &RunConfig::default());
    assert_eq!(
        device_descriptor(&mut h),
        alone.control(setup(0x80, 6, 0x0100, 18), &[]).unwrap()
    );

    // The plug's hotplug interrupt comes out of the model's interrupt endpoint (poll_in), and
    // the bulk OUT lands in the model (out).
    status(&mut h, 0);
    let irq = h.poll_in(0x83, 64, true);
    assert!(
        matches!(&irq, Some(Ok(p)) if !p.is_empty()),
        "the hotplug interrupt: {irq:?}"
    );
    modeset_and_flip(&mut h, 4);
    let d = the_dock(&h);
    assert_eq!(d.describe(), d.model().describe_fields());
    assert_eq!(d.pictures(), d.model().pictures());
    assert!(!d.pictures().is_empty(), "output 0 shows the flip");
    for name in d.pictures() {
        let (a, b) = (d.picture(&name), d.model().picture(&name));
        assert_eq!(a.map(|p| p.png), b.map(|p| p.png), "{name}");
    }
    assert_eq!(d.picture("no such picture").map(|p| p.png), None);

    // A bus reset reaches the model (on_reset): a configured model goes unconfigured.
    h.control(setup(0x00, 9, 1, 0), &[])
        .expect("SET_CONFIGURATION");
    let unconfigured = |h: &DeviceHost| {
        h.lines()
            .iter()
            .filter(|l| l.contains(r#""from":"configured","to":"unconfigured""#))
            .count()
    };
    assert_eq!(unconfigured(&h), 0);
    h.reset();
    assert_eq!(
        unconfigured(&h),
        1,
        "the model's config transition on reset"
    );
}
