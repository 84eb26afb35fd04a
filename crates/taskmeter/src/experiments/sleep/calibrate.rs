//! `--busy` as a time, fitted to what the loop runs, before every repetition.
//!
//! 1. Once a run, each runtime's own worker measures its rate of the shared arithmetic without
//!    yields, exactly as the granularity experiment sizes a task (protocol, "The granularity
//!    experiment"): the *rate estimate*. It misses what the loop adds to the arithmetic: a
//!    yield after every step (`--yield`: a `sched_yield` costs hundreds of steps in C), the
//!    clock reads around the phase, and a core woken from a sleep.
//! 2. Before each row (each runtime, point and repetition), short *probes* run the work loop
//!    itself, with the row's units, schedule, warm-up and busy plan (its yields included), and
//!    take the median busy phase of their measured loops: a phase preempted on a loaded machine
//!    is one outlier among some fifty, not an offset. From the second probe on, each count comes
//!    from a secant step on `phase = fixed + per_step x iterations` through the last two
//!    probes; the fit stops at a probe within 5 % of the time, at a count already probed (whole
//!    steps cannot come closer), or after four probes. Stopped short of the time, it takes the
//!    count of the probe that came closest: a secant through two probes that noise set nearly
//!    level extrapolates far, to a count no probe ran (ending with the count its last step
//!    asked for, a python-thread row beside the suite ran 7,800 iterations for 50 µs, where
//!    its phase is 50 µs at about 400). A probe whose phase outlasted its window
//!    (on a loaded machine a yield may give the core away for milliseconds) is followed by one
//!    of an eighth of its iterations, so a fit never fails a row.
//!
//! What is fitted is the phase the table reports: with several units on one thread (or one
//! GIL) and `--yield`, a unit's phase holds the other units' turns, and the fit gives each unit
//! less arithmetic. Each repetition gets its own fit, so an error of the fit varies between
//! repetitions and their intervals see it. What no fit in another process removes is the
//! phase's own variation between worker processes (a JIT's or an interpreter's rate;
//! docs/benchmarks/statistics.md, "`--busy TIME`: the busy phase against the time asked").
//!
//! The row's `busy_fit` keeps its probes; its measured busy phase is the check of the fit, and
//! the console warns when a row's is more than 10 % off the time (`report::console`).

use std::sync::{Arc, Mutex};
use std::time::Duration;
use taskmeter_machine::sched::SchedSettings;
use taskmeter_measure::process::worker::{run_worker, Outcome};
use taskmeter_measure::runtimes::{self, RuntimeInfo};
use taskmeter_model::run::{BusyFit, BusyProbe, Settings};
use taskmeter_protocol::plan::{FLUSH_NS, MIN_RING};
use taskmeter_protocol::{BusyPlan, Experiment, GrainPlan, Mode, Pattern, Plan, Room, Schedule, SleepPlan, PROTOCOL};

/// How long a worker measures its rate (the granularity experiment's default).
const CALIBRATE_NS: u64 = 10_000_000;
/// A probe measures at least this long, and about `PROBE_LOOPS` loops when they are longer.
const PROBE_MIN_NS: u64 = 100_000_000;
const PROBE_MAX_NS: u64 = 2_000_000_000;
const PROBE_LOOPS: u64 = 60;
/// Fewer measured loops than this and a probe's median says too little: its phase outlasted
/// the window, and the next probe runs fewer iterations.
const PROBE_MIN_LOOPS: u64 = 5;
/// Probes a fit may run; it stops at a probe whose phase is this close to the time (a fraction).
const MAX_PROBES: usize = 4;
const CLOSE_ENOUGH: f64 = 0.05;
/// With `--yield`, the first probe runs this many times fewer iterations than the rate
/// estimate: a step with its yield may cost hundreds of steps without, and a probe that starts
/// small stays short.
const YIELD_FIRST_DIVISOR: u64 = 100;

