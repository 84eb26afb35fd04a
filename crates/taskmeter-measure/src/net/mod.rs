//! The wire of `taskmeter run net`, what runs while a point measures: `handshake` (who may join a
//! point), `sender` (taskmeter's sender threads) and `native` (the Rust receivers, `taskmeter
//! net-receiver`). The family itself (options, receivers, report) is `experiments::net`.

pub mod handshake;
pub mod native;
pub mod sender;
