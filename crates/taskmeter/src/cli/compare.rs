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

use super::families::{self, load_checked};
use super::CliError;
use crate::experiments::compared::{Asked, LeftOut, Measured, Subject};
use crate::experiments::family::Loaded;
use crate::report::dashboard::{self, Dashboard};
use crate::report::export::{render_dashboard, Export};
use crate::report::format::format_ns;
use serde::Serialize;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use taskmeter_analysis::compare::{decide, judge, method_line, Judgement, Level, Rule, Verdict, METHOD};
use taskmeter_analysis::differences::{self, Difference, Kind};
use taskmeter_model::header::record_file;
use taskmeter_model::run::Metric;

pub struct CompareOptions {
    pub old: PathBuf,
    pub new: PathBuf,
    /// None: every metric (runs only).
    pub metric: Option<Metric>,
    pub rule: Rule,
    /// Compare even when the workloads differ.
    pub force: bool,
    /// Judge interrupted runs and rows that are not whole (partial, interrupted) too.
    pub include_incomplete: bool,
    pub json: bool,
    /// The dashboards' files to write (`--export-bmf`...).
    pub exports: Vec<Export>,
}

/// One side: its records, each from a results folder (one invocation of taskmeter).
struct Side {
    path: PathBuf,
    records: Vec<(PathBuf, Box<dyn Loaded>)>,
}

/// The side with its whole runs only (all with `include`), the others noted.
fn whole_runs(side: Side, include: bool, left_out: &mut LeftOut) -> Result<Side, CliError> {
    let total = side.records.len();
    let (kept, interrupted): (Vec<_>, Vec<_>) =
        side.records.into_iter().partition(|(_, record)| include || record.header().complete);
    left_out.incomplete_runs.extend(interrupted.iter().map(|(path, _)| path.display().to_string()));
    if kept.is_empty() {
        return Err(CliError::Usage(format!(
            "{}: its {} run(s) were interrupted, and only whole runs are judged (--include-incomplete judges them too)",
            side.path.display(),
            total
        )));
    }
    Ok(Side { path: side.path, records: kept })
}

/// A results folder (or its record file), or a folder of results folders.
fn load_side(path: &Path) -> Result<Side, CliError> {
    let files = families::files();
    if record_file(path, &files).is_ok() || !path.is_dir() {
        return Ok(Side { path: path.to_path_buf(), records: vec![load_checked(path)?] });
    }
    let mut folders: Vec<PathBuf> = std::fs::read_dir(path)
        .map_err(|e| CliError::Usage(format!("cannot read {}: {e}", path.display())))?
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.is_dir() && record_file(p, &files).is_ok())
        .collect();
    folders.sort();
    if folders.is_empty() {
        return Err(load_checked(path)
            .err()
            .map(CliError::from)
            .unwrap_or_else(|| CliError::Usage(format!("{} holds no results", path.display()))));
    }
    let records = folders.iter().map(|f| load_checked(f)).collect::<Result<Vec<_>, _>>()?;
    Ok(Side { path: path.to_path_buf(), records })
}

fn kind_of(record: &dyn Loaded) -> &'static str {
    record.kind()
}

fn json_of(record: &dyn Loaded) -> serde_json::Value {
    record.json_value()
}

/// The metric `compare` uses when none is given: the old run's (other experiments have none).
pub fn default_metric(old: &Path) -> Result<Option<Metric>, CliError> {
    let side = load_side(old)?;
    Ok(side.records[0].1.default_metric())
}

/// What one line of the comparison is about, and how its values read.
#[derive(Serialize)]
struct Line {
    /// What the line is about, in column order (runtime, point, metric...).
    #[serde(serialize_with = "in_order")]
    subject: Vec<(&'static str, String)>,
    /// `ns`, `msg/s`.
    unit: &'static str,
    /// A throughput: higher is better.
    #[serde(skip)]
    higher_is_better: bool,
    #[serde(flatten)]
    judgement: Judgement,
}

/// The comparison, as `--format json` prints it (schema `taskmeter.compare`, version 3: the
/// invocations and repetitions of each side, the adjusted p, the reason, what was left out;
/// since version 3 `old`, `new` and `change` are on the scale of the line's test).
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
    left_out: LeftOut,
    counts: BTreeMap<&'static str, usize>,
}