/// The rate estimate: the busy iterations that take `busy_ns` in `runtime` without yields, by
/// its worker's own measurement of its rate, or why it could not say.
pub fn rate_estimate(
    info: &'static RuntimeInfo,
    busy_ns: u64,
    sched: &SchedSettings,
    grace: Duration,
) -> Result<u64, String> {
    let mut plan = Plan {
        protocol: PROTOCOL,
        experiment: Experiment::Granularity,
        runtime: info.base.into(),
        units: 1,
        priority_classes: 1,
        start_limit_ns: 10_000_000_000,
        duration_ns: 1,
        warmup_ns: 0,
        sleep: SleepPlan { mode: Mode::Relative, schedule: Schedule::None },
        busy: BusyPlan { iters: 0, yield_each_step: false },
        ring: MIN_RING,
        flush_ns: FLUSH_NS,
        room: Room::default(),
        grain: Some(GrainPlan {
            pattern: Pattern::Trivial,
            width: 1,
            steps: 1,
            grains_ns: vec![busy_ns],
            calibrate_ns: CALIBRATE_NS,
        }),
        wait: taskmeter_protocol::plan::DEFAULT_WAIT.to_string(),
    };
    plan.check().map_err(|e| e.to_string())?;
    let command = runtimes::worker_command(info)?;
    plan.room = taskmeter_machine::room::now();
    let worker = run_worker(command, &plan, sched, (grace, None), Box::new(|_| {}), || {});
    match worker.outcome {
        Outcome::Completed(d) => {
            d.points.first().map(|p| p.iters).ok_or_else(|| "its worker measured no task size".into())
        }
        Outcome::Interrupted(_, why) | Outcome::Bounded(_, why) => Err(why),
        Outcome::Cut(_, why) => Err(why.to_string()),
        Outcome::Failed(failure) => Err(failure.to_string()),
    }
}

/// Fits the busy iterations of one row (`settings`: its point's, `busy_ns` set) to the loop
/// its worker will run, from the runtime's rate estimate.
pub fn fit(
    info: &'static RuntimeInfo,
    settings: &Settings,
    sched: &SchedSettings,
    rate_estimate: u64,
) -> Result<BusyFit, String> {
    let target_ns = settings.busy_ns.ok_or("no --busy time to fit")?;
    if target_ns == 0 {
        return Ok(BusyFit { target_ns, iterations: 0, rate_estimate, probes: Vec::new() });
    }
    let first_iterations = match settings.busy.yield_each_step {
        true => rate_estimate / YIELD_FIRST_DIVISOR,
        false => rate_estimate,
    }
    .max(1);
    let mut probes: Vec<BusyProbe> = Vec::new();
    let mut iterations = first_iterations;
    loop {
        let last = probe(info, settings, sched, iterations)?;
        probes.push(last);
        let done;
        (iterations, done) = next_count(&probes, target_ns);
        if done || probes.len() == MAX_PROBES {
            let iterations = final_count(&probes, iterations, target_ns);
            return Ok(BusyFit { target_ns, iterations, rate_estimate, probes });
        }
    }
}

/// After `probes` (the last one just run): the count to use or probe next, and whether the fit
/// is done. A probe whose phase outlasts its window (a loaded machine's yields can give the
/// core away for milliseconds each) measured too few loops to judge: the next runs an eighth
/// of its iterations. Otherwise the secant through the last two judged probes; done at a
/// probe within `CLOSE_ENOUGH` of the time, or at a count already probed.
fn next_count(probes: &[BusyProbe], target_ns: u64) -> (u64, bool) {
    let last = probes[probes.len() - 1];
    if last.loops < PROBE_MIN_LOOPS {
        return ((last.iterations / 8).max(1), last.iterations == 1);
    }
    if off(&last, target_ns) <= CLOSE_ENOUGH {
        return (last.iterations, true);
    }
    let mut judged = probes.iter().rev().filter(|p| p.loops >= PROBE_MIN_LOOPS);
    let (near, far) = (judged.next().expect("the last"), judged.next());
    let next = secant(near, far, target_ns);
    (next, probes.iter().any(|p| p.iterations == next))
}

