//! `taskmeter run` (sleep, volume, atomic-sum, recipes): one worker per runtime, point and repetition,
//! one row per worker, one results folder. Workers run one after another, in a shuffled order,
//! or each point's side by side with `--together`.

mod calibrate;
mod check;
mod compare;
mod consistency;
pub mod family;
pub mod flags;
mod history;
mod jobs;
mod progress;
mod report;
mod rows;

pub use check::check_settings;
pub use rows::plan_for;

use crate::report::tables::Layout;
use crate::session::{Output, Session};
use jobs::Job;
use progress::Progress;
use rows::RunContext;
use std::collections::HashMap;
use std::process::ExitCode;
use std::sync::Arc;
use taskmeter_analysis::accumulate::{RowToCome, DEFAULT_EXACT_SAMPLES};
use taskmeter_machine::idle::{cpu_dma_latency_us, LatencyRequest};
use taskmeter_machine::privilege;
use taskmeter_measure::process::signals;
use taskmeter_measure::runtimes;
use taskmeter_model::run::{BusyFit, Metric, Order, Prepared, Row, RowStatus, RunRecord, Settings};
use taskmeter_model::samples::SamplesFile;
use taskmeter_model::sweep::{self, Sweep};
use taskmeter_protocol::Plan;

/// The family of the work loop (`sleep`, `volume`, `atomic-sum`, `recipes`), as the registry
/// (`cli::families`) and the catalog name it.
pub const FAMILY: &str = "loop";

pub struct RunOptions {
    pub settings: Settings,
    /// The experiment's name on the command line: sleep, volume, atomic-sum or recipes.
    pub experiment: &'static str,
    pub sweeps: Vec<Sweep>,
    /// Run the jobs in a shuffled order; with a seed, a reproducible one.
    pub shuffle: bool,
    pub seed: Option<u64>,
    pub metric: Metric,
    pub layout: Option<Layout>,
    /// Keep every sample (samples.csv.gz, written while measuring).
    pub raw: bool,
    pub output: Output,
}

/// Every point's settings, each checked before anything runs (also `--dry-run`'s check).
pub fn checked_points(options: &RunOptions) -> Result<Vec<Settings>, super::ExperimentError> {
    let points = sweep::points(&options.sweeps);
    let point_settings: Vec<Settings> = points.iter().map(|p| sweep::apply(&options.settings, p)).collect();
    for (point, settings) in points.iter().zip(&point_settings) {
        check_settings(settings).map_err(|e| {
            super::ExperimentError::Settings(if options.sweeps.is_empty() {
                e
            } else {
                format!("at point {}: {e}", point.label())
            })
        })?;
    }
    Ok(point_settings)
}

/// Measures every job, writes the results folder; the exit status is the session's.
pub fn run(options: RunOptions) -> Result<ExitCode, super::ExperimentError> {
    let base = &options.settings;
    let points = sweep::points(&options.sweeps);
    let point_settings = checked_points(&options)?;
    // A latency request that cannot be held is refused now, not after minutes of measuring.
    if let Some(us) = point_settings.iter().find_map(|s| s.cpu_dma_latency_us) {
        LatencyRequest::hold(us)?;
    }
    refuse_what_the_host_refuses(&options)?;
    let mut session = Session::start(options.experiment, options.output)?;

    let mut availability: Vec<_> = base
        .runtimes
        .iter()
        .map(|id| {
            let info = runtimes::find(id).expect("runtimes are checked when parsed");
            (info, runtimes::availability(info))
        })
        .collect();
    runtimes::prepare_drivers(&availability);
    let rate_estimates = match base.busy_ns {
        Some(ns) => rate_estimates(&mut availability, ns, base),
        None => Default::default(),
    };
    for (info, available) in &availability {
        if let Err(reason) = available {
            taskmeter_console::errln!("taskmeter: skipping {}: {reason}", info.id);
        }
    }
    let seed = options.shuffle.then(|| options.seed.unwrap_or_else(|| fastrand::u64(..)));
    let jobs = jobs::jobs(&points, &point_settings, &availability, base.repeat, seed);
    let batches = jobs::batches(&jobs, base.together);
    let progress = Progress::new(jobs::expected_time(&batches, base.together, calibrate::probe_time));
    let samples = match options.raw {
        true => Some(Arc::new(
            SamplesFile::create(session.staging())
                .map_err(|e| super::ExperimentError::Settings(format!("cannot write the samples file: {e}")))?,
        )),
        false => None,
    };
    let budget = options.settings.exact_samples.unwrap_or(DEFAULT_EXACT_SAMPLES);
    let prepared = prepare_memory(&batches, budget);
    // taskmeter's own CPU while its workers measure (run.json's taskmeter_cpu_ns): from the
    // first row's worker on, so finding toolchains and checking builds before it are not in it.
    let cpu_at_start = taskmeter_measure::process::own_cpu_ns();
    let rows = run_batches(
        &batches,
        &mut session,
        &progress,
        (points.len(), base.repeat),
        samples.clone(),
        (budget, &rate_estimates),
    )?;
    progress.clear();
    if let Some(Err(e)) = samples.as_ref().map(|s| s.finish()) {
        taskmeter_console::errln!("taskmeter: {e}");
    }

    let record = RunRecord {
        header: session.header::<RunRecord>(),
        experiment: options.experiment.into(),
        metric: options.metric,
        settings: base.clone(),
        sweeps: options.sweeps.clone(),
        points,
        order: Order { shuffled: options.shuffle, seed },
        rows,
        taskmeter_cpu_ns: Some(taskmeter_measure::process::own_cpu_ns().saturating_sub(cpu_at_start)),
        taskmeter_prepared: Some(prepared),
    };
    let failed = record.rows.iter().any(|r| r.status == RowStatus::Failed);
    let layout = options.layout;
    Ok(session.finish(
        record,
        crate::report::page::write_folder,
        |record| crate::report::console::report(record, layout),
        failed,
    ))
}

