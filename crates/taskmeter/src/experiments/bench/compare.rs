//! How `compare` reads a bench record: each (scenario, input)'s mean gap.

use crate::experiments::compared::{note, of_kind, whole, Asked, Compared, LeftOut, Measured};
use taskmeter_model::bench::BenchRecord;

/// How `compare` reads a bench record: each (scenario, input)'s mean gap between units (1 /
/// ips); lower is better.
impl Compared for BenchRecord {
    fn unit(&self) -> (&'static str, bool) {
        ("ns", false)
    }

    fn measured(&self, side: &[&dyn std::any::Any], ask: &Asked, left_out: &mut LeftOut) -> Measured {
        let mut found = Vec::new();
        for (invocation, r) in of_kind::<BenchRecord>(side) {
            for result in &r.report.results {
                let status = if result.error.is_some() { "failed" } else { "ok" };
                if !whole(status, ask.include_incomplete, left_out) {
                    continue;
                }
                if let Some(gap) = &result.measured.gap {
                    let subject = vec![
                        ("scenario", result.scenario.clone()),
                        ("input", result.input.clone().unwrap_or_else(|| "-".into())),
                        ("figure", "mean gap".to_string()),
                    ];
                    note(&mut found, subject, invocation, gap.mean);
                }
            }
        }
        found.sort_by(|x, y| x.0.cmp(&y.0));
        found.into_iter().map(|(s, v)| (s, Ok(v))).collect()
    }
}
