//! The crates a user adopts carry what their role needs and nothing more (issue 19), measured
//! with `cargo tree --locked -e normal` on this workspace (`--locked`, not `--offline`: on a
//! fresh machine nothing has downloaded the hardware feature's crates yet, and cargo fetches
//! them as the lock file pins them):
//!
//! - a driver crate built on `calametra-usb` (the example drivers' libraries, the DFU updater
//!   and the Trigger 6 driver, with default features and on hardware, and `calametra-usb` itself
//!   with its `nusb` feature, and with `record` too) links none of serde, sha2, flate2 or
//!   tempfile, and no other Calametra crate: what ships in the production driver;
//! - the facade `calametra` with its default features (what a test crate's dev-dependency
//!   brings) links neither the device models, the QEMU bridge, the capture readers nor the
//!   command-line tool's crates (clap_complete, usb-device, png, flate2).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ has a parent")
        .to_path_buf()
}

/// The names of the crates `cargo tree` lists for `args` (normal dependencies only).
fn tree(args: &[&str]) -> BTreeSet<String> {
    tree_in(args, None)
}

/// [`tree`] with `CARGO_HOME` set to `home` when given.
fn tree_in(args: &[&str], home: Option<&Path>) -> BTreeSet<String> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut c = Command::new(cargo);
    if let Some(h) = home {
        c.env("CARGO_HOME", h);
    }
    let out = c
        .args(["tree", "--locked", "-e", "normal", "--prefix", "none"])
        .args(args)
        .current_dir(workspace())
        .output()
        .expect("run cargo tree");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "cargo tree {args:?} failed:\n{text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text.lines()
        .filter_map(|l| l.split_whitespace().next())
        .map(str::to_string)
        .collect()
}

const NOT_IN_A_DRIVER: &[&str] = &["serde", "serde_json", "sha2", "flate2", "tempfile"];

#[test]
fn a_driver_crate_on_calametra_usb_links_no_serde_sha2_flate2_or_tempfile() {
    for example in [
        "calametra-example-dfu-updater",
        "calametra-example-trigger6",
    ] {
        let driver = tree(&["-p", example]);
        assert_eq!(
            driver,
            BTreeSet::from([example.to_string(), "calametra-usb".to_string()]),
            "{example}'s library (default features) is the driver and calametra-usb alone"
        );
    }
    for (what, args) in [
        ("calametra-usb", vec!["-p", "calametra-usb"]),
        (
            "calametra-usb with nusb",
            vec!["-p", "calametra-usb", "--features", "nusb"],
        ),
        (
            "calametra-usb with the recorder",
            vec!["-p", "calametra-usb", "--features", "nusb,record"],
        ),
        (
            "the Trigger 6 driver on hardware",
            vec!["-p", "calametra-example-trigger6", "--features", "hardware"],
        ),
        (
            "the DFU updater on hardware",
            vec![
                "-p",
                "calametra-example-dfu-updater",
                "--features",
                "hardware",
            ],
        ),
    ] {
        let crates = tree(&args);
        for name in NOT_IN_A_DRIVER {
            assert!(!crates.contains(*name), "{what} links {name}: {crates:?}");
        }
        let ours: Vec<&String> = crates
            .iter()
            .filter(|c| c.starts_with("calametra-") && !c.starts_with("calametra-example"))
            .filter(|c| *c != "calametra-usb")
            .collect();
        assert!(ours.is_empty(), "{what} links {ours:?}");
    }
}

#[test]
fn the_facade_with_default_features_links_no_models_qemu_capture_or_cli() {
    let facade = tree(&["-p", "calametra"]);
    assert!(facade.contains("calametra-core") && facade.contains("calametra-macros"));
    for name in [
        "calametra-models",
        "calametra-qemu",
        "calametra-capture",
        "calametra-cli",
        "clap_complete",
        "usb-device",
        "png",
        "flate2",
    ] {
        assert!(
            !facade.contains(name),
            "calametra (default features) links {name}: {facade:?}"
        );
    }
}

/// On a fresh machine (issue 40) this file's checks failed: `cargo tree --offline` needed the
/// hardware feature's crates, which nothing had downloaded yet. With an empty `CARGO_HOME`
/// the hardware tree is read as on any machine (cargo fetches what the lock file pins).
#[test]
fn the_hardware_tree_is_read_with_an_empty_cargo_home() {
    let home = tempfile::tempdir().unwrap();
    let hw = tree_in(
        &["-p", "calametra-example-trigger6", "--features", "hardware"],
        Some(home.path()),
    );
    assert!(hw.contains("nusb"), "{hw:?}");
    for c in NOT_IN_A_DRIVER {
        assert!(!hw.contains(*c), "{c} in {hw:?}");
    }
}
