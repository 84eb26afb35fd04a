//! `compare`'s judgement of one runtime at one point in two runs: the score its verdict is about
//! (the median for `lateness` and `busy`, the mean |value - expected| for `actual` and `full`;
//! with repetitions, the mean of the repetitions' scores), the test it rests on, always on the
//! quantity the score is made of, and the verdict: *improved* or *regressed* only when the
//! change is both significant (p < alpha) and beyond the noise threshold.

use crate::analysis::cells::Cell;
use crate::analysis::histogram;
use crate::model::run::{Metric, Row, METRICS};
use std::io::BufRead;
use std::path::Path;
use taskmeter_record::stats::{mann_whitney_counts, welch_p};

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    Improved,
    Regressed,
    NoChange,
}

impl Verdict {
    pub fn as_str(self) -> &'static str {
        match self {
            Verdict::Improved => "improved",
            Verdict::Regressed => "regressed",
            Verdict::NoChange => "no change",
        }
    }
}

/// How `compare` tests a runtime at a point, best first; always on the quantity the verdict's
/// threshold is applied to.
pub const TESTS: &str = "\"reps\": Welch's t-test on the repetitions' scores (both runs have 2 or more repetitions); \
\"raw\": Mann-Whitney U on every measured sample's value (lateness, busy) or |value - expected| (actual, full), \
from samples.csv (both runs kept --raw); \"hist\": the same on the stored histograms (5 significant digits), \
not when a row holds negative values, which the histograms clamp to 0; \"none\": no test possible, no verdict";

#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Test {
    Repetitions,
    Raw,
    Histograms,
    None,
}

impl Test {
    pub fn name(self) -> &'static str {
        match self {
            Test::Repetitions => "reps",
            Test::Raw => "raw",
            Test::Histograms => "hist",
            Test::None => "none",
        }
    }
}

pub struct Comparison {
    pub old_median: f64,
    pub new_median: f64,
    pub median_change: Option<f64>,
    pub old_p99: f64,
    pub new_p99: f64,
    pub p99_change: Option<f64>,
    /// The change of the score the verdict is about.
    pub score_change: Option<f64>,
    pub test: Test,
    pub p_value: Option<f64>,
    pub verdict: Verdict,
}

/// The score of one repetition: its median (lateness, busy) or its mean |value - expected|
/// (actual, full); lower is better.
fn score(row: &Row, metric: Metric) -> Option<f64> {
    let s = row.statistics.as_ref()?.get(metric);
    match metric {
        Metric::Lateness | Metric::Busy => s.p50.map(|v| v as f64),
        Metric::Actual | Metric::Full => s.mean_absolute_deviation,
    }
}

/// A run's raw samples (when it kept them) and the index of the point in it.
pub type RawPoint<'a> = Option<(&'a RawSamples, usize)>;

pub fn compare_cells(
    old: &Cell,
    new: &Cell,
    metric: Metric,
    raw: (RawPoint, RawPoint),
    threshold: f64,
    alpha: f64,
) -> Result<Comparison, String> {
    let scores = |c: &Cell| -> Vec<f64> { c.measured.iter().filter_map(|r| score(r, metric)).collect() };
    let mean = |v: &[f64]| (!v.is_empty()).then(|| v.iter().sum::<f64>() / v.len() as f64);
    let (old_scores, new_scores) = (scores(old), scores(new));
    let (old_score, new_score) = (mean(&old_scores).unwrap_or(0.0), mean(&new_scores).unwrap_or(0.0));
    let (test, p_value) = if old_scores.len() >= 2 && new_scores.len() >= 2 {
        (Test::Repetitions, welch_p(&old_scores, &new_scores).or(Some(1.0)))
    } else if let (Some((a, pa)), Some((b, pb))) = raw {
        match (a.counts(old.runtime, pa, metric), b.counts(new.runtime, pb, metric)) {
            (Some(x), Some(y)) => (Test::Raw, Some(mann_whitney_counts(&x, &y))),
            _ => (Test::None, None),
        }
    } else {
        match (stored(old, metric)?, stored(new, metric)?) {
            (Some(x), Some(y)) => (Test::Histograms, Some(mann_whitney_counts(&x, &y))),
            _ => (Test::None, None),
        }
    };
    let change = |a: f64, b: f64| (a != 0.0).then(|| (b - a) / a.abs());
    let value = |c: &Cell, pick: fn(&taskmeter_record::stats::Summary) -> Option<i64>| c.mean_percentile(metric, pick).unwrap_or(0.0);
    let (old_median, new_median) = (value(old, |s| s.p50), value(new, |s| s.p50));
    let (old_p99, new_p99) = (value(old, |s| s.p99), value(new, |s| s.p99));
    let verdict = p_value.map_or(Verdict::NoChange, |p| verdict(p, alpha, old_score, new_score, threshold));
    Ok(Comparison {
        old_median,
        new_median,
        median_change: change(old_median, new_median),
        old_p99,
        new_p99,
        p99_change: change(old_p99, new_p99),
        score_change: change(old_score, new_score),
        test,
        p_value,
        verdict,
    })
}

