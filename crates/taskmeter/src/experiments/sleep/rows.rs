//! One job's worker, run and judged, as its row: the plan it got, what its worker really had,
//! its counts and statistics (folded in while it ran), or why it failed, was partial or skipped.

use super::jobs::Job;
use super::progress::Progress;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use taskmeter_analysis::accumulate::{Finished, RowStats};
use taskmeter_machine::env::Environment;
use taskmeter_measure::process::worker::{self, Outcome, WorkerRun};
use taskmeter_measure::process::Failure;
use taskmeter_measure::runtimes::{self, RuntimeInfo};
use taskmeter_model::run::{ClassResult, Counts, Row, RowStatus, Settings, WorkerInfo};
use taskmeter_model::samples::{RowKey, SamplesFile};
use taskmeter_protocol::{Delivered, Plan, Room, PROTOCOL};

/// What every job of a run shares.
pub struct RunContext<'a> {
    pub environment: &'a Environment,
    pub progress: &'a Progress,
    /// `--raw`: where every sample goes.
    pub samples: Option<Arc<SamplesFile>>,
    /// Measured samples each row may keep for exact percentiles.
    pub exact_samples: u64,
}

/// Runs one job: its worker, judged, as a row.
pub fn run_job(job: &Job, label: &str, run: &RunContext) -> Row {
    let mut plan = job_plan(job); // checked with its point's settings before anything ran
    let toolchain = run.environment.toolchains.get(job.info.id).cloned().unwrap_or_default();
    let mut command = match runtimes::worker_command(job.info) {
        Ok(command) => command,
        Err(reason) => return failed_row(job.info.id, &plan, reason, None),
    };
    if job.settings.sched.mlock {
        if let Err(reason) = runtimes::preload_mlock(&mut command) {
            return failed_row(job.info.id, &plan, reason, None);
        }
    }
    let stats = RowStats::new(plan.priority_classes, run.exact_samples, run.progress.is_live()).for_units(plan.units);
    let stats = Arc::new(Mutex::new(stats));
    let _watched = run.progress.watch(label, stats.clone());
    let key = RowKey { runtime: job.info.id.to_string(), point: job.point.index, repetition: job.repetition };
    let (sink_stats, samples) = (stats.clone(), run.samples.clone());
    let sink: worker::SampleSink = Box::new(move |views| {
        sink_stats.lock().unwrap_or_else(|e| e.into_inner()).add(views);
        if let Some(file) = &samples {
            file.append(&key, views);
        }
    });
    let grace = Duration::from_nanos(job.settings.grace_ns);
    // The machine's room as this worker starts (other rows' workers have ended, or run beside it).
    plan.room = taskmeter_machine::room::now();
    let sched = job.sched();
    let bound = job.settings.max_backlog_bytes;
    let worker = worker::run_worker(command, &plan, &sched, (grace, bound), sink, || run.progress.tick());
    drop(_watched);
    let finished =
        std::mem::replace(&mut *stats.lock().unwrap_or_else(|e| e.into_inner()), RowStats::new(1, 0, false)).finish();
    row_from(job.info, plan, worker, toolchain, finished)
}

/// The plan of a job: its runtime's worker, waiting with its recipe.
fn job_plan(job: &Job) -> Plan {
    Plan { wait: job.info.recipe.to_string(), ..plan_for(&job.settings, job.info.base) }
}

/// The plan of a runtime at a point, with rings sized for its schedule; its room is measured when
/// its worker starts.
pub fn plan_for(settings: &Settings, runtime: &str) -> Plan {
    let mut plan = Plan {
        protocol: PROTOCOL,
        experiment: settings.experiment,
        runtime: runtime.to_string(),
        units: settings.units,
        priority_classes: settings.priority_classes,
        start_limit_ns: settings.start_limit_ns,
        duration_ns: settings.duration_ns,
        warmup_ns: settings.warmup_ns,
        sleep: settings.sleep,
        busy: settings.busy,
        ring: 1,
        flush_ns: taskmeter_protocol::plan::FLUSH_NS,
        room: Room::default(),
        grain: None,
        wait: taskmeter_protocol::plan::DEFAULT_WAIT.to_string(),
    };
    plan.size_rings();
    plan
}

fn failed_row(runtime: &str, plan: &Plan, reason: String, worker: Option<WorkerInfo>) -> Row {
    Row { reason: Some(reason), plan: Some(plan.clone()), worker, ..Row::new(runtime, RowStatus::Failed) }
}

