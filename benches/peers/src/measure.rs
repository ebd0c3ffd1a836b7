//! Measurements and the table: a row is one tool's metric on one workload, with its samples;
//! rows travel between binaries as tab-separated lines (the madsim binary prints them, the main
//! binary merges them). Std only, so the madsim binary can include this file as it is.

use std::time::Instant;

/// What a row holds.
#[derive(Clone, Debug, PartialEq)]
pub enum Value {
    /// Samples (repetitions or seeds); the table shows median and min-max.
    Samples(Vec<f64>),
    /// `k` of `n` (seeds that found a bug, results that reached the minimum).
    Count { k: u64, n: u64 },
    /// Not measured, with the reason.
    Na(String),
}

/// One line of the table.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// `calametra`, `shuttle-random`, `loom`, ...
    pub tool: String,
    /// `A-yield buggy`, `B`, `C`, ...
    pub workload: String,
    /// `schedules/s`, `found`, `find+shrink ms`, ...
    pub metric: String,
    /// The measured value.
    pub value: Value,
    /// Free text (budgets, what a count means).
    pub note: String,
}

impl Row {
    /// A row of samples.
    pub fn samples(tool: &str, workload: &str, metric: &str, v: Vec<f64>, note: &str) -> Row {
        Row {
            tool: tool.into(),
            workload: workload.into(),
            metric: metric.into(),
            value: Value::Samples(v),
            note: note.into(),
        }
    }

    /// A `k/n` row.
    pub fn count(tool: &str, workload: &str, metric: &str, k: u64, n: u64, note: &str) -> Row {
        Row {
            tool: tool.into(),
            workload: workload.into(),
            metric: metric.into(),
            value: Value::Count { k, n },
            note: note.into(),
        }
    }

    /// A row that was not measured.
    pub fn na(tool: &str, workload: &str, metric: &str, why: &str) -> Row {
        Row {
            tool: tool.into(),
            workload: workload.into(),
            metric: metric.into(),
            value: Value::Na(why.into()),
            note: String::new(),
        }
    }

    /// The tab-separated form: `tool\tworkload\tmetric\tvalue\tnote`.
    pub fn to_tsv(&self) -> String {
        let v = match &self.value {
            Value::Samples(s) => format!(
                "samples:{}",
                s.iter()
                    .map(|x| x.to_string())
                    .collect::<Vec<_>>()
                    .join(",")
            ),
            Value::Count { k, n } => format!("count:{k}/{n}"),
            Value::Na(why) => format!("na:{why}"),
        };
        let clean = |s: &str| s.replace(['\t', '\n'], " ");
        format!(
            "ROW\t{}\t{}\t{}\t{}\t{}",
            clean(&self.tool),
            clean(&self.workload),
            clean(&self.metric),
            clean(&v),
            clean(&self.note)
        )
    }

    /// Parses [`Row::to_tsv`]; `None` for any other line.
    pub fn from_tsv(line: &str) -> Option<Row> {
        let f: Vec<&str> = line.trim_end_matches('\n').split('\t').collect();
        if f.len() != 6 || f[0] != "ROW" {
            return None;
        }
        let value = if let Some(s) = f[4].strip_prefix("samples:") {
            Value::Samples(
                s.split(',')
                    .filter(|x| !x.is_empty())
                    .map(|x| x.parse().ok())
                    .collect::<Option<Vec<f64>>>()?,
            )
        } else if let Some(c) = f[4].strip_prefix("count:") {
            let (k, n) = c.split_once('/')?;
            Value::Count {
                k: k.parse().ok()?,
                n: n.parse().ok()?,
            }
        } else {
            Value::Na(f[4].strip_prefix("na:")?.to_string())
        };
        Some(Row {
            tool: f[1].into(),
            workload: f[2].into(),
            metric: f[3].into(),
            value,
            note: f[5].into(),
        })
    }

    /// The median of the samples, or `k` of a count.
    pub fn median(&self) -> Option<f64> {
        match &self.value {
            Value::Samples(s) if !s.is_empty() => Some(median(s)),
            Value::Count { k, .. } => Some(*k as f64),
            _ => None,
        }
    }
}

