//! What a run is and what it wrote: settings and sweeps, the records of `run`, `net`, `granularity` and
//! `bench` (`run.json`, `net.json`, `bench.json`, `granularity.json`) and the header they share, whether
//! a record read back holds together (`consistency`), and the samples file. It stands on
//! `taskmeter_machine` (what a record says of the machine) and nothing above it.

pub mod bench;
pub mod consistency;
pub mod granularity;
pub mod header;
pub mod net;
pub mod run;
pub mod samples;
pub mod settings;
pub mod sweep;