fn row_from(of: &RuntimeInfo, plan: Plan, worker: WorkerRun, toolchain: String, finished: Finished) -> Row {
    let runtime = of.id;
    let mut info = WorkerInfo {
        runtime_version: None,
        toolchain,
        pid: None,
        sched: worker.sched,
        wall_ns: worker.wall_ns,
        peak_rss_kb: worker.peak_rss_kb,
        cpu_ns: worker.cpu_ns,
        priority: None,
        measure_start_ns: None,
        end_ns: None,
        cpu_dma_latency_us: None,
        stderr: None,
        harness_sched: worker.harness,
        sample_backlog_peak_bytes: worker.backlog_peak_bytes,
        sample_backlog_bound_bytes: worker.backlog_bound_bytes,
        sample_drain_after_exit_ns: worker.drained_after_exit_ns,
        writer: of.writer.map(str::to_string),
    };
    let (status, delivered, stopped) = match worker.outcome {
        Outcome::Completed(d) => (RowStatus::Ok, d, None),
        Outcome::Interrupted(d, why) => (RowStatus::Interrupted, d, Some(why)),
        Outcome::Cut(_, why) if finished.counts.measured == 0 => {
            // A row is a result only with measured samples: a worker that died in its warm-up
            // fails its row, with the real reason.
            info.stderr = Some(worker.stderr).filter(|s| !s.is_empty());
            let warmup = match finished.counts.warmup {
                0 => String::new(),
                n => format!(" (it sent {} warm-up samples)", crate::report::format::format_count(n)),
            };
            return failed_row(runtime, &plan, format!("no measured sample{warmup}: {why}"), Some(info));
        }
        Outcome::Cut(d, why) => (RowStatus::Partial, d, Some(format!("cut short before its D frame: {why}"))),
        Outcome::Bounded(_, why) if finished.counts.measured == 0 => {
            return failed_row(runtime, &plan, format!("no measured sample: {why}"), Some(info));
        }
        Outcome::Bounded(d, why) => {
            let covered = covered_ns(&d);
            let asked = plan.duration_ns as f64 / 1e9;
            let why = format!("{why}; it measured {:.2} s of the {asked:.1} s asked", covered as f64 / 1e9);
            (RowStatus::Partial, d, Some(why))
        }
        Outcome::Failed(failure) => {
            info.stderr = Some(worker.stderr).filter(|s| !s.is_empty());
            let interrupted = matches!(failure, Failure::Interrupted { .. });
            let row = failed_row(runtime, &plan, failure.to_string(), Some(info));
            return if interrupted { Row { status: RowStatus::Interrupted, ..row } } else { row };
        }
    };
    info.runtime_version = Some(delivered.hello.runtime_version.clone());
    info.pid = Some(delivered.hello.pid);
    info.priority = Some(delivered.hello.priority.clone());
    (info.measure_start_ns, info.end_ns) = (Some(delivered.window.measure_start_ns), Some(delivered.window.end_ns));
    // Without its D frame the stream has no U frames: the counts come from the samples.
    let cut = delivered.done.is_none();
    if cut {
        info.stderr = Some(worker.stderr).filter(|s| !s.is_empty());
    }
    let unsent = cut.then(|| delivered.unsent_bound(&plan, worker.exited_ns.unwrap_or(u64::MAX))).flatten();
    // Stopped early (a signal, the backlog's bound), its window ended before the plan's.
    let ended_early = delivered.done.as_ref().is_some_and(|d| d.interrupted);
    let counts = Counts { samples_unsent_max: unsent, ..counts(&plan, &delivered, &finished, cut || ended_early) };
    let mut reasons = Vec::new();
    if let Some(why) = stopped {
        if cut {
            let covered = counts.covered_ns.unwrap_or(0) as f64 / 1e9;
            let unsent = match unsent {
                Some(n) => format!(
                    "; at most {} more were made and never sent (in its units' rings when it died)",
                    crate::report::format::format_count(n)
                ),
                None => "; how many more its units made and never sent, the schedule none cannot bound".into(),
            };
            reasons.push(format!(
                "{why}; the row keeps the {} samples it sent, covering {covered:.1} s of the {:.1} s measured{unsent}",
                crate::report::format::format_count(delivered.samples),
                plan.duration_ns as f64 / 1e9
            ));
        } else {
            reasons.push(why);
        }
    }
    if let Some(e) = &delivered.gate.start_error {
        reasons.push(format!("partial: {} of {} units started ({e})", delivered.gate.units, plan.units));
    }
    let status =
        if status == RowStatus::Ok && delivered.gate.start_error.is_some() { RowStatus::Partial } else { status };
    Row {
        reason: (!reasons.is_empty()).then(|| reasons.join("; ")),
        basis: finished.basis,
        classes: classes(&plan, &delivered, &finished, &counts),
        counts: Some(counts),
        plan: Some(plan),
        worker: Some(info),
        statistics: Some(finished.statistics),
        histograms: Some(finished.histograms),
        lateness_early: finished.lateness_early,
        runtime_view: delivered.view.clone(),
        unit_spread: finished.unit_spread,
        counters_missing: worker.counters.as_ref().err().cloned(),
        counters: worker.counters.ok(),
        ..Row::new(runtime, status)
    }
}

