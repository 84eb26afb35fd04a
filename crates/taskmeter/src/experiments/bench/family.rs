//! The bench family's line in the registry (`cli::families`): its record, its flags and how
//! `run` measures it.

use crate::experiments::family::{Family, Kind, RecordKind};
use crate::history::entry::Metric;
use taskmeter_model::bench::BenchRecord;

/// Your own asynchronous work, measured by `taskmeter bench` (its own command and flags, not
/// `run`'s): registered for its record.
pub struct Bench;

impl Family for Bench {
    fn name(&self) -> &'static str {
        super::FAMILY
    }
    fn kind(&self) -> &'static dyn RecordKind {
        &Kind::<BenchRecord>::KIND
    }
    fn metrics(&self) -> &'static [Metric] {
        const METRICS: &[Metric] = &[
            Metric { name: "ips", score: "value", higher_is_better: true, unit: Some("units/s") },
            Metric::time("gap", "mean"),
            Metric::time("latency", "mean"),
        ];
        METRICS
    }
}
