//! The granularity family's line in the registry (`cli::families`): its record, its flags and how
//! `run` measures it.

use super::flags::{options, GrainArgs};
use crate::experiments::family::{parsed, Family, Flags, Kind, RecordKind};
use crate::experiments::flags::{EveryArgs, WorkerArgs};
use crate::experiments::ExperimentError;
use crate::history::entry::Metric;
use clap::{ArgMatches, Args};
use std::process::ExitCode;
use taskmeter_model::granularity::GrainRecord;

/// Tasks of a swept size in every runtime's worker.
pub struct Granularity;

impl Family for Granularity {
    fn name(&self) -> &'static str {
        super::FAMILY
    }
    fn kind(&self) -> &'static dyn RecordKind {
        &Kind::<GrainRecord>::KIND
    }
    fn metrics(&self) -> &'static [Metric] {
        const METRICS: &[Metric] = &[Metric::time("metg", "value")];
        METRICS
    }
    fn flags(&self) -> &'static [Flags] {
        &[WorkerArgs::augment_args, GrainArgs::augment_args]
    }
    fn check(&self, every: &EveryArgs, run: &ArgMatches) -> Result<(), ExperimentError> {
        super::check(&options(every, &parsed(run)?, &parsed(run)?).map_err(ExperimentError::Settings)?.settings)
    }
    fn run(&self, every: &EveryArgs, run: &ArgMatches) -> Result<ExitCode, ExperimentError> {
        super::run(options(every, &parsed(run)?, &parsed(run)?).map_err(ExperimentError::Settings)?)
    }
}
