//! The granularity experiment's figures (Task Bench's, Slaughter et al., SC'20): per grain the
//! efficiency and the overhead per task, per worker METG(50 %), and per runtime their means
//! over the repetitions with their 95 % ranges for another invocation (METG's geometric mean on
//! a log scale, so never below 0: `taskmeter_stats::geometric_mean_range`).
//!
//! - useful work of a task `t = serial_ns / serial_tasks` (the same busy loop, alone, in the
//!   same worker), measured before and after the task size's rounds: the faster of the two,
//!   since a disturbance can only slow a measurement ([`baselines`]);
//! - task granularity `g = wall_ns x cores / tasks` (the capacity one task took);
//! - efficiency `e = t / g` (= tasks x t / (wall x cores));
//! - overhead per task `g - t`;
//! - METG(50 %): the task granularity at which efficiency falls to 50 %, interpolated linearly
//!   in log(granularity) between the last grain at or above 50 % and the first below it
//!   (grains taken from the largest); a bound when none or all are below.
//!
//! A point whose efficiency is above 100 % by more than [`EFFICIENCY_TOLERANCE`] is impossible:
//! its serial baseline (the task measured alone) was slowed by a disturbance, which inflates the
//! efficiency (a 1 ms task timed at 10 ms once gave 931 %). It is marked invalid, with the
//! reason, and used nowhere: not in the means, METG, or the charts.
//!
//! Efficiency is over the cores a runtime can run tasks on (1 for a one-threaded runtime, all
//! of them for a multi-threaded one): runtimes are ranked only against those with as many.

use taskmeter_model::granularity::{GrainPoint, GrainRun, GrainSummary, Metg};
use taskmeter_protocol::Point;
use taskmeter_stats::format::ns as format_ns;
use taskmeter_stats::{geometric_mean_range, mean_range, Interval};

/// The share of capacity METG is defined at.
pub const THRESHOLD: f64 = 0.5;

/// How far above 100 % an efficiency may be and still be noise (single runs here showed up to
/// 115 % at the largest sizes, where the overhead is a small difference of two large times).
pub const EFFICIENCY_TOLERANCE: f64 = 0.2;

/// The useful work of one task as measured before its rounds and, when the worker sent it,
/// after them, ns.
pub fn baselines(p: &Point) -> (f64, Option<f64>) {
    let after = p.serial_after_tasks.zip(p.serial_after_ns).map(|(tasks, ns)| ns as f64 / tasks as f64);
    (p.serial_ns as f64 / p.serial_tasks as f64, after)
}

/// Two baselines further apart than this (relative to the faster) are said to disagree.
pub const BASELINE_SPREAD: f64 = 0.25;

/// What taskmeter derives from one `P` frame.
pub fn derive(measured: Point) -> GrainPoint {
    let (before, after) = baselines(&measured);
    let task_ns = after.map_or(before, |after| before.min(after));
    let granularity_ns = measured.wall_ns as f64 * measured.cores as f64 / measured.tasks as f64;
    let efficiency = task_ns / granularity_ns;
    let invalid = (efficiency > 1.0 + EFFICIENCY_TOLERANCE).then(|| {
        format!(
            "an efficiency of {:.0} % is impossible: the task measured alone took {} for {} of work asked (a disturbance during its serial baseline)",
            100.0 * efficiency,
            format_ns(task_ns),
            format_ns(measured.grain_ns as f64)
        )
    });
    GrainPoint {
        task_ns,
        granularity_ns,
        efficiency,
        overhead_ns: granularity_ns - task_ns,
        invalid,
        cores_reported: None,
        measured,
    }
}

/// METG(50 %) of one worker's grains (largest first), from its valid ones; None without any.
pub fn metg(points: &[GrainPoint]) -> Option<Metg> {
    let valid: Vec<&GrainPoint> = points.iter().filter(|p| p.invalid.is_none()).collect();
    let points = valid.as_slice();
    let first_below = points.iter().position(|p| p.efficiency < THRESHOLD);
    Some(match first_below {
        None => Metg::Below { ns: points.last()?.granularity_ns },
        Some(0) => Metg::Above { ns: points.first()?.granularity_ns },
        Some(i) => {
            let (a, b) = (&points[i - 1], &points[i]);
            let (la, lb) = (a.granularity_ns.ln(), b.granularity_ns.ln());
            let along = (a.efficiency - THRESHOLD) / (a.efficiency - b.efficiency);
            Metg::Interpolated { ns: (la + along * (lb - la)).exp() }
        }
    })
}

