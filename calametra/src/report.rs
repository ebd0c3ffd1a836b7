//! What people see of a failure: the one-screen report, the trace file beside it, and the
//! per-binary summary of failure signatures. Quiet on success, complete on failure.

use calametra_core::choices::{count_events, story, Event};
use calametra_core::trace::{parse_kept, Record};
pub use calametra_core::tracefile::{read_aloud, write_trace};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;

/// Everything the failure screen shows.
pub struct Screen<'a> {
    /// The failure as printed.
    pub failure: &'a str,
    /// Its signature.
    pub signature: &'a str,
    /// Whether it is a model gap.
    pub model_gap: bool,
    /// The trial that found it.
    pub trial: &'a str,
    /// The seed line (seed and base seed) when the trial was seeded.
    pub seed_line: Option<String>,
    /// `48 -> 12 -> 5 -> 3`.
    pub chain: &'a str,
    /// The minimal events.
    pub events: &'a [Event],
    /// The minimal run's kept trace lines (to read the events in context).
    pub lines: &'a [String],
    /// The minimal run's trace hash.
    pub hash: &'a str,
    /// Where the signature's saved case is (the file, or that a better case is kept and
    /// where), or why it could not be saved.
    pub regression: Result<String, String>,
    /// The full trace written (or why none was).
    pub trace: Result<PathBuf, String>,
    /// The command that replays it.
    pub replay: String,
    /// The regression file's JSON, printed in full when it could not be written.
    pub regression_json: Option<String>,
    /// With `CALAMETRA_SCANOUT`: the pictures the devices show at the end of the minimal run,
    /// a line each (the PNG written and what it shows), or why none were written.
    pub scanout: Option<Result<Vec<String>, String>>,
}

impl Screen<'_> {
    /// The screen as text.
    pub fn render(&self) -> String {
        let mut s = String::new();
        if self.model_gap {
            s.push_str("MODEL GAP (not a driver failure, and not a pass)\n");
        }
        s.push_str(&format!("{}\n", self.failure));
        s.push_str(&format!("signature: {}\n", self.signature));
        s.push_str(&format!("found by:  {}\n", self.trial));
        if let Some(l) = &self.seed_line {
            s.push_str(&format!("{l}\n"));
        }
        let noun = if count_events(self.events) == 1 {
            "event"
        } else {
            "events"
        };
        s.push_str(&format!("delta {} {noun}\n", self.chain));
        s.push_str(&format!("minimal events: {}\n", story(self.events)));
        let records = parse_kept(self.lines);
        s.push_str(&event_list(self.events, |e| context(e, &records)));
        let told = read_aloud(&records, 14);
        if !told.is_empty() {
            s.push_str(&format!("the minimal run, read aloud: {told}\n"));
        }
        s.push_str(&format!("trace hash: {}\n", self.hash));
        match &self.regression {
            Ok(p) => s.push_str(&format!("regression: {p}\n")),
            Err(e) => {
                s.push_str(&format!("regression: NOT WRITTEN: {e}\n"));
                if let Some(j) = &self.regression_json {
                    s.push_str("the case in full, so it is not lost:\n");
                    s.push_str(j);
                }
            }
        }
        match &self.trace {
            Ok(p) => s.push_str(&format!("trace:      {}\n", p.display())),
            Err(e) => s.push_str(&format!("trace:      not written: {e}\n")),
        }
        match &self.scanout {
            None => {}
            Some(Ok(lines)) => {
                for (i, l) in lines.iter().enumerate() {
                    let head = if i == 0 { "scanout:" } else { "" };
                    s.push_str(&format!("{head:<12}{l}\n"));
                }
            }
            Some(Err(e)) => s.push_str(&format!("scanout:    not written: {e}\n")),
        }
        s.push_str(&format!("replay:     {}\n", self.replay));
        s
    }
}

/// The events as a failure screen lists them, a line each with `context` after it: numbered as
/// [`count_events`] counts them, an anchor (where the next event is placed) unnumbered. `show`
/// lists a saved case's events the same way.
pub fn event_list(events: &[Event], context: impl Fn(&Event) -> String) -> String {
    let mut s = String::new();
    let mut i = 0;
    for e in events {
        if matches!(e, Event::Anchor { .. }) {
            s.push_str(&format!("      {e}{}\n", context(e)));
        } else {
            i += 1;
            s.push_str(&format!("  {i:>2}. {e}{}\n", context(e)));
        }
    }
    s
}

/// `n` and a noun in correct English: `1 event`, `3 events`.
pub fn count(n: usize, noun: &str) -> String {
    if n == 1 {
        format!("1 {noun}")
    } else {
        format!("{n} {noun}s")
    }
}

/// `s` safe to print on a terminal: control characters other than newline and tab (a file
/// name's escape sequences, a carriage return) written as `\u{1b}`. What the harness and the
/// tool print of names they did not choose goes through it.
pub fn printable(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if c.is_control() && c != '\n' && c != '\t' {
            out.push_str(&format!("\\u{{{:x}}}", c as u32));
        } else {
            out.push(c);
        }
    }
    out
}

/// `s` as one shell word: as it is when it has only characters no shell treats specially,
/// else in single quotes (a `'` inside written `'\''`). Trial names hold `#` and `>`
/// (`site::ctrl.get_status#3::stall`, `flip.pending->shown#1`), which a shell would take as a
/// comment and a redirection.
pub fn shell_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes().all(|b| {
            b.is_ascii_alphanumeric()
                || matches!(
                    b,
                    b'_' | b'-' | b'.' | b'/' | b':' | b'=' | b',' | b'@' | b'%' | b'+'
                )
        });
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', "'\\''"))
    }
}

