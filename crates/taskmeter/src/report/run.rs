//! What a run writes at its end: `run.json`, `summary.csv`, the charts and report.html (with
//! `--raw`, `samples.csv.gz` was written while it measured: see `samples.rs`).

use super::{write, write_charts_and_page, ReportError};
use crate::model::run::{RunRecord, METRICS};
use std::fmt::Write as _;
use std::path::Path;

pub const SUMMARY_HEADER: &str = "timestamp,log_type,metric_name,count,mean_absolute_deviation,std_deviation,\
min_deviation,max_deviation,mean,std,min,p50,p90,p99,p99_9,p99_99,max,missed_periods,status";

/// The results folder's files.
pub fn write_folder(dir: &Path, record: &RunRecord) -> Result<(), ReportError> {
    write(&dir.join("run.json"), super::json(record))?;
    write(&dir.join("summary.csv"), summary_csv(record))?;
    write_report(dir, record)
}

/// `charts/*.svg` and `report.html`, drawn from the record alone.
pub fn write_report(dir: &Path, record: &RunRecord) -> Result<(), ReportError> {
    let charts = super::chart::all(record)?;
    write_charts_and_page(dir, &charts, &super::html::render(record, &charts))
}

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

fn point_values(record: &RunRecord, point: usize) -> String {
    record.points.get(point).map(|p| p.values.iter().map(|(_, v)| format!(",{v}")).collect()).unwrap_or_default()
}
