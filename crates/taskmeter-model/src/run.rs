//! The record of `taskmeter run` (`run.json`): the settings, points and one row per worker.

use super::header::{Header, Record};
pub use super::settings::Settings;
use serde::{Deserialize, Serialize};
pub use taskmeter_machine::counters::Counters;
use taskmeter_machine::sched::SchedInfo;
use taskmeter_protocol::Plan;
use taskmeter_stats::Summary;

fn one() -> u32 {
    1
}

/// The metrics derived from every sample (see `protocol/README.md`).
pub const METRICS: [Metric; 4] = [Metric::Lateness, Metric::Actual, Metric::Full, Metric::Busy];

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[serde(rename_all = "lowercase")]
pub enum Metric {
    Lateness,
    Actual,
    Full,
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

    /// What the metric is, from a sample's times (`--metric`'s help).
    pub fn about(self) -> &'static str {
        match self {
            Metric::Lateness => "wake - intended: how late the unit woke (cyclictest's latency)",
            Metric::Actual => "wake - start: the whole iteration, busy work included (the v1 study's `actual`)",
            Metric::Full => "wake - previous wake: iteration to iteration (the v1 study's `full`)",
            Metric::Busy => "busy_end - start: the busy phase alone",
        }
    }
}

/// A metric by its name ([`Metric::name`]); the error is the name not known.
impl std::str::FromStr for Metric {
    type Err = String;
    fn from_str(text: &str) -> Result<Metric, String> {
        METRICS.into_iter().find(|m| m.name() == text).ok_or_else(|| text.to_string())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct RunRecord {
    /// Schema `taskmeter.run`; `complete` is false when the run was interrupted (some rows are
    /// missing or cut short).
    #[serde(flatten)]
    pub header: Header,
    pub experiment: String,
    /// The metric the console table ranks by.
    pub metric: Metric,
    /// The settings every point starts from.
    pub settings: Settings,
    /// The swept parameters (empty: one point).
    pub sweeps: Vec<super::sweep::Sweep>,
    pub points: Vec<super::sweep::Point>,
    /// Whether (runtime, point) jobs ran in a shuffled order, and the seed of the shuffle.
    pub order: Order,
    pub rows: Vec<Row>,
    /// CPU time (user + system, `getrusage(RUSAGE_SELF)`) taskmeter itself used while its
    /// workers measured, from the first row's worker to the last row's statistics (finding the
    /// toolchains before and the reports after are not in it), to show it is not the bottleneck
    /// (the workers' own is in each row).
    #[serde(default)]
    pub taskmeter_cpu_ns: Option<u64>,
    /// What taskmeter wrote before the first worker started, and the CPU time it took (not in
    /// `taskmeter_cpu_ns`); absent in records from before it did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub taskmeter_prepared: Option<Prepared>,
}

/// The memory the rows fill (their kept values, their tables of one entry per unit), written
/// before the first worker starts so that no page of it is faulted in while workers measure.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Prepared {
    pub bytes: u64,
    pub cpu_ns: u64,
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
    /// How the percentiles were computed: exact, or (past the exact budget) from HdrHistograms.
    #[serde(default)]
    pub basis: Basis,
    pub plan: Option<Plan>,
    pub worker: Option<WorkerInfo>,
    pub counts: Option<Counts>,
    /// One summary per metric, over the measured samples (warm-up excluded).
    pub statistics: Option<Statistics>,
    /// The same samples' distributions, for charts and `compare` (see `histogram.rs`).
    pub histograms: Option<Histograms>,
    /// The magnitudes of the lateness values below 0 (wake-ups before their intended time),
    /// which `histograms` holds as 0; absent when there were none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lateness_early: Option<String>,
    /// Per priority class, when there are two.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub classes: Vec<ClassResult>,
    /// What the kernel counted for the worker over its measured window (CPU, context switches,
    /// migrations, run-queue wait, threads, faults), read from /proc by taskmeter.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters: Option<Counters>,
    /// Why a row that measured has no counters.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub counters_missing: Option<String>,
    /// What the runtime's own API said about the measured window (protocol frame `V`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime_view: Option<taskmeter_protocol::frames::RuntimeView>,
    /// `--busy TIME`: how this row's busy iterations were fitted to the time before it ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_fit: Option<BusyFit>,
    /// Each unit's own mean lateness, how they spread (the statistics pool samples).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unit_spread: Option<UnitSpread>,
}

/// How a row's units differ: its statistics pool samples (a unit that woke more often weighs
/// more), and this gives each unit one say. Over the units with a measured sample.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct UnitSpread {
    pub units: u64,
    /// The fewest and most measured samples a unit had.
    pub samples_min: u64,
    pub samples_max: u64,
    /// Each unit's mean lateness: the mean of those means, their sample standard deviation
    /// (n - 1; absent with one unit), the lowest and the highest.
    pub lateness_mean: f64,
    pub lateness_sd: Option<f64>,
    pub lateness_min: f64,
    pub lateness_max: f64,
}

