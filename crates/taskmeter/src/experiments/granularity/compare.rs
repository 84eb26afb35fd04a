//! How `compare` reads a granularity record: each runtime's METG, by run.

use crate::experiments::compared::{of_kind, whole, Asked, Compared, LeftOut, Measured};
use crate::report::format::format_ns;
use std::collections::BTreeMap;
use taskmeter_model::granularity::{GrainRecord, Metg};

/// How `compare` reads a granularity record: each runtime's METG, by run; lower is better. A
/// bound (every or no task size efficient) cannot be averaged.
impl Compared for GrainRecord {
    fn unit(&self) -> (&'static str, bool) {
        ("ns", false)
    }

    fn measured(&self, side: &[&dyn std::any::Any], ask: &Asked, left_out: &mut LeftOut) -> Measured {
        let mut found: BTreeMap<String, (Vec<Vec<f64>>, Vec<String>)> = BTreeMap::new();
        for (invocation, r) in of_kind::<GrainRecord>(side) {
            for run in &r.runs {
                let entry = found.entry(run.runtime.clone()).or_default();
                entry.0.resize(side.len(), Vec::new());
                let status = match (&run.error, run.interrupted) {
                    (Some(_), _) => "failed",
                    (None, true) => "interrupted",
                    (None, false) => "ok",
                };
                if !whole(status, ask.include_incomplete, left_out) {
                    continue;
                }
                match run.metg {
                    Some(Metg::Interpolated { ns }) => entry.0[invocation].push(ns),
                    Some(Metg::Below { ns }) => entry.1.push(format!("< {}", format_ns(ns))),
                    Some(Metg::Above { ns }) => entry.1.push(format!("> {}", format_ns(ns))),
                    // Every task size invalid: no METG in this run.
                    None => {}
                }
            }
        }
        found
            .into_iter()
            .map(|(runtime, (values, bounds))| {
                let values = if !bounds.is_empty() {
                    Err(format!("METG is a bound in some runs ({}): widen --task-busy", bounds.join(", ")))
                } else if values.iter().all(Vec::is_empty) {
                    Err("no run has a METG (its workers failed, or every task size was invalid)".to_string())
                } else {
                    Ok(values)
                };
                (vec![("runtime", runtime), ("figure", "METG(50 %)".to_string())], values)
            })
            .collect()
    }
}
