//! The recipes experiment's answer: for each runtime, its ways to wait (`RUNTIME/RECIPE` rows,
//! and its own sleep) side by side at one point, with what each costs in CPU, and which to use.
//!
//! CPU per unit = the worker's CPU time over the measured window (every thread, from the
//! kernel's counters: see machine::counters) / the window / the units: the share of one core
//! each waiting unit costs, the runtime's own threads and taskmeter's writer included. The CPU
//! time is schedstat's, per thread, unless a thread ended inside the window (a unit that ended
//! before the last reading on a loaded machine): then the clock ticks of the whole process,
//! which keep what ended threads used.

use super::cells::{cells, Cell};
use taskmeter_model::run::{Metric, Row, RunRecord};
use taskmeter_protocol::plan::DEFAULT_WAIT;

/// One way to wait, at one point, over its repetitions.
#[derive(Clone, Debug, PartialEq)]
pub struct RecipeRow {
    /// `thread/spin`; `thread` for the runtime's own sleep.
    pub runtime: String,
    /// The runtime it belongs to, and the recipe (`sleep`: its own).
    pub base: String,
    pub recipe: String,
    pub p50_ns: Option<f64>,
    pub p99_ns: Option<f64>,
    pub p99_9_ns: Option<f64>,
    pub max_ns: Option<f64>,
    /// Measured samples that woke before their intended time, every repetition.
    pub early: u64,
    pub samples: u64,
    /// Whole periods slept through (absolute mode), every repetition: a way that skips many
    /// did not keep time, however small its lateness.
    pub missed: u64,
    /// Cores per unit (1.0: one core kept busy by each unit); None without counters.
    pub cpu_per_unit: Option<f64>,
    /// Cores the whole worker kept busy (at most the machine's: 100 spinning units on 2 cores
    /// cost 0.02 of a core each, and the whole machine).
    pub cpu_cores: Option<f64>,
}

/// Splits `thread/spin` into (`thread`, `spin`), `thread+fifo` into (`thread`, `sleep+fifo`);
/// a runtime alone waits with its own sleep.
pub fn split(runtime: &str) -> (&str, String) {
    match runtime.find(['/', '+']) {
        None => (runtime, DEFAULT_WAIT.to_string()),
        Some(at) if runtime[at..].starts_with('+') => (&runtime[..at], format!("{DEFAULT_WAIT}{}", &runtime[at..])),
        Some(at) => (&runtime[..at], runtime[at + 1..].to_string()),
    }
}

/// The cores one row's worker kept busy over its measured window.
pub fn cpu_cores(row: &Row) -> Option<f64> {
    let counters = row.counters.as_ref()?;
    let window = counters.end_ns.checked_sub(counters.start_ns).filter(|w| *w > 0)?;
    let cpu_ns = match counters.threads_exited {
        0 => counters.cpu_ns,
        _ => counters.user_ns + counters.system_ns,
    };
    Some(cpu_ns as f64 / window as f64)
}

/// The cores per unit one row's worker kept busy over its measured window.
pub fn cpu_per_unit(row: &Row) -> Option<f64> {
    let units = row.counts.as_ref()?.units;
    (units > 0).then(|| Some(cpu_cores(row)? / units as f64)).flatten()
}

fn of(cell: &Cell) -> RecipeRow {
    let (base, recipe) = split(cell.runtime);
    RecipeRow {
        runtime: cell.runtime.to_string(),
        base: base.to_string(),
        recipe,
        p50_ns: cell.mean_percentile(Metric::Lateness, |s| s.p50),
        p99_ns: cell.mean_percentile(Metric::Lateness, |s| s.p99),
        p99_9_ns: cell.mean_percentile(Metric::Lateness, |s| s.p99_9),
        max_ns: cell.max(Metric::Lateness).map(|v| v as f64),
        early: cell.sum(|r| r.counts.as_ref().map(|c| c.early_wakeups)),
        samples: cell.samples(Metric::Lateness),
        missed: cell.sum(|r| r.counts.as_ref().map(|c| c.missed_periods)),
        cpu_per_unit: cell.mean_of(cpu_per_unit),
        cpu_cores: cell.mean_of(cpu_cores),
    }
}

/// The measured ways to wait at `point`, grouped by runtime in the run's order.
pub fn groups_at(record: &RunRecord, point: usize) -> Vec<Vec<RecipeRow>> {
    let mut groups: Vec<Vec<RecipeRow>> = Vec::new();
    for cell in cells(record, point).iter().filter(|c| c.repetitions() > 0) {
        let row = of(cell);
        match groups.iter_mut().find(|g| g[0].base == row.base) {
            Some(group) => group.push(row),
            None => groups.push(vec![row]),
        }
    }
    groups
}

