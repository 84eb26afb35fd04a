//! What the rows of a run say together (a row's own statistics are folded in while its worker
//! runs: see `accumulate.rs`).

use crate::model::run::{RowStatus, RunRecord};

/// Memory per unit of one runtime across a run's points.
pub struct MemoryPerUnit {
    pub runtime: String,
    /// Least-squares slope of the worker's peak RSS (bytes) over the units it started.
    pub bytes_per_unit: Option<f64>,
    pub points: usize,
    pub units_min: u32,
    pub units_max: u32,
}

/// The growth of each runtime's peak RSS per unit started, fitted across every measured point.
/// It includes what each unit keeps: its ring of samples (the plan's `ring` x 48 bytes).
pub fn memory_per_unit(record: &RunRecord) -> Vec<MemoryPerUnit> {
    record
        .settings
        .runtimes
        .iter()
        .filter_map(|runtime| {
            let points: Vec<(f64, f64)> = record
                .rows
                .iter()
                .filter(|r| &r.runtime == runtime && matches!(r.status, RowStatus::Ok | RowStatus::Partial))
                .filter_map(|r| {
                    Some((r.counts.as_ref()?.units as f64, r.worker.as_ref()?.peak_rss_kb? as f64 * 1024.0))
                })
                .collect();
            if points.is_empty() {
                return None;
            }
            let units = points.iter().map(|p| p.0 as u32);
            Some(MemoryPerUnit {
                runtime: runtime.clone(),
                bytes_per_unit: taskmeter_stats::linear_fit(&points).map(|(slope, _)| slope),
                points: points.len(),
                units_min: units.clone().min().unwrap_or(0),
                units_max: units.max().unwrap_or(0),
            })
        })
        .collect()
}
