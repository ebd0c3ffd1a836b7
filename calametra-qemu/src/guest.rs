//! The guest a run boots: where `guest/build.sh` left it, what the probe adds to it, and the
//! console markers its `/init` prints.
//!
//! The cached initramfs is never rewritten: a run's probe files (the DFU image, a script, the
//! settings) go into a second, uncompressed cpio archive appended after it, which the kernel
//! unpacks over the first. Nothing here starts QEMU.

use std::io;
use std::path::{Path, PathBuf};

/// The kernel and initramfs `guest/build.sh` built.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GuestImage {
    /// The directory (`target/guest/<key>`).
    pub dir: PathBuf,
    /// `vmlinuz`.
    pub kernel: PathBuf,
    /// `initramfs.cpio.gz`.
    pub initramfs: PathBuf,
}

impl GuestImage {
    /// The guest in `dir`, when its files are there.
    pub fn at(dir: &Path) -> Result<GuestImage, String> {
        let g = GuestImage {
            dir: dir.to_path_buf(),
            kernel: dir.join("vmlinuz"),
            initramfs: dir.join("initramfs.cpio.gz"),
        };
        for f in [&g.kernel, &g.initramfs] {
            if !f.is_file() {
                return Err(format!(
                    "{} is missing; build the guest with guest/build.sh",
                    f.display()
                ));
            }
        }
        Ok(g)
    }

    /// Every path the guest's initramfs holds (relative to `/`, without a leading `./`):
    /// what a program may find there (its shared libraries, the tools). Read from the gzip'd
    /// newc archive `guest/build.sh` wrote; `Err` names the file and what is wrong with it.
    pub fn files(&self) -> Result<std::collections::BTreeSet<String>, String> {
        use std::io::Read;
        let f = std::fs::File::open(&self.initramfs)
            .map_err(|e| format!("{}: {e}", self.initramfs.display()))?;
        let mut bytes = Vec::new();
        flate2::read::MultiGzDecoder::new(f)
            .take(1 << 30)
            .read_to_end(&mut bytes)
            .map_err(|e| format!("{}: not a gzip'd archive: {e}", self.initramfs.display()))?;
        cpio_names(&bytes).map_err(|e| format!("{}: {e}", self.initramfs.display()))
    }

    /// The guest `guest/build.sh` last built under `target_dir` (`<target_dir>/guest/current`),
    /// or the one `CALAMETRA_GUEST_DIR` names.
    pub fn find(target_dir: &Path) -> Result<GuestImage, String> {
        match std::env::var_os("CALAMETRA_GUEST_DIR") {
            Some(d) => GuestImage::at(Path::new(&d)),
            None => GuestImage::at(&target_dir.join("guest").join("current")),
        }
    }
}

/// What the guest runs once the device is there (`calametra.probe=<name>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Probe {
    /// `lsusb -v -d vid:pid` after enumeration, with the raw descriptors the kernel read.
    Lsusb,
    /// dfu-util downloads `image`, uploads it back and compares.
    Dfu {
        /// The firmware image.
        image: Vec<u8>,
        /// The DFU alternate setting (`-a`).
        alt: u8,
    },
    /// An arbitrary `sh` script run as `sh /calametra/probe.sh`, with extra files (paths
    /// relative to `/`, for example `calametra/image.bin`). It starts as soon as `/init` has
    /// loaded the USB modules: wait for the device yourself (poll `/sys/bus/usb/devices`).
    Script {
        /// The script.
        script: String,
        /// Extra files for it.
        files: Vec<(String, Vec<u8>)>,
    },
}

impl Probe {
    /// A `script` probe with no extra files (what `calametra qemu --probe <script>` runs).
    pub fn script(script: impl Into<String>) -> Probe {
        Probe::Script {
            script: script.into(),
            files: Vec::new(),
        }
    }

    /// The name on the kernel command line.
    pub fn name(&self) -> &'static str {
        match self {
            Probe::Lsusb => "lsusb",
            Probe::Dfu { .. } => "dfu",
            Probe::Script { .. } => "script",
        }
    }

    /// The files this probe adds under `/calametra` in the guest.
    pub fn files(&self) -> Vec<(String, Vec<u8>)> {
        match self {
            Probe::Lsusb => Vec::new(),
            Probe::Dfu { image, alt } => vec![
                ("calametra/image.bin".into(), image.clone()),
                (
                    "calametra/env".into(),
                    format!("DFU_ALT={alt}\nDFU_SIZE={}\n", image.len()).into_bytes(),
                ),
            ],
            Probe::Script { script, files } => {
                let mut v = vec![(
                    "calametra/probe.sh".to_string(),
                    script.clone().into_bytes(),
                )];
                v.extend(files.iter().cloned());
                v
            }
        }
    }
}

