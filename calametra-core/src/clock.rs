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
    let mut s = String::with_capacity(12);
    push_ns(&mut s, ns);
    s
}

/// Appends `ns` as [`format_ns`] writes it (a fraction rounded to three decimals, trailing
/// zeros dropped), without the formatting machinery: schedule labels are written with it every
/// logged pick. The text is appended in pieces sliced from a table of three-digit groups
/// (`DIGITS`) and the unit's name: no buffer to check for UTF-8 (building one and checking it
/// cost ~150 instructions a call).
pub fn push_ns(buf: &mut String, ns: Nanos) {
    if ns == 0 {
        buf.push('0');
        return;
    }
    let units: [(u64, &str); 4] = [
        (1_000_000_000, "s"),
        (1_000_000, "ms"),
        (1_000, "us"),
        (1, "ns"),
    ];
    for (scale, unit) in units {
        if ns >= scale {
            if ns.is_multiple_of(scale) {
                push_decimal(buf, ns / scale);
            } else {
                // The value rounded to thousandths, as the f64 it was always computed as; it is
                // below 2^53 (at most 2^64 / 10^9 * 1000), so exactly an integer, and the
                // shortest decimal of `m / 1000` is m's digits with a point before the last
                // three, trailing zeros dropped.
                //
                // A whole number of thousandths of the unit (a time in whole microseconds shown
                // in ms, the usual case) is that number: below 2^50, the f64 computation is
                // within 1/4 of it and rounds to it, so it is taken without the floating point.
                let milli = scale / 1000;
                let m = if milli > 0 && ns < 1 << 50 && ns.is_multiple_of(milli) {
                    ns / milli
                } else {
                    let v = ns as f64 / scale as f64;
                    (v * 1000.0).round() as u64
                };
                push_decimal(buf, m / 1000);
                let frac = (m % 1000) as usize;
                if frac != 0 {
                    // The fraction's three digits (`1.05` is 1, a point and `05`), its trailing
                    // zeros dropped.
                    let width = if frac.is_multiple_of(100) {
                        1
                    } else if frac.is_multiple_of(10) {
                        2
                    } else {
                        3
                    };
                    buf.push('.');
                    buf.push_str(&DIGITS[3 * frac..3 * frac + width]);
                }
            }
            buf.push_str(unit);
            return;
        }
    }
}

/// `000001002...999`: the three digits of every number below 1000, in order.
const DIGITS: &str = {
    const BYTES: [u8; 3000] = {
        let mut t = [0u8; 3000];
        let mut i = 0;
        while i < 1000 {
            t[3 * i] = b'0' + (i / 100) as u8;
            t[3 * i + 1] = b'0' + (i / 10 % 10) as u8;
            t[3 * i + 2] = b'0' + (i % 10) as u8;
            i += 1;
        }
        t
    };
    match std::str::from_utf8(&BYTES) {
        Ok(s) => s,
        Err(_) => panic!("digits are ASCII"),
    }
};

/// Appends `n` in decimal, three digits a piece (no leading zeros): the decimal formatter of
/// text (labels, site names, a kept line's site); [`crate::trace::decimal`] writes bytes.
pub(crate) fn push_decimal(buf: &mut String, n: u64) {
    if n >= 1000 {
        push_decimal(buf, n / 1000);
        let k = (n % 1000) as usize;
        buf.push_str(&DIGITS[3 * k..3 * k + 3]);
    } else {
        let k = n as usize;
        let skip = if k >= 100 {
            0
        } else if k >= 10 {
            1
        } else {
            2
        };
        buf.push_str(&DIGITS[3 * k + skip..3 * k + 3]);
    }
}

/// Formats nanoseconds exactly, in the largest unit that divides them: `250us`, `1ms`,
/// `1234567ns`. What [`parse_ns`] reads back is the same number; trial names use this form.
pub fn format_ns_exact(ns: Nanos) -> String {
    let units: [(u64, &str); 3] = [(1_000_000_000, "s"), (1_000_000, "ms"), (1_000, "us")];
    for (scale, unit) in units {
        if ns != 0 && ns.is_multiple_of(scale) {
            return format!("{}{unit}", ns / scale);
        }
    }
    format!("{ns}ns")
}

