//! What a benchmark reports, serialisable to JSON (`bench.json`, schema below).

use crate::local::Window;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

pub const SCHEMA: u32 = 1;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Report {
    pub schema: u32,
    /// "taskmeter-record VERSION".
    pub tool: String,
    pub config: Config,
    /// One entry per scenario and input, in the order they ran.
    pub results: Vec<ScenarioResult>,
    /// False when the run was interrupted: the results hold what was measured.
    pub complete: bool,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Config {
    pub warmup_ns: u64,
    pub time_ns: u64,
    /// The longest wait after the measurement for units in flight (and, cross-process, for the
    /// body's last run) before the accounting is closed.
    pub drain_ns: u64,
    pub extended_statistics: bool,
    /// Input names in order; empty when the scenarios take no input.
    pub inputs: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct ScenarioResult {
    pub scenario: String,
    pub input: Option<String>,
    /// None when the scenario ran; the reason when it failed (the counts keep what was seen).
    pub error: Option<String>,
    pub window: Window,
    /// How many times the body ran (it is rerun until the measurement ends).
    pub invocations: u64,
    #[serde(flatten)]
    pub measured: Measured,
    /// Delivery of cross-process events; None in process.
    pub delivery: Option<Delivery>,
    /// What else happened that a reader should know, e.g. a body stopped at the end of the drain.
    #[serde(default)]
    pub notes: Vec<String>,
    /// The distributions, for `taskmeter compare`: filled by `taskmeter bench` (HdrHistogram,
    /// 5 significant digits, V2 deflate, base64), absent in process.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub histograms: Option<Histograms>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Histograms {
    pub gap: String,
    pub latency: Option<String>,
}

/// What the events of one job give (definitions in `analysis`).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Measured {
    /// Units completed inside the measurement window (record: n; complete: 1).
    pub units: u64,
    /// Units per second: 1 / mean gap (Benchee's ips).
    pub ips: Option<f64>,
    /// Gaps between consecutive completed units, ns.
    pub gap: Option<Stats>,
    /// complete - start of the units with an id completed inside the window, ns.
    pub latency: Option<Stats>,
    pub outside: Outside,
    pub ids: IdCounts,
}

/// Statistics of a set of durations in ns (definitions in the README).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Stats {
    pub count: u64,
    pub mean: f64,
    /// Sample standard deviation (n - 1); None for one value.
    pub std: Option<f64>,
    /// std / mean, in percent.
    pub deviation_pct: Option<f64>,
    pub median: i64,
    pub p99: i64,
    pub min: i64,
    pub max: i64,
    /// The most frequent values; empty when no value occurs twice.
    pub mode: Vec<i64>,
}

/// Units recorded outside the measurement window: counted, never mixed in.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Outside {
    pub warmup_units: u64,
    /// Recorded after the window, during the drain.
    pub after_units: u64,
    /// Recorded after the results were taken: in no statistic.
    pub after_close_events: u64,
}

/// Accounting of units with an identity.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct IdCounts {
    pub started: u64,
    pub completed: u64,
    /// Started and not completed when the measurement window ended.
    pub in_flight_at_end: u64,
    /// Of those, completed during the drain.
    pub completed_in_drain: u64,
    /// Still not completed when the drain ended.
    pub never_completed: u64,
    pub duplicate_completions: u64,
    /// `complete(id)` with an id never started.
    pub unknown_ids: u64,
    /// `start(id)` of an id already in flight (the first start is kept).
    pub duplicate_starts: u64,
}

/// How cross-process events arrived.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Delivery {
    /// Distinct (pid, stream) senders.
    pub streams: u64,
    pub processes: u64,
    pub batches: u64,
    pub events_received: u64,
    /// Events clients could not send in time (reported in later batches' `dropped`).
    pub events_dropped_by_clients: u64,
    /// Batches missing from a stream's sequence numbers.
    pub batches_missing: u64,
    pub malformed_batches: u64,
    /// Malformed batches per reason (e.g. "bad magic", "stream cut mid-batch"); they add up to
    /// `malformed_batches`.
    #[serde(default)]
    pub refusals: BTreeMap<String, u64>,
    /// Streams that never sent a final batch: events they still held are unknown.
    pub streams_without_final: u64,
    /// The first malformed batch's reason.
    pub first_error: Option<String>,
}

impl Delivery {
    /// Events known to be lost on the way.
    pub fn events_lost(&self) -> u64 {
        self.events_dropped_by_clients
    }
}
