//! What a person reads: the console table and the formatting of durations.

use crate::aggregate::{cells, Cell, Statistic};
use crate::results::{Metric, Row, RowStatus, RunRecord};
use crate::stats::{ratio_interval, Interval};

/// From here on, a closed stdout (`taskmeter list | head`) ends taskmeter quietly, as it does
/// any Unix filter, instead of a panic. Only once no worker is running: while workers run, a
/// worker that exits early must not take taskmeter down through its stdin pipe.
pub fn quiet_on_closed_stdout() {
    // SAFETY: restores the default action of one signal; no handler is involved.
    unsafe { libc::signal(libc::SIGPIPE, libc::SIG_DFL) };
}

/// A duration in ns with three significant digits and a fitting unit.
pub fn format_ns(ns: f64) -> String {
    let magnitude = ns.abs();
    let (value, unit) = if magnitude < 1e3 {
        (ns, "ns")
    } else if magnitude < 1e6 {
        (ns / 1e3, "µs")
    } else if magnitude < 1e9 {
        (ns / 1e6, "ms")
    } else {
        (ns / 1e9, "s")
    };
    let decimals = if unit == "ns" || value.abs() >= 100.0 {
        0
    } else if value.abs() >= 10.0 {
        1
    } else {
        2
    };
    format!("{value:.decimals$} {unit}")
}

fn format_count(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// The runtimes of one point that have statistics, ranked by the mean absolute deviation of the
/// metric (for `lateness` and `busy` that is their mean; for `actual` and `full`, the mean
/// distance from the expected sleep, as in the v1 study), lowest first.
pub fn ranked(record: &RunRecord, point: usize) -> Vec<Cell<'_>> {
    let key = |cell: &Cell| cell.mean_estimate(record.metric, Statistic::MeanDeviation).map_or(f64::INFINITY, |i| i.value);
    let mut ranked: Vec<Cell> = cells(record, point).into_iter().filter(|c| c.repetitions() > 0).collect();
    ranked.sort_by(|a, b| key(a).total_cmp(&key(b)));
    ranked
}

/// "± 1.2 µs": half the width of a 95 % interval.
fn plus_minus_ns(interval: Option<Interval>) -> String {
    interval.map_or_else(|| "-".into(), |i| format!("± {}", format_ns(i.half_width)))
}

/// "1.00", or "14.2 ± 0.3": the cell's ranking statistic over the best cell's, with a 95 %
/// interval propagated from both.
fn ratio_to_best(metric: Metric, cell: &Cell, best: &Cell) -> String {
    let estimate = |c: &Cell| c.mean_estimate(metric, Statistic::MeanDeviation);
    match (estimate(cell), estimate(best)) {
        _ if cell.runtime == best.runtime => "1.00".into(),
        (Some(a), Some(b)) if b.value > 0.0 => {
            let r = ratio_interval(&a, &b);
            if r.value >= 10.0 { format!("{:.1} ± {:.1}", r.value, r.half_width) } else { format!("{:.2} ± {:.2}", r.value, r.half_width) }
        }
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
}

/// The layout a run gets when `--table` is not given.
pub fn default_layout(record: &RunRecord) -> Layout {
    if record.experiment != "sleep" || !record.settings.sleep.schedule.sleeps() {
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
    if lo == hi { format_count(lo as u64) } else { format!("{}-{}", format_count(lo as u64), format_count(hi as u64)) }
}

/// The reasons of a cell's repetitions that have no statistics: ("runtime", "FAILED: why").
fn unmeasured_lines(record: &RunRecord, cell: &Cell) -> Vec<(String, String)> {
    cell.unmeasured
        .iter()
        .map(|r| {
            let what = if r.status == RowStatus::Skipped { "skipped" } else { "FAILED" };
            let repetition = if record.settings.repeat > 1 { format!(" repetition {}", r.repetition) } else { String::new() };
            let at = at_point(record, r);
            (r.runtime.clone(), format!("{what}{repetition}{at}: {}", r.reason.as_deref().unwrap_or("")))
        })
        .collect()
}

fn format_rate(per_s: f64) -> String {
    if per_s >= 1e6 {
        format!("{:.2} M/s", per_s / 1e6)
    } else if per_s >= 1e4 {
        format!("{:.1} k/s", per_s / 1e3)
    } else {
        format!("{per_s:.1}/s")
    }
}

fn format_bytes(bytes: f64) -> String {
    let a = bytes.abs();
    if a >= 1024.0 * 1024.0 {
        format!("{:.1} MiB", bytes / 1024.0 / 1024.0)
    } else if a >= 1024.0 {
        format!("{:.1} KiB", bytes / 1024.0)
    } else {
        format!("{bytes:.0} B")
    }
}

pub fn class_name(class: u32) -> &'static str {
    if class == 0 { "high" } else { "low" }
}

/// " at units=100" when the run has several points.
fn at_point(record: &RunRecord, row: &Row) -> String {
    record.points.get(row.point).filter(|_| record.points.len() > 1).map(|p| format!(" at {}", p.label())).unwrap_or_default()
}

/// What one iteration's count means: an increment of the shared counter in atomic-sum.
pub fn iteration_word(record: &RunRecord) -> &'static str {
    if record.settings.experiment == crate::plan::Experiment::AtomicSum { "increments" } else { "iterations" }
}

