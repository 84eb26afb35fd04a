//! `history check`: in each series, the newest change point (E-Divisive means, `changepoint`)
//! and what it did: a *regression* when the runs since are worse than the runs before it by
//! more than the noise threshold, an *improvement* when better, else no change worth a verdict.

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
    pub change: Option<Change>,
    pub verdict: Verdict,
}

/// Checks one series (one value per run: the mean of its repetitions); a regression counts
/// when its change starts among the newest `recent` runs.
pub fn check(
    series: &Key,
    runs: &[RunValues],
    (higher_is_better, threshold, recent): (bool, f64, usize),
    settings: Settings,
) -> Finding {
    let values: Vec<f64> = runs.iter().map(RunValues::mean).collect();
    let finding = |change, verdict| Finding { series: series.clone(), runs: runs.len(), change, verdict };
    if values.len() < 2 * settings.min_size {
        return finding(None, Verdict::TooFewRuns);
    }
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
        Key { experiment: "sleep".into(), subject: "thread".into(), point: "-".into(), machine: "m".into() }
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

    #[test]
    fn a_lateness_that_grows_at_the_newest_runs_is_a_regression() {
        let mut rng = fastrand::Rng::with_seed(7);
        let mut values = normal(&mut rng, 12, 60_000.0, 1_500.0);
        values.extend(normal(&mut rng, 4, 110_000.0, 1_500.0));
        let f = check(&key(), &series(&values), (false, 0.05, 10), Settings::default());
        assert_eq!(f.verdict, Verdict::Regression, "{f:?}");
        let change = f.change.unwrap();
        assert_eq!((change.run, change.runs_after), (13, 4));
        assert!(change.change.unwrap() > 0.7 && change.p_value <= 0.05, "{change:?}");
        // Seen as new within the newest 4 runs, not within the newest 3.
        let f = check(&key(), &series(&values), (false, 0.05, 3), Settings::default());
        assert_eq!(f.verdict, Verdict::EarlierRegression, "{f:?}");
        // The same shift in a throughput is an improvement.
        assert_eq!(
            check(&key(), &series(&values), (true, 0.05, 10), Settings::default()).verdict,
            Verdict::Improvement
        );
    }

    #[test]
    fn short_series_are_said_to_be_short() {
        assert_eq!(
            check(&key(), &series(&[1.0, 2.0, 3.0]), (false, 0.05, 10), Settings::default()).verdict,
            Verdict::TooFewRuns
        );
    }

    /// The false-alarm rate docs/history.md gives: 1000 stable series of 20 i.i.d. normal runs.
    #[test]
    fn stable_series_rarely_raise_an_alarm() {
        let mut rng = fastrand::Rng::with_seed(2026);
        let (mut any_change, mut regressions) = (0, 0);
        for _ in 0..1000 {
            let values = normal(&mut rng, 20, 100.0, 5.0);
            let f = check(&key(), &series(&values), (false, 0.05, 10), Settings::default());
            any_change += usize::from(f.change.is_some());
            regressions += usize::from(f.verdict == Verdict::Regression);
        }
        eprintln!("false alarms in 1000 stable series: {any_change} change points, {regressions} regressions");
        assert!(any_change <= 80, "{any_change} of 1000 stable series had a change point");
        assert!(regressions <= 40, "{regressions} of 1000 stable series were a regression");
    }
}
