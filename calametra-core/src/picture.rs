//! Pictures a device shows (a display's scanout), watched during a run on request.
//!
//! A model that shows something offers it through two defaulted
//! [`Device`](crate::device::Device) methods:
//! [`Device::pictures`](crate::device::Device::pictures) names what it shows now (cheap: called
//! at every scheduling point of a run that watches),
//! [`Device::picture`](crate::device::Device::picture) renders one of those names as a PNG
//! (called once per
//! name, when it first appears). A name is the model's promise about content: a new frame shown
//! gets a new name. The default is no pictures, so only models with a display implement them.
//!
//! A run with [`RunConfig::pictures`](crate::sim::RunConfig::pictures) looks at every device's
//! names at each scheduling point and at the end, renders each name that appeared, and leaves
//! the log in [`RunResult::pictures`](crate::sim::RunResult::pictures): what appeared, when (step, virtual time, the trace records
//! written before it), and what was on show when the run ended or stopped
//! ([`RunConfig::stop_at`](crate::sim::RunConfig::stop_at)). Watching writes no trace record
//! and draws from no stream, so a run's trace and hash are the same with it or without it.
//! Nothing here reads the wall clock, and the PNG bytes come from the model: the core encodes
//! no image. This module owns the picture types, the log of a watching run and the index of a
//! directory of pictures; it asks devices through the functions `sim` passes it, so it does
//! not depend on the device module.

use serde::{Deserialize, Serialize};

/// A picture a device renders: a PNG a person can open, and what it shows.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Picture {
    /// Pixels per line.
    pub width: u32,
    /// Lines.
    pub height: u32,
    /// The PNG file's bytes.
    pub png: Vec<u8>,
    /// What it is, for people (`output 1, RGB32, fence 2, pixels sha256:...`).
    pub about: String,
}

/// One picture that appeared during a run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Shown {
    /// The device's index on the bus (attach order).
    pub device: usize,
    /// The device's name (the `actor` of its trace records).
    pub device_name: String,
    /// The picture's name, as [`Device::pictures`](crate::device::Device::pictures) gave it.
    pub name: String,
    /// The scheduling point at which it was first seen (what `CALAMETRA_STOP_AT` takes).
    pub step: u64,
    /// Virtual time then, in ns.
    pub t_ns: u64,
    /// Deterministic trace records written before it was seen: it appeared during the record
    /// with `seq` one less (or earlier), never after.
    pub records: u64,
    /// The picture, or why the device could not render the name it gave.
    pub picture: Result<Picture, String>,
}

/// What a watching run saw: every picture that appeared, in order, and those on show at its end
/// (or at the step it stopped at).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct PictureLog {
    /// Pictures in the order they appeared.
    pub shown: Vec<Shown>,
    /// Indexes into `shown` of the pictures on show when the run ended or stopped, by device
    /// and then in the device's order.
    pub at_end: Vec<usize>,
    /// Each device's names at the last look.
    current: Vec<Vec<String>>,
}

impl PictureLog {
    /// Looks at every device's pictures now (`names` of a device: what it shows now; `render`:
    /// one of those names as a picture), rendering each name not on show at the last look.
    pub(crate) fn look<'a, D: ?Sized + 'a>(
        &mut self,
        devices: impl Iterator<Item = (&'a str, &'a D)>,
        names: impl Fn(&D) -> Vec<String>,
        render: impl Fn(&D, &str) -> Option<Picture>,
        (step, t_ns, records): (u64, u64, u64),
    ) {
        for (i, (device_name, dev)) in devices.enumerate() {
            let names = names(dev);
            if self.current.len() <= i {
                self.current.resize(i + 1, Vec::new());
            }
            for name in &names {
                if self.current[i].contains(name) {
                    continue;
                }
                let picture = render(dev, name).ok_or_else(|| {
                    format!("the device named picture `{name}` but did not render it")
                });
                self.shown.push(Shown {
                    device: i,
                    device_name: device_name.to_string(),
                    name: name.clone(),
                    step,
                    t_ns,
                    records,
                    picture,
                });
            }
            self.current[i] = names;
        }
        self.at_end = self
            .current
            .iter()
            .enumerate()
            .flat_map(|(i, names)| {
                let shown = &self.shown;
                names
                    .iter()
                    .filter_map(move |n| shown.iter().rposition(|s| s.device == i && s.name == *n))
            })
            .collect();
    }
}

