//! The history's entry of a run of the work loop: a row's summary of every metric, by runtime,
//! point and repetition.

use crate::history::entry::{identity_of, summary_stats, Cell, Parts, Recorded};
use taskmeter_model::run::{RunRecord, METRICS};

impl Recorded for RunRecord {
    fn parts(&self) -> Parts<'_> {
        let r = self;
        let mut out = Vec::new();
        for row in &r.rows {
            let Some(statistics) = &row.statistics else { continue };
            let status = serde_json::to_value(row.status).ok().and_then(|v| v.as_str().map(str::to_string));
            let cell = Cell {
                subject: &row.runtime,
                point: r.points.get(row.point).map_or_else(|| "-".into(), |p| p.label()),
                repetition: row.repetition,
                status: status.unwrap_or_default(),
                version: row.worker.as_ref().and_then(|w| w.runtime_version.as_ref()),
            };
            for metric in METRICS {
                cell.push_all(&mut out, metric.name(), &summary_stats(statistics.get(metric)));
            }
        }
        let settings = serde_json::json!({"settings": r.settings, "sweeps": r.sweeps, "order": r.order});
        Parts {
            identity: identity_of(r),
            kind: "run",
            experiment: r.experiment.clone(),
            header: &r.header,
            settings,
            measurements: out,
        }
    }
}
