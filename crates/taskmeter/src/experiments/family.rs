//! What the core asks of an experiment family ([`Family`]): its name, the kind of record it
//! writes, the groups of `run`'s flags its experiments take, and how `run` checks and measures
//! one. A record read back from a results folder is [`Loaded`]: shown (`Report`), recorded in the
//! history (`Recorded`), checked (`Consistent`) and compared (`Compared`), whatever its kind; a
//! [`RecordKind`] reads one from its file by the schema its header names. A family's folder
//! (`experiments/FAMILY/`) implements all of it, and its `family.rs` is its one line in the
//! registry (`cli::families`): nothing else in the core names its record.

use super::compared::Compared;
use super::consistency::Consistent;
use super::flags::EveryArgs;
use super::ExperimentError;
use crate::history::entry::{Metric, Recorded};
use crate::report::page::Report;
use clap::ArgMatches;
use std::any::Any;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::process::ExitCode;
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

/// A group of `run`'s flags as clap builds it (`LoopArgs::augment_args`); the registry adds each
/// group to `run` once, however many families take it.
pub type Flags = fn(clap::Command) -> clap::Command;

/// An experiment family: its name (as the catalog's experiments name their family), its kind of
/// record, the flags of `run` its experiments take, and how `run` checks and measures one.
pub trait Family: Sync {
    fn name(&self) -> &'static str;
    /// The kind of record it writes.
    fn kind(&self) -> &'static dyn RecordKind;
    /// The groups of `run`'s flags its experiments take besides every experiment's
    /// ([`EveryArgs`]).
    fn flags(&self) -> &'static [Flags] {
        &[]
    }
    /// The metrics its records keep in the history, as `history trend`, `compare` and `check`
    /// read them.
    fn metrics(&self) -> &'static [Metric];
    /// `run --dry-run`: its options built from `run`'s flags and its plan checked, nothing
    /// started.
    fn check(&self, every: &EveryArgs, _run: &ArgMatches) -> Result<(), ExperimentError> {
        Err(not_run(self.name(), every))
    }
    /// `run`: measures, writes the results folder, and says the exit status.
    fn run(&self, every: &EveryArgs, _run: &ArgMatches) -> Result<ExitCode, ExperimentError> {
        Err(not_run(self.name(), every))
    }
}

/// A family whose experiments `run` does not measure (bench has a command of its own).
fn not_run(family: &str, every: &EveryArgs) -> ExperimentError {
    ExperimentError::Settings(format!("`run {}`: the {family} family is not measured by `run`", every.experiment.name))
}

/// A group of flags from `run`'s matches; clap parsed them already, so an error here is clap's
/// own (a value of the wrong type), said as a refusal.
pub fn parsed<T: clap::FromArgMatches>(run: &ArgMatches) -> Result<T, ExperimentError> {
    T::from_arg_matches(run).map_err(|e| ExperimentError::Settings(e.to_string()))
}