/// The median (the mean of the middle two for an even count).
pub fn median(v: &[f64]) -> f64 {
    let mut s = v.to_vec();
    s.sort_by(|a, b| a.total_cmp(b));
    let n = s.len();
    if n == 0 {
        return f64::NAN;
    }
    if n % 2 == 1 {
        s[n / 2]
    } else {
        (s[n / 2 - 1] + s[n / 2]) / 2.0
    }
}

/// Seconds `f` takes. The one wall-clock reading of the benchmark: it times runs from the
/// outside and never reaches a simulated workload.
#[allow(clippy::disallowed_methods)]
pub fn seconds<R>(f: impl FnOnce() -> R) -> (f64, R) {
    let t = Instant::now();
    let r = std::hint::black_box(f());
    (t.elapsed().as_secs_f64(), r)
}

/// `reps` repetitions of `f(rep)`, which runs `n` iterations: iterations per second of each.
pub fn throughput(reps: usize, n: u64, mut f: impl FnMut(usize)) -> Vec<f64> {
    (0..reps)
        .map(|rep| {
            let (s, ()) = seconds(|| f(rep));
            n as f64 / s
        })
        .collect()
}

/// Like [`throughput`] for several contenders at once, their repetitions interleaved (rep 0 of
/// each, then rep 1 of each, ...) so that load from other processes falls on all of them alike.
/// Each contender is `(iterations a rep, body)`; returns iterations per second, per contender.
pub fn interleaved(reps: usize, contenders: &mut [(u64, &mut dyn FnMut(usize))]) -> Vec<Vec<f64>> {
    let mut out = vec![Vec::new(); contenders.len()];
    for rep in 0..reps {
        for (i, (n, f)) in contenders.iter_mut().enumerate() {
            let (s, ()) = seconds(|| f(rep));
            out[i].push(*n as f64 / s);
        }
    }
    out
}

fn fmt_num(x: f64) -> String {
    if !x.is_finite() {
        return "-".into();
    }
    let a = x.abs();
    if a >= 100.0 {
        let s = format!("{:.0}", x);
        // Thousands separators make throughput readable.
        let (sign, digits) = s.strip_prefix('-').map_or(("", s.as_str()), |d| ("-", d));
        let mut out = String::new();
        for (i, c) in digits.chars().enumerate() {
            if i > 0 && (digits.len() - i) % 3 == 0 {
                out.push(',');
            }
            out.push(c);
        }
        format!("{sign}{out}")
    } else if a >= 10.0 {
        format!("{x:.1}")
    } else {
        format!("{x:.2}")
    }
}

/// Renders rows as a Markdown table, with each tool's median against Calametra's for the same
/// workload and metric.
pub fn table(rows: &[Row]) -> String {
    let mut out = String::from(
        "| tool | workload | metric | median | min-max | runs | vs calametra | note |\n|---|---|---|---:|---:|---:|---:|---|\n",
    );
    for r in rows {
        let (med, range, runs) = match &r.value {
            Value::Samples(s) if !s.is_empty() => {
                let lo = s.iter().cloned().fold(f64::INFINITY, f64::min);
                let hi = s.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
                (
                    fmt_num(median(s)),
                    format!("{}-{}", fmt_num(lo), fmt_num(hi)),
                    s.len().to_string(),
                )
            }
            Value::Samples(_) => ("-".into(), "-".into(), "0".into()),
            Value::Count { k, n } => (format!("{k}/{n}"), "-".into(), n.to_string()),
            Value::Na(why) => (format!("n/a ({why})"), "-".into(), "0".into()),
        };
        let base = rows
            .iter()
            .find(|b| b.tool == "calametra" && b.workload == r.workload && b.metric == r.metric);
        let ratio = match (r.median(), base.and_then(Row::median)) {
            (Some(a), Some(b)) if b != 0.0 && !matches!(r.value, Value::Count { .. }) => {
                format!("{:.2}x", a / b)
            }
            _ => "-".into(),
        };
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
            r.tool, r.workload, r.metric, med, range, runs, ratio, r.note
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rows_round_trip() {
        for r in [
            Row::samples("a", "B", "ms", vec![1.5, 2.0], "x"),
            Row::count("a", "B", "found", 3, 20, ""),
            Row::na("a", "B", "ms", "does not fit"),
        ] {
            assert_eq!(Row::from_tsv(&r.to_tsv()), Some(r));
        }
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
    }
}
