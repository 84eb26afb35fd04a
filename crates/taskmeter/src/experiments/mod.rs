//! The experiments, by family: the work loop (`sleep`, `volume`, `atomic-sum`, `recipes`: entries
//! of the `catalog`, run by `sleep`), `net` (TCP throughput), `granularity` (the smallest
//! efficient task) and `bench` (your own asynchronous work). Each measures through the process
//! supervisor and writes through a session; what the core asks of a family's record is `family`
//! (and `compared`), and the registry of families is `cli::families`.

pub mod bench;
pub mod catalog;
pub mod compared;
pub mod consistency;
pub mod family;
pub mod flags;
pub mod granularity;
pub mod net;
pub mod sleep;

use crate::session::SessionError;
use std::fmt;

/// Why an experiment could not run (a row that fails is a result, not an error).
#[derive(Debug)]
pub enum ExperimentError {
    /// Settings no worker could run, refused before anything started.
    Settings(String),
    /// Something the experiment needs could not be set up (a socket folder, a collector).
    Setup(String),
    Session(SessionError),
}

impl fmt::Display for ExperimentError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ExperimentError::Settings(why) | ExperimentError::Setup(why) => f.write_str(why),
            ExperimentError::Session(e) => e.fmt(f),
        }
    }
}

impl std::error::Error for ExperimentError {}

impl From<taskmeter_machine::idle::LatencyError> for ExperimentError {
    fn from(e: taskmeter_machine::idle::LatencyError) -> ExperimentError {
        ExperimentError::Session(e.into())
    }
}

impl From<String> for ExperimentError {
    fn from(why: String) -> ExperimentError {
        ExperimentError::Setup(why)
    }
}

impl From<SessionError> for ExperimentError {
    fn from(e: SessionError) -> ExperimentError {
        ExperimentError::Session(e)
    }
}
