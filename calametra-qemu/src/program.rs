//! A user's program in the guest: [`Program`] (the binary, its arguments and extra files) and
//! what it printed, [`ProgramOutput`].
//!
//! A program travels in the run's probe archive (never in the cached guest) as
//! `/calametra/bin/<name>`, with its files where they say (a path relative to `/`, or absolute);
//! a shell script ([`Program::probe`]) waits for the device the run serves to be configured,
//! runs it from `/calametra` with `LD_LIBRARY_PATH=/calametra/lib`, its standard output and
//! error each to a file, and then prints its exit status and both outputs line by line between
//! console markers. The console is the run's (hashed, in lockstep byte-exact), so the program's
//! output is part of the trace, and [`ProgramOutput::of`] reads it back. A program may be
//! static (a Rust program built with `+crt-static`, [`Program::from_package`]) or dynamically
//! linked against what the guest image holds (glibc, libusb-1.0, libudev):
//! [`Program::check_libraries`] says before the run which library the image lacks.
//!
//! Nothing here starts QEMU.

use crate::guest::{GuestImage, Probe};
use std::collections::BTreeSet;
use std::path::Path;

/// The console marker of the program's exit status: `CALAMETRA-PROGRAM-EXIT rc=<n>`.
pub const EXIT: &str = "CALAMETRA-PROGRAM-EXIT";
/// Each line the program wrote to standard output: `CALAMETRA-PROGRAM-STDOUT <line>`.
pub const STDOUT: &str = "CALAMETRA-PROGRAM-STDOUT";
/// Each line the program wrote to standard error: `CALAMETRA-PROGRAM-STDERR <line>`.
pub const STDERR: &str = "CALAMETRA-PROGRAM-STDERR";
/// After the last output line: `CALAMETRA-PROGRAM-END`.
pub const END: &str = "CALAMETRA-PROGRAM-END";

/// Where the dynamic loader looks for libraries in the guest (Debian's multiarch directories,
/// and `/calametra/lib`, which the script puts in `LD_LIBRARY_PATH`).
pub const LIBRARY_DIRS: [&str; 6] = [
    "calametra/lib",
    "lib/x86_64-linux-gnu",
    "usr/lib/x86_64-linux-gnu",
    "lib64",
    "lib",
    "usr/lib",
];

/// A program for the guest to run against the run's model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Program {
    /// Its file name in the guest (`/calametra/bin/<name>`).
    pub name: String,
    /// The executable's bytes (an ELF executable, or a script with a `#!` line).
    pub binary: Vec<u8>,
    /// Its arguments.
    pub args: Vec<String>,
    /// Extra files: the path in the guest (relative to `/`, or absolute) and the bytes.
    pub files: Vec<(String, Vec<u8>)>,
}

impl Program {
    /// `binary` named `name` (a file name: no `/`), with no arguments or files.
    pub fn new(name: &str, binary: Vec<u8>) -> Program {
        Program {
            name: name.replace('/', "_"),
            binary,
            args: Vec::new(),
            files: Vec::new(),
        }
    }

    /// The executable at `path` (named by its file name). `Err` names the file.
    pub fn from_file(path: &Path) -> Result<Program, String> {
        let binary = std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .ok_or_else(|| format!("{}: not a file name", path.display()))?;
        Ok(Program::new(&name, binary))
    }

    /// A binary target of a package, built static for the guest
    /// ([`crate::probes::StaticBinary`]: `cargo build --release -p <package> --bin <bin>
    /// --target x86_64-unknown-linux-gnu` with `-C target-feature=+crt-static`) in
    /// `<target_dir>/guest-programs`, run in `workspace` (the package's directory or its
    /// workspace's). Seconds when up to date.
    pub fn from_package(
        workspace: &Path,
        package: &str,
        bin: &str,
        target_dir: &Path,
    ) -> Result<Program, String> {
        let binary = crate::probes::StaticBinary {
            workspace,
            package,
            bin,
            features: "",
            target_dir: target_dir.join("guest-programs"),
            prebuilt_var: None,
        }
        .bytes()?;
        Ok(Program::new(bin, binary))
    }

