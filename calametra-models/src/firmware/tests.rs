//! usb-device's own `TestClass` (the class its maintainers use to test peripheral drivers on
//! hardware) on the simulated bus: descriptors, control transfers longer than endpoint 0's
//! 8-byte packets in both directions, bulk loopback, SET_ADDRESS and SET_CONFIGURATION seen as
//! transitions, a refused transition rolled back, and determinism.

use super::{Firmware, FirmwareDevice, SimBus};
use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::usb::{ControlIn, ControlOut, ControlType, Recipient, TransferError};
use calametra_core::{run, RunConfig, Sim};
use std::time::Duration;
use usb_device::device::{UsbDevice, UsbDeviceState};
use usb_device::test_class::{self, TestClass};

struct TestFirmware {
    usb: UsbDevice<'static, SimBus>,
    class: TestClass<'static, SimBus>,
}

impl Firmware for TestFirmware {
    fn poll(&mut self) {
        self.usb.poll(&mut [&mut self.class]);
        self.class.poll();
    }
    fn usb_state(&self) -> UsbDeviceState {
        self.usb.state()
    }
    fn name(&self) -> &str {
        "test_class"
    }
    fn request_name(&self, setup: &calametra_core::usb::Setup) -> Option<&'static str> {
        (setup.control_type() == Some(ControlType::Vendor)).then_some(match setup.request {
            test_class::REQ_WRITE_BUFFER => "write_buffer",
            test_class::REQ_READ_BUFFER => "read_buffer",
            test_class::REQ_READ_LONG_DATA => "read_long_data",
            _ => return None,
        })
    }
}

fn device() -> FirmwareDevice<TestFirmware> {
    FirmwareDevice::new(|alloc| {
        let class = TestClass::new(alloc);
        let usb = class.make_device(alloc);
        TestFirmware { usb, class }
    })
}

const T: Duration = Duration::from_millis(100);

fn std_in(request: u8, value: u16, length: u16) -> ControlIn {
    ControlIn {
        control_type: ControlType::Standard,
        recipient: Recipient::Device,
        request,
        value,
        index: 0,
        length,
    }
}

fn vendor_in(request: u8, length: u16) -> ControlIn {
    ControlIn {
        control_type: ControlType::Vendor,
        recipient: Recipient::Device,
        request,
        value: 0,
        index: 0,
        length,
    }
}

fn scenario(sim: &mut Sim) {
    let dev = sim.attach(device());
    let iface = dev.interface();
    sim.spawn("host", async move {
        let d = iface
            .control_in(std_in(6, 0x0100, 18), T)
            .await
            .map_err(|e| e.to_string())?;
        if d.len() != 18 || d[7] != 8 || u16::from_le_bytes([d[8], d[9]]) != test_class::VID {
            return Err(format!("device descriptor {d:02x?}"));
        }
        // The configuration in two steps, as hosts read it.
        let head = iface
            .control_in(std_in(6, 0x0200, 9), T)
            .await
            .map_err(|e| e.to_string())?;
        let total = u16::from_le_bytes([head[2], head[3]]);
        let cfg = iface
            .control_in(std_in(6, 0x0200, total), T)
            .await
            .map_err(|e| e.to_string())?;
        if cfg.len() != total as usize || cfg[4] != 1 {
            return Err(format!("configuration {cfg:02x?}"));
        }
        // String requests carry the language ID in wIndex.
        let product = iface
            .control_in(
                ControlIn {
                    index: 0x0409,
                    ..std_in(6, 0x0302, 255)
                },
                T,
            )
            .await
            .map_err(|e| e.to_string())?;
        let text: String = char::decode_utf16(
            product[2..]
                .chunks(2)
                .map(|c| u16::from_le_bytes([c[0], c[1]])),
        )
        .map(|c| c.unwrap_or('?'))
        .collect();
        if text != test_class::PRODUCT {
            return Err(format!("product string {text:?}"));
        }
        // SET_ADDRESS takes effect when its status stage completes; then SET_CONFIGURATION.
        let set = |request, value| ControlOut {
            control_type: ControlType::Standard,
            recipient: Recipient::Device,
            request,
            value,
            index: 0,
            data: &[],
        };
        iface
            .control_out(set(5, 7), T)
            .await
            .map_err(|e| e.to_string())?;
        iface
            .control_out(set(9, 1), T)
            .await
            .map_err(|e| e.to_string())?;
        // 40 bytes through 8-byte packets, and back.
        let payload: Vec<u8> = (0..40u8).map(|i| i.wrapping_mul(7)).collect();
        iface
            .control_out(
                ControlOut {
                    control_type: ControlType::Vendor,
                    recipient: Recipient::Device,
                    request: test_class::REQ_WRITE_BUFFER,
                    value: 0,
                    index: 0,
                    data: &payload,
                },
                T,
            )
            .await
            .map_err(|e| e.to_string())?;
        let back = iface
            .control_in(vendor_in(test_class::REQ_READ_BUFFER, 40), T)
            .await
            .map_err(|e| e.to_string())?;
        if back != payload {
            return Err(format!("read back {back:02x?}"));
        }
        // 257 bytes from a static buffer: 32 full packets and a short one.
        let long = iface
            .control_in(vendor_in(test_class::REQ_READ_LONG_DATA, 300), T)
            .await
            .map_err(|e| e.to_string())?;
        if long.as_slice() != test_class::LONG_DATA {
            return Err(format!("long data: {} bytes", long.len()));
        }
        // An unknown vendor request is rejected with a stall.
        match iface
            .control_in(vendor_in(test_class::REQ_UNKNOWN, 8), T)
            .await
        {
            Err(TransferError::Stall) => {}
            other => return Err(format!("unknown request: {other:?}")),
        }
        // Bulk loopback: 100 bytes out in 64-byte packets, echoed back in.
        let bulk: Vec<u8> = (0..100u8).collect();
        let n = iface
            .bulk_out(0x01, bulk.clone())
            .await
            .map_err(|e| e.to_string())?;
        let echo = iface.bulk_in(0x81, 256).await.map_err(|e| e.to_string())?;
        if n != 100 || echo != bulk {
            return Err(format!("bulk echo {n} {echo:02x?}"));
        }
        Ok::<(), String>(())
    });
    sim.invariant("address_and_configuration", move |w| {
        let d = w.model(dev);
        match d.state("usb") {
            Some("configured") if d.address() != 7 => {
                Err(format!("configured at address {}", d.address()))
            }
            _ => Ok(()),
        }
    });
}

