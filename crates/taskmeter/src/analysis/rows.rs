//! How a worker's report becomes its row: the counts, the statistics and histograms of every
//! metric over the measured samples, per priority class; and what the rows of a run say together.

use crate::analysis::histogram;
use crate::model::run::{ClassResult, Counts, DeviationHistograms, Histograms, Metric, PerMetric, RowStatus, RunRecord, Statistics, METRICS};
use taskmeter_protocol::{Plan, UnitSamples, WorkerReport};
use taskmeter_record::stats::Summary;

/// Is sample `i` of this unit part of the measurement (not warm-up)?
pub fn is_measured(report: &WorkerReport, u: &UnitSamples, i: usize) -> bool {
    u.start_ns[i] >= report.done.measure_start_ns
}

/// Every metric's values and references over the measured samples, in unit then sample order.
pub fn metric_values(
    report: &WorkerReport,
    metric: Metric,
    include: impl Fn(&UnitSamples) -> bool,
) -> (Vec<i64>, Vec<i64>) {
    let mut values = Vec::new();
    let mut references = Vec::new();
    for u in report.units.iter().filter(|u| include(u)) {
        for i in (0..u.len()).filter(|&i| is_measured(report, u, i)) {
            let (v, r) = metric.sample(u, i);
            values.push(v);
            references.push(r);
        }
    }
    (values, references)
}

pub fn counts(plan: &Plan, report: &WorkerReport) -> Counts {
    let (mut measured, mut warmup, mut missed, mut missed_warmup, mut early) = (0, 0, 0, 0, 0);
    for u in &report.units {
        for i in 0..u.len() {
            if is_measured(report, u, i) {
                measured += 1;
                missed += u.missed[i];
                early += u64::from(u.wake_ns[i] < u.intended_ns[i]);
            } else {
                warmup += 1;
                missed_warmup += u.missed[i];
            }
        }
    }
    let iterations_total = report.units.iter().map(|u| u.iterations).sum();
    let iterations_measured: u64 = report.units.iter().map(|u| u.measured_iterations).sum();
    Counts {
        units: report.units.len() as u32,
        units_planned: plan.units,
        iterations_total,
        iterations_measured,
        iterations_per_s: per_second(iterations_measured, plan.duration_ns),
        atomic_sum: report.done.atomic_sum,
        units_starved: report.units.iter().filter(|u| u.measured_iterations == 0).count() as u32,
        samples_total: measured + warmup,
        samples_warmup: warmup,
        samples_measured: measured,
        missed_periods: missed,
        missed_periods_warmup: missed_warmup,
        early_wakeups: early,
        create_ns: report.done.run_start_ns - report.done.create_start_ns,
        create_per_unit_ns: (report.done.run_start_ns - report.done.create_start_ns) as f64 / report.units.len().max(1) as f64,
        storage_grown: report.done.storage_grown,
    }
}

fn per_second(count: u64, duration_ns: u64) -> f64 {
    count as f64 * 1e9 / duration_ns as f64
}

/// Exact statistics and histograms of every metric over the measured samples.
pub fn statistics(report: &WorkerReport) -> (Statistics, Histograms, DeviationHistograms) {
    let encode = |values: &[i64]| histogram::encode(&histogram::of(values));
    let mut deviations = PerMetric::from_fn(|_| String::new());
    let both = PerMetric::from_fn(|metric| {
        let (values, references) = metric_values(report, metric, |_| true);
        if matches!(metric, Metric::Actual | Metric::Full) {
            let distances: Vec<i64> = values.iter().zip(&references).map(|(v, r)| (v - r).abs()).collect();
            *match metric {
                Metric::Actual => &mut deviations.actual,
                _ => &mut deviations.full,
            } = encode(&distances);
        }
        (Summary::of(&values, &references), encode(&values))
    });
    let PerMetric { lateness, actual, full, busy } = both;
    (
        Statistics { lateness: lateness.0, actual: actual.0, full: full.0, busy: busy.0 },
        Histograms { lateness: lateness.1, actual: actual.1, full: full.1, busy: busy.1 },
        DeviationHistograms { actual: deviations.actual, full: deviations.full },
    )
}

/// Iterations and statistics of each priority class (empty with one class).
pub fn classes(plan: &Plan, report: &WorkerReport) -> Vec<ClassResult> {
    if plan.priority_classes < 2 {
        return Vec::new();
    }
    (0..plan.priority_classes)
        .map(|class| {
            let members = report.units.iter().filter(|u| u.class == class);
            let iterations_measured = members.clone().map(|u| u.measured_iterations).sum();
            ClassResult {
                class,
                units: members.count() as u32,
                iterations_measured,
                iterations_per_s: per_second(iterations_measured, plan.duration_ns),
                statistics: plan.sleep.schedule.sleeps().then(|| summaries_of(report, |u| u.class == class)),
            }
        })
        .collect()
}

