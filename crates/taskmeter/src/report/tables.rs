//! What every report of a run shows, as view models (header, lines, the rows without
//! statistics and why): the ranked table of a point, the volume and study tables, the classes,
//! and the sentences that say how to read them. The console, Markdown and HTML render these.

use super::format::{format_count, format_ns, format_range, format_rate, format_ratio};
use taskmeter_analysis::cells::{cells, Cell, Statistic};
use taskmeter_console::sizes::format_bytes;
use taskmeter_model::run::{Metric, Row, RowStatus, RunRecord};
use taskmeter_stats::{ratio_range, Interval};

/// The header of the column of a mean's 95 % range for another invocation.
pub const RANGE: &str = "95 % range";

/// The runtimes of one point that have statistics, ranked by the mean absolute deviation of the
/// metric from its reference (`explain` says which: mean |lateness|, mean |actual - expected|
/// as in the v1 study), lowest first.
pub fn ranked(record: &RunRecord, point: usize) -> Vec<Cell<'_>> {
    let key =
        |cell: &Cell| cell.mean_estimate(record.metric, Statistic::MeanDeviation).map_or(f64::INFINITY, |i| i.value);
    let mut ranked: Vec<Cell> = cells(record, point).into_iter().filter(|c| c.repetitions() > 0).collect();
    ranked.sort_by(|a, b| key(a).total_cmp(&key(b)));
    ranked
}

/// "± 1.2 µs": half the width of a mean's 95 % range; "-" where there is none (one repetition).
fn plus_minus_ns(interval: Option<Interval>) -> String {
    interval.filter(Interval::has_range).map_or_else(|| "-".into(), |i| format!("± {}", format_ns(i.half_width)))
}

/// "1.00", or "14.2 (11.0–18.3)": the cell's ranking statistic over the best cell's, with the
/// 95 % range for another invocation's ratio on a log scale (none with one repetition).
fn ratio_to_best(metric: Metric, cell: &Cell, best: &Cell) -> String {
    let estimate = |c: &Cell| c.mean_estimate(metric, Statistic::MeanDeviation);
    match (estimate(cell), estimate(best)) {
        _ if cell.runtime == best.runtime => "1.00".into(),
        (Some(a), Some(b)) if b.value > 0.0 => format_range(&ratio_range(&a, &b), format_ratio),
        _ => "n/a".into(),
    }
}

/// How the console shows the results.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Layout {
    /// One table per point, runtimes ranked best first, with the ratio to the best
    Ranked,
    /// One table of every runtime and point: min / mean / max, p50, p99 in µs (the nanosleep study's)
    Study,
    /// One line per runtime and point: units reached, delay, iterations, throughput, memory (the
    /// volume and atomic-sum studies'); the default for those experiments and for --sleep none
    Volume,
    /// One line per runtime and point: lateness p50 and p99 beside what the kernel counted for
    /// the worker per wake-up (CPU, context switches, migrations, run-queue wait)
    Why,
    /// One table per runtime and point: each way to wait (its own sleep and its recipes) with
    /// lateness, early wake-ups and CPU per unit, and which to use (the recipes experiment's)
    Recipes,
}

/// The layout a run gets when `--table` is not given.
pub fn default_layout(record: &RunRecord) -> Layout {
    if record.experiment == "recipes" {
        Layout::Recipes
    } else if record.experiment != "sleep" || !record.settings.sleep.schedule.sleeps() {
        Layout::Volume
    } else {
        Layout::Ranked
    }
}

/// A runtime's name, with what keeps its numbers from being a full run.
fn cell_name(cell: &Cell) -> String {
    let mut name = cell.runtime.to_string();
    let planned = cell.measured.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.units_planned).max().unwrap_or(0);
    let started: Vec<u32> = cell.measured.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.units).collect();
    match cell.status() {
        RowStatus::Interrupted => name.push_str(" (interrupted)"),
        RowStatus::Partial => name.push_str(&format!(" (partial {}/{planned})", span(&started))),
        _ => {}
    }
    name
}

/// "5" or, when repetitions differ, "4-5".
fn span(values: &[u32]) -> String {
    let (lo, hi) = (values.iter().min().copied().unwrap_or(0), values.iter().max().copied().unwrap_or(0));
    if lo == hi {
        format_count(lo as u64)
    } else {
        format!("{}-{}", format_count(lo as u64), format_count(hi as u64))
    }
}

