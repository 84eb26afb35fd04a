//! `taskmeter history ...`: the recorded runs (`history` holds the store): list, show, import,
//! trend, compare (the same judgement as `taskmeter compare`, `analysis::compare`) and check
//! (change points at the newest runs; exit status 1 on a regression).

use super::args::{ByArg, FilterArgs, GroupBy, HistoryAction, RuleArgs, Selection, TextFormat, What, HISTORY_STATS};
use super::CliError;
use crate::analysis::compare::{judge, Judgement, Rule, Verdict, METHOD};
use crate::analysis::differences::{self, Difference, Kind};
use crate::history::changepoint::Settings;
use crate::history::check::{self, Finding};
use crate::history::entry::{higher_is_better, score_stat};
use crate::history::query::{self, Filter, Observation};
use crate::history::series;
use crate::history::trend::{self, By};
use crate::history::{import, Store, Target};
use crate::report::console::render_table;
use crate::report::format::format_ns;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;

impl FilterArgs {
    fn filter(&self) -> Filter {
        Filter {
            experiment: self.experiment.clone(),
            runtime: self.runtime.clone(),
            machine: self.machine.clone(),
            label: self.label.clone(),
            since: self.since.clone(),
            until: self.until.clone(),
            ids: Vec::new(),
        }
    }
}

impl What {
    fn stat(&self) -> String {
        self.stat.clone().unwrap_or_else(|| score_stat(&self.metric).to_string())
    }
}

