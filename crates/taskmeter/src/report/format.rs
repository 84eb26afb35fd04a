//! How numbers are written in every report: durations (the one formatter, shared with the
//! `record()` report), counts, rates, sizes, ratios and values with their 95 % ranges.

pub use taskmeter_stats::format::ns as format_ns;
use taskmeter_stats::Interval;

/// A value with its 95 % range, each number written by `write`: `12.0 µs ± 7.03 µs` on a linear
/// scale, `14.2 (11.0–18.3)` on a log scale (a ratio, METG: the range is not symmetric), the
/// value alone without a range (one repetition).
pub fn format_range(interval: &Interval, write: impl Fn(f64) -> String) -> String {
    match (interval.has_range(), interval.log_scale) {
        (false, _) => write(interval.value),
        (true, false) => format!("{} ± {}", write(interval.value), write(interval.half_width)),
        (true, true) => format!("{} ({}–{})", write(interval.value), write(interval.low()), write(interval.high())),
    }
}

/// A ratio with three significant digits: `0.520`, `2.62`, `14.2`, `579`.
pub fn format_ratio(ratio: f64) -> String {
    match ratio.abs() {
        a if a >= 100.0 => format!("{ratio:.0}"),
        a if a >= 10.0 => format!("{ratio:.1}"),
        a if a >= 1.0 || a == 0.0 => format!("{ratio:.2}"),
        _ => format!("{ratio:.3}"),
    }
}

/// A count with thousands separators: `1,234,567`.
pub fn format_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Events per second: `12.3 k/s`, `1.20 M/s`.
pub fn format_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2} M/s", per_s / 1e6)
    } else if per_s >= 1e4 {
        format!("{:.1} k/s", per_s / 1e3)
    } else {
        format!("{per_s:.1}/s")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_three_significant_digits() {
        assert_eq!(format_ns(0.0), "0 ns");
        assert_eq!(format_ns(999.0), "999 ns");
        assert_eq!(format_ns(1_234.0), "1.23 µs");
        assert_eq!(format_ns(61_234.0), "61.2 µs");
        assert_eq!(format_ns(1_078_000.0), "1.08 ms");
        assert_eq!(format_ns(250_000_000.0), "250 ms");
        assert_eq!(format_ns(15e9), "15.0 s");
        assert_eq!(format_ns(-2_500.0), "-2.50 µs");
    }

    #[test]
    fn ranges_say_their_scale() {
        use taskmeter_stats::{mean_range, ratio_range};
        let best = mean_range(&[50.0, 100.0, 150.0]).unwrap();
        let steady = mean_range(&[10_000.0; 3]).unwrap();
        // 100 ± 4.302653 x 50 x sqrt(2/3) = ± 175.7; the ratio 100 on a log scale, 17.3 to 579.
        assert_eq!(format_range(&best, format_ns), "100 ns ± 176 ns");
        assert_eq!(format_range(&ratio_range(&steady, &best), format_ratio), "100 (17.3–579)");
        assert_eq!(format_range(&Interval::single(2.5), format_ratio), "2.50");
        assert_eq!(
            (format_ratio(0.52), format_ratio(2.618), format_ratio(14.24)),
            ("0.520".into(), "2.62".into(), "14.2".into())
        );
    }

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1000), "1,000");
        assert_eq!(format_count(1234567), "1,234,567");
    }
}