/// The index of a directory of pictures a test binary wrote (`CALAMETRA_SCANOUT`):
/// `pictures.json` beside the PNG files, what `calametra` reads back.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PictureIndex {
    /// `calametra.pictures`.
    pub format: String,
    /// 1.
    pub version: u32,
    /// The pictures, in the order they appeared.
    pub pictures: Vec<PictureEntry>,
}

/// One picture of a [`PictureIndex`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PictureEntry {
    /// The PNG's file name in the directory (no separator), or `None` when it was not rendered.
    pub file: Option<String>,
    /// Why it was not rendered.
    pub error: Option<String>,
    /// The device's name (the actor of its trace records).
    pub device: String,
    /// The picture's name ([`Device::pictures`](crate::device::Device::pictures)).
    pub name: String,
    /// [`Shown::step`].
    pub step: u64,
    /// [`Shown::t_ns`].
    pub t_ns: u64,
    /// [`Shown::records`].
    pub records: u64,
    /// Pixels per line (0 when not rendered).
    pub width: u32,
    /// Lines (0 when not rendered).
    pub height: u32,
    /// [`Picture::about`].
    pub about: String,
    /// Whether it was on show when the run ended or stopped.
    pub on_show: bool,
}

impl PictureIndex {
    /// The index's file name in its directory.
    pub const FILE: &'static str = "pictures.json";

    /// The PNG file name of the `n`th picture (from 1) of `device` named `name`:
    /// `01-trigger6-out0-flip1-fence1-rgb24-1920x1080.png`.
    pub fn file_name(n: usize, device: &str, name: &str) -> String {
        format!("{}.png", file_stem(&format!("{n:02}-{device}-{name}")))
    }

    /// The index as JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).unwrap_or_default() + "\n"
    }

    /// Reads an index; the error names `path` and what is wrong (a file name with a
    /// separator or `..` included: it must name a file in the index's own directory).
    pub fn parse(path: &std::path::Path, text: &str) -> Result<PictureIndex, String> {
        let at = |e: String| format!("{}: {e}", path.display());
        let ix: PictureIndex = serde_json::from_str(text).map_err(|e| at(e.to_string()))?;
        if ix.format != "calametra.pictures" || ix.version != 1 {
            return Err(at(format!(
                "field `format`/`version`: `{}` version {}, expected calametra.pictures version 1",
                ix.format, ix.version
            )));
        }
        for (i, p) in ix.pictures.iter().enumerate() {
            if let Some(f) = &p.file {
                if f.strip_suffix(".png")
                    .is_none_or(|stem| file_stem(stem) != stem)
                {
                    return Err(at(format!(
                        "field `pictures[{i}].file`: `{f}` is not a PNG file name in this directory"
                    )));
                }
            }
        }
        Ok(ix)
    }
}

