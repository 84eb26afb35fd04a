//! `taskmeter compare OLD NEW`: what changed between two sets of runs of any experiment, judged
//! only on the variation between runs (`analysis::compare`). A side is a results folder (its
//! `--repeat` repetitions are its runs) or a folder of results folders (each one run, or more).
//!
//! What is judged, lower being better unless said: a run's lateness and busy by each run's
//! median, actual and full by each run's mean |value - expected| (the v1 study's deviation);
//! net by each run's throughput (higher is better); granularity by each run's METG; bench by
//! each run's mean gap between units (1 / ips). Before anything, the two sides' settings and
//! environments are compared (`analysis::differences`): a different workload is refused unless
//! `--force`; knobs and the machine are printed.

use super::CliError;
use crate::analysis::cells::cells;
use crate::analysis::compare::{judge, Judgement, Rule, Verdict, METHOD};
use crate::analysis::differences::{self, Difference, Kind};
use crate::model::any::AnyRecord;
use crate::model::consistency::load_checked;
use crate::model::granularity::Metg;
use crate::model::header::record_file;
use crate::model::run::{Metric, Row, METRICS};
use crate::report::format::format_ns;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;

pub struct CompareOptions {
    pub old: PathBuf,
    pub new: PathBuf,
    /// None: every metric (runs only).
    pub metric: Option<Metric>,
    pub rule: Rule,
    /// Compare even when the workloads differ.
    pub force: bool,
    pub json: bool,
}

/// One side: its records, each from a results folder.
struct Side {
    path: PathBuf,
    records: Vec<(PathBuf, AnyRecord)>,
}

/// A results folder (or its record file), or a folder of results folders.
fn load_side(path: &Path) -> Result<Side, CliError> {
    if record_file(path).is_ok() || !path.is_dir() {
        return Ok(Side { path: path.to_path_buf(), records: vec![load_checked(path)?] });
    }
    let mut folders: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| format!("cannot read {}: {e}", path.display()))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && record_file(p).is_ok())
        .collect();
    folders.sort();
    if folders.is_empty() {
        return Err(load_checked(path)
            .err()
            .map(CliError::from)
            .unwrap_or_else(|| format!("{} holds no results", path.display()).into()));
    }
    let records = folders.iter().map(|f| load_checked(f)).collect::<Result<Vec<_>, _>>()?;
    Ok(Side { path: path.to_path_buf(), records })
}

fn kind_of(record: &AnyRecord) -> &'static str {
    crate::report::page::of(record).kind()
}

fn json_of(record: &AnyRecord) -> serde_json::Value {
    serde_json::from_str(&crate::report::page::of(record).json()).expect("a record serialises")
}

/// The metric `compare` uses when none is given: the old run's (other experiments have one).
pub fn default_metric(old: &Path) -> Result<Option<Metric>, CliError> {
    let side = load_side(old)?;
    Ok(match &side.records[0].1 {
        AnyRecord::Run(record) => Some(record.metric),
        _ => None,
    })
}

