//! What the history keeps of a record: one `runs` row (its identity, settings and environment)
//! and one `measurements` row per statistic of each row and repetition. Every kind of record
//! becomes the same shape: a *subject* (runtime, receiver, scenario) at a *point*, a *metric*
//! and a *stat*.

use super::store::{Dialect, Store, Value};
use serde::Serialize;
use sha2::{Digest, Sha256};
use taskmeter_model::header::Header;
use taskmeter_stats::Summary;

/// One run, as the history keeps it.
pub struct Entry {
    /// SHA-256 of the record's JSON: the same run, recorded at its end or imported from its
    /// folder, is one run.
    pub identity: String,
    pub kind: &'static str,
    pub experiment: String,
    pub header: Header,
    pub folder: Option<String>,
    pub settings: serde_json::Value,
    pub measurements: Vec<Measurement>,
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Measurement {
    pub subject: String,
    pub point: String,
    pub repetition: i64,
    pub status: String,
    pub version: Option<String>,
    pub metric: String,
    pub stat: String,
    pub value: Option<f64>,
}

/// A metric a family records in the history (`Family::metrics`): its name, the stat `compare`
/// and `history check` judge it by (the median, the mean |value - expected|, the mean, or the
/// value itself), which way is better, and its unit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metric {
    pub name: &'static str,
    pub score: &'static str,
    pub higher_is_better: bool,
    /// None: a time, in ns; else the y axis' title of a trend (`throughput (msg/s)`).
    pub unit: Option<&'static str>,
}

impl Metric {
    /// A time in ns, lower is better, judged by `score`.
    pub const fn time(name: &'static str, score: &'static str) -> Metric {
        Metric { name, score, higher_is_better: false, unit: None }
    }
}

/// The stats kept of a summary, by name.
pub fn summary_stats(s: &Summary) -> [(&'static str, Option<f64>); 11] {
    let i = |v: Option<i64>| v.map(|v| v as f64);
    [
        ("count", Some(s.count as f64)),
        ("mean", s.mean),
        ("std", s.std),
        ("min", i(s.min)),
        ("p50", i(s.p50)),
        ("p90", i(s.p90)),
        ("p99", i(s.p99)),
        ("p99.9", i(s.p99_9)),
        ("p99.99", i(s.p99_99)),
        ("max", i(s.max)),
        ("mad", s.mean_absolute_deviation),
    ]
}

/// The row every measurement of one (subject, point, repetition) shares.
pub struct Cell<'a> {
    pub subject: &'a str,
    pub point: String,
    pub repetition: u32,
    pub status: String,
    pub version: Option<&'a String>,
}

impl Cell<'_> {
    pub fn push(&self, out: &mut Vec<Measurement>, metric: &str, stat: &str, value: Option<f64>) {
        if value.is_some_and(f64::is_finite) {
            out.push(Measurement {
                subject: self.subject.to_string(),
                point: self.point.clone(),
                repetition: self.repetition.into(),
                status: self.status.clone(),
                version: self.version.cloned(),
                metric: metric.to_string(),
                stat: stat.to_string(),
                value,
            });
        }
    }

    pub fn push_all(&self, out: &mut Vec<Measurement>, metric: &str, stats: &[(&str, Option<f64>)]) {
        for (stat, value) in stats {
            self.push(out, metric, stat, *value);
        }
    }
}

/// A repetition's status in the history: `failed`, `interrupted` or `ok`.
pub fn status_of(ok: bool, interrupted: bool) -> String {
    match (ok, interrupted) {
        (false, _) => "failed",
        (true, true) => "interrupted",
        (true, false) => "ok",
    }
    .to_string()
}

/// A run's identity: SHA-256 of its record as JSON read back (`value`), keys in order. The
/// record's file, read, gives the same value as the record in memory written and read (the
/// same text parsed the same way), so a run recorded at its end and imported from its folder
/// is one run.
pub fn identity(value: &serde_json::Value) -> String {
    Sha256::digest(value.to_string().as_bytes()).iter().map(|b| format!("{b:02x}")).collect()
}

/// A record's identity ([`identity`]) from the record in memory.
pub fn identity_of(record: &impl taskmeter_model::header::Record) -> String {
    identity(&record.to_json_value())
}

