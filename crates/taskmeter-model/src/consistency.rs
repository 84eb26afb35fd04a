//! Whether a record read back holds together. `report` and `compare` show what a record says, so
//! a row that refers to no point, a row written twice or counts that disagree with their
//! statistics would be dropped, repeated or shown as they are. Each problem is one sentence that
//! names the row, point or result. Only what taskmeter's own writing makes true is checked, so a
//! record it wrote always passes.

use super::bench::BenchRecord;
use super::granularity::GrainRecord;
use super::net::{NetPoint, NetRecord, NetSettings};
use super::run::{Metric, Row, RunRecord};
use std::collections::{BTreeMap, BTreeSet};

/// A kind of record that can say whether it holds together: every problem, one sentence each
/// (empty when it does). `report` and `compare` refuse a record with any
/// (`LoadError::Inconsistent`).
pub trait Consistent {
    fn problems(&self) -> Vec<String>;
}

impl Consistent for RunRecord {
    fn problems(&self) -> Vec<String> {
        run_problems(self)
    }
}

impl Consistent for NetRecord {
    fn problems(&self) -> Vec<String> {
        net_problems(self)
    }
}

impl Consistent for GrainRecord {
    fn problems(&self) -> Vec<String> {
        granularity_problems(self)
    }
}

impl Consistent for BenchRecord {
    fn problems(&self) -> Vec<String> {
        bench_problems(self)
    }
}

/// Missing rows listed one by one; past this, one line says how many more (a file that claims
/// a billion repetitions must not take a billion lines, or as long).
const LISTED_MISSING: usize = 100;

fn run_problems(record: &RunRecord) -> Vec<String> {
    let mut problems = Vec::new();
    let (points, repeat) = (record.points.len(), record.settings.repeat);
    for (position, point) in record.points.iter().enumerate() {
        if point.index != position {
            problems
                .push(format!("points[{position}] has index {} (rows refer to points by their position)", point.index));
        }
    }
    let runtimes: Vec<&String> = unique(&record.settings.runtimes);
    for (i, row) in record.rows.iter().enumerate() {
        let name = row_name(i, row);
        if row.point >= points {
            problems.push(format!("{name}: there is no point {} (the record has {points})", row.point));
        }
        if !runtimes.contains(&&row.runtime) {
            problems.push(format!("{name}: its runtime is not in settings.runtimes"));
        }
        if !(1..=repeat).contains(&row.repetition) {
            problems.push(format!("{name}: repetition {} is outside 1 to {repeat} (settings.repeat)", row.repetition));
        }
        problems.extend(count_problems(row, record.header.schema_version).into_iter().map(|p| format!("{name}: {p}")));
    }
    let keys = record.rows.iter().map(|r| (r.runtime.as_str(), r.point, r.repetition));
    for ((runtime, point, repetition), rows) in duplicates(keys) {
        problems.push(format!(
            "{} at point {point}, repetition {repetition} has {} rows (rows {})",
            shown(runtime),
            rows.len(),
            listed(&rows)
        ));
    }
    problems.extend(missing_rows(record, &runtimes));
    problems
}

/// "row 3 (thread, point 0, repetition 2)": a row as the file has it (positions from 0).
fn row_name(i: usize, row: &Row) -> String {
    format!("row {i} ({}, point {}, repetition {})", shown(&row.runtime), row.point, row.repetition)
}

/// Jobs without a row: taskmeter writes one for every runtime, point and repetition, even a
/// skipped or failed one, even when interrupted.
fn missing_rows(record: &RunRecord, runtimes: &[&String]) -> Vec<String> {
    let present: BTreeSet<(&str, usize, u32)> =
        record.rows.iter().map(|r| (r.runtime.as_str(), r.point, r.repetition)).collect();
    let expected = record.points.len() as u128 * record.settings.repeat as u128 * runtimes.len() as u128;
    let expected_present = present
        .iter()
        .filter(|(runtime, point, repetition)| {
            runtimes.iter().any(|r| r == runtime)
                && *point < record.points.len()
                && (1..=record.settings.repeat).contains(repetition)
        })
        .count() as u128;
    if expected == expected_present {
        return Vec::new();
    }
    let mut problems = Vec::new();
    'jobs: for point in 0..record.points.len() {
        for repetition in 1..=record.settings.repeat {
            for runtime in runtimes {
                if problems.len() == LISTED_MISSING {
                    break 'jobs;
                }
                if !present.contains(&(runtime.as_str(), point, repetition)) {
                    problems.push(format!("{} at point {point}, repetition {repetition} has no row", shown(runtime)));
                }
            }
        }
    }
    let more = expected - expected_present - problems.len() as u128;
    if more > 0 {
        problems.push(format!("{more} more (runtime, point, repetition) have no row"));
    }
    problems
}

