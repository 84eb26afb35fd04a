//! The record of `taskmeter run net` (`net.json`), and the lines of net protocol 2
//! (receivers/README.md) that a receiver speaks.

use super::header::{Header, Record};
use serde::{Deserialize, Serialize};
use taskmeter_stats::{Interval, Summary};

/// The plan line a receiver reads on stdin (net protocol 2).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NetPlan {
    pub protocol: u32,
    pub connections: u32,
    pub message_size: usize,
    /// How long a connection has, from its accept, to send its hello.
    pub handshake_ms: u64,
    /// How many handshakes may be pending at once.
    pub max_pending: u32,
    /// The point's nonce, 64 hexadecimal digits (sent raw in the challenge).
    pub nonce: String,
    /// Per sender index, the token its hello must carry (64 hexadecimal digits each).
    pub tokens: Vec<String>,
}

/// A connection a receiver refused, as it reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct Stranger {
    pub peer: String,
    pub reason: String,
}

/// What one connection carried, as the receiver reports it.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct ConnectionReport {
    pub index: u32,
    pub messages: u64,
    pub first_ns: Option<u64>,
    pub last_ns: Option<u64>,
    pub error: Option<String>,
}

/// The messages of sender `i` of `senders` when `total` are split between them as evenly as
/// possible (the first `total % senders` send one more), so they add up to `total` exactly.
pub fn share(total: u64, senders: u32, i: u32) -> u64 {
    total / senders as u64 + u64::from((i as u64) < total % senders as u64)
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NetSettings {
    pub receivers: Vec<String>,
    /// Sender counts, one point each.
    pub senders: Vec<u32>,
    /// Messages per point, split across the senders; per sender with `per_sender`.
    pub messages: u64,
    pub per_sender: bool,
    pub message_size: usize,
    /// Receiver processes per receiver and sender count (`--repeat`).
    #[serde(default = "one")]
    pub repeat: u32,
}

fn one() -> u32 {
    1
}

impl NetSettings {
    /// Messages each sender sends at a point.
    pub fn shares(&self, senders: u32) -> Vec<u64> {
        (0..senders).map(|i| if self.per_sender { self.messages } else { share(self.messages, senders, i) }).collect()
    }
}

/// A receiver at a sender count over its repetitions: the mean throughput and ratio, with the
/// 95 % range for the value another invocation with as many repetitions would give, when there
/// are two or more (with one, `degrees_of_freedom` is null and it has no width: there is none).
/// Records before version 3 hold a Student-t confidence interval of the mean instead, and a
/// linear ratio interval ([`RANGES_SINCE`]).
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct NetSummary {
    pub receiver: String,
    pub senders: u32,
    /// Repetitions that measured a throughput (failed ones are not in the mean).
    pub repetitions: u32,
    pub throughput: Option<Interval>,
    /// Mean throughput / the mean 1-sender throughput, its range on a log scale from both
    /// (`log_scale`: their relative variances add; with one repetition on either side, none). The
    /// 1-sender row's is exactly 1, the reference, with no interval: `half_width` and
    /// `standard_error` 0, `degrees_of_freedom` null.
    pub ratio: Option<Interval>,
}

/// The first version of `net.json` whose intervals are ranges for another invocation.
pub const RANGES_SINCE: u32 = 3;

/// `net.json`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct NetRecord {
    /// Schema `taskmeter.net`; `complete` is false when interrupted (the points hold what was
    /// measured).
    #[serde(flatten)]
    pub header: Header,
    pub settings: NetSettings,
    /// One per receiver, sender count and repetition, in the order they ran.
    pub points: Vec<NetPoint>,
    /// One per receiver and sender count: the repetitions together.
    #[serde(default)]
    pub summaries: Vec<NetSummary>,
    /// Receivers that cannot run here (a missing toolchain or Rust target), with the reason.
    #[serde(default)]
    pub skipped: Vec<SkippedReceiver>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SkippedReceiver {
    pub receiver: String,
    pub reason: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq)]
pub struct NetPoint {
    pub receiver: String,
    pub senders: u32,
    /// Which repetition (`--repeat`), from 1.
    #[serde(default = "one")]
    pub repetition: u32,
    /// None when every message was sent, received and acknowledged; otherwise why not.
    pub error: Option<String>,
    pub receiver_version: Option<String>,
    pub messages_planned: u64,
    pub messages_sent: u64,
    pub messages_acked: u64,
    pub messages_received: u64,
    /// messages received / (last receive - first receive), at the receiver.
    pub throughput: Option<f64>,
    pub window_ns: Option<u64>,
    /// throughput / this receiver's mean throughput with 1 sender (the study's ratio graph).
    pub ratio: Option<f64>,
    /// Per message, at the senders: write start to ack end, ns.
    pub round_trip: Option<Summary>,
    pub connections: Vec<ConnectionReport>,
    /// Connections the receiver refused during the point (no handshake, a wrong token, ...):
    /// how many, and the first [`STRANGERS_KEPT`] of them.
    #[serde(default)]
    pub strangers: u64,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stranger_reports: Vec<Stranger>,
}

/// How many refused connections a point keeps the details of.
pub const STRANGERS_KEPT: usize = 20;

impl Record for NetRecord {
    const SCHEMA: &'static str = "taskmeter.net";
    const FILE: &'static str = "net.json";
    /// Version 2 took the shared header (version 1 had a bare number for a schema).
    const VERSIONS: std::ops::RangeInclusive<u32> = 2..=RANGES_SINCE;

    crate::record_json!();

    fn header(&self) -> &Header {
        &self.header
    }

    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_add_up_to_the_total() {
        assert_eq!((0..3).map(|i| share(10_000, 3, i)).collect::<Vec<_>>(), vec![3334, 3333, 3333]);
        assert_eq!((0..40).map(|i| share(10_000, 40, i)).sum::<u64>(), 10_000);
        assert_eq!(share(7, 10, 9), 0);
    }
}
