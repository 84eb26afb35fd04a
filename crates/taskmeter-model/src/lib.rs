//! What a run is and what it wrote: settings and sweeps, the records of `run`, `net`,
//! `granularity` and `bench` (`run.json`, `net.json`, `bench.json`, `granularity.json`) and the
//! header they share, and the samples file. It stands on `taskmeter_machine` (what a record says
//! of the machine) and nothing above it. A record's checks when read back, its report, history
//! entry and comparison are its family's (`taskmeter`'s `experiments/<family>/`); the record
//! itself is here, as the fold and the measuring crate write it and its JSON code is built
//! optimised (`record_json!`).

pub mod bench;
pub mod granularity;
pub mod header;
pub mod net;
pub mod run;
pub mod samples;
pub mod settings;
pub mod sweep;