/// What the history takes of a record of any kind.
pub struct Parts<'a> {
    pub identity: String,
    pub kind: &'static str,
    pub experiment: String,
    pub header: &'a Header,
    pub settings: serde_json::Value,
    pub measurements: Vec<Measurement>,
}

/// A kind of record the history stores: every one becomes subjects at points, with metrics
/// and stats ([`Measurement`]).
pub trait Recorded {
    fn parts(&self) -> Parts<'_>;
}

/// The entry of a record, written to `folder` (None: no folder could be written); its
/// identity is `known` when given (the record's file, read), else the record's own.
pub fn of(record: &dyn Recorded, folder: Option<&std::path::Path>, known: Option<String>) -> Entry {
    let parts = record.parts();
    Entry {
        identity: known.unwrap_or(parts.identity),
        kind: parts.kind,
        experiment: parts.experiment,
        header: parts.header.clone(),
        folder: folder.map(|f| f.display().to_string()),
        settings: parts.settings,
        measurements: parts.measurements,
    }
}

/// Whether an entry was new to the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Inserted {
    New(i64),
    /// The store held this run already (the id it has there).
    Already(i64),
}

/// Rows per INSERT: on a server, many (few round trips, within its limit on parameters); on
/// SQLite, one (a statement prepared once and run for each row costs a third of a long one
/// parsed for each batch).
fn batch(dialect: Dialect) -> usize {
    match dialect {
        Dialect::Sqlite => 1,
        Dialect::Postgres => 200,
    }
}

/// Inserts `entry` in one transaction, unless the store holds its identity already.
pub fn insert(store: &mut Store, entry: &Entry) -> Result<Inserted, String> {
    let h = &entry.header;
    store.transaction(|store| {
        let params: Vec<Value> = vec![
            entry.identity.clone().into(),
            entry.kind.into(),
            entry.experiment.clone().into(),
            h.started_at.clone().into(),
            h.finished_at.clone().into(),
            Value::Int(h.complete.into()),
            h.incomplete_reason.clone().into(),
            h.environment.hostname.clone().into(),
            h.environment.cpu_model.clone().into(),
            h.environment.kernel.clone().into(),
            h.taskmeter_version.clone().into(),
            h.label.clone().into(),
            entry.folder.clone().into(),
            json(&h.command_line).into(),
            json(&entry.settings).into(),
            json(&h.environment).into(),
            humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string().into(),
        ];
        let inserted = store.query(
            "INSERT INTO runs (identity, kind, experiment, started_at, finished_at, complete, incomplete_reason, \
             machine, cpu_model, kernel, taskmeter_version, label, folder, command_line, settings, environment, \
             recorded_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $12, $13, $14, $15, $16, $17) \
             ON CONFLICT (identity) DO NOTHING RETURNING id",
            &params,
        )?;
        let Some(id) = inserted.first().and_then(|r| r.first()).and_then(Value::int) else {
            let found = store.query("SELECT id FROM runs WHERE identity = $1", &[entry.identity.clone().into()])?;
            let id = found.first().and_then(|r| r.first()).and_then(Value::int).unwrap_or(0);
            return Ok(Inserted::Already(id));
        };
        for chunk in entry.measurements.chunks(batch(store.dialect())) {
            let mut sql = String::from(
                "INSERT INTO measurements (run_id, subject, point, repetition, status, version, metric, stat, value) VALUES ",
            );
            let mut params = Vec::with_capacity(chunk.len() * 9);
            for (i, m) in chunk.iter().enumerate() {
                let n = i * 9;
                let placeholders: Vec<String> = (1..=9).map(|k| format!("${}", n + k)).collect();
                sql.push_str(&format!("{}({})", if i > 0 { ", " } else { "" }, placeholders.join(", ")));
                params.extend([
                    Value::Int(id),
                    m.subject.clone().into(),
                    m.point.clone().into(),
                    Value::Int(m.repetition),
                    m.status.clone().into(),
                    m.version.clone().into(),
                    m.metric.clone().into(),
                    m.stat.clone().into(),
                    m.value.map_or(Value::Null, Value::Real),
                ]);
            }
            store.execute(&sql, &params)?;
        }
        Ok(Inserted::New(id))
    })
}

/// JSON text of anything serialisable.
fn json<T: Serialize + ?Sized>(value: &T) -> String {
    serde_json::to_string(value).expect("serialises")
}
