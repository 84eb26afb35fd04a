//! What a person reads: the console table and the formatting of durations.

use crate::results::{Metric, Row, RowStatus, RunRecord};
use crate::stats::ratio_with_uncertainty;

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

/// Rows of one point that have statistics, ranked by the mean absolute deviation of the
/// metric (for `lateness` and `busy` that is their mean; for `actual` and `full`, the mean
/// distance from the expected sleep, as in the v1 study), lowest first.
pub fn ranked(record: &RunRecord, point: usize) -> Vec<&Row> {
    let key = |row: &Row| {
        row.statistics.as_ref().and_then(|s| s.get(record.metric).mean_absolute_deviation).unwrap_or(f64::INFINITY)
    };
    let mut rows: Vec<&Row> =
        record.rows.iter().filter(|r| r.point == point && r.statistics.is_some()).collect();
    rows.sort_by(|a, b| key(a).total_cmp(&key(b)));
    rows
}

/// "1.00", or "14.2 ± 0.3": the row's ranking statistic over the best row's, with the
/// uncertainty propagated from both standard errors.
fn ratio_to_best(metric: Metric, row: &Row, best: &Row) -> String {
    let get = |r: &Row| {
        let s = r.statistics.as_ref()?.get(metric);
        let se = s.deviation_std.map(|sd| sd / (s.count as f64).sqrt()).unwrap_or(0.0);
        Some((s.mean_absolute_deviation?, se))
    };
    match (get(row), get(best)) {
        _ if std::ptr::eq(row, best) => "1.00".into(),
        (Some((a, ae)), Some((b, be))) if b > 0.0 => {
            let (r, u) = ratio_with_uncertainty(a, ae, b, be);
            if r >= 10.0 { format!("{r:.1} ± {u:.1}") } else { format!("{r:.2} ± {u:.2}") }
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

/// A row's runtime, with what keeps its numbers from being a full run.
fn row_name(row: &Row) -> String {
    let mut name = row.runtime.clone();
    match (row.status, &row.counts) {
        (RowStatus::Interrupted, _) => name.push_str(" (interrupted)"),
        (RowStatus::Partial, Some(c)) => name.push_str(&format!(" (partial {}/{})", c.units, c.units_planned)),
        _ => {}
    }
    name
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

/// The volume study's table: every runtime at every point, in runtime then point order.
pub fn volume_table_of(record: &RunRecord) -> Table {
    let classes = record.settings.priority_classes > 1;
    // Units have their own column (with what started of them).
    let swept: Vec<&str> = record.sweeps.iter().filter(|s| s.param != crate::sweep::Param::Units).map(|s| s.param.name()).collect();
    let mut header = vec!["runtime".to_string()];
    header.extend(swept.iter().map(|s| s.to_string()));
    header.extend(["units", "delay", "lateness p50", "p99", "iter/unit"].map(str::to_string));
    header.push(iteration_word(record).into());
    if classes {
        header.extend(["high", "low", "delay high", "delay low"].map(str::to_string));
    }
    header.push("peak RSS".into());
    let mut rows: Vec<&Row> = record.rows_in_order();
    let position = |r: &Row| record.settings.runtimes.iter().position(|id| *id == r.runtime).unwrap_or(usize::MAX);
    rows.sort_by_key(|r| (position(r), r.point));
    let mut lines = Vec::new();
    let mut without_statistics = Vec::new();
    for row in rows {
        let (Some(stats), Some(counts)) = (&row.statistics, &row.counts) else {
            let what = if row.status == RowStatus::Skipped { "skipped" } else { "FAILED" };
            let at = at_point(record, row);
            without_statistics.push((row.runtime.clone(), format!("{what}{at}: {}", row.reason.as_deref().unwrap_or(""))));
            continue;
        };
        let ns = |v: Option<f64>| v.map(format_ns).unwrap_or_else(|| "-".into());
        let delay = |s: &crate::stats::Summary| ns(s.mean_absolute_deviation);
        let mut line = vec![row_name(row)];
        if let Some(point) = record.points.get(row.point) {
            line.extend(point.values.iter().filter(|(p, _)| *p != crate::sweep::Param::Units).map(|(p, v)| p.format_value(*v)));
        }
        let mut units = if counts.units < counts.units_planned {
            format!("{}/{}", format_count(counts.units as u64), format_count(counts.units_planned as u64))
        } else {
            format_count(counts.units as u64)
        };
        if counts.units_starved > 0 {
            units.push_str(&format!(" ({} starved)", format_count(counts.units_starved as u64)));
        }
        line.extend([
            units,
            delay(&stats.actual),
            ns(stats.lateness.p50.map(|v| v as f64)),
            ns(stats.lateness.p99.map(|v| v as f64)),
            format!("{:.1}", counts.iterations_measured as f64 / counts.units.max(1) as f64),
            format_rate(counts.iterations_per_s),
        ]);
        if classes {
            let class = |c: u32| row.classes.iter().find(|k| k.class == c);
            for c in 0..2 {
                line.push(class(c).map(|k| format_rate(k.iterations_per_s)).unwrap_or_else(|| "-".into()));
            }
            for c in 0..2 {
                line.push(class(c).and_then(|k| k.statistics.as_ref()).map(|s| delay(&s.actual)).unwrap_or_else(|| "-".into()));
            }
        }
        line.push(row.worker.as_ref().and_then(|w| w.peak_rss_kb).map(|kb| format_bytes(kb as f64 * 1024.0)).unwrap_or_else(|| "-".into()));
        lines.push(line);
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

/// Per priority class: what each class's units did, and how the runtime applied the classes.
pub fn class_table_of(record: &RunRecord) -> Option<Table> {
    if record.settings.priority_classes < 2 {
        return None;
    }
    let header = ["runtime", "point", "class", "units", "iterations", "lateness mean", "p99", "delay"]
        .map(str::to_string)
        .to_vec();
    let mut lines = Vec::new();
    for row in record.rows_in_order() {
        for class in &row.classes {
            let s = class.statistics.as_ref();
            let ns = |v: Option<f64>| v.map(format_ns).unwrap_or_else(|| "-".into());
            lines.push(vec![
                row.runtime.clone(),
                record.points.get(row.point).map(|p| p.label()).unwrap_or_default(),
                class_name(class.class).into(),
                format_count(class.units as u64),
                format_rate(class.iterations_per_s),
                ns(s.and_then(|s| s.lateness.mean)),
                ns(s.and_then(|s| s.lateness.p99.map(|v| v as f64))),
                ns(s.and_then(|s| s.actual.mean_absolute_deviation)),
            ]);
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
    let header = ["runtime", "samples", mean_header.as_str(), "p50", "p99", "max", "missed", "vs best"]
        .map(str::to_string)
        .to_vec();
    let ranked = ranked(record, point);
    let lines = ranked
        .iter()
        .map(|row| {
            let (stats, counts) = (row.statistics.as_ref().unwrap().get(metric), row.counts.as_ref().unwrap());
            let opt = |v: Option<i64>| v.map(|v| format_ns(v as f64)).unwrap_or_else(|| "-".into());
            let mean_sd = match (stats.mean, stats.std) {
                (Some(m), Some(sd)) => format!("{} ± {}", format_ns(m), format_ns(sd)),
                (Some(m), None) => format_ns(m),
                _ => "-".into(),
            };
            vec![
                row_name(row),
                format_count(stats.count),
                mean_sd,
                opt(stats.p50),
                opt(stats.p99),
                opt(stats.max),
                format_count(counts.missed_periods),
                ratio_to_best(metric, row, ranked[0]),
            ]
        })
        .collect();
    let without_statistics = record
        .rows
        .iter()
        .filter(|r| r.point == point && r.statistics.is_none())
        .map(|r| {
            let what = if r.status == RowStatus::Skipped { "skipped" } else { "FAILED" };
            (r.runtime.clone(), format!("{what}: {}", r.reason.as_deref().unwrap_or("")))
        })
        .collect();
    Table { header, lines, without_statistics }
}

pub fn table(record: &RunRecord, point: usize) -> String {
    let t = table_of(record, point);
    let mut all = vec![t.header.clone()];
    all.extend(t.lines.iter().cloned());
    let mut out = render(&all, &[false, true, true, true, true, true, true, true]);
    let w = width(&all, 0);
    for (runtime, reason) in &t.without_statistics {
        out.push_str(&format!("{runtime:<w$}  {reason}\n"));
    }
    out
}

/// The nanosleep study's table: one line per runtime and point, min / mean / max of the metric
/// in µs, plus p50 and p99.
pub fn study_table(record: &RunRecord) -> String {
    let mut lines = vec![vec!["runtime".to_string()]];
    let swept: Vec<&str> = record.sweeps.iter().map(|s| s.param.name()).collect();
    lines[0].extend(swept.iter().map(|s| s.to_string()));
    lines[0].extend(["samples", "min (µs)", "mean (µs)", "max (µs)", "p50 (µs)", "p99 (µs)"].map(str::to_string));
    let us = |v: Option<f64>| v.map(|v| format!("{:.1}", v / 1e3)).unwrap_or_else(|| "-".into());
    for row in record.rows_in_order() {
        let mut line = vec![row.runtime.clone()];
        if let Some(point) = record.points.get(row.point) {
            line.extend(point.values.iter().map(|(p, v)| p.format_value(*v)));
        }
        match row.statistics.as_ref().map(|s| s.get(record.metric)) {
            Some(s) => line.extend([
                format_count(s.count),
                us(s.min.map(|v| v as f64)),
                us(s.mean),
                us(s.max.map(|v| v as f64)),
                us(s.p50.map(|v| v as f64)),
                us(s.p99.map(|v| v as f64)),
            ]),
            None => {
                let what = if row.status == RowStatus::Skipped { "skipped" } else { "FAILED" };
                line.push(format!("{what}: {}", row.reason.as_deref().unwrap_or("")));
                line.resize(lines[0].len(), String::new());
            }
        }
        lines.push(line);
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
    let mut out = format!("{}\nenv: {}\n", settings_line(record), record.environment.one_line(sched));
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
    out.push_str(&if layout == Layout::Volume { explain_volume(record) } else { explain(record.metric).to_string() });
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
    out.push_str(&format!("_{}_\n", explain(record.metric)));
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
         iter/unit = measured iterations per unit; peak RSS of the worker; memory per unit = least-squares \
         slope of peak RSS over units started (it includes each unit's samples)",
        iteration_word(record)
    )
}

pub fn explain(metric: Metric) -> &'static str {
    match metric {
        Metric::Lateness => "lateness = wake-up time - intended wake-up time; ranked by mean, vs best = ratio of means ± 1 standard error",
        Metric::Actual => "actual = iteration end - start (busy work included); ranked by mean |actual - expected|",
        Metric::Full => "full = iteration end - previous end; ranked by mean |full - expected|",
        Metric::Busy => "busy = time of the busy phase; ranked by mean",
    }
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