/// The statistics alone (no histograms: classes keep none).
fn summaries_of(report: &WorkerReport, include: impl Fn(&UnitSamples) -> bool) -> Statistics {
    PerMetric::from_fn(|metric| {
        let (values, references) = metric_values(report, metric, &include);
        Summary::of(&values, &references)
    })
}

/// Metric values for one sample, for samples.csv: (lateness, actual, full, busy).
pub fn sample_metrics(u: &UnitSamples, i: usize) -> [i64; 4] {
    METRICS.map(|m| m.sample(u, i).0)
}

/// Memory per unit of one runtime across a run's points.
pub struct MemoryPerUnit {
    pub runtime: String,
    /// Least-squares slope of the worker's peak RSS (bytes) over the units it started.
    pub bytes_per_unit: Option<f64>,
    pub points: usize,
    pub units_min: u32,
    pub units_max: u32,
}

/// The growth of each runtime's peak RSS per unit started, fitted across every measured point.
/// It includes what each unit keeps: its samples (48 bytes each in most workers).
pub fn memory_per_unit(record: &RunRecord) -> Vec<MemoryPerUnit> {
    record
        .settings
        .runtimes
        .iter()
        .filter_map(|runtime| {
            let points: Vec<(f64, f64)> = record
                .rows
                .iter()
                .filter(|r| &r.runtime == runtime && matches!(r.status, RowStatus::Ok | RowStatus::Partial))
                .filter_map(|r| Some((r.counts.as_ref()?.units as f64, r.worker.as_ref()?.peak_rss_kb? as f64 * 1024.0)))
                .collect();
            if points.is_empty() {
                return None;
            }
            let units = points.iter().map(|p| p.0 as u32);
            Some(MemoryPerUnit {
                runtime: runtime.clone(),
                bytes_per_unit: taskmeter_record::stats::linear_fit(&points).map(|(slope, _)| slope),
                points: points.len(),
                units_min: units.clone().min().unwrap_or(0),
                units_max: units.max().unwrap_or(0),
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn vector(name: &str) -> (Plan, String) {
        let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../protocol/vectors/outputs/");
        let plan = std::fs::read_to_string(format!("{dir}{name}.plan.json")).unwrap();
        let output = std::fs::read_to_string(format!("{dir}{name}.ndjson")).unwrap();
        (Plan::from_json(&plan).unwrap(), output)
    }

    #[test]
    fn metrics_follow_their_definitions_on_the_absolute_vector() {
        let (plan, output) = vector("absolute");
        let report = taskmeter_protocol::parse_output(&plan, output.as_bytes()).unwrap();
        let c = counts(&plan, &report);
        assert_eq!((c.samples_total, c.samples_warmup, c.samples_measured), (5, 2, 3));
        assert_eq!((c.missed_periods, c.missed_periods_warmup, c.early_wakeups), (2, 0, 0));
        assert_eq!((c.units, c.units_planned, c.iterations_total, c.iterations_measured), (2, 2, 5, 3));
        // 3 measured iterations in a 10 us measurement: 300,000 per second.
        assert_eq!(c.iterations_per_s, 300_000.0);
        let (s, _, _) = statistics(&report);
        // Measured samples: unit 1 #2, unit 1 #3, unit 2 #2 (warm-up ends at 1090).
        // lateness = wake - intended: 2150, 20, 5.
        assert_eq!((s.lateness.count, s.lateness.min, s.lateness.max), (3, Some(5), Some(2150)));
        assert_eq!(s.lateness.mean, Some(725.0));
        assert_eq!(s.lateness.p50, Some(20));
        // actual = wake - start: 3090, 860, 2000; |actual - expected|: 2090, 140, 0.
        assert_eq!((s.actual.min, s.actual.max), (Some(860), Some(3090)));
        assert_eq!(s.actual.mean_absolute_deviation, Some(2230.0 / 3.0));
        assert_eq!((s.actual.deviation_min, s.actual.deviation_max), (Some(0), Some(2090)));
        // full = wake - previous wake: 3100, 870, 2000; deviations 2100, 130, 0.
        assert_eq!(s.full.mean, Some(1990.0));
        assert_eq!(s.full.mean_absolute_deviation, Some(2230.0 / 3.0));
        // busy = busy_end - start: 140, 140, 100.
        assert_eq!((s.busy.min, s.busy.p50, s.busy.max), (Some(100), Some(140), Some(140)));
    }
}
