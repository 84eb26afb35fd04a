//! The history's entry of a granularity run: each runtime's METG by repetition.

use crate::history::entry::{identity_of, status_of, Cell, Parts, Recorded};
use taskmeter_model::granularity::{GrainRecord, Metg};

impl Recorded for GrainRecord {
    fn parts(&self) -> Parts<'_> {
        let r = self;
        let mut out = Vec::new();
        for run in &r.runs {
            let cell = Cell {
                subject: &run.runtime,
                point: "-".into(),
                repetition: run.repetition,
                status: status_of(run.error.is_none(), run.interrupted),
                version: run.runtime_version.as_ref(),
            };
            if let Some(Metg::Interpolated { ns }) = run.metg {
                cell.push(&mut out, "metg", "value", Some(ns));
            }
        }
        let settings = serde_json::json!({"settings": r.settings});
        Parts {
            identity: identity_of(r),
            kind: "granularity",
            experiment: "granularity".to_string(),
            header: &r.header,
            settings,
            measurements: out,
        }
    }
}
