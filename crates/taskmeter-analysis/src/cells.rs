//! A runtime at a point over its repetitions (`--repeat`): what the tables, charts and
//! `compare` show. With two or more repetitions an estimate is the mean of the repetitions'
//! values and its range the 95 % range for the mean another invocation with as many
//! repetitions would give (`taskmeter_stats::mean_range`, from the variation between whole
//! worker processes); with one there is no range: the samples of one process are not
//! independent draws (they share its minute of machine state), and a range from them would be
//! false.

use taskmeter_model::run::{Metric, Row, RowStatus, RunRecord};
use taskmeter_stats::{mean_range, Interval, Summary};

/// The repetitions of one runtime at one point.
pub struct Cell<'a> {
    pub runtime: &'a str,
    pub point: usize,
    /// Repetitions with statistics, in repetition order.
    pub measured: Vec<&'a Row>,
    /// Repetitions without (failed, skipped), with their reasons.
    pub unmeasured: Vec<&'a Row>,
}

/// Every runtime's cell at `point`, in `--runtimes` order (runtimes with no row left out).
pub fn cells(record: &RunRecord, point: usize) -> Vec<Cell<'_>> {
    record
        .settings
        .runtimes
        .iter()
        .filter_map(|runtime| {
            let mut rows: Vec<&Row> =
                record.rows.iter().filter(|r| r.point == point && &r.runtime == runtime).collect();
            rows.sort_by_key(|r| r.repetition);
            let (measured, unmeasured): (Vec<&Row>, Vec<&Row>) = rows.into_iter().partition(|r| r.statistics.is_some());
            (!measured.is_empty() || !unmeasured.is_empty()).then_some(Cell { runtime, point, measured, unmeasured })
        })
        .collect()
}

impl<'a> Cell<'a> {
    pub fn repetitions(&self) -> usize {
        self.measured.len()
    }

    /// The summaries of `metric`, one per measured repetition.
    pub fn summaries(&self, metric: Metric) -> impl Iterator<Item = &'a Summary> + '_ {
        self.measured.iter().filter_map(move |r| Some(r.statistics.as_ref()?.get(metric)))
    }

    /// The mean over repetitions of a per-repetition value (None if a repetition lacks it).
    pub fn mean_of(&self, value: impl Fn(&Row) -> Option<f64>) -> Option<f64> {
        let values: Option<Vec<f64>> = self.measured.iter().map(|r| value(r)).collect();
        let values = values.filter(|v| !v.is_empty())?;
        Some(values.iter().sum::<f64>() / values.len() as f64)
    }

    /// The mean of a per-repetition value with its 95 % range for another invocation's mean
    /// (`mean_range`); with one repetition, its value and no range (`degrees_of_freedom` None).
    pub fn estimate(&self, value: impl Fn(&Row) -> Option<f64>) -> Option<Interval> {
        let values: Option<Vec<f64>> = self.measured.iter().map(|r| value(r)).collect();
        mean_range(&values?)
    }

    /// The mean of `metric`'s `statistic` (e.g. the mean, the mean |value - expected|) with its
    /// range from the repetitions (none with one).
    pub fn mean_estimate(&self, metric: Metric, statistic: Statistic) -> Option<Interval> {
        self.estimate(|r| statistic.of(r.statistics.as_ref()?.get(metric)))
    }

    /// The pooled standard deviation of `metric` within the repetitions (the jitter), weighting
    /// each repetition's variance by its n - 1.
    pub fn pooled_std(&self, metric: Metric) -> Option<f64> {
        let (mut sum, mut weight) = (0.0, 0.0);
        for s in self.summaries(metric) {
            let (Some(sd), n) = (s.std, s.count) else { continue };
            sum += sd * sd * (n - 1) as f64;
            weight += (n - 1) as f64;
        }
        (weight > 0.0).then(|| (sum / weight).sqrt())
    }

    pub fn samples(&self, metric: Metric) -> u64 {
        self.summaries(metric).map(|s| s.count).sum()
    }

