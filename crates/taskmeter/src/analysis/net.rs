//! The repetitions of each receiver and sender count of `run net` together: the mean throughput
//! with a Student-t interval between repetitions, and the ratio to the receiver's own 1-sender
//! throughput, propagated from both.

use crate::model::net::{NetPoint, NetSummary};
use taskmeter_stats::{ratio_interval, t_interval, Interval};

/// The repetitions of each receiver and sender count together, and each point's ratio to its
/// receiver's mean 1-sender throughput.
pub fn summarise(points: &mut [NetPoint]) -> Vec<NetSummary> {
    let mut keys: Vec<(String, u32)> = Vec::new();
    for p in points.iter() {
        if !keys.contains(&(p.receiver.clone(), p.senders)) {
            keys.push((p.receiver.clone(), p.senders));
        }
    }
    let throughput = |points: &[NetPoint], receiver: &str, senders: u32| -> (u32, Option<Interval>) {
        let values: Vec<f64> = points
            .iter()
            .filter(|p| p.receiver == receiver && p.senders == senders && p.error.is_none())
            .filter_map(|p| p.throughput)
            .collect();
        let interval = match values.as_slice() {
            [] => None,
            [one] => Some(Interval::single(*one)),
            many => t_interval(many),
        };
        (values.len() as u32, interval)
    };
    let mut summaries = Vec::new();
    for (receiver, senders) in keys {
        let (repetitions, mean) = throughput(points, &receiver, senders);
        let base = throughput(points, &receiver, 1).1;
        let ratio = mean.zip(base).filter(|(_, b)| b.value > 0.0).map(|(m, b)| ratio_interval(&m, &b));
        for p in points.iter_mut().filter(|p| p.receiver == receiver && p.senders == senders) {
            p.ratio =
                p.throughput.zip(base).filter(|(_, b)| p.error.is_none() && b.value > 0.0).map(|(t, b)| t / b.value);
        }
        summaries.push(NetSummary { receiver, senders, repetitions, throughput: mean, ratio });
    }
    summaries
}
