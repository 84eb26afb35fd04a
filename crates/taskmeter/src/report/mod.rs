//! Every way a record is shown: the console, Markdown, CSV, JSON, figures and report.html, for
//! every record kind (`run`, `net`, `bench`, `granularity`): each kind implements
//! `page::Report` once, every figure is drawn in the house style of `figure`, every page by
//! `page::html`, every export by `export`.

pub mod chart;
pub mod console;
pub mod export;
pub mod figure;
pub mod format;
pub mod html;
pub mod markdown;
pub mod page;
pub mod print;
pub mod recipes;
pub mod tables;
pub mod why;

use std::fmt;
use std::path::{Path, PathBuf};

/// Why a report could not be drawn or written.
#[derive(Debug)]
pub enum ReportError {
    /// plotters refused a chart.
    Chart(String),
    Write {
        path: PathBuf,
        source: std::io::Error,
    },
}

impl fmt::Display for ReportError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ReportError::Chart(why) => f.write_str(why),
            ReportError::Write { path, source } => write!(f, "cannot write {}: {source}", path.display()),
        }
    }
}

impl std::error::Error for ReportError {}

impl From<String> for ReportError {
    /// A chart's drawing error, already a sentence.
    fn from(why: String) -> ReportError {
        ReportError::Chart(why)
    }
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