/// The command that runs `trial` of `package`'s test target `target`, every word quoted for a
/// shell; guest trials are ignored by default, so theirs asks for ignored trials.
pub fn replay_command(package: &str, target: &str, trial: &str, guest: bool) -> String {
    format!(
        "cargo test -p {} --test {} -- --exact {}{}",
        shell_quote(package),
        shell_quote(target),
        shell_quote(trial),
        if guest { " --ignored" } else { "" }
    )
}

/// What was in flight when an external fired, from its trace record.
fn context(e: &Event, records: &[Record]) -> String {
    let Event::External { name, point } = e else {
        return String::new();
    };
    let rec = records.iter().find(|r| {
        r.kind == "external"
            && r.data.get("external").and_then(|v| v.as_str()) == Some(name)
            && r.data.get("step").and_then(|v| v.as_u64()) == Some(*point)
    });
    let sites: Vec<&str> = rec
        .and_then(|r| r.data.get("in_flight"))
        .and_then(|v| v.as_array())
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    if sites.is_empty() {
        format!(" (step {point})")
    } else {
        format!(" (step {point}, while {} in flight)", sites.join(", "))
    }
}

/// The trial whose screen shows each signature in this test binary.
static SCREENS: Mutex<BTreeMap<String, String>> = Mutex::new(BTreeMap::new());

/// Claims the full screen of a case (its id names the scenario and the signature) for `trial`:
/// `None` when it is the first to fail that way in this binary (it prints the screen), else the
/// trial that has it (this one prints one line).
pub fn claim_screen(case_id: &str, trial: &str) -> Option<String> {
    let mut m = SCREENS.lock().ok()?;
    match m.get(case_id) {
        Some(first) if first != trial => Some(first.clone()),
        Some(_) => None,
        None => {
            m.insert(case_id.to_string(), trial.to_string());
            None
        }
    }
}

/// One failure signature seen by this test binary.
#[derive(Clone, Debug)]
pub struct SignatureEntry {
    /// Shortest minimal run seen.
    pub shortest: usize,
    /// Its story.
    pub story: String,
    /// Whether it is a model gap.
    pub model_gap: bool,
    /// The trials that hit it.
    pub trials: Vec<String>,
}

/// Failures by (scenario, signature).
static SUMMARY: Mutex<BTreeMap<(String, String), SignatureEntry>> = Mutex::new(BTreeMap::new());

/// Records a failing trial of `scenario` under its signature.
pub fn note_failure(
    scenario: &str,
    signature: &str,
    trial: &str,
    events: &[Event],
    model_gap: bool,
) {
    let Ok(mut m) = SUMMARY.lock() else { return };
    let e = m
        .entry((scenario.to_string(), signature.to_string()))
        .or_insert_with(|| SignatureEntry {
            shortest: usize::MAX,
            story: String::new(),
            model_gap,
            trials: Vec::new(),
        });
    // Counted as everywhere else on the screen: anchors are where an event goes, not events.
    let n = count_events(events);
    if n < e.shortest {
        e.shortest = n;
        e.story = story(events);
    }
    e.trials.push(trial.to_string());
    e.trials.sort();
}

/// The summary of failure signatures, or None when nothing failed.
pub fn summary() -> Option<String> {
    let m = SUMMARY.lock().ok()?;
    if m.is_empty() {
        return None;
    }
    let mut s = format!("\ncalametra: {}\n", count(m.len(), "failure signature"));
    for ((scenario, sig), e) in m.iter() {
        let tag = if e.model_gap { " [model gap]" } else { "" };
        s.push_str(&format!("  {scenario}: {sig}{tag}\n"));
        s.push_str(&format!(
            "    shortest run: {}: {}\n",
            count(e.shortest, "event"),
            e.story
        ));
        s.push_str(&format!(
            "    trials ({}): {}\n",
            e.trials.len(),
            e.trials.join(", ")
        ));
    }
    Some(s)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An anchor is where an event goes, not an event: the screen's delta, its numbered list
    /// and the closing summary's "shortest run" all count one event here.
    #[test]
    fn an_anchored_fault_counts_as_one_event_everywhere_on_the_screen() {
        let events: Vec<Event> = serde_json::from_str(
            r#"[{"event":"anchor","after":"start","nth":1,"offset":66},
                {"event":"fault","site":"ctrl.getstatus#66","fault":"stall"}]"#,
        )
        .unwrap();
        let screen = Screen {
            failure: "invariant broke",
            signature: "invariant broke",
            model_gap: false,
            trial: "s::seed::0x1",
            seed_line: None,
            chain: "2 -> 1",
            events: &events,
            lines: &[],
            hash: "sha256:0",
            regression: Ok("r.json".into()),
            trace: Err("none".into()),
            replay: "cargo test".into(),
            regression_json: None,
            scanout: None,
        };
        let text = screen.render();
        assert!(text.contains("delta 2 -> 1 event\n"), "{text}");
        assert!(text.contains("   1. stall at ctrl.getstatus#66"), "{text}");
        assert!(!text.contains(" 2. "), "{text}");
        note_failure(
            "anchored::s",
            "invariant broke",
            "s::seed::0x1",
            &events,
            false,
        );
        let summary = summary().unwrap();
        assert!(
            summary.contains("shortest run: 1 event: stall at ctrl.getstatus#66"),
            "{summary}"
        );
    }
}
