//! `taskmeter history ...`: the recorded runs (`history` holds the store): list, show, import,
//! trend, compare (the same judgement as `taskmeter compare`, `analysis::compare`) and check
//! (change points at the newest runs; exit status 1 on a regression).

use super::args::{ByArg, FilterArgs, GroupBy, HistoryAction, RuleArgs, Selection, TextFormat, What, HISTORY_STATS};
use super::CliError;
use crate::history::check::{self, Finding};
use crate::history::query::{self, Filter, LeftOut, Observation, RunDetail};
use crate::history::series;
use crate::history::trend::{self, By};
use crate::history::{import, Store, Target};
use crate::report::console::{render_fitted, render_table_fitted};
use crate::report::export::Export;
use crate::report::format::format_ns;
use serde::Serialize;
use std::collections::BTreeMap;
use std::process::ExitCode;
use taskmeter_analysis::changepoint::Settings;
use taskmeter_analysis::compare::{decide, judge, method_line, Judgement, Level, Rule, Verdict, METHOD};
use taskmeter_analysis::differences::{self, Difference, Kind};
use taskmeter_console::terminal::{Fit, Shrink};

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
    /// The metric asked for, as its family keeps it (the parser took only a known name).
    fn known(&self) -> crate::history::entry::Metric {
        super::families::metric(&self.metric).expect("--metric takes a metric some family keeps")
    }

    fn stat(&self) -> String {
        self.stat.clone().unwrap_or_else(|| self.known().score.to_string())
    }
}

/// `history list`'s columns: the id right-aligned, the rest left-aligned.
const LIST_RIGHT: [bool; 7] = [true, false, false, false, false, false, false];

/// How `history list` fits the terminal: the runtimes abbreviated ("thread,+14"), the label cut
/// with "…", then the runtimes left out, then the machine and the rest from the right.
fn list_fit() -> Fit<'static> {
    Fit {
        shrink: vec![("runtimes", Shrink::List, 14), ("label", Shrink::Ellipsis, 12)],
        drop: vec!["runtimes", "machine", "complete", "experiment"],
    }
}

