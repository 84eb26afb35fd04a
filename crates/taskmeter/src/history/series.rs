//! Series: the values of one thing measured (an experiment's runtime at a point, on a machine)
//! over runs, oldest first, each run's repetitions kept together.

use super::query::Observation;
use serde::Serialize;
use std::collections::BTreeMap;

/// What a series is of.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize)]
pub struct Key {
    pub experiment: String,
    pub subject: String,
    pub point: String,
    pub machine: String,
}

impl Key {
    pub fn label(&self) -> String {
        let point = if self.point == "-" { String::new() } else { format!(" {}", self.point) };
        format!("{} {}{point} on {}", self.experiment, self.subject, self.machine)
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

/// The observations grouped into series, each run once, in the order they came (oldest first).
pub fn group(observations: &[Observation]) -> BTreeMap<Key, Vec<RunValues>> {
    let mut out: BTreeMap<Key, Vec<RunValues>> = BTreeMap::new();
    for o in observations.iter().filter(|o| o.value.is_finite()) {
        let key = Key {
            experiment: o.experiment.clone(),
            subject: o.subject.clone(),
            point: o.point.clone(),
            machine: o.machine.clone(),
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
