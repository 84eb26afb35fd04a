//! The sleep family's line in the registry (`cli::families`): its record, its flags and how
//! `run` measures it.

use super::flags::{options, LoopArgs};
use crate::experiments::family::{parsed, Family, Flags, Kind, RecordKind};
use crate::experiments::flags::{EveryArgs, WorkerArgs};
use crate::experiments::ExperimentError;
use crate::history::entry::Metric;
use clap::{ArgMatches, Args};
use std::process::ExitCode;
use taskmeter_model::run::RunRecord;

/// The work loop: sleep, volume, atomic-sum and recipes.
pub struct Loop;

impl Family for Loop {
    fn name(&self) -> &'static str {
        super::FAMILY
    }
    fn kind(&self) -> &'static dyn RecordKind {
        &Kind::<RunRecord>::KIND
    }
    fn metrics(&self) -> &'static [Metric] {
        const METRICS: &[Metric] = &[
            Metric::time("lateness", "p50"),
            Metric::time("actual", "mad"),
            Metric::time("full", "mad"),
            Metric::time("busy", "p50"),
        ];
        METRICS
    }
    fn flags(&self) -> &'static [Flags] {
        &[WorkerArgs::augment_args, LoopArgs::augment_args]
    }
    fn check(&self, every: &EveryArgs, run: &ArgMatches) -> Result<(), ExperimentError> {
        super::checked_points(&options(every, &parsed(run)?, &loop_args(run)?).map_err(ExperimentError::Settings)?)?;
        Ok(())
    }
    fn run(&self, every: &EveryArgs, run: &ArgMatches) -> Result<ExitCode, ExperimentError> {
        super::run(options(every, &parsed(run)?, &loop_args(run)?).map_err(ExperimentError::Settings)?)
    }
}

/// The work loop's flags, with whether --busy was typed.
fn loop_args(run: &ArgMatches) -> Result<LoopArgs, ExperimentError> {
    LoopArgs::parse(run).map_err(|e| ExperimentError::Settings(e.to_string()))
}
