//! The flags of `run granularity` ([`GrainArgs`]) and the options they make with every
//! experiment's and the workers' ([`options`]).

use super::GrainOptions;
use crate::experiments::flags::{duration, heading, output, EveryArgs, WorkerArgs};
use clap::{Args, ValueEnum};
use taskmeter_machine::sched::SchedSettings;
use taskmeter_model::granularity::GrainSettings;
use taskmeter_protocol::{parse_duration_ns, Pattern};

/// The flags of `run granularity`, besides every experiment's and the workers'.
#[derive(Args)]
pub struct GrainArgs {
    /// How tasks depend on each other: trivial (default), chain, stencil
    ///
    /// trivial: all independent; chain: each started by the previous one, with its result;
    /// stencil: steps of --width tasks, each step awaited
    #[arg(display_order = 350, long, value_enum, default_value = "trivial", hide_default_value = true, hide_possible_values = true, help_heading = heading::GRAIN)]
    pub pattern: PatternArg,
    /// Task sizes, largest first: a list or a range
    ///
    /// The busy work of one task: a list (1ms,100us,10us) or a range A..B with K sizes per decade
    /// (A..B:K, default 2)
    #[arg(display_order = 360, long, value_name = "SIZES", value_parser = task_sizes, default_value = "1ms..10ns", help_heading = heading::GRAIN)]
    pub task_busy: TaskSizes,
    /// Tasks per step (W) [default: the CPUs the workers may run on]
    #[arg(display_order = 370, long, value_name = "W", value_parser = clap::value_parser!(u32).range(1..=4096), hide_short_help = true, help_heading = heading::GRAIN)]
    pub width: Option<u32>,
    /// Steps per round (S); a round is W x S tasks
    #[arg(display_order = 380, long, value_name = "S", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000), hide_short_help = true, help_heading = heading::GRAIN)]
    pub steps: u32,
    /// How long each serial measurement of a task's useful work runs
    #[arg(display_order = 390, long, value_name = "DURATION", default_value = "10ms", value_parser = duration, hide_short_help = true, help_heading = heading::GRAIN)]
    pub calibrate: u64,
}

#[derive(Copy, Clone, ValueEnum, PartialEq)]
pub enum PatternArg {
    Trivial,
    Chain,
    Stencil,
}

/// Task sizes (ns), strictly decreasing.
#[derive(Clone, Debug, PartialEq)]
pub struct TaskSizes(pub Vec<u64>);

/// `--task-busy`: `1ms,100us,10us`, or `A..B[:K]`: from A down to B, K sizes per decade
/// (A / 10^(i/K), rounded to whole ns), B included when it falls on that grid.
pub fn task_sizes(text: &str) -> Result<TaskSizes, String> {
    let usage = "expected a list of durations (1ms,100us,10us) or a range A..B[:K] (K sizes per decade, 1 to 10)";
    let size = |t: &str| match parse_duration_ns(t)? {
        0 => Err(format!("a task's busy work must be longer than 0, got '{t}'")),
        ns => Ok(ns),
    };
    let sizes: Vec<u64> = match text.split_once("..") {
        None => text.split(',').map(|t| size(t.trim())).collect::<Result<_, _>>()?,
        Some((from, rest)) => {
            let (to, per_decade) = match rest.split_once(':') {
                Some((to, k)) => (
                    to,
                    k.trim()
                        .parse::<u32>()
                        .ok()
                        .filter(|k| (1..=10).contains(k))
                        .ok_or_else(|| format!("invalid '{text}': {usage}"))?,
                ),
                None => (rest, 2),
            };
            let (from, to) = (size(from.trim())?, size(to.trim())?);
            if from <= to {
                return Err(format!("invalid '{text}': the range goes from the largest size down to the smallest"));
            }
            let mut sizes = Vec::new();
            for i in 0.. {
                let ns = (from as f64 / 10f64.powf(i as f64 / per_decade as f64)).round() as u64;
                if ns < to || ns == 0 {
                    break;
                }
                sizes.push(ns);
            }
            sizes
        }
    };
    if sizes.windows(2).any(|w| w[1] >= w[0]) {
        return Err(format!("invalid '{text}': task sizes go from the largest to the smallest, each smaller"));
    }
    if sizes.len() > taskmeter_protocol::plan::MAX_GRAINS {
        return Err(format!("invalid '{text}': at most {} task sizes", taskmeter_protocol::plan::MAX_GRAINS));
    }
    Ok(TaskSizes(sizes))
}

/// What `run granularity` runs with.
pub fn options(every: &EveryArgs, workers: &WorkerArgs, args: &GrainArgs) -> Result<GrainOptions, String> {
    let cpus = workers.cpus.clone().map(|c| c.0);
    let own_cpus = || std::thread::available_parallelism().map_or(1, |n| n.get() as u32);
    let width = args.width.unwrap_or_else(|| cpus.as_ref().map_or_else(own_cpus, |c| c.len() as u32));
    let duration_ns = match workers.duration {
        Some(0) => return Err("--duration must be longer than 0".into()),
        Some(ns) => ns,
        None if workers.quick => 40_000_000,
        None => 100_000_000,
    };
    let mut runtimes = workers.runtime_list()?;
    if workers.runtimes.is_empty() || workers.runtimes == ["all"] {
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
        warmup_ns: workers.warmup.unwrap_or(if workers.quick { 10_000_000 } else { 20_000_000 }),
        duration_ns,
        calibrate_ns: args.calibrate,
        // METG with an interval by default: three workers per runtime.
        repeat: every.repeat.unwrap_or(3),
    };
    Ok(GrainOptions {
        settings,
        grace: std::time::Duration::from_nanos(every.grace),
        sched: SchedSettings { cpus, ..Default::default() },
        cpu_dma_latency_us: every.cpu_dma_latency,
        output: output(&every.output, &every.exports, every.format)?,
    })
}