/// Writes the memory the rows will fill before the first worker starts: their kept values
/// (`accumulate::prepare_kept_values`) and their tables of one entry per unit (the checker's
/// and the fold's, in `taskmeter_memory::UNIT_TABLES`, for the batch with the most units): what
/// it took.
fn prepare_memory(batches: &[Vec<&jobs::Job>], budget: u64) -> Prepared {
    let cpu_before = taskmeter_measure::process::own_cpu_ns();
    let plans: Vec<Vec<Plan>> = batches
        .iter()
        .map(|batch| {
            let available = batch.iter().filter(|job| job.available.is_ok());
            available.map(|job| rows::plan_for(&job.settings, job.info.base)).collect()
        })
        .collect();
    let rows = plans.iter().map(|plans| {
        plans
            .iter()
            .map(|plan| RowToCome {
                classes: plan.priority_classes,
                measured_on_time: plan.measured_on_time(),
                // Period 0 of unit 1 sleeps the shortest of every schedule.
                shortest_sleep_ns: plan.sleep.schedule.expected(1, 0),
            })
            .collect()
    });
    let values = taskmeter_analysis::accumulate::prepare_kept_values(rows, budget);
    let tables = |plans: &Vec<Plan>| -> Vec<usize> {
        let each = |plan: &Plan| {
            let [states, ends] = taskmeter_protocol::check::unit_table_bytes(plan.units);
            [states, ends, taskmeter_analysis::accumulate::unit_table_bytes(plan.units)]
        };
        plans.iter().flat_map(each).collect()
    };
    let most = plans.iter().map(tables).max_by_key(|sizes| sizes.iter().sum::<usize>()).unwrap_or_default();
    let tables = taskmeter_memory::UNIT_TABLES.prepare(most);
    Prepared {
        bytes: (values + tables) as u64,
        cpu_ns: taskmeter_measure::process::own_cpu_ns().saturating_sub(cpu_before),
    }
}

/// A privilege a flag asks for that this host refuses: an error before anything is measured.
/// (A policy swept over is judged per point: its refused points are skipped rows.)
fn refuse_what_the_host_refuses(options: &RunOptions) -> Result<(), super::ExperimentError> {
    let sched = &options.settings.sched;
    let swept = options.sweeps.iter().any(|s| s.param == sweep::Param::Policy);
    if let (Some(why), false) = (privilege::refusal(sched), swept) {
        return Err(super::ExperimentError::Settings(format!("--policy: {why}")));
    }
    let mlock = &privilege::probe().mlock;
    if sched.mlock && !mlock.granted {
        return Err(super::ExperimentError::Settings(format!(
            "--mlock cannot lock a worker's memory here: {}",
            mlock.detail
        )));
    }
    Ok(())
}

/// `--busy` as a time: each available runtime's rate estimate (`calibrate`), from which every
/// row's iterations are fitted before it runs; a runtime whose worker cannot say is not run,
/// with the reason.
fn rate_estimates(
    availability: &mut [(&'static runtimes::RuntimeInfo, Result<(), String>)],
    busy_ns: u64,
    s: &Settings,
) -> HashMap<&'static str, u64> {
    let mut found = HashMap::new();
    let mut said = Vec::new();
    for (info, available) in availability.iter_mut().filter(|(_, a)| a.is_ok()) {
        match calibrate::rate_estimate(info, busy_ns, &s.sched, std::time::Duration::from_nanos(s.grace_ns)) {
            Ok(iterations) => {
                found.insert(info.id, iterations);
                said.push(format!("{} {}", info.id, crate::report::format::format_count(iterations)));
            }
            Err(why) => {
                *available = Err(format!(
                    "could not turn --busy {} into iterations: {why}",
                    crate::report::format::format_ns(busy_ns as f64)
                ))
            }
        }
    }
    taskmeter_console::errln!(
        "busy work of {} a loop: iterations from each runtime's rate ({}), fitted to its loop{} before each row",
        crate::report::format::format_ns(busy_ns as f64),
        said.join(", "),
        if s.busy.yield_each_step { " with its yields" } else { "" }
    );
    found
}

/// A job to run, with how its busy iterations were fitted to `--busy TIME` (if they were).
type Fitted<'a> = (Job<'a>, Option<BusyFit>);

