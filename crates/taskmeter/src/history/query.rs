//! Reading the history back: the runs that match a filter, one run's measurements, and the
//! values of one metric and stat over runs (the series `trend`, `check` and `compare` use).

use super::store::{Store, Value};
use serde::Serialize;
use std::collections::BTreeMap;

/// Which runs to read; every field narrows.
#[derive(Clone, Debug, Default)]
pub struct Filter {
    pub experiment: Option<String>,
    /// A runtime, receiver or scenario the run measured (comma-separated: any of them).
    pub runtime: Option<String>,
    pub machine: Option<String>,
    pub label: Option<String>,
    /// Started on or after this date or time (a prefix of RFC 3339: `2026-11`, `2026-11-26`).
    pub since: Option<String>,
    /// Started on or before it (the same prefix).
    pub until: Option<String>,
    pub ids: Vec<i64>,
}

impl Filter {
    /// The WHERE clause on `runs` (aliased `r`) and its parameters, numbered from `first`.
    fn clause(&self, first: usize) -> (String, Vec<Value>) {
        let mut terms = Vec::new();
        let mut params: Vec<Value> = Vec::new();
        let next = |value: &str, params: &mut Vec<Value>| {
            params.push(value.into());
            format!("${}", first + params.len() - 1)
        };
        for (column, value) in [("experiment", &self.experiment), ("machine", &self.machine), ("label", &self.label)] {
            if let Some(v) = value {
                terms.push(format!("r.{column} = {}", next(v, &mut params)));
            }
        }
        if let Some(runtimes) = &self.runtime {
            let any: Vec<String> = runtimes.split(',').map(|r| next(r.trim(), &mut params)).collect();
            terms.push(format!(
                "EXISTS (SELECT 1 FROM measurements x WHERE x.run_id = r.id AND x.subject IN ({}))",
                any.join(", ")
            ));
        }
        if let Some(since) = &self.since {
            terms.push(format!("SUBSTR(r.started_at, 1, {}) >= {}", since.len(), next(since, &mut params)));
        }
        if let Some(until) = &self.until {
            terms.push(format!("SUBSTR(r.started_at, 1, {}) <= {}", until.len(), next(until, &mut params)));
        }
        if !self.ids.is_empty() {
            // Numbers, inlined.
            let ids: Vec<String> = self.ids.iter().map(i64::to_string).collect();
            terms.push(format!("r.id IN ({})", ids.join(", ")));
        }
        let clause = if terms.is_empty() { "1 = 1".to_string() } else { terms.join(" AND ") };
        (clause, params)
    }
}

/// One run, as `history list` shows it.
#[derive(Clone, Debug, Serialize)]
pub struct RunInfo {
    pub id: i64,
    pub experiment: String,
    pub started_at: String,
    pub finished_at: String,
    pub complete: bool,
    pub machine: String,
    pub cpu_model: String,
    pub kernel: String,
    pub taskmeter_version: String,
    pub label: Option<String>,
    pub folder: Option<String>,
    /// The runtimes (receivers, scenarios) it measured.
    pub runtimes: Vec<String>,
}

const RUN_COLUMNS: &str = "r.id, r.experiment, r.started_at, r.finished_at, r.complete, r.machine, r.cpu_model, \
                           r.kernel, r.taskmeter_version, r.label, r.folder";

fn run_info(row: &[Value]) -> RunInfo {
    let text = |i: usize| row.get(i).map(Value::string).unwrap_or_default();
    let optional = |i: usize| row.get(i).and_then(|v| v.text().map(str::to_string));
    RunInfo {
        id: row[0].int().unwrap_or(0),
        experiment: text(1),
        started_at: text(2),
        finished_at: text(3),
        complete: row[4].int() == Some(1),
        machine: text(5),
        cpu_model: text(6),
        kernel: text(7),
        taskmeter_version: text(8),
        label: optional(9),
        folder: optional(10),
        runtimes: Vec::new(),
    }
}

