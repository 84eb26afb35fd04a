//! All statistics taskmeter reports, in one place.
//!
//! Definitions (also in the README):
//! - `mean`, `std`: arithmetic mean and *sample* standard deviation (divisor n - 1) of the values;
//!   `std` is absent for n < 2.
//! - `min`, `p50` ... `p99_99`, `max`: exact order statistics of the sorted values. A percentile
//!   is the nearest-rank one: the smallest value with at least p % of the values at or below it
//!   (the value at 1-based rank ceil(p / 100 * n)), so it is always a value that was measured.
//! - the seed studies' columns: `deviation = |value - reference|` per sample (reference = the
//!   expected sleep for `actual` and `full`, 0 for `lateness` and `busy`); then
//!   `mean_absolute_deviation`, `deviation_std` (n - 1), `deviation_min`, `deviation_max`.
//!
//! Every field but `count` is absent (null) when there are no values.

use serde::{Deserialize, Serialize};

/// Percentiles reported, in parts per 100,000 so ranks are computed in exact integer arithmetic.
pub const PERCENTILES: [(&str, u64); 5] =
    [("p50", 50_000), ("p90", 90_000), ("p99", 99_000), ("p99_9", 99_900), ("p99_99", 99_990)];

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Summary {
    pub count: u64,
    pub mean: Option<f64>,
    pub std: Option<f64>,
    pub min: Option<i64>,
    pub p50: Option<i64>,
    pub p90: Option<i64>,
    pub p99: Option<i64>,
    pub p99_9: Option<i64>,
    pub p99_99: Option<i64>,
    pub max: Option<i64>,
    pub mean_absolute_deviation: Option<f64>,
    pub deviation_std: Option<f64>,
    pub deviation_min: Option<i64>,
    pub deviation_max: Option<i64>,
}

impl Summary {
    /// Summarises `values`, each compared with the `reference` at the same index.
    pub fn of(values: &[i64], references: &[i64]) -> Summary {
        assert_eq!(values.len(), references.len(), "one reference per value");
        if values.is_empty() {
            return Summary::default();
        }
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let deviations: Vec<i64> =
            values.iter().zip(references).map(|(v, r)| (*v as i128 - *r as i128).unsigned_abs() as i64).collect();
        let (dev_min, dev_max) = deviations.iter().fold((i64::MAX, i64::MIN), |(lo, hi), d| (lo.min(*d), hi.max(*d)));
        let pick = |q: u64| Some(sorted[nearest_rank(q, sorted.len()) - 1]);
        Summary {
            count: values.len() as u64,
            mean: Some(mean(values)),
            std: sample_std(values),
            min: Some(sorted[0]),
            p50: pick(PERCENTILES[0].1),
            p90: pick(PERCENTILES[1].1),
            p99: pick(PERCENTILES[2].1),
            p99_9: pick(PERCENTILES[3].1),
            p99_99: pick(PERCENTILES[4].1),
            max: Some(sorted[sorted.len() - 1]),
            mean_absolute_deviation: Some(mean(&deviations)),
            deviation_std: sample_std(&deviations),
            deviation_min: Some(dev_min),
            deviation_max: Some(dev_max),
        }
    }

    /// The named percentile, as listed in [`PERCENTILES`].
    pub fn percentile(&self, name: &str) -> Option<i64> {
        match name {
            "p50" => self.p50,
            "p90" => self.p90,
            "p99" => self.p99,
            "p99_9" => self.p99_9,
            "p99_99" => self.p99_99,
            _ => None,
        }
    }

    /// Standard error of the mean, `std / sqrt(n)`.
    pub fn standard_error(&self) -> Option<f64> {
        self.std.map(|s| s / (self.count as f64).sqrt())
    }
}

pub use taskmeter_record::stats::{mean, nearest_rank, sample_std};

/// `a / b` and its standard uncertainty from the standard errors of both (first-order
/// propagation of independent errors): `r * sqrt((sa/a)^2 + (sb/b)^2)`.
pub fn ratio_with_uncertainty(a: f64, a_err: f64, b: f64, b_err: f64) -> (f64, f64) {
    let r = a / b;
    let rel = ((a_err / a).powi(2) + (b_err / b).powi(2)).sqrt();
    (r, (r * rel).abs())
}