/// Where a row's counts disagree with its statistics, as `experiments/sleep/rows.rs` and
/// `analysis/accumulate.rs` make them: every measured sample adds one value to lateness, actual
/// and busy, and one to full unless it follows lost samples.
fn count_problems(row: &Row, schema_version: u32) -> Vec<String> {
    let (counts, statistics) = match (&row.counts, &row.statistics) {
        (Some(counts), Some(statistics)) => (counts, statistics),
        (None, None) => return Vec::new(),
        (Some(_), None) => return vec!["has counts but no statistics".into()],
        (None, Some(_)) => return vec!["has statistics but no counts".into()],
    };
    let measured = counts.samples_measured;
    let mut problems = Vec::new();
    let parts = measured as u128 + counts.samples_warmup as u128 + counts.samples_left_out as u128;
    if parts != counts.samples_total as u128 {
        problems.push(format!(
            "counts.samples_total is {}, but samples_measured {measured} + samples_warmup {} + samples_left_out {} is {parts}",
            counts.samples_total, counts.samples_warmup, counts.samples_left_out
        ));
    }
    if counts.samples_left_out > counts.unit_flushes {
        problems.push(format!(
            "counts.samples_left_out {} is more than unit_flushes {} (one sample follows each)",
            counts.samples_left_out, counts.unit_flushes
        ));
    }
    for metric in [Metric::Lateness, Metric::Actual, Metric::Busy] {
        let count = statistics.get(metric).count;
        if count != measured {
            problems.push(format!(
                "statistics.{}.count is {count}, but counts.samples_measured is {measured}",
                metric.name()
            ));
        }
    }
    // Version 4 added lost samples; before it, no count says which samples have no `full`.
    if schema_version >= 4 {
        let full = statistics.full.count;
        match measured.checked_sub(counts.samples_after_gap) {
            None => problems.push(format!(
                "counts.samples_after_gap {} is more than samples_measured {measured}",
                counts.samples_after_gap
            )),
            Some(with_full) if with_full != full => problems.push(format!(
                "statistics.full.count is {full}, but counts.samples_measured - samples_after_gap is {with_full}"
            )),
            Some(_) => {}
        }
    }
    // Each measured sample is also in its unit's class (when there are classes and they sleep).
    let class_counts: Option<Vec<u64>> =
        row.classes.iter().map(|c| c.statistics.as_ref().map(|s| s.lateness.count)).collect();
    if let Some(class_counts) = class_counts.filter(|c| !c.is_empty()) {
        let in_classes: u128 = class_counts.iter().map(|c| *c as u128).sum();
        if in_classes != measured as u128 {
            problems.push(format!(
                "its priority classes hold {in_classes} samples, but counts.samples_measured is {measured}"
            ));
        }
    }
    problems
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

fn granularity_problems(record: &GrainRecord) -> Vec<String> {
    let s = &record.settings;
    let grains = s.grains_ns.len();
    let runtimes = unique(&s.runtimes);
    let mut problems = Vec::new();
    for (i, run) in record.runs.iter().enumerate() {
        let name = format!("run {i} ({}, repetition {})", shown(&run.runtime), run.repetition);
        if !runtimes.contains(&&run.runtime) {
            problems.push(format!("{name}: its runtime is not in settings.runtimes"));
        }
        if !(1..=s.repeat).contains(&run.repetition) {
            problems
                .push(format!("{name}: repetition {} is outside 1 to {} (settings.repeat)", run.repetition, s.repeat));
        }
        // The worker sends the plan's grains in order, and no more (the protocol checks each).
        if run.points.len() > grains {
            problems.push(format!("{name}: has {} grains, but settings.grains_ns has {grains}", run.points.len()));
        }
        let mismatch = run.points.iter().zip(&s.grains_ns).position(|(p, ns)| p.measured.grain_ns != *ns);
        if let Some(at) = mismatch {
            problems.push(format!(
                "{name}: grain {at} is {} ns, but settings.grains_ns[{at}] is {} ns",
                run.points[at].measured.grain_ns, s.grains_ns[at]
            ));
        }
    }
    let keys = record.runs.iter().map(|r| (r.runtime.as_str(), r.repetition));
    for ((runtime, repetition), runs) in duplicates(keys) {
        problems.push(format!(
            "{} repetition {repetition} has {} runs (runs {})",
            shown(runtime),
            runs.len(),
            listed(&runs)
        ));
    }
    for (runtime, copies) in duplicates(record.summaries.iter().map(|s| s.runtime.as_str())) {
        problems.push(format!("{} has {} summaries (summaries {})", shown(runtime), copies.len(), listed(&copies)));
    }
    // One summary per runtime that ran, over its runs that measured every grain.
    for summary in &record.summaries {
        let runtime = shown(&summary.runtime);
        let runs: Vec<_> = record.runs.iter().filter(|r| r.runtime == summary.runtime).collect();
        let whole = runs.iter().filter(|r| r.error.is_none() && r.points.len() == grains).count();
        if runs.is_empty() {
            problems.push(format!("the summary of {runtime} has no runs"));
        } else if summary.repetitions as usize != whole {
            problems.push(format!(
                "the summary of {runtime}: repetitions is {}, but {whole} of its runs measured every grain",
                summary.repetitions
            ));
        }
        let per_grain = [
            ("efficiency", summary.efficiency.len()),
            ("overhead_ns", summary.overhead_ns.len()),
            // Absent from the first records that have no granularity per grain.
            ("granularity_ns", if summary.granularity_ns.is_empty() { grains } else { summary.granularity_ns.len() }),
        ];
        for (field, len) in per_grain.into_iter().filter(|(_, len)| *len != grains) {
            problems.push(format!(
                "the summary of {runtime}: {field} has length {len}, but settings.grains_ns has length {grains}"
            ));
        }
    }
    for runtime in first_seen(record.runs.iter().map(|r| r.runtime.as_str())) {
        if !record.summaries.iter().any(|s| s.runtime == runtime) {
            problems.push(format!("{} has runs but no summary", shown(runtime)));
        }
    }
    problems
}

fn bench_problems(record: &BenchRecord) -> Vec<String> {
    let mut problems = Vec::new();
    let label = |scenario: &str, input: Option<&str>| match input {
        Some(input) => format!("scenario {} with input {}", shown(scenario), shown(input)),
        None => format!("scenario {}", shown(scenario)),
    };
    for (i, result) in record.report.results.iter().enumerate() {
        let name = format!("result {i} ({})", label(&result.scenario, result.input.as_deref()));
        if !record.scenarios.iter().any(|s| s.name == result.scenario) {
            problems.push(format!("{name}: its scenario is not in scenarios"));
        }
        match &result.input {
            Some(input) if !record.inputs.iter().any(|i| i.name == *input) => {
                problems.push(format!("{name}: its input is not in inputs"));
            }
            None if !record.inputs.is_empty() => {
                problems.push(format!("{name}: has no input, but the bench has inputs"))
            }
            _ => {}
        }
        // Every unit completed in the window gives one gap (`taskmeter_record::analysis`).
        let gaps = result.measured.gap.as_ref().map_or(0, |g| g.count);
        if gaps != result.measured.units {
            problems.push(format!("{name}: measured {} units, but gap.count is {gaps}", result.measured.units));
        }
    }
    let keys = record.report.results.iter().map(|r| (r.scenario.as_str(), r.input.as_deref()));
    for ((scenario, input), results) in duplicates(keys) {
        problems.push(format!(
            "{} has {} results (results {})",
            label(scenario, input),
            results.len(),
            listed(&results)
        ));
    }
    problems
}

/// Keys that occur more than once, each with the positions it occurs at, in the order they
/// first occur.
fn duplicates<K: Ord>(keys: impl Iterator<Item = K>) -> Vec<(K, Vec<usize>)> {
    let mut at: BTreeMap<K, Vec<usize>> = BTreeMap::new();
    for (i, key) in keys.enumerate() {
        at.entry(key).or_default().push(i);
    }
    let mut repeated: Vec<(K, Vec<usize>)> = at.into_iter().filter(|(_, positions)| positions.len() > 1).collect();
    repeated.sort_by_key(|(_, positions)| positions[0]);
    repeated
}

/// Each key once, in the order it first occurs.
fn first_seen<K: Ord + Copy>(keys: impl Iterator<Item = K>) -> Vec<K> {
    let mut seen = BTreeSet::new();
    keys.filter(|k| seen.insert(*k)).collect()
}

fn unique(names: &[String]) -> Vec<&String> {
    first_seen(names.iter())
}

/// "0, 1 and 2".
fn listed(positions: &[usize]) -> String {
    match positions {
        [] => String::new(),
        [one] => one.to_string(),
        [init @ .., last] => format!("{} and {last}", init.iter().map(usize::to_string).collect::<Vec<_>>().join(", ")),
    }
}

/// Longest name echoed in a problem: a damaged file may hold megabytes in one.
const SHOWN_CHARS: usize = 40;

/// `text`, cut to a readable length.
fn shown(text: &str) -> String {
    match text.char_indices().nth(SHOWN_CHARS) {
        Some((cut, _)) => format!("{}...", &text[..cut]),
        None => text.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::granularity::{GrainRun, GrainSettings, GrainSummary};
    use crate::header::{LoadError, Record, SHOWN_PROBLEMS};
    use crate::net::{ConnectionReport, NetSummary};
    use std::path::PathBuf;
    use taskmeter_machine::env::Environment;

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

    #[test]
    fn a_granularity_record_has_one_summary_per_runtime_that_ran_with_a_value_per_grain() {
        let settings = GrainSettings {
            runtimes: vec!["smol".into(), "thread".into()],
            pattern: taskmeter_protocol::Pattern::Trivial,
            width: 1,
            steps: 1,
            grains_ns: vec![1000, 100],
            warmup_ns: 0,
            duration_ns: 1,
            calibrate_ns: 1,
            repeat: 1,
        };
        let run = |runtime: &str| GrainRun {
            runtime: runtime.into(),
            repetition: 1,
            runtime_version: None,
            points: Vec::new(),
            metg: None,
            error: Some("the worker failed".into()),
            interrupted: false,
            wall_ns: 0,
        };
        let summary = |runtime: &str, grains: usize| GrainSummary {
            runtime: runtime.into(),
            repetitions: 0,
            cores: None,
            metg_ns: None,
            metg_bound: None,
            efficiency: vec![None; grains],
            granularity_ns: vec![None; grains],
            overhead_ns: vec![None; grains],
        };
        let header = GrainRecord::new_header(Vec::new(), String::new(), Environment::default());
        let good = GrainRecord {
            header,
            settings,
            runs: vec![run("smol")],
            summaries: vec![summary("smol", 2)],
            skipped: Vec::new(),
        };
        assert_eq!(granularity_problems(&good), Vec::<String>::new());

        let mut bad = good.clone();
        bad.runs.push(run("thread"));
        bad.summaries = vec![summary("smol", 1), summary("go", 2)];
        assert_eq!(
            granularity_problems(&bad),
            [
                "the summary of smol: efficiency has length 1, but settings.grains_ns has length 2",
                "the summary of smol: overhead_ns has length 1, but settings.grains_ns has length 2",
                "the summary of smol: granularity_ns has length 1, but settings.grains_ns has length 2",
                "the summary of go has no runs",
                "thread has runs but no summary",
            ]
        );
    }

    #[test]
    fn duplicates_are_named_with_every_position_in_the_order_they_first_occur() {
        let found = duplicates(["b", "a", "b", "c", "a", "b"].into_iter());
        assert_eq!(found, vec![("b", vec![0, 2, 5]), ("a", vec![1, 4])]);
        assert_eq!(listed(&found[0].1), "0, 2 and 5");
        assert_eq!(listed(&[7]), "7");
        assert!(duplicates([1, 2, 3].into_iter()).is_empty());
    }

    #[test]
    fn a_huge_name_is_cut_to_a_readable_length() {
        assert_eq!(shown("thread"), "thread");
        assert_eq!(shown(&"x".repeat(1_000_000)), format!("{}...", "x".repeat(SHOWN_CHARS)));
        // Cut between characters, never inside one.
        assert_eq!(shown(&"é".repeat(100)).chars().count(), SHOWN_CHARS + 3);
    }

    #[test]
    fn ten_problems_are_shown_one_line_each_and_the_rest_counted() {
        let problems: Vec<String> = (0..13).map(|i| format!("problem {i}")).collect();
        let error = LoadError::Inconsistent { path: PathBuf::from("r/run.json"), problems };
        let text = error.to_string();
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), SHOWN_PROBLEMS + 1);
        assert_eq!(lines[0], "r/run.json: problem 0");
        assert_eq!(lines[9], "r/run.json: problem 9");
        assert_eq!(lines[10], "... and 3 more");
        let one = LoadError::Inconsistent { path: PathBuf::from("net.json"), problems: vec!["a".into()] };
        assert_eq!(one.to_string(), "net.json: a");
    }
}
