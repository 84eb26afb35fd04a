//! Why the rows differ: each runtime's lateness next to what the kernel counted for its worker
//! over the measured window, per wake-up (`--table why`, the report's section, and the data of
//! its chart of lateness against CPU per wake-up).

use super::format::{format_count, format_ns};
use super::tables::{at_point, Table};
use taskmeter_analysis::cells::{cells, Cell};
use taskmeter_model::run::{Counters, Metric, Row, RunRecord};
use taskmeter_protocol::frames::ViewDelay;

/// A counter of a row divided by the wake-ups in its window (None without counters, without a
/// wake-up, or where the counter is unavailable).
pub fn per_wakeup(row: &Row, counter: impl Fn(&Counters) -> Option<u64>) -> Option<f64> {
    let c = row.counters.as_ref().filter(|c| c.wakeups > 0)?;
    Some(counter(c)? as f64 / c.wakeups as f64)
}

/// Clock ticks below which the user/system split says nothing (10 ticks: 100 ms at 100 Hz).
const MIN_TICKS_NS: u64 = 100_000_000;

/// The share of system time, from the clock ticks; None below [`MIN_TICKS_NS`].
fn system_share(row: &Row) -> Option<f64> {
    let c = row.counters.as_ref()?;
    let total = c.user_ns + c.system_ns;
    (total >= MIN_TICKS_NS).then(|| c.system_ns as f64 / total as f64)
}

/// One runtime at one point, on the precision/cost plane.
pub struct FrontierPoint<'a> {
    pub runtime: &'a str,
    pub cpu_per_wakeup_ns: f64,
    pub lateness_p50_ns: f64,
    pub lateness_p99_ns: f64,
}

/// The runtimes of a point that have both lateness and CPU per wake-up (means over repetitions).
pub fn frontier(record: &RunRecord, point: usize) -> Vec<FrontierPoint<'_>> {
    cells(record, point)
        .into_iter()
        .filter(|c| c.repetitions() > 0)
        .filter_map(|cell| {
            Some(FrontierPoint {
                runtime: cell.runtime,
                cpu_per_wakeup_ns: cell.mean_of(|r| per_wakeup(r, |c| Some(c.cpu_ns)))?,
                lateness_p50_ns: cell.mean_percentile(Metric::Lateness, |s| s.p50)?,
                lateness_p99_ns: cell.mean_percentile(Metric::Lateness, |s| s.p99)?,
            })
        })
        .collect()
}

pub fn has_counters(record: &RunRecord) -> bool {
    record.rows.iter().any(|r| r.counters.is_some())
}

/// Every runtime at every point: lateness p50 and p99 beside the counters per wake-up (means
/// over repetitions). A figure that is missing says why below the table, never a guess.
pub fn why_table_of(record: &RunRecord) -> Table {
    let swept: Vec<&str> = record.sweeps.iter().map(|s| s.param.name()).collect();
    let mut header = vec!["runtime".to_string()];
    header.extend(swept.iter().map(|s| s.to_string()));
    header.extend(
        [
            "wake-ups",
            "lateness p50",
            "p99",
            "CPU/wake",
            "sys %",
            "vol cs/wake",
            "invol cs/wake",
            "migr/wake",
            "runq wait/wake",
            "threads",
            "faults",
        ]
        .map(str::to_string),
    );
    let mut lines = Vec::new();
    let mut missing = Vec::new();
    for point in &record.points {
        for cell in cells(record, point.index).into_iter().filter(|c| c.repetitions() > 0) {
            for row in &cell.measured {
                if let Some(why) = &row.counters_missing {
                    missing.push((cell.runtime.to_string(), format!("no counters{}: {why}", at_point(record, row))));
                }
                for why in row.counters.iter().flat_map(|c| &c.unavailable) {
                    let line = (cell.runtime.to_string(), why.clone());
                    if !missing.contains(&line) {
                        missing.push(line);
                    }
                }
            }
            let mut line = vec![cell.runtime.to_string()];
            line.extend(point.values.iter().map(|(p, v)| p.format_value(*v)));
            line.extend(figures(&cell));
            lines.push(line);
        }
    }
    Table { header, lines, without_statistics: missing }
}

