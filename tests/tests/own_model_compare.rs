//! A model from a user's own crate is compared with a capture: the counter of
//! `own_model/counter.rs` is found through the registry by its spec's format, and a usbmon
//! capture of its requests is replayed against it by `calametra_capture::by_spec::compare_spec`,
//! the entry point `calametra compare` runs (the tool adds only the printing and where
//! pictures go); and by hand, through `compare_with` over a host of the registry's model.

#[path = "own_model/counter.rs"]
mod counter;

use calametra::host::DeviceHost;
use calametra::registry::{self, Boxed};
use calametra::spec::Spec;
use calametra::RunConfig;
use calametra_capture::by_spec::{compare_spec, compares_whole_captures, Compared, SpecOptions};
use calametra_capture::compare::{compare_with, NoExplanations, Options, Report};
use calametra_capture::Capture;

fn spec() -> Spec {
    Spec::parse(
        "tests/own_model/counter.json",
        include_bytes!("own_model/counter.json"),
    )
    .unwrap()
}

/// Replays a usbmon text capture against the model registered for the counter's spec; the
/// report and the host the model ran in.
fn compare(capture: &str) -> (Report, DeviceHost) {
    let capture = Capture::parse("counter.usbmon", capture.as_bytes()).unwrap();
    let model = registry::build(&spec()).unwrap();
    let config = RunConfig {
        keep_trace: true,
        ..RunConfig::default()
    };
    let mut host = DeviceHost::new(Boxed(model), &config);
    let report = compare_with(
        &capture.control_transfers(),
        &mut host,
        &Options::default(),
        &mut NoExplanations,
    );
    (report, host)
}

/// What the device did: adds 2 and 3 (acknowledged), an add of 1 refused at the limit (a
/// stall), and reads of the total, 5.
const REAL: &str = "\
ffff1 100 S Co:1:002:0 s 40 01 0002 0000 0000 0
ffff1 110 C Co:1:002:0 0 0
ffff2 200 S Co:1:002:0 s 40 01 0003 0000 0000 0
ffff2 210 C Co:1:002:0 0 0
ffff3 300 S Co:1:002:0 s 40 01 0001 0000 0000 0
ffff3 310 C Co:1:002:0 -32 0
ffff4 400 S Ci:1:002:0 s c0 02 0000 0000 0004 4 <
ffff4 410 C Ci:1:002:0 0 4 = 05000000
";

#[test]
fn the_registry_finds_a_model_of_a_users_crate_by_its_format() {
    let def = registry::for_spec(&spec()).unwrap();
    assert_eq!(def.format, counter::FORMAT);
    assert!(def.module.ends_with("counter"), "{}", def.module);
    assert!(registry::formats().contains(&counter::FORMAT));
    // An unknown format's error lists this binary's registered formats.
    let other = Spec::parse(
        "other.json",
        br#"{"format": "example.spec.nothing", "version": 1, "source": "a test"}"#,
    )
    .unwrap();
    let e = registry::build(&other).err().unwrap();
    assert!(
        e.contains("other.json: field `format`: `example.spec.nothing`")
            && e.contains("example.spec.counter"),
        "{e}"
    );
}

#[test]
fn the_entry_point_of_calametra_compare_compares_a_users_model() {
    assert!(!compares_whole_captures(&spec()).unwrap());
    let run = |capture: &str| {
        compare_spec(
            "counter.usbmon".as_ref(),
            capture.as_bytes(),
            &spec(),
            &SpecOptions::default(),
            None,
        )
        .unwrap()
    };
    let clean = run(REAL);
    assert_eq!(clean.compared(), 4, "{}", clean.render());
    assert!(clean.is_clean(), "{}", clean.render());
    let Compared::Control(_, host) = &clean else {
        panic!("the counter has no whole-capture comparison")
    };
    let model = host
        .device::<Boxed>()
        .and_then(|b| b.get::<counter::Counter>());
    assert_eq!(model.map(|c| c.total()), Some(5));
    let differs = run(&REAL.replace("= 05000000", "= 06000000"));
    assert!(!differs.is_clean(), "{}", differs.render());
    // A capture of nothing is refused by name, as the tool refuses it.
    let e = compare_spec(
        "empty.usbmon".as_ref(),
        b"# a capture of nothing\n",
        &spec(),
        &SpecOptions::default(),
        None,
    )
    .err()
    .unwrap();
    assert!(e.contains("empty.usbmon: nothing was compared"), "{e}");
}

#[test]
fn a_capture_of_what_the_model_does_compares_clean() {
    let (report, host) = compare(REAL);
    let s = report.summary();
    assert_eq!(s.total, 4, "{}", report.render());
    assert!(report.is_clean(), "{}", report.render());
    // The model found by format is the counter, and it counted what the capture added.
    let model = host
        .device::<Boxed>()
        .and_then(|b| b.get::<counter::Counter>());
    assert_eq!(model.map(|c| c.total()), Some(5));
}

#[test]
fn a_capture_the_model_disagrees_with_is_a_difference_named_by_request() {
    // The device read back 6: the model says 5.
    let (report, _) = compare(&REAL.replace("= 05000000", "= 06000000"));
    assert!(!report.is_clean(), "{}", report.render());
    let unexplained: Vec<_> = report.unexplained().collect();
    assert_eq!(unexplained.len(), 1, "{}", report.render());
    assert!(report.render().contains("05000000"), "{}", report.render());
}

/// Runs `cargo test -p calametra-tests --test own_model_scenario` as `calametra compare
/// --package calametra-tests --test own_model_scenario` does, and returns the JSON its
/// harness wrote.
fn compare_in_the_scenario_binary(spec: &std::path::Path) -> serde_json::Value {
    let dir = tempfile::tempdir().unwrap();
    let capture = dir.path().join("counter.usbmon");
    std::fs::write(&capture, REAL).unwrap();
    let out = dir.path().join("compare.json");
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
    let status = std::process::Command::new(cargo)
        .args([
            "test",
            "-q",
            "-p",
            "calametra-tests",
            "--test",
            "own_model_scenario",
        ])
        .args(["--", "--exact", "calametra::compare"])
        .env("CALAMETRA_COMPARE_OUT", &out)
        .env("CALAMETRA_COMPARE_CAPTURE", &capture)
        .env("CALAMETRA_COMPARE_SPEC", spec)
        .status()
        .unwrap();
    assert!(status.success(), "{status}");
    serde_json::from_str(&std::fs::read_to_string(&out).unwrap()).unwrap()
}

#[test]
fn calametra_compare_runs_in_the_test_binary_where_the_model_registers() {
    let spec =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/own_model/counter.json");
    let v = compare_in_the_scenario_binary(&spec);
    assert_eq!(v["compared"], 4, "{v}");
    assert_eq!(v["clean"], true, "{v}");
    assert!(v["text"].as_str().unwrap().contains("4 same"), "{v}");
    // A format that binary does not register: the error lists the counter's.
    let dir = tempfile::tempdir().unwrap();
    let other = dir.path().join("other.json");
    std::fs::write(
        &other,
        r#"{"format": "example.spec.nothing", "version": 1, "source": "a test"}"#,
    )
    .unwrap();
    let v = compare_in_the_scenario_binary(&other);
    let e = v["error"].as_str().unwrap();
    assert!(
        e.contains("`example.spec.nothing`") && e.contains("example.spec.counter"),
        "{e}"
    );
}