    /// Adds an argument.
    pub fn arg(mut self, arg: impl Into<String>) -> Program {
        self.args.push(arg.into());
        self
    }

    /// Adds arguments.
    pub fn args<S: Into<String>>(mut self, args: impl IntoIterator<Item = S>) -> Program {
        self.args.extend(args.into_iter().map(Into::into));
        self
    }

    /// Adds a file at `dest` in the guest (absolute, or relative to `/`; a library for the
    /// program goes in `/calametra/lib`).
    pub fn file(mut self, dest: &str, bytes: Vec<u8>) -> Program {
        self.files.push((dest.to_string(), bytes));
        self
    }

    /// The probe that runs it: the script and the files (the binary at `calametra/bin/<name>`).
    pub fn probe(&self) -> Probe {
        let mut files = vec![(format!("calametra/bin/{}", self.name), self.binary.clone())];
        files.extend(
            self.files
                .iter()
                .map(|(d, b)| (d.trim_start_matches('/').to_string(), b.clone())),
        );
        Probe::Script {
            script: self.script(),
            files,
        }
    }

    /// The `sh` script that waits for the device, runs the program and prints what it did.
    pub fn script(&self) -> String {
        let enumerated = crate::guest::marker::ENUMERATED;
        let mut command = format!("/calametra/bin/{}", quote(&self.name));
        for a in &self.args {
            command.push(' ');
            command.push_str(&quote(a));
        }
        format!(
            r#"# Calametra: run a program against the device this run serves ($VID:$PID).
configured() {{
    for d in /sys/bus/usb/devices/*; do
        [ "$(cat $d/idVendor 2>/dev/null):$(cat $d/idProduct 2>/dev/null)" = "$VID:$PID" ] || continue
        [ -n "$(cat $d/bConfigurationValue 2>/dev/null)" ] || continue
        echo "${{d##*/}}"
        return 0
    done
    return 1
}}
while ! dev=$(configured); do sleep 0.2; done
echo "{enumerated} $dev $VID:$PID"
export LD_LIBRARY_PATH=/calametra/lib
cd /calametra
{command} > /tmp/calametra-program.out 2> /tmp/calametra-program.err
rc=$?
echo "{EXIT} rc=$rc"
while IFS= read -r l || [ -n "$l" ]; do printf '%s %s\n' "{STDOUT}" "$l"; done < /tmp/calametra-program.out
while IFS= read -r l || [ -n "$l" ]; do printf '%s %s\n' "{STDERR}" "$l"; done < /tmp/calametra-program.err
echo "{END}"
exit $rc
"#
        )
    }

    /// Checks that the guest can load the program: a static executable or a script always; a
    /// dynamically linked one needs its interpreter and every library it names (and those the
    /// libraries given as its files name) in `image` or among its files. `Err` names the
    /// program, each missing library and how to add one.
    pub fn check_libraries(&self, image: &GuestImage) -> Result<(), String> {
        if !crate::elf::is_elf(&self.binary) {
            return Ok(());
        }
        let linking =
            crate::elf::linking(&self.binary).map_err(|e| format!("{}: {e}", self.name))?;
        if linking.interpreter.is_none() && linking.needed.is_empty() {
            return Ok(());
        }
        let mut have: BTreeSet<String> = image.files()?;
        let mine: Vec<(String, &Vec<u8>)> = self
            .files
            .iter()
            .map(|(d, b)| (d.trim_start_matches('/').to_string(), b))
            .collect();
        have.extend(mine.iter().map(|(d, _)| d.clone()));
        let found = |lib: &str| {
            LIBRARY_DIRS
                .iter()
                .any(|d| have.contains(&format!("{d}/{lib}")))
        };
        let mut missing = Vec::new();
        if let Some(interp) = &linking.interpreter {
            if !have.contains(interp.trim_start_matches('/')) {
                missing.push(format!("its interpreter {interp}"));
            }
        }
        let mut wanted: Vec<(String, String)> = linking
            .needed
            .iter()
            .map(|l| (self.name.clone(), l.clone()))
            .collect();
        // Libraries shipped with the program are checked for what they need in turn.
        for (dest, bytes) in &mine {
            if LIBRARY_DIRS
                .iter()
                .any(|d| dest.starts_with(&format!("{d}/")))
            {
                if let Ok(l) = crate::elf::linking(bytes) {
                    wanted.extend(l.needed.into_iter().map(|n| (dest.clone(), n)));
                }
            }
        }
        for (by, lib) in wanted {
            if !found(&lib) {
                missing.push(format!("{lib} (needed by {by})"));
            }
        }
        if missing.is_empty() {
            return Ok(());
        }
        let libs: BTreeSet<&str> = have
            .iter()
            .filter(|p| p.contains(".so"))
            .filter_map(|p| p.rsplit('/').next())
            .collect();
        let libs: Vec<&str> = libs.into_iter().collect();
        Err(format!(
            "{}: the guest image ({}) lacks {}; it holds {}. Add a library as a file of the program in /calametra/lib (`--file /path/libx.so.1:/calametra/lib/libx.so.1`, Program::file), or build the program static",
            self.name,
            image.dir.display(),
            missing.join(", "),
            libs.join(", ")
        ))
    }
}

