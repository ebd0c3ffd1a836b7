//! Inputs the fuzz targets (`fuzz/`) found crashing the core, minimized, kept so the bugs stay
//! fixed. Each test names the target that found it.

use calametra_core::choices::Source;
use calametra_core::fault::{Fault, FaultPlan};
use calametra_core::host::DeviceHost;
use calametra_core::usb::{Loopback, Setup};
use calametra_core::RunConfig;
use std::path::Path;

fn load() -> Setup {
    Loopback::load(4).setup()
}

/// `faults`: a schedule's `delay_ns` of `u64::MAX` overflowed the transfer's latency; a delay
/// at a transition overflowed the completion time. Both saturate: the transfer never arrives
/// before the run's virtual timeout.
#[test]
fn a_delay_to_the_end_of_time_saturates() {
    let plan = FaultPlan::parse(
        Path::new("specs/faults/huge-delay.json"),
        r#"{"format":"calametra.faults","version":1,"source":"fuzz","faults":[
            {"site":"ctrl.load#1","fault":{"delay_ns":18446744073709551615}},
            {"site":"echo.empty->full#1","fault":{"delay_ns":18446744073709551615}}]}"#,
    )
    .unwrap();
    assert_eq!(plan.faults["ctrl.load#1"], Fault::Delay(u64::MAX));
    let config = RunConfig {
        faults: plan,
        source: Source::Default,
        ..RunConfig::default()
    };
    let mut host = DeviceHost::new(Loopback::default(), &config);
    let data = [1, 2, 3, 4];
    assert!(host.control(Loopback::store(&data).setup(), &data).is_ok());
    let _ = host.control(load(), &[]);
    let _ = host.control(load(), &[]);
}

/// `faults`: `delay(1.2345ms)` named a fault whose trial name read `delay(1.235ms)`, so the
/// trial the name selects delayed a different time than the plan. Trial names now write
/// durations exactly and read them with decimal arithmetic.
#[test]
fn a_delay_fault_name_reads_back_as_the_same_delay() {
    for text in [
        "delay(1.2345ms)",
        "delay(9007199254740993ns)",
        "delay(18446744073709551615)",
        "delay(0.000000001s)",
    ] {
        let f = Fault::parse(text).unwrap();
        assert_eq!(Fault::parse(&f.to_string()), Ok(f.clone()), "{text} -> {f}");
    }
    assert_eq!(
        Fault::parse("delay(1.2345ms)").unwrap().to_string(),
        "delay(1234500ns)"
    );
    assert!(Fault::parse("delay(18446744073709551616ns)").is_err());
}
