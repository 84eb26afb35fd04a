//! The run record (`run.json`, schema version 2) and how a worker's samples become its row.

use crate::env::Environment;
use crate::orchestrate::SchedInfo;
use crate::plan::Plan;
use crate::protocol::{UnitSamples, WorkerReport};
use crate::stats::Summary;
use serde::{Deserialize, Serialize};

pub const SCHEMA: &str = "taskmeter.run";
pub const SCHEMA_VERSION: u32 = 3;
/// The oldest run.json this taskmeter reads (version 2 had no repetitions: each row is one).
pub const OLDEST_SCHEMA_VERSION: u32 = 2;

fn one() -> u32 {
    1
}

/// The metrics derived from every sample (see `protocol/README.md`).
pub const METRICS: [Metric; 4] = [Metric::Lateness, Metric::Actual, Metric::Full, Metric::Busy];

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    /// wake - intended: how late the unit woke (cyclictest's latency)
    Lateness,
    /// wake - start: the whole iteration, busy work included (the v1 study's `actual`)
    Actual,
    /// wake - previous wake: iteration to iteration (the v1 study's `full`)
    Full,
    /// busy_end - start: the busy phase alone
    Busy,
}

impl Metric {
    pub fn name(self) -> &'static str {
        match self {
            Metric::Lateness => "lateness",
            Metric::Actual => "actual",
            Metric::Full => "full",
            Metric::Busy => "busy",
        }
    }

    /// Value and reference (for the seed's deviation columns) of sample `i`.
    fn sample(self, u: &UnitSamples, i: usize) -> (i64, i64) {
        let previous_wake = if i == 0 { u.origin_ns } else { u.wake_ns[i - 1] };
        let diff = |a: u64, b: u64| a as i64 - b as i64;
        match self {
            Metric::Lateness => (diff(u.wake_ns[i], u.intended_ns[i]), 0),
            Metric::Actual => (diff(u.wake_ns[i], u.start_ns[i]), u.expected_ns[i] as i64),
            Metric::Full => (diff(u.wake_ns[i], previous_wake), u.expected_ns[i] as i64),
            Metric::Busy => (diff(u.busy_end_ns[i], u.start_ns[i]), 0),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunRecord {
    pub schema: String,
    pub schema_version: u32,
    pub taskmeter_version: String,
    /// False when the run was interrupted: some rows are missing or cut short.
    pub complete: bool,
    pub command_line: Vec<String>,
    pub started_at: String,
    pub finished_at: String,
    pub experiment: String,
    /// The metric the console table ranks by.
    pub metric: Metric,
    /// The settings every point starts from.
    pub settings: Settings,
    /// The swept parameters (empty: one point).
    pub sweeps: Vec<crate::sweep::Sweep>,
    pub points: Vec<crate::sweep::Point>,
    /// Whether (runtime, point) jobs ran in a shuffled order, and the seed of the shuffle.
    pub order: Order,
    pub environment: Environment,
    pub rows: Vec<Row>,
    /// CPU time (user + system) taskmeter itself used for the run, to show it is not the
    /// bottleneck (the workers' own is in each row).
    #[serde(default)]
    pub taskmeter_cpu_ns: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Settings {
    pub runtimes: Vec<String>,
    /// What the workers run: the sleep loop, or the sleep loop with a shared counter.
    pub experiment: crate::plan::Experiment,
    pub units: u32,
    /// 1, or 2: odd units high, even units low priority (protocol "Priority classes").
    pub priority_classes: u32,
    /// Time each worker may spend starting its units.
    pub start_limit_ns: u64,
    /// Workers per runtime and point (`--repeat`), each its own process; intervals come from
    /// the variation between them when there are two or more.
    #[serde(default = "one")]
    pub repeat: u32,
    /// The runtimes of a point ran side by side (`--together`), not one after another.
    pub together: bool,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub sleep: crate::plan::SleepPlan,
    pub sleep_spec: String,
    pub busy: crate::plan::BusyPlan,
    pub grace_ns: u64,
    /// Scheduling settings applied to every worker before exec.
    #[serde(default)]
    pub sched: crate::sched::SchedSettings,
    /// A real-time policy may spin every core (`--allow-rt-spin`).
    #[serde(default)]
    pub allow_rt_spin: bool,
    /// The PM QoS CPU latency (µs) taskmeter held while the workers ran (`--cpu-dma-latency`);
    /// None: it held none (the environment says what was in force).
    #[serde(default)]
    pub cpu_dma_latency_us: Option<u32>,
}

impl RunRecord {
    /// Rows by point, then in `--runtimes` order (the `rows` array is in the order they ran).
    pub fn rows_in_order(&self) -> Vec<&Row> {
        let position = |r: &Row| self.settings.runtimes.iter().position(|id| *id == r.runtime).unwrap_or(usize::MAX);
        let mut rows: Vec<&Row> = self.rows.iter().collect();
        rows.sort_by_key(|r| (r.point, position(r)));
        rows
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Order {
    pub shuffled: bool,
    pub seed: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum RowStatus {
    Ok,
    /// Fewer units started than planned (a thread refused, the start limit): statistics cover
    /// the units that ran, and the reason says why the others did not.
    Partial,
    /// Stopped early by Ctrl-C: statistics cover what was measured until then.
    Interrupted,
    Failed,
    /// Not run: the runtime is unavailable here, or the run was interrupted before it.
    Skipped,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Row {
    pub runtime: String,
    /// Index into `points`.
    pub point: usize,
    /// Which repetition of its runtime and point (`--repeat`), from 1.
    #[serde(default = "one")]
    pub repetition: u32,
    /// Position in the order the jobs ran (0-based).
    pub sequence: usize,
    pub status: RowStatus,
    pub reason: Option<String>,
    pub plan: Option<Plan>,
    pub worker: Option<WorkerInfo>,
    pub counts: Option<Counts>,
    /// One summary per metric, over the measured samples (warm-up excluded).
    pub statistics: Option<Statistics>,
    /// The same samples' distributions, for charts and `compare` (see `histogram.rs`).
    pub histograms: Option<Histograms>,
    /// The distributions of |value - expected| of `actual` and `full`: what their ranking and
    /// `compare`'s verdict are about.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deviation_histograms: Option<DeviationHistograms>,
    /// Per priority class, when there are two.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassResult>,
}

/// What the units of one priority class did.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ClassResult {
    /// 0 is the high class.
    pub class: u32,
    pub units: u32,
    pub iterations_measured: u64,
    /// Measured iterations per second, all units of the class together.
    pub iterations_per_s: f64,
    /// None with the schedule `none` (no samples).
    pub statistics: Option<Statistics>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct WorkerInfo {
    pub runtime_version: Option<String>,
    pub toolchain: String,
    pub pid: Option<u32>,
    pub sched: Option<SchedInfo>,
    pub wall_ns: u64,
    /// Peak resident set size of the worker process, kB: wait4's ru_maxrss when it exceeds
    /// taskmeter's own RSS at the spawn (below that, it may be taskmeter's, inherited through
    /// fork), else the worker's last VmHWM read while it ran.
    #[serde(default)]
    pub peak_rss_kb: Option<u64>,
    /// CPU time (user + system) of the worker, from wait4.
    #[serde(default)]
    pub cpu_ns: Option<u64>,
    /// How the worker applied priority classes (`hello.priority`).
    #[serde(default)]
    pub priority: Option<String>,
    /// The measured window on CLOCK_MONOTONIC, shared by every worker (so `--together` runs
    /// can be seen to overlap).
    #[serde(default)]
    pub measure_start_ns: Option<u64>,
    #[serde(default)]
    pub end_ns: Option<u64>,
    /// The PM QoS CPU latency in force while the worker ran (µs, `/dev/cpu_dma_latency`).
    #[serde(default)]
    pub cpu_dma_latency_us: Option<i64>,
    /// The worker's stderr when it failed (last kilobytes).
    pub stderr: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Counts {
    /// Units started; below `units_planned` when the start was partial.
    pub units: u32,
    pub units_planned: u32,
    /// Loop iterations, sampled or not (the schedule `none` records no samples).
    pub iterations_total: u64,
    pub iterations_measured: u64,
    /// Measured iterations per second of the measurement, all units together.
    pub iterations_per_s: f64,
    /// The shared counter's final value (`atomic-sum`), equal to `iterations_total`.
    pub atomic_sum: Option<u64>,
    /// Units that started but made no measured iteration: starved, or started too late.
    pub units_starved: u32,
    pub samples_total: u64,
    pub samples_warmup: u64,
    pub samples_measured: u64,
    /// Whole periods skipped after a late wake-up, measured samples only (absolute mode).
    pub missed_periods: u64,
    pub missed_periods_warmup: u64,
    /// Measured samples that woke before their intended time (negative lateness).
    pub early_wakeups: u64,
    /// Time the worker took to create its units and park them all at the start gate
    /// (run_start - create_start), and that time per unit started.
    pub create_ns: u64,
    pub create_per_unit_ns: f64,
    /// Times a unit's sample storage grew beyond its reserve while it ran (each growth copies
    /// its arrays, inside the loop); 0 in a run whose reserve held.
    pub storage_grown: u64,
}

/// One value per metric, named as the metrics are in run.json.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct PerMetric<T> {
    pub lateness: T,
    pub actual: T,
    pub full: T,
    pub busy: T,
}

impl<T> PerMetric<T> {
    pub fn from_fn(f: impl FnMut(Metric) -> T) -> PerMetric<T> {
        let [lateness, actual, full, busy] = METRICS.map(f);
        PerMetric { lateness, actual, full, busy }
    }

    pub fn get(&self, metric: Metric) -> &T {
        match metric {
            Metric::Lateness => &self.lateness,
            Metric::Actual => &self.actual,
            Metric::Full => &self.full,
            Metric::Busy => &self.busy,
        }
    }
}

/// Exact statistics of every metric.
pub type Statistics = PerMetric<Summary>;

/// Base64 V2-deflate HdrHistograms (`histogram.rs`), one per metric.
pub type Histograms = PerMetric<String>;

/// Base64 V2-deflate HdrHistograms of |value - expected|.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct DeviationHistograms {
    pub actual: String,
    pub full: String,
}

impl DeviationHistograms {
    pub fn get(&self, metric: Metric) -> Option<&String> {
        match metric {
            Metric::Actual => Some(&self.actual),
            Metric::Full => Some(&self.full),
            Metric::Lateness | Metric::Busy => None,
        }
    }
}

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
    let encode = |values: &[i64]| crate::histogram::encode(&crate::histogram::of(values));
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
                bytes_per_unit: crate::stats::linear_fit(&points).map(|(slope, _)| slope),
                points: points.len(),
                units_min: units.clone().min().unwrap_or(0),
                units_max: units.max().unwrap_or(0),
            })
        })
        .collect()
}

/// Reads a run.json, refusing a missing, truncated or newer file with a clear reason.
pub fn load(path: &std::path::Path) -> Result<RunRecord, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
    let value: serde_json::Value = serde_json::from_str(&text)
        .map_err(|e| format!("{} is not valid JSON (truncated?): {e}", path.display()))?;
    if value.get("schema").and_then(|s| s.as_str()) != Some(SCHEMA) {
        return Err(format!("{} is not a taskmeter run record", path.display()));
    }
    match value.get("schema_version").and_then(|v| v.as_u64()) {
        Some(v) if (OLDEST_SCHEMA_VERSION as u64..=SCHEMA_VERSION as u64).contains(&v) => {}
        Some(v) => {
            return Err(format!(
                "{} has schema version {v}; this taskmeter reads versions {OLDEST_SCHEMA_VERSION} to {SCHEMA_VERSION}",
                path.display()
            ))
        }
        None => return Err(format!("{} has no schema_version", path.display())),
    }
    serde_json::from_value(value).map_err(|e| format!("{} does not match the run schema: {e}", path.display()))
}