/// `name` made safe as one file name: ASCII letters, digits, `.`, `_` and `-` kept, anything
/// else `_`, never empty, never `.` or `..`, at most 96 bytes (room for `.png`).
pub fn file_stem(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(96)
        .collect();
    if s.is_empty() || s.chars().all(|c| c == '.') {
        s = format!("_{s}");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::device::{DevCtx, Device, Reply};
    use calametra_usb::Setup;
    use std::cell::Cell;

    /// Shows `frame` as `f<frame>` when it is not 0.
    struct Screen {
        frame: Cell<u32>,
        rendered: Cell<u32>,
    }

    impl Device for Screen {
        fn control(&mut self, _: &mut DevCtx<'_>, _: &Setup, _: &[u8]) -> Reply {
            Reply::Stall
        }
        fn pictures(&self) -> Vec<String> {
            match self.frame.get() {
                0 => Vec::new(),
                f => vec![format!("f{f}")],
            }
        }
        fn picture(&self, name: &str) -> Option<Picture> {
            self.rendered.set(self.rendered.get() + 1);
            (name != "f3").then(|| Picture {
                width: 1,
                height: 1,
                png: name.as_bytes().to_vec(),
                about: name.to_string(),
            })
        }
    }

    #[test]
    fn each_name_is_rendered_once_when_it_appears_and_the_end_is_what_is_on_show() {
        let s = Screen {
            frame: Cell::new(0),
            rendered: Cell::new(0),
        };
        let mut log = PictureLog::default();
        let look = |log: &mut PictureLog, step: u64| {
            log.look(
                std::iter::once(("screen", &s as &dyn Device)),
                |d| d.pictures(),
                |d, n| d.picture(n),
                (step, step * 10, step),
            );
        };
        look(&mut log, 1);
        assert!(log.shown.is_empty() && log.at_end.is_empty());
        s.frame.set(1);
        look(&mut log, 2);
        look(&mut log, 3);
        s.frame.set(3);
        look(&mut log, 4);
        s.frame.set(1);
        look(&mut log, 5);
        assert_eq!(s.rendered.get(), 3, "a name on show is not rendered again");
        let names: Vec<(&str, u64)> = log
            .shown
            .iter()
            .map(|x| (x.name.as_str(), x.step))
            .collect();
        assert_eq!(names, [("f1", 2), ("f3", 4), ("f1", 5)]);
        assert!(log.shown[1].picture.as_ref().unwrap_err().contains("`f3`"));
        assert_eq!(log.at_end, [2], "the latest appearance of what is on show");
        s.frame.set(0);
        look(&mut log, 6);
        assert!(log.at_end.is_empty());
    }

    #[test]
    fn an_index_reads_back_and_a_file_outside_its_directory_is_refused() {
        let p = std::path::Path::new("pics/pictures.json");
        let entry = PictureEntry {
            file: Some(PictureIndex::file_name(1, "trigger6", "out0-flip1")),
            error: None,
            device: "trigger6".into(),
            name: "out0-flip1".into(),
            step: 4,
            t_ns: 5,
            records: 6,
            width: 2,
            height: 1,
            about: "bars".into(),
            on_show: true,
        };
        let ix = PictureIndex {
            format: "calametra.pictures".into(),
            version: 1,
            pictures: vec![entry.clone()],
        };
        assert_eq!(PictureIndex::parse(p, &ix.to_json()).unwrap(), ix);
        assert_eq!(entry.file.as_deref(), Some("01-trigger6-out0-flip1.png"));
        for bad in ["../x.png", "a/b.png", "x.txt", ".png/x.png"] {
            let mut b = ix.clone();
            b.pictures[0].file = Some(bad.into());
            let e = PictureIndex::parse(p, &b.to_json()).unwrap_err();
            assert!(
                e.starts_with("pics/pictures.json: field `pictures[0].file`"),
                "{bad}: {e}"
            );
        }
        let mut b = ix.clone();
        b.version = 2;
        assert!(PictureIndex::parse(p, &b.to_json())
            .unwrap_err()
            .contains("expected calametra.pictures version 1"));
        assert!(PictureIndex::parse(p, "{")
            .unwrap_err()
            .starts_with("pics/pictures.json: "));
    }

    #[test]
    fn file_stems_are_one_safe_name() {
        assert_eq!(
            file_stem("out0-flip1-fence1-rgb24-1920x1080"),
            "out0-flip1-fence1-rgb24-1920x1080"
        );
        assert_eq!(file_stem("../x/y z"), ".._x_y_z");
        assert_eq!(file_stem(".."), "_..");
        assert_eq!(file_stem(""), "_");
        assert_eq!(file_stem(&"a".repeat(300)).len(), 96);
    }
}
