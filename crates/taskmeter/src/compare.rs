//! `taskmeter compare OLD NEW`: per runtime, point and metric, the change of the median and the
//! p99, with a verdict from a significance test and a noise threshold, as criterion does.
//!
//! The test is the two-sided Mann-Whitney U test on the two rows' stored distributions (ties
//! handled by mid-ranks, normal approximation with tie correction and continuity correction;
//! with thousands of samples per row the approximation is accurate). A change is *improved* or
//! *regressed* only when it is both significant (p < alpha) and larger than the noise threshold;
//! otherwise *no change*. For `lateness` and `busy` the threshold applies to the median and lower
//! is better; for `actual` and `full` it applies to the mean distance from the expected sleep
//! (the v1 study's mean absolute deviation), and a smaller distance is better.

use crate::histogram;
use crate::output::format_ns;
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
    let metrics: Vec<Metric> = options.metric.map(|m| vec![m]).unwrap_or_else(|| METRICS.to_vec());
    println!(
        "compare {} ({}) -> {} ({})",
        options.old.display(),
        old.started_at,
        options.new.display(),
        new.started_at
    );
    println!(
        "verdict: two-sided Mann-Whitney U, alpha {}, noise threshold {:.1} %",
        options.alpha,
        options.threshold * 100.0
    );
    println!();
    let mut lines = vec![["runtime", "point", "metric", "median old -> new", "change", "p99 old -> new", "change", "p", "verdict"]
        .map(str::to_string)
        .to_vec()];
    let mut regressions = 0;
    let mut unmatched = Vec::new();
    for old_row in old.rows_in_order().into_iter().filter(|r| r.statistics.is_some()) {
        let label = point_label(&old, old_row);
        let Some(new_row) = new.rows.iter().find(|r| r.runtime == old_row.runtime && point_label(&new, r) == label) else {
            unmatched.push(format!("{} at {label}: only in the old run", old_row.runtime));
            continue;
        };
        if new_row.statistics.is_none() {
            unmatched.push(format!("{} at {label}: no statistics in the new run ({:?})", old_row.runtime, new_row.status));
            continue;
        }
        for metric in &metrics {
            let c = compare_rows(old_row, new_row, *metric, options.threshold, options.alpha)?;
            regressions += usize::from(c.verdict == Verdict::Regressed);
            lines.push(vec![
                old_row.runtime.clone(),
                label.clone(),
                metric.name().into(),
                format!("{} -> {}", format_ns(c.old_median), format_ns(c.new_median)),
                percent(c.median_change),
                format!("{} -> {}", format_ns(c.old_p99), format_ns(c.new_p99)),
                percent(c.p99_change),
                format!("{:.3}", c.p_value),
                c.verdict.as_str().into(),
            ]);
        }
    }
    for new_row in new.rows_in_order().into_iter().filter(|r| r.statistics.is_some()) {
        let label = point_label(&new, new_row);
        if !old.rows.iter().any(|r| r.runtime == new_row.runtime && point_label(&old, r) == label && r.statistics.is_some()) {
            unmatched.push(format!("{} at {label}: only in the new run", new_row.runtime));
        }
    }
    if lines.len() == 1 {
        return Err("the two runs have no runtime and point in common".into());
    }
    Ok(print_verdicts(&lines, &unmatched, regressions))
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

fn point_label(record: &RunRecord, row: &Row) -> String {
    record.points.get(row.point).map(|p| p.label()).unwrap_or_else(|| "-".into())
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
    pub p_value: f64,
    pub verdict: Verdict,
}

pub fn compare_rows(old: &Row, new: &Row, metric: Metric, threshold: f64, alpha: f64) -> Result<Comparison, String> {
    let stats = |r: &Row| r.statistics.as_ref().expect("rows with statistics").get(metric).clone();
    let (so, sn) = (stats(old), stats(new));
    let hist = |r: &Row| -> Result<Histogram<u64>, String> {
        let text = r.histograms.as_ref().ok_or_else(|| format!("row {} has no histograms", r.runtime))?.get(metric);
        histogram::decode(text)
    };
    let p_value = mann_whitney_p(&hist(old)?, &hist(new)?);
    let value = |v: Option<i64>| v.unwrap_or(0) as f64;
    let change = |a: f64, b: f64| (a != 0.0).then(|| (b - a) / a.abs());
    let (old_median, new_median) = (value(so.p50), value(sn.p50));
    let median_change = change(old_median, new_median);
    // Which direction is better: the median itself, or (actual, full) the distance from the
    // expected sleep.
    let (old_score, new_score) = match metric {
        Metric::Lateness | Metric::Busy => (old_median, new_median),
        Metric::Actual | Metric::Full => (so.mean_absolute_deviation.unwrap_or(0.0), sn.mean_absolute_deviation.unwrap_or(0.0)),
    };
    let verdict = verdict(p_value, alpha, old_score, new_score, threshold);
    Ok(Comparison {
        old_median,
        new_median,
        median_change,
        old_p99: value(so.p99),
        new_p99: value(sn.p99),
        p99_change: change(value(so.p99), value(sn.p99)),
        p_value,
        verdict,
    })
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
    let (n1, n2) = (a.len() as f64, b.len() as f64);
    if n1 == 0.0 || n2 == 0.0 {
        return 1.0;
    }
    // Walk the distinct values of both in order, giving each tie group its mid-rank.
    let counts = |h: &Histogram<u64>| -> Vec<(u64, u64)> {
        h.iter_recorded().map(|v| (h.lowest_equivalent(v.value_iterated_to()), v.count_at_value())).collect()
    };
    let (ca, cb) = (counts(a), counts(b));
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