/// What one line of the comparison is about, and how its values read.
#[derive(Serialize)]
struct Line {
    /// What the line is about, in column order (runtime, point, metric...).
    #[serde(serialize_with = "in_order")]
    subject: Vec<(&'static str, String)>,
    /// `ns`, `msg/s`.
    unit: &'static str,
    #[serde(flatten)]
    judgement: Judgement,
}

/// The comparison, as `--format json` prints it (schema `taskmeter.compare`, version 1).
#[derive(Serialize)]
struct Comparison {
    schema: &'static str,
    schema_version: u32,
    kind: &'static str,
    old: Vec<String>,
    new: Vec<String>,
    method: &'static str,
    threshold: f64,
    alpha: f64,
    differences: Vec<Difference>,
    lines: Vec<Line>,
    not_compared: Vec<String>,
    counts: BTreeMap<&'static str, usize>,
}

pub fn run(options: CompareOptions) -> Result<ExitCode, CliError> {
    let (old, new) = (load_side(&options.old)?, load_side(&options.new)?);
    let kinds: Vec<&str> = old.records.iter().chain(&new.records).map(|(_, r)| kind_of(r)).collect();
    if kinds.iter().any(|k| *k != kinds[0]) {
        return Err(format!(
            "cannot compare a {} result with a {} result (compare takes results of one experiment)",
            kinds[0],
            kinds.iter().find(|k| **k != kinds[0]).unwrap_or(&"?")
        )
        .into());
    }
    // Within a side every run must have measured the same thing, as across the sides.
    for side in [&old, &new] {
        let first = json_of(&side.records[0].1);
        for (path, record) in &side.records[1..] {
            let workload: Vec<String> = differences::between(&first, &json_of(record))
                .into_iter()
                .filter(|d| d.kind == Kind::Workload)
                .map(said)
                .collect();
            if !workload.is_empty() && !options.force {
                return Err(format!(
                    "the runs of {} measured different things ({} in {}): compare them anyway with --force",
                    side.path.display(),
                    workload.join("; "),
                    path.display()
                )
                .into());
            }
        }
    }
    let found = differences::between(&json_of(&old.records[0].1), &json_of(&new.records[0].1));
    let workload: Vec<String> = found.iter().filter(|d| d.kind == Kind::Workload).cloned().map(said).collect();
    if !workload.is_empty() && !options.force {
        return Err(format!(
            "the two runs measured different things ({}): compare them anyway with --force",
            workload.join("; ")
        )
        .into());
    }
    let (lines, not_compared) = match kinds[0] {
        "run" => run_lines(&old, &new, &options)?,
        "net" => net_lines(&old, &new, options.rule),
        "granularity" => grain_lines(&old, &new, options.rule),
        _ => bench_lines(&old, &new, options.rule),
    };
    if lines.is_empty() {
        let why = if not_compared.is_empty() { String::new() } else { format!(" ({})", not_compared.join("; ")) };
        return Err(format!("the two {} results have nothing measured in common{why}", kinds[0]).into());
    }
    let mut counts: BTreeMap<&'static str, usize> =
        [Verdict::Improved, Verdict::Regressed, Verdict::NoChange, Verdict::Inconclusive]
            .map(|v| (v.as_str(), 0))
            .into();
    for line in &lines {
        *counts.entry(line.judgement.verdict.as_str()).or_default() += 1;
    }
    let regressed = counts["regressed"];
    let comparison = Comparison {
        schema: "taskmeter.compare",
        schema_version: 1,
        kind: kinds[0],
        old: old.records.iter().map(|(p, _)| p.display().to_string()).collect(),
        new: new.records.iter().map(|(p, _)| p.display().to_string()).collect(),
        method: METHOD,
        threshold: options.rule.threshold,
        alpha: options.rule.alpha,
        differences: found,
        lines,
        not_compared,
        counts,
    };
    if options.json {
        crate::outln!("{}", serde_json::to_string_pretty(&comparison).expect("a comparison serialises"));
    } else {
        crate::out!("{}", console(&comparison, &old, &new));
    }
    Ok(if regressed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// Pairs as a JSON object, keys in their order.
fn in_order<S: serde::Serializer>(pairs: &[(&'static str, String)], serializer: S) -> Result<S::Ok, S::Error> {
    use serde::ser::SerializeMap;
    let mut map = serializer.serialize_map(Some(pairs.len()))?;
    for (key, value) in pairs {
        map.serialize_entry(key, value)?;
    }
    map.end()
}

fn said(d: Difference) -> String {
    format!("{} {} -> {}", d.what, d.old, d.new)
}

fn console(c: &Comparison, old: &Side, new: &Side) -> String {
    use std::fmt::Write;
    let mut out = String::new();
    let runs = |side: &Side| match side.records.len() {
        1 => String::new(),
        n => format!(", {n} results folders"),
    };
    let _ = writeln!(
        out,
        "compare {} ({}) -> {} ({})",
        old.path.display(),
        runs(old).trim_start_matches(", ").to_string() + &started(old),
        new.path.display(),
        runs(new).trim_start_matches(", ").to_string() + &started(new)
    );
    for d in &c.differences {
        let _ = writeln!(out, "differs ({}): {} {} -> {}", d.kind.as_str(), d.what, d.old, d.new);
    }
    let _ = writeln!(out, "method: {METHOD}; alpha {}, noise threshold {:.1} %", c.alpha, c.threshold * 100.0);
    out.push('\n');
    let subject_names: Vec<&str> =
        c.lines.first().map(|l| l.subject.iter().map(|(k, _)| *k).collect()).unwrap_or_default();
    let mut table: Vec<Vec<String>> = vec![subject_names
        .iter()
        .map(|s| s.to_string())
        .chain(["old", "new", "change", "runs", "p", "verdict"].map(str::to_string))
        .collect()];
    for line in &c.lines {
        let value = |v: f64| match line.unit {
            "ns" => format_ns(v),
            unit => format!("{v:.0} {unit}"),
        };
        let j = &line.judgement;
        let mut row: Vec<String> = line.subject.iter().map(|(_, v)| v.clone()).collect();
        row.extend([
            value(j.old),
            value(j.new),
            j.change.map_or("n/a".into(), |c| format!("{:+.1} %", c * 100.0)),
            format!("{} vs {}", j.old_runs, j.new_runs),
            j.p_value.map_or("-".into(), |p| format!("{p:.3}")),
            j.verdict.as_str().into(),
        ]);
        table.push(row);
    }
    out.push_str(&crate::report::console::render_table(&table));
    for line in &c.not_compared {
        let _ = writeln!(out, "not compared: {line}");
    }
    out.push('\n');
    let n = |v: &str| c.counts.get(v).copied().unwrap_or(0);
    let _ = writeln!(
        out,
        "{} regressed, {} improved, {} no change, {} inconclusive",
        n("regressed"),
        n("improved"),
        n("no change"),
        n("inconclusive")
    );
    if n("inconclusive") > 0 {
        let _ = writeln!(out, "inconclusive: one run a side says nothing of how much two runs differ when nothing changed; run both with --repeat 3 (or more), or compare folders of results folders");
    }
    out
}

fn started(side: &Side) -> String {
    let header = |r: &AnyRecord| crate::report::page::of(r).header().started_at.clone();
    let prefix = if side.records.len() > 1 { ", from " } else { "" };
    format!("{prefix}{}", header(&side.records[0].1))
}

/// The score of one run: its median (lateness, busy) or its mean |value - expected| (actual,
/// full); lower is better.
fn score(row: &Row, metric: Metric) -> Option<f64> {
    let s = row.statistics.as_ref()?.get(metric);
    match metric {
        Metric::Lateness | Metric::Busy => s.p50.map(|v| v as f64),
        Metric::Actual | Metric::Full => s.mean_absolute_deviation,
    }
}

/// What a line is about: its columns and their values (runtime, point, metric...).
type Subject = Vec<(&'static str, String)>;

/// What one side measured of each subject, in the order to show: its runs' values, or why
/// they cannot be compared.
type Measured = Vec<(Subject, Result<Vec<f64>, String>)>;

/// One line per subject both sides measured; the rest said in `not compared`.
fn pair_up(
    a: Measured,
    b: Measured,
    unit: &'static str,
    higher_is_better: bool,
    (old, new): (&Side, &Side),
    rule: Rule,
) -> (Vec<Line>, Vec<String>) {
    let label = |s: &Subject| s.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>().join(" ");
    let mut lines = Vec::new();
    let mut not_compared = Vec::new();
    for (subject, x) in &a {
        let Some((_, y)) = b.iter().find(|(s, _)| s == subject) else {
            not_compared.push(format!("{}: only in {}", label(subject), old.path.display()));
            continue;
        };
        match (x, y) {
            (Err(why), _) | (_, Err(why)) => not_compared.push(format!("{}: {why}", label(subject))),
            (Ok(x), Ok(y)) if !x.is_empty() && !y.is_empty() => {
                lines.push(Line { subject: subject.clone(), unit, judgement: judge(x, y, higher_is_better, rule) })
            }
            // Measured on one side only; on neither, it is not a figure of these runs.
            (Ok(x), Ok(y)) if x.is_empty() != y.is_empty() => {
                let empty = if x.is_empty() { old } else { new };
                not_compared.push(format!("{}: nothing measured in {}", label(subject), empty.path.display()))
            }
            _ => {}
        }
    }
    for (subject, _) in b.iter().filter(|(s, _)| !a.iter().any(|(t, _)| t == s)) {
        not_compared.push(format!("{}: only in {}", label(subject), new.path.display()));
    }
    (lines, not_compared)
}

fn run_lines(old: &Side, new: &Side, options: &CompareOptions) -> Result<(Vec<Line>, Vec<String>), CliError> {
    let metrics: Vec<Metric> = options.metric.map(|m| vec![m]).unwrap_or_else(|| METRICS.to_vec());
    // In the old run's order of runtimes, then points.
    let order: Vec<String> = match &old.records[0].1 {
        AnyRecord::Run(r) => r.settings.runtimes.clone(),
        _ => Vec::new(),
    };
    let measured = |side: &Side| -> Measured {
        let mut rows: Vec<((String, String), Vec<Row>)> = Vec::new();
        for (_, record) in &side.records {
            let AnyRecord::Run(record) = record else { continue };
            for point in &record.points {
                for cell in cells(record, point.index).into_iter().filter(|c| c.repetitions() > 0) {
                    let key = (cell.runtime.to_string(), point.label());
                    match rows.iter_mut().find(|(k, _)| *k == key) {
                        Some((_, found)) => found.extend(cell.measured.into_iter().cloned()),
                        None => rows.push((key, cell.measured.into_iter().cloned().collect())),
                    }
                }
            }
        }
        rows.sort_by_key(|((runtime, point), _)| {
            (order.iter().position(|r| r == runtime).unwrap_or(usize::MAX), point.clone())
        });
        rows.iter()
            .flat_map(|((runtime, point), rows)| {
                metrics.iter().map(move |metric| {
                    let subject = vec![
                        ("runtime", runtime.clone()),
                        ("point", point.clone()),
                        ("metric", metric.name().to_string()),
                    ];
                    (subject, Ok(rows.iter().filter_map(|r| score(r, *metric)).collect()))
                })
            })
            .collect()
    };
    Ok(pair_up(measured(old), measured(new), "ns", false, (old, new), options.rule))
}

fn net_lines(old: &Side, new: &Side, rule: Rule) -> (Vec<Line>, Vec<String>) {
    let throughputs = |side: &Side| -> Measured {
        let mut found: BTreeMap<(String, u32), Vec<f64>> = BTreeMap::new();
        for (_, record) in &side.records {
            let AnyRecord::Net(r) = record else { continue };
            for p in r.points.iter().filter(|p| p.error.is_none()) {
                if let Some(t) = p.throughput {
                    found.entry((p.receiver.clone(), p.senders)).or_default().push(t);
                }
            }
        }
        found
            .into_iter()
            .map(|((receiver, senders), v)| (vec![("receiver", receiver), ("senders", senders.to_string())], Ok(v)))
            .collect()
    };
    pair_up(throughputs(old), throughputs(new), "msg/s", true, (old, new), rule)
}

fn grain_lines(old: &Side, new: &Side, rule: Rule) -> (Vec<Line>, Vec<String>) {
    // Each run's METG; a bound (every or no task size efficient) cannot be averaged.
    let metgs = |side: &Side| -> Measured {
        let mut found: BTreeMap<String, (Vec<f64>, Vec<String>)> = BTreeMap::new();
        for (_, record) in &side.records {
            let AnyRecord::Granularity(r) = record else { continue };
            for run in &r.runs {
                let entry = found.entry(run.runtime.clone()).or_default();
                match (run.metg, &run.error) {
                    (Some(Metg::Interpolated { ns }), None) => entry.0.push(ns),
                    (Some(Metg::Below { ns }), None) => entry.1.push(format!("< {}", format_ns(ns))),
                    (Some(Metg::Above { ns }), None) => entry.1.push(format!("> {}", format_ns(ns))),
                    // A failed worker, or every task size invalid: no METG in this run.
                    _ => {}
                }
            }
        }
        found
            .into_iter()
            .map(|(runtime, (values, bounds))| {
                let values = if !bounds.is_empty() {
                    Err(format!("METG is a bound in some runs ({}): widen --task-busy", bounds.join(", ")))
                } else if values.is_empty() {
                    Err("no run has a METG (its workers failed, or every task size was invalid)".to_string())
                } else {
                    Ok(values)
                };
                (vec![("runtime", runtime), ("figure", "METG(50 %)".to_string())], values)
            })
            .collect()
    };
    pair_up(metgs(old), metgs(new), "ns", false, (old, new), rule)
}

fn bench_lines(old: &Side, new: &Side, rule: Rule) -> (Vec<Line>, Vec<String>) {
    let gaps = |side: &Side| -> Measured {
        let mut found: BTreeMap<(String, String), Vec<f64>> = BTreeMap::new();
        for (_, record) in &side.records {
            let AnyRecord::Bench(r) = record else { continue };
            for result in &r.report.results {
                if let Some(gap) = &result.measured.gap {
                    found
                        .entry((result.scenario.clone(), result.input.clone().unwrap_or_else(|| "-".into())))
                        .or_default()
                        .push(gap.mean);
                }
            }
        }
        found
            .into_iter()
            .map(|((scenario, input), v)| {
                (vec![("scenario", scenario), ("input", input), ("figure", "mean gap".to_string())], Ok(v))
            })
            .collect()
    };
    pair_up(gaps(old), gaps(new), "ns", false, (old, new), rule)
}
