//! The machine a run happens on: what is recorded about it (environment, idle states, CPU
//! counters, room to run), what taskmeter may set on it (scheduling, privilege) and what it
//! sets. Below every other crate of taskmeter but the console; the records that hold these
//! descriptions are `taskmeter_model`.

pub mod counters;
pub mod env;
pub mod idle;
pub mod privilege;
pub mod room;
pub mod sched;
pub mod smaps;
pub mod status;
pub mod taskstats;