/// `s` in single quotes for `sh`.
fn quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// What a program run in the guest did, read from the console.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProgramOutput {
    /// Its exit status (128 + N for a signal N, 127 when it could not be started).
    pub status: i32,
    /// Its standard output, line by line.
    pub stdout: Vec<String>,
    /// Its standard error, line by line.
    pub stderr: Vec<String>,
    /// Whether the script printed everything (the end marker came): a run stopped on a broken
    /// invariant can end before.
    pub complete: bool,
}

impl ProgramOutput {
    /// The program's exit status and output in `console`, or `None` when it did not end.
    pub fn of(console: &[String]) -> Option<ProgramOutput> {
        let at = console.iter().position(|l| l.starts_with(EXIT))?;
        let status = console[at][EXIT.len()..]
            .trim()
            .strip_prefix("rc=")?
            .trim()
            .parse()
            .ok()?;
        let mut out = ProgramOutput {
            status,
            stdout: Vec::new(),
            stderr: Vec::new(),
            complete: false,
        };
        let line = |l: &str, marker: &str| {
            l.strip_prefix(marker)
                .map(|rest| rest.strip_prefix(' ').unwrap_or(rest).to_string())
        };
        for l in &console[at + 1..] {
            if let Some(t) = line(l, STDOUT) {
                out.stdout.push(t);
            } else if let Some(t) = line(l, STDERR) {
                out.stderr.push(t);
            } else if l.starts_with(END) {
                out.complete = true;
                break;
            }
        }
        Some(out)
    }

