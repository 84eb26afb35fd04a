//! The machine a run happens on: what is recorded about it, and what taskmeter sets on it.

pub mod counters;
pub mod env;
pub mod idle;
pub mod privilege;
pub mod room;
pub mod sched;
pub mod status;
pub mod streams;
pub mod taskstats;
pub mod terminal;