/// The reasons of a cell's repetitions that have no statistics: ("runtime", "FAILED: why").
fn unmeasured_lines(record: &RunRecord, cell: &Cell) -> Vec<(String, String)> {
    cell.unmeasured
        .iter()
        .map(|r| {
            let what = match r.status {
                RowStatus::Skipped => "skipped",
                RowStatus::Interrupted => "interrupted",
                _ => "FAILED",
            };
            let repetition =
                if record.settings.repeat > 1 { format!(" repetition {}", r.repetition) } else { String::new() };
            let at = at_point(record, r);
            (r.runtime.clone(), format!("{what}{repetition}{at}: {}", r.reason.as_deref().unwrap_or("")))
        })
        .collect()
}

pub fn class_name(class: u32) -> &'static str {
    if class == 0 {
        "high"
    } else {
        "low"
    }
}

/// " at units=100" when the run has several points.
pub fn at_point(record: &RunRecord, row: &Row) -> String {
    record
        .points
        .get(row.point)
        .filter(|_| record.points.len() > 1)
        .map(|p| format!(" at {}", p.label()))
        .unwrap_or_default()
}

/// What one iteration's count means: an increment of the shared counter in atomic-sum.
pub fn iteration_word(record: &RunRecord) -> &'static str {
    if record.settings.experiment == taskmeter_protocol::Experiment::AtomicSum {
        "increments"
    } else {
        "iterations"
    }
}

/// The volume study's table: every runtime at every point, in runtime then point order. With
/// repetitions, each figure is the mean over them and the delay and rate carry their interval.
pub fn volume_table_of(record: &RunRecord) -> Table {
    let classes = record.settings.priority_classes > 1;
    let repeated = record.settings.repeat > 1;
    // Units have their own column (with what started of them).
    let swept: Vec<&str> = record
        .sweeps
        .iter()
        .filter(|s| s.param != taskmeter_model::sweep::Param::Units)
        .map(|s| s.param.name())
        .collect();
    let mut header = vec!["runtime".to_string()];
    header.extend(swept.iter().map(|s| s.to_string()));
    header.extend(["units", "delay"].map(str::to_string));
    if repeated {
        header.push(RANGE.into());
    }
    header.extend(["lateness p50", "p99", "iter/unit"].map(str::to_string));
    header.push(iteration_word(record).into());
    if repeated {
        header.push(RANGE.into());
    }
    if classes {
        header.extend(["high", "low", "delay high", "delay low"].map(str::to_string));
    }
    header.extend(["create/unit", "peak RSS", "rings"].map(str::to_string));
    let mut lines = Vec::new();
    let mut without_statistics = Vec::new();
    for runtime in &record.settings.runtimes {
        for point in &record.points {
            let Some(cell) = cells(record, point.index).into_iter().find(|c| c.runtime == runtime) else { continue };
            without_statistics.extend(unmeasured_lines(record, &cell));
            if cell.repetitions() == 0 {
                continue;
            }
            let ns = |v: Option<f64>| v.map(format_ns).unwrap_or_else(|| "-".into());
            let count = |f: &dyn Fn(&taskmeter_model::run::Counts) -> f64| cell.mean_of(|r| r.counts.as_ref().map(f));
            let mut line = vec![cell_name(&cell)];
            line.extend(
                point
                    .values
                    .iter()
                    .filter(|(p, _)| *p != taskmeter_model::sweep::Param::Units)
                    .map(|(p, v)| p.format_value(*v)),
            );
            let started: Vec<u32> = cell.measured.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.units).collect();
            let planned =
                cell.measured.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.units_planned).max().unwrap_or(0);
            let mut units = if started.iter().any(|u| *u < planned) {
                format!("{}/{}", span(&started), format_count(planned as u64))
            } else {
                span(&started)
            };
            let starved = cell.sum(|r| r.counts.as_ref().map(|c| c.units_starved as u64));
            if starved > 0 {
                units.push_str(&format!(" ({} starved)", format_count(starved)));
            }
            let delay = cell.mean_estimate(Metric::Actual, Statistic::MeanDeviation);
            line.extend([units, ns(delay.map(|d| d.value))]);
            if repeated {
                line.push(plus_minus_ns(delay));
            }
            line.extend([
                ns(cell.mean_percentile(Metric::Lateness, |s| s.p50)),
                ns(cell.mean_percentile(Metric::Lateness, |s| s.p99)),
                count(&|c| c.iterations_measured as f64 / c.units.max(1) as f64)
                    .map_or("-".into(), |v| format!("{v:.1}")),
            ]);
            let rate = cell.estimate(|r| r.counts.as_ref().map(|c| c.iterations_per_s));
            line.push(count(&|c| c.iterations_per_s).map_or("-".into(), format_rate));
            if repeated {
                line.push(rate.map_or("-".into(), |r| format!("± {}", format_rate(r.half_width))));
            }
            if classes {
                let class_of = |r: &Row, c: u32| r.classes.iter().find(|k| k.class == c).cloned();
                for c in 0..2 {
                    line.push(cell.mean_of(|r| Some(class_of(r, c)?.iterations_per_s)).map_or("-".into(), format_rate));
                }
                for c in 0..2 {
                    line.push(ns(cell.mean_of(|r| class_of(r, c)?.statistics?.actual.mean_absolute_deviation)));
                }
            }
            line.push(ns(count(&|c| c.create_per_unit_ns)));
            line.push(
                cell.mean_of(|r| r.worker.as_ref()?.peak_rss_kb.map(|kb| kb as f64))
                    .map(|kb| format_bytes(kb * 1024.0))
                    .unwrap_or_else(|| "-".into()),
            );
            line.push(cell.mean_of(taskmeter_analysis::rows::ring_bytes).map_or("-".into(), format_bytes));
            lines.push(line);
        }
    }
    Table { header, lines, without_statistics }
}

