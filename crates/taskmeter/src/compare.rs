//! `taskmeter compare OLD NEW`: per runtime, point and metric, the change of the median and the
//! p99, with a verdict from a significance test and a noise threshold, as criterion does.
//!
//! The verdict is about a score, lower being better: the median for `lateness` and `busy`, the
//! mean distance from the expected sleep (the v1 study's mean absolute deviation) for `actual`
//! and `full`; with repetitions, the mean of the repetitions' scores. A change is *improved* or
//! *regressed* only when it is both significant (p < alpha) and larger than the noise threshold;
//! otherwise *no change*. The test is always on the quantity the score is made of (see
//! [`TESTS`]): Welch's t-test on the repetitions' scores when both runs have two or more;
//! otherwise the two-sided Mann-Whitney U test (ties by mid-ranks, normal approximation with tie
//! and continuity corrections) on every measured sample, exact from samples.csv or from the
//! stored histograms, which cannot test values below 0 (they clamp them) and then give no verdict.

use crate::histogram;
use crate::output::format_ns;
use crate::aggregate::{cells, Cell};
use crate::results::{self, Metric, Row, RunRecord, METRICS};
use hdrhistogram::Histogram;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

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

pub struct CompareOptions {
    pub old: PathBuf,
    pub new: PathBuf,
    /// None: every metric.
    pub metric: Option<Metric>,
    /// Relative change of the median below which nothing is a change (0.05 = 5 %).
    pub threshold: f64,
    pub alpha: f64,
}

/// Accepts a results folder or a run.json.
pub fn load_run(path: &Path) -> Result<RunRecord, String> {
    let file = if path.is_dir() { path.join("run.json") } else { path.to_path_buf() };
    if !file.exists() {
        return Err(format!("{} does not exist (expected a results folder or its run.json)", file.display()));
    }
    results::load(&file)
}

pub fn run(options: CompareOptions) -> Result<ExitCode, String> {
    if [&options.old, &options.new].iter().any(|p| is_bench(p)) {
        return compare_benches(&options);
    }
    let old = load_run(&options.old)?;
    let new = load_run(&options.new)?;
    if old.experiment != new.experiment {
        return Err(format!("cannot compare a '{}' run with a '{}' run", old.experiment, new.experiment));
    }
    let raw = (RawSamples::load(&options.old)?, RawSamples::load(&options.new)?);
    let metrics: Vec<Metric> = options.metric.map(|m| vec![m]).unwrap_or_else(|| METRICS.to_vec());
    println!(
        "compare {} ({}) -> {} ({})",
        options.old.display(),
        old.started_at,
        options.new.display(),
        new.started_at
    );
    println!("verdict: alpha {}, noise threshold {:.1} %, on the median (lateness, busy) or the mean |value - expected| (actual, full)", options.alpha, options.threshold * 100.0);
    println!("test: {}", TESTS);
    println!();
    let mut lines = vec![["runtime", "point", "metric", "median old -> new", "change", "p99 old -> new", "change", "score change", "test", "p", "verdict"]
        .map(str::to_string)
        .to_vec()];
    let mut regressions = 0;
    let mut unmatched = Vec::new();
    for point in &old.points {
        let label = point.label();
        let new_point = new.points.iter().find(|p| p.label() == label);
        for old_cell in cells(&old, point.index).into_iter().filter(|c| c.repetitions() > 0) {
            let new_cell = new_point.and_then(|p| cells(&new, p.index).into_iter().find(|c| c.runtime == old_cell.runtime));
            let Some(new_cell) = new_cell.filter(|c| c.repetitions() > 0) else {
                unmatched.push(format!("{} at {label}: no statistics in the new run", old_cell.runtime));
                continue;
            };
            let samples = (raw.0.as_ref().map(|r| (r, point.index)), raw.1.as_ref().zip(new_point).map(|(r, p)| (r, p.index)));
            for metric in &metrics {
                let c = compare_cells(&old_cell, &new_cell, *metric, samples, options.threshold, options.alpha)?;
                regressions += usize::from(c.verdict == Verdict::Regressed);
                lines.push(vec![
                    old_cell.runtime.to_string(),
                    label.clone(),
                    metric.name().into(),
                    format!("{} -> {}", format_ns(c.old_median), format_ns(c.new_median)),
                    percent(c.median_change),
                    format!("{} -> {}", format_ns(c.old_p99), format_ns(c.new_p99)),
                    percent(c.p99_change),
                    percent(c.score_change),
                    c.test.name().into(),
                    c.p_value.map_or("-".into(), |p| format!("{p:.3}")),
                    c.verdict.as_str().into(),
                ]);
            }
        }
    }
    for point in &new.points {
        for cell in cells(&new, point.index).into_iter().filter(|c| c.repetitions() > 0) {
            let in_old = old.points.iter().find(|p| p.label() == point.label()).is_some_and(|p| cells(&old, p.index).iter().any(|c| c.runtime == cell.runtime && c.repetitions() > 0));
            if !in_old {
                unmatched.push(format!("{} at {}: only in the new run", cell.runtime, point.label()));
            }
        }
    }
    if lines.len() == 1 {
        return Err("the two runs have no runtime and point in common".into());
    }
    Ok(print_verdicts(&lines, &unmatched, regressions))
}

