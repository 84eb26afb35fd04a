//! Every statistic taskmeter reports, in one place: the run tables, `compare`, `net`, `bench`
//! and the `record()` report all use these definitions, and [`format`] writes their durations.
//!
//! - `mean` is the arithmetic mean; `sample_std` the *sample* standard deviation (divisor n - 1),
//!   absent for n < 2.
//! - A percentile is the nearest-rank one: the smallest value with at least p % of the values at
//!   or below it (the value at 1-based rank ceil(p / 100 * n)), so it is always a measured value.
//! - [`Summary`]: count, mean, std, min, p50 ... p99.99, max, and the seed studies' columns over
//!   `deviation = |value - reference|` (`mean_absolute_deviation`, `deviation_std` (n - 1),
//!   `deviation_min`, `deviation_max`); every field but `count` is absent when there are no values.
//! - Ranges, what every report prints: [`mean_range`] (a mean over an invocation's repetitions),
//!   [`geometric_mean_range`] and [`ratio_range`] (on a log scale: METG, ratios), each the 95 %
//!   range for the value *another invocation* with as many repetitions would give (a confidence
//!   interval of this invocation's mean, [`t_interval`], covers another invocation's mean far
//!   less often than 95 %).
//! - Tests: [`student_p`] and [`welch_p`] (two sets of runs), [`prediction_p`] (one run against a set),
//!   [`mann_whitney_counts`] (distributions); [`holm`] adjusts a family of p-values so that the
//!   chance of any false rejection among them is at most alpha.