/// The stored distribution of the quantity the verdict is about, the repetitions merged; None
/// when the histograms cannot represent it (negative values, clamped to 0, or an older run.json
/// without |value - expected|).
fn stored(cell: &Cell, metric: Metric) -> Result<Option<Vec<(i64, u64)>>, String> {
    let mut texts = Vec::new();
    for row in &cell.measured {
        let text = match metric {
            Metric::Lateness | Metric::Busy => {
                if row.statistics.as_ref().and_then(|s| s.get(metric).min).is_some_and(|m| m < 0) {
                    return Ok(None);
                }
                row.histograms.as_ref().map(|h| h.get(metric))
            }
            Metric::Actual | Metric::Full => row.deviation_histograms.as_ref().and_then(|d| d.get(metric)),
        };
        let Some(text) = text else { return Ok(None) };
        texts.push(text);
    }
    let h = histogram::merge(texts)?;
    Ok(Some(histogram::counts(&h)))
}

/// Every measured sample of a run kept with `--raw` (samples.csv), by runtime, point and metric:
/// the value, or |value - expected| for `actual` and `full`.
pub struct RawSamples {
    values: std::collections::HashMap<(String, usize, Metric), Vec<i64>>,
}

impl RawSamples {
    /// None when the run did not keep its samples.
    pub fn load(path: &Path) -> Result<Option<RawSamples>, String> {
        let folder = if path.is_dir() { path.to_path_buf() } else { path.parent().unwrap_or(Path::new(".")).to_path_buf() };
        let Some((file, reader)) = crate::model::samples::open(&folder)? else { return Ok(None) };
        let mut lines = reader.lines();
        let header_line = lines.next().transpose().map_err(|e| format!("cannot read {}: {e}", file.display()))?.unwrap_or_default();
        let header: Vec<&str> = header_line.split(',').collect();
        let column = |name: &str| header.iter().position(|h| *h == name).ok_or_else(|| format!("{} has no column {name}", file.display()));
        let (runtime, point, phase, expected) = (column("runtime")?, column("point")?, column("phase")?, column("expected_ns")?);
        let metric_columns: Vec<(Metric, usize)> = METRICS.iter().map(|m| Ok((*m, column(&format!("{}_ns", m.name()))?))).collect::<Result<_, String>>()?;
        let mut values: std::collections::HashMap<(String, usize, Metric), Vec<i64>> = Default::default();
        for (number, line) in lines.enumerate() {
            let line = line.map_err(|e| format!("cannot read {}: {e}", file.display()))?;
            let fields: Vec<&str> = line.split(',').collect();
            let bad = || format!("{} line {} is not a sample", file.display(), number + 2);
            if fields.get(phase) != Some(&"measure") {
                continue;
            }
            let int = |i: usize| fields.get(i).and_then(|f| f.parse::<i64>().ok()).ok_or_else(bad);
            let point = fields.get(point).and_then(|f| f.parse::<usize>().ok()).ok_or_else(bad)?;
            let expected = int(expected)?;
            for (metric, index) in &metric_columns {
                // `full` is empty for a sample that follows lost ones.
                if *metric == Metric::Full && fields.get(*index) == Some(&"") {
                    continue;
                }
                let value = int(*index)?;
                let quantity = if matches!(metric, Metric::Actual | Metric::Full) { (value - expected).abs() } else { value };
                values.entry((fields[runtime].to_string(), point, *metric)).or_default().push(quantity);
            }
        }
        Ok(Some(RawSamples { values }))
    }