/// Ordinary least-squares line through `(x, y)`: (slope, intercept), or None with fewer than
/// two distinct x values.
pub fn linear_fit(points: &[(f64, f64)]) -> Option<(f64, f64)> {
    let n = points.len() as f64;
    let mean_x = points.iter().map(|p| p.0).sum::<f64>() / n;
    let mean_y = points.iter().map(|p| p.1).sum::<f64>() / n;
    let sxx: f64 = points.iter().map(|p| (p.0 - mean_x).powi(2)).sum();
    let sxy: f64 = points.iter().map(|p| (p.0 - mean_x) * (p.1 - mean_y)).sum();
    if points.len() < 2 || sxx <= 0.0 {
        return None;
    }
    let slope = sxy / sxx;
    Some((slope, mean_y - slope * mean_x))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: Option<f64>, b: f64) -> bool {
        a.is_some_and(|a| (a - b).abs() < 1e-9 * b.abs().max(1.0))
    }

    #[test]
    fn empty_has_only_a_count() {
        let s = Summary::of(&[], &[]);
        assert_eq!(s, Summary { count: 0, ..Summary::default() });
    }

    #[test]
    fn one_value_has_no_standard_deviation() {
        let s = Summary::of(&[7], &[10]);
        assert_eq!(s.count, 1);
        assert_eq!(s.mean, Some(7.0));
        assert_eq!(s.std, None);
        assert_eq!((s.min, s.p50, s.p99_99, s.max), (Some(7), Some(7), Some(7), Some(7)));
        assert_eq!(s.mean_absolute_deviation, Some(3.0));
        assert_eq!(s.deviation_std, None);
        assert_eq!((s.deviation_min, s.deviation_max), (Some(3), Some(3)));
    }

    #[test]
    fn hand_computed_vector() {
        // values 2 4 4 4 5 5 7 9: mean 5, squared deviations sum 32, sample variance 32/7.
        let values = [9, 2, 4, 4, 5, 4, 7, 5];
        let s = Summary::of(&values, &[0; 8]);
        assert_eq!(s.count, 8);
        assert_eq!(s.mean, Some(5.0));
        assert!(close(s.std, (32.0f64 / 7.0).sqrt()));
        assert_eq!(s.min, Some(2));
        assert_eq!(s.max, Some(9));
        // nearest rank: p50 -> rank ceil(4) = 4 -> 4; p90 -> ceil(7.2) = 8 -> 9.
        assert_eq!(s.p50, Some(4));
        assert_eq!(s.p90, Some(9));
        assert_eq!(s.p99, Some(9));
        assert_eq!(s.mean_absolute_deviation, Some(5.0));
    }

    #[test]
    fn seed_deviation_columns() {
        // The v1 study: actual times against an expected 1000 ns.
        let actual = [1100, 900, 1300, 1000];
        let s = Summary::of(&actual, &[1000; 4]);
        // deviations 100 100 300 0: mean 125, variance (25^2 * 2 + 175^2 + 125^2) / 3 = 47500 / 3.
        assert_eq!(s.mean_absolute_deviation, Some(125.0));
        assert!(close(s.deviation_std, (47500.0f64 / 3.0).sqrt()));
        assert_eq!((s.deviation_min, s.deviation_max), (Some(0), Some(300)));
        assert_eq!(s.mean, Some(1075.0));
    }

    #[test]
    fn negative_values_and_deviation() {
        let s = Summary::of(&[-3, 1], &[0, 0]);
        assert_eq!(s.mean, Some(-1.0));
        assert_eq!(s.mean_absolute_deviation, Some(2.0));
        assert_eq!(s.min, Some(-3));
        assert!(close(s.std, 8.0f64.sqrt()));
    }

    #[test]
    fn nearest_ranks_are_exact() {
        assert_eq!(nearest_rank(50_000, 1), 1);
        assert_eq!(nearest_rank(50_000, 2), 1);
        assert_eq!(nearest_rank(50_000, 3), 2);
        assert_eq!(nearest_rank(99_000, 100), 99);
        assert_eq!(nearest_rank(99_000, 101), 100);
        assert_eq!(nearest_rank(99_990, 10_000), 9_999);
        assert_eq!(nearest_rank(99_990, 10_001), 10_000);
        assert_eq!(nearest_rank(99_900, 1_000), 999);
        // p99 of 1..=1000 is 990, p99.9 is 999.
        let values: Vec<i64> = (1..=1000).collect();
        let s = Summary::of(&values, &vec![0; 1000]);
        assert_eq!((s.p50, s.p90, s.p99, s.p99_9, s.p99_99), (Some(500), Some(900), Some(990), Some(999), Some(1000)));
    }

    #[test]
    fn ratio_uncertainty_propagates() {
        let (r, u) = ratio_with_uncertainty(200.0, 4.0, 100.0, 1.0);
        assert_eq!(r, 2.0);
        assert!((u - 2.0 * (0.02f64.powi(2) + 0.01f64.powi(2)).sqrt()).abs() < 1e-12);
    }

    #[test]
    fn least_squares_lines_match_hand_computed_values() {
        // y = 2x + 1 exactly.
        assert_eq!(linear_fit(&[(0.0, 1.0), (1.0, 3.0), (2.0, 5.0)]), Some((2.0, 1.0)));
        // (1,1), (2,3), (3,2): mean x 2, mean y 2, sxy = (-1)(-1) + 0 + (1)(0) = 1, sxx = 2.
        assert_eq!(linear_fit(&[(1.0, 1.0), (2.0, 3.0), (3.0, 2.0)]), Some((0.5, 1.0)));
        assert_eq!(linear_fit(&[(5.0, 1.0), (5.0, 2.0)]), None);
        assert_eq!(linear_fit(&[(1.0, 1.0)]), None);
    }
}