fn figures(cell: &Cell) -> Vec<String> {
    let ns = |v: Option<f64>| v.map_or_else(|| "n/a".into(), format_ns);
    let ratio = |v: Option<f64>| v.map_or_else(|| "n/a".into(), |v| format!("{v:.2}"));
    let per = |f: fn(&Counters) -> Option<u64>| cell.mean_of(|r| per_wakeup(r, f));
    let counter = |f: fn(&Counters) -> u64| cell.mean_of(|r| r.counters.as_ref().map(|c| f(c) as f64));
    vec![
        counter(|c| c.wakeups).map_or_else(|| "n/a".into(), |v| format_count(v.round() as u64)),
        ns(cell.mean_percentile(Metric::Lateness, |s| s.p50)),
        ns(cell.mean_percentile(Metric::Lateness, |s| s.p99)),
        ns(per(|c| Some(c.cpu_ns))),
        cell.mean_of(system_share).map_or_else(|| "-".into(), |v| format!("{:.0}", v * 100.0)),
        ratio(per(|c| c.voluntary_switches)),
        ratio(per(|c| c.involuntary_switches)),
        ratio(per(|c| c.migrations)),
        ns(per(|c| c.runqueue_wait_ns)),
        counter(|c| c.threads as u64).map_or_else(|| "n/a".into(), |v| format!("{v:.0}")),
        counter(|c| c.minor_faults + c.major_faults).map_or_else(|| "n/a".into(), |v| format_count(v.round() as u64)),
    ]
}

/// The runtimes that reported their own view (protocol frame `V`), beside taskmeter's
/// measurement of the same window: the runtime's delay p50 and p99, taskmeter's lateness p50
/// and p99, and how much of the lateness the runtime's figure leaves out. None when no row has
/// a view.
pub fn view_table_of(record: &RunRecord) -> Option<Table> {
    if !record.rows.iter().any(|r| r.runtime_view.is_some()) {
        return None;
    }
    let points = record.points.len() > 1;
    let mut header = vec!["runtime".to_string()];
    if points {
        header.push("point".into());
    }
    header.extend(
        ["its source", "its delay p50", "p99", "lateness p50", "p99", "p50 unseen", "busy", "parks/wake"]
            .map(str::to_string),
    );
    let ns = |v: Option<f64>| v.map_or_else(|| "-".into(), format_ns);
    let mut lines = Vec::new();
    for point in &record.points {
        for cell in
            cells(record, point.index).into_iter().filter(|c| c.measured.iter().any(|r| r.runtime_view.is_some()))
        {
            let view = |f: fn(&ViewDelay) -> u64| {
                cell.mean_of(|r| r.runtime_view.as_ref()?.delay.filter(|d| d.count > 0).map(|d| f(&d) as f64))
            };
            let own_p50 = view(|d| d.p50_ns);
            let lateness_p50 = cell.mean_percentile(Metric::Lateness, |s| s.p50);
            let source = cell
                .measured
                .iter()
                .find_map(|r| r.runtime_view.as_ref())
                .map(|v| v.source.clone())
                .unwrap_or_default();
            let mut line = vec![cell.runtime.to_string()];
            if points {
                line.push(point.label());
            }
            line.extend([
                source,
                ns(own_p50),
                ns(view(|d| d.p99_ns)),
                ns(lateness_p50),
                ns(cell.mean_percentile(Metric::Lateness, |s| s.p99)),
                ns(own_p50.zip(lateness_p50).map(|(own, ours)| ours - own)),
                cell.mean_of(|r| r.runtime_view.as_ref()?.busy_ratio)
                    .map_or_else(|| "-".into(), |b| format!("{:.1} %", b * 100.0)),
                cell.mean_of(|r| {
                    Some(
                        r.runtime_view.as_ref()?.parks? as f64
                            / r.counters.as_ref().filter(|c| c.wakeups > 0)?.wakeups as f64,
                    )
                })
                .map_or_else(|| "-".into(), |p| format!("{p:.2}")),
            ]);
            lines.push(line);
        }
    }
    Some(Table { header, lines, without_statistics: Vec::new() })
}