/// The runs that match, oldest first (at most `limit`, the newest ones, when given).
pub fn runs(store: &mut Store, filter: &Filter, limit: Option<usize>) -> Result<Vec<RunInfo>, String> {
    let (clause, params) = filter.clause(1);
    let order = if limit.is_some() { "DESC" } else { "ASC" };
    let limit = limit.map_or(String::new(), |n| format!(" LIMIT {n}"));
    let sql =
        format!("SELECT {RUN_COLUMNS} FROM runs r WHERE {clause} ORDER BY r.started_at {order}, r.id {order}{limit}");
    let mut found: Vec<RunInfo> = store.query(&sql, &params)?.iter().map(|r| run_info(r)).collect();
    found.sort_by(|a, b| (&a.started_at, a.id).cmp(&(&b.started_at, b.id)));
    if let (Some(low), Some(high)) = (found.iter().map(|r| r.id).min(), found.iter().map(|r| r.id).max()) {
        let subjects = store.query(
            "SELECT DISTINCT run_id, subject FROM measurements WHERE run_id >= $1 AND run_id <= $2 ORDER BY run_id, subject",
            &[Value::Int(low), Value::Int(high)],
        )?;
        let mut by_run: BTreeMap<i64, Vec<String>> = BTreeMap::new();
        for row in subjects {
            by_run.entry(row[0].int().unwrap_or(0)).or_default().push(row[1].string());
        }
        for run in &mut found {
            run.runtimes = by_run.remove(&run.id).unwrap_or_default();
        }
    }
    Ok(found)
}

/// One run with its settings, environment and every measurement.
#[derive(Serialize)]
pub struct RunDetail {
    #[serde(flatten)]
    pub info: RunInfo,
    pub command_line: serde_json::Value,
    pub settings: serde_json::Value,
    pub environment: serde_json::Value,
    pub measurements: Vec<super::entry::Measurement>,
    /// The kind of its record (`run`, `net`...): its schema is `taskmeter.KIND`.
    #[serde(skip)]
    pub kind: String,
}

impl RunDetail {
    /// The run as `analysis::differences` reads a record: its schema, experiment, settings,
    /// environment and taskmeter's version.
    pub fn record(&self) -> serde_json::Value {
        let mut record = as_record(&self.kind, &self.info.experiment, &self.settings);
        record["environment"] = self.environment.clone();
        record["taskmeter_version"] = self.info.taskmeter_version.clone().into();
        record
    }
}

/// A recorded run's kind, experiment and settings (the `runs` columns) in the shape of its
/// record, as `analysis::differences` reads it.
fn as_record(kind: &str, experiment: &str, settings: &serde_json::Value) -> serde_json::Value {
    let mut record = serde_json::json!({ "schema": format!("taskmeter.{kind}"), "experiment": experiment });
    for (key, value) in settings.as_object().into_iter().flatten() {
        match key.as_str() {
            "config" => record["report"] = serde_json::json!({ "config": value }),
            "order" => {}
            _ => record[key] = value.clone(),
        }
    }
    record
}

/// The workload of each of the runs `ids` (`analysis::differences::workload_of`: the settings
/// `compare` calls workload), so that a series never mixes two.
pub fn workloads(store: &mut Store, ids: &[i64]) -> Result<BTreeMap<i64, BTreeMap<String, String>>, String> {
    if ids.is_empty() {
        return Ok(BTreeMap::new());
    }
    // Numbers, inlined.
    let listed: Vec<String> = ids.iter().map(i64::to_string).collect();
    let sql = format!("SELECT id, kind, experiment, settings FROM runs WHERE id IN ({})", listed.join(", "));
    Ok(store
        .query(&sql, &[])?
        .into_iter()
        .map(|row| {
            let settings = serde_json::from_str(&row[3].string()).unwrap_or(serde_json::Value::Null);
            let record = as_record(&row[1].string(), &row[2].string(), &settings);
            (row[0].int().unwrap_or(0), taskmeter_analysis::differences::workload_of(&record))
        })
        .collect())
}

/// The run `id`, None when the history holds none; the error is the store's.
pub fn run(store: &mut Store, id: i64) -> Result<Option<RunDetail>, String> {
    let sql =
        format!("SELECT {RUN_COLUMNS}, r.command_line, r.settings, r.environment, r.kind FROM runs r WHERE r.id = $1");
    let rows = store.query(&sql, &[Value::Int(id)])?;
    let Some(row) = rows.first() else {
        return Ok(None);
    };
    let json = |i: usize| serde_json::from_str(&row[i].string()).unwrap_or(serde_json::Value::Null);
    let measurements = store
        .query(
            "SELECT subject, point, repetition, status, version, metric, stat, value FROM measurements \
             WHERE run_id = $1 ORDER BY subject, point, repetition, metric",
            &[Value::Int(id)],
        )?
        .into_iter()
        .map(|m| super::entry::Measurement {
            subject: m[0].string(),
            point: m[1].string(),
            repetition: m[2].int().unwrap_or(1),
            status: m[3].string(),
            version: m[4].text().map(str::to_string),
            metric: m[5].string(),
            stat: m[6].string(),
            value: m[7].real(),
        })
        .collect();
    Ok(Some(RunDetail {
        info: run_info(row),
        command_line: json(11),
        settings: json(12),
        environment: json(13),
        kind: row[14].string(),
        measurements,
    }))
}