/// The share of its periods a way may skip and still be advised: a 1 s window at 1 ms on a
/// shared machine skips 2-4 % (a preempted wake-up sleeps through the next deadline); a sleep
/// 65 µs late at a 50 µs period skips more than half.
pub const MAX_MISSED: f64 = 0.05;

impl RecipeRow {
    /// Whether it kept time: it skipped at most [`MAX_MISSED`] of its periods.
    pub fn kept_time(&self) -> bool {
        (self.missed as f64) <= MAX_MISSED * (self.samples + self.missed) as f64
    }
}

/// What to use, among one runtime's ways to wait (indices into its rows).
#[derive(Debug, PartialEq, Eq)]
pub struct Advice {
    /// The lowest lateness p99 of all.
    pub best: Option<usize>,
    /// The lowest p99 among those that cost at most the budget of a core per unit and left
    /// the machine some of its CPUs.
    pub precise_within_budget: Option<usize>,
    /// The least CPU among those whose p99 is within the margin of the best's.
    pub cheapest_near_best: Option<usize>,
}

/// Picks from `rows` with `budget` (cores per unit, e.g. 0.1), `saturated` (the cores above
/// which a worker had the machine to itself, e.g. 90 % of its CPUs: within budget per unit, not
/// overall) and `margin_ns` (e.g. 20 µs). A row without a p99, or that skipped more than
/// [`MAX_MISSED`] of its periods, is never picked; one without a CPU figure is never picked on
/// cost. Ties go to the first row (the runtime's own sleep).
pub fn advise(rows: &[RecipeRow], budget: f64, saturated: f64, margin_ns: f64) -> Advice {
    let lowest = |candidates: &mut dyn Iterator<Item = (usize, f64)>| {
        candidates.fold(None, |best: Option<(usize, f64)>, (i, v)| match best {
            Some((_, b)) if b <= v => best,
            _ => Some((i, v)),
        })
    };
    let p99s = || rows.iter().enumerate().filter(|(_, r)| r.kept_time()).filter_map(|(i, r)| Some((i, r.p99_ns?)));
    let best = lowest(&mut p99s());
    let affordable =
        |r: &RecipeRow| r.cpu_per_unit.is_some_and(|c| c <= budget) && r.cpu_cores.is_some_and(|c| c < saturated);
    let precise = lowest(&mut p99s().filter(|(i, _)| affordable(&rows[*i])));
    let cheapest = best.and_then(|(_, best_p99)| {
        lowest(
            &mut p99s()
                .filter(|(_, p99)| *p99 <= best_p99 + margin_ns)
                .filter_map(|(i, _)| Some((i, rows[i].cpu_per_unit?))),
        )
    });
    Advice {
        best: best.map(|(i, _)| i),
        precise_within_budget: precise.map(|(i, _)| i),
        cheapest_near_best: cheapest.map(|(i, _)| i),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(recipe: &str, p99_us: f64, cpu: Option<f64>) -> RecipeRow {
        RecipeRow {
            runtime: format!("c-thread/{recipe}"),
            base: "c-thread".into(),
            recipe: recipe.into(),
            p50_ns: Some(p99_us * 500.0),
            p99_ns: Some(p99_us * 1000.0),
            p99_9_ns: None,
            max_ns: None,
            early: 0,
            samples: 100,
            missed: 0,
            cpu_per_unit: cpu,
            cpu_cores: cpu,
        }
    }

    #[test]
    fn the_advice_picks_as_its_definitions_say() {
        // sleep: p99 80 µs at 1 % of a core; timerfd 75 µs at 1 %; hybrid 6 µs at 12 %; spin 2 µs at 100 %.
        let rows = [
            row("sleep", 80.0, Some(0.01)),
            row("timerfd", 75.0, Some(0.01)),
            row("hybrid", 6.0, Some(0.12)),
            row("spin", 2.0, Some(1.0)),
        ];
        let advice = advise(&rows, 0.10, 1.8, 20_000.0);
        assert_eq!(advice.best, Some(3), "spin has the lowest p99");
        assert_eq!(advice.precise_within_budget, Some(1), "under 10 %: timerfd (75 µs) beats sleep (80 µs)");
        assert_eq!(advice.cheapest_near_best, Some(2), "within 20 µs of 2 µs: hybrid (12 %) is cheaper than spin");
        // A wider budget takes the hybrid; a margin of 1 µs leaves only spin itself.
        assert_eq!(advise(&rows, 0.15, 1.8, 20_000.0).precise_within_budget, Some(2));
        assert_eq!(advise(&rows, 0.10, 1.8, 1_000.0).cheapest_near_best, Some(3));
    }

    #[test]
    fn a_way_that_skipped_periods_is_never_advised() {
        let mut spin = row("spin", 2.0, Some(0.5));
        spin.missed = 6; // 6 of 106 periods
        let rows = [row("sleep", 80.0, Some(0.01)), spin];
        let advice = advise(&rows, 1.0, 1.8, 20_000.0);
        assert_eq!((advice.best, advice.precise_within_budget, advice.cheapest_near_best), (Some(0), Some(0), Some(0)));
        let mut spin = rows[1].clone();
        spin.missed = 5; // 5 of 105: within 5 %
        assert_eq!(advise(&[rows[0].clone(), spin], 1.0, 1.8, 20_000.0).best, Some(1));
    }

    #[test]
    fn a_way_that_took_the_whole_machine_is_not_within_budget() {
        // 100 units spinning on 2 cores: 1.9 % of a core each, and both cores.
        let mut spin = row("spin", 5.0, Some(0.019));
        spin.cpu_cores = Some(1.95);
        let rows = [row("sleep", 900.0, Some(0.005)), spin];
        assert_eq!(advise(&rows, 0.10, 1.8, 20_000.0).precise_within_budget, Some(0));
        assert_eq!(advise(&rows, 0.10, 2.5, 20_000.0).precise_within_budget, Some(1), "on a bigger machine");
    }

    #[test]
    fn rows_without_figures_are_never_picked_and_ties_go_first() {
        let rows = [row("sleep", 50.0, None), row("nanosleep", 50.0, Some(0.02)), row("spin", 50.0, Some(0.9))];
        let advice = advise(&rows, 0.10, 1.8, 0.0);
        assert_eq!(advice.best, Some(0), "a tie goes to the first");
        assert_eq!(advice.precise_within_budget, Some(1), "sleep has no CPU figure");
        assert_eq!(advice.cheapest_near_best, Some(1));
        let mut empty = row("spin", 1.0, Some(1.0));
        empty.p99_ns = None;
        assert_eq!(
            advise(&[empty], 1.0, 1.8, 1.0),
            Advice { best: None, precise_within_budget: None, cheapest_near_best: None }
        );
    }

    #[test]
    fn a_runtime_name_splits_into_its_base_and_recipe() {
        assert_eq!(split("thread/spin"), ("thread", "spin".to_string()));
        assert_eq!(split("go"), ("go", "sleep".to_string()));
        assert_eq!(split("c-thread+fifo"), ("c-thread", "sleep+fifo".to_string()));
    }

    #[test]
    fn cpu_per_unit_is_cores_over_the_window_and_units() {
        let mut row: Row = serde_json::from_value(serde_json::json!({
            "runtime": "thread/spin", "point": 0, "sequence": 0, "status": "ok", "reason": null, "plan": null,
            "worker": null, "counts": null, "statistics": null, "histograms": null
        }))
        .unwrap();
        assert_eq!(cpu_per_unit(&row), None);
        row.counters = Some(taskmeter_machine::counters::Counters {
            start_ns: 1_000,
            end_ns: 1_001_000,
            cpu_ns: 1_500_000,
            ..Default::default()
        });
        let counts: taskmeter_model::run::Counts = serde_json::from_value(serde_json::json!({
            "units_planned": 2, "units": 2, "iterations_total": 0, "iterations_measured": 0, "iterations_per_s": 0.0,
            "units_starved": 0, "samples_total": 0, "samples_warmup": 0, "samples_measured": 0,
            "missed_periods": 0, "missed_periods_warmup": 0, "early_wakeups": 0, "atomic_sum": null,
            "create_ns": 0, "create_per_unit_ns": 0.0
        }))
        .unwrap();
        row.counts = Some(counts);
        assert_eq!(cpu_per_unit(&row), Some(0.75), "1.5 ms of CPU in 1 ms, 2 units: 0.75 of a core each");
        // A thread that ended in the window took its schedstat time with it; the ticks keep it.
        let counters = row.counters.as_mut().unwrap();
        (counters.threads_exited, counters.user_ns, counters.system_ns) = (1, 1_000_000, 500_000);
        counters.cpu_ns = 1_000;
        assert_eq!(cpu_per_unit(&row), Some(0.75));
    }
}