/// The volume study's table: every runtime at every point, in runtime then point order. With
/// repetitions, each figure is the mean over them and the delay and rate carry their interval.
pub fn volume_table_of(record: &RunRecord) -> Table {
    let classes = record.settings.priority_classes > 1;
    let repeated = record.settings.repeat > 1;
    // Units have their own column (with what started of them).
    let swept: Vec<&str> = record.sweeps.iter().filter(|s| s.param != crate::sweep::Param::Units).map(|s| s.param.name()).collect();
    let mut header = vec!["runtime".to_string()];
    header.extend(swept.iter().map(|s| s.to_string()));
    header.extend(["units", "delay"].map(str::to_string));
    if repeated {
        header.push("95 % CI".into());
    }
    header.extend(["lateness p50", "p99", "iter/unit"].map(str::to_string));
    header.push(iteration_word(record).into());
    if repeated {
        header.push("95 % CI".into());
    }
    if classes {
        header.extend(["high", "low", "delay high", "delay low"].map(str::to_string));
    }
    header.extend(["create/unit", "peak RSS"].map(str::to_string));
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
            let count = |f: &dyn Fn(&crate::results::Counts) -> f64| cell.mean_of(|r| r.counts.as_ref().map(f));
            let mut line = vec![cell_name(&cell)];
            line.extend(point.values.iter().filter(|(p, _)| *p != crate::sweep::Param::Units).map(|(p, v)| p.format_value(*v)));
            let started: Vec<u32> = cell.measured.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.units).collect();
            let planned = cell.measured.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.units_planned).max().unwrap_or(0);
            let mut units = if started.iter().any(|u| *u < planned) { format!("{}/{}", span(&started), format_count(planned as u64)) } else { span(&started) };
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
                count(&|c| c.iterations_measured as f64 / c.units.max(1) as f64).map_or("-".into(), |v| format!("{v:.1}")),
            ]);
            let rate = cell.estimate(|r| r.counts.as_ref().map(|c| c.iterations_per_s), |_| None);
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
            line.push(cell.mean_of(|r| r.worker.as_ref()?.peak_rss_kb.map(|kb| kb as f64)).map(|kb| format_bytes(kb * 1024.0)).unwrap_or_else(|| "-".into()));
            lines.push(line);
        }
    }
    Table { header, lines, without_statistics }
}