/// One value of a series: a repetition of a run.
#[derive(Clone, Debug)]
pub struct Observation {
    pub run: i64,
    pub started_at: String,
    pub machine: String,
    pub label: Option<String>,
    pub experiment: String,
    pub subject: String,
    pub point: String,
    pub repetition: i64,
    pub value: f64,
    /// The repetition's status (`ok`, `partial`, `interrupted`, `failed`).
    pub status: String,
    /// Whether its run ran to the end.
    pub complete: bool,
}

/// What a history command or a comparison left out of its figures, and why; its runs named by
/// their id in the history (`i64`) or by their results folder (`compare`: `String`).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct LeftOut<Run = i64> {
    /// Runs that were interrupted.
    pub incomplete_runs: Vec<Run>,
    /// Repetitions whose status is not ok, by status.
    pub repetitions: std::collections::BTreeMap<String, usize>,
}

impl<Run: std::fmt::Display> LeftOut<Run> {
    pub fn is_empty(&self) -> bool {
        self.incomplete_runs.is_empty() && self.repetitions.is_empty()
    }

    /// One line for the console.
    pub fn said(&self) -> String {
        let mut parts = Vec::new();
        if !self.incomplete_runs.is_empty() {
            let runs: Vec<String> = self.incomplete_runs.iter().map(Run::to_string).collect();
            parts.push(format!("{} interrupted run(s) ({})", runs.len(), runs.join(", ")));
        }
        for (status, n) in &self.repetitions {
            parts.push(format!("{n} {status} repetition(s)"));
        }
        format!("left out: {} (only whole measurements are used; --include-incomplete uses them too)", parts.join(", "))
    }
}

/// The observations of whole measurements (every one with `include`): runs that ran to the
/// end, repetitions whose status is ok; what was left out, counted.
pub fn whole(observations: Vec<Observation>, include: bool) -> (Vec<Observation>, LeftOut) {
    let mut left_out = LeftOut::default();
    let mut kept = Vec::new();
    for o in observations {
        if include {
            kept.push(o);
        } else if !o.complete {
            if left_out.incomplete_runs.last() != Some(&o.run) {
                left_out.incomplete_runs.push(o.run);
            }
        } else if o.status != "ok" {
            *left_out.repetitions.entry(o.status.clone()).or_default() += 1;
        } else {
            kept.push(o);
        }
    }
    left_out.incomplete_runs.dedup();
    (kept, left_out)
}

/// Every value of `metric` and `stat` in the runs that match, oldest run first.
pub fn observations(store: &mut Store, filter: &Filter, metric: &str, stat: &str) -> Result<Vec<Observation>, String> {
    let (clause, mut params) = filter.clause(3);
    params.insert(0, stat.into());
    params.insert(0, metric.into());
    let mut subject = String::new();
    if let Some(runtimes) = &filter.runtime {
        // The runs' other subjects are not part of the series.
        let any: Vec<String> = runtimes
            .split(',')
            .map(|r| {
                params.push(r.trim().into());
                format!("${}", params.len())
            })
            .collect();
        subject = format!(" AND m.subject IN ({})", any.join(", "));
    }
    let sql = format!(
        "SELECT r.id, r.started_at, r.machine, r.label, r.experiment, m.subject, m.point, m.repetition, m.value, \
         m.status, r.complete \
         FROM measurements m JOIN runs r ON r.id = m.run_id \
         WHERE m.metric = $1 AND m.stat = $2 AND m.value IS NOT NULL AND {clause}{subject} \
         ORDER BY r.started_at, r.id, m.subject, m.point, m.repetition"
    );
    Ok(store
        .query(&sql, &params)?
        .into_iter()
        .map(|row| Observation {
            run: row[0].int().unwrap_or(0),
            started_at: row[1].string(),
            machine: row[2].string(),
            label: row[3].text().map(str::to_string),
            experiment: row[4].string(),
            subject: row[5].string(),
            point: row[6].string(),
            repetition: row[7].int().unwrap_or(1),
            value: row[8].real().unwrap_or(f64::NAN),
            status: row[9].string(),
            complete: row[10].int().unwrap_or(1) != 0,
        })
        .collect())
}
