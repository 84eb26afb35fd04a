//! What a run is and what it wrote: settings and sweeps, the records of `run`, `net`, `granularity` and
//! `bench` (`run.json`, `net.json`, `bench.json`, `granularity.json`) and the header they share, whether
//! a record read back holds together (`consistency`), the samples file, and the names a user
//! types (`names`).

pub mod bench;
pub mod consistency;
pub mod granularity;
pub mod header;
pub mod names;
pub mod net;
pub mod run;
pub mod samples;
pub mod settings;
pub mod sweep;
