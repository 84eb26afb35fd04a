//! From flags to what each command runs with: settings and sweeps of `run` (the work loop:
//! sleep, volume, atomic-sum, recipes), the options of `run net`, `run granularity` and `bench`;
//! every refusal is one sentence. The registry (`families`) calls each family's.

use super::args::*;
use crate::experiments::bench::BenchOptions;
use crate::experiments::granularity::GrainOptions;
use crate::experiments::net::NetOptions;
use crate::experiments::sleep::RunOptions;
use crate::report::export::{Export, ExportFormat};
use crate::session::Output;
use std::path::PathBuf;
use taskmeter_machine::sched::SchedSettings;
use taskmeter_measure::runtimes;
use taskmeter_model::granularity::GrainSettings;
use taskmeter_model::run::Settings;
use taskmeter_model::sweep::{Param, Sweep};
use taskmeter_protocol::plan::DEFAULT_WAIT;
use taskmeter_protocol::{BusyPlan, Mode, Pattern, Schedule, SleepPlan};

/// Where a command's results go: its folder, the export files, JSON or the console.
pub(super) fn output(folder: &Option<PathBuf>, exports: &ExportArgs, format: Format) -> Result<Output, String> {
    let files = [
        (ExportFormat::Json, &exports.export_json),
        (ExportFormat::Csv, &exports.export_csv),
        (ExportFormat::Markdown, &exports.export_markdown),
    ];
    if let Some(label) = &exports.label {
        if label.is_empty() || label.chars().any(char::is_control) {
            return Err("--label takes a non-empty text without control characters".into());
        }
    }
    Ok(Output {
        folder: folder.clone(),
        exports: files.into_iter().filter_map(|(format, path)| Some(Export { format, path: path.clone()? })).collect(),
        json: matches!(format, Format::Json),
        command_line: std::env::args().collect(),
        history: crate::history::Target::choose(exports.history.as_deref(), exports.no_history)?,
        label: exports.label.clone(),
    })
}

/// `run` of the work loop (sleep, volume, atomic-sum, recipes).
pub(super) fn run_options(args: &RunArgs) -> Result<RunOptions, String> {
    let (settings, sweeps) = settings(args)?;
    Ok(RunOptions {
        settings,
        experiment: args.experiment.name,
        sweeps,
        shuffle: args.order == OrderArg::Shuffled,
        seed: args.seed,
        metric: args.metric,
        layout: args.table,
        raw: args.raw,
        exact_samples: args.exact_samples,
        output: output(&args.output, &args.exports, args.format)?,
    })
}

