//! What the rows of a run say together (a row's own statistics are folded in while its worker
//! runs: see `accumulate.rs`).

use taskmeter_model::run::{Row, RowStatus, RunRecord};
use taskmeter_protocol::frames::SAMPLE_BYTES;

/// Memory per unit of one runtime across a run's points.
pub struct MemoryPerUnit {
    pub runtime: String,
    /// Least-squares slope over the units started of the worker's peak RSS (bytes) less
    /// taskmeter's rings: what the runtime itself takes per unit.
    pub bytes_per_unit: Option<f64>,
    /// The same slope of the rings alone (taskmeter's share of the worker's memory).
    pub ring_bytes_per_unit: Option<f64>,
    pub points: usize,
    pub units_min: u32,
    pub units_max: u32,
}

/// What a row's rings of samples take in its worker: every unit started keeps a ring of the
/// plan's `ring` samples of 32 bytes (protocol: "Storage: the ring"), allocated before the gate.
pub fn ring_bytes(row: &Row) -> Option<f64> {
    let ring = row.plan.as_ref()?.ring;
    Some(row.counts.as_ref()?.units as f64 * ring as f64 * SAMPLE_BYTES as f64)
}

/// The growth of each runtime's peak RSS per unit started, fitted across every measured point,
/// with taskmeter's rings taken out and given apart.
pub fn memory_per_unit(record: &RunRecord) -> Vec<MemoryPerUnit> {
    record
        .settings
        .runtimes
        .iter()
        .filter_map(|runtime| {
            // (units, peak RSS less the rings, the rings), in bytes.
            let points: Vec<(f64, f64, f64)> = record
                .rows
                .iter()
                .filter(|r| &r.runtime == runtime && matches!(r.status, RowStatus::Ok | RowStatus::Partial))
                .filter_map(|r| {
                    let rings = ring_bytes(r).unwrap_or(0.0);
                    let rss = r.worker.as_ref()?.peak_rss_kb? as f64 * 1024.0;
                    Some((r.counts.as_ref()?.units as f64, rss - rings, rings))
                })
                .collect();
            if points.is_empty() {
                return None;
            }
            let slope = |y: fn(&(f64, f64, f64)) -> f64| {
                let xy: Vec<(f64, f64)> = points.iter().map(|p| (p.0, y(p))).collect();
                taskmeter_stats::linear_fit(&xy).map(|(slope, _)| slope)
            };
            let units = points.iter().map(|p| p.0 as u32);
            Some(MemoryPerUnit {
                runtime: runtime.clone(),
                bytes_per_unit: slope(|p| p.1),
                ring_bytes_per_unit: slope(|p| p.2),
                points: points.len(),
                units_min: units.clone().min().unwrap_or(0),
                units_max: units.max().unwrap_or(0),
            })
        })
        .collect()
}
