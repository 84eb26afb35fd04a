//! E-Divisive means (Matteson and James, "A Nonparametric Approach for Multiple Change Point
//! Analysis of Multivariate Data", JASA 2014; the `e.divisive` of their R package `ecp`) on a
//! performance series: the split of a segment that maximises the energy-distance statistic
//!
//! ```text
//! q(τ) = τ(n-τ)/n · ( 2/(τ(n-τ)) Σ_{i<τ≤j} |x_i - x_j|
//!                     - 1/C(τ,2) Σ_{i<k<τ} |x_i - x_k|
//!                     - 1/C(n-τ,2) Σ_{τ≤j<k} |x_j - x_k| )
//! ```
//!
//! (α = 1). Hierarchically: each step takes the best split over all current segments and
//! judges it by a permutation test (the values shuffled within each segment, the best split
//! over all segments each time; p = (1 + hits) / (1 + permutations), or hits / shuffles once
//! `STOP_AT_HITS` shuffles reached it, Besag and Clifford's sequential p-value); the first split
//! that is not significant ends the search. Apache Otava (formerly Hunter), which applies
//! E-Divisive to performance series too, by default does otherwise (a windowed t-test whose
//! neighbouring points are merged): this is E-Divisive as its authors define it.

/// A permutation test stops once this many shuffles reached the statistic: its p-value is then
/// clearly large, and known well enough (Besag and Clifford 1991).
const STOP_AT_HITS: usize = 20;

/// A change point: the first index of the new segment, its statistic and p-value.
#[derive(Clone, Debug, PartialEq)]
pub struct ChangePoint {
    pub index: usize,
    pub q: f64,
    pub p_value: f64,
}

/// How the search is run.
#[derive(Clone, Copy, Debug)]
pub struct Settings {
    /// Significance level of the permutation test.
    pub alpha: f64,
    pub permutations: usize,
    /// The fewest points on each side of a split.
    pub min_size: usize,
    /// The shuffles' seed: the same series gives the same answer.
    pub seed: u64,
}

impl Default for Settings {
    fn default() -> Settings {
        Settings { alpha: 0.05, permutations: 999, min_size: 3, seed: 26 }
    }
}

/// q(τ) for every τ in `min_size..=n-min_size` (None elsewhere), in O(n²).
pub fn statistics(x: &[f64], min_size: usize) -> Vec<Option<f64>> {
    let n = x.len();
    let mut out = vec![None; n + 1];
    if n < 2 * min_size.max(1) {
        return out;
    }
    let d = |i: usize, j: usize| (x[i] - x[j]).abs();
    let total: f64 = (0..n).flat_map(|i| (i + 1..n).map(move |j| (i, j))).map(|(i, j)| d(i, j)).sum();
    // Within the left part [0, τ) and the right part [τ, n), updated as τ moves right.
    let mut left = 0.0;
    let mut right = total;
    for (tau, slot) in out.iter_mut().enumerate().take(n).skip(1) {
        let moved = tau - 1;
        left += (0..moved).map(|i| d(i, moved)).sum::<f64>();
        right -= (moved + 1..n).map(|j| d(moved, j)).sum::<f64>();
        if tau < min_size.max(1) || n - tau < min_size.max(1) {
            continue;
        }
        let between = total - left - right;
        let (a, b) = (tau as f64, (n - tau) as f64);
        let pairs = |k: f64| k * (k - 1.0) / 2.0;
        let within = |sum: f64, k: f64| if k >= 2.0 { sum / pairs(k) } else { 0.0 };
        let energy = 2.0 * between / (a * b) - within(left, a) - within(right, b);
        *slot = Some(a * b / (a + b) * energy);
    }
    out
}

