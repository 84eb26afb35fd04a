//! Real workers' recorded output, folded (issue 58): whatever the fold does to be fast, a row's
//! every figure must be what it was, and what folding the values one by one gives.
//!
//! Each folder of `tests/recorded/` holds one run of `taskmeter worker`, recorded by hand: its
//! plan, its stdout (the control frames) and its sample file (fd 3, gzipped). `folded.json` is
//! what the fold made of it before the fold was rewritten for speed (issue 58), with every
//! budget and class setting below; `BLESS=1` writes it anew, which only a change of what a
//! figure means may do. The recordings were made under protocol 4, whose samples carried their
//! period and missed deadlines; they were turned into protocol 5 (the same frames, each sample's
//! four other words) with `folded.json` kept as it was, so these tests also hold the periods and
//! missed deadlines the checker derives to those the workers sent (5,800 missed in
//! `spin-absolute`); then into protocol 6 (each `U` frame's five numbers in binary).
//!
//! - `thread-modulo`: 4 sleeping threads in two priority classes, relative mode, `modulo:3` of
//!   50 µs (the expected sleep varies by period), 200 busy iterations: some 7,600 samples.
//! - `spin-absolute`: 2 threads spinning to absolute deadlines 2 µs apart: some 13,000.

use flate2::read::GzDecoder;
use serde_json::{json, Value};
use std::io::Read;
use std::path::{Path, PathBuf};
use taskmeter_analysis::accumulate::{summary_of_list, RowStats};
use taskmeter_model::run::METRICS;
use taskmeter_protocol::frames::{decode, FrameReader};
use taskmeter_protocol::{Checker, Plan, SampleView};
use taskmeter_stats::Summary;

fn recorded(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/recorded").join(name)
}

/// The plan and every checked sample of a recording, in the order a reader hands them on.
fn checked(name: &str) -> (Plan, Vec<SampleView>) {
    let dir = recorded(name);
    let plan = Plan::from_json(std::fs::read_to_string(dir.join("plan.json")).unwrap().trim()).unwrap();
    let stdout = std::fs::read(dir.join("stdout.bin")).unwrap();
    let mut samples = Vec::new();
    GzDecoder::new(std::fs::File::open(dir.join("samples.bin.gz")).unwrap()).read_to_end(&mut samples).unwrap();
    let mut checker = Checker::new(plan.clone());
    let mut views = Vec::new();
    let mut control = FrameReader::new(stdout.as_slice());
    let mut accept = |kind: u8, payload: &[u8], views: &mut Vec<SampleView>| {
        checker.accept(&decode(kind, payload).unwrap(), views).unwrap();
    };
    // H and G, then the sample file, then the U frames and D (written after the samples).
    for _ in 0..2 {
        let (kind, payload) = control.next_raw().unwrap().unwrap();
        accept(kind, payload, &mut views);
    }
    let mut file = FrameReader::new(samples.as_slice());
    while let Some((kind, payload)) = file.next_raw().unwrap() {
        accept(kind, payload, &mut views);
    }
    while let Some((kind, payload)) = control.next_raw().unwrap() {
        accept(kind, payload, &mut views);
    }
    assert!(views.len() > 5000, "{name}: {} samples", views.len());
    (plan, views)
}

/// Every figure of a row folded from `views` in batches of `batch`, as JSON.
fn folded(views: &[SampleView], classes: u32, budget: u64, batch: usize) -> Value {
    let mut row = RowStats::new(classes, budget, true);
    views.chunks(batch).for_each(|batch| row.add(batch));
    let live = row.live();
    let done = row.finish();
    json!({
        "statistics": done.statistics,
        "classes": done.classes,
        "histograms": done.histograms,
        "lateness_early": done.lateness_early,
        "counts": format!("{:?}", done.counts),
        "basis": done.basis,
        "unit_spread": done.unit_spread,
        "live": format!("{live:?}"),
    })
}

/// The folds compared: one class and the plan's, exact and past a budget of 2,000 samples, in
/// batches of `batch` (a fast worker's reader hands on 1,024 at a time, a slow one's a few).
fn every_fold(name: &str, batch: usize) -> Value {
    let (plan, views) = checked(name);
    let mut all = serde_json::Map::new();
    for classes in [1, plan.priority_classes] {
        for budget in [u64::MAX, 2000] {
            all.insert(format!("classes {classes}, budget {budget}"), folded(&views, classes, budget, batch));
        }
    }
    Value::Object(all)
}

fn same_as_recorded(name: &str) {
    let path = recorded(name).join("folded.json");
    if std::env::var("BLESS").is_ok_and(|b| b == "1") {
        std::fs::write(&path, serde_json::to_string_pretty(&every_fold(name, 1024)).unwrap() + "\n").unwrap();
    }
    for batch in [1024, 100] {
        same_text(name, &std::fs::read_to_string(&path).unwrap(), batch);
    }
}

/// The folds in batches of `batch` against the figures recorded (`before`), compared as the text
/// written: parsing it back would round some floats.
fn same_text(name: &str, before: &str, batch: usize) {
    let now = serde_json::to_string_pretty(&every_fold(name, batch)).unwrap() + "\n";
    let (mut fold, mut figure) = ("", "");
    for (line, (was, is)) in before.lines().zip(now.lines()).enumerate() {
        // Which fold and figure a line belongs to, for the message.
        match is.len() - is.trim_start().len() {
            2 => fold = is.trim(),
            4 => figure = is.trim(),
            _ => {}
        }
        assert_eq!(was, is, "{name}, batches of {batch}, line {}: {fold} {figure}", line + 1);
    }
    assert_eq!(before.lines().count(), now.lines().count(), "{name}: as many lines");
}

fn same_as_one_by_one(name: &str) {
    let (_, views) = checked(name);
    let folded = folded(&views, 1, u64::MAX, 1024);
    for metric in METRICS {
        let summary: Summary = serde_json::from_value(folded["statistics"][metric.name()].clone()).unwrap();
        assert_eq!(summary, summary_of_list(views.iter(), metric), "{name}: {metric:?}");
    }
}

#[test]
fn a_sleeping_rows_figures_are_those_recorded_before() {
    same_as_recorded("thread-modulo");
}

#[test]
fn a_spinning_rows_figures_are_those_recorded_before() {
    same_as_recorded("spin-absolute");
}

#[test]
fn every_exact_figure_is_that_of_the_values_one_by_one() {
    same_as_one_by_one("thread-modulo");
    same_as_one_by_one("spin-absolute");
}
