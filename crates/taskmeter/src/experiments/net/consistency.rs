//! Whether a net record read back holds together: its points against its settings, and one
//! summary per receiver and sender count.

use crate::experiments::consistency::{duplicates, first_seen, listed, shown, unique, Consistent};
use taskmeter_model::net::{NetPoint, NetRecord, NetSettings};

impl Consistent for NetRecord {
    fn problems(&self) -> Vec<String> {
        net_problems(self)
    }
}

fn net_problems(record: &NetRecord) -> Vec<String> {
    let s = &record.settings;
    let mut problems = Vec::new();
    let receivers = unique(&s.receivers);
    for (i, point) in record.points.iter().enumerate() {
        let name = format!("point {i} ({})", net_key(&point.receiver, point.senders, Some(point.repetition)));
        if !receivers.contains(&&point.receiver) {
            problems.push(format!("{name}: its receiver is not in settings.receivers"));
        }
        if !s.senders.contains(&point.senders) {
            problems.push(format!("{name}: its sender count is not in settings.senders"));
        }
        if !(1..=s.repeat).contains(&point.repetition) {
            problems.push(format!(
                "{name}: repetition {} is outside 1 to {} (settings.repeat)",
                point.repetition, s.repeat
            ));
        }
        problems.extend(message_problems(point, s).into_iter().map(|p| format!("{name}: {p}")));
    }
    let keys = record.points.iter().map(|p| (p.receiver.as_str(), p.senders, p.repetition));
    for ((receiver, senders, repetition), points) in duplicates(keys) {
        problems.push(format!(
            "{} has {} points (points {})",
            net_key(receiver, senders, Some(repetition)),
            points.len(),
            listed(&points)
        ));
    }
    // One summary per receiver and sender count measured, of the points that measured a throughput.
    let summaries = record.summaries.iter().map(|s| (s.receiver.as_str(), s.senders));
    for ((receiver, senders), copies) in duplicates(summaries) {
        problems.push(format!(
            "{} has {} summaries (summaries {})",
            net_key(receiver, senders, None),
            copies.len(),
            listed(&copies)
        ));
    }
    for summary in &record.summaries {
        let of_key: Vec<&NetPoint> =
            record.points.iter().filter(|p| p.receiver == summary.receiver && p.senders == summary.senders).collect();
        let key = net_key(&summary.receiver, summary.senders, None);
        let measured = of_key.iter().filter(|p| p.error.is_none() && p.throughput.is_some()).count();
        if of_key.is_empty() {
            problems.push(format!("the summary of {key} has no points"));
        } else if summary.repetitions as usize != measured {
            problems.push(format!(
                "the summary of {key}: repetitions is {}, but {measured} of its points measured a throughput",
                summary.repetitions
            ));
        }
    }
    let keys: Vec<(&str, u32)> = first_seen(record.points.iter().map(|p| (p.receiver.as_str(), p.senders)));
    for (receiver, senders) in keys {
        if !record.summaries.iter().any(|s| s.receiver == receiver && s.senders == senders) {
            problems.push(format!("{} has points but no summary", net_key(receiver, senders, None)));
        }
    }
    problems
}

/// "thread with 4 senders, repetition 2".
fn net_key(receiver: &str, senders: u32, repetition: Option<u32>) -> String {
    let plural = if senders == 1 { "" } else { "s" };
    let repetition = repetition.map(|r| format!(", repetition {r}")).unwrap_or_default();
    format!("{} with {senders} sender{plural}{repetition}", shown(receiver))
}

/// A point's message counts, as `experiments/net` makes them: planned from the settings,
/// received as its connections report, and all of them acknowledged and received when it has
/// no error.
fn message_problems(point: &NetPoint, s: &NetSettings) -> Vec<String> {
    let mut problems = Vec::new();
    // Computed, not summed over `shares`: a damaged sender count must not allocate or divide by 0.
    let planned = match (s.per_sender, point.senders) {
        (_, 0) => Some(0),
        (true, senders) => s.messages.checked_mul(senders as u64),
        (false, _) => Some(s.messages),
    };
    if planned != Some(point.messages_planned) && s.senders.contains(&point.senders) {
        let planned = planned.map_or("more than 2^64".into(), |p| p.to_string());
        problems.push(format!("messages_planned is {}, but the settings plan {planned}", point.messages_planned));
    }
    let by_connections: u128 = point.connections.iter().map(|c| c.messages as u128).sum();
    if by_connections != point.messages_received as u128 {
        problems.push(format!(
            "messages_received is {}, but its connections received {by_connections}",
            point.messages_received
        ));
    }
    let all = point.messages_planned;
    if point.error.is_none() && (point.messages_acked != all || point.messages_received != all) {
        problems.push(format!(
            "has no error, but {} of {all} messages were acknowledged and {} received",
            point.messages_acked, point.messages_received
        ));
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use taskmeter_machine::env::Environment;
    use taskmeter_model::header::Record;
    use taskmeter_model::net::{ConnectionReport, NetSummary};

    fn net_point(receiver: &str, senders: u32, messages: u64) -> NetPoint {
        let connections = (0..senders)
            .map(|index| ConnectionReport { index, messages: messages / senders as u64, ..Default::default() })
            .collect();
        NetPoint {
            receiver: receiver.into(),
            senders,
            repetition: 1,
            messages_planned: messages,
            messages_sent: messages,
            messages_acked: messages,
            messages_received: messages,
            throughput: Some(1000.0),
            connections,
            ..Default::default()
        }
    }

    fn net_summary(receiver: &str, senders: u32) -> NetSummary {
        NetSummary { receiver: receiver.into(), senders, repetitions: 1, throughput: None, ratio: None }
    }

    #[test]
    fn a_net_record_is_checked_against_its_settings_and_its_summaries() {
        let settings = NetSettings {
            receivers: vec!["thread".into()],
            senders: vec![1, 2],
            messages: 100,
            per_sender: false,
            message_size: 8,
            repeat: 1,
        };
        let header = NetRecord::new_header(Vec::new(), String::new(), Environment::default());
        let good = NetRecord {
            header,
            settings,
            points: vec![net_point("thread", 1, 100), net_point("thread", 2, 100)],
            summaries: vec![net_summary("thread", 1), net_summary("thread", 2)],
            skipped: Vec::new(),
        };
        assert_eq!(net_problems(&good), Vec::<String>::new());

        let mut bad = good.clone();
        bad.points[0].messages_received = 90; // its connection still says 100
        bad.points[1].messages_acked = 99;
        bad.points[1].senders = 0; // no sender count divides by 0 here
        bad.summaries.push(net_summary("go", 4));
        assert_eq!(
            net_problems(&bad),
            [
                "point 0 (thread with 1 sender, repetition 1): messages_received is 90, but its connections received 100",
                "point 0 (thread with 1 sender, repetition 1): has no error, but 100 of 100 messages were acknowledged and 90 received",
                "point 1 (thread with 0 senders, repetition 1): its sender count is not in settings.senders",
                "point 1 (thread with 0 senders, repetition 1): has no error, but 99 of 100 messages were acknowledged and 100 received",
                "the summary of thread with 2 senders has no points",
                "the summary of go with 4 senders has no points",
                "thread with 0 senders has points but no summary",
            ]
        );
        // With --per-sender, each sender sends --messages.
        let mut per_sender = good.clone();
        per_sender.settings.per_sender = true;
        assert_eq!(
            net_problems(&per_sender),
            ["point 1 (thread with 2 senders, repetition 1): messages_planned is 100, but the settings plan 200"]
        );
    }
}
