//! The net family's line in the registry (`cli::families`): its record, its flags and how
//! `run` measures it.

use super::flags::{options, NetArgs};
use crate::experiments::family::{parsed, Family, Flags, Kind, RecordKind};
use crate::experiments::flags::EveryArgs;
use crate::experiments::ExperimentError;
use crate::history::entry::Metric;
use clap::{ArgMatches, Args};
use std::process::ExitCode;
use taskmeter_model::net::NetRecord;

/// TCP senders against receivers.
pub struct Net;

impl Family for Net {
    fn name(&self) -> &'static str {
        super::FAMILY
    }
    fn kind(&self) -> &'static dyn RecordKind {
        &Kind::<NetRecord>::KIND
    }
    fn metrics(&self) -> &'static [Metric] {
        const METRICS: &[Metric] = &[
            Metric { name: "throughput", score: "value", higher_is_better: true, unit: Some("throughput (msg/s)") },
            Metric { name: "ratio", score: "value", higher_is_better: false, unit: Some("ratio") },
            Metric::time("round_trip", "mean"),
        ];
        METRICS
    }
    fn flags(&self) -> &'static [Flags] {
        &[NetArgs::augment_args]
    }
    fn check(&self, every: &EveryArgs, run: &ArgMatches) -> Result<(), ExperimentError> {
        options(every, &parsed(run)?).map_err(ExperimentError::Settings)?;
        Ok(())
    }
    fn run(&self, every: &EveryArgs, run: &ArgMatches) -> Result<ExitCode, ExperimentError> {
        super::run(options(every, &parsed(run)?).map_err(ExperimentError::Settings)?)
    }
}
