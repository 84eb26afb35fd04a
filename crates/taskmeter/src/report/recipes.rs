//! The recipes experiment in the console: per point, one table per runtime of its ways to wait,
//! and the advice computed from it (analysis::recipes).

use super::format::{format_count, format_ns};
use crate::analysis::recipes::{advise, groups_at, RecipeRow, MAX_MISSED};
use crate::model::run::{RowStatus, RunRecord};

/// The budget of the first advice: a tenth of a core per waiting unit.
pub const CPU_BUDGET: f64 = 0.10;
/// The margin of the second: lateness p99 within 20 µs of the best way's.
pub const MARGIN_NS: f64 = 20_000.0;
/// A worker that kept this share of the machine's CPUs busy had it to itself: never within budget.
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

/// The two pieces of advice for one runtime's ways to wait on a machine of `cpus` CPUs, or None
/// when it has one way only.
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
        "  advice: most precise under {:.0} % of a core per unit (and {:.0} % of the machine): {precise}; cheapest {cheapest}\n",
        CPU_BUDGET * 100.0,
        SATURATED * 100.0
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
            let advice = advice_line(group, record.header.environment.cores_online);
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
         the machine's CPUs / the units; cores = the same CPU time over the window, the whole worker. advice: \
         the lowest p99 among the ways that cost at most {:.0} % of a core per unit and less than {:.0} % of \
         the machine's CPUs, and the least CPU among those within {} of the lowest p99",
        MAX_MISSED * 100.0,
        CPU_BUDGET * 100.0,
        SATURATED * 100.0,
        format_ns(MARGIN_NS)
    )
}
