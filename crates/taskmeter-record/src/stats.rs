//! The statistics definitions taskmeter uses everywhere (the core crate re-exports these).
//!
//! - `mean` is the arithmetic mean; `sample_std` the *sample* standard deviation (divisor n - 1),
//!   absent for n < 2.
//! - A percentile is the nearest-rank one: the smallest value with at least p % of the values at
//!   or below it (the value at 1-based rank ceil(p / 100 * n)), so it is always a measured value.

/// 1-based nearest rank of the percentile `q` (parts per 100,000) among `n` sorted values.
pub fn nearest_rank(q: u64, n: usize) -> usize {
    let rank = (q as u128 * n as u128).div_ceil(100_000) as usize;
    rank.clamp(1, n)
}

pub fn mean(values: &[i64]) -> f64 {
    let sum: i128 = values.iter().map(|v| *v as i128).sum();
    sum as f64 / values.len() as f64
}

/// Sample standard deviation (divisor n - 1); None for fewer than two values.
pub fn sample_std(values: &[i64]) -> Option<f64> {
    if values.len() < 2 {
        return None;
    }
    let m = mean(values);
    let squares: f64 = values.iter().map(|v| (*v as f64 - m).powi(2)).sum();
    Some((squares / (values.len() - 1) as f64).sqrt())
}

/// The most frequent values of sorted `values`, ascending; empty when no value occurs twice
/// (Benchee prints that as "None").
pub fn modes(sorted: &[i64]) -> Vec<i64> {
    let mut runs: Vec<(i64, usize)> = Vec::new();
    for &v in sorted {
        match runs.last_mut() {
            Some((last, n)) if *last == v => *n += 1,
            _ => runs.push((v, 1)),
        }
    }
    let best = runs.iter().map(|r| r.1).max().unwrap_or(0);
    if best < 2 {
        return Vec::new();
    }
    runs.into_iter().filter(|r| r.1 == best).map(|r| r.0).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hand_computed_values() {
        // 2, 4, 4, 4, 5, 5, 7, 9: mean 5, squares sum 32, sample variance 32/7.
        let v = [2, 4, 4, 4, 5, 5, 7, 9];
        assert_eq!(mean(&v), 5.0);
        assert!((sample_std(&v).unwrap() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        assert_eq!(sample_std(&[3]), None);
        assert_eq!(nearest_rank(50_000, 8), 4);
        assert_eq!(nearest_rank(99_000, 8), 8);
        assert_eq!(nearest_rank(99_000, 100), 99);
        assert_eq!(nearest_rank(1, 100), 1);
        assert_eq!(modes(&v), vec![4]);
        assert_eq!(modes(&[1, 1, 2, 2, 3]), vec![1, 2]);
        assert!(modes(&[1, 2, 3]).is_empty());
    }
}
