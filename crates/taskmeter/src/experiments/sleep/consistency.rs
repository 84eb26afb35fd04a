//! Whether a run of the work loop read back holds together: one row per runtime, point and
//! repetition, each row's counts as its statistics make them.

use crate::experiments::consistency::{duplicates, listed, shown, unique, Consistent};
use std::collections::BTreeSet;
use taskmeter_model::run::{Metric, Row, RunRecord};

impl Consistent for RunRecord {
    fn problems(&self) -> Vec<String> {
        run_problems(self)
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
/// `taskmeter_analysis::accumulate` make them: every measured sample adds one value to lateness, actual
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