/// The count a fit that stopped ends with: `next` when a judged probe of it came within
/// `CLOSE_ENOUGH` of the time; otherwise the count of the judged probe that came closest
/// (relatively; the fewer iterations on a tie); `next` when no probe was judged.
fn final_count(probes: &[BusyProbe], next: u64, target_ns: u64) -> u64 {
    let off = |p: &BusyProbe| off(p, target_ns);
    let judged = probes.iter().filter(|p| p.loops >= PROBE_MIN_LOOPS);
    if judged.clone().any(|p| p.iterations == next && off(p) <= CLOSE_ENOUGH) {
        return next;
    }
    judged.min_by(|a, b| off(a).total_cmp(&off(b)).then(a.iterations.cmp(&b.iterations))).map_or(next, |p| p.iterations)
}

/// How far a probe's phase came from `target_ns`, as a fraction of it.
fn off(probe: &BusyProbe, target_ns: u64) -> f64 {
    (probe.median_busy_ns as f64 / target_ns as f64 - 1.0).abs()
}

/// The iterations whose busy phase is `target_ns`, on the line through two probes (`phase =
/// fixed + per_step x iterations`), or through `near` and the origin when there is one probe,
/// the probes ran the same count, or their phases do not grow with it (noise). At least 1.
fn secant(near: &BusyProbe, far: Option<&BusyProbe>, target_ns: u64) -> u64 {
    // A phase of 0 (a clock coarser than the work) counts as 1 ns: never a division by 0.
    let (n1, b1) = (near.iterations as f64, near.median_busy_ns.max(1) as f64);
    let per_step = match far {
        Some(far) if far.iterations != near.iterations => {
            let slope = (b1 - far.median_busy_ns as f64) / (n1 - far.iterations as f64);
            Some(slope).filter(|s| *s > 0.0)
        }
        _ => None,
    }
    .unwrap_or(b1 / n1.max(1.0));
    let iterations = n1 + (target_ns as f64 - b1) / per_step;
    iterations.round().clamp(1.0, u64::MAX as f64 / 2.0) as u64
}

/// Runs the row's loop (its units too) with `iterations` busy iterations, for about
/// `PROBE_LOOPS` loops after the row's warm-up: the median busy phase of its measured loops (0
/// when it measured none).
fn probe(
    info: &'static RuntimeInfo,
    settings: &Settings,
    sched: &SchedSettings,
    iterations: u64,
) -> Result<BusyProbe, String> {
    let mut plan = probe_plan(info, settings, iterations);
    plan.check().map_err(|e| format!("its probe's plan: {e}"))?;
    let command = runtimes::worker_command(info)?;
    plan.room = taskmeter_machine::room::now();
    let phases = Arc::new(Mutex::new(Vec::new()));
    let sink_phases = phases.clone();
    let sink: taskmeter_measure::process::worker::SampleSink = Box::new(move |views| {
        let mut phases = sink_phases.lock().unwrap_or_else(|e| e.into_inner());
        phases.extend(views.iter().filter(|v| v.measured()).map(|v| v.sample.busy_end_ns - v.sample.start_ns));
    });
    let bound = settings.max_backlog_bytes;
    let worker = run_worker(command, &plan, sched, (Duration::from_nanos(settings.grace_ns), bound), sink, || {});
    match worker.outcome {
        Outcome::Failed(failure) => return Err(failure.to_string()),
        Outcome::Interrupted(_, why) | Outcome::Bounded(_, why) => return Err(why),
        Outcome::Completed(_) | Outcome::Cut(..) => {}
    }
    let mut phases = std::mem::take(&mut *phases.lock().unwrap_or_else(|e| e.into_inner()));
    phases.sort_unstable();
    let median_busy_ns = phases.get(phases.len().saturating_sub(1) / 2).copied().unwrap_or(0);
    Ok(BusyProbe { iterations, median_busy_ns, loops: phases.len() as u64 })
}

