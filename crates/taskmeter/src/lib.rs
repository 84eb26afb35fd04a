//! taskmeter: measure how faithfully concurrency runtimes keep time and deliver work.
//!
//! The orchestrator never runs a workload in its own process: every (runtime, point) gets a
//! worker process that speaks protocol v1 (`protocol/README.md`); statistics live in [`stats`].

pub mod aggregate;
pub mod bench;
pub mod check;
pub mod cli;
pub mod clock;
pub mod compare;
pub mod driver;
pub mod env;
pub mod export;
pub mod histogram;
pub mod html;
pub mod list;
pub mod machine;
pub mod net;
pub mod orchestrate;
pub mod output;
pub mod plan;
pub mod preset;
pub mod protocol;
pub mod results;
pub mod run;
pub mod runtime;
pub mod sched;
pub mod selftest;
pub mod stats;
pub mod sweep;
pub mod worker;
pub mod workload;
pub mod chart;