/// Parses `250us`, `1.5ms`, `2s`, `100ns` or a bare number of nanoseconds, exactly (decimal
/// arithmetic, no floating point): a fraction finer than a nanosecond is an error, and so is a
/// duration beyond `u64::MAX` nanoseconds.
pub fn parse_ns(s: &str) -> Result<Nanos, String> {
    let s = s.trim();
    let (num, scale, digits_allowed): (&str, u64, usize) = if let Some(n) = s.strip_suffix("ns") {
        (n, 1, 0)
    } else if let Some(n) = s.strip_suffix("us") {
        (n, 1_000, 3)
    } else if let Some(n) = s.strip_suffix("ms") {
        (n, 1_000_000, 6)
    } else if let Some(n) = s.strip_suffix('s') {
        (n, 1_000_000_000, 9)
    } else {
        (s, 1, 0)
    };
    let bad = || format!("`{s}` is not a duration; expected for example `250us`, `1.5ms`, `2s`");
    let num = num.trim();
    let (int, frac) = match num.split_once('.') {
        Some((i, f)) => (i, f),
        None => (num, ""),
    };
    let all_digits = |t: &str| t.bytes().all(|b| b.is_ascii_digit());
    if (int.is_empty() && frac.is_empty()) || !all_digits(int) || !all_digits(frac) {
        return Err(bad());
    }
    let frac = frac.trim_end_matches('0');
    if frac.len() > digits_allowed {
        return Err(format!(
            "`{s}`: finer than a nanosecond; a duration is a whole number of nanoseconds"
        ));
    }
    let too_large = || format!("`{s}`: longer than {} nanoseconds", u64::MAX);
    let whole: u128 = if int.is_empty() {
        0
    } else {
        int.parse::<u128>().map_err(|_| too_large())?
    };
    let mut part: u128 = 0;
    for b in frac.bytes() {
        part = part * 10 + u128::from(b - b'0');
    }
    let part = part * 10u128.pow((digits_allowed - frac.len()) as u32);
    let total = whole
        .checked_mul(u128::from(scale))
        .and_then(|w| w.checked_add(part))
        .ok_or_else(too_large)?;
    u64::try_from(total).map_err(|_| too_large())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn push_decimal_writes_what_display_writes() {
        let mut big = vec![
            u64::MAX,
            u64::MAX - 1,
            1 << 63,
            10u64.pow(19),
            10u64.pow(19) - 1,
        ];
        big.extend((1..20).map(|k| 10u64.pow(k) + 5));
        for n in (0..=100_000).chain(big) {
            let mut out = String::from("x");
            push_decimal(&mut out, n);
            assert_eq!(out, format!("x{n}"), "{n}");
        }
    }
    /// What `format_ns` wrote before it was written without the formatting machinery.
    fn format_ns_with_f64_display(ns: Nanos) -> String {
        if ns == 0 {
            return "0".into();
        }
        for (scale, unit) in [
            (1_000_000_000u64, "s"),
            (1_000_000, "ms"),
            (1_000, "us"),
            (1, "ns"),
        ] {
            if ns >= scale {
                return if ns.is_multiple_of(scale) {
                    format!("{}{unit}", ns / scale)
                } else {
                    let v = ns as f64 / scale as f64;
                    format!("{}{unit}", (v * 1000.0).round() / 1000.0)
                };
            }
        }
        unreachable!()
    }

    #[test]
    fn durations_read_as_they_always_did() {
        use rand_core::{RngCore, SeedableRng};
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(7);
        let mut values: Vec<u64> = vec![1, 999, 1_000, 1_001, 1_000_500, 1_999_999, u64::MAX];
        values.extend((0..20_000).map(|i| {
            let bits = 1 + (i % 64);
            rng.next_u64() >> (64 - bits)
        }));
        values.extend((0..2_000u64).map(|i| i * 500 + 1_000_000));
        // Whole thousandths of a unit (taken without the floating point), about 2^50 too.
        values.extend((0..20_000).map(|i| {
            let milli = [1u64, 1_000, 1_000_000][i % 3];
            (rng.next_u64() >> (14 + i % 50)) / milli * milli
        }));
        values.extend((0..2_000u64).flat_map(|i| [(1 << 50) - i * 1000, (1 << 50) + i * 1000]));
        values.extend((1..2_000u64).map(|i| i * 1_000 + 1_000_000_000));
        for ns in values {
            assert_eq!(format_ns(ns), format_ns_with_f64_display(ns), "{ns}");
        }
        assert_eq!(format_ns(1_250_000), "1.25ms");
        assert_eq!(format_ns(1_000_050), "1ms");
        assert_eq!(format_ns(1_020_000), "1.02ms");
    }

    #[test]
    fn durations_round_trip() {
        for ns in [0, 1, 999, 1_000, 250_000, 1_500_000, 2_000_000_000] {
            assert_eq!(parse_ns(&format_ns(ns)).unwrap(), ns, "{}", format_ns(ns));
        }
        assert!(parse_ns("soon").is_err());
        assert!(parse_ns("-1ms").is_err());
    }

    #[test]
    fn exact_durations_round_trip() {
        for ns in [
            0,
            1,
            999,
            1_000,
            1_234_567,
            250_000,
            1_500_000,
            2_000_000_000,
            (1 << 53) + 1,
            u64::MAX,
        ] {
            let text = format_ns_exact(ns);
            assert_eq!(parse_ns(&text), Ok(ns), "{text}");
        }
        assert_eq!(format_ns_exact(1_234_567), "1234567ns");
        assert_eq!(format_ns_exact(1_000_000), "1ms");
        assert_eq!(parse_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_ns(".5us"), Ok(500));
        assert_eq!(parse_ns("2."), Ok(2));
        assert_eq!(parse_ns("007s"), Ok(7_000_000_000));
        assert_eq!(
            parse_ns("1.0000000001s").unwrap_err(),
            "`1.0000000001s`: finer than a nanosecond; a duration is a whole number of nanoseconds"
        );
        assert!(parse_ns("18446744073709551616ns")
            .unwrap_err()
            .contains("longer than"));
        assert!(parse_ns("1e3ms").is_err());
        assert!(parse_ns(".").is_err());
        assert!(parse_ns("").is_err());
        assert!(parse_ns("+1ms").is_err());
    }
}
