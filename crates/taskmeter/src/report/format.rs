//! How numbers are written in every report: durations (the one formatter, shared with the
//! `record()` report), counts, rates and sizes.

pub use taskmeter_stats::format::ns as format_ns;

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

/// A size in bytes: `12.0 KiB`, `3.5 MiB`.
pub fn format_bytes(bytes: f64) -> String {
    let a = bytes.abs();
    if a >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", bytes / 1024.0 / 1024.0)
    } else if a >= 1024.0 {
        format!("{:.1} KiB", bytes / 1024.0)
    } else {
        format!("{bytes:.0} B")
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
    fn counts_have_thousands_separators() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1000), "1,000");
        assert_eq!(format_count(1234567), "1,234,567");
    }
}
