//! From recorded events to statistics.
//!
//! Definitions:
//! - A *unit* completes at a `record` (n units) or at the first `complete(id)` of a started id.
//! - The *gap* of a unit is the time since the previous unit completed, in any thread or process,
//!   warm-up included; the first unit of a job counts from the job's start. `record_n(n)` is n
//!   units at one instant: one gap since the previous unit and n - 1 gaps of 0, so the gaps always
//!   add up to the time they cover and `ips = 1 / mean gap` is the rate of units.
//! - Only units completed inside `[warmup_end, end)` give gaps and latencies. Units before are
//!   counted as warm-up, after as drain; both are reported, neither is mixed in.

use crate::event::{Event, Kind};
use crate::local::Window;
use crate::report::{IdCounts, Measured, Outside, Stats};
use crate::stats::{mean, modes, nearest_rank, sample_std};
use std::collections::{HashMap, HashSet};

pub struct Analysis {
    pub measured: Measured,
    /// The measured gaps and latencies, sorted (for histograms).
    pub gaps: Vec<i64>,
    pub latencies: Vec<i64>,
}

/// Analyses one job's events (in any order). `warmup_units` and `last_warmup_t` are the warm-up
/// units counted without being stored (in process).
pub fn analyze(mut events: Vec<Event>, window: Window, warmup_units: u64, last_warmup_t: Option<u64>) -> Analysis {
    // A stable sort finds the runs each thread wrote in order; at equal times starts go first,
    // so a unit that starts and completes within one ns still has a start.
    events.sort_by_key(|e| (e.t_ns, e.word >> 62 != 1));
    let mut gaps: Vec<i64> = Vec::new();
    let mut latencies: Vec<i64> = Vec::new();
    let mut outside = Outside { warmup_units, ..Outside::default() };
    let mut ids = IdCounts::default();
    let mut open: HashMap<u64, u64> = HashMap::new();
    let mut done: HashSet<u64> = HashSet::new();
    let mut previous = last_warmup_t.unwrap_or(window.start_ns);
    let mut in_flight_at_end: Option<HashSet<u64>> = None;

    for event in events {
        if in_flight_at_end.is_none() && event.t_ns >= window.end_ns {
            in_flight_at_end = Some(open.keys().copied().collect());
        }
        let (units, latency) = match event.kind() {
            Some(Kind::Record) => (event.value(), None),
            Some(Kind::Start) => {
                let id = event.value();
                ids.started += 1;
                match open.entry(id) {
                    std::collections::hash_map::Entry::Occupied(_) => ids.duplicate_starts += 1,
                    std::collections::hash_map::Entry::Vacant(slot) => {
                        slot.insert(event.t_ns);
                        done.remove(&id);
                    }
                }
                continue;
            }
            Some(Kind::Complete) => {
                let id = event.value();
                match open.remove(&id) {
                    Some(started) => {
                        ids.completed += 1;
                        done.insert(id);
                        (1, Some(event.t_ns.saturating_sub(started) as i64))
                    }
                    None if done.contains(&id) => {
                        ids.duplicate_completions += 1;
                        continue;
                    }
                    None => {
                        ids.unknown_ids += 1;
                        continue;
                    }
                }
            }
            None => continue, // refused when decoded
        };
        if event.t_ns < window.warmup_end_ns {
            outside.warmup_units += units;
        } else if event.t_ns < window.end_ns {
            gaps.push(event.t_ns.saturating_sub(previous) as i64);
            gaps.extend(std::iter::repeat_n(0, units as usize - 1));
            latencies.extend(latency);
        } else {
            outside.after_units += units;
        }
        previous = previous.max(event.t_ns);
    }
    let at_end = in_flight_at_end.unwrap_or_else(|| open.keys().copied().collect());
    ids.in_flight_at_end = at_end.len() as u64;
    ids.never_completed = open.len() as u64;
    ids.completed_in_drain = at_end.iter().filter(|id| !open.contains_key(id)).count() as u64;

    let gap = stats_of(&mut gaps);
    let measured = Measured {
        units: gaps.len() as u64,
        ips: gap.as_ref().filter(|g| g.mean > 0.0).map(|g| 1e9 / g.mean),
        gap,
        latency: stats_of(&mut latencies),
        outside,
        ids,
    };
    Analysis { measured, gaps, latencies }
}

