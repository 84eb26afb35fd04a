//! The history's entry of a net run: throughput, ratio and round trip, by receiver, senders and
//! repetition.

use crate::history::entry::{identity_of, status_of, summary_stats, Cell, Parts, Recorded};
use taskmeter_model::net::NetRecord;

impl Recorded for NetRecord {
    fn parts(&self) -> Parts<'_> {
        let r = self;
        let mut out = Vec::new();
        for p in &r.points {
            let cell = Cell {
                subject: &p.receiver,
                point: format!("senders={}", p.senders),
                repetition: p.repetition,
                status: status_of(p.error.is_none(), false),
                version: p.receiver_version.as_ref(),
            };
            cell.push(&mut out, "throughput", "value", p.throughput);
            cell.push(&mut out, "ratio", "value", p.ratio);
            if let Some(rt) = &p.round_trip {
                cell.push_all(&mut out, "round_trip", &summary_stats(rt));
            }
        }
        Parts {
            identity: identity_of(r),
            kind: "net",
            experiment: "net".to_string(),
            header: &r.header,
            settings: serde_json::json!({"settings": r.settings}),
            measurements: out,
        }
    }
}
