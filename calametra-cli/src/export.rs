//! Exports of a trace for people: a Chrome trace event file (opens in Perfetto) and a
//! self-contained HTML timeline (tasks and devices as lanes, faults and the failing invariant
//! marked; with `--frames`, every picture a device showed, embedded and linked from the event
//! that showed it). Both are built from records read back from a JSONL trace. [`pcapng`]
//! writes the run's transfers as a usbmon capture (`export --pcapng`).

mod command;
pub mod pcapng;

pub(crate) use command::{export_cmd, ExportArgs};

use calametra_core::picture::PictureEntry;
use calametra_core::trace::{push_json_str, Record};
use std::path::Path;

/// Records in order, read as often as an export needs (each export reads twice at most): a
/// trace file record by record, so a long run is never held whole, or records already in
/// memory.
pub trait Source {
    /// Hands every record to `f` in order; an error from `f` or from reading stops it.
    fn each(&self, f: &mut dyn FnMut(&Record) -> Result<(), String>) -> Result<(), String>;
}

impl Source for [Record] {
    fn each(&self, f: &mut dyn FnMut(&Record) -> Result<(), String>) -> Result<(), String> {
        self.iter().try_for_each(f)
    }
}

/// A JSONL trace file, read through the core's bounded reader each time.
pub struct TraceFile<'a>(pub &'a Path);

impl Source for TraceFile<'_> {
    fn each(&self, f: &mut dyn FnMut(&Record) -> Result<(), String>) -> Result<(), String> {
        calametra_core::trace::for_each_record(self.0, |r| f(&r)).map_err(|e| e.to_string())
    }
}

/// A picture the run showed, for the timeline: its index entry and its PNG (`None` when the
/// device could not render it).
pub struct Frame {
    /// What the test binary's index says of it.
    pub entry: PictureEntry,
    /// The PNG's bytes.
    pub png: Option<Vec<u8>>,
}

/// The record each frame is linked from: the last record of its device written before the
/// picture was seen (for a display, the flip that showed it), else the last record before it.
/// One pass over the records (the summary left out).
fn frame_anchors(
    src: &(impl Source + ?Sized),
    frames: &[Frame],
) -> Result<Vec<Option<u64>>, String> {
    // Per frame: (the last record of its device before it, the last record before it).
    let mut best: Vec<(Option<u64>, Option<u64>)> = vec![(None, None); frames.len()];
    src.each(&mut |r| {
        if r.kind == "summary" {
            return Ok(());
        }
        for (f, b) in frames.iter().zip(best.iter_mut()) {
            if r.seq < f.entry.records {
                b.1 = Some(r.seq);
                if r.actor == f.entry.device {
                    b.0 = Some(r.seq);
                }
            }
        }
        Ok(())
    })?;
    Ok(best.into_iter().map(|(d, any)| d.or(any)).collect())
}

