//! The results folder: `run.json`, `summary.csv` and, with `--raw`, `samples.csv`. It is
//! written under a temporary name and renamed, so it is never seen half-written.

use crate::protocol::WorkerReport;
use crate::results::{is_measured, sample_metrics, RunRecord, METRICS};
use std::fmt::Write as _;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};

pub const SUMMARY_HEADER: &str = "timestamp,log_type,metric_name,count,mean_absolute_deviation,std_deviation,\
min_deviation,max_deviation,mean,std,min,p50,p90,p99,p99_9,p99_99,max,missed_periods,status";

/// The default folder: `results/<UTC timestamp>-<experiment>`, made unique if taken.
pub fn default_folder(experiment: &str, started_at: &str) -> PathBuf {
    let stamp: String = started_at.chars().filter(|c| !matches!(c, '-' | ':')).collect();
    let base = PathBuf::from("results").join(format!("{stamp}-{experiment}"));
    let mut candidate = base.clone();
    let mut n = 2;
    while candidate.exists() {
        candidate = PathBuf::from(format!("{}-{n}", base.display()));
        n += 1;
    }
    candidate
}

/// Refuses a folder that already holds something, before any time is spent measuring.
pub fn check_writable(folder: &Path) -> Result<(), String> {
    if folder.exists() && std::fs::read_dir(folder).map(|mut d| d.next().is_some()).unwrap_or(true) {
        return Err(format!("output folder {} already exists and is not empty", folder.display()));
    }
    Ok(())
}

/// Refuses, before anything is measured, an export file whose folder does not exist.
pub fn check_export_paths<'a>(paths: impl IntoIterator<Item = &'a Option<PathBuf>>) -> Result<(), String> {
    for path in paths.into_iter().flatten() {
        let parent = path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        if !parent.is_dir() {
            return Err(format!("cannot export to {}: folder {} does not exist", path.display(), parent.display()));
        }
    }
    Ok(())
}

/// Writes the folder. `reports` holds, per row, the worker's samples when `--raw` asked for them.
pub fn write_folder(folder: &Path, record: &RunRecord, reports: &[Option<WorkerReport>]) -> Result<(), String> {
    write_atomically(folder, |dir| write_files(dir, record, reports))
}

/// Has `write` fill a hidden temporary folder next to `folder`, then renames it: a results folder
/// is either complete or absent.
pub fn write_atomically(folder: &Path, write: impl FnOnce(&Path) -> Result<(), String>) -> Result<(), String> {
    let parent = folder.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(parent).map_err(|e| format!("cannot create {}: {e}", parent.display()))?;
    let name = folder.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "run".into());
    let partial = parent.join(format!(".{name}.partial-{}", std::process::id()));
    let result = std::fs::create_dir_all(&partial)
        .map_err(|e| format!("cannot create {}: {e}", partial.display()))
        .and_then(|_| write(&partial))
        .and_then(|_| {
            if folder.exists() {
                std::fs::remove_dir(folder).map_err(|e| format!("cannot replace {}: {e}", folder.display()))?;
            }
            std::fs::rename(&partial, folder).map_err(|e| format!("cannot rename to {}: {e}", folder.display()))
        });
    if result.is_err() {
        let _ = std::fs::remove_dir_all(&partial);
    }
    result
}

fn write_files(dir: &Path, record: &RunRecord, reports: &[Option<WorkerReport>]) -> Result<(), String> {
    let io = |e: std::io::Error| format!("cannot write the results: {e}");
    std::fs::write(dir.join("run.json"), run_json(record)).map_err(io)?;
    std::fs::write(dir.join("summary.csv"), summary_csv(record)).map_err(io)?;
    write_report(dir, record)?;
    if reports.iter().any(Option::is_some) {
        let file = std::fs::File::create(dir.join("samples.csv")).map_err(io)?;
        let mut out = BufWriter::new(file);
        write_samples_csv(&mut out, record, reports).map_err(io)?;
        out.flush().map_err(io)?;
    }
    Ok(())
}