fn per_second(count: u64, ns: u64) -> f64 {
    count as f64 * 1e9 / ns.max(1) as f64
}

/// The part of the measured window a stream that ended early covers: to its last wake-up.
fn covered_ns(d: &Delivered) -> u64 {
    d.last_wake_ns.unwrap_or(0).min(d.window.end_ns).saturating_sub(d.window.measure_start_ns)
}

/// The row's counts. A cut stream has no `U` frames: its iterations are its samples. A stream
/// that ended early (`short`: cut, or stopped) covers part of the window, over which its rate is.
fn counts(plan: &Plan, d: &Delivered, finished: &Finished, short: bool) -> Counts {
    let cut = d.done.is_none();
    let c = &finished.counts;
    let window = d.window;
    let covered_ns = short.then(|| covered_ns(d));
    let (iterations_total, iterations_measured, units_starved) = if cut {
        let starved = d.measured_per_unit().filter(|m| *m == 0).count() as u32;
        (c.measured + c.warmup + c.left_out, c.measured + c.left_out, starved)
    } else {
        let units = d.units.iter();
        (
            units.clone().map(|u| u.iterations).sum(),
            units.clone().map(|u| u.measured_iterations).sum(),
            units.filter(|u| u.measured_iterations == 0).count() as u32,
        )
    };
    let create_ns = window.run_start_ns - window.create_start_ns;
    Counts {
        units: d.gate.units,
        units_planned: plan.units,
        iterations_total,
        iterations_measured,
        iterations_per_s: per_second(iterations_measured, covered_ns.unwrap_or(plan.duration_ns)),
        atomic_sum: d.done.as_ref().and_then(|d| d.atomic_sum),
        units_starved,
        samples_total: c.measured + c.warmup + c.left_out,
        samples_warmup: c.warmup,
        samples_measured: c.measured,
        missed_periods: c.missed,
        missed_periods_warmup: c.missed_warmup,
        early_wakeups: c.early,
        samples_lost: d.lost(),
        samples_flushed_by_units: d.flushed,
        unit_flushes: d.flushes,
        samples_left_out: c.left_out,
        samples_after_gap: c.after_gap,
        covered_ns,
        samples_unsent_max: None,
        create_ns,
        create_per_unit_ns: create_ns as f64 / d.gate.units.max(1) as f64,
    }
}

/// Iterations and statistics of each priority class (empty with one class).
fn classes(plan: &Plan, d: &Delivered, finished: &Finished, counts: &Counts) -> Vec<ClassResult> {
    finished
        .classes
        .iter()
        .enumerate()
        .map(|(class, statistics)| {
            let class = class as u32;
            let members = (1..=d.gate.units).filter(|u| plan.class_of(*u) == class);
            let iterations_measured = if d.done.is_some() {
                d.units.iter().filter(|u| plan.class_of(u.unit) == class).map(|u| u.measured_iterations).sum()
            } else {
                statistics.busy.count
            };
            ClassResult {
                class,
                units: members.count() as u32,
                iterations_measured,
                iterations_per_s: per_second(iterations_measured, counts.covered_ns.unwrap_or(plan.duration_ns)),
                statistics: plan.sleep.schedule.sleeps().then(|| statistics.clone()),
            }
        })
        .collect()
}

/// A row for a job whose worker never started, failed with the reason.
pub fn failed_job_row(job: &Job, reason: String) -> Row {
    failed_row(job.info.id, &job_plan(job), reason, None)
}

/// A row for a job that did not run, and why.
pub fn skipped_row(job: &Job, reason: String) -> Row {
    Row { status: RowStatus::Skipped, plan: None, ..failed_row(job.info.id, &job_plan(job), reason, None) }
}
