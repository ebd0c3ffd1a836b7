//! The pictures a replay trial wrote (`CALAMETRA_SCANOUT`, [`calametra_core::picture`]): read
//! back from the trial's directory, copied to where the user asked (`--scanout DIR`) or handed
//! to the HTML timeline (`export --frames`).
//!
//! The trial writes into a temporary directory of ours; its index and files are still read
//! within limits and checked (a file name with a separator is refused), and every output goes
//! through the tool's one output writer.

use crate::input::read_bounded;
use crate::output::{clean, fail, not_an_input, write_output, CliError};
use calametra::env_names::SCANOUT;
use calametra_core::input::MAX_DOCUMENT_BYTES;
use calametra_core::picture::{file_stem, PictureEntry, PictureIndex};
use std::path::{Path, PathBuf};

/// The largest PNG read back: 256 MiB (a 3840x2160 RGB picture is 24 MiB before compression).
const MAX_PNG_BYTES: u64 = 256 << 20;

/// The index the trial wrote in `dir`, or an error saying the test binary wrote none.
pub(crate) fn read_index(dir: &Path, file: &Path) -> Result<PictureIndex, CliError> {
    let path = dir.join(PictureIndex::FILE);
    if !path.exists() {
        return Err(fail(format!(
            "the test binary wrote no pictures to {SCANOUT}: its harness must watch the run's pictures (RunConfig::pictures) and write them with their index {} (replaying {})",
            PictureIndex::FILE,
            file.display()
        )));
    }
    let bytes = read_bounded(&path, MAX_DOCUMENT_BYTES, "picture index", None)?;
    let text = String::from_utf8(bytes)
        .map_err(|_| fail(format!("{}: not UTF-8 text", path.display())))?;
    PictureIndex::parse(&path, &text).map_err(fail)
}

/// The PNG bytes of `entry` in `dir` (`None` when the device could not render it).
pub(crate) fn png(dir: &Path, entry: &PictureEntry) -> Result<Option<Vec<u8>>, CliError> {
    match &entry.file {
        None => Ok(None),
        Some(f) => read_bounded(&dir.join(f), MAX_PNG_BYTES, "PNG", None).map(Some),
    }
}

/// Copies the pictures on show (at the stop, or at the end of the run) from the trial's `dir`
/// into `out` (created), as `<device>-<picture>.png`, through the output writer; `inputs` are
/// never overwritten. Prints a line a picture and returns how many were written.
pub(crate) fn copy_on_show(
    dir: &Path,
    out: &Path,
    file: &Path,
    when: &str,
) -> Result<usize, CliError> {
    let index = read_index(dir, file)?;
    let on_show: Vec<&PictureEntry> = index.pictures.iter().filter(|p| p.on_show).collect();
    if on_show.is_empty() {
        println!("scanout {when}: no device shows a picture");
        return Ok(0);
    }
    std::fs::create_dir_all(out).map_err(|e| {
        fail(format!(
            "{}: cannot create the directory: {e}",
            out.display()
        ))
    })?;
    let mut used: Vec<String> = Vec::new();
    let mut written = 0;
    for entry in on_show {
        let Some(bytes) = png(dir, entry)? else {
            println!(
                "scanout {when}: {} of {}: {}",
                entry.name,
                entry.device,
                entry.error.as_deref().unwrap_or("not rendered")
            );
            continue;
        };
        let mut name = format!(
            "{}.png",
            file_stem(&format!("{}-{}", entry.device, entry.name))
        );
        if used.contains(&name) {
            name = entry.file.clone().unwrap_or(name);
        }
        let path: PathBuf = out.join(&name);
        not_an_input(&path, &[file])?;
        write_output(&path, &bytes)?;
        println!(
            "{}",
            clean(&format!(
                "scanout {when}: wrote {} ({}, from step {})",
                path.display(),
                entry.about,
                entry.step
            ))
        );
        used.push(name);
        written += 1;
    }
    Ok(written)
}
