//! The record of `taskmeter bench` (`bench.json`): the scenarios and inputs as given, and the
//! report of taskmeter-record.

use super::header::{Header, Record};
use serde::{Deserialize, Serialize};
use taskmeter_record::report::Report;

/// `bench.json`: the report with what a reader needs to repeat it.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct BenchRecord {
    /// Schema `taskmeter.bench`; `complete` is false when interrupted.
    #[serde(flatten)]
    pub header: Header,
    pub scenarios: Vec<NamedText>,
    pub inputs: Vec<NamedText>,
    pub report: Report,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NamedText {
    pub name: String,
    pub value: String,
}

impl Record for BenchRecord {
    const SCHEMA: &'static str = "taskmeter.bench";
    const FILE: &'static str = "bench.json";
    /// Version 2 took the shared header (version 1 had a bare number for a schema).
    const VERSIONS: std::ops::RangeInclusive<u32> = 2..=2;

    crate::record_json!();

    fn header(&self) -> &Header {
        &self.header
    }

    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}
