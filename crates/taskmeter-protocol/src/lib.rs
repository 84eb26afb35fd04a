//! taskmeter's worker protocol (protocol/README.md): the plan the orchestrator sends, the lines a
//! worker prints, and the validator that checks every worker's output against its plan. Shared by
//! the orchestrator, the in-process worker and `check-driver`; it knows nothing of either.

pub mod busy;
pub mod output;
pub mod plan;
pub mod vectors;

pub use output::{parse_output, Done, ErrorLine, Hello, Line, OutputError, UnitSamples, WorkerReport, CLOCK, PRIORITY_MECHANISMS};
pub use plan::{format_duration_spec, parse_duration_ns, BusyPlan, Experiment, Mode, Plan, PlanError, Schedule, SleepPlan, PROTOCOL};
