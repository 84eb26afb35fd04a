//! What the core asks of a kind of record, read back from a results folder: a [`Loaded`] record
//! is shown (`Report`), recorded in the history (`Recorded`), checked (`Consistent`) and
//! compared (`Compared`), whatever its kind; a [`RecordKind`] reads one from its file by the
//! schema its header names. A family implements the four traits for its record and gives
//! `Kind::<ItsRecord>::KIND` to the registry (`cli::families`): nothing else in the core names
//! its record.

use super::compared::Compared;
use super::consistency::Consistent;
use crate::history::entry::Recorded;
use crate::report::page::Report;
use std::any::Any;
use std::marker::PhantomData;
use std::path::PathBuf;
use taskmeter_model::header::{from_value, LoadError, Record};

/// A record of any kind, read back: everything `report`, `compare`, `history import` and the
/// consistency check ask of it. Every record that implements the four traits is one.
pub trait Loaded: Report + Recorded + Consistent + Compared + Any {}

impl<R: Report + Recorded + Consistent + Compared + Any> Loaded for R {}

/// A kind of record: its schema, its file, and how a record of it is read.
pub trait RecordKind: Sync {
    /// The schema its header names (`taskmeter.run`).
    fn schema(&self) -> &'static str;
    /// The file it is written to in a results folder (`run.json`).
    fn file(&self) -> &'static str;
    /// The record `value` holds (read from `file`, whose header names `schema`), its version
    /// and shape checked.
    fn read(&self, file: PathBuf, schema: &str, value: serde_json::Value) -> Result<Box<dyn Loaded>, LoadError>;
}

/// The kind of the records `R`: `&Kind::<RunRecord>::KIND`.
pub struct Kind<R>(PhantomData<fn() -> R>);

impl<R> Kind<R> {
    pub const KIND: Kind<R> = Kind(PhantomData);
}

impl<R: Record + Loaded> RecordKind for Kind<R> {
    fn schema(&self) -> &'static str {
        R::SCHEMA
    }
    fn file(&self) -> &'static str {
        R::FILE
    }
    fn read(&self, file: PathBuf, schema: &str, value: serde_json::Value) -> Result<Box<dyn Loaded>, LoadError> {
        Ok(Box::new(from_value::<R>(file, schema, value)?))
    }
}