/// A runtime's repetitions that measured every grain.
fn whole_runs<'a>(runs: &'a [GrainRun], runtime: &str, grains: usize) -> Vec<&'a GrainRun> {
    runs.iter().filter(|r| r.runtime == runtime && r.error.is_none() && r.points.len() == grains).collect()
}

/// The METGs of a runtime's whole repetitions: those that have one (a repetition whose every
/// grain was invalid has none).
pub fn metgs(runs: &[GrainRun], runtime: &str, grains: usize) -> Vec<Metg> {
    whole_runs(runs, runtime, grains).iter().filter_map(|r| r.metg).collect()
}

/// Each runtime's repetitions together: the runtimes on the most cores first, and among as
/// many cores the best METG first (runtimes with no grain at 50 % and failures last).
pub fn summarise(runs: &[GrainRun], runtimes: &[String], grains: usize) -> Vec<GrainSummary> {
    let mut summaries: Vec<GrainSummary> = runtimes
        .iter()
        .filter(|r| runs.iter().any(|run| &run.runtime == *r))
        .map(|runtime| {
            let whole = whole_runs(runs, runtime, grains);
            let metgs = metgs(runs, runtime, grains);
            let values: Vec<f64> =
                metgs.iter().filter_map(|m| if let Metg::Interpolated { ns } = m { Some(*ns) } else { None }).collect();
            let (metg_ns, metg_bound) = if !metgs.is_empty() && values.len() == metgs.len() {
                (geometric_mean_range(&values), None)
            } else {
                (None, bound(&metgs))
            };
            // An invalid point counts in no mean.
            let per_grain = |value: fn(&GrainPoint) -> f64| -> Vec<Option<Interval>> {
                (0..grains)
                    .map(|i| {
                        mean_range(
                            &whole
                                .iter()
                                .map(|r| &r.points[i])
                                .filter(|p| p.invalid.is_none())
                                .map(value)
                                .collect::<Vec<_>>(),
                        )
                    })
                    .collect()
            };
            GrainSummary {
                runtime: runtime.clone(),
                repetitions: whole.len() as u32,
                cores: whole.first().and_then(|r| r.points.first()).map(|p| p.measured.cores),
                metg_ns,
                metg_bound,
                efficiency: per_grain(|p| p.efficiency),
                granularity_ns: per_grain(|p| p.granularity_ns),
                overhead_ns: per_grain(|p| p.overhead_ns),
            }
        })
        .collect();
    summaries.sort_by(|a, b| {
        let (ra, rb) = (rank(a), rank(b));
        b.cores.cmp(&a.cores).then(ra.0.cmp(&rb.0)).then(ra.1.total_cmp(&rb.1))
    });
    summaries
}

/// What the repetitions that did not all interpolate say: the loosest bound that holds for
/// all (METG below the largest, or above the smallest), or None when some are above the
/// largest grain and others are not.
fn bound(metgs: &[Metg]) -> Option<Metg> {
    let ns = |m: &Metg| match *m {
        Metg::Interpolated { ns } | Metg::Below { ns } | Metg::Above { ns } => ns,
    };
    let above = metgs.iter().filter(|m| matches!(m, Metg::Above { .. }));
    match above.clone().count() {
        0 => metgs.iter().map(ns).reduce(f64::max).map(|ns| Metg::Below { ns }),
        n if n == metgs.len() => above.map(ns).reduce(f64::min).map(|ns| Metg::Above { ns }),
        _ => None,
    }
}