/// Standard base64 (RFC 4648, with padding) of `bytes`: the PNGs a page embeds as data URIs.
pub fn base64(bytes: &[u8]) -> String {
    const ABC: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [
            chunk[0],
            *chunk.get(1).unwrap_or(&0),
            *chunk.get(2).unwrap_or(&0),
        ];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(ABC[(n >> (18 - 6 * i) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
}

/// The frames section of the page: a figure a frame, its picture embedded as a data URI (so the
/// page stays one file a CI artifact can hold), its caption escaped, a link back to its event.
fn frames_html(frames: &[Frame], anchors: &[Option<u64>]) -> String {
    if frames.is_empty() {
        return String::new();
    }
    let mut h = format!(
        "<h2>Frames ({})</h2>\n<p>Each picture a device showed during the run, as it was when it first appeared (replayed in the scenario's test binary); each is linked from the event that showed it.</p>\n",
        frames.len()
    );
    for (k, f) in frames.iter().enumerate() {
        let e = &f.entry;
        let back = match anchors.get(k).copied().flatten() {
            Some(seq) => format!(" <a href=\"#ev-{seq}\">event #{seq}</a>"),
            None => String::new(),
        };
        let caption = format!(
            "frame {}: {} {}: {} (step {}, t={} ns)",
            k + 1,
            e.device,
            e.name,
            if e.about.is_empty() {
                e.error.as_deref().unwrap_or("not rendered")
            } else {
                &e.about
            },
            e.step,
            e.t_ns
        );
        let img = match &f.png {
            Some(png) => format!(
                "<img src=\"data:image/png;base64,{}\" width=\"{}\" height=\"{}\" alt=\"{}\">",
                base64(png),
                e.width,
                e.height,
                html_text(&e.name)
            ),
            None => String::new(),
        };
        h.push_str(&format!(
            "<figure id=\"frame-{}\">{img}<figcaption>{}{back}</figcaption></figure>\n",
            k + 1,
            html_text(&caption)
        ));
    }
    h
}

/// Lanes in first-appearance order: one per actor.
fn lanes(src: &(impl Source + ?Sized)) -> Result<Vec<String>, String> {
    let mut out: Vec<String> = Vec::new();
    src.each(&mut |r| {
        if r.kind != "summary" && !out.contains(&r.actor) {
            out.push(r.actor.clone());
        }
        Ok(())
    })?;
    Ok(out)
}

/// A short label for a record: the site of a transfer, the task polled, the fault, the mark.
pub fn label(r: &Record) -> String {
    let s = |k: &str| r.data.get(k).and_then(|v| v.as_str()).map(str::to_string);
    match r.kind.as_str() {
        "transfer" => format!(
            "{} {}",
            s("site").unwrap_or_default(),
            s("status").unwrap_or_default()
        ),
        "fault" => format!(
            "{} at {}",
            s("fault").unwrap_or_default(),
            s("site").unwrap_or_default()
        ),
        "transition" => format!(
            "{}: {} -> {}",
            s("machine").unwrap_or_default(),
            s("from").unwrap_or_default(),
            s("to").unwrap_or_default()
        ),
        "mark" => s("mark").unwrap_or_default(),
        "external" => s("external").unwrap_or_else(|| r.actor.clone()),
        "invariant" => format!(
            "invariant {} broke: {}",
            s("invariant").unwrap_or_default(),
            s("message").unwrap_or_default()
        ),
        "end" => format!("end: {}", s("outcome").unwrap_or_default()),
        "task" if r.data.get("done").is_some() => "done".into(),
        "task" => "run".into(),
        other => other.to_string(),
    }
}

fn is_alarm(r: &Record) -> bool {
    matches!(r.kind.as_str(), "fault" | "invariant" | "model_gap")
        || (r.kind == "end" && r.data.get("outcome").and_then(|v| v.as_str()) != Some("pass"))
}

/// The Chrome trace event JSON of `records` (instant events on one thread per actor).
pub fn chrome(src: &(impl Source + ?Sized)) -> Result<String, String> {
    let lanes = lanes(src)?;
    let mut out = String::from("{\"displayTimeUnit\":\"ns\",\"traceEvents\":[");
    let mut first = true;
    let mut push = |out: &mut String, ev: String| {
        if !first {
            out.push(',');
        }
        first = false;
        out.push_str(&ev);
    };
    for (i, l) in lanes.iter().enumerate() {
        let mut name = String::new();
        push_json_str(&mut name, l);
        push(
            &mut out,
            format!("{{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":1,\"tid\":{i},\"args\":{{\"name\":{name}}}}}"),
        );
    }
    src.each(&mut |r| {
        if r.kind == "summary" {
            return Ok(());
        }
        let tid = lanes.iter().position(|l| *l == r.actor).unwrap_or(0);
        let mut name = String::new();
        push_json_str(&mut name, &label(r));
        let mut cat = String::new();
        push_json_str(&mut cat, &r.kind);
        let ts = r.t_ns as f64 / 1000.0;
        let cname = if is_alarm(r) {
            ",\"cname\":\"terrible\""
        } else {
            ""
        };
        push(
            &mut out,
            format!(
                "{{\"name\":{name},\"cat\":{cat},\"ph\":\"i\",\"s\":\"t\",\"ts\":{ts},\"pid\":1,\"tid\":{tid}{cname},\"args\":{{\"seq\":{},\"data\":{}}}}}",
                r.seq, r.data
            ),
        );
        Ok(())
    })?;
    out.push_str("]}\n");
    Ok(out)
}

/// A self-contained HTML timeline of `records`: no network, no external script. `frames` (the
/// pictures of the run, `export --frames`) are embedded and linked from their events.
pub fn html(src: &(impl Source + ?Sized), title: &str, frames: &[Frame]) -> Result<String, String> {
    let lanes = lanes(src)?;
    let anchors = frame_anchors(src, frames)?;
    let mut data = String::from("[");
    let mut first = true;
    src.each(&mut |r| {
        if r.kind == "summary" {
            return Ok(());
        }
        if !first {
            data.push(',');
        }
        first = false;
        let linked: Vec<String> = anchors
            .iter()
            .enumerate()
            .filter(|(_, a)| **a == Some(r.seq))
            .map(|(k, _)| (k + 1).to_string())
            .collect();
        let lane = lanes.iter().position(|l| *l == r.actor).unwrap_or(0);
        let mut lbl = String::new();
        push_json_str(&mut lbl, &label(r));
        let mut kind = String::new();
        push_json_str(&mut kind, &r.kind);
        data.push_str(&format!(
            "{{\"seq\":{},\"t\":{},\"lane\":{lane},\"kind\":{kind},\"label\":{lbl},\"alarm\":{},\"frames\":[{}]}}",
            r.seq,
            r.t_ns,
            is_alarm(r),
            linked.join(",")
        ));
        Ok(())
    })?;
    data.push(']');
    let mut lanes_json = String::from("[");
    for (i, l) in lanes.iter().enumerate() {
        if i > 0 {
            lanes_json.push(',');
        }
        push_json_str(&mut lanes_json, l);
    }
    lanes_json.push(']');
    Ok(fill(
        HTML_TEMPLATE,
        &[
            ("__TITLE__", html_text(title)),
            ("__LANES__", script_json(&lanes_json)),
            ("__DATA__", script_json(&data)),
            ("__FRAMES__", frames_html(frames, &anchors)),
        ],
    ))
}

/// Text made safe in HTML text and attribute values: `&`, `<`, `>`, `"` and `'` escaped.
pub fn html_text(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// JSON made safe inside a `<script>` element: every `<` and `>` (so no `</script>`, `<!--`
/// or `-->`) and U+2028/U+2029 become `\u` escapes. In JSON these can only appear inside
/// strings, where the escapes mean the same characters.
pub fn script_json(json: &str) -> String {
    let mut out = String::with_capacity(json.len());
    for c in json.chars() {
        match c {
            '<' => out.push_str("\\u003c"),
            '>' => out.push_str("\\u003e"),
            '\u{2028}' => out.push_str("\\u2028"),
            '\u{2029}' => out.push_str("\\u2029"),
            c => out.push(c),
        }
    }
    out
}

/// Fills `template`'s placeholders in one pass: the template is scanned once, left to right,
/// and what is inserted is never scanned again, so a value holding a placeholder's name (a
/// file named `__LANES__.jsonl`) stays text.
pub fn fill(template: &str, values: &[(&str, String)]) -> String {
    let mut out = String::with_capacity(template.len());
    let mut rest = template;
    'scan: while !rest.is_empty() {
        for (name, value) in values {
            if let Some(after) = rest.strip_prefix(name) {
                out.push_str(value);
                rest = after;
                continue 'scan;
            }
        }
        let c = rest.chars().next().expect("not empty");
        out.push(c);
        rest = &rest[c.len_utf8()..];
    }
    out
}

const HTML_TEMPLATE: &str = r#"<!doctype html>
<html><head><meta charset="utf-8"><title>Calametra: __TITLE__</title>
<style>
body{font:13px system-ui,sans-serif;margin:16px;color:#222}
h1{font-size:16px} .lane{fill:#f4f4f4} .lbl{font-size:12px;fill:#333}
.ev{fill:#3a78c2} .ev.alarm{fill:#d22} .ev.transfer{fill:#2a9d5c} .ev.transition{fill:#8a55c9}
table{border-collapse:collapse;margin-top:12px} td{padding:2px 8px;border-bottom:1px solid #eee;font-family:monospace}
tr.alarm td{color:#b00;font-weight:bold}
.ev.framed{stroke:#000;stroke-width:2} td a{margin-left:6px}
figure{margin:12px 0} figure img{max-width:100%;height:auto;border:1px solid #ccc}
</style></head>
<body data-rendered="no">
<h1>Calametra timeline: __TITLE__</h1>
<div id="chart"></div>
<table id="list"><tr><th>seq</th><th>t (ns)</th><th>lane</th><th>kind</th><th>what</th></tr></table>
<section id="frames">
__FRAMES__</section>
<script>
window.onerror = function (m) { document.body.setAttribute('data-error', String(m)); };
(function () {
  var lanes = __LANES__;
  var data = __DATA__;
  var W = 1100, laneH = 28, left = 150;
  var tmax = 1;
  data.forEach(function (d) { if (d.t > tmax) tmax = d.t; });
  var svgNS = 'http://www.w3.org/2000/svg';
  var svg = document.createElementNS(svgNS, 'svg');
  svg.setAttribute('width', W);
  svg.setAttribute('height', lanes.length * laneH + 20);
  lanes.forEach(function (l, i) {
    var r = document.createElementNS(svgNS, 'rect');
    r.setAttribute('class', 'lane'); r.setAttribute('x', 0); r.setAttribute('y', i * laneH);
    r.setAttribute('width', W); r.setAttribute('height', laneH - 4);
    svg.appendChild(r);
    var t = document.createElementNS(svgNS, 'text');
    t.setAttribute('class', 'lbl'); t.setAttribute('x', 4); t.setAttribute('y', i * laneH + 17);
    t.textContent = l;
    svg.appendChild(t);
  });
  data.forEach(function (d) {
    var c = document.createElementNS(svgNS, 'circle');
    var x = left + (W - left - 10) * d.t / tmax;
    c.setAttribute('cx', x); c.setAttribute('cy', d.lane * laneH + 12);
    c.setAttribute('r', d.alarm ? 7 : 4);
    c.setAttribute('class', 'ev ' + d.kind + (d.alarm ? ' alarm' : '') + (d.frames.length ? ' framed' : ''));
    var title = document.createElementNS(svgNS, 'title');
    title.textContent = '#' + d.seq + ' t=' + d.t + 'ns ' + d.kind + ': ' + d.label +
      (d.frames.length ? ' (frame ' + d.frames.join(', ') + ')' : '');
    c.appendChild(title);
    if (d.frames.length) {
      var a = document.createElementNS(svgNS, 'a');
      a.setAttribute('href', '#frame-' + d.frames[0]);
      a.appendChild(c);
      svg.appendChild(a);
    } else {
      svg.appendChild(c);
    }
  });
  document.getElementById('chart').appendChild(svg);
  var table = document.getElementById('list');
  data.forEach(function (d) {
    var tr = document.createElement('tr');
    tr.id = 'ev-' + d.seq;
    if (d.alarm) tr.className = 'alarm';
    var td;
    [d.seq, d.t, lanes[d.lane], d.kind, d.label].forEach(function (v) {
      td = document.createElement('td'); td.textContent = String(v); tr.appendChild(td);
    });
    d.frames.forEach(function (k) {
      var a = document.createElement('a');
      a.href = '#frame-' + k; a.className = 'frame-link'; a.textContent = 'frame ' + k;
      td.appendChild(a);
    });
    table.appendChild(tr);
  });
  document.body.setAttribute('data-rendered', 'ok');
  document.body.setAttribute('data-events', String(data.length));
  document.body.setAttribute('data-frame-links', String(document.querySelectorAll('a.frame-link').length));
})();
</script>
</body></html>
"#;

#[cfg(test)]
mod tests {
    use super::*;
    use calametra_core::trace::{parse_kept, Trace};

    fn sample() -> Vec<Record> {
        let mut t = Trace::new(true);
        t.emit(0, "task", "driver", true, |_| {});
        t.emit(125_000, "transfer", "driver", true, |d| {
            d.str("site", "ctrl.get_status#1").str("status", "ok");
        });
        t.emit(130_000, "fault", "bus", true, |d| {
            d.str("site", "ctrl.get_status#2").str("fault", "stall");
        });
        t.emit(140_000, "invariant", "x</script>", true, |d| {
            d.str("invariant", "x").str("message", "broke");
        });
        parse_kept(t.lines())
    }

    #[test]
    fn chrome_export_is_valid_json_with_lanes() {
        let v: serde_json::Value = serde_json::from_str(&chrome(&sample()[..]).unwrap()).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        assert_eq!(evs.iter().filter(|e| e["ph"] == "M").count(), 3);
        assert_eq!(evs.iter().filter(|e| e["cname"] == "terrible").count(), 2);
        assert_eq!(evs[4]["name"], "ctrl.get_status#1 ok");
    }

    #[test]
    fn base64_is_rfc_4648() {
        for (plain, coded) in [
            ("", ""),
            ("f", "Zg=="),
            ("fo", "Zm8="),
            ("foo", "Zm9v"),
            ("foob", "Zm9vYg=="),
            ("fooba", "Zm9vYmE="),
            ("foobar", "Zm9vYmFy"),
        ] {
            assert_eq!(base64(plain.as_bytes()), coded, "{plain}");
        }
        assert_eq!(base64(&[0xfb, 0xff, 0xbf]), "+/+/");
    }

    fn frame(device: &str, records: u64, png: Option<&[u8]>) -> Frame {
        Frame {
            entry: PictureEntry {
                file: png.map(|_| "01-x.png".to_string()),
                error: png.is_none().then(|| "<not rendered>".to_string()),
                device: device.to_string(),
                name: "out0-<b>".to_string(),
                step: 3,
                t_ns: 130_000,
                records,
                width: 2,
                height: 1,
                about: if png.is_some() {
                    "bars & <i>".into()
                } else {
                    String::new()
                },
                on_show: true,
            },
            png: png.map(<[u8]>::to_vec),
        }
    }

    #[test]
    fn frames_are_embedded_escaped_and_linked_from_their_devices_last_record() {
        // Seen after records 0..=2 were written: its device's (bus) last record is #2; a frame
        // of an actor with no record links the last record before it.
        let frames = [
            frame("bus", 3, Some(b"PNG")),
            frame("nobody", 2, None),
            frame("bus", 0, Some(b"x")),
        ];
        let h = html(&sample()[..], "t", &frames).unwrap();
        assert!(h.contains("\"seq\":2,") && h.contains("\"frames\":[1]"));
        assert!(h.contains("\"seq\":1,"));
        let one = h.split("{\"seq\":1,").nth(1).unwrap();
        assert!(
            one.split('}').next().unwrap().contains("\"frames\":[2]"),
            "{one}"
        );
        assert!(h.contains("<figure id=\"frame-1\"><img src=\"data:image/png;base64,UE5H\""));
        assert!(h.contains("bars &amp; &lt;i&gt;") && h.contains("out0-&lt;b&gt;"));
        assert!(
            !h.contains("<b>") && !h.contains("<i>"),
            "captions are escaped"
        );
        assert!(
            h.contains("&lt;not rendered&gt;"),
            "an error is shown, escaped"
        );
        assert!(h.contains("<a href=\"#ev-2\">event #2</a>"));
        let third = h.split("<figure id=\"frame-3\">").nth(1).unwrap();
        assert!(
            !third.split("</figure>").next().unwrap().contains("#ev-"),
            "nothing before it"
        );
        assert!(h.contains("Frames (3)"));
        assert!(
            !html(&sample()[..], "t", &[]).unwrap().contains("<figure"),
            "no frames, no section"
        );
    }

    #[test]
    fn html_embeds_escaped_data() {
        let h = html(&sample()[..], "t6 <stale>", &[]).unwrap();
        assert!(h.contains("t6 &lt;stale&gt;"));
        assert!(
            !h.contains("x</script>"),
            "a lane name cannot close the script"
        );
        assert!(h.contains("\"alarm\":true"));
    }
}
