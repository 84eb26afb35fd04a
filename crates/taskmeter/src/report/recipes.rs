//! The recipes experiment in the console: per point, one table per runtime of its ways to wait,
//! and the advice computed from it (analysis::recipes).

use super::format::{format_count, format_ns};
use taskmeter_analysis::recipes::{advise, groups_at, RecipeRow, MAX_MISSED};
use taskmeter_machine::sched::parse_cpu_list;
use taskmeter_model::run::{RowStatus, RunRecord};

/// The budget of the first advice: a tenth of a core per waiting unit.
pub const CPU_BUDGET: f64 = 0.10;
/// The margin of the second: lateness p99 within 20 µs of the best way's.
pub const MARGIN_NS: f64 = 20_000.0;
/// A worker that kept this share of its CPUs (those it may run on: `--cpus`, else the machine's)
/// busy had them to itself: never within budget.
pub const SATURATED: f64 = 0.9;

fn percent(cores: Option<f64>) -> String {
    cores.map_or_else(|| "n/a".into(), |c| format!("{:.1} %", c * 100.0))
}

fn line(row: &RecipeRow) -> Vec<String> {
    let ns = |v: Option<f64>| v.map_or_else(|| "n/a".into(), format_ns);
    vec![
        row.runtime.clone(),
        format_count(row.samples),
        ns(row.p50_ns),
        ns(row.p99_ns),
        ns(row.p99_9_ns),
        ns(row.max_ns),
        format_count(row.early),
        format_count(row.missed),
        percent(row.cpu_per_unit),
        row.cpu_cores.map_or_else(|| "n/a".into(), |c| format!("{c:.2}")),
    ]
}

/// The CPUs the workers at `point` may run on, against which [`SATURATED`] is judged. Without
/// `--cpus` a worker has what taskmeter has (`cores_online`: its affinity, capped by a cgroup
/// quota); with it, the affinity read back from the workers (`Cpus_allowed_list`: what the
/// kernel granted, the largest), else the list asked for.
pub fn worker_cpus(record: &RunRecord, point: usize) -> usize {
    let Some(asked) = &record.settings.sched.cpus else {
        return record.header.environment.cores_online.max(1);
    };
    let read_back = record
        .rows
        .iter()
        .filter(|r| r.point == point)
        .filter_map(|r| r.worker.as_ref()?.sched.as_ref()?.cpus.as_deref())
        .filter_map(|list| parse_cpu_list(list.trim()).ok())
        .map(|cpus| cpus.len())
        .max();
    read_back.unwrap_or(asked.len()).max(1)
}

/// The two pieces of advice for one runtime's ways to wait by workers that may run on `cpus`
/// CPUs, or None when it has one way only.
pub fn advice_line(rows: &[RecipeRow], cpus: usize) -> Option<String> {
    if rows.len() < 2 {
        return None;
    }
    let advice = advise(rows, CPU_BUDGET, SATURATED * cpus as f64, MARGIN_NS);
    let describe = |i: usize| {
        let row = &rows[i];
        format!(
            "{} (p99 {}, {} of a core)",
            row.recipe,
            row.p99_ns.map_or_else(|| "n/a".into(), format_ns),
            percent(row.cpu_per_unit)
        )
    };
    let missed = format!("{:.0} %", MAX_MISSED * 100.0);
    let Some(best) = advice.best else {
        return Some(format!("  advice: none: every way skipped more than {missed} of its periods\n"));
    };
    let precise = advice.precise_within_budget.map_or_else(|| "none".into(), describe);
    let cheapest = format!(
        "within {} of the best ({}): {}",
        format_ns(MARGIN_NS),
        rows[best].recipe,
        advice.cheapest_near_best.map_or_else(|| "none has a CPU figure".into(), describe)
    );
    Some(format!(
        "  advice: most precise under {:.0} % of a core per unit (and {:.0} % of the worker's {cpus} CPU{}): {precise}; cheapest {cheapest}\n",
        CPU_BUDGET * 100.0,
        SATURATED * 100.0,
        if cpus == 1 { "" } else { "s" }
    ))
}

