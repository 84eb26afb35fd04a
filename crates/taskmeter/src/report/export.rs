//! `--export-json FILE`, `--export-csv FILE`, `--export-markdown FILE`: one exporter per format,
//! each for every record kind (as hyperfine's `export/`), through its `page::Report`.

use super::page::Report;
use std::path::PathBuf;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExportFormat {
    Json,
    Csv,
    Markdown,
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

/// The exporter of a format.
pub fn exporter(format: ExportFormat) -> &'static dyn Exporter {
    match format {
        ExportFormat::Json => &JsonExporter,
        ExportFormat::Csv => &CsvExporter,
        ExportFormat::Markdown => &MarkdownExporter,
    }
}
