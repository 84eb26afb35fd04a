//! From samples to the figures taskmeter reports. The definitions of every statistic are in
//! `taskmeter_stats`; here they are applied to workers' reports, repetitions and runs.

pub mod accumulate;
pub mod cells;
pub mod changepoint;
pub mod compare;
pub mod differences;
pub mod granularity;
pub mod histogram;
pub mod net;
pub mod recipes;
pub mod rows;
mod values;
