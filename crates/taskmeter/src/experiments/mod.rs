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

use crate::session::{exit, SessionError};

/// Why an experiment could not run (a row that fails is a result, not an error).
#[derive(Debug, thiserror::Error)]
pub enum ExperimentError {
    /// Settings no worker could run, refused before anything started: the user's input.
    #[error("{0}")]
    Settings(String),
    /// Something the experiment needs could not be set up (a socket folder, a collector, a
    /// receiver, a random secret): not the user's input.
    #[error("{0}")]
    Setup(String),
    #[error(transparent)]
    Session(#[from] SessionError),
}

impl ExperimentError {
    /// The exit status: settings are the user's ([`exit::USAGE`]), a setup that failed is not
    /// ([`exit::FAILED`]), a session's error by its own variant.
    pub fn exit_status(&self) -> u8 {
        match self {
            ExperimentError::Settings(_) => exit::USAGE,
            ExperimentError::Setup(_) => exit::FAILED,
            ExperimentError::Session(e) => e.exit_status(),
        }
    }
}

impl From<taskmeter_machine::idle::LatencyError> for ExperimentError {
    fn from(e: taskmeter_machine::idle::LatencyError) -> ExperimentError {
        ExperimentError::Session(e.into())
    }
}