/// Sorting key: the METG shown (an interpolated value, or a bound below it), then bounds
/// above the largest size, then runtimes with no figure.
fn rank(s: &GrainSummary) -> (u8, f64) {
    match (&s.metg_ns, s.metg_bound) {
        (Some(i), _) => (0, i.value),
        (None, Some(Metg::Below { ns })) => (0, ns),
        (None, Some(Metg::Above { ns })) => (1, ns),
        _ => (2, 0.0),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn point(grain_ns: u64, serial: (u64, u64), tasks: u64, wall_ns: u64, cores: u32) -> Point {
        Point {
            grain_ns,
            iters: 1,
            busy_result: "1".into(),
            serial_tasks: serial.0,
            serial_ns: serial.1,
            serial_after_tasks: None,
            serial_after_ns: None,
            rounds: 1,
            tasks,
            completed: tasks,
            wrong: 0,
            wall_ns,
            cores,
        }
    }

    #[test]
    fn efficiency_granularity_and_overhead_follow_their_definitions() {
        // 10 serial calls in 10,000 ns: 1,000 ns of work a task. 100 tasks in 100,000 ns on 2
        // cores: 2,000 ns of capacity a task, so 50 % and 1,000 ns of overhead.
        let p = derive(point(1000, (10, 10_000), 100, 100_000, 2));
        assert_eq!((p.task_ns, p.granularity_ns, p.efficiency, p.overhead_ns), (1000.0, 2000.0, 0.5, 1000.0));
    }

    #[test]
    fn metg_is_interpolated_in_log_granularity_between_the_grains_around_half() {
        // Efficiencies 0.8 at g = 1,000 ns and 0.2 at g = 100 ns: half-way in efficiency, so
        // half-way in log g: sqrt(1,000 x 100) = 316.23 ns.
        let points = [derive(point(800, (1, 800), 100, 100_000, 1)), derive(point(20, (1, 20), 100, 10_000, 1))];
        assert_eq!((points[0].efficiency, points[1].efficiency), (0.8, 0.2));
        let Some(Metg::Interpolated { ns }) = metg(&points) else { panic!("interpolated") };
        assert!((ns - 316.227766).abs() < 1e-3, "{ns}");
        // All at or above 50 %: below the smallest granularity; none: above the largest.
        assert_eq!(metg(&points[..1]), Some(Metg::Below { ns: 1000.0 }));
        assert_eq!(metg(&points[1..]), Some(Metg::Above { ns: 100.0 }));
        assert_eq!(metg(&[]), None);
    }

    fn grain_run(runtime: &str, metg: Option<Metg>, cores: u32) -> GrainRun {
        GrainRun {
            runtime: runtime.into(),
            repetition: 1,
            runtime_version: None,
            points: vec![derive(point(1000, (1, 1000), 10, 10_000 / cores as u64, cores))],
            metg,
            error: None,
            interrupted: false,
            wall_ns: 1,
        }
    }

    #[test]
    fn repetitions_give_a_log_scale_range_and_rank_runtimes() {
        let run = |runtime: &str, ns: f64| grain_run(runtime, Some(Metg::Interpolated { ns }), 1);
        let below = grain_run("c", Some(Metg::Below { ns: 1000.0 }), 1);
        let runs = [run("a", 900.0), run("a", 1100.0), run("b", 300.0), below];
        let names: Vec<String> = ["a", "b", "c"].map(String::from).to_vec();
        let s = summarise(&runs, &names, 1);
        assert_eq!(s.iter().map(|s| s.runtime.as_str()).collect::<Vec<_>>(), ["b", "a", "c"]);
        // The geometric mean of 900 and 1,100 ns, 994.99 ns, and its range on a log scale:
        // 164.0 ns to 6.04 µs (taskmeter_stats' test), never below 0 where the linear
        // Student-t interval said 1,000 ± 1,270.6 ns.
        let a = s[1].metg_ns.expect("a range");
        assert!((a.value - 994.987).abs() < 1e-3 && a.log_scale, "{a:?}");
        assert!((a.low() - 163.985).abs() < 1e-2 && (a.high() - 6037.13).abs() < 0.1, "{a:?}");
        assert_eq!(s[2].metg_bound, Some(Metg::Below { ns: 1000.0 }));
        assert_eq!(s[0].efficiency[0].map(|e| e.value), Some(1.0));
        assert_eq!(s[0].granularity_ns[0].map(|g| g.value), Some(1000.0), "10,000 ns x 1 core / 10 tasks");
    }

    /// A one-threaded runtime's efficiency is of one core, a multi-threaded one's of all: each is
    /// ranked among the runtimes with as many cores, and only repetitions with a METG count.
    #[test]
    fn runtimes_are_ranked_among_those_with_as_many_cores() {
        let interpolated = |ns: f64| Some(Metg::Interpolated { ns });
        let runs = [
            grain_run("one-threaded", interpolated(300.0), 1),
            grain_run("machine", interpolated(5000.0), 2),
            grain_run("machine", None, 2),
            grain_run("other", interpolated(2000.0), 2),
        ];
        let names: Vec<String> = ["one-threaded", "machine", "other"].map(String::from).to_vec();
        let s = summarise(&runs, &names, 1);
        let order: Vec<(&str, Option<u32>)> = s.iter().map(|s| (s.runtime.as_str(), s.cores)).collect();
        assert_eq!(order, [("other", Some(2)), ("machine", Some(2)), ("one-threaded", Some(1))]);
        assert_eq!(s[1].repetitions, 2, "both repetitions measured every grain");
        assert_eq!(metgs(&runs, "machine", 1), [Metg::Interpolated { ns: 5000.0 }], "one of them has a METG");
    }

    #[test]
    fn a_slow_serial_baseline_makes_its_point_invalid_and_unused() {
        // A 1 ms task whose serial baseline was timed at 10.3 ms: 100 tasks in 110.6 ms on one
        // core are 1.106 ms of capacity each, so an "efficiency" of 931 %.
        let disturbed = derive(point(1_000_000, (1, 10_300_000), 100, 110_600_000, 1));
        assert!((disturbed.efficiency - 9.313).abs() < 1e-3, "{}", disturbed.efficiency);
        let why = disturbed.invalid.clone().expect("invalid");
        assert!(why.contains("931 % is impossible") && why.contains("10.3 ms") && why.contains("1.00 ms"), "{why}");
        // Up to the tolerance, an efficiency above 100 % is noise and is kept.
        assert!(derive(point(1000, (1, 1150), 10, 10_000, 1)).invalid.is_none(), "115 % is kept");
        assert!(derive(point(1000, (1, 1250), 10, 10_000, 1)).invalid.is_some(), "125 % is not");
        // METG and the means skip it: the valid points alone decide.
        let valid = [derive(point(800, (1, 800), 100, 100_000, 1)), derive(point(20, (1, 20), 100, 10_000, 1))];
        let with_it = [disturbed.clone(), valid[0].clone(), valid[1].clone()];
        assert_eq!(metg(&with_it), metg(&valid));
        let run = |points: Vec<GrainPoint>| GrainRun {
            runtime: "a".into(),
            repetition: 1,
            runtime_version: None,
            metg: metg(&points),
            points,
            error: None,
            interrupted: false,
            wall_ns: 1,
        };
        let clean = derive(point(1_000_000, (1, 1_000_000), 100, 110_600_000, 1));
        let s = summarise(&[run(vec![disturbed]), run(vec![clean.clone()])], &["a".to_string()], 1);
        assert_eq!(
            s[0].efficiency[0].map(|e| (e.value, e.degrees_of_freedom)),
            Some((clean.efficiency, None)),
            "the mean of the valid repetition alone"
        );
    }

    #[test]
    fn the_faster_of_the_two_baselines_is_the_tasks_work() {
        // Before its rounds the task was slowed 10 times; after them it took its 1,000 ns.
        let mut p = point(1000, (10, 100_000), 100, 100_000, 1);
        (p.serial_after_tasks, p.serial_after_ns) = (Some(10), Some(10_000));
        assert_eq!(baselines(&p), (10_000.0, Some(1000.0)));
        let derived = derive(p);
        assert_eq!((derived.task_ns, derived.efficiency), (1000.0, 1.0));
        assert!(derived.invalid.is_none(), "the disturbed baseline is not used");
    }
}