/// Appends one newc entry.
fn entry(out: &mut Vec<u8>, ino: u32, name: &str, mode: u32, data: &[u8]) {
    let namesize = name.len() + 1;
    let fields = [
        ino,
        mode,
        0,
        0,
        if mode & 0o040000 != 0 { 2 } else { 1 },
        0,
        data.len() as u32,
        0,
        0,
        0,
        0,
        namesize as u32,
        0,
    ];
    out.extend_from_slice(b"070701");
    for f in fields {
        out.extend_from_slice(format!("{f:08x}").as_bytes());
    }
    out.extend_from_slice(name.as_bytes());
    out.push(0);
    while out.len() % 4 != 0 {
        out.push(0);
    }
    out.extend_from_slice(data);
    while out.len() % 4 != 0 {
        out.push(0);
    }
}

/// A cpio archive (newc, uncompressed) holding `files` (paths relative to `/`, regular files,
/// mode 0755 so scripts run) and their parent directories.
pub fn cpio(files: &[(String, Vec<u8>)]) -> Vec<u8> {
    let mut out = Vec::new();
    let mut dirs: Vec<String> = Vec::new();
    for (path, _) in files {
        let mut p = Path::new(path).parent();
        while let Some(d) = p {
            let s = d.to_string_lossy().into_owned();
            if !s.is_empty() && !dirs.contains(&s) {
                dirs.push(s);
            }
            p = d.parent();
        }
    }
    dirs.sort();
    let mut ino = 0x4000_0000u32;
    for d in &dirs {
        ino += 1;
        entry(&mut out, ino, d, 0o040755, &[]);
    }
    for (path, data) in files {
        ino += 1;
        entry(&mut out, ino, path, 0o100755, data);
    }
    entry(&mut out, 0, "TRAILER!!!", 0, &[]);
    out
}

/// The names in a newc cpio archive (up to its trailer), without a leading `./`; `Err` names
/// the byte offset of a header that is not newc or an entry cut short.
pub fn cpio_names(bytes: &[u8]) -> Result<std::collections::BTreeSet<String>, String> {
    let mut names = std::collections::BTreeSet::new();
    let mut at = 0usize;
    let pad = |n: usize| n.div_ceil(4) * 4;
    while at + 110 <= bytes.len() {
        let head = &bytes[at..at + 110];
        if &head[..6] != b"070701" && &head[..6] != b"070702" {
            return Err(format!("byte {at}: expected a newc cpio header (070701)"));
        }
        let field = |i: usize| {
            std::str::from_utf8(&head[6 + 8 * i..14 + 8 * i])
                .ok()
                .and_then(|h| usize::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("byte {at}: a cpio header field that is not hex"))
        };
        let (size, namesize) = (field(6)?, field(11)?);
        let name_end = at + 110 + namesize;
        let name = bytes
            .get(at + 110..name_end.saturating_sub(1))
            .ok_or_else(|| format!("byte {at}: a cpio entry's name is cut short"))?;
        let name = String::from_utf8_lossy(name);
        if name == "TRAILER!!!" {
            return Ok(names);
        }
        let name = name.strip_prefix("./").unwrap_or(&name);
        if !name.is_empty() && name != "." {
            names.insert(name.to_string());
        }
        at = pad(name_end)
            .checked_add(size)
            .map(pad)
            .filter(|&e| e <= bytes.len() + 3)
            .ok_or_else(|| format!("byte {at}: a cpio entry's data is cut short"))?;
    }
    Err(format!("byte {at}: the archive ends before its trailer"))
}

/// Writes the run's initrd: the cached initramfs, zero padding to a 4-byte boundary, then the
/// probe's archive (the kernel unpacks concatenated archives in order).
pub fn write_initrd(base: &Path, probe: &Probe, to: &Path) -> io::Result<()> {
    let mut bytes = std::fs::read(base)?;
    let files = probe.files();
    if !files.is_empty() {
        while bytes.len() % 4 != 0 {
            bytes.push(0);
        }
        bytes.extend_from_slice(&cpio(&files));
    }
    std::fs::write(to, bytes)
}

