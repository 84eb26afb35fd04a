//! What a run writes at its end: `run.json`, `summary.csv`, the charts and report.html (with
//! `--raw`, `samples.csv.gz` was written while it measured: see `samples.rs`).

use crate::report::dashboard as dash;
use crate::report::figure::Chart;
use crate::report::page::{Block, Report, Section};
use crate::report::tables::{
    class_table_of, default_layout, explain, memory_lines, priority_lines, table_of, volume_table_of, Layout, Table,
};
use std::fmt::Write as _;
use taskmeter_analysis::cells::{cells, Cell, Statistic};
use taskmeter_model::run::{Metric, RowStatus, RunRecord, METRICS};
use taskmeter_model::sweep::Param;

pub const SUMMARY_HEADER: &str = "timestamp,log_type,metric_name,count,mean_absolute_deviation,std_deviation,\
min_deviation,max_deviation,mean,std,min,p50,p90,p99,p99_9,p99_99,max,missed_periods,status";

/// The v1 study's columns (over |value - reference|), then the distribution of the values,
/// then the point: its index and one column per swept parameter (durations in ns).
pub fn summary_csv(record: &RunRecord) -> String {
    let swept: Vec<String> = record.sweeps.iter().map(|s| format!(",{}", s.param.name())).collect();
    let mut out = format!("{SUMMARY_HEADER},point,repetition{}\n", swept.concat());
    let float = |v: Option<f64>| v.map(|v| format!("{v:.2}")).unwrap_or_default();
    let int = |v: Option<i64>| v.map(|v| v.to_string()).unwrap_or_default();
    for row in record.rows_in_order() {
        let (Some(stats), Some(counts)) = (&row.statistics, &row.counts) else { continue };
        let status = serde_json::to_value(row.status).unwrap().as_str().unwrap_or("").to_string();
        for metric in METRICS {
            let s = stats.get(metric);
            let _ = writeln!(
                out,
                "{},{},{}_ns,{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{},{}{}",
                record.header.finished_at,
                row.runtime,
                metric.name(),
                s.count,
                float(s.mean_absolute_deviation),
                float(s.deviation_std),
                int(s.deviation_min),
                int(s.deviation_max),
                float(s.mean),
                float(s.std),
                int(s.min),
                int(s.p50),
                int(s.p90),
                int(s.p99),
                int(s.p99_9),
                int(s.p99_99),
                int(s.max),
                counts.missed_periods,
                status,
                row.point,
                row.repetition,
                point_values(record, row.point)
            );
        }
    }
    out
}

/// The dashboards' figures of a run: per runtime and point, what its table shows (the metric's
/// mean, p50 and p99, lateness's too where the run's metric is another; for the volume table the
/// delay and the iterations per second), each the mean over the repetitions with its 95 % range
/// for another invocation's (`Cell::estimate`), none with one repetition.
pub fn benchmarks(record: &RunRecord) -> Vec<dash::Benchmark> {
    let mut metrics = vec![record.metric];
    if record.metric != Metric::Lateness {
        metrics.push(Metric::Lateness);
    }
    let volume = default_layout(record) == Layout::Volume;
    let mut out = Vec::new();
    for point in &record.points {
        for cell in cells(record, point.index).into_iter().filter(|c| c.repetitions() > 0) {
            let subject = || subject_of(record, &cell);
            let ns = |measure: String, i: Option<taskmeter_stats::Interval>| {
                i.map(|i| dash::Benchmark::estimate(subject(), &measure, dash::Unit::Nanoseconds, false, &i))
            };
            for metric in &metrics {
                let name = metric.name();
                let percentile = |pick: fn(&taskmeter_stats::Summary) -> Option<i64>| {
                    cell.estimate(|r| pick(r.statistics.as_ref()?.get(*metric)).map(|v| v as f64))
                };
                out.extend(ns(format!("{name} mean"), cell.mean_estimate(*metric, Statistic::Mean)));
                out.extend(ns(format!("{name} p50"), percentile(|s| s.p50)));
                out.extend(ns(format!("{name} p99"), percentile(|s| s.p99)));
            }
            if volume {
                out.extend(ns("delay".into(), cell.mean_estimate(Metric::Actual, Statistic::MeanDeviation)));
                let rate = cell.estimate(|r| r.counts.as_ref().map(|c| c.iterations_per_s));
                let unit = dash::Unit::PerSecond(crate::report::tables::iteration_word(record));
                out.extend(rate.map(|i| dash::Benchmark::estimate(subject(), "throughput", unit, true, &i)));
            }
            dash::note_repetitions(&mut out, cell.repetitions());
        }
    }
    out
}

