//! How taskmeter writes a duration, everywhere: the unit fits the magnitude (ns, µs with the
//! micro sign U+00B5, ms, s). Two precisions: three significant digits for tables
//! ([`ns`]), Benchee's two decimals (one from 100 up) for the `record()` report ([`duration`]).

/// The value in its fitting unit.
fn scaled(ns: f64) -> (f64, &'static str) {
    match ns.abs() {
        a if a >= 1e9 => (ns / 1e9, "s"),
        a if a >= 1e6 => (ns / 1e6, "ms"),
        a if a >= 1e3 => (ns / 1e3, "µs"),
        _ => (ns, "ns"),
    }
}

/// A duration with three significant digits, e.g. `63.0 µs`, `1.31 ms`, `812 ns`; below 1 ns
/// with two decimals, `0.31 ns` (the low end of a wide range on a log scale is never `0 ns`).
pub fn ns(ns: f64) -> String {
    let (value, unit) = scaled(ns);
    let decimals = if value != 0.0 && value.abs() < 1.0 {
        2
    } else if unit == "ns" || value.abs() >= 100.0 {
        0
    } else if value.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$} {unit}")
}

/// A duration as Benchee prints it, e.g. `100.8 ms`, `1.00 s`.
pub fn duration(ns: f64) -> String {
    let (value, unit) = scaled(ns);
    if value == 0.0 {
        return "0 ns".into();
    }
    let decimals = if value.abs() >= 100.0 { 1 } else { 2 };
    format!("{value:.decimals$} {unit}")
}

#[cfg(test)]
mod tests {
    #[test]
    fn both_precisions_share_their_units() {
        assert_eq!(super::ns(63_012.0), "63.0 µs");
        assert_eq!(super::ns(1_310_000.0), "1.31 ms");
        assert_eq!(super::ns(812.4), "812 ns");
        assert_eq!(super::ns(-2_500.0), "-2.50 µs");
        assert_eq!((super::ns(0.314), super::ns(0.0)), ("0.31 ns".into(), "0 ns".into()));
        assert_eq!(super::duration(100_800_000.0), "100.8 ms");
        assert_eq!(super::duration(1_000_000_000.0), "1.00 s");
        assert_eq!(super::duration(2_500.0), "2.50 µs");
        assert_eq!(super::duration(0.0), "0 ns");
    }
}
