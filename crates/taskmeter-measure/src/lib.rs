//! What runs while a worker measures, built at opt-level 3 with the workers: the process
//! supervisor and the sample path (reading, checking and folding every frame), the runtimes and
//! how their workers are built and started, and the net experiment's senders and Rust receivers.
//! The application (`taskmeter`: commands, reports, history) is built on it at opt-level 0.
//! Layers, lowest first; a module uses only modules of its own layer or below
//! (`crates/taskmeter/tests/structure.rs`):
//!
//! | layer | what it holds |
//! |---|---|
//! | [`process`] | one supervisor for every child process: workers, receivers, bench bodies |
//! | [`net`] | the net experiment's wire: handshake, senders, the Rust receivers |
//! | [`runtimes`] | the runtimes and how their workers are built and started |

pub mod net;
pub mod process;
pub mod runtimes;