pub mod format;

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
        let mut sorted = values.to_vec();
        sorted.sort_unstable();
        let deviations: Vec<i64> =
            values.iter().zip(references).map(|(v, r)| (*v as i128 - *r as i128).unsigned_abs() as i64).collect();
        Summary::from_parts(&Moments::of(values), percentiles_of_sorted(&sorted), &Moments::of(&deviations))
    }

    /// A summary from the moments of the values, their percentiles (as [`PERCENTILES`]) and the
    /// moments of their deviations from the references.
    pub fn from_parts(values: &Moments, percentiles: Option<[i64; 5]>, deviations: &Moments) -> Summary {
        if values.count == 0 {
            return Summary::default();
        }
        let p = |i: usize| percentiles.map(|p| p[i]);
        let has_deviations = deviations.count > 0;
        Summary {
            count: values.count,
            mean: values.mean(),
            std: values.sample_std(),
            min: Some(values.min),
            p50: p(0),
            p90: p(1),
            p99: p(2),
            p99_9: p(3),
            p99_99: p(4),
            max: Some(values.max),
            mean_absolute_deviation: deviations.mean(),
            deviation_std: deviations.sample_std(),
            deviation_min: has_deviations.then_some(deviations.min),
            deviation_max: has_deviations.then_some(deviations.max),
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

/// A 95 % range around an estimate, and what it rests on.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct Interval {
    pub value: f64,
    /// Half the width of the range on its scale: the range is `value ± half_width`, or on a log
    /// scale `value · e^(± half_width)`.
    pub half_width: f64,
    /// Standard error of `value` (on a log scale, of its natural logarithm).
    pub standard_error: f64,
    /// Degrees of freedom of the t quantile used (None: no range, one repetition).
    pub degrees_of_freedom: Option<f64>,
    /// A ratio or METG: the range is symmetric about the logarithm, so never below 0.
    #[serde(default, skip_serializing_if = "is_false")]
    pub log_scale: bool,
}

fn is_false(b: &bool) -> bool {
    !*b
}

impl Interval {
    /// A single value: no range (no degrees of freedom, no width), as one repetition's value is
    /// shown.
    pub fn single(value: f64) -> Interval {
        Interval { value, half_width: 0.0, standard_error: 0.0, degrees_of_freedom: None, log_scale: false }
    }

    /// Whether it has a range (it rests on two or more repetitions).
    pub fn has_range(&self) -> bool {
        self.degrees_of_freedom.is_some()
    }

    /// The same estimate in another unit (`factor` above 0, as a share in percent): on a log scale
    /// the width, a factor, stays.
    pub fn scaled(&self, factor: f64) -> Interval {
        match self.log_scale {
            true => Interval { value: self.value * factor, ..*self },
            false => Interval {
                value: self.value * factor,
                half_width: self.half_width * factor,
                standard_error: self.standard_error * factor,
                ..*self
            },
        }
    }

    /// The range's lower end.
    pub fn low(&self) -> f64 {
        if self.log_scale {
            self.value * (-self.half_width).exp()
        } else {
            self.value - self.half_width
        }
    }

    /// The range's upper end.
    pub fn high(&self) -> f64 {
        if self.log_scale {
            self.value * self.half_width.exp()
        } else {
            self.value + self.half_width
        }
    }
}

/// The two-sided 95 % quantile of Student's t with `df` degrees of freedom (1.96 as df grows).
pub fn t_975(df: f64) -> f64 {
    use statrs::distribution::{ContinuousCDF, StudentsT};
    StudentsT::new(0.0, 1.0, df).expect("df > 0").inverse_cdf(0.975)
}

/// How many times wider the range for another invocation's mean is than the confidence interval
/// of this one's: the difference of two independent means of n repetitions each has the
/// standard deviation `s · sqrt(1/n + 1/n)`, √2 times one mean's standard error `s / √n`.
pub const ANOTHER_INVOCATION: f64 = std::f64::consts::SQRT_2;

/// The mean of `values` (one per repetition of one invocation) with the 95 % range for the mean
/// another invocation with as many repetitions would give:
/// `mean ± t(0.975, n - 1) · s · sqrt(1/n + 1/n)`, s the sample standard deviation between
/// repetitions. One value: itself, no range; none: None.
pub fn mean_range(values: &[f64]) -> Option<Interval> {
    match values {
        [] => None,
        [one] => Some(Interval::single(*one)),
        many => t_interval(many).map(|ci| Interval { half_width: ci.half_width * ANOTHER_INVOCATION, ..ci }),
    }
}

/// What a printed range is, in the words every report uses under its table: "95 % range for
/// another invocation's mean, from 3 repetitions (each its own worker process): mean ± t(0.975,
/// 2) · s · √(2/3), s between them".
pub fn range_note(repetitions: usize, each: &str) -> String {
    format!(
        "95 % range for another invocation's mean, from {repetitions} repetitions ({each}): mean ± t(0.975, {}) · s · √(2/{repetitions}), s between them",
        repetitions.saturating_sub(1)
    )
}

/// The geometric mean of `values` (one per repetition, all above 0) with the 95 % range for the
/// geometric mean another invocation would give, on a log scale:
/// `exp(mean ln ± t(0.975, n - 1) · s_ln · sqrt(1/n + 1/n))`, so never below 0 (METG, whose
/// repetitions spread by factors). One value: itself; none, or a value at or below 0: None.
pub fn geometric_mean_range(values: &[f64]) -> Option<Interval> {
    match values {
        _ if values.iter().any(|v| *v <= 0.0) => None,
        [] => None,
        [one] => Some(Interval::single(*one)),
        many => {
            let on_logs = mean_range(&many.iter().map(|v| v.ln()).collect::<Vec<f64>>())?;
            Some(Interval { value: on_logs.value.exp(), log_scale: true, ..on_logs })
        }
    }
}

/// `a / b` with the 95 % range for the ratio another invocation would give, on a log scale: the
/// standard error of `ln(a / b)` from both (independent) means' relative errors (delta method),
/// `sqrt((se_a / a)^2 + (se_b / b)^2)`, times [`ANOTHER_INVOCATION`] and `t(0.975, df)`, df the
/// smaller of the two; the range `a / b · e^(± half_width)` is never below 0. Without a range
/// on either side (one repetition), or a value at or below 0: the plain ratio.
pub fn ratio_range(a: &Interval, b: &Interval) -> Interval {
    let ratio = a.value / b.value;
    let (Some(da), Some(db)) = (a.degrees_of_freedom, b.degrees_of_freedom) else { return Interval::single(ratio) };
    if a.value <= 0.0 || b.value <= 0.0 {
        return Interval::single(ratio);
    }
    // The standard error of ln(value): relative to the value, unless it is on a log scale already.
    let of_log = |i: &Interval| if i.log_scale { i.standard_error } else { i.standard_error / i.value };
    let standard_error = (of_log(a).powi(2) + of_log(b).powi(2)).sqrt();
    let degrees_of_freedom = da.min(db);
    Interval {
        value: ratio,
        half_width: t_975(degrees_of_freedom) * ANOTHER_INVOCATION * standard_error,
        standard_error,
        degrees_of_freedom: Some(degrees_of_freedom),
        log_scale: true,
    }
}

/// The mean of `values` (one per repetition) with the 95 % Student-t confidence interval *of
/// this mean*: `mean ± t(0.975, n - 1) · s / √n`. It covers another invocation's mean far less
/// often than 95 % (each mean has its own error): the reports print [`mean_range`]. None for
/// fewer than two values.
pub fn t_interval(values: &[f64]) -> Option<Interval> {
    let n = values.len();
    let sd = float_sample_std(values)?;
    let df = (n - 1) as f64;
    let standard_error = sd / (n as f64).sqrt();
    Some(Interval {
        value: values.iter().sum::<f64>() / n as f64,
        half_width: t_975(df) * standard_error,
        standard_error,
        degrees_of_freedom: Some(df),
        log_scale: false,
    })
}

/// What a t-test compares, as a shift from one set of values to another: the difference (the
/// second's mean less the first's, or a new value less the others' mean), its standard error and
/// its degrees of freedom. Its p-value and its 95 % range are the same test read two ways: the
/// range leaves out 0 exactly when p is below 0.05.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Shift {
    pub difference: f64,
    pub standard_error: f64,
    pub degrees_of_freedom: f64,
}