impl UnitSpread {
    /// From each unit's (measured samples, lateness sum); None when no unit measured one.
    pub fn of(per_unit: &[(u64, i128)]) -> Option<UnitSpread> {
        let units: Vec<(u64, f64)> =
            per_unit.iter().filter(|(n, _)| *n > 0).map(|(n, sum)| (*n, *sum as f64 / *n as f64)).collect();
        let means: Vec<f64> = units.iter().map(|(_, m)| *m).collect();
        let count = means.len();
        let mean = means.iter().sum::<f64>() / count.max(1) as f64;
        let sd =
            (count > 1).then(|| (means.iter().map(|m| (m - mean).powi(2)).sum::<f64>() / (count - 1) as f64).sqrt());
        (count > 0).then(|| UnitSpread {
            units: count as u64,
            samples_min: units.iter().map(|(n, _)| *n).min().unwrap_or(0),
            samples_max: units.iter().map(|(n, _)| *n).max().unwrap_or(0),
            lateness_mean: mean,
            lateness_sd: sd,
            lateness_min: means.iter().copied().fold(f64::INFINITY, f64::min),
            lateness_max: means.iter().copied().fold(f64::NEG_INFINITY, f64::max),
        })
    }
}

/// `--busy TIME` for one row: the iterations whose busy phase, in the work loop itself (one unit,
/// the row's schedule, its yields when `--yield` asks), is the time asked, found by probes run
/// just before the row (see `experiments/sleep/calibrate.rs`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct BusyFit {
    pub target_ns: u64,
    pub iterations: u64,
    /// The first estimate, from the runtime's rate of the arithmetic without yields.
    pub rate_estimate: u64,
    pub probes: Vec<BusyProbe>,
}

/// One probe: a short run of the loop at `iterations`, and the median busy phase it measured.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
pub struct BusyProbe {
    pub iterations: u64,
    pub median_busy_ns: u64,
    /// Measured loops the median is of.
    pub loops: u64,
}

impl Row {
    /// A row of `runtime` with `status` and nothing else yet: the others fill in what they have.
    pub fn new(runtime: &str, status: RowStatus) -> Row {
        Row {
            runtime: runtime.to_string(),
            point: 0,
            repetition: 1,
            sequence: 0,
            status,
            reason: None,
            basis: Basis::Exact,
            plan: None,
            worker: None,
            counts: None,
            statistics: None,
            histograms: None,
            lateness_early: None,
            classes: Vec::new(),
            counters: None,
            counters_missing: None,
            runtime_view: None,
            busy_fit: None,
            unit_spread: None,
        }
    }
}

