//! taskmeter's in-process worker: the work loop of the protocol (`workload`) and each unit's
//! ring of samples (`ring`), shared by every Rust runtime (`runtime`), and the worker's main
//! (`worker`), which reads a plan on stdin and streams frames, exactly as a driver in another
//! language does.

pub mod clock;
pub mod granularity;
pub mod recipes;
pub mod ring;
pub mod runtime;
pub mod worker;
pub mod workload;

/// Why a worker could not run its plan (not even unit 1 started, a unit failed): the message of
/// its `E` frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerError(pub String);

impl std::fmt::Display for WorkerError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for WorkerError {}

impl From<String> for WorkerError {
    fn from(message: String) -> WorkerError {
        WorkerError(message)
    }
}