/// Turns the flags into settings and sweeps; each point's settings are checked by the
/// experiment before anything runs.
fn settings(args: &RunArgs) -> Result<(Settings, Vec<Sweep>), String> {
    let experiment = args.experiment;
    let defaults = experiment.defaults.as_ref().ok_or_else(|| format!("`run {}` has no work loop", experiment.name))?;
    let mut sweeps = args.sweeps.clone();
    if let Some(periods) = defaults.sleep_sweep {
        if args.sleep.is_none() && !args.sweeps.iter().any(|s| s.param == Param::Sleep) {
            sweeps.push(Sweep::parse(by_quick(args, periods))?);
        }
    }
    let units = match units_arg(args.units.as_deref().unwrap_or(by_quick(args, defaults.units)))? {
        Ok(n) => n,
        Err(sweep) => {
            if args.sweeps.iter().any(|s| s.param == Param::Units) {
                return Err("units are given twice: by --units and by --sweep units=...".into());
            }
            let first = sweep.values[0] as u32;
            sweeps.insert(0, sweep);
            first
        }
    };
    let schedule = args.sleep.unwrap_or(defaults.sleep);
    let mode = match args.mode {
        Some(ModeArg::Relative) => Mode::Relative,
        Some(ModeArg::Absolute) => Mode::Absolute,
        None => defaults.mode,
    };
    let mut runtimes = runtime_list(args)?;
    if defaults.with_recipes {
        runtimes = with_their_recipes(&runtimes);
    }
    let mut swept = Vec::new();
    for sweep in &sweeps {
        if swept.contains(&sweep.param) {
            return Err(format!("'{}' is swept twice", sweep.param.name()));
        }
        if sweep.param == Param::Busy && matches!(args.busy, BusyArg::Time(_)) {
            return Err("--sweep busy takes iterations; it cannot be combined with --busy as a time".into());
        }
        if sweep.param == Param::Modulo && !matches!(schedule, Schedule::Modulo { .. }) {
            return Err("sweeping modulo needs a modulo schedule (--sleep modulo:M:D)".into());
        }
        swept.push(sweep.param);
    }
    if args.seed.is_some() && args.order == OrderArg::Given {
        return Err("--seed only applies to --order shuffled".into());
    }
    let settings = Settings {
        runtimes,
        experiment: defaults.workers_run,
        units,
        priority_classes: args.priority_classes,
        start_limit_ns: args.start_limit,
        repeat: args.repeat.unwrap_or(1),
        together: args.together,
        duration_ns: args.duration.unwrap_or(by_quick(args, defaults.duration_ns)),
        warmup_ns: args.warmup.unwrap_or(by_quick(args, defaults.warmup_ns)),
        sleep: SleepPlan { mode, schedule },
        sleep_spec: schedule.to_string(),
        busy: BusyPlan {
            iters: match args.busy {
                BusyArg::Iterations(n) if !defaults.busy_only_when_given || args.busy_given => n,
                _ => 0,
            },
            yield_each_step: args.yield_each_step,
        },
        busy_ns: if let BusyArg::Time(ns) = args.busy { Some(ns) } else { None },
        grace_ns: args.grace,
        sched: SchedSettings {
            policy: args.policy,
            timer_slack_ns: args.timer_slack,
            cpus: args.cpus.clone().map(|c| c.0),
            mlock: args.mlock,
        },
        allow_rt_spin: args.allow_rt_spin,
        cpu_dma_latency_us: args.cpu_dma_latency,
    };
    Ok((settings, sweeps))
}

/// A default of the catalog: the first without `--quick`, the second with it.
fn by_quick<T>(args: &RunArgs, (full, quick): (T, T)) -> T {
    if args.quick {
        quick
    } else {
        full
    }
}

/// `--runtimes`: the ones listed, once each, every runtime (`all`), or without the flag the
/// default set (every runtime but the variants).
fn runtime_list(args: &RunArgs) -> Result<Vec<String>, String> {
    Ok(if args.runtimes.is_empty() {
        runtimes::default_ids().into_iter().map(str::to_string).collect()
    } else if args.runtimes == ["all"] {
        runtimes::ids().into_iter().map(str::to_string).collect()
    } else {
        let mut seen = Vec::new();
        for id in &args.runtimes {
            if id == "all" {
                return Err("'all' cannot be combined with other runtimes in --runtimes".into());
            }
            if seen.contains(id) {
                return Err(format!("runtime '{id}' is listed twice in --runtimes"));
            }
            seen.push(id.clone());
        }
        seen
    })
}

/// Each runtime followed by its recipes (`thread`, `thread/nanosleep`, ...), for the first
/// runtime of each language its own sleep under each machine knob (`thread+slack`,
/// `thread+fifo`) and, if its units are OS threads, each recipe that sleeps with a timer slack
/// of 1 ns (`thread/nanosleep+slack`), then the same recipes on every other version of its toolchain installed
/// (`java-thread@17`, `java-thread@17/park-nanos`, ...); a recipe or knob named on its own
/// stays as it is.
fn with_their_recipes(runtimes: &[String]) -> Vec<String> {
    let mut all = Vec::new();
    for id in runtimes {
        all.push(id.clone());
        let Some(info) = runtimes::find(id).filter(|info| info.recipe == DEFAULT_WAIT && info.knob.is_none()) else {
            continue;
        };
        let recipes =
            |at: &str| -> Vec<String> { info.recipes.iter().map(|(recipe, _)| format!("{at}/{recipe}")).collect() };
        all.extend(recipes(id));
        if info.first_of_language {
            all.extend(runtimes::Knob::ALL.map(|knob| format!("{id}+{}", knob.name())));
            // Where a unit is an OS thread, its own thread asks the kernel for each wake-up,
            // and that thread's timer slack decides it: each recipe that sleeps, with 1 ns too.
            if info.unit == runtimes::Unit::OsThread {
                let sleeping = info.recipes.iter().filter(|(recipe, _)| !runtimes::spins(recipe));
                all.extend(sleeping.map(|(recipe, _)| format!("{id}/{recipe}+{}", runtimes::Knob::Slack.name())));
            }
        }
        if info.toolchain.is_none() {
            for version in runtimes::other_versions(info) {
                let at = format!("{id}@{version}");
                all.push(at.clone());
                all.extend(recipes(&at));
            }
        }
    }
    all.dedup();
    all
}

