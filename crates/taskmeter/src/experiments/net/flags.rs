//! The flags of `run net` ([`NetArgs`]), the load `net serve` and `net send` share with it
//! ([`NetLoad`]), and the options they make ([`options`]).

use super::NetOptions;
use crate::experiments::flags::{heading, output, EveryArgs};
use clap::Args;

/// The flags of `run net`, besides every experiment's.
#[derive(Args)]
pub struct NetArgs {
    /// The receivers, comma-separated [default: thread,tokio-mt,c-thread,go]
    #[arg(display_order = 330, long, value_name = "IDS", value_delimiter = ',', value_parser = crate::experiments::net::registry::check_id, help_heading = heading::NET)]
    pub receivers: Vec<String>,
    #[command(flatten, next_help_heading = heading::NET, next_display_order = 341)]
    pub load: NetLoad,
}

/// The load of the net experiment, shared by `run net`, `net serve` and `net send`.
#[derive(Args, Clone)]
pub struct NetLoad {
    /// Sender counts: N, a list or a range
    ///
    /// One point each; lists and ranges mix: 1..4,8,16
    #[arg(long, value_name = "VALUES", value_parser = sender_counts, default_value = "1,2,4,8,16,24,32,40")]
    pub senders: SenderCounts,
    /// Messages per point, split across the senders as in the study (see --per-sender)
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub messages: u64,
    /// --messages is per sender instead of per point
    #[arg(long, hide_short_help = true)]
    pub per_sender: bool,
    /// Bytes per message (and per ack)
    #[arg(long, value_name = "BYTES", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=16 << 20))]
    pub message_size: u64,
}

#[derive(Clone)]
pub struct SenderCounts(pub Vec<u32>);

/// `N`, `A,B,C` or `A..B` (every count from A to B), mixed: `1..4,8,16`.
pub fn sender_counts(text: &str) -> Result<SenderCounts, String> {
    let mut counts = Vec::new();
    for part in text.split(',').map(str::trim) {
        let number = |t: &str| match t.trim().parse::<u32>() {
            Ok(n) if (1..=1000).contains(&n) => Ok(n),
            _ => Err(format!("invalid sender count '{t}' in '{text}': expected 1 to 1000")),
        };
        match part.split_once("..") {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("the range '{part}' starts above its end"));
                }
                counts.extend(a..=b);
            }
            None => counts.push(number(part)?),
        }
    }
    Ok(SenderCounts(counts))
}

impl NetLoad {
    pub fn settings(&self, receivers: Vec<String>, repeat: u32) -> taskmeter_model::net::NetSettings {
        taskmeter_model::net::NetSettings {
            receivers,
            senders: self.senders.0.clone(),
            messages: self.messages,
            per_sender: self.per_sender,
            message_size: self.message_size as usize,
            repeat,
        }
    }
}

/// What `run net` runs with.
pub fn options(every: &EveryArgs, args: &NetArgs) -> Result<NetOptions, String> {
    let receivers = if args.receivers.is_empty() {
        ["thread", "tokio-mt", "c-thread", "go"].map(str::to_string).to_vec()
    } else {
        args.receivers.clone()
    };
    Ok(NetOptions {
        // Three receiver processes per point: a point varies by tens of percent from one to the next.
        settings: args.load.settings(receivers, every.repeat.unwrap_or(3)),
        grace: std::time::Duration::from_nanos(every.grace),
        cpu_dma_latency_us: every.cpu_dma_latency,
        output: output(&every.output, &every.exports, every.format)?,
    })
}
