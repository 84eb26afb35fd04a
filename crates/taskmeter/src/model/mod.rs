//! What a run is and what it wrote: settings and sweeps, the records of `run`, `net` and `bench`
//! (`run.json`, `net.json`, `bench.json`) and the header they share, and the samples file.

pub mod any;
pub mod bench;
pub mod granularity;
pub mod header;
pub mod net;
pub mod run;
pub mod samples;
pub mod settings;
pub mod sweep;
