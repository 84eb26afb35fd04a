//! taskmeter's core: the layers every command stands on, and everything that runs while a
//! measurement runs (the process supervisor and the sample fold, the raw samples file, the net
//! experiment's wire). The crate `taskmeter` builds the commands, reports and history on it and
//! re-exports these modules, so `taskmeter::model` and `taskmeter_core::model` are one module.
//!
//! A crate of its own for the build: this one is built at opt-level 3, the commands, reports and
//! history at opt-level 0 (none of it runs while a worker measures): a fresh release build took
//! 131 s here as one crate, 94 s as two (BENCHMARKS.md, "The first build, second pass"). Layers, lowest first; a
//! module uses only modules of its own layer or below (`crates/taskmeter/tests/structure.rs`):
//!
//! | layer | what it holds |
//! |---|---|
//! | [`machine`] | the environment, idle states and PM QoS, scheduling settings |
//! | [`model`] | what a run is and what it wrote: settings, sweeps, the four record kinds (run, net, granularity, bench) and their versioned header, the samples file |
//! | [`process`] | one supervisor for every child process: workers, receivers, bench bodies |
//! | [`net`] | the net experiment's wire: handshake, senders, the Rust receivers |
//! | [`analysis`] | statistics of rows, repetitions and comparisons (the definitions are the crate `taskmeter_stats`) |
//! | [`runtimes`] | the runtimes and how their workers are built and started |

pub mod analysis;
pub mod machine;
pub mod model;
pub mod net;
pub mod process;
pub mod runtimes;