/// A cell's runtime, and its point where the run has several.
fn subject_of(record: &RunRecord, cell: &Cell) -> dash::Subject {
    let mut subject = vec![("runtime", cell.runtime.to_string())];
    if record.points.len() > 1 {
        subject.extend(record.points.get(cell.point).map(|p| ("point", p.label())));
    }
    subject
}

/// Every row's lateness as cumulative buckets (from its stored histogram, which holds a
/// wake-up before its deadline as 0), with the exact sum of its values where none was early.
pub fn distributions(record: &RunRecord) -> Vec<dash::Distribution> {
    let mut out = Vec::new();
    for row in record.rows_in_order() {
        let (Some(stats), Some(stored)) = (&row.statistics, &row.histograms) else { continue };
        let lateness = stats.get(Metric::Lateness);
        let sum = lateness
            .mean
            .filter(|_| lateness.min.is_some_and(|m| m >= 0))
            .map(|m| (m * lateness.count as f64, lateness.count));
        let mut subject = vec![("runtime", row.runtime.clone())];
        if record.points.len() > 1 {
            subject.extend(record.points.get(row.point).map(|p| ("point", p.label())));
        }
        subject.push(("repetition", row.repetition.to_string()));
        out.extend(dash::Distribution::of_stored(subject, "lateness", stored.get(Metric::Lateness), sum));
    }
    out
}

fn point_values(record: &RunRecord, point: usize) -> String {
    record.points.get(point).map(|p| p.values.iter().map(|(_, v)| format!(",{v}")).collect()).unwrap_or_default()
}

impl Report for RunRecord {
    fn csv(&self) -> String {
        summary_csv(self)
    }
    fn console_table(&self, layout: crate::report::tables::Layout) -> Option<String> {
        Some(crate::report::console::report(self, Some(layout)))
    }

    fn markdown(&self) -> String {
        crate::report::markdown::markdown(self)
    }

    fn title(&self) -> String {
        format!("taskmeter {} run of {}", self.experiment, self.header.started_at)
    }

    fn experiment(&self) -> String {
        self.experiment.clone()
    }

    fn benchmarks(&self) -> Vec<dash::Benchmark> {
        benchmarks(self)
    }

    fn distributions(&self) -> Vec<dash::Distribution> {
        distributions(self)
    }

    fn settings(&self) -> Vec<(String, String)> {
        let mut items = vec![("runtimes".to_string(), self.settings.runtimes.join(", "))];
        items.extend(crate::report::tables::settings(self));
        if self.order.shuffled {
            let seed = self.order.seed.map(|s| s.to_string()).unwrap_or_default();
            items.push((
                "order".into(),
                format!("runtimes and points shuffled, seed {seed} (--seed {seed} repeats it)"),
            ));
        }
        items
    }

    /// Failed, partial and skipped rows, then the console's warnings.
    fn warnings(&self) -> Vec<String> {
        let rows = self
            .rows_in_order()
            .into_iter()
            .filter(|r| matches!(r.status, RowStatus::Failed | RowStatus::Skipped | RowStatus::Partial))
            .map(|row| {
                let point = self.points.get(row.point).map(|p| p.label()).unwrap_or_default();
                let what = match row.status {
                    RowStatus::Failed => "failed",
                    RowStatus::Partial => "ran partially",
                    _ => "skipped",
                };
                let at = if point == "-" { String::new() } else { format!(" at {point}") };
                format!("{}{at} {what}: {}", row.runtime, row.reason.as_deref().unwrap_or(""))
            });
        rows.chain(crate::report::console::warnings(self)).collect()
    }

    fn figures(&self) -> Result<Vec<Chart>, String> {
        crate::report::chart::all(self)
    }

