//! taskmeter's worker protocol (protocol/README.md), version 6: the plan the orchestrator
//! sends, the frames a worker streams back, and the validator that checks every frame against
//! its plan as it arrives. Shared by the orchestrator, the in-process worker and
//! `check-driver`; it knows nothing of either.

pub mod busy;
pub mod check;
pub mod frames;
pub mod plan;
pub mod vectors;

pub use check::{check_output, Checker, Delivered, Ending, OutputError, SampleView, Window};
pub use frames::{
    Done, ErrorFrame, Frame, FrameReader, Gate, Hello, Point, Sample, UnitEnd, CLOCK, PRIORITY_MECHANISMS,
};
pub use plan::{
    format_duration_spec, parse_duration_ns, BusyPlan, Experiment, GrainPlan, Mode, Pattern, Plan, PlanError, Room,
    Schedule, SleepPlan, PROTOCOL,
};
