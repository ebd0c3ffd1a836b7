//! Virtual time: nanoseconds since the start of a run. Nothing in this module reads the wall clock.
//!
//! Time is a plain `u64` of nanoseconds; it moves only when the executor finds no runnable task
//! and takes the earliest pending event (see `exec`).

use std::time::Duration;

/// Nanoseconds of virtual time since the run began.
pub type Nanos = u64;

/// A `Duration` as virtual nanoseconds, saturating at `u64::MAX`.
pub fn nanos(d: Duration) -> Nanos {
    u64::try_from(d.as_nanos()).unwrap_or(u64::MAX)
}

/// Formats nanoseconds for people: `250us`, `1.5ms`, `2s`.
pub fn format_ns(ns: Nanos) -> String {
    if ns == 0 {
        return "0".into();
    }
    let units: [(u64, &str); 4] = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    for (scale, unit) in units {
        if ns >= scale {
            return if ns % scale == 0 {
                format!("{}{unit}", ns / scale)
            } else {
                let v = ns as f64 / scale as f64;
                format!("{}{unit}", (v * 1000.0).round() / 1000.0)
            };
        }
    }
    format!("{ns}ns")
}

/// Parses `250us`, `1.5ms`, `2s`, `100ns` or a bare number of nanoseconds.
pub fn parse_ns(s: &str) -> Result<Nanos, String> {
    let s = s.trim();
    let (num, scale) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1.0)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1e3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1e6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1e9)
    } else {
        (s, 1.0)
    };
    let v: f64 = num.trim().parse().map_err(|_| {
        format!("`{s}` is not a duration; expected for example `250us`, `1.5ms`, `2s`")
    })?;
    if !(v >= 0.0) || !v.is_finite() {
        return Err(format!("`{s}`: a duration must be a finite number >= 0"));
    }
    Ok((v * scale).round() as u64)
}

#[cfg(test)]
mod tests {
    use super::*;
    #[test]
    fn durations_round_trip() {
        for ns in [0, 1, 999, 1_000, 250_000, 1_500_000, 2_000_000_000] {
            assert_eq!(parse_ns(&format_ns(ns)).unwrap(), ns, "{}", format_ns(ns));
        }
        assert!(parse_ns("soon").is_err());
        assert!(parse_ns("-1ms").is_err());
    }
}
