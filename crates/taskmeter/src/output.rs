//! What a person reads: the console table and the formatting of durations.

use crate::results::{Metric, Row, RowStatus, RunRecord};
use crate::stats::ratio_with_uncertainty;

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
            let mut name = row.runtime.clone();
            if row.status == RowStatus::Interrupted {
                name.push_str(" (interrupted)");
            }
            vec![
                name,
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
pub fn report(record: &RunRecord, layout: Layout) -> String {
    use crate::sweep::Param;
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
    }
    out.push('\n');
    out.push_str(explain(record.metric));
    out.push('\n');
    let early: u64 = record.rows.iter().filter_map(|r| r.counts.as_ref()).map(|c| c.early_wakeups).sum();
    if early > 0 {
        out.push_str(&format!("warning: {early} samples woke before their intended time (negative lateness)\n"));
    }
    out
}

/// The tables as Markdown, one per point, ready to paste into an issue or a paper.
pub fn markdown(record: &RunRecord) -> String {
    let mut out = format!("**taskmeter** {}\n\n", settings_line(record));
    for point in &record.points {
        if record.points.len() > 1 {
            out.push_str(&format!("**point {}/{}: {}**\n\n", point.index + 1, record.points.len(), point.label()));
        }
        let t = table_of(record, point.index);
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
    out.push_str(&format!("_{}_\n", explain(record.metric)));
    out
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
    format!("{} | {units} | {sleep} {mode} | {busy} | {duration} {warmup}", record.experiment)
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
