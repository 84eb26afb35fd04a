//! The one clock every process shares (crate `taskmeter-clock`).

pub use taskmeter_clock::now_ns;