    /// (value, count) in increasing order.
    fn counts(&self, runtime: &str, point: usize, metric: Metric) -> Option<Vec<(i64, u64)>> {
        let mut values = self.values.get(&(runtime.to_string(), point, metric))?.clone();
        values.sort_unstable();
        let mut counts: Vec<(i64, u64)> = Vec::new();
        for v in values {
            match counts.last_mut() {
                Some(last) if last.0 == v => last.1 += 1,
                _ => counts.push((v, 1)),
            }
        }
        Some(counts)
    }
}

/// Improved or regressed only when the change is significant and beyond the noise threshold;
/// a lower score is better.
pub fn verdict(p_value: f64, alpha: f64, old_score: f64, new_score: f64, threshold: f64) -> Verdict {
    let beyond_noise = old_score != 0.0 && ((new_score - old_score) / old_score.abs()).abs() > threshold;
    if p_value < alpha && beyond_noise {
        if new_score > old_score { Verdict::Regressed } else { Verdict::Improved }
    } else {
        Verdict::NoChange
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(values: &[i64]) -> hdrhistogram::Histogram<u64> {
        histogram::of(values)
    }

    fn cell_rows(runtime: &str, repetitions: &[&[i64]]) -> Vec<Row> {
        repetitions
            .iter()
            .enumerate()
            .map(|(i, values)| {
                let summary = taskmeter_record::stats::Summary::of(values, &vec![0; values.len()]);
                let encoded = histogram::encode(&h(values));
                Row {
                    repetition: i as u32 + 1,
                    sequence: i,
                    statistics: Some(crate::model::run::PerMetric::from_fn(|_| summary.clone())),
                    histograms: Some(crate::model::run::PerMetric::from_fn(|_| encoded.clone())),
                    deviation_histograms: Some(crate::model::run::DeviationHistograms { actual: encoded.clone(), full: encoded.clone() }),
                    ..Row::new(runtime, crate::model::run::RowStatus::Ok)
                }
            })
            .collect()
    }

    fn cell<'a>(rows: &'a [Row]) -> Cell<'a> {
        Cell { runtime: &rows[0].runtime, point: 0, measured: rows.iter().collect(), unmeasured: Vec::new() }
    }

    #[test]
    fn the_test_follows_what_both_runs_kept() {
        let slow: Vec<i64> = (0..200).map(|i| 2000 + i).collect();
        let fast: Vec<i64> = (0..200).map(|i| 1000 + i).collect();
        // Two repetitions on each side: Welch on the repetitions' medians.
        let (old, new) = (cell_rows("a", &[&slow, &slow[1..]]), cell_rows("a", &[&fast, &fast[1..]]));
        let c = compare_cells(&cell(&old), &cell(&new), Metric::Lateness, (None, None), 0.05, 0.05).unwrap();
        assert_eq!((c.test, c.verdict), (Test::Repetitions, Verdict::Improved));
        // One repetition each, no raw samples: the stored histograms.
        let (old, new) = (cell_rows("a", &[&slow]), cell_rows("a", &[&fast]));
        let c = compare_cells(&cell(&old), &cell(&new), Metric::Lateness, (None, None), 0.05, 0.05).unwrap();
        assert_eq!((c.test, c.verdict), (Test::Histograms, Verdict::Improved));
        assert!(c.p_value.unwrap() < 1e-6);
        // A row with a wake-up before its deadline: the histograms clamp it, so no test decides.
        let mut early = fast.clone();
        early[0] = -5;
        let new = cell_rows("a", &[&early]);
        let c = compare_cells(&cell(&old), &cell(&new), Metric::Lateness, (None, None), 0.05, 0.05).unwrap();
        assert_eq!((c.test, c.p_value, c.verdict), (Test::None, None, Verdict::NoChange));
        // actual and full are tested on |value - expected|, their own histograms.
        let c = compare_cells(&cell(&old), &cell(&cell_rows("a", &[&fast])), Metric::Actual, (None, None), 0.05, 0.05).unwrap();
        assert_eq!(c.test, Test::Histograms);
    }

}
