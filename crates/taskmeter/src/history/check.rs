//! `history check`: in each series, the newest change point (E-Divisive means, `changepoint`)
//! and what it did: a *regression* when the runs since are worse than the runs before it by
//! more than the noise threshold, an *improvement* when better, else no change worth a verdict.
//!
//! A check is one gate over all its series: each series is first tested for any change at all
//! (`changepoint::test`), and Holm's adjustment over those tests decides which series are
//! searched for change points; so stable series on the same machine fail a check with a chance
//! of at most alpha, however many series it reads.

use super::changepoint::{self, Settings};
use super::series::{Key, RunValues};
use serde::Serialize;

/// The newest change of a series.
#[derive(Clone, Debug, Serialize)]
pub struct Change {
    /// The first run after the change.
    pub run: i64,
    pub started_at: String,
    pub label: Option<String>,
    /// Runs before the change (since the one before it) and since.
    pub runs_before: usize,
    pub runs_after: usize,
    /// The mean of each side's run means.
    pub before: f64,
    pub after: f64,
    /// (after - before) / |before|.
    pub change: Option<f64>,
    pub q: f64,
    pub p_value: f64,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Verdict {
    /// Worse beyond the threshold since a change among the newest runs (`recent`).
    Regression,
    /// A regression that began before the newest runs: reported, not failed on (it was seen
    /// when it was new).
    EarlierRegression,
    Improvement,
    /// A significant change within the noise threshold.
    SmallChange,
    NoChange,
    /// Fewer runs than two segments of the minimum size.
    TooFewRuns,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Regression => "regression",
            Verdict::EarlierRegression => "earlier regression",
            Verdict::Improvement => "improvement",
            Verdict::SmallChange => "change within the threshold",
            Verdict::NoChange => "no change",
            Verdict::TooFewRuns => "too few runs",
        }
    }
}

#[derive(Clone, Debug, Serialize)]
pub struct Finding {
    pub series: Key,
    pub runs: usize,
    /// The p-value of the series' test for any change, and after Holm's adjustment over the
    /// check's series; None for a series too short to test.
    pub p_value: Option<f64>,
    pub p_adjusted: Option<f64>,
    pub change: Option<Change>,
    pub verdict: Verdict,
}

/// The p-value of `runs` (one value a run: the mean of its repetitions) having any change;
/// None when too short for two segments of the minimum size.
pub fn screen(runs: &[RunValues], settings: Settings) -> Option<f64> {
    let values: Vec<f64> = runs.iter().map(RunValues::mean).collect();
    if values.len() < 2 * settings.min_size {
        return None;
    }
    changepoint::test(&values, settings).map(|c| c.p_value)
}

/// Checks every series as one family: each screened, Holm's adjustment over the screens, then
/// the change points of the series whose adjusted p is below alpha.
pub fn check_all<'a>(
    series: impl IntoIterator<Item = (&'a Key, &'a [RunValues])>,
    (higher_is_better, threshold, recent): (bool, f64, usize),
    settings: Settings,
) -> Vec<Finding> {
    let series: Vec<(&Key, &[RunValues])> = series.into_iter().collect();
    let screened: Vec<Option<f64>> = series.iter().map(|(_, runs)| screen(runs, settings)).collect();
    let tested: Vec<f64> = screened.iter().flatten().copied().collect();
    let mut adjusted = taskmeter_stats::holm(&tested).into_iter();
    series
        .iter()
        .zip(screened)
        .map(|((key, runs), p)| {
            let p_adjusted = p.and_then(|_| adjusted.next());
            check(key, runs, (higher_is_better, threshold, recent), settings, (p, p_adjusted))
        })
        .collect()
}