/// How `compare` tests a runtime at a point, best first; always on the quantity the verdict's
/// threshold is applied to.
const TESTS: &str = "\"reps\": Welch's t-test on the repetitions' scores (both runs have 2 or more repetitions); \
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
    fn name(self) -> &'static str {
        match self {
            Test::Repetitions => "reps",
            Test::Raw => "raw",
            Test::Histograms => "hist",
            Test::None => "none",
        }
    }
}

/// The table, what was not compared, and the exit status: 1 when something regressed.
fn print_verdicts(lines: &[Vec<String>], unmatched: &[String], regressions: usize) -> ExitCode {
    print!("{}", crate::output::render_table(lines));
    for line in unmatched {
        println!("not compared: {line}");
    }
    println!();
    if regressions > 0 {
        println!("{regressions} regression(s) beyond the threshold");
        ExitCode::from(1)
    } else {
        println!("no regression beyond the threshold");
        ExitCode::SUCCESS
    }
}

fn percent(change: Option<f64>) -> String {
    change.map(|c| format!("{:+.1} %", c * 100.0)).unwrap_or_else(|| "n/a".into())
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
        (Test::Repetitions, crate::stats::welch_p(&old_scores, &new_scores).or(Some(1.0)))
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
    let value = |c: &Cell, pick: fn(&crate::stats::Summary) -> Option<i64>| c.mean_percentile(metric, pick).unwrap_or(0.0);
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
    Ok(Some(h.iter_recorded().map(|v| (h.lowest_equivalent(v.value_iterated_to()) as i64, v.count_at_value())).collect()))
}

/// Every measured sample of a run kept with `--raw` (samples.csv), by runtime, point and metric:
/// the value, or |value - expected| for `actual` and `full`.
pub struct RawSamples {
    values: std::collections::HashMap<(String, usize, Metric), Vec<i64>>,
}

