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
//! Both records are checked first (`model::consistency`): one that does not hold together is
//! refused, one line per problem.

use crate::analysis::cells::cells;
use crate::analysis::compare::{compare_cells, verdict, RawSamples, Verdict, TESTS};
use crate::analysis::histogram;
use crate::model::bench::BenchRecord;
use super::CliError;
use crate::model::any::AnyRecord;
use crate::model::consistency::load_checked;
use crate::model::run::{Metric, METRICS};
use crate::report::format::format_ns;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use taskmeter_record::stats::mann_whitney_counts;

pub struct CompareOptions {
    pub old: PathBuf,
    pub new: PathBuf,
    /// None: every metric.
    pub metric: Option<Metric>,
    /// Relative change of the median below which nothing is a change (0.05 = 5 %).
    pub threshold: f64,
    pub alpha: f64,
}

/// The metric `compare` uses when none is given: the old run's (bench results have one).
pub fn default_metric(old: &Path) -> Result<Option<Metric>, CliError> {
    Ok(match load_checked(old)?.1 {
        AnyRecord::Run(record) => Some(record.metric),
        _ => None,
    })
}

pub fn run(options: CompareOptions) -> Result<ExitCode, CliError> {
    let kind = |r: &AnyRecord| match r {
        AnyRecord::Run(_) => "run",
        AnyRecord::Net(_) => "net",
        AnyRecord::Bench(_) => "bench",
        AnyRecord::Granularity(_) => "granularity",
    };
    let (old, new) = match (load_checked(&options.old)?.1, load_checked(&options.new)?.1) {
        (AnyRecord::Run(old), AnyRecord::Run(new)) => (old, new),
        (AnyRecord::Bench(old), AnyRecord::Bench(new)) => return compare_benches(&options, &old, &new),
        (old, new) => return Err(format!("cannot compare a {} result with a {} result (compare takes two runs or two benches)", kind(&old), kind(&new)).into()),
    };
    if old.experiment != new.experiment {
        return Err(format!("cannot compare a '{}' run with a '{}' run", old.experiment, new.experiment).into());
    }
    let raw = (RawSamples::load(&options.old).map_err(CliError::Usage)?, RawSamples::load(&options.new).map_err(CliError::Usage)?);
    let metrics: Vec<Metric> = options.metric.map(|m| vec![m]).unwrap_or_else(|| METRICS.to_vec());
    crate::outln!(
        "compare {} ({}) -> {} ({})",
        options.old.display(),
        old.header.started_at,
        options.new.display(),
        new.header.started_at
    );
    crate::outln!("verdict: alpha {}, noise threshold {:.1} %, on the median (lateness, busy) or the mean |value - expected| (actual, full)", options.alpha, options.threshold * 100.0);
    crate::outln!("test: {}", TESTS);
    crate::outln!();
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
        return Err(CliError::Usage("the two runs have no runtime and point in common".into()));
    }
    Ok(print_verdicts(&lines, &unmatched, regressions))
}

/// The table, what was not compared, and the exit status: 1 when something regressed.
fn print_verdicts(lines: &[Vec<String>], unmatched: &[String], regressions: usize) -> ExitCode {
    crate::out!("{}", crate::report::console::render_table(lines));
    for line in unmatched {
        crate::outln!("not compared: {line}");
    }
    crate::outln!();
    if regressions > 0 {
        crate::outln!("{regressions} regression(s) beyond the threshold");
        ExitCode::from(1)
    } else {
        crate::outln!("no regression beyond the threshold");
        ExitCode::SUCCESS
    }
}

fn percent(change: Option<f64>) -> String {
    change.map(|c| format!("{:+.1} %", c * 100.0)).unwrap_or_else(|| "n/a".into())
}

/// `compare` of two `taskmeter bench` results, per scenario and input: the mean gap (1 / ips)
/// decides, tested on the gap distributions.
fn compare_benches(options: &CompareOptions, old: &BenchRecord, new: &BenchRecord) -> Result<ExitCode, CliError> {
    crate::outln!("compare {} ({}) -> {} ({})", options.old.display(), old.header.started_at, options.new.display(), new.header.started_at);
    crate::outln!(
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
        let p_value = mann_whitney_counts(&histogram::counts(&histogram::decode(&oh.gap)?), &histogram::counts(&histogram::decode(&nh.gap)?));
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
        return Err(CliError::Usage("the two benchmarks have no measured scenario in common".into()));
    }
    Ok(print_verdicts(&lines, &unmatched, regressions))
}

