//! What `taskmeter bench` writes: `bench.json`, `report.txt` (the Benchee-layout console report
//! of taskmeter-record), `report.html`, and the CSV and Markdown exports (one line per scenario
//! and input).

use super::format::format_ns;
use super::{write, ReportError};
use crate::model::bench::BenchRecord;
use std::path::Path;
use taskmeter_record::console;
use taskmeter_record::report::ScenarioResult;

/// The results folder's files, from the record alone.
pub fn write_folder(dir: &Path, record: &BenchRecord) -> Result<(), ReportError> {
    write(&dir.join("bench.json"), super::json(record))?;
    write_report(dir, record)
}

/// `report.txt` and `report.html`.
pub fn write_report(dir: &Path, record: &BenchRecord) -> Result<(), ReportError> {
    write(&dir.join("report.txt"), console::render(&record.report))?;
    write(&dir.join("report.html"), super::html::render_bench(record))
}

const COLUMNS: [&str; 12] = [
    "scenario",
    "input",
    "ips",
    "average_ns",
    "deviation_pct",
    "median_ns",
    "p99_ns",
    "units",
    "invocations",
    "events_dropped",
    "malformed_batches",
    "error",
];

/// One line of figures per scenario and input (empty where there is none).
fn cells(r: &ScenarioResult, format_duration: impl Fn(f64) -> String) -> Vec<String> {
    let gap = r.measured.gap.as_ref();
    let opt = |v: Option<String>| v.unwrap_or_default();
    let delivery = r.delivery.as_ref();
    vec![
        r.scenario.clone(),
        r.input.clone().unwrap_or_default(),
        opt(r.measured.ips.map(|v| format!("{v:.3}"))),
        opt(gap.map(|g| format_duration(g.mean))),
        opt(gap.and_then(|g| g.deviation_pct).map(|d| format!("{d:.2}"))),
        opt(gap.map(|g| format_duration(g.median as f64))),
        opt(gap.map(|g| format_duration(g.p99 as f64))),
        r.measured.units.to_string(),
        r.invocations.to_string(),
        opt(delivery.map(|d| d.events_dropped_by_clients.to_string())),
        opt(delivery.map(|d| d.malformed_batches.to_string())),
        r.error.clone().unwrap_or_default(),
    ]
}

/// `--export-csv`: durations in ns.
pub fn summary_csv(record: &BenchRecord) -> String {
    let quote = |field: &str| {
        if field.contains([',', '"', '\n']) {
            format!("\"{}\"", field.replace('"', "\"\""))
        } else {
            field.to_string()
        }
    };
    let mut out = format!("{}\n", COLUMNS.join(","));
    for r in &record.report.results {
        let line: Vec<String> = cells(r, |ns| format!("{ns:.1}")).iter().map(|c| quote(c)).collect();
        out.push_str(&format!("{}\n", line.join(",")));
    }
    out
}

/// `--export-markdown`: the results as one table.
pub fn markdown(record: &BenchRecord) -> String {
    let header = [
        "scenario",
        "input",
        "ips",
        "average",
        "deviation %",
        "median",
        "99th %",
        "units",
        "invocations",
        "dropped",
        "malformed",
        "error",
    ];
    let mut out = format!(
        "**taskmeter bench** {}\n\n| {} |\n|:---|{}\n",
        record.header.started_at,
        header.join(" | "),
        "---:|".repeat(header.len() - 1)
    );
    for r in &record.report.results {
        let line: Vec<String> = cells(r, format_ns).iter().map(|c| c.replace('|', "\\|")).collect();
        out.push_str(&format!("| {} |\n", line.join(" | ")));
    }
    out
}