/// `charts/*.svg` and `report.html`, drawn from the record alone.
pub fn write_report(dir: &Path, record: &RunRecord) -> Result<(), String> {
    let io = |e: std::io::Error| format!("cannot write the report: {e}");
    let charts = crate::chart::all(record)?;
    let chart_dir = dir.join("charts");
    if chart_dir.exists() {
        std::fs::remove_dir_all(&chart_dir).map_err(io)?;
    }
    std::fs::create_dir_all(&chart_dir).map_err(io)?;
    for chart in &charts {
        std::fs::write(chart_dir.join(&chart.file), &chart.svg).map_err(io)?;
    }
    // Written aside and renamed, so a report being rebuilt is never seen half-written.
    let partial = dir.join(".report.html.partial");
    std::fs::write(&partial, crate::html::render(record, &charts)).map_err(io)?;
    std::fs::rename(&partial, dir.join("report.html")).map_err(io)
}

/// `taskmeter report DIR`: rebuilds the charts and report.html from DIR/run.json.
pub fn rebuild_report(dir: &Path) -> Result<std::process::ExitCode, String> {
    let folder = if dir.is_dir() { dir.to_path_buf() } else { dir.parent().unwrap_or(Path::new(".")).to_path_buf() };
    if crate::compare::is_bench(dir) {
        crate::bench::write_reports(&folder, &crate::compare::load_bench(dir)?)?;
    } else if folder.join("net.json").is_file() {
        let path = folder.join("net.json");
        let text = std::fs::read_to_string(&path).map_err(|e| format!("cannot read {}: {e}", path.display()))?;
        let record = serde_json::from_str(&text).map_err(|e| format!("{} is not a net.json of this version: {e}", path.display()))?;
        crate::net::report::write_folder(&folder, &record)?;
    } else {
        write_report(&folder, &crate::compare::load_run(dir)?)?;
    }
    let dir = folder;
    println!("{}", dir.join("report.html").display());
    Ok(std::process::ExitCode::SUCCESS)
}

pub fn run_json(record: &RunRecord) -> String {
    let mut text = serde_json::to_string_pretty(record).expect("a run record always serialises");
    text.push('\n');
    text
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
                record.finished_at,
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

/// `--export-json`, `--export-csv`, `--export-markdown`.
pub fn write_exports(record: &RunRecord, exports: &crate::run::Exports) -> Result<(), String> {
    let write = |path: &Option<PathBuf>, text: String| match path {
        Some(path) => std::fs::write(path, text).map_err(|e| format!("cannot write {}: {e}", path.display())),
        None => Ok(()),
    };
    write(&exports.json, run_json(record))?;
    write(&exports.csv, summary_csv(record))?;
    write(&exports.markdown, crate::output::markdown(record))
}

fn write_samples_csv(out: &mut impl Write, record: &RunRecord, reports: &[Option<WorkerReport>]) -> std::io::Result<()> {
    writeln!(
        out,
        "runtime,point,repetition,unit,iteration,phase,expected_ns,start_ns,busy_end_ns,intended_ns,wake_ns,missed,lateness_ns,actual_ns,full_ns,busy_ns"
    )?;
    for (row, report) in record.rows.iter().zip(reports) {
        let Some(report) = report else { continue };
        for u in &report.units {
            for i in 0..u.len() {
                let phase = if is_measured(report, u, i) { "measure" } else { "warmup" };
                let [lateness, actual, full, busy] = sample_metrics(u, i);
                writeln!(
                    out,
                    "{},{},{},{},{},{phase},{},{},{},{},{},{},{lateness},{actual},{full},{busy}",
                    row.runtime,
                    row.point,
                    row.repetition,
                    u.unit,
                    i + 1,
                    u.expected_ns[i],
                    u.start_ns[i],
                    u.busy_end_ns[i],
                    u.intended_ns[i],
                    u.wake_ns[i],
                    u.missed[i]
                )?;
            }
        }
    }
    Ok(())
}