/// One runtime's ways to wait at one point (or the runtimes that have only their own sleep), or
/// the ways not measured there (no lines, only `notes`).
pub struct RecipeTable {
    pub title: String,
    /// The header, then one line per way to wait.
    pub lines: Vec<Vec<String>>,
    pub advice: Option<String>,
    /// Ways not measured, one line per reason: "skipped (why): thread+fifo, c-thread+fifo".
    pub notes: Vec<String>,
}

/// The ways not measured at a point (skipped, failed, interrupted), grouped by their reason.
fn not_measured(record: &RunRecord, point: usize) -> Vec<String> {
    let mut reasons: Vec<(String, Vec<&str>)> = Vec::new();
    let unmeasured = |s: RowStatus| matches!(s, RowStatus::Skipped | RowStatus::Failed | RowStatus::Interrupted);
    for row in record.rows.iter().filter(|r| r.point == point && unmeasured(r.status)) {
        let what = match row.status {
            RowStatus::Skipped => "skipped",
            RowStatus::Interrupted => "interrupted",
            _ => "FAILED",
        };
        let reason = format!("{what} ({})", row.reason.as_deref().unwrap_or("no reason given"));
        match reasons.iter_mut().find(|(r, _)| *r == reason) {
            Some((_, ways)) => ways.push(&row.runtime),
            None => reasons.push((reason, vec![&row.runtime])),
        }
    }
    reasons
        .into_iter()
        .map(|(reason, mut ways)| {
            ways.sort_unstable();
            format!("{reason}: {}", ways.join(", "))
        })
        .collect()
}

/// Every point's tables: runtimes with recipes one table each, with their advice; the runtimes
/// that have only their own sleep together in one table.
pub fn tables(record: &RunRecord) -> Vec<RecipeTable> {
    let header: Vec<String> =
        ["way to wait", "samples", "lateness p50", "p99", "p99.9", "max", "early", "missed", "CPU/unit", "cores"]
            .map(String::from)
            .into();
    let table = |title: String, rows: Vec<&RecipeRow>, advice: Option<String>| RecipeTable {
        title,
        lines: std::iter::once(header.clone()).chain(rows.into_iter().map(line)).collect(),
        advice,
        notes: Vec::new(),
    };
    let mut out = Vec::new();
    for point in &record.points {
        let (with_recipes, alone): (Vec<_>, Vec<_>) =
            groups_at(record, point.index).into_iter().partition(|g| g.len() > 1);
        let at = Some(point.label()).filter(|l| l != "-").map_or_else(String::new, |l| format!(" at {l}"));
        for group in &with_recipes {
            let advice = advice_line(group, worker_cpus(record, point.index));
            out.push(table(format!("{}{at}", group[0].base), group.iter().collect(), advice));
        }
        if !alone.is_empty() {
            out.push(table(format!("its own sleep only{at}"), alone.iter().flatten().collect(), None));
        }
        let notes = not_measured(record, point.index);
        if !notes.is_empty() {
            out.push(RecipeTable { title: format!("not measured{at}"), lines: Vec::new(), advice: None, notes });
        }
    }
    out
}