    fn sections(&self) -> Vec<Section> {
        let mut results = Vec::new();
        let volume = default_layout(self) == Layout::Volume;
        if volume {
            results.push(Block::Table(String::new(), volume_table_of(self), "results"));
            if self.sweeps.iter().any(|s| s.param == Param::Units) {
                results.extend(memory_lines(self).into_iter().map(|l| Block::Text(format!("Memory per unit: {l}"))));
            }
        }
        if let Some(classes) = class_table_of(self) {
            results.push(Block::Table("By priority class".into(), classes, "results"));
            results.extend(priority_lines(self).into_iter().map(Block::Text));
        }
        for point in self.points.iter().filter(|_| !volume) {
            let caption = match self.points.len() {
                1 => String::new(),
                _ => format!("point {}: {}", point.index, point.label()),
            };
            results.push(Block::Table(caption, table_of(self, point.index), "results"));
            results.push(Block::Figures(format!("point-{}", point.index)));
        }
        let section = |id: &str, heading: &str, blocks| Section { id: id.into(), heading: heading.into(), blocks };
        let mut sections = vec![section("results", "Results", results)];
        if self.experiment == "recipes" {
            let mut blocks = Vec::new();
            for table in crate::report::recipes::tables(self) {
                if let Some((header, lines)) = table.lines.split_first() {
                    let table_of =
                        Table { header: header.clone(), lines: lines.to_vec(), without_statistics: Vec::new() };
                    blocks.push(Block::Table(table.title.clone(), table_of, "results"));
                }
                blocks.extend(table.advice.map(|a| Block::Text(a.trim().to_string())));
                if !table.notes.is_empty() {
                    blocks.push(Block::Text(format!("{}: {}.", table.title, table.notes.join("; "))));
                }
            }
            blocks.push(Block::Text(format!("{}.", crate::report::recipes::explain())));
            blocks.push(Block::Figures("recipes".into()));
            sections.push(section("recipes", "Ways to wait: what each costs, and which to use", blocks));
        }
        sections.push(section("sweeps", "Across the swept parameters", vec![Block::Figures("sweeps".into())]));
        if crate::report::why::has_counters(self) {
            let mut why = vec![
                Block::Table(String::new(), crate::report::why::why_table_of(self), "results"),
                Block::Text(format!("{}.", crate::report::why::explain_why())),
            ];
            if let Some(view) = crate::report::why::view_table_of(self) {
                why.push(Block::Table("The runtime's own view of the same window".into(), view, "results"));
                why.push(Block::Text(format!("{}.", crate::report::why::explain_view())));
            }
            let timers = crate::report::why::timers(self);
            if !timers.is_empty() {
                why.push(Block::Text(format!("How each runtime keeps time: {}.", timers.join("; "))));
            }
            why.push(Block::Figures("why".into()));
            sections.push(section("why", "Why the rows differ: what each wake-up cost", why));
        }
        sections.push(section(
            "reading",
            "How to read this",
            vec![
                Block::Text(format!("{}.", explain(self))),
                Block::Text(
                    "Every statistic covers the measured samples of all units of a runtime (warm-up excluded). \
                     sd is the sample standard deviation (n - 1); percentiles are exact nearest-rank values; \
                     missed counts whole periods skipped after a late wake-up (absolute mode). Distributions are \
                     drawn from the HdrHistograms stored in run.json (5 significant digits), as percentile plots."
                        .into(),
                ),
            ],
        ));
        let workers: Vec<Vec<String>> = self
            .rows_in_order()
            .into_iter()
            .filter_map(|row| {
                let w = row.worker.as_ref()?;
                let sched = w.sched.as_ref();
                Some(vec![
                    row.runtime.clone(),
                    self.points.get(row.point).map(|p| p.label()).unwrap_or_default(),
                    w.runtime_version.clone().unwrap_or_default(),
                    sched.map(|s| format!("{} prio {}", s.policy, s.priority)).unwrap_or_default(),
                    sched.map(|s| s.nice.to_string()).unwrap_or_default(),
                    sched.and_then(|s| s.timerslack_ns).map(|n| format!("{n} ns")).unwrap_or_default(),
                    w.peak_rss_kb.map(|kb| format!("{:.1} MiB", kb as f64 / 1024.0)).unwrap_or_default(),
                    format!("{:.2} s", w.wall_ns as f64 / 1e9),
                    w.priority.clone().unwrap_or_default(),
                ])
            })
            .collect();
        if !workers.is_empty() {
            let header = [
                "runtime",
                "point",
                "version",
                "policy",
                "nice",
                "timer slack",
                "peak RSS",
                "wall time",
                "priority classes",
            ];
            let t = Table { header: header.map(String::from).to_vec(), lines: workers, without_statistics: Vec::new() };
            sections.push(section("workers", "Workers", vec![Block::Table(String::new(), t, "workers")]));
        }
        sections
    }
}
