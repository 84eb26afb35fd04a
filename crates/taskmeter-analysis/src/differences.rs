//! What differs between two runs that `compare` sets side by side, read from their records: the
//! workload (what the units did: a different workload is a different measurement, compared only
//! when asked), the knobs (scheduling, timer slack, PM QoS, repetitions: what a user changes on
//! purpose), and the machine (kernel, CPU, toolchains, taskmeter's version).

use serde::Serialize;
use serde_json::Value;
use std::collections::BTreeMap;

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    Workload,
    Knob,
    Machine,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
        match self {
            Kind::Workload => "workload",
            Kind::Knob => "knob",
            Kind::Machine => "machine",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Difference {
    pub kind: Kind,
    /// The setting, as a path in the record (`settings.busy.iters`, `environment.kernel`).
    pub what: String,
    pub old: String,
    pub new: String,
}

/// The settings of each record kind that define its workload.
fn workload(schema: &str) -> &'static [&'static str] {
    match schema {
        "taskmeter.run" => &[
            "experiment",
            "settings.experiment",
            "settings.units",
            "settings.priority_classes",
            "settings.start_limit_ns",
            "settings.together",
            "settings.duration_ns",
            "settings.warmup_ns",
            "settings.sleep",
            "settings.busy",
            "settings.busy_ns",
        ],
        "taskmeter.net" => &["settings.messages", "settings.per_sender", "settings.message_size"],
        "taskmeter.granularity" => &[
            "settings.pattern",
            "settings.width",
            "settings.steps",
            "settings.grains_ns",
            "settings.warmup_ns",
            "settings.duration_ns",
            "settings.calibrate_ns",
        ],
        _ => &[],
    }
}

/// What is never a difference worth a line: the moment's load, and what another key says.
const IGNORED: [&str; 4] =
    ["environment.load_average_before", "environment.load_average_after", "settings.sleep_spec", "settings.grace_ns"];

/// Whether `key` (a path in a record of `schema`) is one of its workload's settings.
fn is_workload(schema: &str, key: &str) -> bool {
    workload(schema).iter().any(|w| key == *w || key.starts_with(&format!("{w}.")))
}

/// A record's workload (its JSON): the settings `between` calls workload, as `path = value`.
/// Two records measured the same workload when theirs are equal.
pub fn workload_of(record: &Value) -> BTreeMap<String, String> {
    let schema = record["schema"].as_str().unwrap_or_default();
    flatten_record(record)
        .into_iter()
        .filter(|(key, _)| is_workload(schema, key) && !IGNORED.iter().any(|i| key.starts_with(i)))
        .collect()
}

/// The differences between two records of the same kind (their JSON), workload first.
pub fn between(old: &Value, new: &Value) -> Vec<Difference> {
    let schema = old["schema"].as_str().unwrap_or_default();
    let (a, b) = (flatten_record(old), flatten_record(new));
    let mut keys: Vec<&String> = a.keys().chain(b.keys()).collect();
    keys.sort();
    keys.dedup();
    let mut found: Vec<Difference> = keys
        .into_iter()
        .filter(|key| !IGNORED.iter().any(|i| key.starts_with(i)))
        .filter(|key| a.get(*key) != b.get(*key))
        .map(|key| {
            let kind = if is_workload(schema, key) {
                Kind::Workload
            } else if key.starts_with("environment.") || key == "taskmeter_version" {
                Kind::Machine
            } else {
                Kind::Knob
            };
            let shown = |side: &BTreeMap<String, String>| side.get(key).cloned().unwrap_or_else(|| "(none)".into());
            Difference { kind, what: key.clone(), old: shown(&a), new: shown(&b) }
        })
        .collect();
    found.sort_by_key(|d| d.kind as u8);
    found
}

/// The parts of a record that describe how it was made, as `path = value`.
fn flatten_record(record: &Value) -> BTreeMap<String, String> {
    let mut flat = BTreeMap::new();
    for key in ["experiment", "settings", "environment", "taskmeter_version", "sweeps"] {
        flatten(key, &record[key], &mut flat);
    }
    // bench: its configuration and its scenarios' commands are its settings.
    flatten("settings.config", &record["report"]["config"], &mut flat);
    flatten("settings.scenarios", &record["scenarios"], &mut flat);
    flat
}

fn flatten(path: &str, value: &Value, out: &mut BTreeMap<String, String>) {
    match value {
        Value::Null => {}
        Value::Object(map) => map.iter().for_each(|(k, v)| flatten(&format!("{path}.{k}"), v, out)),
        // Lists of plain values read best whole (runtimes, grains).
        Value::Array(items) if items.iter().all(|i| !i.is_object() && !i.is_array()) => {
            out.insert(path.to_string(), items.iter().map(plain).collect::<Vec<_>>().join(","));
        }
        Value::Array(items) => items.iter().enumerate().for_each(|(i, v)| flatten(&format!("{path}.{i}"), v, out)),
        other => {
            out.insert(path.to_string(), plain(other));
        }
    }
}

fn plain(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn each_difference_is_named_with_its_kind() {
        let old = json!({"schema": "taskmeter.run", "taskmeter_version": "0.1.0", "experiment": "sleep",
            "settings": {"units": 5, "busy": {"iters": 1000, "yield_each_step": false}, "sched": {"timer_slack_ns": null}, "runtimes": ["thread", "go"], "grace_ns": 1},
            "environment": {"kernel": "6.18", "load_average_before": [1.0, 1.0, 1.0], "toolchains": {"go": "go1.26"}}});
        let new = json!({"schema": "taskmeter.run", "taskmeter_version": "0.2.0", "experiment": "sleep",
            "settings": {"units": 5, "busy": {"iters": 1300, "yield_each_step": false}, "sched": {"timer_slack_ns": 1}, "runtimes": ["thread", "go"], "grace_ns": 9},
            "environment": {"kernel": "6.18", "load_average_before": [3.0, 1.0, 1.0], "toolchains": {"go": "go1.27"}}});
        let found = between(&old, &new);
        let named: Vec<(Kind, &str, &str, &str)> =
            found.iter().map(|d| (d.kind, d.what.as_str(), d.old.as_str(), d.new.as_str())).collect();
        assert_eq!(
            named,
            vec![
                (Kind::Workload, "settings.busy.iters", "1000", "1300"),
                (Kind::Knob, "settings.sched.timer_slack_ns", "(none)", "1"),
                (Kind::Machine, "environment.toolchains.go", "go1.26", "go1.27"),
                (Kind::Machine, "taskmeter_version", "0.1.0", "0.2.0"),
            ]
        );
        assert!(between(&old, &old).is_empty());
        // The workload is what `between` calls workload, and only that.
        let workload = |record: &Value| workload_of(record).into_iter().collect::<Vec<(String, String)>>();
        let pairs =
            |list: &[(&str, &str)]| list.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<Vec<_>>();
        assert_eq!(
            workload(&old),
            pairs(&[
                ("experiment", "sleep"),
                ("settings.busy.iters", "1000"),
                ("settings.busy.yield_each_step", "false"),
                ("settings.units", "5")
            ])
        );
        assert_eq!(workload(&new)[1], ("settings.busy.iters".to_string(), "1300".to_string()));
    }
}