fn config() -> RunConfig {
    RunConfig {
        keep_trace: true,
        record_sites: true,
        ..RunConfig::default()
    }
}

#[test]
fn test_class_runs_on_the_simulated_bus() {
    let a = run(config(), &scenario);
    assert!(
        a.failure.is_none(),
        "{:?}\n{}",
        a.failure,
        a.lines.join("\n")
    );
    let text = a.lines.join("\n");
    for site in [
        "usb.default->addressed#1",
        "usb.addressed->configured#1",
        "ctrl.write_buffer#1",
        "ctrl.read_long_data#1",
        "bulk.out#1",
    ] {
        assert!(text.contains(site), "{site} in\n{text}");
    }
    // Endpoint traffic: the write is a SETUP, five 8-byte OUT packets and the status IN.
    assert!(
        text.contains("SETUP OUT0:8 OUT0:8 OUT0:8 OUT0:8 OUT0:8 IN0:0"),
        "{text}"
    );
    let b = run(config(), &scenario);
    assert_eq!(a.hash, b.hash, "byte-exact across two runs");
}

#[test]
fn a_refused_transition_rolls_the_firmware_back_and_stalls_the_request() {
    let cell = std::rc::Rc::new(std::cell::Cell::new((0u32, String::new())));
    let c2 = cell.clone();
    let r = run(
        RunConfig {
            faults: FaultPlan::single("usb.addressed->configured#1", Fault::Stall),
            ..config()
        },
        &move |sim: &mut Sim| {
            let dev = sim.attach(device());
            let iface = dev.interface();
            let c3 = c2.clone();
            sim.spawn("host", async move {
                let set = |request, value| ControlOut {
                    control_type: ControlType::Standard,
                    recipient: Recipient::Device,
                    request,
                    value,
                    index: 0,
                    data: &[],
                };
                iface.control_out(set(5, 3), T).await?;
                let first = iface.control_out(set(9, 1), T).await;
                let cfg = iface.control_in(std_in(8, 0, 1), T).await?;
                let second = iface.control_out(set(9, 1), T).await;
                let cfg2 = iface.control_in(std_in(8, 0, 1), T).await?;
                c3.set((0, format!("{first:?} {cfg:?} {second:?} {cfg2:?}")));
                Ok::<(), TransferError>(())
            });
            sim.invariant("one_rebuild_at_most", move |w| w.model(dev).rebuilds() <= 1);
        },
    );
    assert!(r.failure.is_none(), "{:?}", r.failure);
    let (_, seen) = cell.take();
    assert_eq!(seen, "Err(Stall) [0] Ok(()) [1]", "{}", r.lines.join("\n"));
    assert!(r.lines.iter().any(|l| l.contains("\"rollback\"")));
}