impl RawSamples {
    /// None when the run did not keep its samples.
    fn load(path: &Path) -> Result<Option<RawSamples>, String> {
        let folder = if path.is_dir() { path.to_path_buf() } else { path.parent().unwrap_or(Path::new(".")).to_path_buf() };
        let file = folder.join("samples.csv");
        let Ok(text) = std::fs::read_to_string(&file) else { return Ok(None) };
        let mut lines = text.lines();
        let header: Vec<&str> = lines.next().unwrap_or_default().split(',').collect();
        let column = |name: &str| header.iter().position(|h| *h == name).ok_or_else(|| format!("{} has no column {name}", file.display()));
        let (runtime, point, phase, expected) = (column("runtime")?, column("point")?, column("phase")?, column("expected_ns")?);
        let metric_columns: Vec<(Metric, usize)> = METRICS.iter().map(|m| Ok((*m, column(&format!("{}_ns", m.name()))?))).collect::<Result<_, String>>()?;
        let mut values: std::collections::HashMap<(String, usize, Metric), Vec<i64>> = Default::default();
        for (number, line) in lines.enumerate() {
            let fields: Vec<&str> = line.split(',').collect();
            let bad = || format!("{} line {} is not a sample", file.display(), number + 2);
            if fields.get(phase) != Some(&"measure") {
                continue;
            }
            let int = |i: usize| fields.get(i).and_then(|f| f.parse::<i64>().ok()).ok_or_else(bad);
            let point = fields.get(point).and_then(|f| f.parse::<usize>().ok()).ok_or_else(bad)?;
            let expected = int(expected)?;
            for (metric, index) in &metric_columns {
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
fn verdict(p_value: f64, alpha: f64, old_score: f64, new_score: f64, threshold: f64) -> Verdict {
    let beyond_noise = old_score != 0.0 && ((new_score - old_score) / old_score.abs()).abs() > threshold;
    if p_value < alpha && beyond_noise {
        if new_score > old_score { Verdict::Regressed } else { Verdict::Improved }
    } else {
        Verdict::NoChange
    }
}

pub fn is_bench(path: &Path) -> bool {
    path.join("bench.json").exists() || path.file_name().is_some_and(|n| n == "bench.json")
}

pub fn load_bench(path: &Path) -> Result<crate::bench::BenchRecord, String> {
    let file = if path.is_dir() { path.join("bench.json") } else { path.to_path_buf() };
    let text = std::fs::read_to_string(&file).map_err(|e| format!("cannot read {}: {e}", file.display()))?;
    serde_json::from_str(&text).map_err(|e| format!("{} is not a bench.json of this version: {e}", file.display()))
}

/// `compare` of two `taskmeter bench` results, per scenario and input: the mean gap (1 / ips)
/// decides, tested on the gap distributions.
fn compare_benches(options: &CompareOptions) -> Result<ExitCode, String> {
    let (old, new) = (load_bench(&options.old)?, load_bench(&options.new)?);
    println!("compare {} ({}) -> {} ({})", options.old.display(), old.started_at, options.new.display(), new.started_at);
    println!(
        "verdict on the mean gap (1 / ips): two-sided Mann-Whitney U on the gaps, alpha {}, noise threshold {:.1} %\n",
        options.alpha,
        options.threshold * 100.0
    );
    let mut lines = vec![["scenario", "input", "ips old -> new", "change", "median gap old -> new", "p99 gap old -> new", "p", "verdict"]
        .map(str::to_string)
        .to_vec()];
    let (mut regressions, mut unmatched) = (0, Vec::new());
    let label = |r: &taskmeter_record::report::ScenarioResult| match &r.input {
        Some(input) => format!("{} with input {input}", r.scenario),
        None => r.scenario.clone(),
    };
    for o in &old.report.results {
        let Some(n) = new.report.results.iter().find(|n| n.scenario == o.scenario && n.input == o.input) else {
            unmatched.push(format!("{}: only in the old run", label(o)));
            continue;
        };
        let (Some((og, oh)), Some((ng, nh))) = (o.measured.gap.as_ref().zip(o.histograms.as_ref()), n.measured.gap.as_ref().zip(n.histograms.as_ref())) else {
            unmatched.push(format!("{}: no measured units in one of the runs", label(o)));
            continue;
        };
        let p_value = mann_whitney_p(&histogram::decode(&oh.gap)?, &histogram::decode(&nh.gap)?);
        let v = verdict(p_value, options.alpha, og.mean, ng.mean, options.threshold);
        regressions += usize::from(v == Verdict::Regressed);
        let ips = |r: &taskmeter_record::report::ScenarioResult| taskmeter_record::console::ips(r.measured.ips);
        lines.push(vec![
            o.scenario.clone(),
            o.input.clone().unwrap_or_else(|| "-".into()),
            format!("{} -> {}", ips(o), ips(n)),
            percent(o.measured.ips.zip(n.measured.ips).map(|(a, b)| (b - a) / a)),
            format!("{} -> {}", format_ns(og.median as f64), format_ns(ng.median as f64)),
            format!("{} -> {}", format_ns(og.p99 as f64), format_ns(ng.p99 as f64)),
            format!("{p_value:.3}"),
            v.as_str().into(),
        ]);
    }
    for n in &new.report.results {
        if !old.report.results.iter().any(|o| o.scenario == n.scenario && o.input == n.input) {
            unmatched.push(format!("{}: only in the new run", label(n)));
        }
    }
    if lines.len() == 1 {
        return Err("the two benchmarks have no measured scenario in common".into());
    }
    Ok(print_verdicts(&lines, &unmatched, regressions))
}

/// Two-sided p-value of the Mann-Whitney U test between two distributions.
pub fn mann_whitney_p(a: &Histogram<u64>, b: &Histogram<u64>) -> f64 {
    let counts = |h: &Histogram<u64>| -> Vec<(i64, u64)> {
        h.iter_recorded().map(|v| (h.lowest_equivalent(v.value_iterated_to()) as i64, v.count_at_value())).collect()
    };
    mann_whitney_counts(&counts(a), &counts(b))
}

/// Two-sided p-value of the Mann-Whitney U test between two distributions given as (value,
/// count) in increasing order of value.
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
        let ka = if ca.get(i).is_some_and(|x| x.0 == value) { i += 1; ca[i - 1].1 as f64 } else { 0.0 };
        let kb = if cb.get(j).is_some_and(|y| y.0 == value) { j += 1; cb[j - 1].1 as f64 } else { 0.0 };
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
    libm::erfc(z / std::f64::consts::SQRT_2).min(1.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(values: &[i64]) -> Histogram<u64> {
        histogram::of(values)
    }

    #[test]
    fn identical_samples_are_not_different() {
        let a: Vec<i64> = (0..1000).map(|i| 50_000 + (i * 37 % 1000)).collect();
        assert_eq!(mann_whitney_p(&h(&a), &h(&a)), 1.0);
        assert_eq!(mann_whitney_p(&h(&[5; 10]), &h(&[5; 10])), 1.0);
    }

    #[test]
    fn a_clear_shift_is_significant() {
        let a: Vec<i64> = (0..500).map(|i| 1000 + i).collect();
        let b: Vec<i64> = (0..500).map(|i| 1100 + i).collect();
        assert!(mann_whitney_p(&h(&a), &h(&b)) < 1e-6);
    }

    fn cell_rows(runtime: &str, repetitions: &[&[i64]]) -> Vec<Row> {
        repetitions
            .iter()
            .enumerate()
            .map(|(i, values)| {
                let summary = crate::stats::Summary::of(values, &vec![0; values.len()]);
                let encoded = histogram::encode(&h(values));
                Row {
                    runtime: runtime.into(),
                    point: 0,
                    repetition: i as u32 + 1,
                    sequence: i,
                    status: crate::results::RowStatus::Ok,
                    reason: None,
                    plan: None,
                    worker: None,
                    counts: None,
                    statistics: Some(results::PerMetric::from_fn(|_| summary.clone())),
                    histograms: Some(results::PerMetric::from_fn(|_| encoded.clone())),
                    deviation_histograms: Some(results::DeviationHistograms { actual: encoded.clone(), full: encoded.clone() }),
                    classes: Vec::new(),
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

    #[test]
    fn matches_a_hand_computed_small_case() {
        // a = 1 2 3, b = 4 5 6: U = 0, mean 4.5, variance 3*3*7/12 = 5.25;
        // z = (4.5 - 0.5) / sqrt(5.25) = 1.7457; p = erfc(z / sqrt 2) = 0.08086.
        let p = mann_whitney_p(&h(&[1, 2, 3]), &h(&[4, 5, 6]));
        assert!((p - 0.08086).abs() < 1e-4, "p = {p}");
        // With ties: a = 1 1 2, b = 2 3 3: ranks 1.5 1.5 3.5 | 3.5 5.5 5.5; R_a = 6.5, U = 0.5;
        // tie term = 3 * (8 - 2) = 18; variance = 9/12 * (7 - 18/30) = 4.8;
        // z = (4.5 - 0.5 - 0.5) / sqrt(4.8) = 1.5975; p = 0.1101.
        let p = mann_whitney_p(&h(&[1, 1, 2]), &h(&[2, 3, 3]));
        assert!((p - 0.1101).abs() < 1e-3, "p = {p}");
    }
}
