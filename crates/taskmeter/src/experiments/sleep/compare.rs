//! How `compare` reads a run of the work loop: each (runtime, point)'s rows, by metric, scored
//! by each run's median (lateness, busy) or mean |value - expected| (actual, full); lower is
//! better.

use crate::experiments::compared::{invocations_of, of_kind, whole, Asked, Compared, LeftOut, Measured};
use std::any::Any;
use taskmeter_analysis::cells::cells;
use taskmeter_model::run::{Metric, Row, RowStatus, RunRecord, METRICS};

/// The score of one run: its median (lateness, busy) or its mean |value - expected| (actual,
/// full); lower is better.
fn score(row: &Row, metric: Metric) -> Option<f64> {
    let s = row.statistics.as_ref()?.get(metric);
    match metric {
        Metric::Lateness | Metric::Busy => s.p50.map(|v| v as f64),
        Metric::Actual | Metric::Full => s.mean_absolute_deviation,
    }
}

/// A runtime and a point's label.
type RuntimeAtPoint = (String, String);

fn status_word(status: RowStatus) -> String {
    serde_json::to_value(status).ok().and_then(|v| v.as_str().map(str::to_string)).unwrap_or_default()
}

impl Compared for RunRecord {
    fn default_metric(&self) -> Option<Metric> {
        Some(self.metric)
    }

    fn unit(&self) -> (&'static str, bool) {
        ("ns", false)
    }

    fn measured(&self, side: &[&dyn Any], ask: &Asked, left_out: &mut LeftOut) -> Measured {
        let metrics: Vec<Metric> = ask.metric.map(|m| vec![m]).unwrap_or_else(|| METRICS.to_vec());
        // In the old run's order of runtimes, then points.
        let order = &self.settings.runtimes;
        // Each (runtime, point)'s rows, by invocation.
        let mut rows: Vec<(RuntimeAtPoint, Vec<Vec<&Row>>)> = Vec::new();
        for (invocation, record) in of_kind::<RunRecord>(side) {
            for point in &record.points {
                for cell in cells(record, point.index).into_iter().filter(|c| c.repetitions() > 0) {
                    let key = (cell.runtime.to_string(), point.label());
                    let invocations = invocations_of(&mut rows, key, side.len());
                    for failed in cell.unmeasured.iter().filter(|r| r.status == RowStatus::Failed) {
                        whole(&status_word(failed.status), false, left_out);
                    }
                    invocations[invocation].extend(
                        cell.measured
                            .into_iter()
                            .filter(|r| whole(&status_word(r.status), ask.include_incomplete, left_out)),
                    );
                }
            }
        }
        rows.sort_by_key(|((runtime, point), _)| {
            (order.iter().position(|r| r == runtime).unwrap_or(usize::MAX), point.clone())
        });
        rows.iter()
            .flat_map(|((runtime, point), invocations)| {
                metrics.iter().map(move |metric| {
                    let subject = vec![
                        ("runtime", runtime.clone()),
                        ("point", point.clone()),
                        ("metric", metric.name().to_string()),
                    ];
                    let values = invocations.iter().map(|rows| rows.iter().filter_map(|r| score(r, *metric)).collect());
                    (subject, Ok(values.collect()))
                })
            })
            .collect()
    }
}