pub fn run(options: CompareOptions) -> Result<ExitCode, CliError> {
    let mut left_out = LeftOut::default();
    let include = options.include_incomplete;
    let old = whole_runs(load_side(&options.old)?, include, &mut left_out)?;
    let new = whole_runs(load_side(&options.new)?, include, &mut left_out)?;
    let kinds: Vec<&str> = old.records.iter().chain(&new.records).map(|(_, r)| kind_of(&**r)).collect();
    if kinds.iter().any(|k| *k != kinds[0]) {
        return Err(CliError::Usage(format!(
            "cannot compare a {} result with a {} result (compare takes results of one experiment)",
            kinds[0],
            kinds.iter().find(|k| **k != kinds[0]).unwrap_or(&"?")
        )));
    }
    // Within a side every run must have measured the same thing, as across the sides.
    for side in [&old, &new] {
        let first = json_of(&*side.records[0].1);
        for (path, record) in &side.records[1..] {
            let workload: Vec<String> = differences::between(&first, &json_of(&**record))
                .into_iter()
                .filter(|d| d.kind == Kind::Workload)
                .map(said)
                .collect();
            if !workload.is_empty() && !options.force {
                return Err(CliError::Usage(format!(
                    "the runs of {} measured different things ({} in {}): compare them anyway with --force",
                    side.path.display(),
                    workload.join("; "),
                    path.display()
                )));
            }
        }
    }
    let found = differences::between(&json_of(&*old.records[0].1), &json_of(&*new.records[0].1));
    let workload: Vec<String> = found.iter().filter(|d| d.kind == Kind::Workload).cloned().map(said).collect();
    if !workload.is_empty() && !options.force {
        return Err(CliError::Usage(format!(
            "the two runs measured different things ({}): compare them anyway with --force",
            workload.join("; ")
        )));
    }
    let (mut lines, not_compared) = lines(&old, &new, &options, &mut left_out);
    if lines.is_empty() {
        let why = if not_compared.is_empty() { String::new() } else { format!(" ({})", not_compared.join("; ")) };
        return Err(CliError::Usage(format!("the two {} results have nothing measured in common{why}", kinds[0])));
    }
    decide(lines.iter_mut().map(|l| (&mut l.judgement, l.higher_is_better)), options.rule);
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
        schema_version: 3,
        kind: kinds[0],
        old: old.records.iter().map(|(p, _)| p.display().to_string()).collect(),
        new: new.records.iter().map(|(p, _)| p.display().to_string()).collect(),
        method: METHOD,
        threshold: options.rule.threshold,
        alpha: options.rule.alpha,
        differences: found,
        lines,
        not_compared,
        left_out,
        counts,
    };
    write_exports(&options.exports, &dashboard_of(&comparison, &new))?;
    if options.json {
        taskmeter_console::outln!("{}", serde_json::to_string_pretty(&comparison).expect("a comparison serialises"));
    } else {
        taskmeter_console::text!("{}", console(&comparison, &old, &new));
    }
    Ok(if regressed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The comparison's lines as a dashboard's figures, in the environment of the new side's first
/// run (what was judged).
fn dashboard_of(c: &Comparison, new: &Side) -> Dashboard {
    let header = new.records[0].1.header();
    let experiment = new.records[0].1.experiment();
    Dashboard {
        source: format!("compare {experiment}"),
        experiment: Some(experiment),
        compared: true,
        benchmarks: c
            .lines
            .iter()
            .filter_map(|l| dashboard::judged(l.subject.clone(), l.unit, l.higher_is_better, &l.judgement))
            .collect(),
        distributions: Vec::new(),
        environment: dashboard::environment(&header.environment, &header.taskmeter_version, header.label.as_deref()),
    }
}

/// Refuses an export file whose folder does not exist (before anything is read).
pub(super) fn check_exports(exports: &[Export]) -> Result<(), CliError> {
    for export in exports {
        crate::session::folder::check_export_path(&export.path).map_err(|e| CliError::Usage(e.to_string()))?;
    }
    Ok(())
}

/// Writes a comparison's dashboard in each format asked for.
pub(super) fn write_exports(exports: &[Export], dashboard: &Dashboard) -> Result<(), CliError> {
    for export in exports {
        let text = render_dashboard(export.format, dashboard).unwrap_or_default();
        std::fs::write(&export.path, text)
            .map_err(|e| CliError::Output(format!("cannot write {}: {e}", export.path.display())))?;
    }
    Ok(())
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

/// The columns of compare's table in the order they are left out when the terminal is too narrow.
const LEFT_OUT_FIRST: [&str; 7] = ["p", "runs", "point", "p adj.", "metric", "old", "new"];

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
    let rule = Rule { threshold: c.threshold, alpha: c.alpha };
    let _ = writeln!(out, "{}", method_line(c.lines.iter().map(|l| &l.judgement), rule));
    out.push('\n');
    let subject_names: Vec<&str> =
        c.lines.first().map(|l| l.subject.iter().map(|(k, _)| *k).collect()).unwrap_or_default();
    let mut table: Vec<Vec<String>> = vec![subject_names
        .iter()
        .map(|s| s.to_string())
        .chain(["old", "new", "change", "runs", "p", "p adj.", "verdict"].map(str::to_string))
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
            j.runs(),
            p_text(j.p_value, j.level.is_some()),
            p_text(j.p_adjusted, j.level == Some(Level::Invocations)),
            j.verdict.as_str().into(),
        ]);
        table.push(row);
    }
    // Fitted to the terminal: the columns that say least go first, the change and verdict last.
    let fit = taskmeter_console::terminal::Fit { drop: LEFT_OUT_FIRST.to_vec(), ..Default::default() };
    let right: Vec<bool> = (0..table[0].len()).map(|c| c > 0).collect();
    out.push_str(&crate::report::console::render_fitted(&table, &right, &fit));
    for line in &c.not_compared {
        let _ = writeln!(out, "not compared: {line}");
    }
    if !c.left_out.is_empty() {
        let _ = writeln!(out, "{}", c.left_out.said());
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
    // Why lines had no verdict, each reason once.
    let mut reasons: Vec<&str> = c.lines.iter().filter_map(|l| l.judgement.reason.as_deref()).collect();
    reasons.sort();
    reasons.dedup();
    for reason in reasons {
        let _ = writeln!(out, "inconclusive: {reason}");
    }
    if c.lines.iter().any(|l| l.judgement.level.is_none()) {
        let _ = writeln!(out, "a verdict needs a measure of the noise: 2 or more results folders a side (each one invocation of taskmeter; 8, in turn with the other side's, recommended: docs/statistics.md)");
    }
    out
}