/// `run granularity`.
pub(super) fn granularity_options(args: &RunArgs) -> Result<GrainOptions, String> {
    let cpus = args.cpus.clone().map(|c| c.0);
    let own_cpus = || std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let width = args.width.unwrap_or_else(|| cpus.as_ref().map_or_else(own_cpus, |c| c.len() as u32));
    let duration_ns = match args.duration {
        Some(0) => return Err("--duration must be longer than 0".into()),
        Some(ns) => ns,
        None if args.quick => 40_000_000,
        None => 100_000_000,
    };
    let mut runtimes = runtime_list(args)?;
    if args.runtimes.is_empty() || args.runtimes == ["all"] {
        // python-abs differs from python-thread only in how a unit sleeps; a task does not sleep,
        // so its row would repeat python-thread's.
        runtimes.retain(|r| r != "python-abs");
    }
    let settings = GrainSettings {
        runtimes,
        pattern: match args.pattern {
            PatternArg::Trivial => Pattern::Trivial,
            PatternArg::Chain => Pattern::Chain,
            PatternArg::Stencil => Pattern::Stencil,
        },
        width,
        steps: args.steps,
        grains_ns: args.task_busy.0.clone(),
        warmup_ns: args.warmup.unwrap_or(if args.quick { 10_000_000 } else { 20_000_000 }),
        duration_ns,
        calibrate_ns: args.calibrate,
        // METG with an interval by default: three workers per runtime.
        repeat: args.repeat.unwrap_or(3),
    };
    Ok(GrainOptions {
        settings,
        grace: std::time::Duration::from_nanos(args.grace),
        sched: SchedSettings { cpus, ..Default::default() },
        cpu_dma_latency_us: args.cpu_dma_latency,
        output: output(&args.output, &args.exports, args.format)?,
    })
}

/// `run net`.
pub(super) fn net_options(args: &RunArgs) -> Result<NetOptions, String> {
    let receivers = if args.receivers.is_empty() {
        ["thread", "tokio-mt", "c-thread", "go"].map(str::to_string).to_vec()
    } else {
        args.receivers.clone()
    };
    Ok(NetOptions {
        // Three receiver processes per point: a point varies by tens of percent from one to the next.
        settings: args.net.settings(receivers, args.repeat.unwrap_or(3)),
        grace: std::time::Duration::from_nanos(args.grace),
        cpu_dma_latency_us: args.cpu_dma_latency,
        output: output(&args.output, &args.exports, args.format)?,
    })
}

/// `bench`.
pub(super) fn bench_options(args: BenchArgs) -> Result<BenchOptions, String> {
    for (what, list) in [("scenario", &args.scenarios), ("input", &args.inputs)] {
        let mut names: Vec<&str> = list.iter().map(|(name, _)| name.as_str()).collect();
        names.sort_unstable();
        if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("the {what} name '{}' is given twice", twice[0]));
        }
    }
    let output = output(&args.output, &args.exports, args.format)?;
    Ok(BenchOptions {
        config: taskmeter_record::report::Config {
            warmup_ns: args.warmup,
            time_ns: args.time,
            drain_ns: args.drain,
            extended_statistics: args.extended_statistics,
            inputs: args.inputs.iter().map(|(name, _)| name.clone()).collect(),
        },
        scenarios: args.scenarios,
        inputs: args.inputs,
        show_output: args.show_output,
        output,
    })
}