impl Shift {
    /// The two-sided p-value of no shift.
    pub fn p(&self) -> f64 {
        use statrs::distribution::{ContinuousCDF, StudentsT};
        let t = self.difference / self.standard_error;
        let tail = StudentsT::new(0.0, 1.0, self.degrees_of_freedom).expect("df > 0").cdf(-t.abs());
        (2.0 * tail).min(1.0)
    }

    /// The 95 % range of the shift: `difference ± t(0.975, df) · standard error`.
    pub fn range(&self) -> (f64, f64) {
        let half = t_975(self.degrees_of_freedom) * self.standard_error;
        (self.difference - half, self.difference + half)
    }
}

/// Welch's t-test between two sets of values (one per repetition): `b`'s mean less `a`'s, or
/// None when either has fewer than two values or both have no variance.
pub fn welch_shift(a: &[f64], b: &[f64]) -> Option<Shift> {
    let (sa, sb) = (float_sample_std(a)?, float_sample_std(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let (va, vb) = (sa * sa / na, sb * sb / nb);
    if va + vb == 0.0 {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    Some(Shift {
        difference: mean(b) - mean(a),
        standard_error: (va + vb).sqrt(),
        degrees_of_freedom: (va + vb).powi(2) / (va * va / (na - 1.0) + vb * vb / (nb - 1.0)),
    })
}

/// Two-sided p-value of Welch's t-test between two sets of values (one per repetition), or
/// None when either has fewer than two values or both have no variance.
pub fn welch_p(a: &[f64], b: &[f64]) -> Option<f64> {
    welch_shift(a, b).map(|s| s.p())
}

/// Student's t-test between two sets of values with a pooled variance, n_a + n_b - 2 degrees
/// of freedom: `b`'s mean less `a`'s, or None when either has fewer than two values or both have
/// no variance.
pub fn student_shift(a: &[f64], b: &[f64]) -> Option<Shift> {
    let (sa, sb) = (float_sample_std(a)?, float_sample_std(b)?);
    let (na, nb) = (a.len() as f64, b.len() as f64);
    let pooled = ((na - 1.0) * sa * sa + (nb - 1.0) * sb * sb) / (na + nb - 2.0);
    if pooled == 0.0 {
        return None;
    }
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    Some(Shift {
        difference: mean(b) - mean(a),
        standard_error: (pooled * (1.0 / na + 1.0 / nb)).sqrt(),
        degrees_of_freedom: na + nb - 2.0,
    })
}

/// Two-sided p-value of Student's t-test between two sets of values with a pooled variance,
/// n_a + n_b - 2 degrees of freedom (4 at 3 a side, where Welch's can fall to 2). Its level is
/// exact when the variances are equal; when one side's is far larger, with equal counts n, the
/// statistic tends to a t with n - 1 degrees of freedom judged against the quantile of 2n - 2,
/// and its level rises to 10.9 % at 3 a side, 8.2 % at 5 and 6.9 % at 8. None when either has
/// fewer than two values or both have no variance.
pub fn student_p(a: &[f64], b: &[f64]) -> Option<f64> {
    student_shift(a, b).map(|s| s.p())
}

/// One new value `x` against `values` (n >= 2) drawn from the same normal distribution: `x`
/// less their mean, with the standard error `s · sqrt(1 + 1/n)` and n - 1 degrees of freedom
/// (the prediction interval's test). None for fewer than two values or none of variance.
pub fn prediction_shift(values: &[f64], x: f64) -> Option<Shift> {
    let s = float_sample_std(values)?;
    if s == 0.0 {
        return None;
    }
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    Some(Shift { difference: x - mean, standard_error: s * (1.0 + 1.0 / n).sqrt(), degrees_of_freedom: n - 1.0 })
}

/// Two-sided p-value of one new value `x` against `values` (n >= 2) drawn from the same normal
/// distribution: `t = (x - mean) / (s · sqrt(1 + 1/n))`, n - 1 degrees of freedom (the
/// prediction interval's test). None for fewer than two values or none of variance.
pub fn prediction_p(values: &[f64], x: f64) -> Option<f64> {
    prediction_shift(values, x).map(|s| s.p())
}

/// Holm's step-down adjustment of a family of p-values (Holm 1979), in their order: the k-th
/// smallest becomes `max over j <= k of min(1, (m - j + 1) · p_(j))`. Rejecting every hypothesis
/// whose adjusted p is below alpha keeps the chance of one or more false rejections at most
/// alpha, whatever the dependence between the tests.
pub fn holm(p_values: &[f64]) -> Vec<f64> {
    let m = p_values.len();
    let mut order: Vec<usize> = (0..m).collect();
    order.sort_by(|a, b| p_values[*a].total_cmp(&p_values[*b]));
    let mut adjusted = vec![0.0; m];
    let mut running = 0.0_f64;
    for (rank, index) in order.into_iter().enumerate() {
        running = running.max(((m - rank) as f64 * p_values[index]).min(1.0));
        adjusted[index] = running;
    }
    adjusted
}

/// Sample standard deviation (n - 1) of floats; None for fewer than two.
fn float_sample_std(values: &[f64]) -> Option<f64> {
    let n = values.len();
    if n < 2 {
        return None;
    }
    let mean = values.iter().sum::<f64>() / n as f64;
    Some((values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1) as f64).sqrt())
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

/// The [`PERCENTILES`] of sorted values (None when there are none).
pub fn percentiles_of_sorted(sorted: &[i64]) -> Option<[i64; 5]> {
    (!sorted.is_empty()).then(|| PERCENTILES.map(|(_, q)| sorted[nearest_rank(q, sorted.len()) - 1]))
}

/// 1-based nearest rank of the percentile `q` (parts per 100,000) among `n` sorted values.
pub fn nearest_rank(q: u64, n: usize) -> usize {
    let rank = (q as u128 * n as u128).div_ceil(100_000) as usize;
    rank.clamp(1, n)
}

pub fn mean(values: &[i64]) -> f64 {
    Moments::of(values).mean().unwrap_or(f64::NAN)
}

/// Sample standard deviation (divisor n - 1); None for fewer than two values.
pub fn sample_std(values: &[i64]) -> Option<f64> {
    Moments::of(values).sample_std()
}

/// Count, mean, sample standard deviation, min and max of values that arrive one at a time, in
/// constant memory and exactly: integer sums of the values and of their squares, both taken
/// from the first value (so they stay small), give the variance as one exact fraction
/// `(n S2 - S1^2) / (n (n - 1))` before the one rounding to f64.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Moments {
    pub count: u64,
    shift: i64,
    sum: i128,
    sum_squares: i128,
    pub min: i64,
    pub max: i64,
}

impl Moments {
    pub fn of(values: &[i64]) -> Moments {
        let mut m = Moments::default();
        values.iter().for_each(|v| m.add(*v));
        m
    }

    #[inline]
    pub fn add(&mut self, value: i64) {
        if self.count == 0 {
            (self.shift, self.min, self.max) = (value, value, value);
        }
        // Within 64 bits (values less than 2^63 apart), the square is one 64 x 64 multiply.
        let (d, square) = match value.checked_sub(self.shift) {
            Some(d) => (d as i128, d as i128 * d as i128),
            None => {
                let d = value as i128 - self.shift as i128;
                (d, d * d)
            }
        };
        self.count += 1;
        self.sum += d;
        self.sum_squares += square;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// Adds `value` `n` times, as `n` calls of [`Moments::add`] would.
    #[inline]
    pub fn add_n(&mut self, value: i64, n: u64) {
        if n == 0 {
            return;
        }
        if self.count == 0 {
            (self.shift, self.min, self.max) = (value, value, value);
        }
        let (d, n128) = (value as i128 - self.shift as i128, n as i128);
        self.count += n;
        self.sum += n128 * d;
        self.sum_squares += n128 * d * d;
        self.min = self.min.min(value);
        self.max = self.max.max(value);
    }

    /// `count` values from `min` to `max`, given the sum of the values and of their squares
    /// (each exact modulo 2^128: see [`Moments::rebased`]).
    pub fn from_sums(count: u64, sum: i128, sum_squares: i128, min: i64, max: i64) -> Moments {
        if count == 0 {
            return Moments::default();
        }
        Moments { count, shift: 0, sum, sum_squares, min, max }
    }

    /// The same values, their sums taken from `shift` instead: exact, so a set folded in any
    /// order and rebased on its first value has the sums (and every figure) of adding its
    /// values one by one. Computed modulo 2^128: terms on the way may pass i128 (a sum of
    /// squares from 0 of values near 2^53), the sums taken from a value of the set do not.
    pub fn rebased(self, shift: i64) -> Moments {
        if self.count == 0 {
            return self;
        }
        // Each value is d + k from the new shift, d its difference from the old.
        let (k, n) = (self.shift as i128 - shift as i128, self.count as i128);
        let sum_squares = self
            .sum_squares
            .wrapping_add(2i128.wrapping_mul(k).wrapping_mul(self.sum))
            .wrapping_add(n.wrapping_mul(k).wrapping_mul(k));
        Moments { shift, sum_squares, sum: self.sum.wrapping_add(n.wrapping_mul(k)), ..self }
    }

    /// The moments of the values' negations (their magnitudes, for values below 0). Values
    /// above `i64::MIN`.
    pub fn negated(self) -> Moments {
        Moments { shift: -self.shift, sum: -self.sum, min: -self.max, max: -self.min, ..self }
    }

    /// Adds another's values as if each had been added here: the sums, rebased on this one's
    /// shift, are exact integers, so the count, mean, standard deviation, min and max are those
    /// of adding them one by one (this one's first value stays the shift).
    pub fn merge(&mut self, other: &Moments) {
        if other.count == 0 {
            return;
        }
        if self.count == 0 {
            *self = *other;
            return;
        }
        // Each of other's values is d + k here, d its own difference from its shift.
        let k = other.shift as i128 - self.shift as i128;
        let n = other.count as i128;
        self.sum_squares += other.sum_squares + 2 * k * other.sum + n * k * k;
        self.sum += other.sum + n * k;
        self.count += other.count;
        self.min = self.min.min(other.min);
        self.max = self.max.max(other.max);
    }

    pub fn mean(&self) -> Option<f64> {
        (self.count > 0).then(|| self.shift as f64 + self.sum as f64 / self.count as f64)
    }

    pub fn sample_std(&self) -> Option<f64> {
        if self.count < 2 {
            return None;
        }
        let n = self.count as i128;
        let numerator =
            n.checked_mul(self.sum_squares).zip(self.sum.checked_mul(self.sum)).and_then(|(a, b)| a.checked_sub(b));
        let variance = match numerator {
            Some(numerator) => numerator as f64 / (n as f64 * (n - 1) as f64),
            // Beyond i128 (sums of 10^38): the same formula in floating point.
            None => (self.sum_squares as f64 - (self.sum as f64).powi(2) / n as f64) / (n - 1) as f64,
        };
        Some(variance.max(0.0).sqrt())
    }
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

/// The median of floats (the mean of the middle two for an even count); NaN for none.
pub fn median_f64(values: &[f64]) -> f64 {
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => v[n / 2],
        _ => (v[n / 2 - 1] + v[n / 2]) / 2.0,
    }
}

/// Two-sided p-value of the Mann-Whitney U test between two distributions given as (value,
/// count) in increasing order of value: mid-ranks for ties, the normal approximation with tie and
/// continuity corrections (accurate for the thousands of samples of a row).
pub fn mann_whitney_counts(ca: &[(i64, u64)], cb: &[(i64, u64)]) -> f64 {
    let (n1, n2) = (ca.iter().map(|c| c.1).sum::<u64>() as f64, cb.iter().map(|c| c.1).sum::<u64>() as f64);
    if n1 == 0.0 || n2 == 0.0 {
        return 1.0;
    }
    // Walk the distinct values of both in order, giving each tie group its mid-rank.
    let (mut i, mut j) = (0, 0);
    let (mut rank_sum_a, mut seen, mut tie_term) = (0f64, 0f64, 0f64);
    while i < ca.len() || j < cb.len() {
        let value = match (ca.get(i), cb.get(j)) {
            (Some(x), Some(y)) => x.0.min(y.0),
            (Some(x), None) => x.0,
            (None, Some(y)) => y.0,
            (None, None) => unreachable!(),
        };
        let ka = if ca.get(i).is_some_and(|x| x.0 == value) {
            i += 1;
            ca[i - 1].1 as f64
        } else {
            0.0
        };
        let kb = if cb.get(j).is_some_and(|y| y.0 == value) {
            j += 1;
            cb[j - 1].1 as f64
        } else {
            0.0
        };
        let t = ka + kb;
        let mid_rank = seen + (t + 1.0) / 2.0;
        rank_sum_a += ka * mid_rank;
        seen += t;
        tie_term += t * t * t - t;
    }
    let n = n1 + n2;
    let u = rank_sum_a - n1 * (n1 + 1.0) / 2.0;
    let mean = n1 * n2 / 2.0;
    let variance = n1 * n2 / 12.0 * ((n + 1.0) - tie_term / (n * (n - 1.0)).max(1.0));
    if variance <= 0.0 {
        return 1.0; // every value equal in both: nothing differs
    }
    let z = ((u - mean).abs() - 0.5).max(0.0) / variance.sqrt();
    use statrs::distribution::{ContinuousCDF, Normal};
    (2.0 * Normal::standard().cdf(-z)).min(1.0)
}

/// Counts of each distinct value of `values`, in increasing order, for [`mann_whitney_counts`].
pub fn value_counts(values: &[i64]) -> Vec<(i64, u64)> {
    let mut sorted = values.to_vec();
    sorted.sort_unstable();
    let mut counts: Vec<(i64, u64)> = Vec::new();
    for v in sorted {
        match counts.last_mut() {
            Some(last) if last.0 == v => last.1 += 1,
            _ => counts.push((v, 1)),
        }
    }
    counts
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A shift's range is its test read the other way: 1, 2, 3 against 4, 5, 6 (Student's: a
    /// difference of 3, pooled variance 1, standard error sqrt(2/3) = 0.8165, df 4, t(0.975, 4)
    /// = 2.7764) is 3 ± 2.2670; a shift as large as that half width has p = 0.05 exactly.
    #[test]
    fn a_shift_s_range_leaves_out_0_exactly_when_its_p_is_below_0_05() {
        let s = student_shift(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert_eq!((s.difference, s.degrees_of_freedom), (3.0, 4.0));
        let (low, high) = s.range();
        assert!((low - 0.7330).abs() < 1e-4 && (high - 5.2670).abs() < 1e-4, "{low} {high}");
        assert_eq!(student_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]), Some(s.p()));
        let edge = Shift { difference: high - s.difference, ..s };
        assert!((edge.p() - 0.05).abs() < 1e-9, "{}", edge.p());
        // Welch's and the prediction test, each against its own p.
        let w = welch_shift(&[1.0, 2.0, 4.0], &[4.0, 8.0]).unwrap();
        assert_eq!(welch_p(&[1.0, 2.0, 4.0], &[4.0, 8.0]), Some(w.p()));
        let q = prediction_shift(&[1.0, 2.0, 3.0], 6.0).unwrap();
        assert_eq!((q.difference, q.degrees_of_freedom), (4.0, 2.0));
        assert!((q.p() - 0.074180).abs() < 1e-5, "t = 4 / sqrt(4/3): {}", q.p());
    }

    #[test]
    fn merged_moments_are_those_of_all_the_values() {
        // 2, 4, 4, 4 and 5, 5, 7, 9 (shifts 2 and 5): mean 5, sample variance 32/7, as one.
        let (mut a, b) = (Moments::of(&[2, 4, 4, 4]), Moments::of(&[5, 5, 7, 9]));
        a.merge(&b);
        assert_eq!(a, Moments::of(&[2, 4, 4, 4, 5, 5, 7, 9]));
        assert_eq!(a.mean(), Some(5.0));
        assert!((a.sample_std().unwrap() - (32.0f64 / 7.0).sqrt()).abs() < 1e-12);
        let mut empty = Moments::default();
        empty.merge(&b);
        assert_eq!(empty, b);
        let mut c = b;
        c.merge(&Moments::default());
        assert_eq!(c, b);
        // Far apart and negative: the rebased sums stay exact.
        let (mut d, e) = (Moments::of(&[-3_000_000_000, 7]), Moments::of(&[9_000_000_000, -1]));
        d.merge(&e);
        assert_eq!(d, Moments::of(&[-3_000_000_000, 7, 9_000_000_000, -1]));
    }

    #[test]
    fn counted_rebased_and_negated_moments_are_those_of_the_values_one_by_one() {
        // 4, 4, 4 counted at once, then 2 and 9, rebased on 2 (the first value one by one):
        // the same sums as adding 2, 4, 4, 4, 9 in turn, and so the same mean and deviation.
        let mut counted = Moments::default();
        counted.add_n(4, 3);
        counted.add_n(7, 0);
        counted.add(2);
        counted.add(9);
        assert_eq!(counted.rebased(2), Moments::of(&[2, 4, 4, 4, 9]));
        assert_eq!((counted.count, counted.min, counted.max), (5, 2, 9));
        // Sums taken from 4 (by hand): 0 + 0 + 0 - 2 + 5 = 3; squares 4 + 25 = 29.
        assert_eq!((counted.sum, counted.sum_squares), (3, 29));
        assert_eq!(Moments::default().rebased(7), Moments::default());
        // -5, -1, -3 negated: 5, 1, 3, from the first value's magnitude.
        assert_eq!(Moments::of(&[-5, -1, -3]).negated(), Moments::of(&[5, 1, 3]));
        assert_eq!(Moments::of(&[-5, -1, -3]).negated().rebased(1), Moments::of(&[1, 3, 5]).rebased(1));
    }

    #[test]
    fn values_more_than_2_pow_63_apart_keep_exact_sums() {
        // 2^63 + 2^61 above the first value, the shift: a difference past 64 bits.
        let (low, high) = (-(1i64 << 62), (1i64 << 62) + (1i64 << 61));
        let span = (1i128 << 63) + (1i128 << 61);
        let m = Moments::of(&[low, high]);
        assert_eq!((m.count, m.min, m.max), (2, low, high));
        assert_eq!((m.sum, m.sum_squares), (span, span * span));
        assert_eq!(m.mean(), Some((1u64 << 60) as f64));
        assert!((m.sample_std().unwrap() / (span as f64 / 2f64.sqrt()) - 1.0).abs() < 1e-12);
    }

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
    fn t_quantiles_match_the_tables() {
        // Student's t, two-sided 95 %: df 1 12.706, 2 4.303, 4 2.776, 9 2.262, 29 2.045.
        for (df, t) in [(1.0, 12.7062), (2.0, 4.3027), (4.0, 2.7764), (9.0, 2.2622), (29.0, 2.0452)] {
            assert!((t_975(df) - t).abs() < 1e-3, "df {df}: {}", t_975(df));
        }
    }

    #[test]
    fn t_intervals_match_hand_computed_values() {
        // 10 12 14: mean 12, s = 2, se = 2/sqrt 3 = 1.1547, half width 4.3027 x 1.1547 = 4.968.
        let i = t_interval(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!(i.value, 12.0);
        assert!((i.standard_error - 1.154_700_5).abs() < 1e-6);
        assert!((i.half_width - 4.968_4).abs() < 1e-3, "{i:?}");
        assert_eq!(i.degrees_of_freedom, Some(2.0));
        assert_eq!(t_interval(&[5.0]), None);
    }

    #[test]
    fn the_range_for_another_invocation_is_sqrt_2_wider_than_the_confidence_interval() {
        // 10 12 14: mean 12, s = 2; t(0.975, 2) 4.302653 x 2 x sqrt(1/3 + 1/3) = 7.026202.
        let i = mean_range(&[10.0, 12.0, 14.0]).unwrap();
        assert_eq!((i.value, i.degrees_of_freedom, i.log_scale), (12.0, Some(2.0), false));
        assert!((i.half_width - 7.026_202).abs() < 1e-5, "{i:?}");
        assert!((i.low() - 4.973_798).abs() < 1e-5 && (i.high() - 19.026_202).abs() < 1e-5, "{i:?}");
        assert!((i.standard_error - 1.154_700_5).abs() < 1e-6, "the mean's own standard error");
        // One repetition: the value, no range; none: nothing.
        assert_eq!(mean_range(&[5.0]), Some(Interval::single(5.0)));
        assert!(!Interval::single(5.0).has_range());
        assert_eq!(mean_range(&[]), None);
    }

    #[test]
    fn a_ratio_s_range_is_on_a_log_scale_and_never_below_0() {
        // The best runtime's repetitions 50, 100, 150 ns (mean 100, s 50, se 28.8675), a steady
        // 10 us one (se 0): ratio 100. First order it was 100 ± 4.3027 x 28.87 = ± 124, below 0.
        // On a log scale: se of ln = 28.8675 / 100 = 0.288675, x sqrt 2 x 4.302653 = 1.756551;
        // 100 e^-1.756551 = 17.2639 to 100 e^1.756551 = 579.242.
        let best = mean_range(&[50.0, 100.0, 150.0]).unwrap();
        let steady = mean_range(&[10_000.0; 3]).unwrap();
        let r = ratio_range(&steady, &best);
        assert_eq!((r.value, r.degrees_of_freedom, r.log_scale), (100.0, Some(2.0), true));
        assert!((r.standard_error - 0.288_675).abs() < 1e-6, "{r:?}");
        assert!((r.half_width - 1.756_551).abs() < 1e-5, "{r:?}");
        assert!((r.low() - 17.263_9).abs() < 1e-3 && (r.high() - 579.242).abs() < 1e-2, "{r:?}");
        // Both relative errors add, and the smaller degrees of freedom are taken.
        let a = Interval { standard_error: 4.0, degrees_of_freedom: Some(4.0), ..Interval::single(200.0) };
        let b = Interval { standard_error: 1.0, degrees_of_freedom: Some(2.0), ..Interval::single(100.0) };
        let r = ratio_range(&a, &b);
        let se = (0.02f64.powi(2) + 0.01f64.powi(2)).sqrt();
        assert!((r.standard_error - se).abs() < 1e-12 && r.degrees_of_freedom == Some(2.0), "{r:?}");
        assert!((r.half_width - 4.302_653 * 2f64.sqrt() * se).abs() < 1e-6, "{r:?}");
        // One repetition on either side: the plain ratio.
        assert_eq!(ratio_range(&Interval::single(30.0), &b), Interval::single(0.3));
    }

    #[test]
    fn a_geometric_mean_s_range_is_on_a_log_scale() {
        // METG 900 and 1100 ns: geometric mean sqrt(990,000) = 994.987; logs 6.802395 and
        // 7.003065, s_ln 0.141897, t(0.975, 1) 12.706205 x 0.141897 x sqrt(1/2 + 1/2) = 1.802955;
        // 994.987 e^-1.802955 = 163.985 to 6037.13 (linear, Student-t: 1000 ± 1271, below 0).
        let i = geometric_mean_range(&[900.0, 1100.0]).unwrap();
        assert!((i.value - 994.987_437).abs() < 1e-5 && i.log_scale, "{i:?}");
        assert!((i.half_width - 1.802_955).abs() < 1e-5, "{i:?}");
        assert!((i.low() - 163.985).abs() < 1e-2 && (i.high() - 6037.13).abs() < 1e-1, "{i:?}");
        assert_eq!(geometric_mean_range(&[700.0]), Some(Interval::single(700.0)));
        assert_eq!(geometric_mean_range(&[700.0, 0.0]), None, "no logarithm of 0");
    }

    #[test]
    fn welch_matches_a_hand_computed_case() {
        // a = 1 2 3 (mean 2, var 1), b = 4 5 6 (mean 5, var 1): t = -3 / sqrt(2/3) = -3.6742,
        // df = (2/3)^2 / (2 x (1/9) / 2) = 4; p = 2 P(T4 < -3.6742) = 0.02131 (scipy ttest_ind
        // with equal_var=False gives 0.021312).
        let p = welch_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 6.0]).unwrap();
        assert!((p - 0.021312).abs() < 1e-5, "p = {p}");
        assert!((welch_p(&[1.0, 2.0, 3.0], &[1.0, 2.0, 3.0]).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(welch_p(&[1.0], &[2.0, 3.0]), None);
        assert_eq!(welch_p(&[2.0, 2.0], &[2.0, 2.0]), None);
    }

    #[test]
    fn student_matches_a_hand_computed_case() {
        // a = 1 2 3 (var 1), b = 4 5 9 (var 7): pooled var 4, t = -4 / sqrt(4 x 2/3) = -2.4495,
        // df 4; p = 2 P(T4 < -2.4495) = 0.070484 (numerical integration of the t density).
        let p = student_p(&[1.0, 2.0, 3.0], &[4.0, 5.0, 9.0]).unwrap();
        assert!((p - 0.070484).abs() < 1e-5, "p = {p}");
        assert_eq!(student_p(&[1.0], &[2.0, 3.0]), None);
        assert_eq!(student_p(&[2.0, 2.0], &[3.0, 3.0]), None);
    }

    #[test]
    fn prediction_matches_a_hand_computed_case() {
        // values 1 2 3 (mean 2, s 1), x = 6: t = 4 / sqrt(4/3) = 3.4641, df 2;
        // p = 2 P(T2 < -3.4641) = 0.074180 (scipy: 2 * t.sf(3.4641016, 2)).
        let p = prediction_p(&[1.0, 2.0, 3.0], 6.0).unwrap();
        assert!((p - 0.074180).abs() < 1e-5, "p = {p}");
        assert!((prediction_p(&[1.0, 2.0, 3.0], 2.0).unwrap() - 1.0).abs() < 1e-12);
        assert_eq!(prediction_p(&[1.0], 2.0), None);
        assert_eq!(prediction_p(&[2.0, 2.0], 3.0), None);
    }

    #[test]
    fn holm_matches_a_hand_computed_case() {
        // m = 4, sorted 0.01 0.02 0.03 0.5: 4 x 0.01 = 0.04, 3 x 0.02 = 0.06, 2 x 0.03 = 0.06,
        // 1 x 0.5 = 0.5 (R: p.adjust(c(0.03, 0.01, 0.5, 0.02), "holm") = 0.06 0.04 0.50 0.06).
        let adjusted = holm(&[0.03, 0.01, 0.5, 0.02]);
        let expected = [0.06, 0.04, 0.5, 0.06];
        for (a, e) in adjusted.iter().zip(expected) {
            assert!((a - e).abs() < 1e-12, "{adjusted:?}");
        }
        // Monotone and capped at 1: 3 x 0.4 = 1.2 -> 1, then max(1, 2 x 0.45) = 1.
        assert_eq!(holm(&[0.4, 0.45, 0.9]), vec![1.0, 1.0, 1.0]);
        assert!(holm(&[]).is_empty());
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

    fn mw(a: &[i64], b: &[i64]) -> f64 {
        mann_whitney_counts(&value_counts(a), &value_counts(b))
    }

    #[test]
    fn identical_samples_are_not_different() {
        let a: Vec<i64> = (0..1000).map(|i| 50_000 + (i * 37 % 1000)).collect();
        assert_eq!(mw(&a, &a), 1.0);
        assert_eq!(mw(&[5; 10], &[5; 10]), 1.0);
    }

    #[test]
    fn a_clear_shift_is_significant() {
        let a: Vec<i64> = (0..500).map(|i| 1000 + i).collect();
        let b: Vec<i64> = (0..500).map(|i| 1100 + i).collect();
        assert!(mw(&a, &b) < 1e-6);
    }

    #[test]
    fn mann_whitney_matches_a_hand_computed_small_case() {
        // a = 1 2 3, b = 4 5 6: U = 0, mean 4.5, variance 3*3*7/12 = 5.25;
        // z = (4.5 - 0.5) / sqrt(5.25) = 1.7457; p = erfc(z / sqrt 2) = 0.08086.
        let p = mw(&[1, 2, 3], &[4, 5, 6]);
        assert!((p - 0.08086).abs() < 1e-4, "p = {p}");
        // With ties: a = 1 1 2, b = 2 3 3: ranks 1.5 1.5 3.5 | 3.5 5.5 5.5; R_a = 6.5, U = 0.5;
        // tie term = 3 * (8 - 2) = 18; variance = 9/12 * (7 - 18/30) = 4.8;
        // z = (4.5 - 0.5 - 0.5) / sqrt(4.8) = 1.5975; p = 0.1101.
        let p = mw(&[1, 1, 2], &[2, 3, 3]);
        assert!((p - 0.1101).abs() < 1e-3, "p = {p}");
        // Negative values count as they are.
        assert!(mw(&[-30, -20, -10], &[10, 20, 30]) < 0.1);
    }

    #[test]
    fn medians_of_floats() {
        assert_eq!(median_f64(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median_f64(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median_f64(&[]).is_nan());
    }
}