/// Checks one series (one value per run: the mean of its repetitions) given its screen's p and
/// adjusted p; a regression counts when its change starts among the newest `recent` runs.
fn check(
    series: &Key,
    runs: &[RunValues],
    (higher_is_better, threshold, recent): (bool, f64, usize),
    settings: Settings,
    (p_value, p_adjusted): (Option<f64>, Option<f64>),
) -> Finding {
    let values: Vec<f64> = runs.iter().map(RunValues::mean).collect();
    let finding =
        |change, verdict| Finding { series: series.clone(), runs: runs.len(), p_value, p_adjusted, change, verdict };
    if values.len() < 2 * settings.min_size {
        return finding(None, Verdict::TooFewRuns);
    }
    if p_adjusted.is_none_or(|p| p >= settings.alpha) {
        return finding(None, Verdict::NoChange);
    }
    // The first step repeats the screen (the same shuffles): its split is the one found.
    let points = changepoint::change_points(&values, settings);
    let Some(last) = points.last() else { return finding(None, Verdict::NoChange) };
    let from = points.len().checked_sub(2).map_or(0, |i| points[i].index);
    let mean = |v: &[f64]| v.iter().sum::<f64>() / v.len() as f64;
    let (before, after) = (mean(&values[from..last.index]), mean(&values[last.index..]));
    let change = (before != 0.0).then(|| (after - before) / before.abs());
    let verdict = match change {
        Some(c) if c.abs() > threshold && (c > 0.0) == higher_is_better => Verdict::Improvement,
        Some(c) if c.abs() > threshold && values.len() - last.index <= recent => Verdict::Regression,
        Some(c) if c.abs() > threshold => Verdict::EarlierRegression,
        _ => Verdict::SmallChange,
    };
    let at = &runs[last.index];
    let change = Change {
        run: at.run,
        started_at: at.started_at.clone(),
        label: at.label.clone(),
        runs_before: last.index - from,
        runs_after: values.len() - last.index,
        before,
        after,
        change,
        q: last.q,
        p_value: last.p_value,
    };
    finding(Some(change), verdict)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn series(values: &[f64]) -> Vec<RunValues> {
        values
            .iter()
            .enumerate()
            .map(|(i, v)| RunValues {
                run: i as i64 + 1,
                started_at: format!("t{i:02}"),
                label: None,
                values: vec![*v],
            })
            .collect()
    }

    fn key() -> Key {
        Key { experiment: "sleep".into(), subject: "thread".into(), point: "-".into(), machine: "m".into(), ..Key::default() }
    }

    /// Normal draws (Box-Muller) of mean `mu` and deviation `sd`.
    fn normal(rng: &mut fastrand::Rng, n: usize, mu: f64, sd: f64) -> Vec<f64> {
        (0..n)
            .map(|_| {
                let (u, v) = (1.0 - rng.f64(), rng.f64());
                mu + sd * (-2.0 * u.ln()).sqrt() * (std::f64::consts::TAU * v).cos()
            })
            .collect()
    }

    /// One series checked alone (a family of one).
    fn alone(values: &[f64], higher_is_better: bool, recent: usize) -> Finding {
        let runs = series(values);
        check_all([(&key(), runs.as_slice())], (higher_is_better, 0.05, recent), Settings::default()).remove(0)
    }

    #[test]
    fn a_lateness_that_grows_at_the_newest_runs_is_a_regression() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut values = normal(&mut rng, 12, 60_000.0, 1_500.0);
        values.extend(normal(&mut rng, 4, 110_000.0, 1_500.0));
        let f = alone(&values, false, 10);
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        assert_eq!(f.p_value, f.p_adjusted, "a family of one");
        let change = f.change.unwrap();
        assert_eq!((change.run, change.runs_after), (13, 4));
        assert!(change.change.unwrap() > 0.7 && change.p_value <= 0.05, "{change:?}");
        // Seen as new within the newest 4 runs, not within the newest 3.
        assert_eq!(alone(&values, false, 3).verdict, Verdict::EarlierRegression);
        // The same shift in a throughput is an improvement.
        assert_eq!(alone(&values, true, 10).verdict, Verdict::Improvement);
    }

    #[test]
    fn short_series_are_said_to_be_short() {
        let f = alone(&[1.0, 2.0, 3.0], false, 10);
        assert_eq!((f.verdict, f.p_value, f.p_adjusted), (Verdict::TooFewRuns, None, None));
    }

    /// A check is one family: a series whose own test is significant (p about 0.01) is not
    /// searched when Holm's adjustment over 15 series puts it above alpha.
    #[test]
    fn a_check_is_one_family() {
        let mut rng = fastrand::Rng::with_seed(11);
        let mut shifted = normal(&mut rng, 14, 100.0, 5.0);
        shifted.extend(normal(&mut rng, 6, 108.0, 5.0));
        let alone = alone(&shifted, false, 10);
        let p = alone.p_value.unwrap();
        assert!(p < 0.05, "{alone:?}");
        let stable: Vec<Vec<RunValues>> = (0..14).map(|_| series(&normal(&mut rng, 20, 100.0, 5.0))).collect();
        let keys: Vec<Key> = (0..15).map(|i| Key { subject: format!("r{i}"), ..key() }).collect();
        let mut all = vec![series(&shifted)];
        all.extend(stable);
        let findings =
            check_all(keys.iter().zip(&all).map(|(k, s)| (k, s.as_slice())), (false, 0.05, 10), Settings::default());
        let first = &findings[0];
        assert_eq!(first.p_value, Some(p), "the same test, the same shuffles");
        assert!(first.p_adjusted.unwrap() >= p, "{first:?}");
        let ps: Vec<f64> = findings.iter().map(|f| f.p_value.unwrap()).collect();
        let adjusted: Vec<f64> = findings.iter().map(|f| f.p_adjusted.unwrap()).collect();
        assert_eq!(adjusted, taskmeter_stats::holm(&ps));
        for f in &findings {
            let searched = f.p_adjusted.unwrap() < 0.05;
            assert_eq!(f.change.is_some() || f.verdict == Verdict::SmallChange, searched, "{f:?}");
        }
    }

    /// The false-alarm rate docs/history.md gives, exactly, with the fixed seeds: 200 stable
    /// histories of 15 series of 20 i.i.d. normal runs (sd 5 % of the mean), each checked as
    /// one family. `cargo run --release --example check_rates` runs 1,000 of each.
    #[test]
    fn stable_histories_rarely_fail_a_check() {
        let mut rng = fastrand::Rng::with_seed(2026);
        let keys: Vec<Key> = (0..15).map(|i| Key { subject: format!("r{i}"), ..key() }).collect();
        let (mut failed, mut changes) = (0, 0);
        for _ in 0..200 {
            let all: Vec<Vec<RunValues>> = (0..15).map(|_| series(&normal(&mut rng, 20, 100.0, 5.0))).collect();
            let findings = check_all(
                keys.iter().zip(&all).map(|(k, s)| (k, s.as_slice())),
                (false, 0.05, 10),
                Settings::default(),
            );
            failed += usize::from(findings.iter().any(|f| f.verdict == Verdict::Regression));
            changes += findings.iter().filter(|f| f.change.is_some()).count();
        }
        assert_eq!((failed, changes), (4, 10), "failed checks, change points in 3,000 stable series");
    }
}
