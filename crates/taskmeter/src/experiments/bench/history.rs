//! The history's entry of a bench run: each scenario's rate, gaps and latency by input.

use crate::history::entry::{identity_of, status_of, Cell, Parts, Recorded};
use taskmeter_model::bench::BenchRecord;

impl Recorded for BenchRecord {
    fn parts(&self) -> Parts<'_> {
        let r = self;
        let mut out = Vec::new();
        for result in &r.report.results {
            let cell = Cell {
                subject: &result.scenario,
                point: result.input.clone().unwrap_or_else(|| "-".into()),
                repetition: 1,
                status: status_of(result.error.is_none(), !r.report.complete),
                version: None,
            };
            let m = &result.measured;
            cell.push(&mut out, "ips", "value", m.ips);
            for (metric, stats) in [("gap", &m.gap), ("latency", &m.latency)] {
                if let Some(s) = stats {
                    let i = |v: i64| Some(v as f64);
                    let stats = [
                        ("count", Some(s.count as f64)),
                        ("mean", Some(s.mean)),
                        ("std", s.std),
                        ("min", i(s.min)),
                        ("p50", i(s.median)),
                        ("p99", i(s.p99)),
                        ("max", i(s.max)),
                    ];
                    cell.push_all(&mut out, metric, &stats);
                }
            }
        }
        let settings = serde_json::json!({"scenarios": r.scenarios, "inputs": r.inputs, "config": r.report.config});
        Parts {
            identity: identity_of(r),
            kind: "bench",
            experiment: "bench".to_string(),
            header: &r.header,
            settings,
            measurements: out,
        }
    }
}
