//! E-Divisive means (Matteson and James, "A Nonparametric Approach for Multiple Change Point
//! Analysis of Multivariate Data", JASA 2014; the `e.divisive` of their R package `ecp`) on a
//! performance series. A split of a segment at τ, with its right part ending at κ, has the
//! energy-distance statistic (α = 1)
//!
//! ```text
//! q(τ, κ) = τ(κ-τ)/κ · ( 2/(τ(κ-τ)) Σ_{i<τ≤j<κ} |x_i - x_j|
//!                        - 1/C(τ,2) Σ_{i<k<τ} |x_i - x_k|
//!                        - 1/C(κ-τ,2) Σ_{τ≤j<k<κ} |x_j - x_k| )
//! ```
//!
//! and the segment's best split is the (τ, κ) with the largest q, each part at least `min_size`
//! long: κ is searched too, as the paper's (τ̂, κ̂) = argmax and ecp's `splitPointC` do, so a
//! change that is undone later (a bump) is seen whole; τ is the change point, κ only where the
//! right part that shows it best ends. Hierarchically: each step takes the best split over all
//! current segments and judges it by a permutation test (the values shuffled within each
//! segment, the best split over all segments each time; p = (1 + hits) / (1 + permutations),
//! or hits / shuffles once `STOP_AT_HITS` shuffles reached it, Besag and Clifford's sequential
//! p-value); every split of one search is tested at the same level (the paper's p₀, ecp's
//! `sig.lvl`: `Settings::alpha`), and the first that is not significant ends the search.
//! Apache Otava (formerly Hunter), which applies E-Divisive to performance series too, by
//! default does otherwise (a windowed t-test whose neighbouring points are merged).
//!
//! `history check` uses it (`history::check`); it is in the core, built at opt-level 3, because a
//! check runs thousands of shuffles a series, each O(n²): ten times faster than at opt-level 0.

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
    /// The level every split of a search is tested at.
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

/// A split of a segment: its left part `[0, tau)`, its right part `[tau, kappa)`, and q.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Split {
    pub tau: usize,
    pub kappa: usize,
    pub q: f64,
}

/// q from the parts' sizes and their sums of distances: within the left, within the right,
/// and between them (a part of one value has no pair, and its mean distance counts as 0).
fn energy((left, right): (usize, usize), (within_left, within_right, between): (f64, f64, f64)) -> f64 {
    let (a, b) = (left as f64, right as f64);
    let mean_within = |sum: f64, k: f64| if k >= 2.0 { sum / (k * (k - 1.0) / 2.0) } else { 0.0 };
    a * b / (a + b) * (2.0 * between / (a * b) - mean_within(within_left, a) - mean_within(within_right, b))
}

/// q(τ, κ) of `x` from its definition: the reference `best_split` is tested against.
pub fn statistic(x: &[f64], tau: usize, kappa: usize) -> f64 {
    let sum = |pairs: &mut dyn Iterator<Item = (usize, usize)>| pairs.map(|(i, j)| (x[i] - x[j]).abs()).sum::<f64>();
    let within_left = sum(&mut (0..tau).flat_map(|i| (i + 1..tau).map(move |k| (i, k))));
    let within_right = sum(&mut (tau..kappa).flat_map(|j| (j + 1..kappa).map(move |k| (j, k))));
    let between = sum(&mut (0..tau).flat_map(|i| (tau..kappa).map(move |j| (i, j))));
    energy((tau, kappa - tau), (within_left, within_right, between))
}

