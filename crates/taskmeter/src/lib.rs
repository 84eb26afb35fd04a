//! taskmeter: measure how faithfully concurrency runtimes keep time and deliver work.
//!
//! The orchestrator never runs a workload in its own process: every (runtime, point,
//! repetition) gets a worker process that speaks the worker protocol (`taskmeter-protocol`);
//! the Rust runtimes' worker is `taskmeter-worker`. Layers, lowest first; a module uses only
//! modules of its own layer or below (`tests/structure.rs` keeps it so):
//!
//! | layer | what it holds |
//! |---|---|
//! | [`machine`] | the environment, idle states and PM QoS, scheduling settings |
//! | [`model`] | what a run is and what it wrote: settings, sweeps, the four record kinds (run, net, granularity, bench) and their versioned header |
//! | [`analysis`] | statistics of rows, repetitions and comparisons (the definitions are the crate `taskmeter_stats`) |
//! | [`report`] | every way a record is shown: console, Markdown, CSV, JSON, charts, HTML |
//! | [`history`] | every run recorded in SQLite or PostgreSQL; lists, trends, change points |
//! | [`process`] | one supervisor for every child process: workers, receivers, bench bodies |
//! | [`runtimes`] | the runtimes and how their workers are built and started |
//! | [`session`] | what every command that measures shares: folder, interrupts, environment, writing, exit status |
//! | [`experiments`] | the catalog of `run`'s experiments, what the core asks of a family (`family`, `compared`); the work loop (sleep, volume, atomic-sum, recipes), net, granularity, bench |
//! | [`cli`] | flags, presets, the registry of experiment families (`families`), and the commands |

pub mod analysis;
pub mod cli;
pub mod experiments;
pub mod history;
pub mod machine;
pub mod model;
pub mod process;
pub mod report;
pub mod runtimes;
pub mod session;