/// How each runtime applied the priority classes, as its workers said (`hello.priority`).
pub fn priority_lines(record: &RunRecord) -> Vec<String> {
    let mut lines = Vec::new();
    for runtime in &record.settings.runtimes {
        let said =
            record.rows.iter().filter(|r| &r.runtime == runtime).find_map(|r| r.worker.as_ref()?.priority.clone());
        if let Some(priority) = said {
            lines.push(format!("{runtime}: {priority}"));
        }
    }
    lines
}

/// Memory per unit of each runtime, as the slope of peak RSS across the run's points.
pub fn memory_lines(record: &RunRecord) -> Vec<String> {
    taskmeter_analysis::rows::memory_per_unit(record)
        .into_iter()
        .map(|m| match m.bytes_per_unit {
            Some(b) => format!(
                "{}: {} per unit (slope of peak RSS less taskmeter's rings over {} points, {}..{} units); \
                 the rings {} per unit",
                m.runtime,
                format_bytes(b),
                m.points,
                format_count(m.units_min as u64),
                format_count(m.units_max as u64),
                m.ring_bytes_per_unit.map_or("-".into(), format_bytes)
            ),
            None => format!("{}: needs two points with different unit counts", m.runtime),
        })
        .collect()
}

/// Per priority class: what each class's units did (the mean over repetitions).
pub fn class_table_of(record: &RunRecord) -> Option<Table> {
    if record.settings.priority_classes < 2 {
        return None;
    }
    let header = ["runtime", "point", "class", "units", "iterations", "lateness mean", "p99", "delay"]
        .map(str::to_string)
        .to_vec();
    let mut lines = Vec::new();
    for point in &record.points {
        for cell in cells(record, point.index).iter().filter(|c| c.repetitions() > 0) {
            for class in 0..record.settings.priority_classes {
                let of = |r: &Row| r.classes.iter().find(|k| k.class == class).cloned();
                let statistic = |f: &dyn Fn(&taskmeter_stats::Summary) -> Option<f64>| {
                    cell.mean_of(|r| f(&of(r)?.statistics?.lateness))
                };
                let ns = |v: Option<f64>| v.map(format_ns).unwrap_or_else(|| "-".into());
                lines.push(vec![
                    cell.runtime.to_string(),
                    point.label(),
                    class_name(class).into(),
                    cell.mean_of(|r| of(r).map(|k| k.units as f64))
                        .map_or("-".into(), |u| format_count(u.round() as u64)),
                    cell.mean_of(|r| of(r).map(|k| k.iterations_per_s)).map_or("-".into(), format_rate),
                    ns(statistic(&|s| s.mean)),
                    ns(statistic(&|s| s.p99.map(|v| v as f64))),
                    ns(cell.mean_of(|r| of(r)?.statistics?.actual.mean_absolute_deviation)),
                ]);
            }
        }
    }
    Some(Table { header, lines, without_statistics: Vec::new() })
}