    /// What a failed run says of it: the status and the last `n` lines of standard error and
    /// of standard output (the whole of each is in the trace).
    pub fn describe(&self, n: usize) -> String {
        let mut s = format!("exited with status {}", self.status);
        for (what, lines) in [("stderr", &self.stderr), ("stdout", &self.stdout)] {
            if lines.is_empty() {
                continue;
            }
            let from = lines.len().saturating_sub(n);
            let cut = if from > 0 {
                format!(" (last {n} of {} lines)", lines.len())
            } else {
                String::new()
            };
            s.push_str(&format!("; {what}{cut}: {}", lines[from..].join(" | ")));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(v: &[&str]) -> Vec<String> {
        v.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn the_output_is_read_back_from_the_console() {
        let c = lines(&[
            "usb 1-1: new device",
            "CALAMETRA-PROGRAM-EXIT rc=3",
            "CALAMETRA-PROGRAM-STDOUT block 1 written",
            "[   12.0] usb 1-1: kernel line between",
            "CALAMETRA-PROGRAM-STDOUT ",
            "CALAMETRA-PROGRAM-STDERR error: it's 'quoted'",
            "CALAMETRA-PROGRAM-END",
            "CALAMETRA-PROBE-END rc=3",
        ]);
        let o = ProgramOutput::of(&c).unwrap();
        assert_eq!(o.status, 3);
        assert_eq!(o.stdout, ["block 1 written", ""]);
        assert_eq!(o.stderr, ["error: it's 'quoted'"]);
        assert!(o.complete);
        assert_eq!(
            o.describe(1),
            "exited with status 3; stderr: error: it's 'quoted'; stdout (last 1 of 2 lines): "
        );
        assert_eq!(ProgramOutput::of(&c[..1]), None);
        assert!(!ProgramOutput::of(&c[..3]).unwrap().complete);
    }

    /// A guest image whose initramfs holds `files` (and a kernel file).
    fn image(dir: &Path, files: &[&str]) -> GuestImage {
        use std::io::Write;
        let archive = crate::guest::cpio(
            &files
                .iter()
                .map(|f| (f.to_string(), Vec::new()))
                .collect::<Vec<_>>(),
        );
        let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        gz.write_all(&archive).unwrap();
        std::fs::write(dir.join("initramfs.cpio.gz"), gz.finish().unwrap()).unwrap();
        std::fs::write(dir.join("vmlinuz"), b"kernel").unwrap();
        GuestImage::at(dir).unwrap()
    }

    #[test]
    fn a_library_the_image_lacks_is_named_before_the_run() {
        let dir = tempfile::tempdir().unwrap();
        let img = image(
            dir.path(),
            &[
                "lib64/ld-linux-x86-64.so.2",
                "lib/x86_64-linux-gnu/libc.so.6",
            ],
        );
        let p = Program::new("dfu-status", crate::elf::dynamic_elf());
        let e = p.check_libraries(&img).unwrap_err();
        assert!(
            e.starts_with("dfu-status: the guest image")
                && e.contains("lacks libusb-1.0.so.0 (needed by dfu-status)")
                && e.contains("it holds ld-linux-x86-64.so.2, libc.so.6")
                && e.contains("/calametra/lib"),
            "{e}"
        );
        // Shipped with the program, the library is found (and what it needs is checked).
        let with = p.file(
            "/calametra/lib/libusb-1.0.so.0",
            b"not an ELF file".to_vec(),
        );
        assert_eq!(with.check_libraries(&img), Ok(()));
        // A static executable and a script need nothing of the image.
        let script = Program::new("s", b"#!/bin/sh\necho hi\n".to_vec());
        assert_eq!(script.check_libraries(&img), Ok(()));
        let empty = image(dir.path(), &[]);
        let e = Program::new("p", crate::elf::dynamic_elf())
            .check_libraries(&empty)
            .unwrap_err();
        assert!(
            e.contains("its interpreter /lib64/ld-linux-x86-64.so.2"),
            "{e}"
        );
    }

    #[test]
    fn arguments_are_quoted_and_files_land_under_root() {
        let p = Program::new("dfu/prog", b"#!/bin/sh\n".to_vec())
            .args(["-D", "it's here"])
            .file("/calametra/image.bin", vec![1, 2]);
        assert_eq!(p.name, "dfu_prog");
        let s = p.script();
        assert!(
            s.contains(r"/calametra/bin/'dfu_prog' '-D' 'it'\''s here' >"),
            "{s}"
        );
        let Probe::Script { files, .. } = p.probe() else {
            panic!("a script probe")
        };
        let names: Vec<&str> = files.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(names, ["calametra/bin/dfu_prog", "calametra/image.bin"]);
    }
}
