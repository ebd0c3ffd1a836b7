//! Guest probes the project's guest scenarios and tests share.

/// The start of a probe script that needs the device `vid_pid` (`"0711:5601"`): waits until the
/// kernel has configured it, sets `$dev` to its sysfs name and prints
/// `CALAMETRA-ENUMERATED <dev> <vid:pid>` ([`crate::guest::marker::ENUMERATED`]). A script is
/// this followed by what it checks (`format!("{}{CHECKS}", wait_configured("0711:5601"))`).
pub fn wait_configured(vid_pid: &str) -> String {
    let enumerated = crate::guest::marker::ENUMERATED;
    format!(
        r#"
find_configured() {{
    for d in /sys/bus/usb/devices/*; do
        [ "$(cat $d/idVendor 2>/dev/null):$(cat $d/idProduct 2>/dev/null)" = {vid_pid} ] || continue
        [ -n "$(cat $d/bConfigurationValue 2>/dev/null)" ] || continue
        echo "${{d##*/}}"
        return 0
    done
    return 1
}}
while ! dev=$(find_configured); do sleep 0.2; done
echo "{enumerated} $dev {vid_pid}"
"#
    )
}

/// Waits for `dev` (`vid:pid`), prints `lsusb -v` between markers, detaches it to DFU mode with
/// `dfu-util -e` (a bitWillDetach device re-enumerates by itself), waits for the DFU-mode
/// interface and downloads `/calametra/image.bin`. Its exit status is dfu-util's.
pub fn dfu_detach_and_download(dev: &str) -> String {
    format!(
        r#"
dev={dev}
# The sysfs name of the configured device whose first interface has DFU protocol $1.
find() {{
    for d in /sys/bus/usb/devices/*; do
        [ -f "$d/idVendor" ] || continue
        [ "$(cat $d/idVendor):$(cat $d/idProduct)" = "$dev" ] || continue
        [ -n "$(cat $d/bConfigurationValue 2>/dev/null)" ] || continue
        [ "$(cat $d:1.0/bInterfaceProtocol 2>/dev/null)" = "$1" ] || continue
        echo "${{d##*/}}"
        return 0
    done
    return 1
}}
wait_mode() {{ while ! find "$1" >/dev/null; do sleep 0.2; done; }}
wait_mode 01
echo "CALAMETRA-ENUMERATED $(find 01) $dev"
echo "CALAMETRA-LSUSB-BEGIN"
lsusb -v -d $dev
echo "CALAMETRA-LSUSB-END rc=$?"
dfu-util -d $dev -e
wait_mode 02
echo "CALAMETRA-DFU-MODE $(find 02)"
echo "CALAMETRA-DFU-DOWNLOAD-BEGIN"
dfu-util -d $dev -a 0 -D /calametra/image.bin
rc=$?
echo "CALAMETRA-DFU-DOWNLOAD-END rc=$rc"
exit $rc
"#
    )
}

/// `len` bytes of a fixed xorshift pattern: the body of the images the DFU guest runs
/// download (seal it with `calametra_models::dfu::seal_image` for a model that checks images).
pub fn pattern(len: usize) -> Vec<u8> {
    let mut x = 0x2545_f491u32;
    (0..len)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 17;
            x ^= x << 5;
            x as u8
        })
        .collect()
}

/// A static Linux binary of a workspace package, built for the guest (which has no Rust runtime
/// libraries): `cargo build --release -p <package> --bin <bin> --target
/// x86_64-unknown-linux-gnu` with `-C target-feature=+crt-static`, in its own target
/// directory so the flags touch no other build (seconds when up to date, minutes the first
/// time). It travels in a run's probe archive (`Probe::Script`'s files), never in the cached
/// guest.
pub struct StaticBinary<'a> {
    /// The workspace (or package) directory cargo runs in.
    pub workspace: &'a std::path::Path,
    /// The package (`-p`).
    pub package: &'a str,
    /// The binary (`--bin`).
    pub bin: &'a str,
    /// Features to enable (`--features`), comma-separated; empty for none.
    pub features: &'a str,
    /// The target directory of this build (`<target>/<bin>` is a good choice).
    pub target_dir: std::path::PathBuf,
    /// An environment variable that, when set, names a prebuilt binary to use instead
    /// (`CALAMETRA_T6_DRIVE`); it must be static too.
    pub prebuilt_var: Option<&'a str>,
}