/// The best split of `x`: the largest q over `min_size ≤ τ` and `τ + min_size ≤ κ ≤ n`; on a
/// tie, the smaller τ, then the larger κ. O(n²) time, O(n) memory.
pub fn best_split(x: &[f64], min_size: usize) -> Option<Split> {
    let (n, m) = (x.len(), min_size.max(1));
    if n < 2 * m {
        return None;
    }
    let d = |i: usize, j: usize| (x[i] - x[j]).abs();
    // prefix[b]: the sum of distances within [0, b).
    let mut prefix = vec![0.0; n + 1];
    for b in 1..=n {
        prefix[b] = prefix[b - 1] + (0..b - 1).map(|i| d(i, b - 1)).sum::<f64>();
    }
    // column[j]: the sum of |x_i - x_j| for τ ≤ i < j, kept as τ moves left, so that the sum
    // within the right part [τ, κ) is a running sum of columns τ+1..κ-1.
    let mut column = vec![0.0; n];
    let mut best: Option<Split> = None;
    for tau in (1..n).rev() {
        for (j, c) in column.iter_mut().enumerate().skip(tau + 1) {
            *c += d(tau, j);
        }
        if tau < m || n - tau < m {
            continue;
        }
        let mut within_right = 0.0;
        for kappa in tau + 1..=n {
            within_right += if kappa >= tau + 2 { column[kappa - 1] } else { 0.0 };
            if kappa - tau < m {
                continue;
            }
            let between = prefix[kappa] - prefix[tau] - within_right;
            let q = energy((tau, kappa - tau), (prefix[tau], within_right, between));
            // τ goes down and κ up, so a tie goes to the smaller τ and then the larger κ.
            if best.is_none_or(|b| q >= b.q) {
                best = Some(Split { tau, kappa, q });
            }
        }
    }
    best
}

/// The best split over the segments between `cuts` (sorted, from 0 to n): (index in `x`, q).
fn best_of_segments(x: &[f64], cuts: &[usize], min_size: usize) -> Option<(usize, f64)> {
    cuts.windows(2)
        .filter_map(|w| best_split(&x[w[0]..w[1]], min_size).map(|s| (w[0] + s.tau, s.q)))
        .max_by(|a, b| a.1.total_cmp(&b.1).then(b.0.cmp(&a.0)))
}

/// The shuffles of a permutation test of `q`, the best split given `cuts`: the values shuffled
/// within each segment, at most `settings.permutations` times, until `stop_at` of them reached
/// q. Returns (hits, shuffles done).
fn shuffles_reaching(
    x: &[f64],
    (cuts, q): (&[usize], f64),
    settings: Settings,
    rng: &mut fastrand::Rng,
    stop_at: usize,
) -> (usize, usize) {
    let mut shuffled = x.to_vec();
    let mut hits = 0;
    for done in 1..=settings.permutations {
        for w in cuts.windows(2) {
            rng.shuffle(&mut shuffled[w[0]..w[1]]);
        }
        if best_of_segments(&shuffled, cuts, settings.min_size).is_some_and(|(_, s)| s >= q - q.abs() * 1e-12) {
            hits += 1;
            if hits == stop_at {
                return (hits, done);
            }
        }
    }
    (hits, settings.permutations)
}

/// The p-value of a test's shuffles: hits / shuffles once `STOP_AT_HITS` reached the statistic,
/// else (1 + hits) / (1 + permutations).
fn p_value((hits, done): (usize, usize), settings: Settings) -> f64 {
    if hits >= STOP_AT_HITS {
        hits as f64 / done as f64
    } else {
        (1 + hits) as f64 / (1 + settings.permutations) as f64
    }
}

/// The next split of `x` given the `cuts` found so far, and its permutation p-value.
fn next_split(x: &[f64], cuts: &[usize], settings: Settings, rng: &mut fastrand::Rng) -> Option<ChangePoint> {
    let (index, q) = best_of_segments(x, cuts, settings.min_size)?;
    let shuffles = shuffles_reaching(x, (cuts, q), settings, rng, STOP_AT_HITS);
    Some(ChangePoint { index, q, p_value: p_value(shuffles, settings) })
}

/// The test of the whole series for any change: its best split and p-value (the first step of
/// `change_points`, with the same shuffles). None for a series too short to split.
pub fn test(x: &[f64], settings: Settings) -> Option<ChangePoint> {
    let mut rng = fastrand::Rng::with_seed(settings.seed);
    next_split(x, &[0, x.len()], settings, &mut rng)
}