/// How to read the tables.
pub fn explain() -> String {
    format!(
        "way to wait = RUNTIME (its own sleep) or RUNTIME/RECIPE (taskmeter list recipes); every way waits until \
         the same absolute deadline in the same loop; lateness = wake-up - deadline; early = samples that woke \
         before it; missed = whole periods slept through (a way that skips more than {:.0} % of its periods \
         did not keep time and is never advised); CPU/unit = the worker's CPU over the measured window (every thread, from the kernel) / the \
         window / the units: 100 % is one core kept busy by each waiting unit, and no unit gets more than \
         the worker's CPUs / the units; cores = the same CPU time over the window, the whole worker. advice: \
         the lowest p99 among the ways that cost at most {:.0} % of a core per unit and less than {:.0} % of \
         the worker's CPUs (those it may run on: --cpus, else the machine's), and the least CPU among those \
         within {} of the lowest p99",
        MAX_MISSED * 100.0,
        CPU_BUDGET * 100.0,
        SATURATED * 100.0,
        format_ns(MARGIN_NS)
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;
    use taskmeter_machine::counters::Counters;
    use taskmeter_machine::env::Environment;
    use taskmeter_model::header::Record;
    use taskmeter_model::run::{Order, PerMetric, Row, RunRecord};
    use taskmeter_model::sweep::Point;
    use taskmeter_stats::Summary;

    /// 10 units a worker, 1 s window: `thread` (its own sleep) p99 80 µs at 0.01 of a core,
    /// `thread/spin` p99 2 µs at 0.95 of a core (9.5 % of a core per unit: within the budget).
    /// The machine has 8 CPUs; `cpus`: the `--cpus` list the workers were given and read back.
    fn record(cpus: Option<&str>) -> RunRecord {
        let row = |runtime: &str, lateness_ns: i64, cpu_ns: u64| {
            let summary = Summary::of(&[lateness_ns; 10], &[0; 10]);
            let counts = json!({
                "units_planned": 10, "units": 10, "iterations_total": 10, "iterations_measured": 10,
                "iterations_per_s": 10.0, "units_starved": 0, "samples_total": 10, "samples_warmup": 0,
                "samples_measured": 10, "missed_periods": 0, "missed_periods_warmup": 0, "early_wakeups": 0,
                "atomic_sum": null, "create_ns": 0, "create_per_unit_ns": 0.0
            });
            let worker = json!({
                "runtime_version": null, "toolchain": "", "pid": null, "wall_ns": 1_000_000_000u64, "stderr": null,
                "sched": {"policy": "SCHED_OTHER", "priority": 0, "nice": 0, "timerslack_ns": null, "cpus": cpus.unwrap_or("0-7")}
            });
            Row {
                statistics: Some(PerMetric::from_fn(|_| summary.clone())),
                counts: Some(serde_json::from_value(counts).unwrap()),
                worker: Some(serde_json::from_value(worker).unwrap()),
                counters: Some(Counters { start_ns: 0, end_ns: 1_000_000_000, cpu_ns, ..Default::default() }),
                ..Row::new(runtime, RowStatus::Ok)
            }
        };
        let settings = json!({
            "runtimes": ["thread", "thread/spin"], "experiment": "sleep", "units": 10, "priority_classes": 1,
            "start_limit_ns": 1_000_000_000u64, "together": false, "duration_ns": 1_000_000_000u64, "warmup_ns": 0,
            "sleep": {"mode": "absolute", "schedule": {"kind": "fixed", "ns": 1_000_000}}, "sleep_spec": "fixed:1ms",
            "busy": {"iters": 0, "yield": false}, "grace_ns": 1_000_000_000u64,
            "sched": {"policy": null, "timer_slack_ns": null, "cpus": cpus.map(|_| vec![1]), "mlock": false}
        });
        let environment = Environment { cores_online: 8, ..Default::default() };
        RunRecord {
            header: RunRecord::new_header(Vec::new(), String::new(), environment),
            experiment: "recipes".into(),
            metric: taskmeter_model::run::Metric::Lateness,
            settings: serde_json::from_value(settings).unwrap(),
            sweeps: Vec::new(),
            points: vec![Point { index: 0, values: Vec::new() }],
            order: Order { shuffled: false, seed: None },
            rows: vec![row("thread", 80_000, 10_000_000), row("thread/spin", 2_000, 950_000_000)],
            taskmeter_cpu_ns: None,
            taskmeter_prepared: None,
        }
    }

    #[test]
    fn saturation_is_judged_against_the_cpus_the_worker_was_given() {
        // Given 1 CPU of 8 (--cpus 1): the spinning worker kept 0.95 of it busy, over 90 %: not
        // within budget, so its own sleep is the most precise way within it.
        let one = record(Some("1"));
        assert_eq!(worker_cpus(&one, 0), 1);
        let advice = tables(&one)[0].advice.clone().unwrap();
        assert!(advice.contains("(and 90 % of the worker's 1 CPU): sleep (p99"), "{advice}");
        // The same figures with the whole machine (no --cpus): 0.95 of 8 CPUs is far from
        // saturation, and spin is both within budget and the most precise.
        let eight = record(None);
        assert_eq!(worker_cpus(&eight, 0), 8);
        let advice = tables(&eight)[0].advice.clone().unwrap();
        assert!(advice.contains("(and 90 % of the worker's 8 CPUs): spin (p99"), "{advice}");
        // Without a read-back (an older record, a worker that failed to start), the list asked for.
        let mut asked = record(Some("1"));
        asked.rows.iter_mut().for_each(|r| r.worker = None);
        assert_eq!(worker_cpus(&asked, 0), 1);
    }
}