impl StaticBinary<'_> {
    /// Builds (or takes the prebuilt binary) and returns its bytes, checked to be a static
    /// 64-bit ELF executable. Errors name the command or the file and what was expected.
    pub fn bytes(&self) -> Result<Vec<u8>, String> {
        let path = match self.prebuilt_var.and_then(std::env::var_os) {
            Some(p) => std::path::PathBuf::from(p),
            None => self.build()?,
        };
        let bytes = std::fs::read(&path).map_err(|e| format!("{}: {e}", path.display()))?;
        match is_static_elf(&bytes) {
            Ok(true) => Ok(bytes),
            Ok(false) => Err(format!(
                "{}: a dynamically linked executable; the guest needs a static one \
                 (-C target-feature=+crt-static)",
                path.display()
            )),
            Err(e) => Err(format!(
                "{}: {e}; expected a static executable",
                path.display()
            )),
        }
    }

    fn build(&self) -> Result<std::path::PathBuf, String> {
        let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".into());
        let mut cmd = std::process::Command::new(&cargo);
        cmd.current_dir(self.workspace)
            .args(["build", "--release", "-p", self.package, "--bin", self.bin])
            .args(["--target", "x86_64-unknown-linux-gnu"])
            .env("CARGO_TARGET_DIR", &self.target_dir)
            .env("RUSTFLAGS", "-C target-feature=+crt-static")
            .env_remove("CARGO_ENCODED_RUSTFLAGS");
        if !self.features.is_empty() {
            cmd.args(["--features", self.features]);
        }
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run {cargo}: {e}"))?;
        if !status.success() {
            return Err(format!(
                "building the static {} failed ({status}): {cargo} build --release -p {} --bin {} \
                 --target x86_64-unknown-linux-gnu with RUSTFLAGS=\"-C target-feature=+crt-static\" \
                 in {}",
                self.bin,
                self.package,
                self.bin,
                self.workspace.display()
            ));
        }
        Ok(self
            .target_dir
            .join("x86_64-unknown-linux-gnu/release")
            .join(self.bin))
    }
}

/// Whether a 64-bit ELF file has no program interpreter (`PT_INTERP`): a static executable.
/// `Err` when the bytes are not a 64-bit little-endian ELF file or its program headers are cut
/// ([`crate::elf::linking`]).
pub fn is_static_elf(bytes: &[u8]) -> Result<bool, String> {
    crate::elf::linking(bytes).map(|l| l.interpreter.is_none())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A 64-bit ELF header with `count` program headers of 56 bytes at 64, types `types`.
    fn elf(types: &[u32]) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56 * types.len()];
        b[..6].copy_from_slice(b"\x7fELF\x02\x01");
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes());
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes());
        b[0x38..0x3a].copy_from_slice(&(types.len() as u16).to_le_bytes());
        for (i, t) in types.iter().enumerate() {
            b[64 + 56 * i..68 + 56 * i].copy_from_slice(&t.to_le_bytes());
        }
        b
    }

    #[test]
    fn a_program_interpreter_means_dynamic() {
        assert_eq!(is_static_elf(&elf(&[6, 1, 1])), Ok(true));
        assert_eq!(is_static_elf(&elf(&[6, 3, 1])), Ok(false));
        assert_eq!(is_static_elf(&elf(&[])), Ok(true));
    }

    #[test]
    fn what_is_not_a_whole_elf_file_is_an_error() {
        assert!(is_static_elf(b"#!/bin/sh\n").is_err());
        let mut cut = elf(&[1, 3]);
        cut.truncate(64 + 56);
        assert!(is_static_elf(&cut).is_err(), "the second header is cut off");
        let mut far = elf(&[1]);
        far[0x20..0x28].copy_from_slice(&u64::MAX.to_le_bytes());
        assert!(is_static_elf(&far).is_err());
        let mut be = elf(&[1]);
        be[5] = 2;
        assert!(is_static_elf(&be).is_err(), "big-endian");
    }

    #[test]
    fn a_prebuilt_binary_that_is_not_static_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("drive");
        std::fs::write(&path, elf(&[6, 3])).unwrap();
        let var = "CALAMETRA_PROBES_TEST_PREBUILT";
        std::env::set_var(var, &path);
        let b = StaticBinary {
            workspace: dir.path(),
            package: "nothing",
            bin: "drive",
            features: "",
            target_dir: dir.path().join("t"),
            prebuilt_var: Some(var),
        };
        let err = b.bytes().unwrap_err();
        assert!(err.contains("drive") && err.contains("static"), "{err}");
        std::fs::write(&path, elf(&[6, 1])).unwrap();
        assert_eq!(b.bytes().unwrap(), elf(&[6, 1]));
        std::env::remove_var(var);
    }
}
