//! `--export-json FILE`, `--export-csv FILE`, `--export-markdown FILE`, and for the dashboards
//! `--export-github-benchmark-smaller FILE`, `--export-github-benchmark-bigger FILE`,
//! `--export-bmf FILE` and `--export-openmetrics FILE`: one exporter per format, each for every
//! record kind (as hyperfine's `export/`), through its `page::Report`. The dashboards' formats
//! also write a comparison's figures (`compare`, `history compare`): each renders a
//! `dashboard::Dashboard` (`github_benchmark`, `bmf`, `openmetrics`).

use super::dashboard::{self, Dashboard};
use super::page::Report;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Json,
    Csv,
    Markdown,
    /// github-action-benchmark's `customSmallerIsBetter`.
    GithubBenchmarkSmaller,
    /// github-action-benchmark's `customBiggerIsBetter`.
    GithubBenchmarkBigger,
    /// Bencher Metric Format.
    Bmf,
    OpenMetrics,
}

impl ExportFormat {
    /// Every format, in the order of their flags.
    pub const ALL: [ExportFormat; 7] = [
        ExportFormat::Json,
        ExportFormat::Csv,
        ExportFormat::Markdown,
        ExportFormat::GithubBenchmarkSmaller,
        ExportFormat::GithubBenchmarkBigger,
        ExportFormat::Bmf,
        ExportFormat::OpenMetrics,
    ];

    /// Its name, its flag's after `--export-`.
    pub fn name(self) -> &'static str {
        match self {
            ExportFormat::Json => "json",
            ExportFormat::Csv => "csv",
            ExportFormat::Markdown => "markdown",
            ExportFormat::GithubBenchmarkSmaller => "github-benchmark-smaller",
            ExportFormat::GithubBenchmarkBigger => "github-benchmark-bigger",
            ExportFormat::Bmf => "bmf",
            ExportFormat::OpenMetrics => "openmetrics",
        }
    }

    /// A dashboard's format, which writes a comparison too.
    pub fn is_dashboard(self) -> bool {
        !matches!(self, ExportFormat::Json | ExportFormat::Csv | ExportFormat::Markdown)
    }
}

/// A file to write besides the results folder.
#[derive(Clone, Debug, PartialEq)]
pub struct Export {
    pub format: ExportFormat,
    pub path: PathBuf,
}

pub trait Exporter {
    /// The file's whole text for `record`.
    fn render(&self, record: &dyn Report) -> String;
}

/// The record itself: run.json, net.json or bench.json.
pub struct JsonExporter;
/// The record's summary: one line per runtime, point and metric; per receiver, sender count and
/// repetition; per scenario and input.
pub struct CsvExporter;
/// The tables, ready to paste into an issue or a paper.
pub struct MarkdownExporter;
/// A record's figures (`Report::benchmarks`) for a dashboard, in one of its formats.
pub struct DashboardExporter(pub ExportFormat);

impl Exporter for JsonExporter {
    fn render(&self, record: &dyn Report) -> String {
        record.json()
    }
}

impl Exporter for CsvExporter {
    fn render(&self, record: &dyn Report) -> String {
        record.csv()
    }
}

impl Exporter for MarkdownExporter {
    fn render(&self, record: &dyn Report) -> String {
        record.markdown()
    }
}

impl Exporter for DashboardExporter {
    fn render(&self, record: &dyn Report) -> String {
        render_dashboard(self.0, &dashboard_of(record)).unwrap_or_default()
    }
}

/// A record's dashboard: its family's benchmarks and distributions (`Report`), in its
/// environment.
pub fn dashboard_of(report: &dyn Report) -> Dashboard {
    let header = report.header();
    Dashboard {
        source: report.experiment(),
        experiment: Some(report.experiment()),
        compared: false,
        benchmarks: report.benchmarks(),
        distributions: report.distributions(),
        environment: dashboard::environment(&header.environment, &header.taskmeter_version, header.label.as_deref()),
    }
}

/// A dashboard in a dashboard's format; None for the others (the record's own formats).
pub fn render_dashboard(format: ExportFormat, dashboard: &Dashboard) -> Option<String> {
    Some(match format {
        ExportFormat::GithubBenchmarkSmaller => super::github_benchmark::render(dashboard, false),
        ExportFormat::GithubBenchmarkBigger => super::github_benchmark::render(dashboard, true),
        ExportFormat::Bmf => super::bmf::render(dashboard),
        ExportFormat::OpenMetrics => super::openmetrics::render(dashboard),
        ExportFormat::Json | ExportFormat::Csv | ExportFormat::Markdown => return None,
    })
}

/// The exporter of a format.
pub fn exporter(format: ExportFormat) -> &'static dyn Exporter {
    match format {
        ExportFormat::Json => &JsonExporter,
        ExportFormat::Csv => &CsvExporter,
        ExportFormat::Markdown => &MarkdownExporter,
        ExportFormat::GithubBenchmarkSmaller => &DashboardExporter(ExportFormat::GithubBenchmarkSmaller),
        ExportFormat::GithubBenchmarkBigger => &DashboardExporter(ExportFormat::GithubBenchmarkBigger),
        ExportFormat::Bmf => &DashboardExporter(ExportFormat::Bmf),
        ExportFormat::OpenMetrics => &DashboardExporter(ExportFormat::OpenMetrics),
    }
}