/// How each runtime applied the priority classes, as its workers said (`hello.priority`).
pub fn priority_lines(record: &RunRecord) -> Vec<String> {
    let mut lines = Vec::new();
    for runtime in &record.settings.runtimes {
        let said = record.rows.iter().filter(|r| &r.runtime == runtime).find_map(|r| r.worker.as_ref()?.priority.clone());
        if let Some(priority) = said {
            lines.push(format!("{runtime}: {priority}"));
        }
    }
    lines
}

/// Memory per unit of each runtime, as the slope of peak RSS across the run's points.
pub fn memory_lines(record: &RunRecord) -> Vec<String> {
    crate::results::memory_per_unit(record)
        .into_iter()
        .map(|m| match m.bytes_per_unit {
            Some(b) => format!(
                "{}: {} per unit (slope of peak RSS over {} points, {}..{} units)",
                m.runtime,
                format_bytes(b),
                m.points,
                format_count(m.units_min as u64),
                format_count(m.units_max as u64)
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
                let statistic = |f: &dyn Fn(&crate::stats::Summary) -> Option<f64>| cell.mean_of(|r| f(&of(r)?.statistics?.lateness));
                let ns = |v: Option<f64>| v.map(format_ns).unwrap_or_else(|| "-".into());
                lines.push(vec![
                    cell.runtime.to_string(),
                    point.label(),
                    class_name(class).into(),
                    cell.mean_of(|r| of(r).map(|k| k.units as f64)).map_or("-".into(), |u| format_count(u.round() as u64)),
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

fn render_with_reasons(t: &Table) -> String {
    let mut all = vec![t.header.clone()];
    all.extend(t.lines.iter().cloned());
    let mut out = render_table(&all);
    let w = width(&all, 0);
    for (runtime, reason) in &t.without_statistics {
        out.push_str(&format!("{runtime:<w$}  {reason}\n"));
    }
    out
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
    let header = ["runtime", "samples", mean_header.as_str(), "95 % CI", "p50", "p99", "max", "missed", "vs best"]
        .map(str::to_string)
        .to_vec();
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
            vec![
                cell_name(cell),
                format_count(cell.samples(metric)),
                mean_sd,
                plus_minus_ns(mean),
                ns(cell.mean_percentile(metric, |s| s.p50)),
                ns(cell.mean_percentile(metric, |s| s.p99)),
                ns(cell.max(metric).map(|v| v as f64)),
                format_count(cell.sum(|r| r.counts.as_ref().map(|c| c.missed_periods))),
                ratio_to_best(metric, cell, &ranked[0]),
            ]
        })
        .collect();
    let without_statistics = cells(record, point).iter().flat_map(|c| unmeasured_lines(record, c)).collect();
    Table { header, lines, without_statistics }
}

pub fn table(record: &RunRecord, point: usize) -> String {
    let t = table_of(record, point);
    let mut all = vec![t.header.clone()];
    all.extend(t.lines.iter().cloned());
    let mut out = render(&all, &[false, true, true, true, true, true, true, true, true]);
    let w = width(&all, 0);
    for (runtime, reason) in &t.without_statistics {
        out.push_str(&format!("{runtime:<w$}  {reason}\n"));
    }
    out
}

/// The nanosleep study's table: one line per runtime and point, min / mean / max of the metric
/// in µs, plus p50 and p99 (with repetitions: the extremes over all, the mean of the others,
/// and the mean's 95 % interval).
pub fn study_table(record: &RunRecord) -> String {
    let repeated = record.settings.repeat > 1;
    let mut lines = vec![vec!["runtime".to_string()]];
    let swept: Vec<&str> = record.sweeps.iter().map(|s| s.param.name()).collect();
    lines[0].extend(swept.iter().map(|s| s.to_string()));
    lines[0].extend(["samples", "min (µs)", "mean (µs)"].map(str::to_string));
    if repeated {
        lines[0].push("95 % CI".into());
    }
    lines[0].extend(["max (µs)", "p50 (µs)", "p99 (µs)"].map(str::to_string));
    let us = |v: Option<f64>| v.map(|v| format!("{:.1}", v / 1e3)).unwrap_or_else(|| "-".into());
    let metric = record.metric;
    for point in &record.points {
        for cell in cells(record, point.index) {
            let mut line = vec![cell.runtime.to_string()];
            line.extend(point.values.iter().map(|(p, v)| p.format_value(*v)));
            if cell.repetitions() == 0 {
                let reasons = unmeasured_lines(record, &cell);
                line.push(reasons.first().map(|r| r.1.clone()).unwrap_or_default());
                line.resize(lines[0].len(), String::new());
                lines.push(line);
                continue;
            }
            let mean = cell.mean_estimate(metric, Statistic::Mean);
            line.extend([format_count(cell.samples(metric)), us(cell.min(metric).map(|v| v as f64)), us(mean.map(|m| m.value))]);
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
    let mut out = format!("{} (µs)\n", record.metric.name());
    out.push_str(&render_table(&lines));
    out
}

/// The whole console report: settings, environment, the tables, how to read them.
pub fn report(record: &RunRecord, layout: Option<Layout>) -> String {
    use crate::sweep::Param;
    let layout = layout.unwrap_or_else(|| default_layout(record));
    // With the policy or slack swept, workers differ from point to point: the report has each.
    let swept_sched = record.sweeps.iter().any(|s| matches!(s.param, Param::Policy | Param::TimerSlack));
    let sched = if swept_sched { None } else { record.rows.iter().find_map(|r| r.worker.as_ref()?.sched.as_ref()) };
    let swept_latency = record.sweeps.iter().any(|s| s.param == Param::CpuDmaLatency);
    let dma_latency = if swept_latency { Err(()) } else { Ok(record.settings.cpu_dma_latency_us) };
    let mut out = format!("{}\nenv: {}\n", settings_line(record), record.environment.one_line(sched, dma_latency));
    match layout {
        Layout::Ranked => {
            for point in &record.points {
                out.push('\n');
                if record.points.len() > 1 {
                    out.push_str(&format!("point {}/{}: {}\n", point.index + 1, record.points.len(), point.label()));
                }
                out.push_str(&table(record, point.index));
            }
        }
        Layout::Study => {
            out.push('\n');
            out.push_str(&study_table(record));
        }
        Layout::Volume => {
            out.push('\n');
            out.push_str(&render_with_reasons(&volume_table_of(record)));
            if record.sweeps.iter().any(|s| s.param == Param::Units) {
                out.push_str("\nmemory per unit:\n");
                for line in memory_lines(record) {
                    out.push_str(&format!("  {line}\n"));
                }
            }
        }
    }
    if let Some(classes) = class_table_of(record) {
        out.push_str("\nby priority class:\n");
        out.push_str(&render_table(&[vec![classes.header.clone()], classes.lines.clone()].concat()));
        out.push_str("priority classes as applied:\n");
        for line in priority_lines(record) {
            out.push_str(&format!("  {line}\n"));
        }
    }
    out.push('\n');
    out.push_str(&if layout == Layout::Volume { explain_volume(record) } else { explain(record) });
    out.push('\n');
    let partial: Vec<String> = record.rows_in_order().iter().filter(|r| r.status == RowStatus::Partial).map(|r| {
        let at = at_point(record, r);
        format!("{}{at}: {}", r.runtime, r.reason.as_deref().unwrap_or(""))
    }).collect();
    for line in partial {
        out.push_str(&format!("partial: {line}\n"));
    }
    let workers_cpu: u64 = record.rows.iter().filter_map(|r| r.worker.as_ref()?.cpu_ns).sum();
    if let Some(own) = record.taskmeter_cpu_ns.filter(|_| workers_cpu > 0) {
        out.push_str(&format!(
            "cpu: taskmeter {}, its workers {} ({:.1} % for taskmeter)\n",
            format_ns(own as f64),
            format_ns(workers_cpu as f64),
            100.0 * own as f64 / (own + workers_cpu) as f64
        ));
    }
    let starved: u64 = record.rows.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.units_starved as u64).sum();
    if starved > 0 {
        out.push_str(&format!("warning: {starved} units made no measured iteration (starved, or started after the warm-up ended)\n"));
    }
    let grown: u64 = record.rows.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.storage_grown).sum();
    if grown > 0 {
        out.push_str(&format!("warning: sample storage grew {grown} times while measuring (each growth copies a unit's samples inside its loop)\n"));
    }
    let early: u64 = record.rows.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.early_wakeups).sum();
    if early > 0 {
        out.push_str(&format!("warning: {early} samples woke before their intended time (negative lateness)\n"));
    }
    out
}

/// The tables as Markdown, one per point, ready to paste into an issue or a paper.
pub fn markdown(record: &RunRecord) -> String {
    let mut out = format!("**taskmeter** {}\n\n", settings_line(record));
    if default_layout(record) == Layout::Volume {
        let t = volume_table_of(record);
        markdown_table(&mut out, &t);
        for line in memory_lines(record).iter().filter(|_| record.sweeps.iter().any(|s| s.param == crate::sweep::Param::Units)) {
            out.push_str(&format!("- memory per unit, {line}\n"));
        }
        out.push_str(&format!("\n_{}_\n", explain_volume(record)));
        return out;
    }
    for point in &record.points {
        if record.points.len() > 1 {
            out.push_str(&format!("**point {}/{}: {}**\n\n", point.index + 1, record.points.len(), point.label()));
        }
        markdown_table(&mut out, &table_of(record, point.index));
    }
    out.push_str(&format!("_{}_\n", explain(record)));
    out
}

fn markdown_table(out: &mut String, t: &Table) {
    let columns = t.header.len();
    out.push_str(&format!("| {} |\n|:---|{}\n", t.header.join(" | "), "---:|".repeat(columns - 1)));
    for line in &t.lines {
        out.push_str(&format!("| {} |\n", line.join(" | ")));
    }
    for (runtime, reason) in &t.without_statistics {
        out.push_str(&format!("| {runtime} | {} |{}\n", reason.replace('|', "\\|"), " |".repeat(columns - 2)));
    }
    out.push('\n');
}

fn width(lines: &[Vec<String>], column: usize) -> usize {
    lines.iter().map(|l| l[column].chars().count()).max().unwrap_or(0)
}

/// A plain table: the first column left-aligned, the others right-aligned.
pub fn render_table(lines: &[Vec<String>]) -> String {
    let right: Vec<bool> = (0..lines[0].len()).map(|c| c > 0).collect();
    render(lines, &right)
}

fn render(lines: &[Vec<String>], right: &[bool]) -> String {
    let widths: Vec<usize> = (0..lines[0].len()).map(|c| width(lines, c)).collect();
    let mut out = String::new();
    for line in lines {
        let cells: Vec<String> = line
            .iter()
            .enumerate()
            .map(|(c, cell)| {
                let pad = " ".repeat(widths[c] - cell.chars().count());
                if right[c] { format!("{pad}{cell}") } else { format!("{cell}{pad}") }
            })
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}

/// The run's settings in one line, e.g. "sleep | 5 units | fixed:1ms absolute | busy 1000";
/// a swept parameter shows its values instead.
pub fn settings_line(record: &RunRecord) -> String {
    use crate::sweep::Param;
    let s = &record.settings;
    let swept = |param: Param| {
        record.sweeps.iter().find(|w| w.param == param).map(|w| {
            let values: Vec<String> = w.values.iter().map(|v| w.param.format_value(*v)).collect();
            format!("{} swept: {}", param.name(), values.join(", "))
        })
    };
    let mode = match s.sleep.mode {
        crate::plan::Mode::Relative => "relative",
        crate::plan::Mode::Absolute => "absolute",
    };
    let units = swept(Param::Units).unwrap_or_else(|| format!("{} unit{}", s.units, if s.units == 1 { "" } else { "s" }));
    let sleep = swept(Param::Sleep).or_else(|| swept(Param::Modulo)).map(|w| format!("{} ({w})", s.sleep_spec)).unwrap_or_else(|| s.sleep_spec.clone());
    let busy = swept(Param::Busy).unwrap_or_else(|| match (s.busy.iters, s.busy.yield_each_step) {
        (0, _) => "no busy work".to_string(),
        (n, true) => format!("busy {n} + yield"),
        (n, false) => format!("busy {n}"),
    });
    let busy = if s.busy.yield_each_step && swept(Param::Busy).is_some() { format!("{busy} (+ yield)") } else { busy };
    let duration = swept(Param::Duration).unwrap_or_else(|| format!("{} measured", format_ns(s.duration_ns as f64)));
    let warmup = swept(Param::Warmup).unwrap_or_else(|| format!("after {} warm-up", format_ns(s.warmup_ns as f64)));
    let mut line = format!("{} | {units} | {sleep} {mode} | {busy} | {duration} {warmup}", record.experiment);
    if s.priority_classes > 1 {
        line.push_str(&format!(" | {} priority classes", s.priority_classes));
    }
    if s.together {
        line.push_str(" | runtimes together");
    }
    if s.repeat > 1 {
        line.push_str(&format!(" | {} repetitions", s.repeat));
    }
    line
}

pub fn explain_volume(record: &RunRecord) -> String {
    let counted = if record.settings.experiment == crate::plan::Experiment::AtomicSum {
        "measured increments of the shared counter"
    } else {
        "measured iterations"
    };
    format!(
        "delay = mean |actual - expected| (the v2 study's); {} = {counted} per second, all units; \
         iter/unit = measured iterations per unit; create/unit = time to create the units and park them at \
         the start gate, per unit; peak RSS of the worker; memory per unit = least-squares \
         slope of peak RSS over units started (it includes each unit's samples){}",
        iteration_word(record),
        if record.settings.repeat > 1 { format!("; ± = 95 % interval from {}", crate::aggregate::basis_note(record)) } else { String::new() }
    )
}

/// How to read the table of one metric, and what its intervals rest on.
pub fn explain(record: &RunRecord) -> String {
    let metric = match record.metric {
        Metric::Lateness => "lateness = wake-up time - intended wake-up time; ranked by mean; vs best = ratio of the ranking means",
        Metric::Actual => "actual = iteration end - start (busy work included); ranked by mean |actual - expected|; vs best = ratio of those",
        Metric::Full => "full = iteration end - previous end; ranked by mean |full - expected|; vs best = ratio of those",
        Metric::Busy => "busy = time of the busy phase; ranked by mean; vs best = ratio of the ranking means",
    };
    format!("{metric}; sd = standard deviation within a repetition; 95 % CI and vs best's ± are 95 % intervals from {}", crate::aggregate::basis_note(record))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_have_three_significant_digits() {
        assert_eq!(format_ns(0.0), "0 ns");
        assert_eq!(format_ns(999.0), "999 ns");
        assert_eq!(format_ns(1_234.0), "1.23 µs");
        assert_eq!(format_ns(61_234.0), "61.2 µs");
        assert_eq!(format_ns(1_078_000.0), "1.08 ms");
        assert_eq!(format_ns(250_000_000.0), "250 ms");
        assert_eq!(format_ns(15e9), "15.0 s");
        assert_eq!(format_ns(-2_500.0), "-2.50 µs");
    }

    #[test]
    fn counts_have_thousands_separators() {
        assert_eq!(format_count(0), "0");
        assert_eq!(format_count(999), "999");
        assert_eq!(format_count(1000), "1,000");
        assert_eq!(format_count(1234567), "1,234,567");
    }
}
