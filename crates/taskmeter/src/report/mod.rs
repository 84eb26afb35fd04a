//! Every way a record is shown: the console, Markdown, CSV, JSON, figures and report.html, and
//! the dashboards' formats (github-action-benchmark, Bencher's BMF, OpenMetrics), for every
//! record kind (`run`, `net`, `bench`, `granularity`): each kind implements `page::Report` once,
//! every figure is drawn in the house style of `figure`, every page by `page::html`, every export
//! by `export`.

pub mod bmf;
pub mod chart;
pub mod console;
pub mod dashboard;
pub mod export;
pub mod figure;
pub mod format;
pub mod github_benchmark;
pub mod html;
pub mod markdown;
pub mod openmetrics;
pub mod page;
pub mod print;
pub mod recipes;
pub mod tables;
pub mod why;

use std::path::{Path, PathBuf};

/// Why a report could not be drawn or written (its exit status: `session::exit::of_report`).
#[derive(Debug, thiserror::Error)]
pub enum ReportError {
    /// plotters refused a chart: a sentence.
    #[error("{0}")]
    Chart(String),
    #[error("cannot write {}: {source}", path.display())]
    Write { path: PathBuf, source: std::io::Error },
}

/// Writes `text` to `path`, or says which file could not be written.
pub fn write(path: &Path, text: impl AsRef<[u8]>) -> Result<(), ReportError> {
    std::fs::write(path, text).map_err(|source| ReportError::Write { path: path.to_path_buf(), source })
}

/// `charts/*.svg` and `report.html`: the charts replaced as a whole, the page written aside
/// and renamed, so a report being rebuilt is never seen half-written.
pub fn write_charts_and_page(dir: &Path, charts: &[chart::Chart], page: &str) -> Result<(), ReportError> {
    fn io(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
        move |source| ReportError::Write { path: path.to_path_buf(), source }
    }
    let chart_dir = dir.join("charts");
    if chart_dir.exists() {
        std::fs::remove_dir_all(&chart_dir).map_err(io(&chart_dir))?;
    }
    if !charts.is_empty() {
        std::fs::create_dir_all(&chart_dir).map_err(io(&chart_dir))?;
    }
    for chart in charts {
        write(&chart_dir.join(&chart.file), &chart.svg)?;
    }
    let partial = dir.join(".report.html.partial");
    write(&partial, page)?;
    std::fs::rename(&partial, dir.join("report.html")).map_err(io(&dir.join("report.html")))
}