/// Statistics of durations (ns); None when empty. Sorts `values`.
pub fn stats_of(values: &mut [i64]) -> Option<Stats> {
    if values.is_empty() {
        return None;
    }
    let (m, std) = (mean(values), sample_std(values));
    values.sort_unstable();
    let pick = |q: u64| values[nearest_rank(q, values.len()) - 1];
    Some(Stats {
        count: values.len() as u64,
        mean: m,
        std,
        deviation_pct: std.filter(|_| m > 0.0).map(|s| 100.0 * s / m),
        median: pick(50_000),
        p99: pick(99_000),
        min: values[0],
        max: values[values.len() - 1],
        mode: modes(values).into_iter().take(5).collect(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: Window = Window { start_ns: 0, warmup_end_ns: 1_000, end_ns: 10_000 };

    #[test]
    fn gaps_span_the_warmup_boundary_and_exclude_outside_units() {
        let events = vec![
            Event::record(500, 1),    // warm-up
            Event::record(900, 2),    // warm-up: the first measured gap starts here
            Event::record(1_100, 1),  // gap 200
            Event::record(1_400, 3),  // gaps 300, 0, 0
            Event::record(2_000, 1),  // gap 600
            Event::record(10_000, 1), // after the window
        ];
        let a = analyze(events, W, 0, None).measured;
        assert_eq!(a.units, 5);
        assert_eq!((a.outside.warmup_units, a.outside.after_units), (3, 1));
        let gap = a.gap.unwrap();
        // gaps 200 300 0 0 600: mean 220, sum of squares of deviations
        // 20^2 + 80^2 + 220^2 * 2 + 380^2 = 400 + 6400 + 96800 + 144400 = 248000; /4 = 62000.
        assert_eq!(gap.mean, 220.0);
        assert!((gap.std.unwrap() - 62_000f64.sqrt()).abs() < 1e-9);
        assert_eq!((gap.min, gap.median, gap.p99, gap.max), (0, 200, 600, 600));
        assert_eq!(gap.mode, vec![0]);
        assert!((a.ips.unwrap() - 1e9 / 220.0).abs() < 1e-6);
    }

    #[test]
    fn warmup_counted_in_process_is_the_predecessor() {
        // In process the warm-up units are counted, not stored: the last one's time is passed in.
        let a = analyze(vec![Event::record(1_500, 1), Event::record(2_500, 1)], W, 4, Some(900)).measured;
        assert_eq!(a.outside.warmup_units, 4);
        let gap = a.gap.unwrap();
        assert_eq!((gap.min, gap.max, gap.count), (600, 1_000, 2));
    }

    #[test]
    fn the_first_unit_of_a_job_counts_from_its_start() {
        let w = Window { start_ns: 100, warmup_end_ns: 100, end_ns: 10_000 };
        let gap = analyze(vec![Event::record(350, 1)], w, 0, None).measured.gap.unwrap();
        assert_eq!((gap.mean, gap.std, gap.deviation_pct), (250.0, None, None));
    }

    #[test]
    fn ids_give_latencies_and_every_anomaly_is_counted() {
        let events = vec![
            Event::start(1_000, 1),
            Event::start(1_100, 2),
            Event::complete(1_500, 2),  // latency 400
            Event::complete(1_600, 1),  // latency 600
            Event::complete(1_700, 99), // never started
            Event::complete(1_800, 1),  // twice
            Event::start(1_900, 3),     // never completed
            Event::start(2_000, 4),
            Event::start(2_000, 4), // started twice
            Event::start(9_000, 5), // in flight at the end, completed in the drain
            Event::complete(11_000, 5),
            Event::record(1_200, 3),
        ];
        let a = analyze(events, W, 0, None).measured;
        assert_eq!(a.units, 5, "3 recorded + 2 completed in the window");
        assert_eq!(a.outside.after_units, 1);
        let latency = a.latency.unwrap();
        assert_eq!((latency.count, latency.min, latency.max, latency.mean), (2, 400, 600, 500.0));
        let ids = a.ids;
        assert_eq!((ids.started, ids.completed, ids.duplicate_starts), (6, 3, 1));
        assert_eq!((ids.unknown_ids, ids.duplicate_completions), (1, 1));
        assert_eq!((ids.in_flight_at_end, ids.completed_in_drain, ids.never_completed), (3, 1, 2));
    }

    #[test]
    fn nothing_recorded_gives_no_statistics() {
        let a = analyze(Vec::new(), W, 0, None).measured;
        assert_eq!((a.units, a.ips, a.gap, a.latency), (0, None, None, None));
    }
}