/// Whose each error is: where the history is (`--history`, TASKMETER_HISTORY), a run id, a
/// selection that matches nothing, a path to import that is not a results folder are the
/// user's ([`CliError::Usage`]); a store that cannot be opened or queried (a server that does
/// not answer, a file that cannot be opened) and a chart that cannot be drawn are not
/// ([`CliError::Failed`]); a trend that cannot be written where asked is [`CliError::Output`].
pub(super) fn run(history: Option<&str>, action: HistoryAction) -> Result<ExitCode, CliError> {
    let target = match Target::choose(history, false).map_err(CliError::Usage)? {
        Target::Off => {
            return Err(CliError::Usage("the history is off (TASKMETER_HISTORY=off): give --history".into()))
        }
        Target::Unplaced(why) => return Err(CliError::Usage(format!("no history: {why}"))),
        target => target,
    };
    let mut store = crate::history::open(&target).map_err(|e| {
        CliError::Failed(match e.contains(&target.describe()) {
            true => e,
            false => format!("history {}: {e}", target.describe()),
        })
    })?;
    match action {
        HistoryAction::List { filter, limit, format } => list(&mut store, &target, &filter.filter(), limit, format)?,
        HistoryAction::Show { id, format } => show(&mut store, id, format)?,
        HistoryAction::Import { folders } => {
            let reader = import::Reader { files: &super::families::files(), load: &super::families::load_recorded };
            let done = import::import(&mut store, &folders, &reader).map_err(|e| match e {
                import::ImportError::NotResults(why) => CliError::Usage(why),
                import::ImportError::Store(why) => CliError::Failed(why),
            })?;
            for failed in &done.failed {
                taskmeter_console::errln!("taskmeter: not imported: {failed}");
            }
            taskmeter_console::textln!(
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
        HistoryAction::Trend { of: Selection { filter, what, include_incomplete }, by, output, format } => {
            trend(&mut store, (&filter.filter(), &what, include_incomplete), by, &output, format)?
        }
        HistoryAction::Compare {
            old,
            new,
            by,
            of: Selection { filter, what, include_incomplete },
            rule,
            force,
            format,
            dashboards,
        } => {
            let rule = Rule { threshold: rule.threshold, alpha: rule.alpha };
            let exports = dashboards.exports();
            super::compare::check_exports(&exports)?;
            return compare(
                &mut store,
                (old, new, by),
                (&filter.filter(), &what, include_incomplete),
                rule,
                (force, format, &exports),
            );
        }
        HistoryAction::Check {
            of: Selection { filter, what, include_incomplete },
            rule,
            permutations,
            min_runs,
            recent,
            format,
        } => {
            let runs =
                Settings { permutations: permutations as usize, min_size: min_runs as usize, ..Settings::default() };
            return check(
                &mut store,
                (&filter.filter(), &what, include_incomplete),
                rule,
                runs,
                recent as usize,
                format,
            );
        }
    }
    Ok(ExitCode::SUCCESS)
}

/// `history list`: the matching runs, newest first, as a table fitted to the terminal or JSON.
fn list(
    store: &mut Store,
    target: &Target,
    filter: &Filter,
    limit: Option<usize>,
    format: TextFormat,
) -> Result<(), CliError> {
    let runs = query::runs(store, filter, limit).map_err(CliError::Failed)?;
    if format == TextFormat::Json {
        taskmeter_console::outln!("{}", serde_json::to_string_pretty(&runs).expect("serialises"));
    } else if runs.is_empty() {
        taskmeter_console::textln!("no runs in the history {} match", target.describe());
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
        taskmeter_console::out!("{}", render_fitted(&table, &LIST_RIGHT, &list_fit()));
    }
    Ok(())
}

/// `history trend`: a line per series across the runs, written as `trend.svg` and `trend.html`
/// in `output`, and said in a line (or JSON).
fn trend(
    store: &mut Store,
    (filter, what, include_incomplete): (&Filter, &What, bool),
    by: ByArg,
    output: &std::path::Path,
    format: TextFormat,
) -> Result<(), CliError> {
    let (grouped, left_out) = series_of(store, filter, what, include_incomplete)?;
    let of = filter.runtime.as_ref().map_or(String::new(), |r| format!("{r}: "));
    let title = format!("{of}{} {} over runs", what.metric, what.stat());
    let by = if by == ByArg::Machine { By::Machine } else { By::Runtime };
    let trend = trend::build(&grouped, by, title, unit_desc(&what.metric), what.known().unit.is_none());
    let svg = trend.svg().map_err(CliError::Failed)?;
    std::fs::create_dir_all(output)
        .map_err(|e| CliError::Output(format!("cannot create {}: {e}", output.display())))?;
    for (file, text) in [("trend.svg", svg.clone()), ("trend.html", trend.html(&svg))] {
        let path = output.join(file);
        std::fs::write(&path, text).map_err(|e| CliError::Output(format!("cannot write {}: {e}", path.display())))?;
    }
    if format == TextFormat::Json {
        let out = serde_json::json!({
            "metric": what.metric, "stat": what.stat(), "bars": trend.bars, "lines": trend.json_lines(),
            "left_out": left_out,
        });
        taskmeter_console::outln!("{out}");
    } else {
        if !left_out.is_empty() {
            taskmeter_console::textln!("{}", left_out.said());
        }
        taskmeter_console::textln!(
            "trend of {} {}: {} run(s), {} line(s): {} ({})",
            what.metric,
            what.stat(),
            trend.runs.len(),
            trend.lines.len(),
            output.join("trend.html").display(),
            output.join("trend.svg").display()
        );
    }
    Ok(())
}

/// `history check`: change points at the newest runs of each series (E-Divisive, Holm over the
/// series), and what each could have seen; exit status 1 on a regression.
fn check(
    store: &mut Store,
    (filter, what, include_incomplete): (&Filter, &What, bool),
    rule: RuleArgs,
    runs: Settings,
    recent: usize,
    format: TextFormat,
) -> Result<ExitCode, CliError> {
    let RuleArgs { threshold, alpha } = rule;
    let (grouped, left_out) = series_of(store, filter, what, include_incomplete)?;
    let settings = Settings { alpha, ..runs };
    let permutations = settings.permutations;
    let rule = check::Rule { higher_is_better: what.known().higher_is_better, threshold, recent };
    let series: Vec<(&series::Key, &[series::RunValues])> = grouped.iter().map(|(k, r)| (k, r.as_slice())).collect();
    let mut findings = check::check_all(series.iter().copied(), rule, settings);
    let values: Vec<&[series::RunValues]> = series.iter().map(|(_, r)| *r).collect();
    check::detectable_steps(&mut findings, &values, rule, settings);
    let count = |verdict: check::Verdict| findings.iter().filter(|f| f.verdict == verdict).count();
    let (regressions, blind) = (count(check::Verdict::Regression), count(check::Verdict::CannotDetect));
    // The smallest p a permutation test can give, against Holm's smallest threshold.
    let tested = findings.iter().filter(|f| f.p_value.is_some()).count();
    let too_few_permutations = (tested as f64) / (permutations as f64 + 1.0) >= alpha;
    if format == TextFormat::Json {
        let out = serde_json::json!({
            "schema": "taskmeter.history.check", "schema_version": 3,
            "metric": what.metric, "stat": what.stat(), "threshold": threshold, "alpha": alpha,
            "method": CHECK_METHOD, "permutations": permutations, "min_runs": settings.min_size, "recent": recent,
            "findings": findings, "regressions": regressions, "cannot_detect": blind, "left_out": left_out,
        });
        taskmeter_console::outln!("{}", serde_json::to_string_pretty(&out).expect("serialises"));
    } else {
        taskmeter_console::text!("{}", check_console(&findings, what, rule, settings));
        if !left_out.is_empty() {
            taskmeter_console::textln!("{}", left_out.said());
        }
    }
    if too_few_permutations {
        taskmeter_console::errln!(
            "warning: {permutations} permutations cannot give a p below {:.4}, and Holm's adjustment over {tested} series needs one below {:.4}: no series can be flagged (give --permutations {} or more)",
            1.0 / (permutations as f64 + 1.0),
            alpha / tested as f64,
            ((20.0 * tested as f64 / alpha).ceil() as u64).max(999)
        );
    }
    Ok(if regressions > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// The series of the metric and stat in whole measurements (all with `include`), one per thing
/// measured and workload, and what was left out; or why there are none.
fn series_of(store: &mut Store, filter: &Filter, what: &What, include: bool) -> Result<(Grouped, LeftOut), CliError> {
    let (found, left_out) = observations(store, filter, what, include)?;
    let mut runs: Vec<i64> = found.iter().map(|o| o.run).collect();
    runs.sort_unstable();
    runs.dedup();
    let workloads = query::workloads(store, &runs).map_err(CliError::Failed)?;
    Ok((series::group(&found, &workloads), left_out))
}

type Grouped = BTreeMap<series::Key, Vec<series::RunValues>>;

/// The observations of the metric and stat in whole measurements (all with `include`), and
/// what was left out; or why there are none.
fn observations(
    store: &mut Store,
    filter: &Filter,
    what: &What,
    include: bool,
) -> Result<(Vec<Observation>, LeftOut), CliError> {
    let found = query::observations(store, filter, &what.metric, &what.stat()).map_err(CliError::Failed)?;
    if found.is_empty() {
        return Err(CliError::Usage(format!(
            "no recorded run matches with {} {} (see `taskmeter history list`)",
            what.metric,
            what.stat()
        )));
    }
    let (kept, left_out) = query::whole(found, include);
    if kept.is_empty() {
        return Err(CliError::Usage(format!(
            "no whole measurement matches with {} {}: {}",
            what.metric,
            what.stat(),
            left_out.said()
        )));
    }
    Ok((kept, left_out))
}

/// The y axis' title; a time's unit is the axis' own (`lateness (µs)`).
fn unit_desc(metric: &str) -> String {
    super::families::metric(metric).and_then(|m| m.unit).unwrap_or(metric).to_string()
}

fn value(metric: &str, v: f64) -> String {
    if super::families::metric(metric).is_none_or(|m| m.unit.is_none()) {
        format_ns(v)
    } else {
        trend::short(v)
    }
}

/// The run `id`: one the history does not hold is the user's (an id not from `history list`).
fn run_of(store: &mut Store, id: i64) -> Result<RunDetail, CliError> {
    match query::run(store, id) {
        Ok(Some(run)) => Ok(run),
        Ok(None) => Err(CliError::Usage(format!(
            "no run {id} in the history {} (see `taskmeter history list`)",
            store.target().describe()
        ))),
        Err(e) => Err(CliError::Failed(e)),
    }
}

fn show(store: &mut Store, id: i64, format: TextFormat) -> Result<(), CliError> {
    let run = run_of(store, id)?;
    if format == TextFormat::Json {
        taskmeter_console::outln!("{}", serde_json::to_string_pretty(&run).expect("serialises"));
        return Ok(());
    }
    let i = &run.info;
    taskmeter_console::textln!(
        "run {}: {} on {}, {} to {}",
        i.id,
        i.experiment,
        i.machine,
        i.started_at,
        i.finished_at
    );
    if let Some(label) = &i.label {
        taskmeter_console::textln!("label: {label}");
    }
    taskmeter_console::textln!("complete: {}", if i.complete { "yes" } else { "no" });
    taskmeter_console::textln!("cpu: {}; kernel: {}; taskmeter {}", i.cpu_model, i.kernel, i.taskmeter_version);
    if let Some(folder) = &i.folder {
        taskmeter_console::textln!("folder: {folder}");
    }
    let words: Vec<&str> = run.command_line.as_array().into_iter().flatten().filter_map(|v| v.as_str()).collect();
    taskmeter_console::textln!("command: {}", words.join(" "));
    // The settings as compact JSON with a space after each member, so that the line can wrap.
    taskmeter_console::textln!("settings: {}", run.settings.to_string().replace(",\"", ", \""));
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
    taskmeter_console::outln!();
    taskmeter_console::out!("{}", render_table_fitted(&table));
    Ok(())
}

/// Each (experiment, runtime, point)'s values: per run (an invocation), one per repetition.
type Sides = BTreeMap<(String, String, String), Vec<Vec<f64>>>;

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
    (filter, what, include): (&Filter, &What, bool),
    rule: Rule,
    (force, format, exports): (bool, TextFormat, &[Export]),
) -> Result<ExitCode, CliError> {
    let pairs = compared_pairs(store, filter, by, (old, new))?;
    for ((_, a), (_, b)) in &pairs {
        for id in a.ids.iter().chain(&b.ids) {
            run_of(store, *id)?;
        }
    }
    let stat = what.stat();
    let mut lines = Vec::new();
    let mut differences = Vec::new();
    let mut left_out = LeftOut::default();
    let mut newest = None;
    for ((old_name, old_filter), (new_name, new_filter)) in &pairs {
        let ((a, old_runs), (b, new_runs)) = (
            side_values(store, (old_filter, old_name), (what, by, include), &mut left_out)?,
            side_values(store, (new_filter, new_name), (what, by, include), &mut left_out)?,
        );
        differences.extend(check_workloads(store, (old_name, &old_runs), (new_name, &new_runs), force)?);
        newest = newest.max(new_runs.last().copied());
        for (key, x) in &a {
            if let Some(y) = b.get(key) {
                lines.push(CompareLine {
                    baseline: old_name.clone(),
                    judged: new_name.clone(),
                    experiment: key.0.clone(),
                    runtime: key.1.clone(),
                    point: key.2.clone(),
                    judgement: judge(x, y),
                });
            }
        }
    }
    if lines.is_empty() {
        return Err(CliError::Usage("the two sides have nothing measured in common".into()));
    }
    let higher = what.known().higher_is_better;
    decide(lines.iter_mut().map(|l| (&mut l.judgement, higher)), rule);
    left_out.incomplete_runs.sort();
    left_out.incomplete_runs.dedup();
    let regressed = lines.iter().filter(|l| l.judgement.verdict == Verdict::Regressed).count();
    if !exports.is_empty() {
        let environment = match newest {
            Some(id) => environment_of(&run_of(store, id)?),
            None => Vec::new(),
        };
        let dashboard = compare_dashboard(&lines, (what, pairs.len() > 1), environment);
        super::compare::write_exports(exports, &dashboard)?;
    }
    if format == TextFormat::Json {
        let out = serde_json::json!({
            "schema": "taskmeter.history.compare", "schema_version": 3, "metric": what.metric, "stat": stat,
            "method": METHOD, "threshold": rule.threshold, "alpha": rule.alpha, "differences": differences,
            "lines": lines, "left_out": left_out,
        });
        taskmeter_console::outln!("{}", serde_json::to_string_pretty(&out).expect("serialises"));
    } else {
        print_compare(&lines, &differences, &left_out, what, rule);
    }
    Ok(if regressed > 0 { ExitCode::FAILURE } else { ExitCode::SUCCESS })
}

/// A side of `history compare`: its name ("run 42", "label a", a machine) and its runs' filter.
type Side = (String, Filter);

/// `history compare`'s lines as a dashboard's figures: each (experiment, runtime, point)'s new /
/// old of the metric's stat, and, when several sides were judged (`--by machine`), the side
/// judged; in the environment of the newest run judged.
fn compare_dashboard(
    lines: &[CompareLine],
    (what, several): (&What, bool),
    environment: Vec<(&'static str, String)>,
) -> crate::report::dashboard::Dashboard {
    let known = what.known();
    let unit = known.unit.unwrap_or("ns");
    let benchmarks = lines
        .iter()
        .filter_map(|l| {
            let mut subject = vec![("experiment", l.experiment.clone()), ("runtime", l.runtime.clone())];
            subject.push(("point", l.point.clone()));
            if several {
                subject.push(("judged", l.judged.clone()));
            }
            subject.push(("metric", format!("{} {}", what.metric, what.stat())));
            crate::report::dashboard::judged(subject, unit, known.higher_is_better, &l.judgement)
        })
        .collect();
    crate::report::dashboard::Dashboard {
        source: "history compare".into(),
        experiment: None,
        compared: true,
        benchmarks,
        distributions: Vec::new(),
        environment,
    }
}

/// A recorded run's environment, as a dashboard says it.
fn environment_of(run: &RunDetail) -> Vec<(&'static str, String)> {
    let environment: taskmeter_machine::env::Environment =
        serde_json::from_value(run.environment.clone()).unwrap_or_default();
    crate::report::dashboard::environment(&environment, &run.info.taskmeter_version, run.info.label.as_deref())
}

/// The pairs `history compare` judges: OLD against NEW, or with `--by machine` and no NEW,
/// every other machine against OLD (or the first machine).
fn compared_pairs(
    store: &mut Store,
    filter: &Filter,
    by: GroupBy,
    (old, new): (Option<String>, Option<String>),
) -> Result<Vec<(Side, Side)>, CliError> {
    // The sides, each a name and its filter.
    let side = |name: &str| -> Result<Side, CliError> {
        let mut f = filter.clone();
        match by {
            GroupBy::Run => {
                let id =
                    name.parse::<i64>().map_err(|_| CliError::Usage(format!("'{name}' is not a run id (a number)")))?;
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
    Ok(match (by, old, new) {
        (_, Some(old), Some(new)) => vec![(side(&old)?, side(&new)?)],
        (GroupBy::Machine, old, None) => {
            let mut machines: Vec<String> =
                query::runs(store, filter, None).map_err(CliError::Failed)?.into_iter().map(|r| r.machine).collect();
            machines.sort();
            machines.dedup();
            let base = old
                .or_else(|| machines.first().cloned())
                .ok_or_else(|| CliError::Usage("no recorded run matches".into()))?;
            let others: Vec<&String> = machines.iter().filter(|m| **m != base).collect();
            if others.is_empty() {
                return Err(CliError::Usage(format!(
                    "only one machine ({base}) in the matching runs: nothing to compare"
                )));
            }
            others.into_iter().map(|m| Ok((side(&base)?, side(m)?))).collect::<Result<_, CliError>>()?
        }
        _ => {
            return Err(CliError::Usage(
                "history compare needs OLD and NEW (run ids, labels or machines: see --by)".into(),
            ))
        }
    })
}

/// A side's values, by (experiment, runtime, point), each a list of its invocations'
/// repetitions, and its runs in order; what is not whole is left out (and counted in `left_out`)
/// unless `include`.
fn side_values(
    store: &mut Store,
    (f, name): (&Filter, &str),
    (what, by, include): (&What, GroupBy, bool),
    left_out: &mut LeftOut,
) -> Result<(Sides, Vec<i64>), CliError> {
    let stat = what.stat();
    let found = query::observations(store, f, &what.metric, &stat).map_err(CliError::Failed)?;
    if found.is_empty() {
        let unknown = if by == GroupBy::Run { " (see `taskmeter history list`)" } else { "" };
        return Err(CliError::Usage(format!("{name}: no recorded run with {} {stat}{unknown}", what.metric)));
    }
    let (found, left) = query::whole(found, include);
    left_out.incomplete_runs.extend(left.incomplete_runs.iter().copied());
    for (status, n) in &left.repetitions {
        *left_out.repetitions.entry(status.clone()).or_default() += n;
    }
    if found.is_empty() {
        return Err(CliError::Usage(format!(
            "{name}: no whole measurement with {} {stat}: {}",
            what.metric,
            left.said()
        )));
    }
    let mut runs: Vec<i64> = found.iter().map(|o| o.run).collect();
    runs.dedup();
    let mut out: Sides = BTreeMap::new();
    for o in found {
        let invocations = out.entry((o.experiment, o.subject, o.point)).or_default();
        let at = runs.iter().position(|r| *r == o.run).unwrap_or(0);
        invocations.resize(runs.len(), Vec::new());
        invocations[at].push(o.value);
    }
    Ok((out, runs))
}

/// `history compare`'s console output: what differs between the sides' settings, the method,
/// a line per comparison, what was left out and why a line is inconclusive.
fn print_compare(
    lines: &[CompareLine],
    differences: &[(String, Difference)],
    left_out: &LeftOut,
    what: &What,
    rule: Rule,
) {
    let stat = what.stat();
    let regressed = lines.iter().filter(|l| l.judgement.verdict == Verdict::Regressed).count();
    for (pair, d) in differences {
        taskmeter_console::textln!("differs ({}, {pair}): {} {} -> {}", d.kind.as_str(), d.what, d.old, d.new);
    }
    taskmeter_console::textln!("{}", method_line(lines.iter().map(|l| &l.judgement), rule));
    taskmeter_console::textln!("{} {} of each repetition, averaged in each run", what.metric, stat);
    let mut table = vec![[
        "old",
        "new",
        "experiment",
        "runtime",
        "point",
        "old",
        "new",
        "change",
        "runs",
        "p",
        "p adj.",
        "verdict",
    ]
    .map(str::to_string)
    .to_vec()];
    for l in lines {
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
            j.runs(),
            super::compare::p_text(j.p_value, j.level.is_some()),
            super::compare::p_text(j.p_adjusted, j.level == Some(Level::Invocations)),
            j.verdict.as_str().into(),
        ]);
    }
    // The sides' names and the p before adjustment go first when the terminal is narrow.
    let fit = Fit { drop: vec!["p", "runs", "new", "experiment", "point", "p adj."], ..Fit::default() };
    let right: Vec<bool> = (0..table[0].len()).map(|c| c > 4).collect();
    taskmeter_console::out!("{}", render_fitted(&table, &right, &fit));
    if !left_out.is_empty() {
        taskmeter_console::textln!("{}", left_out.said());
    }
    let mut reasons: Vec<&str> = lines.iter().filter_map(|l| l.judgement.reason.as_deref()).collect();
    reasons.sort();
    reasons.dedup();
    for reason in reasons {
        taskmeter_console::textln!("inconclusive: {reason}");
    }
    taskmeter_console::textln!("{regressed} regressed of {} compared", lines.len());
}

/// As `taskmeter compare`: the runs of a side, and the two sides, must have measured the same
/// workload (unless `force`); the other differences between the sides' first runs, each with
/// the pair it is of.
fn check_workloads(
    store: &mut Store,
    (old, old_runs): (&str, &[i64]),
    (new, new_runs): (&str, &[i64]),
    force: bool,
) -> Result<Vec<(String, Difference)>, CliError> {
    let mut first = Vec::new();
    for (name, runs) in [(old, old_runs), (new, new_runs)] {
        let records = runs.iter().map(|id| run_of(store, *id).map(|r| r.record())).collect::<Result<Vec<_>, _>>()?;
        for (id, record) in runs.iter().zip(&records).skip(1) {
            let workload: Vec<String> = differences::between(&records[0], record)
                .into_iter()
                .filter(|d| d.kind == Kind::Workload)
                .map(|d| format!("{} {} -> {}", d.what, d.old, d.new))
                .collect();
            if !workload.is_empty() && !force {
                return Err(CliError::Usage(format!(
                    "the runs of {name} measured different things ({} in run {id}): compare them anyway with --force",
                    workload.join("; ")
                )));
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
        return Err(CliError::Usage(format!(
            "{old} and {new} measured different things ({}): compare them anyway with --force",
            workload.join("; ")
        )));
    }
    Ok(found.into_iter().map(|d| (format!("{old} -> {new}"), d)).collect())
}

/// What `history check` says of its method.
const CHECK_METHOD: &str = "each run one value (the mean of its repetitions); each series tested for any change by \
E-Divisive means (Matteson and James 2014: the split and the end of its right part searched) with a permutation test, \
Holm's adjustment over the series, then the change points of the series below alpha, every split tested at the \
level Holm's step gave its series";

/// A finding's verdict as the console says it: with what it could have seen, or what it needs.
fn verdict_text(f: &Finding) -> String {
    match (f.verdict, f.detectable_step, f.runs_needed) {
        (check::Verdict::NoChange, Some(step), _) => format!("no change; could detect x{step:.2}"),
        (check::Verdict::CannotDetect, _, Some(runs)) if runs > f.runs => format!("cannot detect: needs {runs} runs"),
        (verdict, _, _) => verdict.as_str().to_string(),
    }
}

/// What the console says under the table of `history check`: what "could detect" and "cannot
/// detect" mean, for the verdicts it shows.
fn check_notes(findings: &[Finding], rule: check::Rule, settings: Settings) -> String {
    let tested = findings.iter().filter(|f| f.p_value.is_some()).count().max(1);
    let k = settings.min_size;
    let mut out = String::new();
    if findings.iter().any(|f| f.detectable_step.is_some()) {
        out.push_str(&format!(
            "could detect xF: the mildest step, in hundredths, at a series' newest {k} runs that this check would call a regression, with the series' own spread (its test below Holm's first threshold, alpha / {tested} = {:.4})\n",
            settings.alpha / tested as f64
        ));
    }
    if findings.iter().any(|f| f.verdict == check::Verdict::CannotDetect) {
        out.push_str(&format!(
            "cannot detect: not judged (exit status 0: neither passed nor failed): too few runs for the permutation test to reach that threshold even with the cleanest step at the newest {k} runs (its p cannot fall below about 2 / C(runs, {k})), or not even a step of x{} there would be a regression\n",
            if rule.higher_is_better { 1.0 / check::LARGEST_STEP } else { check::LARGEST_STEP }
        ));
    }
    out
}

fn check_console(findings: &[Finding], what: &What, rule: check::Rule, settings: Settings) -> String {
    let p_text = |p: Option<f64>| p.map_or("-".to_string(), |p| super::compare::p_text(Some(p), true));
    let mut table = vec![["series", "runs", "p", "p adj.", "verdict", "since run", "before", "after", "change"]
        .map(str::to_string)
        .to_vec()];
    let workloads = series::workload_names(findings.iter().map(|f| &f.series));
    for f in findings {
        let mut line = vec![
            f.series.label(&workloads[&f.series]),
            f.runs.to_string(),
            p_text(f.p_value),
            p_text(f.p_adjusted),
            verdict_text(f),
        ];
        match &f.change {
            Some(c) => line.extend([
                format!("{}{}", c.run, c.label.as_ref().map_or(String::new(), |l| format!(" ({l})"))),
                value(&what.metric, c.before),
                value(&what.metric, c.after),
                c.change.map_or("n/a".into(), |v| format!("{:+.1} %", v * 100.0)),
            ]),
            None => line.extend(["-", "-", "-", "-"].map(str::to_string)),
        }
        table.push(line);
    }
    let count = |verdict: check::Verdict| findings.iter().filter(|f| f.verdict == verdict).count();
    let blind = match count(check::Verdict::CannotDetect) {
        0 => String::new(),
        n => format!("; {n} cannot detect a change yet"),
    };
    // A narrow terminal: the series' label is cut, then the p before adjustment, the runs and the
    // values either side of the change go.
    let fit =
        Fit { shrink: vec![("series", Shrink::Ellipsis, 20)], drop: vec!["p", "runs", "before", "after", "since run"] };
    let right: Vec<bool> = (0..table[0].len()).map(|c| c > 0).collect();
    format!(
        "{} {} per run (the mean of its repetitions)\nmethod: {CHECK_METHOD}; alpha {} for the check, noise threshold {:.1} %\n{}{}{} regression(s) in {} series{blind}\n",
        what.metric,
        what.stat(),
        settings.alpha,
        rule.threshold * 100.0,
        render_fitted(&table, &right, &fit),
        check_notes(findings, rule, settings),
        count(check::Verdict::Regression),
        findings.len()
    )
}
