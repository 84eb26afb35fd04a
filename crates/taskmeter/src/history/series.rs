//! Series: the values of one thing measured (an experiment's runtime at a point, on a machine,
//! with one workload) over runs, oldest first, each run's repetitions kept together.

use super::query::Observation;
use serde::Serialize;
use std::collections::{BTreeMap, BTreeSet};

/// A run's workload: the settings `compare` calls workload (`analysis::differences::workload_of`),
/// as `path = value`.
pub type Workload = BTreeMap<String, String>;

/// What a series is of. Runs of another workload (`--quick` against a full run, another sleep
/// or busy work) measured something else, so they are another series, as `compare` refuses them.
#[derive(Clone, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Key {
    pub experiment: String,
    pub subject: String,
    pub point: String,
    pub machine: String,
    pub workload: Workload,
}

impl Key {
    /// `sleep thread busy=1000 on m`, and what sets its workload apart when given
    /// (`workload_names`): `sleep thread on m [settings.duration_ns=2000000000]`.
    pub fn label(&self, workload: &str) -> String {
        let point = if self.point == "-" { String::new() } else { format!(" {}", self.point) };
        let workload = if workload.is_empty() { String::new() } else { format!(" [{workload}]") };
        format!("{} {}{point} on {}{workload}", self.experiment, self.subject, self.machine)
    }
}

/// One run in a series: its repetitions' values.
#[derive(Clone, Debug, Serialize)]
pub struct RunValues {
    pub run: i64,
    pub started_at: String,
    pub label: Option<String>,
    pub values: Vec<f64>,
}

impl RunValues {
    pub fn mean(&self) -> f64 {
        self.values.iter().sum::<f64>() / self.values.len() as f64
    }
}

/// The observations grouped into series, each run once, in the order they came (oldest first);
/// `workloads` gives each run's workload (a run missing from it has none).
pub fn group(observations: &[Observation], workloads: &BTreeMap<i64, Workload>) -> BTreeMap<Key, Vec<RunValues>> {
    let mut out: BTreeMap<Key, Vec<RunValues>> = BTreeMap::new();
    for o in observations.iter().filter(|o| o.value.is_finite()) {
        let key = Key {
            experiment: o.experiment.clone(),
            subject: o.subject.clone(),
            point: o.point.clone(),
            machine: o.machine.clone(),
            workload: workloads.get(&o.run).cloned().unwrap_or_default(),
        };
        let runs = out.entry(key).or_default();
        match runs.last_mut() {
            Some(last) if last.run == o.run => last.values.push(o.value),
            _ => runs.push(RunValues {
                run: o.run,
                started_at: o.started_at.clone(),
                label: o.label.clone(),
                values: vec![o.value],
            }),
        }
    }
    out
}

/// What tells each series' workload apart from the others of its experiment: the workload
/// settings whose values differ between them, as `path=value` (`(none)` where a run lacks the
/// setting); empty where the experiment has one workload.
pub fn workload_names<'a>(keys: impl IntoIterator<Item = &'a Key>) -> BTreeMap<&'a Key, String> {
    let keys: Vec<&Key> = keys.into_iter().collect();
    let value = |key: &Key, path: &str| key.workload.get(path).map_or("(none)".to_string(), Clone::clone);
    keys.iter()
        .map(|key| {
            let siblings: Vec<&&Key> = keys.iter().filter(|k| k.experiment == key.experiment).collect();
            let paths: BTreeSet<&String> = siblings.iter().flat_map(|k| k.workload.keys()).collect();
            let differing: Vec<String> = paths
                .into_iter()
                .filter(|path| siblings.iter().any(|k| value(k, path) != value(key, path)))
                .map(|path| format!("{path}={}", value(key, path)))
                .collect();
            (*key, differing.join(", "))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn observation(run: i64, subject: &str, value: f64) -> Observation {
        Observation {
            run,
            started_at: format!("t{run}"),
            machine: "m".into(),
            label: None,
            experiment: "sleep".into(),
            subject: subject.into(),
            point: "-".into(),
            repetition: 1,
            value,
            status: "ok".into(),
            complete: true,
        }
    }

    fn workload(pairs: &[(&str, &str)]) -> Workload {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    /// `--quick` and full runs interleaved: one series each, never one of both; their names say
    /// what differs (the duration), not what they share (the sleep).
    #[test]
    fn each_workload_is_a_series_of_its_own() {
        let quick = workload(&[("settings.duration_ns", "1000000000"), ("settings.sleep", "fixed:1ms")]);
        let full = workload(&[("settings.duration_ns", "10000000000"), ("settings.sleep", "fixed:1ms")]);
        let workloads: BTreeMap<i64, Workload> =
            (1..=6).map(|run| (run, if run % 2 == 1 { quick.clone() } else { full.clone() })).collect();
        let observations: Vec<Observation> =
            (1..=6).flat_map(|run| [observation(run, "thread", run as f64), observation(run, "go", 1.0)]).collect();
        let series = group(&observations, &workloads);
        assert_eq!(series.len(), 4, "2 runtimes x 2 workloads: {:?}", series.keys());
        let thread_full = Key {
            experiment: "sleep".into(),
            subject: "thread".into(),
            point: "-".into(),
            machine: "m".into(),
            workload: full.clone(),
        };
        let runs: Vec<i64> = series[&thread_full].iter().map(|r| r.run).collect();
        assert_eq!(runs, vec![2, 4, 6], "the full runs only");
        let names = workload_names(series.keys());
        assert_eq!(names[&thread_full], "settings.duration_ns=10000000000");
        assert_eq!(thread_full.label(&names[&thread_full]), "sleep thread on m [settings.duration_ns=10000000000]");
        // One workload: nothing to tell apart.
        let one = group(&observations[..2], &workloads);
        assert!(workload_names(one.keys()).values().all(String::is_empty));
    }
}
