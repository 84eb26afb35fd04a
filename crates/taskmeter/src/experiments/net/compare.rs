//! How `compare` reads a net record: each (receiver, sender count)'s throughput; higher is
//! better.

use crate::experiments::compared::{note, of_kind, whole, Asked, Compared, LeftOut, Measured};
use std::any::Any;
use taskmeter_model::net::NetRecord;

impl Compared for NetRecord {
    fn unit(&self) -> (&'static str, bool) {
        ("msg/s", true)
    }

    fn measured(&self, side: &[&dyn Any], ask: &Asked, left_out: &mut LeftOut) -> Measured {
        let mut found = Vec::new();
        for (invocation, r) in of_kind::<NetRecord>(side) {
            for p in &r.points {
                let status = if p.error.is_none() { "ok" } else { "failed" };
                if let (Some(t), true) = (p.throughput, whole(status, ask.include_incomplete, left_out)) {
                    let subject = vec![("receiver", p.receiver.clone()), ("senders", p.senders.to_string())];
                    note(&mut found, subject, invocation, t);
                }
            }
        }
        found.sort_by_key(|(s, _)| (s[0].1.clone(), s[1].1.parse::<u32>().unwrap_or(0)));
        found.into_iter().map(|(s, v)| (s, Ok(v))).collect()
    }
}