pub(super) fn run(history: Option<&str>, action: HistoryAction) -> Result<ExitCode, CliError> {
    let target = match Target::choose(history, false)? {
        Target::Off => return Err("the history is off (TASKMETER_HISTORY=off): give --history".to_string().into()),
        Target::Unplaced(why) => return Err(format!("no history: {why}").into()),
        target => target,
    };
    let mut store = crate::history::open(&target).map_err(|e| match e.contains(&target.describe()) {
        true => e,
        false => format!("history {}: {e}", target.describe()),
    })?;
    match action {
        HistoryAction::List { filter, limit, format } => {
            let runs = query::runs(&mut store, &filter.filter(), limit)?;
            if format == TextFormat::Json {
                crate::outln!("{}", serde_json::to_string_pretty(&runs).expect("serialises"));
            } else if runs.is_empty() {
                crate::outln!("no runs in the history {} match", target.describe());
            } else {
                let mut table = vec![["id", "started", "experiment", "machine", "label", "runtimes", "complete"]
                    .map(str::to_string)
                    .to_vec()];
                for r in &runs {
                    table.push(vec![
                        r.id.to_string(),
                        r.started_at.clone(),
                        r.experiment.clone(),
                        r.machine.clone(),
                        r.label.clone().unwrap_or_default(),
                        r.runtimes.join(","),
                        if r.complete { "yes" } else { "no" }.to_string(),
                    ]);
                }
                crate::out!("{}", render_table(&table));
            }
        }
        HistoryAction::Show { id, format } => show(&mut store, id, format)?,
        HistoryAction::Import { folders } => {
            let done = import::import(&mut store, &folders)?;
            for failed in &done.failed {
                crate::errln!("taskmeter: not imported: {failed}");
            }
            crate::outln!(
                "imported {} run(s) into {} ({} already there{})",
                done.added,
                target.describe(),
                done.already,
                if done.failed.is_empty() { String::new() } else { format!(", {} unreadable", done.failed.len()) }
            );
            if !done.failed.is_empty() {
                return Ok(ExitCode::FAILURE);
            }
        }
        HistoryAction::Trend { of: Selection { filter, what }, by, output, format } => {
            let found = observations(&mut store, &filter.filter(), &what)?;
            let grouped = series::group(&found);
            let of = filter.runtime.as_ref().map_or(String::new(), |r| format!("{r}: "));
            let title = format!("{of}{} {} over runs", what.metric, what.stat());
            let by = if by == ByArg::Machine { By::Machine } else { By::Runtime };
            let trend = trend::build(&grouped, by, title, unit_desc(&what.metric), is_time(&what.metric));
            let svg = trend.svg()?;
            std::fs::create_dir_all(&output).map_err(|e| format!("cannot create {}: {e}", output.display()))?;
            for (file, text) in [("trend.svg", svg.clone()), ("trend.html", trend.html(&svg))] {
                let path = output.join(file);
                std::fs::write(&path, text).map_err(|e| format!("cannot write {}: {e}", path.display()))?;
            }
            if format == TextFormat::Json {
                let out = serde_json::json!({"metric": what.metric, "stat": what.stat(), "lines": trend.json_lines()});
                crate::outln!("{out}");
            } else {
                crate::outln!(
                    "trend of {} {}: {} run(s), {} line(s): {} ({})",
                    what.metric,
                    what.stat(),
                    trend.runs.len(),
                    trend.lines.len(),
                    output.join("trend.html").display(),
                    output.join("trend.svg").display()
                );
            }
        }
        HistoryAction::Compare { old, new, by, of: Selection { filter, what }, rule, force, format } => {
            let rule = Rule { threshold: rule.threshold, alpha: rule.alpha };
            return compare(&mut store, (old, new, by), &filter.filter(), &what, rule, (force, format));
        }
        HistoryAction::Check { of: Selection { filter, what }, rule, permutations, min_runs, recent, format } => {
            let RuleArgs { threshold, alpha } = rule;
            let found = observations(&mut store, &filter.filter(), &what)?;
            let settings = Settings {
                alpha,
                permutations: permutations as usize,
                min_size: min_runs as usize,
                ..Settings::default()
            };
            let findings: Vec<Finding> = series::group(&found)
                .iter()
                .map(|(key, runs)| {
                    check::check(key, runs, (higher_is_better(&what.metric), threshold, recent as usize), settings)
                })
                .collect();
            let regressions = findings.iter().filter(|f| f.verdict == check::Verdict::Regression).count();
            if format == TextFormat::Json {
                let out = serde_json::json!({
                    "schema": "taskmeter.history.check", "schema_version": 1,
                    "metric": what.metric, "stat": what.stat(), "threshold": threshold, "alpha": alpha,
                    "method": "E-Divisive means (Matteson and James 2014, as Apache Otava), permutation test",
                    "findings": findings, "regressions": regressions,
                });
                crate::outln!("{}", serde_json::to_string_pretty(&out).expect("serialises"));
            } else {
                crate::out!("{}", check_console(&findings, &what, threshold, alpha));
            }
            if regressions > 0 {
                return Ok(ExitCode::FAILURE);
            }
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// The observations of the metric and stat, or why there are none.
fn observations(store: &mut Store, filter: &Filter, what: &What) -> Result<Vec<Observation>, String> {
    let found = query::observations(store, filter, &what.metric, &what.stat())?;
    if found.is_empty() {
        return Err(format!(
            "no recorded run matches with {} {} (see `taskmeter history list`)",
            what.metric,
            what.stat()
        ));
    }
    Ok(found)
}

fn is_time(metric: &str) -> bool {
    !matches!(metric, "throughput" | "ratio" | "ips")
}

fn unit_desc(metric: &str) -> String {
    match metric {
        "throughput" => "throughput (msg/s)".into(),
        "ips" => "units/s".into(),
        "ratio" => "ratio".into(),
        m => format!("{m} (ns)"),
    }
}

fn value(metric: &str, v: f64) -> String {
    if is_time(metric) {
        format_ns(v)
    } else {
        trend::short(v)
    }
}

fn show(store: &mut Store, id: i64, format: TextFormat) -> Result<(), String> {
    let run = query::run(store, id)?;
    if format == TextFormat::Json {
        crate::outln!("{}", serde_json::to_string_pretty(&run).expect("serialises"));
        return Ok(());
    }
    let i = &run.info;
    crate::outln!("run {}: {} on {}, {} to {}", i.id, i.experiment, i.machine, i.started_at, i.finished_at);
    if let Some(label) = &i.label {
        crate::outln!("label: {label}");
    }
    crate::outln!("complete: {}", if i.complete { "yes" } else { "no" });
    crate::outln!("cpu: {}; kernel: {}; taskmeter {}", i.cpu_model, i.kernel, i.taskmeter_version);
    if let Some(folder) = &i.folder {
        crate::outln!("folder: {folder}");
    }
    let words: Vec<&str> = run.command_line.as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
    crate::outln!("command: {}", words.join(" "));
    crate::outln!("settings: {}", run.settings);
    // One line per (runtime, point, repetition, metric), its stats in columns.
    let columns: Vec<&str> =
        HISTORY_STATS.iter().copied().filter(|s| run.measurements.iter().any(|m| m.stat == *s)).collect();
    type Line = (String, String, i64, String);
    let mut rows: BTreeMap<Line, (String, BTreeMap<String, f64>)> = BTreeMap::new();
    for m in &run.measurements {
        let key = (m.subject.clone(), m.point.clone(), m.repetition, m.metric.clone());
        let entry = rows.entry(key).or_insert_with(|| (m.status.clone(), BTreeMap::new()));
        if let Some(v) = m.value {
            entry.1.insert(m.stat.clone(), v);
        }
    }
    let mut table: Vec<Vec<String>> =
        vec![["runtime", "point", "rep", "status", "metric"].iter().chain(&columns).map(|s| s.to_string()).collect()];
    for ((subject, point, repetition, metric), (status, stats)) in &rows {
        let mut line = vec![subject.clone(), point.clone(), repetition.to_string(), status.clone(), metric.clone()];
        line.extend(columns.iter().map(|c| match stats.get(*c) {
            Some(v) if *c == "count" => format!("{v:.0}"),
            Some(v) => value(metric, *v),
            None => "-".into(),
        }));
        table.push(line);
    }
    crate::outln!();
    crate::out!("{}", render_table(&table));
    Ok(())
}

/// Each (experiment, runtime, point)'s values, one per repetition of each run.
type Sides = BTreeMap<(String, String, String), Vec<f64>>;

/// One line of `history compare`.
#[derive(Serialize)]
struct CompareLine {
    /// The two sides' names (the means are `old` and `new`).
    baseline: String,
    judged: String,
    experiment: String,
    runtime: String,
    point: String,
    #[serde(flatten)]
    judgement: Judgement,
}

fn compare(
    store: &mut Store,
    (old, new, by): (Option<String>, Option<String>, GroupBy),
    filter: &Filter,
    what: &What,
    rule: Rule,
    (force, format): (bool, TextFormat),
) -> Result<ExitCode, CliError> {
    // The sides, each a name and its filter.
    let side = |name: &str| -> Result<(String, Filter), String> {
        let mut f = filter.clone();
        match by {
            GroupBy::Run => {
                let id = name.parse::<i64>().map_err(|_| format!("'{name}' is not a run id (a number)"))?;
                f.ids = vec![id];
                Ok((format!("run {id}"), f))
            }
            GroupBy::Label => {
                f.label = Some(name.to_string());
                Ok((format!("label {name}"), f))
            }
            GroupBy::Machine => {
                f.machine = Some(name.to_string());
                Ok((name.to_string(), f))
            }
        }
    };
    let pairs: Vec<((String, Filter), (String, Filter))> = match (by, old, new) {
        (_, Some(old), Some(new)) => vec![(side(&old)?, side(&new)?)],
        (GroupBy::Machine, old, None) => {
            let mut machines: Vec<String> = query::runs(store, filter, None)?.into_iter().map(|r| r.machine).collect();
            machines.sort();
            machines.dedup();
            let base =
                old.or_else(|| machines.first().cloned()).ok_or_else(|| "no recorded run matches".to_string())?;
            let others: Vec<&String> = machines.iter().filter(|m| **m != base).collect();
            if others.is_empty() {
                return Err(format!("only one machine ({base}) in the matching runs: nothing to compare").into());
            }
            others.into_iter().map(|m| Ok((side(&base)?, side(m)?))).collect::<Result<_, String>>()?
        }
        _ => {
            return Err("history compare needs OLD and NEW (run ids, labels or machines: see --by)".to_string().into())
        }
    };
    for ((_, a), (_, b)) in &pairs {
        for id in a.ids.iter().chain(&b.ids) {
            query::run(store, *id)?;
        }
    }
    let stat = what.stat();
    let mut lines = Vec::new();
    let mut differences = Vec::new();
    for ((old_name, old_filter), (new_name, new_filter)) in &pairs {
        let values = |store: &mut Store, f: &Filter, name: &str| -> Result<(Sides, Vec<i64>), String> {
            let found = query::observations(store, f, &what.metric, &stat)?;
            if found.is_empty() {
                let unknown = if by == GroupBy::Run { " (see `taskmeter history list`)" } else { "" };
                return Err(format!("{name}: no recorded run with {} {stat}{unknown}", what.metric));
            }
            let mut runs: Vec<i64> = found.iter().map(|o| o.run).collect();
            runs.dedup();
            let mut out: BTreeMap<_, Vec<f64>> = BTreeMap::new();
            for o in found {
                out.entry((o.experiment, o.subject, o.point)).or_default().push(o.value);
            }
            Ok((out, runs))
        };
        let ((a, old_runs), (b, new_runs)) =
            (values(store, old_filter, old_name)?, values(store, new_filter, new_name)?);
        differences.extend(check_workloads(store, (old_name, &old_runs), (new_name, &new_runs), force)?);
        for (key, x) in &a {
            if let Some(y) = b.get(key) {
                lines.push(CompareLine {
                    baseline: old_name.clone(),
                    judged: new_name.clone(),
                    experiment: key.0.clone(),
                    runtime: key.1.clone(),
                    point: key.2.clone(),
                    judgement: judge(x, y, higher_is_better(&what.metric), rule),
                });
            }
        }
    }
    if lines.is_empty() {
        return Err("the two sides have nothing measured in common".to_string().into());
    }
    let regressed = lines.iter().filter(|l| l.judgement.verdict == Verdict::Regressed).count();
    if format == TextFormat::Json {
        let out = serde_json::json!({
            "schema": "taskmeter.history.compare", "schema_version": 1, "metric": what.metric, "stat": stat,
            "method": METHOD, "threshold": rule.threshold, "alpha": rule.alpha, "differences": differences,
            "lines": lines,
        });
        crate::outln!("{}", serde_json::to_string_pretty(&out).expect("serialises"));
    } else {
        for (pair, d) in &differences {
            crate::outln!("differs ({}, {pair}): {} {} -> {}", d.kind.as_str(), d.what, d.old, d.new);
        }
        crate::outln!("method: {METHOD}; alpha {}, noise threshold {:.1} %", rule.alpha, rule.threshold * 100.0);
        crate::outln!("{} {} of each repetition of each run", what.metric, stat);
        let mut table =
            vec![["old", "new", "experiment", "runtime", "point", "old", "new", "change", "runs", "p", "verdict"]
                .map(str::to_string)
                .to_vec()];
        for l in &lines {
            let j = &l.judgement;
            table.push(vec![
                l.baseline.clone(),
                l.judged.clone(),
                l.experiment.clone(),
                l.runtime.clone(),
                l.point.clone(),
                value(&what.metric, j.old),
                value(&what.metric, j.new),
                j.change.map_or("n/a".into(), |c| format!("{:+.1} %", c * 100.0)),
                format!("{} vs {}", j.old_runs, j.new_runs),
                j.p_value.map_or("-".into(), |p| format!("{p:.3}")),
                j.verdict.as_str().into(),
            ]);
        }
        crate::out!("{}", render_table(&table));
        crate::outln!("{regressed} regressed of {} compared", lines.len());
    }
    Ok(if regressed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// A recorded run as `analysis::differences` reads a record: its schema, experiment, settings
/// and environment.
fn as_record(run: &query::RunDetail) -> serde_json::Value {
    let experiment = run.info.experiment.as_str();
    let kind = if matches!(experiment, "net" | "granularity" | "bench") { experiment } else { "run" };
    let mut record = serde_json::json!({
        "schema": format!("taskmeter.{kind}"),
        "experiment": experiment,
        "environment": run.environment,
        "taskmeter_version": run.info.taskmeter_version,
    });
    for (key, value) in run.settings.as_object().into_iter().flatten() {
        match key.as_str() {
            "config" => record["report"] = serde_json::json!({ "config": value }),
            "order" => {}
            _ => record[key] = value.clone(),
        }
    }
    record
}

/// As `taskmeter compare`: the runs of a side, and the two sides, must have measured the same
/// workload (unless `force`); the other differences between the sides' first runs, each with
/// the pair it is of.
fn check_workloads(
    store: &mut Store,
    (old, old_runs): (&str, &[i64]),
    (new, new_runs): (&str, &[i64]),
    force: bool,
) -> Result<Vec<(String, Difference)>, String> {
    let mut first = Vec::new();
    for (name, runs) in [(old, old_runs), (new, new_runs)] {
        let records =
            runs.iter().map(|id| query::run(store, *id).map(|r| as_record(&r))).collect::<Result<Vec<_>, _>>()?;
        for (id, record) in runs.iter().zip(&records).skip(1) {
            let workload: Vec<String> = differences::between(&records[0], record)
                .into_iter()
                .filter(|d| d.kind == Kind::Workload)
                .map(|d| format!("{} {} -> {}", d.what, d.old, d.new))
                .collect();
            if !workload.is_empty() && !force {
                return Err(format!(
                    "the runs of {name} measured different things ({} in run {id}): compare them anyway with --force",
                    workload.join("; ")
                ));
            }
        }
        first.push(records.into_iter().next().unwrap_or_default());
    }
    let found = differences::between(&first[0], &first[1]);
    let workload: Vec<String> = found
        .iter()
        .filter(|d| d.kind == Kind::Workload)
        .map(|d| format!("{} {} -> {}", d.what, d.old, d.new))
        .collect();
    if !workload.is_empty() && !force {
        return Err(format!(
            "{old} and {new} measured different things ({}): compare them anyway with --force",
            workload.join("; ")
        ));
    }
    Ok(found.into_iter().map(|d| (format!("{old} -> {new}"), d)).collect())
}

fn check_console(findings: &[Finding], what: &What, threshold: f64, alpha: f64) -> String {
    let mut table =
        vec![["series", "runs", "verdict", "since run", "before", "after", "change", "p"].map(str::to_string).to_vec()];
    for f in findings {
        let mut line = vec![f.series.label(), f.runs.to_string(), f.verdict.as_str().to_string()];
        match &f.change {
            Some(c) => line.extend([
                format!("{}{}", c.run, c.label.as_ref().map_or(String::new(), |l| format!(" ({l})"))),
                value(&what.metric, c.before),
                value(&what.metric, c.after),
                c.change.map_or("n/a".into(), |v| format!("{:+.1} %", v * 100.0)),
                format!("{:.3}", c.p_value),
            ]),
            None => line.extend(["-", "-", "-", "-", "-"].map(str::to_string)),
        }
        table.push(line);
    }
    let regressions = findings.iter().filter(|f| f.verdict == check::Verdict::Regression).count();
    format!(
        "{} {} per run (the mean of its repetitions); E-Divisive means, permutation test at alpha {alpha}, noise threshold {:.1} %\n{}{regressions} regression(s) in {} series\n",
        what.metric,
        what.stat(),
        threshold * 100.0,
        render_table(&table),
        findings.len()
    )
}