/// A p-value as the table shows it: "undefined" where a test ran and could not give one.
pub(super) fn p_text(p: Option<f64>, tested: bool) -> String {
    match (p, tested) {
        (Some(p), _) if p < 0.001 => format!("{p:.1e}"),
        (Some(p), _) => format!("{p:.3}"),
        (None, true) => "undefined".into(),
        (None, false) => "-".into(),
    }
}

fn started(side: &Side) -> String {
    let header = |r: &dyn Loaded| r.header().started_at.clone();
    let prefix = if side.records.len() > 1 { ", from " } else { "" };
    format!("{prefix}{}", header(&*side.records[0].1))
}

/// What both sides measured, by the old side's first record (its kind reads both: they are of
/// one kind), one line per subject both measured.
fn lines(old: &Side, new: &Side, options: &CompareOptions, left_out: &mut LeftOut) -> (Vec<Line>, Vec<String>) {
    let ask = Asked { metric: options.metric, include_incomplete: options.include_incomplete };
    let first = &*old.records[0].1;
    let mut measured = |side: &Side| {
        let records: Vec<&dyn std::any::Any> = side.records.iter().map(|(_, r)| &**r as &dyn std::any::Any).collect();
        first.measured(&records, &ask, left_out)
    };
    let (a, b) = (measured(old), measured(new));
    let (unit, higher_is_better) = first.unit();
    pair_up(a, b, unit, higher_is_better, (old, new))
}

/// One line per subject both sides measured; the rest said in `not compared`.
fn pair_up(
    a: Measured,
    b: Measured,
    unit: &'static str,
    higher_is_better: bool,
    (old, new): (&Side, &Side),
) -> (Vec<Line>, Vec<String>) {
    let label = |s: &Subject| s.iter().map(|(_, v)| v.as_str()).collect::<Vec<_>>().join(" ");
    let measured = |x: &[Vec<f64>]| x.iter().any(|i| !i.is_empty());
    let mut lines = Vec::new();
    let mut not_compared = Vec::new();
    for (subject, x) in &a {
        let Some((_, y)) = b.iter().find(|(s, _)| s == subject) else {
            not_compared.push(format!("{}: only in {}", label(subject), old.path.display()));
            continue;
        };
        match (x, y) {
            (Err(why), _) | (_, Err(why)) => not_compared.push(format!("{}: {why}", label(subject))),
            (Ok(x), Ok(y)) if measured(x) && measured(y) => {
                lines.push(Line { subject: subject.clone(), unit, higher_is_better, judgement: judge(x, y) })
            }
            // Measured on one side only; on neither, it is not a figure of these runs.
            (Ok(x), Ok(y)) if measured(x) != measured(y) => {
                let empty = if measured(x) { new } else { old };
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