/// Whether `test(x, settings)` gives a p below `level`, with no more shuffles than it takes to
/// know: once (1 + hits) / (1 + permutations) reaches `level` it cannot end below it, and when
/// that takes fewer than `STOP_AT_HITS` hits, neither can a test stopped at those (its p is then
/// at least STOP_AT_HITS / permutations, above `level`).
pub fn below(x: &[f64], settings: Settings, level: f64) -> bool {
    let mut rng = fastrand::Rng::with_seed(settings.seed);
    let Some((_, q)) = best_of_segments(x, &[0, x.len()], settings.min_size) else { return false };
    let enough = (level * (1 + settings.permutations) as f64 - 1.0).ceil().max(1.0) as usize;
    let stop_at = enough.min(STOP_AT_HITS);
    let shuffles = shuffles_reaching(x, (&[0, x.len()], q), settings, &mut rng, stop_at);
    !(shuffles.0 == stop_at && stop_at < STOP_AT_HITS) && p_value(shuffles, settings) < level
}

/// C(n, k) as a float.
fn choose(n: usize, k: usize) -> f64 {
    (0..k).map(|i| (n - i) as f64 / (i + 1) as f64).product()
}

/// The p the test gives, on average, to the cleanest possible step at the newest `k` of `n`
/// values (each of them beyond every older one, by a margin far above their spread): the
/// smallest it can give there. Of the C(n, k) equally likely sets of places a shuffle puts
/// the k values in, two reach the step's statistic (the k at the end, and at the start), so a
/// shuffle reaches it with the chance 2 / C(n, k), and p = (1 + B · 2 / C(n, k)) / (1 + B) with
/// B permutations.
pub fn clean_step_p(n: usize, k: usize, permutations: usize) -> f64 {
    let b = permutations as f64;
    (1.0 + b * 2.0 / choose(n, k)) / (1.0 + b)
}