/// One point's table: a header, a line per measured row (best first), and the rows that have
/// no statistics, with their reason.
pub struct Table {
    pub header: Vec<String>,
    pub lines: Vec<Vec<String>>,
    pub without_statistics: Vec<(String, String)>,
}

pub fn table_of(record: &RunRecord, point: usize) -> Table {
    let metric = record.metric;
    let mean_header = format!("{} mean ± sd", metric.name());
    // One repetition has no interval: no column for it.
    let repeated = record.settings.repeat > 1;
    let header: Vec<String> =
        ["runtime", "samples", mean_header.as_str(), RANGE, "p50", "p99", "max", "missed", "vs best"]
            .into_iter()
            .filter(|h| repeated || *h != RANGE)
            .map(str::to_string)
            .collect();
    let ranked = ranked(record, point);
    let lines = ranked
        .iter()
        .map(|cell| {
            let ns = |v: Option<f64>| v.map(format_ns).unwrap_or_else(|| "-".into());
            let mean = cell.mean_estimate(metric, Statistic::Mean);
            let mean_sd = match (mean, cell.pooled_std(metric)) {
                (Some(m), Some(sd)) => format!("{} ± {}", format_ns(m.value), format_ns(sd)),
                (Some(m), None) => format_ns(m.value),
                _ => "-".into(),
            };
            let mut line = vec![cell_name(cell), format_count(cell.samples(metric)), mean_sd];
            if repeated {
                line.push(plus_minus_ns(mean));
            }
            line.extend([
                ns(cell.mean_percentile(metric, |s| s.p50)),
                ns(cell.mean_percentile(metric, |s| s.p99)),
                ns(cell.max(metric).map(|v| v as f64)),
                format_count(cell.sum(|r| r.counts.as_ref().map(|c| c.missed_periods))),
                ratio_to_best(metric, cell, &ranked[0]),
            ]);
            line
        })
        .collect();
    let without_statistics = cells(record, point).iter().flat_map(|c| unmeasured_lines(record, c)).collect();
    Table { header, lines, without_statistics }
}

/// The nanosleep study's table: one line per runtime and point, min / mean / max of the metric
/// in µs, plus p50 and p99 (with repetitions: the extremes over all, the mean of the others,
/// and the mean's 95 % range for another invocation).
pub fn study_table_of(record: &RunRecord) -> Table {
    let repeated = record.settings.repeat > 1;
    let mut lines = vec![vec!["runtime".to_string()]];
    let swept: Vec<&str> = record.sweeps.iter().map(|s| s.param.name()).collect();
    lines[0].extend(swept.iter().map(|s| s.to_string()));
    lines[0].extend(["samples", "min (µs)", "mean (µs)"].map(str::to_string));
    if repeated {
        lines[0].push(RANGE.into());
    }
    lines[0].extend(["max (µs)", "p50 (µs)", "p99 (µs)"].map(str::to_string));
    let us = |v: Option<f64>| v.map(|v| format!("{:.1}", v / 1e3)).unwrap_or_else(|| "-".into());
    let metric = record.metric;
    // Cells without statistics (a policy the host refuses, ...) are said under the table.
    let mut without_statistics = Vec::new();
    for point in &record.points {
        for cell in cells(record, point.index) {
            let mut line = vec![cell.runtime.to_string()];
            line.extend(point.values.iter().map(|(p, v)| p.format_value(*v)));
            if cell.repetitions() == 0 {
                without_statistics.extend(unmeasured_lines(record, &cell).into_iter().take(1));
                continue;
            }
            let mean = cell.mean_estimate(metric, Statistic::Mean);
            line.extend([
                format_count(cell.samples(metric)),
                us(cell.min(metric).map(|v| v as f64)),
                us(mean.map(|m| m.value)),
            ]);
            if repeated {
                line.push(mean.map_or("-".into(), |m| format!("± {:.1}", m.half_width / 1e3)));
            }
            line.extend([
                us(cell.max(metric).map(|v| v as f64)),
                us(cell.mean_percentile(metric, |s| s.p50)),
                us(cell.mean_percentile(metric, |s| s.p99)),
            ]);
            lines.push(line);
        }
    }
    let header = lines.remove(0);
    Table { header, lines, without_statistics }
}

