//! Exports of a trace for people: a Chrome trace event file (opens in Perfetto) and a
//! self-contained HTML timeline (tasks and devices as lanes, faults and the failing invariant
//! marked). Both are built from records read back from a JSONL trace.

use calametra_core::trace::{push_json_str, Record};

/// Lanes in first-appearance order: one per actor.
fn lanes(records: &[Record]) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for r in records {
        if r.kind != "summary" && !out.contains(&r.actor) {
            out.push(r.actor.clone());
        }
    }
    out
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
pub fn chrome(records: &[Record]) -> String {
    let lanes = lanes(records);
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
    for r in records.iter().filter(|r| r.kind != "summary") {
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
    }
    out.push_str("]}\n");
    out
}

/// A self-contained HTML timeline of `records`: no network, no external script.
pub fn html(records: &[Record], title: &str) -> String {
    let lanes = lanes(records);
    let mut data = String::from("[");
    for (i, r) in records.iter().filter(|r| r.kind != "summary").enumerate() {
        if i > 0 {
            data.push(',');
        }
        let lane = lanes.iter().position(|l| *l == r.actor).unwrap_or(0);
        let mut lbl = String::new();
        push_json_str(&mut lbl, &label(r));
        let mut kind = String::new();
        push_json_str(&mut kind, &r.kind);
        data.push_str(&format!(
            "{{\"seq\":{},\"t\":{},\"lane\":{lane},\"kind\":{kind},\"label\":{lbl},\"alarm\":{}}}",
            r.seq,
            r.t_ns,
            is_alarm(r)
        ));
    }
    data.push(']');
    let mut lanes_json = String::from("[");
    for (i, l) in lanes.iter().enumerate() {
        if i > 0 {
            lanes_json.push(',');
        }
        push_json_str(&mut lanes_json, l);
    }
    lanes_json.push(']');
    fill(
        HTML_TEMPLATE,
        &[
            ("__TITLE__", html_text(title)),
            ("__LANES__", script_json(&lanes_json)),
            ("__DATA__", script_json(&data)),
        ],
    )
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
</style></head>
<body data-rendered="no">
<h1>Calametra timeline: __TITLE__</h1>
<div id="chart"></div>
<table id="list"><tr><th>seq</th><th>t (ns)</th><th>lane</th><th>kind</th><th>what</th></tr></table>
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
    c.setAttribute('class', 'ev ' + d.kind + (d.alarm ? ' alarm' : ''));
    var title = document.createElementNS(svgNS, 'title');
    title.textContent = '#' + d.seq + ' t=' + d.t + 'ns ' + d.kind + ': ' + d.label;
    c.appendChild(title);
    svg.appendChild(c);
  });
  document.getElementById('chart').appendChild(svg);
  var table = document.getElementById('list');
  data.forEach(function (d) {
    var tr = document.createElement('tr');
    if (d.alarm) tr.className = 'alarm';
    [d.seq, d.t, lanes[d.lane], d.kind, d.label].forEach(function (v) {
      var td = document.createElement('td'); td.textContent = String(v); tr.appendChild(td);
    });
    table.appendChild(tr);
  });
  document.body.setAttribute('data-rendered', 'ok');
  document.body.setAttribute('data-events', String(data.length));
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
        let v: serde_json::Value = serde_json::from_str(&chrome(&sample())).unwrap();
        let evs = v["traceEvents"].as_array().unwrap();
        assert_eq!(evs.iter().filter(|e| e["ph"] == "M").count(), 3);
        assert_eq!(evs.iter().filter(|e| e["cname"] == "terrible").count(), 2);
        assert_eq!(evs[4]["name"], "ctrl.get_status#1 ok");
    }

    #[test]
    fn html_embeds_escaped_data() {
        let h = html(&sample(), "t6 <stale>");
        assert!(h.contains("t6 &lt;stale&gt;"));
        assert!(
            !h.contains("x</script>"),
            "a lane name cannot close the script"
        );
        assert!(h.contains("\"alarm\":true"));
    }
}