/// How each runtime of the record keeps time, as this taskmeter knows it (`timer` of its
/// manifest or in-process entry): "RUNTIME: how", once per runtime, in the table's order.
pub fn timers(record: &RunRecord) -> Vec<String> {
    let mut lines: Vec<String> = Vec::new();
    for row in record.rows_in_order() {
        let Some(info) = taskmeter_measure::runtimes::find(&row.runtime).filter(|i| !i.timer.is_empty()) else {
            continue;
        };
        let line = format!("{}: {}", info.base, info.timer);
        if !lines.contains(&line) {
            lines.push(line);
        }
    }
    lines
}

/// How to read the runtime's own view.
pub fn explain_view() -> String {
    "its delay = the delay the runtime's own API reports over the measured window (its source names the API; \
     where the API has buckets, a percentile is its bucket's upper bound); lateness = taskmeter's measurement \
     of the same wake-ups; p50 unseen = lateness p50 - its delay p50: the part of a wake-up's lateness the \
     runtime's own figure does not show; busy = share of the window the runtime's workers were busy; parks/wake \
     = times its workers went idle per wake-up"
        .into()
}

/// How to read the table.
pub fn explain_why() -> String {
    "counted by the kernel for the whole worker process (every thread: its runtime's own threads and \
     the worker's writer included) over the measured window, read by taskmeter (taskstats, /proc): the first \
     reading ends as the window begins, the last ends 20 ms before it closes; per wake-up = divided by \
     the samples that woke between the two readings. \
     CPU = time on a CPU (schedstat); sys % = system share of the clock ticks (- under 100 ms); \
     vol / invol cs = voluntary (blocked) / involuntary (preempted) context switches; migr = moves to \
     another CPU; runq wait = time runnable but waiting for a CPU; threads at the window's end; faults = \
     page faults in the window; with repetitions, each figure is their mean"
        .into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn per_wakeup_divides_by_the_wakeups_in_the_window() {
        let mut row: Row = serde_json::from_value(serde_json::json!({
            "runtime": "thread", "point": 0, "sequence": 0, "status": "ok", "reason": null, "plan": null,
            "worker": null, "counts": null, "statistics": null, "histograms": null
        }))
        .unwrap();
        assert_eq!(per_wakeup(&row, |c| Some(c.cpu_ns)), None, "no counters");
        row.counters = Some(Counters { wakeups: 0, cpu_ns: 5, ..Counters::default() });
        assert_eq!(per_wakeup(&row, |c| Some(c.cpu_ns)), None, "no wake-up");
        row.counters = Some(Counters {
            wakeups: 4,
            cpu_ns: 10_000,
            voluntary_switches: Some(6),
            user_ns: 30_000_000,
            system_ns: 90_000_000,
            ..Counters::default()
        });
        assert_eq!(per_wakeup(&row, |c| Some(c.cpu_ns)), Some(2_500.0));
        assert_eq!(per_wakeup(&row, |c| c.voluntary_switches), Some(1.5));
        assert_eq!(per_wakeup(&row, |c| c.migrations), None, "unavailable stays unavailable");
        assert_eq!(system_share(&row), Some(0.75));
        row.counters.as_mut().unwrap().system_ns = 60_000_000;
        assert_eq!(system_share(&row), None, "9 ticks say nothing");
    }

    #[test]
    fn each_runtime_of_the_record_says_once_how_it_keeps_time() {
        let ids = ["cpp-asio", "thread", "cpp-asio/timerfd", "cpp-asio"];
        let rows = ids.iter().map(|id| Row::new(id, taskmeter_model::run::RowStatus::Ok)).collect();
        let record = crate::report::tables::tests::record(&ids, 1, rows);
        let timer = |id: &str| taskmeter_measure::runtimes::find(id).unwrap().timer;
        assert!(!timer("cpp-asio").is_empty() && !timer("thread").is_empty());
        // A recipe's row is its runtime's: one line for cpp-asio, whatever its rows.
        let said = timers(&record);
        assert_eq!(said.len(), 2, "{said:?}");
        for id in ["cpp-asio", "thread"] {
            assert!(said.contains(&format!("{id}: {}", timer(id))), "{said:?}");
        }
    }
}