/// How a row's percentiles were computed. Count, mean, std, min, max and the deviation columns
/// are exact either way.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Default)]
#[serde(rename_all = "lowercase")]
pub enum Basis {
    /// From every measured value.
    #[default]
    Exact,
    /// From HdrHistograms with 5 significant digits (the row had more samples than its budget).
    Histogram,
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
    /// How taskmeter's reader of the worker, the worker's writer and taskmeter's reader of its
    /// counters were scheduled: above the units where permitted ("reader SCHED_FIFO 1, writer
    /// SCHED_FIFO 1, counters SCHED_FIFO 1").
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harness_sched: Option<String>,
    /// Where the runtime itself schedules the worker's writer among its units, how (the
    /// registry's `writer`: a goroutine); absent, the writer is a thread of its own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub writer: Option<String>,
    /// The most the worker's sample file held unread when taskmeter's reader looked, bytes (32
    /// a sample; 48 before protocol 5): how far the reader fell behind (it never costs a sample, only memory).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_backlog_peak_bytes: Option<u64>,
    /// The most that could wait unread, bytes (`--max-backlog`, by default a quarter of the
    /// machine's room for memory as the worker started): beyond, the worker was asked to stop
    /// and its row is partial.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_backlog_bound_bytes: Option<u64>,
    /// How long after the worker's exit taskmeter read and folded the rest of its samples, ns
    /// (long when the reader fell behind).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sample_drain_after_exit_ns: Option<u64>,
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
    /// Samples lost: a unit's own write of its full ring failed (protocol "Storage: the ring").
    #[serde(default)]
    pub samples_lost: u64,
    /// Samples that reached taskmeter through their unit's own write of its full ring (its
    /// worker's writer had fallen behind), and how many such writes there were.
    #[serde(default)]
    pub samples_flushed_by_units: u64,
    #[serde(default)]
    pub unit_flushes: u64,
    /// Measured samples left out of the statistics: their iteration began right after their
    /// unit's own write, which may have delayed it (counted in `samples_total`, not in
    /// `samples_measured`).
    #[serde(default)]
    pub samples_left_out: u64,
    /// Measured samples that came after lost ones: they have no `full` value.
    #[serde(default)]
    pub samples_after_gap: u64,
    /// When the worker's stream was cut (it crashed, was killed or timed out) or it was stopped
    /// early (a signal, `--max-backlog`): the part of the measured window its samples cover, ns
    /// (`iterations_per_s` is over it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub covered_ns: Option<u64>,
    /// When the stream was cut: at most how many samples its units made after their last
    /// delivered ones, in rings the worker died with (a bound from the schedule and the
    /// worker's exit: `Delivered::unsent_bound`); absent when the schedule sets no pace.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub samples_unsent_max: Option<u64>,
    /// Time the worker took to create its units and park them all at the start gate
    /// (run_start - create_start), and that time per unit started.
    pub create_ns: u64,
    pub create_per_unit_ns: f64,
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

impl Record for RunRecord {
    const SCHEMA: &'static str = "taskmeter.run";
    const FILE: &'static str = "run.json";
    /// Version 6 (protocol v4) added the samples units wrote themselves and those left out after
    /// them, how far the reader fell behind, and the host's privileges; 5 the kernel's counters;
    /// 4 (protocol v3) the basis of the statistics, lost samples and cut rows; 3 repetitions;
    /// versions 2 to 5 still read.
    const VERSIONS: std::ops::RangeInclusive<u32> = 2..=6;

    crate::record_json!();

    fn header(&self) -> &Header {
        &self.header
    }

    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

#[cfg(test)]
mod tests {
    use super::UnitSpread;

    #[test]
    fn a_unit_spread_gives_each_unit_one_say() {
        // Units of 2 samples (sum 20: mean 10), none, 4 (sum 120: mean 30), 1 (sum -5: mean -5).
        // Pooled over samples the mean would be 135 / 7 = 19.3; over units it is 35 / 3 = 11.67,
        // sd sqrt(((10 - 11.67)^2 + (30 - 11.67)^2 + (-5 - 11.67)^2) / 2) = 17.559.
        let spread = UnitSpread::of(&[(2, 20), (0, 0), (4, 120), (1, -5)]).unwrap();
        assert_eq!((spread.units, spread.samples_min, spread.samples_max), (3, 1, 4));
        assert!((spread.lateness_mean - 35.0 / 3.0).abs() < 1e-12);
        assert!((spread.lateness_sd.unwrap() - 17.559_422).abs() < 1e-5, "{spread:?}");
        assert_eq!((spread.lateness_min, spread.lateness_max), (-5.0, 30.0));
        assert_eq!(UnitSpread::of(&[(3, 30)]).unwrap().lateness_sd, None, "one unit has no spread");
        assert_eq!(UnitSpread::of(&[(0, 0)]), None);
    }
}