/// The best split of `x`: (τ, q).
fn best(x: &[f64], min_size: usize) -> Option<(usize, f64)> {
    statistics(x, min_size)
        .into_iter()
        .enumerate()
        .filter_map(|(t, q)| q.map(|q| (t, q)))
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// The best split over the segments between `cuts` (sorted, from 0 to n): (index in `x`, q).
fn best_of_segments(x: &[f64], cuts: &[usize], min_size: usize) -> Option<(usize, f64)> {
    cuts.windows(2)
        .filter_map(|w| best(&x[w[0]..w[1]], min_size).map(|(t, q)| (w[0] + t, q)))
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// The next split of `x` given the `cuts` found so far, and its permutation p-value.
fn next_split(x: &[f64], cuts: &[usize], settings: Settings, rng: &mut fastrand::Rng) -> Option<ChangePoint> {
    let (index, q) = best_of_segments(x, cuts, settings.min_size)?;
    let mut shuffled = x.to_vec();
    let mut hits = 0;
    for done in 1..=settings.permutations {
        for w in cuts.windows(2) {
            rng.shuffle(&mut shuffled[w[0]..w[1]]);
        }
        if best_of_segments(&shuffled, cuts, settings.min_size).is_some_and(|(_, s)| s >= q - q.abs() * 1e-12) {
            hits += 1;
            if hits == STOP_AT_HITS {
                return Some(ChangePoint { index, q, p_value: hits as f64 / done as f64 });
            }
        }
    }
    let p_value = (1 + hits) as f64 / (1 + settings.permutations) as f64;
    Some(ChangePoint { index, q, p_value })
}

/// The test of the whole series for any change: its best split and p-value (the first step of
/// `change_points`, with the same shuffles). None for a series too short to split.
pub fn test(x: &[f64], settings: Settings) -> Option<ChangePoint> {
    let mut rng = fastrand::Rng::with_seed(settings.seed);
    next_split(x, &[0, x.len()], settings, &mut rng)
}

/// Every significant change point of `x`, in order.
pub fn change_points(x: &[f64], settings: Settings) -> Vec<ChangePoint> {
    let mut rng = fastrand::Rng::with_seed(settings.seed);
    let mut found: Vec<ChangePoint> = Vec::new();
    let mut cuts = vec![0, x.len()];
    while let Some(cp) = next_split(x, &cuts, settings, &mut rng) {
        if cp.p_value > settings.alpha {
            break;
        }
        let at = cuts.partition_point(|c| *c < cp.index);
        cuts.insert(at, cp.index);
        found.push(cp);
    }
    found.sort_by_key(|c| c.index);
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn the_statistic_matches_hand_computed_values() {
        // x = 0 0 0 10 10 10. τ = 3: between pairs all differ by 10 (mean 10), within 0:
        // q = 3·3/6 · (2·10) = 30. τ = 2: between 8 pairs, 6 of them 10 apart (mean 7.5);
        // right part {0, 10, 10, 10}: 6 pairs, 3 of them 10 apart (mean 5): q = 2·4/6 · (15 - 5).
        let q = statistics(&[0.0, 0.0, 0.0, 10.0, 10.0, 10.0], 1);
        assert!(close(q[3].unwrap(), 30.0), "{q:?}");
        assert!(close(q[2].unwrap(), 40.0 / 3.0), "{q:?}");
        assert!(close(q[4].unwrap(), 40.0 / 3.0), "symmetric: {q:?}");
        // τ = 1: left {0} has no pair (its term is 0); between: 2 of 5 pairs are 0, 3 are 10
        // (mean 6); right {0, 0, 10, 10, 10}: 6 of 10 pairs are 10 (mean 6): q = 5/6 · (12 - 6).
        assert!(close(q[1].unwrap(), 5.0), "{q:?}");
        assert_eq!((q[0], q[6]), (None, None));
    }

    #[test]
    fn the_minimum_size_bounds_the_splits() {
        let q = statistics(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3);
        assert_eq!(q.iter().filter(|v| v.is_some()).count(), 1);
        assert!(statistics(&[1.0, 2.0, 3.0, 4.0, 5.0], 3).iter().all(Option::is_none));
    }

    #[test]
    fn a_clear_shift_is_found_where_it_is() {
        // Matteson and James's univariate example in spirit: a mean shift of 3 σ.
        let mut rng = fastrand::Rng::with_seed(1);
        let noise = |rng: &mut fastrand::Rng| (0..12).map(|_| rng.f64() - 0.5).sum::<f64>();
        let x: Vec<f64> = (0..30).map(|i| if i < 20 { 100.0 } else { 103.0 } + noise(&mut rng)).collect();
        let found = change_points(&x, Settings::default());
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].index, 20);
        assert!(found[0].p_value <= 0.01, "{found:?}");
    }

    #[test]
    fn two_shifts_are_both_found() {
        let x: Vec<f64> = (0..30).map(|i| [5.0, 9.0, 5.0][i / 10] + [0.1, -0.2, 0.15, -0.05, 0.0][i % 5]).collect();
        let found: Vec<usize> = change_points(&x, Settings::default()).iter().map(|c| c.index).collect();
        assert_eq!(found, vec![10, 20]);
    }

    #[test]
    fn a_constant_series_has_no_change() {
        assert!(change_points(&[4.0; 20], Settings::default()).is_empty());
        assert!(change_points(&[1.0, 2.0], Settings::default()).is_empty());
    }
}