/// Every significant change point of `x`, in order, each split tested at `settings.alpha`.
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
        // x = 0 0 0 10 10 10, the right part to the end (κ = 6). τ = 3: between pairs all
        // differ by 10 (mean 10), within 0: q = 3·3/6 · (2·10) = 30. τ = 2: between 8 pairs, 6
        // of them 10 apart (mean 7.5); right part {0, 10, 10, 10}: 6 pairs, 3 of them 10 apart
        // (mean 5): q = 2·4/6 · (15 - 5).
        let x = [0.0, 0.0, 0.0, 10.0, 10.0, 10.0];
        assert!(close(statistic(&x, 3, 6), 30.0));
        assert!(close(statistic(&x, 2, 6), 40.0 / 3.0));
        assert!(close(statistic(&x, 4, 6), 40.0 / 3.0), "symmetric");
        // τ = 1: left {0} has no pair (its term is 0); between: 2 of 5 pairs are 0, 3 are 10
        // (mean 6); right {0, 0, 10, 10, 10}: 6 of 10 pairs are 10 (mean 6): q = 5/6 · (12 - 6).
        assert!(close(statistic(&x, 1, 6), 5.0));
        // κ short of the end: τ = 3, κ = 5: left {0, 0, 0}, right {10, 10}: q = 3·2/5 · 20.
        assert!(close(statistic(&x, 3, 5), 24.0));
        assert_eq!(best_split(&x, 1), Some(Split { tau: 3, kappa: 6, q: 30.0 }));
    }

    /// A change that is undone (0 0 0 10 10 10 0 0 0): with the right part ending at the
    /// segment's end, its best split has q = 8 (τ = 3: between 18 pairs, 9 of them 10 apart,
    /// mean 5; right {10 ×3, 0 ×3}: 9 of 15 pairs 10 apart, mean 6: q = 3·6/9 · (10 - 6)); with
    /// κ searched, as the authors define it, the bump is seen whole: τ = 3, κ = 6, q = 30.
    #[test]
    fn the_end_of_the_right_part_is_searched_too() {
        let x = [0.0, 0.0, 0.0, 10.0, 10.0, 10.0, 0.0, 0.0, 0.0];
        assert!(close(statistic(&x, 3, 9), 8.0) && close(statistic(&x, 6, 9), 8.0));
        assert_eq!(best_split(&x, 3), Some(Split { tau: 3, kappa: 6, q: 30.0 }));
    }

    /// The O(n²) search finds what trying every (τ, κ) by the definition finds.
    #[test]
    fn the_search_is_the_definition() {
        let mut rng = fastrand::Rng::with_seed(3);
        for (n, min_size) in [(6, 3), (7, 2), (12, 3), (15, 1), (20, 4)] {
            let x: Vec<f64> = (0..n).map(|i| rng.f64() * 10.0 + if i > n / 2 { 3.0 } else { 0.0 }).collect();
            let mut brute: Option<Split> = None;
            for tau in min_size..=n - min_size {
                for kappa in tau + min_size..=n {
                    let q = statistic(&x, tau, kappa);
                    let better =
                        brute.is_none_or(|b| q > b.q + 1e-9 || (close(q, b.q) && tau == b.tau && kappa > b.kappa));
                    if better {
                        brute = Some(Split { tau, kappa, q });
                    }
                }
            }
            let found = best_split(&x, min_size).unwrap();
            let brute = brute.unwrap();
            assert!(
                (found.tau, found.kappa) == (brute.tau, brute.kappa) && close(found.q, brute.q),
                "{found:?} {brute:?}"
            );
        }
    }

    #[test]
    fn the_minimum_size_bounds_the_splits() {
        assert_eq!(best_split(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], 3).map(|s| (s.tau, s.kappa)), Some((3, 6)));
        assert_eq!(best_split(&[1.0, 2.0, 3.0, 4.0, 5.0], 3), None);
    }

    /// The smallest p at a step in the newest k of n values: of the C(n, k) sets of places for
    /// the k stepped values, exactly two (the end and the start) give the step's q, counted by
    /// trying every set; and the p with 999 permutations, by hand: n = 6, k = 3:
    /// (1 + 999 · 2/20) / 1000 = 0.1009; n = 8: (1 + 999 · 2/56) / 1000 = 0.036679; n = 10:
    /// (1 + 999 · 2/120) / 1000 = 0.01765.
    #[test]
    fn a_clean_step_at_the_newest_runs_has_a_smallest_p() {
        for n in 6..=10 {
            let k = 3;
            let step =
                |places: &[usize]| -> Vec<f64> { (0..n).map(|i| f64::from(u8::from(places.contains(&i)))).collect() };
            let newest: Vec<usize> = (n - k..n).collect();
            let q = best_split(&step(&newest), k).unwrap().q;
            let mut reaching = 0;
            for a in 0..n {
                for b in a + 1..n {
                    for c in b + 1..n {
                        reaching += usize::from(best_split(&step(&[a, b, c]), k).unwrap().q >= q - 1e-12);
                    }
                }
            }
            assert_eq!(reaching, 2, "n = {n}");
        }
        assert!(close(clean_step_p(6, 3, 999), 0.1009));
        assert!((clean_step_p(8, 3, 999) - 0.036_679).abs() < 1e-6);
        assert!(close(clean_step_p(10, 3, 999), 0.01765));
        // A doubling at the newest 3 of 6 gets about that p, never one below 0.05: here 20
        // shuffles of 151 reached it (the test stops there), p = 0.132.
        let doubled = test(&[100.0, 101.0, 99.0, 200.0, 202.0, 198.0], Settings::default()).unwrap();
        assert_eq!((doubled.index, doubled.p_value), (3, 20.0 / 151.0));
    }

    /// `below` stops early and answers as the whole test does.
    #[test]
    fn below_is_the_test_s_p_against_a_level() {
        let mut rng = fastrand::Rng::with_seed(5);
        for shift in [0.0, 0.5, 1.0, 2.0, 4.0] {
            let x: Vec<f64> = (0..16).map(|i| rng.f64() + if i >= 13 { shift } else { 0.0 }).collect();
            let p = test(&x, Settings::default()).unwrap().p_value;
            for level in [0.0005, 0.0033, 0.01, 0.021, 0.05, 0.2] {
                assert_eq!(below(&x, Settings::default(), level), p < level, "shift {shift}, p {p}, level {level}");
            }
        }
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
