//! End-to-end, lockstep: a kernel fault in the guest is a failure of its own kind. The guest
//! crashes its own kernel on purpose (`echo c > /proc/sysrq-trigger`: a NULL dereference the
//! kernel turns into a panic) while the HID model is attached; the run ends as `kernel_fault`,
//! its failure names the kernel's report with its last lines, the trace has a `kernel_fault`
//! record, and the run hashes the same twice.

use calametra_core::spec::Spec;
use calametra_core::RunConfig;
use calametra_models::hid::Hid;
use calametra_qemu::lockstep::LockstepConfig;
use calametra_qemu::scenario::GuestRunner;
use std::path::PathBuf;
use std::sync::Arc;

fn target_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../target")
}

#[test]
#[ignore = "needs the lockstep QEMU build: run scripts/install-qemu.sh, guest/build.sh and calametra-qemu/qemu/build.sh, then cargo test -p calametra-qemu --test kernel_fault -- --ignored"]
fn a_crashed_kernel_is_a_kernel_fault_with_its_last_lines() {
    let lock = match LockstepConfig::find(&target_dir()) {
        Ok(c) => c,
        Err(e) => panic!("needs the lockstep QEMU and the guest: {e}"),
    };
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../calametra-models/specs/hid-reports.json");
    let spec = Arc::new(Spec::load(&path).expect("the HID spec loads"));
    let runner = GuestRunner::with(
        |g| {
            g.attach(Hid::from_spec(g.spec()));
            g.run_script(
                "while [ ! -e /dev/hidraw0 ]; do sleep 0.1; done\necho c > /proc/sysrq-trigger\nsleep 5\n",
                Vec::new(),
            );
        },
        lock,
    );
    let config = RunConfig {
        spec: Some(spec),
        keep_trace: true,
        ..RunConfig::default()
    };
    let a = runner.run_guest(&config).expect("a run");
    println!("{}", a.summary());
    assert_eq!(a.outcome.name(), "kernel_fault", "{}", a.summary());
    assert!(a.outcome.is_verdict());
    let text = a.failure.as_ref().expect("a failure").to_string();
    assert!(
        text.starts_with("task `guest kernel` returned an error: "),
        "{text}"
    );
    assert!(text.contains("the guest kernel's last lines:"), "{text}");
    assert!(
        a.trace
            .iter()
            .any(|l| l.contains("\"kind\":\"kernel_fault\"")),
        "a kernel_fault record"
    );
    let b = runner.run_guest(&config).expect("a second run");
    assert_eq!(a.outcome, b.outcome);
    assert_eq!(
        a.hash, b.hash,
        "the crash, its report and the end: the same twice"
    );
}
