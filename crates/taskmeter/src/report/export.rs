//! `--export-json FILE`, `--export-csv FILE`, `--export-markdown FILE`: one exporter per format,
//! each for every record kind (as hyperfine's `export/`).

use crate::model::bench::BenchRecord;
use crate::model::granularity::GrainRecord;
use crate::model::net::NetRecord;
use crate::model::run::RunRecord;
use std::path::PathBuf;

/// A record of any kind, as the exporters take it.
#[derive(Clone, Copy)]
pub enum RecordRef<'a> {
    Run(&'a RunRecord),
    Net(&'a NetRecord),
    Bench(&'a BenchRecord),
    Granularity(&'a GrainRecord),
}

macro_rules! record_ref_from {
    ($($record:ty => $kind:ident),*) => {$(
        impl<'a> From<&'a $record> for RecordRef<'a> {
            fn from(record: &'a $record) -> Self {
                RecordRef::$kind(record)
            }
        }
    )*};
}
record_ref_from!(RunRecord => Run, NetRecord => Net, BenchRecord => Bench, GrainRecord => Granularity);

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
    fn render(&self, record: RecordRef) -> String;
}

/// The record itself: run.json, net.json or bench.json.
pub struct JsonExporter;
/// The record's summary: one line per runtime, point and metric; per receiver, sender count and
/// repetition; per scenario and input.
pub struct CsvExporter;
/// The tables, ready to paste into an issue or a paper.
pub struct MarkdownExporter;

impl Exporter for JsonExporter {
    fn render(&self, record: RecordRef) -> String {
        match record {
            RecordRef::Run(r) => super::json(r),
            RecordRef::Net(r) => super::json(r),
            RecordRef::Bench(r) => super::json(r),
            RecordRef::Granularity(r) => super::json(r),
        }
    }
}

impl Exporter for CsvExporter {
    fn render(&self, record: RecordRef) -> String {
        match record {
            RecordRef::Run(r) => super::run::summary_csv(r),
            RecordRef::Net(r) => super::net::summary_csv(r),
            RecordRef::Bench(r) => super::bench::summary_csv(r),
            RecordRef::Granularity(r) => super::granularity::summary_csv(r),
        }
    }
}

impl Exporter for MarkdownExporter {
    fn render(&self, record: RecordRef) -> String {
        match record {
            RecordRef::Run(r) => super::markdown::markdown(r),
            RecordRef::Net(r) => super::net::markdown(r),
            RecordRef::Bench(r) => super::bench::markdown(r),
            RecordRef::Granularity(r) => super::granularity::markdown(r),
        }
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
