//! taskmeter: measure how faithfully concurrency runtimes keep time and deliver work.
//!
//! The orchestrator never runs a workload in its own process: every (runtime, point,
//! repetition) gets a worker process that speaks the worker protocol (`taskmeter-protocol`);
//! the Rust runtimes' worker is `taskmeter-worker`. The lower layers, and what runs while a
//! worker measures, are the crate `taskmeter_core` (built at opt-level 3; this crate at 0),
//! re-exported here. Layers, lowest first; a module uses only modules of its own layer or below
//! (`tests/structure.rs` keeps it so):
//!
//! | layer | what it holds |
//! |---|---|
//! | [`machine`] | the environment, idle states and PM QoS, scheduling settings (core) |
//! | [`model`] | what a run is and what it wrote: settings, sweeps, the four record kinds (run, net, granularity, bench) and their versioned header, the samples file (core) |
//! | [`process`] | one supervisor for every child process: workers, receivers, bench bodies (core) |
//! | [`net`] | the net experiment's wire: handshake, senders, the Rust receivers (core) |
//! | [`analysis`] | statistics of rows, repetitions and comparisons (core; the definitions are the crate `taskmeter_stats`) |
//! | [`runtimes`] | the runtimes and how their workers are built and started (core) |
//! | [`report`] | every way a record is shown: console, Markdown, CSV, JSON, charts, HTML |
//! | [`history`] | every run recorded in SQLite or PostgreSQL; lists, trends, change points |
//! | [`session`] | what every command that measures shares: folder, interrupts, environment, writing, exit status |
//! | [`experiments`] | the catalog of `run`'s experiments, what the core asks of a family (`family`, `compared`); the work loop (sleep, volume, atomic-sum, recipes), net, granularity, bench |
//! | [`cli`] | flags, presets, the registry of experiment families (`families`), and the commands |

pub use taskmeter_core::{analysis, machine, model, net, process, runtimes};
pub use taskmeter_core::{errln, out, outln, progressln, text, textln};

pub mod cli;
pub mod experiments;
pub mod history;
pub mod report;
pub mod session;