/// The run's settings in one line, e.g. "sleep | 5 units | fixed:1ms absolute | busy 1000";
/// a swept parameter shows its values instead.
pub fn settings_line(record: &RunRecord) -> String {
    settings(record).into_iter().map(|(_, value)| value).collect::<Vec<_>>().join(" | ")
}

/// The settings of a run, as (term, value): the settings line's parts.
pub fn settings(record: &RunRecord) -> Vec<(String, String)> {
    use taskmeter_model::sweep::Param;
    let s = &record.settings;
    let swept = |param: Param| {
        record.sweeps.iter().find(|w| w.param == param).map(|w| {
            let values: Vec<String> = w.values.iter().map(|v| w.param.format_value(*v)).collect();
            format!("{} swept: {}", param.name(), values.join(", "))
        })
    };
    let mode = match s.sleep.mode {
        taskmeter_protocol::Mode::Relative => "relative",
        taskmeter_protocol::Mode::Absolute => "absolute",
    };
    let units =
        swept(Param::Units).unwrap_or_else(|| format!("{} unit{}", s.units, if s.units == 1 { "" } else { "s" }));
    let sleep = swept(Param::Sleep)
        .or_else(|| swept(Param::Modulo))
        .map(|w| format!("{} ({w})", s.sleep_spec))
        .unwrap_or_else(|| s.sleep_spec.clone());
    let busy = swept(Param::Busy).unwrap_or_else(|| match (s.busy.iters, s.busy.yield_each_step) {
        (_, yielding) if s.busy_ns.is_some() => {
            format!(
                "busy {} in each runtime's iterations{}",
                format_ns(s.busy_ns.unwrap_or(0) as f64),
                if yielding { " + yield" } else { "" }
            )
        }
        (0, _) => "no busy work".to_string(),
        (n, true) => format!("busy {n} + yield"),
        (n, false) => format!("busy {n}"),
    });
    let busy = if s.busy.yield_each_step && swept(Param::Busy).is_some() { format!("{busy} (+ yield)") } else { busy };
    let duration = swept(Param::Duration).unwrap_or_else(|| format!("{} measured", format_ns(s.duration_ns as f64)));
    let warmup = swept(Param::Warmup).unwrap_or_else(|| format!("after {} warm-up", format_ns(s.warmup_ns as f64)));
    let mut items = vec![
        ("experiment", record.experiment.to_string()),
        ("units", units),
        ("schedule", format!("{sleep} {mode}")),
        ("busy work", busy),
        ("time", format!("{duration} {warmup}")),
    ];
    if s.priority_classes > 1 {
        items.push(("priority classes", format!("{} priority classes", s.priority_classes)));
    }
    if s.together {
        items.push(("workers", "runtimes together".into()));
    }
    if s.repeat > 1 {
        items.push(("repetitions", format!("{} repetitions", s.repeat)));
    }
    items.into_iter().map(|(term, value)| (term.to_string(), value)).collect()
}

pub fn explain_volume(record: &RunRecord) -> String {
    let counted = if record.settings.experiment == taskmeter_protocol::Experiment::AtomicSum {
        "measured increments of the shared counter"
    } else {
        "measured iterations"
    };
    format!(
        "delay = mean |actual - expected| (the v2 study's); {} = {counted} per second, all units; \
         iter/unit = measured iterations per unit; create/unit = time to create the units and park them at \
         the start gate, per unit; peak RSS of the worker; rings = taskmeter's share of it, the units' \
         rings of samples (units x ring x 32 bytes, allocated before the gate); memory per unit = \
         least-squares slope over units started of peak RSS less the rings (the runtime's own){}",
        iteration_word(record),
        if record.settings.repeat > 1 {
            format!("; ± = {}", taskmeter_analysis::cells::basis_note(record))
        } else {
            String::new()
        }
    )
}

