//! taskmeter: measure how faithfully concurrency runtimes keep time and deliver work.
//!
//! The orchestrator never runs a workload in its own process: every (runtime, point,
//! repetition) gets a worker process that speaks the worker protocol (`taskmeter-protocol`);
//! the Rust runtimes' worker is `taskmeter-worker`. This crate is the application (commands,
//! reports, history), built at opt-level 0 since none of it runs while a worker measures. The
//! crates below it, each one concept, lowest first (Cargo keeps the order):
//!
//! | crate | what it holds |
//! |---|---|
//! | `taskmeter_console` | what taskmeter says to a reader: stdout and stderr that never panic, text fitted to the terminal, typo hints |
//! | `taskmeter_machine` | the environment, idle states and PM QoS, CPU counters, scheduling settings and privilege |
//! | `taskmeter_model` | what a run is and what it wrote: settings, sweeps, the four record kinds (run, net, granularity, bench), their versioned header and consistency, the samples file |
//! | `taskmeter_analysis` | statistics of rows, repetitions and comparisons (the definitions are the crate `taskmeter_stats`) |
//! | `taskmeter_measure` | what runs while a worker measures: the process supervisor and sample path, the runtimes, the net experiment's wire |
//!
//! This crate's layers, lowest first; a module uses only modules of its own layer or below
//! (`tests/structure.rs` keeps it so):
//!
//! | layer | what it holds |
//! |---|---|
//! | [`report`] | every way a record is shown: console, Markdown, CSV, JSON, charts, HTML |
//! | [`history`] | every run recorded in SQLite or PostgreSQL; lists, trends, change points |
//! | [`session`] | what every command that measures shares: folder, interrupts, environment, writing, exit status |
//! | [`experiments`] | the catalog of `run`'s experiments, what the core asks of a family (`family`, `compared`); the work loop (sleep, volume, atomic-sum, recipes), net, granularity, bench |
//! | [`cli`] | flags, presets, the registry of experiment families (`families`), and the commands |

pub mod cli;
pub mod experiments;
pub mod history;
pub mod report;
pub mod session;
