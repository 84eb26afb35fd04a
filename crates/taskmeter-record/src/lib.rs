//! Benchmark your own asynchronous work.
//!
//! Work calls [`Recorder::record`] when a unit completes, from any task, thread or process; the
//! report gives the rate of completions (ips), the gaps between them, and the latency of units
//! tracked with [`Recorder::start`] / [`Recorder::complete`], Benchee-style. Nothing is dropped
//! silently: units outside the measurement, ids never completed, events a client could not send
//! are all counted.
//!
//! ```no_run
//! use std::time::Duration;
//! use taskmeter_record::Bench;
//!
//! Bench::new()
//!     .warmup(Duration::from_secs(1))
//!     .time(Duration::from_secs(3))
//!     .scenario("case_100_ms", |rec, _| {
//!         let rec = rec.clone();
//!         std::thread::spawn(move || {
//!             std::thread::sleep(Duration::from_millis(100));
//!             rec.record();
//!         })
//!         .join()
//!         .unwrap();
//!     })
//!     .run();
//! ```
//!
//! In another process run by `taskmeter bench`, use [`Recorder::global`] or the free functions
//! [`record`], [`start`], [`complete`]: they reach the collector named by `TASKMETER_RECORD`, and
//! are no-ops without it.

pub mod analysis;
mod bench;
mod client;
pub mod clock;
pub mod collector;
pub mod console;
pub mod event;
mod local;
mod recorder;
pub mod report;

pub use bench::{result_of, Bench};
pub use local::Window;
pub use recorder::{complete, flush, record, record_n, running, start, Recorder, ENDPOINT_VAR, UNTIL_VAR};
pub use report::Report;

/// The statistics behind the report, shared with taskmeter (crate `taskmeter-stats`).
pub use taskmeter_stats as stats;
pub use taskmeter_stats::format;