/// How to read the table of one metric: what it is ranked by, and what its ranges are.
pub fn explain(record: &RunRecord) -> String {
    let metric = match record.metric {
        Metric::Lateness => {
            "lateness = wake-up time - intended wake-up time; ranked by mean |lateness| (the mean column counts an \
             early wake-up below 0, the ranking by how early it was)"
        }
        Metric::Actual => "actual = iteration end - start (busy work included); ranked by mean |actual - expected|",
        Metric::Full => "full = iteration end - previous end; ranked by mean |full - expected|",
        Metric::Busy => "busy = time of the busy phase; ranked by mean |busy|, its mean (busy is never below 0)",
    };
    let basis = taskmeter_analysis::cells::basis_note(record);
    match record.settings.repeat {
        0 | 1 => format!(
            "{metric}; vs best = that ranking figure over the best row's; sd = standard deviation within the \
             repetition; {basis}"
        ),
        _ => format!(
            "{metric}; vs best = that ranking figure over the best row's, as ratio (low–high): the 95 % range for \
             another invocation's ratio, on a log scale, so never below 0; sd = standard deviation within a \
             repetition; {basis}"
        ),
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use taskmeter_machine::env::Environment;
    use taskmeter_model::header::Record;
    use taskmeter_model::run::PerMetric;
    use taskmeter_stats::Summary;

    /// A sleep run of `runtimes`, with `repeat` repetitions and these rows, for the reports' tests.
    pub(crate) fn record(runtimes: &[&str], repeat: u32, rows: Vec<Row>) -> RunRecord {
        let settings = serde_json::json!({
            "runtimes": runtimes, "experiment": "sleep", "units": 1, "priority_classes": 1,
            "start_limit_ns": 1, "together": false, "duration_ns": 1, "warmup_ns": 0, "repeat": repeat,
            "sleep": {"mode": "absolute", "schedule": {"kind": "fixed", "ns": 1}}, "sleep_spec": "fixed:1ns",
            "busy": {"iters": 0, "yield": false}, "grace_ns": 1
        });
        RunRecord {
            header: RunRecord::new_header(Vec::new(), String::new(), Environment::default()),
            experiment: "sleep".into(),
            metric: Metric::Lateness,
            settings: serde_json::from_value(settings).unwrap(),
            sweeps: Vec::new(),
            points: Vec::new(),
            order: taskmeter_model::run::Order { shuffled: false, seed: None },
            rows,
            taskmeter_cpu_ns: None,
            taskmeter_prepared: None,
        }
    }

    /// A measured repetition of `runtime` whose every metric has these values.
    fn repetition(runtime: &str, repetition: u32, values: &[i64]) -> Row {
        let summary = Summary::of(values, &vec![0; values.len()]);
        Row {
            repetition,
            statistics: Some(PerMetric::from_fn(|_| summary.clone())),
            ..Row::new(runtime, RowStatus::Ok)
        }
    }

    /// Early wake-ups: "early" wakes 100 ns before and after its deadline (mean 0, mean |lateness|
    /// 100), "steady" 40, 50 and 60 ns late in its three repetitions (mean |lateness| 50). The
    /// table ranks by mean |lateness|, and says so: "steady" first, though its mean is higher.
    /// vs best: 100 / 50 = 2, se of ln 2 = (10 / √3) / 50 = 0.11547 (early's is 0), half-width
    /// 4.302653 x √2 x 0.11547 = 0.702620: 2 e^-0.70262 = 0.991 to 2 e^0.70262 = 4.04.
    #[test]
    fn the_table_is_ranked_by_what_its_note_says() {
        let mut rows: Vec<Row> = (1..=3).map(|r| repetition("early", r, &[-100, 100])).collect();
        rows.extend([40, 50, 60].iter().zip(1..).map(|(v, r)| repetition("steady", r, &[*v, *v])));
        let record = record(&["early", "steady"], 3, rows);
        let order: Vec<&str> = ranked(&record, 0).iter().map(|c| c.runtime).collect();
        assert_eq!(order, ["steady", "early"]);
        assert!(explain(&record).contains("ranked by mean |lateness|"), "{}", explain(&record));
        let table = table_of(&record, 0);
        let vs_best = table.header.iter().position(|h| h == "vs best").unwrap();
        assert_eq!((table.lines[0][vs_best].as_str(), table.lines[1][vs_best].as_str()), ("1.00", "2.00 (0.991–4.04)"));
        assert_eq!(table.lines[0][table.header.iter().position(|h| h == RANGE).unwrap()], "± 35 ns");
    }
}