/// `--busy TIME`: each job of a batch with its busy iterations fitted to the time by probes of
/// its loop (`calibrate::fit`), run one after another just before the batch; a job whose fit
/// failed becomes a failed row, and once taskmeter is asked to stop, a job is not run (a
/// skipped row, as in the batches after).
fn fit_busy_work<'a>(
    to_run: Vec<&Job<'a>>,
    rate_estimates: &HashMap<&'static str, u64>,
    progress: &Progress,
) -> (Vec<Fitted<'a>>, Vec<(Job<'a>, Row)>) {
    let (mut fitted, mut unrun) = (Vec::new(), Vec::new());
    for job in to_run {
        let (Some(rate), Some(_)) = (rate_estimates.get(job.info.id), job.settings.busy_ns) else {
            fitted.push((job.with_busy_iters(job.settings.busy.iters), None));
            continue;
        };
        let stopped = |job: &Job| Some(rows::skipped_row(job, format!("not run: {}", signals::reason()?)));
        if let Some(row) = stopped(job) {
            unrun.push((job.with_busy_iters(0), row));
            continue;
        }
        progress.start_row(&format!("{}: fitting its busy work", job.info.id));
        match calibrate::fit(job.info, &job.settings, &job.sched(), *rate) {
            Ok(fit) => fitted.push((job.with_busy_iters(fit.iterations), Some(fit))),
            Err(why) => {
                let row = stopped(job)
                    .unwrap_or_else(|| rows::failed_job_row(job, format!("could not fit --busy to its loop: {why}")));
                unrun.push((job.with_busy_iters(0), row));
            }
        }
    }
    (fitted, unrun)
}

/// Runs the batches in order, each holding its point's PM QoS request: the rows.
fn run_batches(
    batches: &[Vec<&Job>],
    session: &mut Session,
    progress: &Progress,
    (points, repeat): (usize, u32),
    samples: Option<Arc<SamplesFile>>,
    (exact_samples, rate_estimates): (u64, &HashMap<&'static str, u64>),
) -> Result<Vec<Row>, super::ExperimentError> {
    let mut rows = Vec::new();
    let mut latency_request: Option<LatencyRequest> = None;
    for batch in batches {
        let wanted = batch.first().and_then(|job| job.settings.cpu_dma_latency_us);
        if latency_request.as_ref().map(|r| r.us) != wanted {
            drop(latency_request.take()); // the old request goes before the new one is made
            latency_request = wanted.map(LatencyRequest::hold).transpose()?;
        }
        let latency_in_force = cpu_dma_latency_us();
        let mut to_run = Vec::new();
        let stop = session.stop_reason();
        for job in batch {
            let skipped = match (job.available, &stop) {
                (Err(reason), _) => Some(reason.clone()),
                (Ok(()), Some(stop)) => Some(format!("not run: {stop}")),
                // A point of a sweep over policies that the host refuses.
                (Ok(()), None) => privilege::refusal(&job.sched()),
            };
            match skipped {
                Some(reason) => {
                    let mut row = rows::skipped_row(job, reason);
                    (row.point, row.repetition, row.sequence) =
                        (job.point.index, job.repetition, rows.len() + to_run.len());
                    rows.push(row);
                }
                None => {
                    session.environment.toolchains.insert(job.info.id.to_string(), runtimes::toolchain(job.info));
                    to_run.push(*job);
                }
            }
        }
        let (to_run, unrun) = fit_busy_work(to_run, rate_estimates, progress);
        for (job, mut row) in unrun {
            (row.point, row.repetition, row.sequence) = (job.point.index, job.repetition, rows.len());
            progress.finish_row(&job.label(points, repeat), &row);
            rows.push(row);
        }
        let context = RunContext {
            environment: &session.environment,
            progress,
            samples: samples.clone(),
            // Rows that run at once share the samples kept for exact percentiles.
            exact_samples: exact_samples / to_run.len().max(1) as u64,
        };
        let labels: Vec<String> = to_run.iter().map(|(job, _)| job.label(points, repeat)).collect();
        let results: Vec<Row> = match to_run.as_slice() {
            [] => Vec::new(),
            [(job, _)] => {
                progress.start_row(&labels[0]);
                vec![rows::run_job(job, &labels[0], &context)]
            }
            many => {
                progress.start_row(&format!("{} together", many.len()));
                std::thread::scope(|scope| {
                    let handles: Vec<_> = many
                        .iter()
                        .zip(&labels)
                        .map(|((job, _), label)| scope.spawn(|| rows::run_job(job, label, &context)))
                        .collect();
                    handles.into_iter().map(|h| h.join().expect("a worker thread panicked")).collect()
                })
            }
        };
        for (((job, fit), label), mut row) in to_run.into_iter().zip(&labels).zip(results) {
            (row.point, row.repetition, row.sequence) = (job.point.index, job.repetition, rows.len());
            row.busy_fit = fit;
            if let Some(worker) = row.worker.as_mut() {
                worker.cpu_dma_latency_us = latency_in_force;
            }
            progress.finish_row(label, &row);
            rows.push(row);
        }
    }
    Ok(rows)
}