/// About how long one probe of a row measures (its warm-up and window), for the ETA; a fit
/// usually takes two.
pub fn probe_time(settings: &Settings) -> Duration {
    let plan = probe_plan_settings(settings, 1);
    Duration::from_nanos(plan.warmup_ns + plan.duration_ns)
}

/// The row's plan with `iterations`, and a window of about `PROBE_LOOPS` loops of a unit (the
/// busy phase guessed from the time asked, at most 8 times over).
fn probe_plan(info: &RuntimeInfo, settings: &Settings, iterations: u64) -> Plan {
    Plan {
        wait: info.recipe.to_string(),
        ..super::rows::plan_for(&probe_plan_settings(settings, iterations), info.base)
    }
}

fn probe_plan_settings(settings: &Settings, iterations: u64) -> Settings {
    let busy_ns = settings.busy_ns.unwrap_or(0);
    let loop_ns = busy_ns.saturating_mul(8).saturating_add(settings.sleep.schedule.expected(1, 0));
    Settings {
        busy: BusyPlan { iters: iterations, ..settings.busy },
        duration_ns: loop_ns.saturating_mul(PROBE_LOOPS).clamp(PROBE_MIN_NS, PROBE_MAX_NS),
        // The row's own warm-up: a JIT (Node's, the JVM's) reaches the same code before the
        // probe measures as before the row does (with 100 ms, node's rows ran 50 % short).
        warmup_ns: settings.warmup_ns,
        ..settings.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(iterations: u64, median_busy_ns: u64) -> BusyProbe {
        BusyProbe { iterations, median_busy_ns, loops: 60 }
    }

    #[test]
    fn one_probe_scales_its_iterations_to_the_target() {
        // 19 steps took 14.5 µs: 2 µs is 19 x 2 / 14.5 = 2.62 steps, so 3.
        assert_eq!(secant(&probe(19, 14_500), None, 2_000), 3);
        // A phase of 0 ns counts as 1 ns: 10 steps a nanosecond, so 1,000 for 100 ns.
        assert_eq!(secant(&probe(10, 0), None, 100), 1_000);
    }

    #[test]
    fn two_probes_fit_a_fixed_cost_and_a_cost_per_step() {
        // phase = 200 + 10 x n: probes at 100 (1,200 ns) and 1,000 (10,200 ns); 2,000 ns is
        // (2,000 - 200) / 10 = 180 steps, where a fit through the origin would say 196.
        assert_eq!(secant(&probe(1_000, 10_200), Some(&probe(100, 1_200)), 2_000), 180);
        assert_eq!(secant(&probe(100, 1_200), Some(&probe(1_000, 10_200)), 2_000), 180);
    }

    #[test]
    fn a_fit_that_noise_turns_over_falls_back_to_the_near_probe() {
        // The longer probe measured a shorter phase: no slope; 20 steps in 2,100 ns, so 19.
        assert_eq!(secant(&probe(20, 2_100), Some(&probe(40, 2_000)), 2_000), 19);
        // The same count twice: through the origin.
        assert_eq!(secant(&probe(20, 2_100), Some(&probe(20, 2_300)), 2_000), 19);
    }

    #[test]
    fn a_fit_never_asks_for_fewer_than_one_iteration() {
        assert_eq!(secant(&probe(5, 5_000), Some(&probe(1, 4_000)), 100), 1);
    }

    #[test]
    fn a_probe_runs_about_sixty_loops_of_the_row() {
        let info = runtimes::find("c-thread").unwrap();
        let mut settings: Settings = serde_json::from_value(serde_json::json!({
            "runtimes": ["c-thread"], "experiment": "sleep", "units": 5, "priority_classes": 1,
            "start_limit_ns": 1_000_000_000u64, "together": false, "duration_ns": 1_000_000_000u64,
            "warmup_ns": 500_000_000u64, "sleep": {"mode": "absolute", "schedule": {"kind": "fixed", "ns": 1_000_000}},
            "sleep_spec": "fixed:1ms", "busy": {"iters": 0, "yield": true}, "busy_ns": 20_000, "grace_ns": 1_000_000_000u64,
            "sched": {"policy": null, "timer_slack_ns": null, "cpus": null, "mlock": false}
        }))
        .unwrap();
        let plan = probe_plan(info, &settings, 7);
        assert_eq!((plan.units, plan.busy.iters, plan.busy.yield_each_step), (5, 7, true));
        // 60 x (8 x 20 µs + the 1 ms sleep) = 69.6 ms, below the 100 ms floor.
        assert_eq!(plan.duration_ns, PROBE_MIN_NS);
        settings.busy_ns = Some(2_000_000);
        assert_eq!(probe_plan(info, &settings, 7).duration_ns, 60 * (16_000_000 + 1_000_000));
    }

    #[test]
    fn a_fit_stops_close_to_the_time_or_at_a_count_it_probed() {
        // 24 steps 12.7 µs, 4 steps 2.5 µs (+25 %): the secant says 3 (-> about 2 µs), new.
        assert_eq!(next_count(&[probe(24, 12_700), probe(4, 2_500)], 2_000), (3, false));
        // Then 3 steps 2.05 µs: within 5 %, done with 3.
        assert_eq!(next_count(&[probe(24, 12_700), probe(4, 2_500), probe(3, 2_050)], 2_000), (3, true));
        // 1 step 1.48 µs after 23 steps 66.7 µs: the secant says 1 again: whole steps come no closer.
        assert_eq!(next_count(&[probe(23, 66_700), probe(1, 1_480)], 2_000), (1, true));
    }

    /// Four probes that noise scattered: the secant through the last two is nearly level (10 ns
    /// for 5 more steps) and would say 5,945 steps; the fit ends with the count that came
    /// closest instead, 350 (38.81 µs, 22.4 % short; 62.8 µs was 25.6 % long).
    #[test]
    fn a_fit_out_of_probes_ends_with_the_count_that_came_closest() {
        let scattered = [probe(380, 62_800), probe(302, 34_000), probe(345, 38_800), probe(350, 38_810)];
        assert_eq!(next_count(&scattered, 50_000), (5_945, false), "the secant alone");
        assert_eq!(final_count(&scattered, 5_945, 50_000), 350);
        // A stop at a count already probed, that came far from the time: the closest instead.
        let returned = [probe(380, 62_800), probe(500, 20_000), probe(420, 48_500)];
        assert_eq!(final_count(&returned, 500, 50_000), 420);
        // A stop close to the time keeps its count, even where another probe came closer.
        let close = [probe(400, 50_100), probe(405, 52_000)];
        assert_eq!(final_count(&close, 405, 50_000), 405);
        // Probes that outlasted their windows are not judged; with none judged, the count asked.
        let too_long = BusyProbe { iterations: 9, median_busy_ns: 50_000, loops: 2 };
        assert_eq!(final_count(&[too_long, probe(100, 30_000)], 9, 50_000), 100);
        assert_eq!(final_count(&[too_long], 1, 50_000), 1);
    }

    #[test]
    fn a_probe_whose_phase_outlasts_its_window_is_followed_by_one_of_an_eighth() {
        let too_long = |iterations| BusyProbe { iterations, median_busy_ns: 0, loops: 2 };
        assert_eq!(next_count(&[too_long(1_600)], 200_000), (200, false));
        // The judged probes alone make the secant: 200 steps 400 µs, so 100 for 200 µs.
        assert_eq!(next_count(&[too_long(1_600), probe(200, 400_000)], 200_000), (100, false));
        // One step that outlasts the window: nothing less to try.
        assert_eq!(next_count(&[too_long(1)], 200_000), (1, true));
    }
}