    /// A percentile-like statistic as the mean over repetitions.
    pub fn mean_percentile(&self, metric: Metric, pick: impl Fn(&Summary) -> Option<i64>) -> Option<f64> {
        self.mean_of(|r| pick(r.statistics.as_ref()?.get(metric)).map(|v| v as f64))
    }

    pub fn max(&self, metric: Metric) -> Option<i64> {
        self.summaries(metric).filter_map(|s| s.max).max()
    }

    pub fn min(&self, metric: Metric) -> Option<i64> {
        self.summaries(metric).filter_map(|s| s.min).min()
    }

    /// A count summed over the repetitions.
    pub fn sum(&self, count: impl Fn(&Row) -> Option<u64>) -> u64 {
        self.measured.iter().filter_map(|r| count(r)).sum()
    }

    /// The status that tells the reader most: interrupted, then partial, then ok.
    pub fn status(&self) -> RowStatus {
        let has = |status| self.measured.iter().any(|r| r.status == status);
        if has(RowStatus::Interrupted) {
            RowStatus::Interrupted
        } else if has(RowStatus::Partial) {
            RowStatus::Partial
        } else {
            RowStatus::Ok
        }
    }
}

/// Which statistic of a summary an estimate is made of.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Statistic {
    /// The mean of the values.
    Mean,
    /// The mean |value - expected|.
    MeanDeviation,
}

impl Statistic {
    pub fn of(self, s: &Summary) -> Option<f64> {
        match self {
            Statistic::Mean => s.mean,
            Statistic::MeanDeviation => s.mean_absolute_deviation,
        }
    }
}

/// What the ranges of a run are and rest on: its repetitions, or (one repetition) nothing.
pub fn basis_note(record: &RunRecord) -> String {
    match record.settings.repeat {
        0 | 1 => "one repetition: no range, since the samples of one worker are not independent draws (--repeat 3 or more gives 95 % ranges from whole repetitions)".into(),
        n => taskmeter_stats::range_note(n as usize, "each its own worker process"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskmeter_model::run::{PerMetric, Row};

    fn row(runtime: &str, repetition: u32, values: &[i64]) -> Row {
        let summary = Summary::of(values, &vec![0; values.len()]);
        Row {
            repetition,
            statistics: Some(PerMetric::from_fn(|_| summary.clone())),
            ..Row::new(runtime, RowStatus::Ok)
        }
    }

    #[test]
    fn repetitions_give_a_range_for_another_invocation_and_a_pooled_jitter() {
        // Repetition means 10, 12, 14 (each of two samples mean ± 1): mean 12, range for another
        // invocation's mean ± 4.302653 x 2 x sqrt(1/3 + 1/3) = ± 7.0262 (the t interval of this
        // mean, ± 4.968, is sqrt 2 narrower); pooled sd sqrt((2 + 2 + 2) / 3) = 1.414.
        let rows = [row("a", 1, &[9, 11]), row("a", 2, &[11, 13]), row("a", 3, &[13, 15])];
        let cell = Cell { runtime: "a", point: 0, measured: rows.iter().collect(), unmeasured: Vec::new() };
        let i = cell.mean_estimate(Metric::Lateness, Statistic::Mean).unwrap();
        assert_eq!(i.value, 12.0);
        assert!((i.half_width - 7.026_2).abs() < 1e-4 && !i.log_scale, "{i:?}");
        assert!((cell.pooled_std(Metric::Lateness).unwrap() - 2f64.sqrt()).abs() < 1e-12);
        assert_eq!(cell.samples(Metric::Lateness), 6);
        assert_eq!((cell.min(Metric::Lateness), cell.max(Metric::Lateness)), (Some(9), Some(15)));
        assert_eq!(cell.mean_percentile(Metric::Lateness, |s| s.p50), Some(11.0));
    }

    #[test]
    fn one_repetition_has_no_interval() {
        let rows = [row("a", 1, &[9, 11])];
        let cell = Cell { runtime: "a", point: 0, measured: rows.iter().collect(), unmeasured: Vec::new() };
        let i = cell.mean_estimate(Metric::Lateness, Statistic::Mean).unwrap();
        assert_eq!((i.value, i.half_width, i.degrees_of_freedom), (10.0, 0.0, None));
    }
}