/// Console markers printed by the guest's `/init`.
pub mod marker {
    /// `/init` started.
    pub const INIT: &str = "CALAMETRA-INIT";
    /// `/init` is about to pause for a snapshot (`calametra.snapshot=pvpanic`).
    pub const SNAPSHOT: &str = "CALAMETRA-SNAPSHOT";
    /// `/init` goes on after the pause: the first line of a run restored from a snapshot.
    pub const RESTORED: &str = "CALAMETRA-RESTORED";
    /// `CALAMETRA-ENUMERATED <sysfs name> <vid>:<pid>`.
    pub const ENUMERATED: &str = "CALAMETRA-ENUMERATED";
    /// `CALAMETRA-PROBE-BEGIN name=<probe>`.
    pub const PROBE_BEGIN: &str = "CALAMETRA-PROBE-BEGIN";
    /// `CALAMETRA-PROBE-END rc=<n>`.
    pub const PROBE_END: &str = "CALAMETRA-PROBE-END";
}

/// The `rc` of a `CALAMETRA-PROBE-END rc=<n>` line (the marker may follow other text on the
/// line: firmware and kernel output do not always end in a newline).
pub fn probe_end_rc(line: &str) -> Option<i32> {
    let at = line.find(marker::PROBE_END)?;
    let rest = line[at + marker::PROBE_END.len()..].trim_start();
    let digits = rest.strip_prefix("rc=")?;
    let end = digits
        .find(|c: char| !c.is_ascii_digit() && c != '-')
        .unwrap_or(digits.len());
    digits[..end].parse().ok()
}

/// The bytes between the `CALAMETRA-DESCRIPTORS-BEGIN` and `-END` lines (`od -An -tx1`
/// output), or `None` when the console has no such block or it is not hex.
pub fn descriptor_dump(console: &[String]) -> Option<Vec<u8>> {
    let start = console
        .iter()
        .position(|l| l.trim() == "CALAMETRA-DESCRIPTORS-BEGIN")?;
    let mut out = Vec::new();
    for l in &console[start + 1..] {
        if l.trim() == "CALAMETRA-DESCRIPTORS-END" {
            return Some(out);
        }
        for w in l.split_whitespace() {
            out.push(u8::from_str_radix(w, 16).ok()?);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpio_entries_are_newc_and_aligned() {
        let a = cpio(&[("calametra/probe.sh".into(), b"echo hi\n".to_vec())]);
        assert!(a.starts_with(b"070701"));
        assert_eq!(a.len() % 4, 0);
        let text = String::from_utf8_lossy(&a);
        assert!(text.contains("calametra\0"));
        assert!(text.contains("calametra/probe.sh\0"));
        assert!(text.contains("echo hi\n"));
        assert!(text.contains("TRAILER!!!"));
        // The file entry: mode 0100755, size 8, name size 19.
        let at = text.find("calametra/probe.sh").unwrap() - 110;
        let h = &text[at..at + 110];
        assert_eq!(&h[14..22], "000081ed");
        assert_eq!(&h[54..62], "00000008");
        assert_eq!(&h[94..102], "00000013");
    }

    #[test]
    fn the_names_of_an_archive_are_read_back() {
        let a = cpio(&[
            ("calametra/probe.sh".into(), b"echo hi\n".to_vec()),
            ("lib/x86_64-linux-gnu/libusb-1.0.so.0".into(), vec![7; 5]),
        ]);
        let names: Vec<String> = cpio_names(&a).unwrap().into_iter().collect();
        assert_eq!(
            names,
            [
                "calametra",
                "calametra/probe.sh",
                "lib",
                "lib/x86_64-linux-gnu",
                "lib/x86_64-linux-gnu/libusb-1.0.so.0"
            ]
        );
        assert!(cpio_names(b"not an archive at all, but long enough to hold a header: 0123456789 0123456789 0123456789 0123456789").is_err());
        let mut cut = a.clone();
        cut.truncate(200);
        assert!(cpio_names(&cut).is_err());
    }

    #[test]
    fn markers_parse() {
        assert_eq!(probe_end_rc("CALAMETRA-PROBE-END rc=0"), Some(0));
        assert_eq!(probe_end_rc("CALAMETRA-PROBE-END rc=127\r"), Some(127));
        assert_eq!(probe_end_rc("CALAMETRA-PROBE-BEGIN name=x"), None);
        assert_eq!(probe_end_rc("Booting..CALAMETRA-PROBE-END rc=3 x"), Some(3));
        let c: Vec<String> = [
            "x",
            "CALAMETRA-DESCRIPTORS-BEGIN",
            " 12 01 00 02",
            " ff",
            "CALAMETRA-DESCRIPTORS-END",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        assert_eq!(descriptor_dump(&c), Some(vec![0x12, 1, 0, 2, 0xff]));
    }
}
