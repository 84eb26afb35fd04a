//! The flags of `run` the work loop takes ([`LoopArgs`]) and the options they make with every
//! experiment's and the workers' ([`options`]); every refusal is one sentence.

use super::RunOptions;
use crate::experiments::flags::{byte_size, duration, heading, output, EveryArgs, WorkerArgs};
use clap::{ArgMatches, Args, FromArgMatches, ValueEnum};
use taskmeter_analysis::accumulate::DEFAULT_EXACT_SAMPLES;
use taskmeter_machine::sched::{Policy, SchedSettings};
use taskmeter_measure::runtimes;
use taskmeter_model::run::{Metric, Settings};
use taskmeter_model::sweep::{Param, Sweep};
use taskmeter_protocol::plan::DEFAULT_WAIT;
use taskmeter_protocol::{parse_duration_ns, BusyPlan, Mode, Schedule, SleepPlan};

/// The flags of `run` the work loop takes (sleep, volume, atomic-sum, recipes), besides every
/// experiment's and the workers'.
#[derive(Args)]
pub struct LoopArgs {
    /// Units (threads, tasks) per runtime: N, or a list or range to sweep
    ///
    /// A list (1,10,100) or a range (1..100000:log10) sweeps them, as --sweep units=... does
    /// [default: 5; volume and atomic-sum: 1..10000:log10]
    #[arg(display_order = 30, long, value_name = "N|VALUES", allow_hyphen_values = true, help_heading = heading::MEASURE)]
    pub units: Option<String>,
    /// Sleep per iteration: fixed:D, by-unit:D, modulo:M:D or none
    ///
    /// fixed:D; by-unit:D (unit u sleeps u x D); modulo:M:D (iteration i sleeps (i % M + 1) x D);
    /// none (no sleep: each iteration yields instead and is counted, not timed). D is a duration:
    /// 250us, 1.5ms, 15s, 2m, 24h [default: fixed:1ms; volume and atomic-sum: modulo:20:1ms]
    #[arg(display_order = 40, long, value_name = "SCHEDULE", value_parser = Schedule::parse, help_heading = heading::MEASURE)]
    pub sleep: Option<Schedule>,
    /// absolute (until periodic deadlines) or relative (for a time)
    ///
    /// absolute: sleep until a fixed periodic deadline, the busy work included in the period, as
    /// cyclictest; relative: sleep(expected) after the busy work, as the seed studies [default:
    /// absolute; volume and atomic-sum: relative, as the v2 study slept]
    #[arg(display_order = 50, long, value_enum, hide_possible_values = true, help_heading = heading::MEASURE)]
    pub mode: Option<ModeArg>,
    /// Busy work before each sleep: iterations or a time (2us)
    ///
    /// N iterations of the same arithmetic in every runtime, or a time (2us), which each
    /// runtime's worker turns into its own iteration count first, as granularity sizes its tasks
    /// (the same arithmetic takes 0.7 µs in C and 120 µs in Python)
    #[arg(display_order = 60, long, value_name = "N|TIME", default_value = "1000", value_parser = busy_value, allow_negative_numbers = true, help_heading = heading::MEASURE)]
    pub busy: BusyArg,
    /// Whether --busy was typed (the recipes experiment times the wait alone unless it was): set
    /// from the matches by [`LoopArgs::parse`].
    #[arg(skip)]
    pub busy_given: bool,
    /// Yield to the runtime's scheduler after every busy-work step
    #[arg(display_order = 80, long = "yield", hide_short_help = true, help_heading = heading::MEASURE)]
    pub yield_each_step: bool,
    /// Split the units into this many priority classes
    ///
    /// 1 or 2: 2 gives odd units a high and even units a low priority, with what each runtime
    /// really offers (see `taskmeter list`)
    #[arg(display_order = 90, long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=2), hide_short_help = true, help_heading = heading::MEASURE)]
    pub priority_classes: u32,
    /// Run the runtimes' workers of each point at the same time, side by side
    ///
    /// Instead of one after another, to see how each fares beside the others.
    #[arg(display_order = 100, long, hide_short_help = true, help_heading = heading::MEASURE)]
    pub together: bool,
    /// Time a worker may spend starting its units; those not started by then make the row partial
    #[arg(display_order = 150, long, value_name = "DURATION", default_value = "10s", value_parser = duration, allow_hyphen_values = true, hide_short_help = true, help_heading = heading::TIME)]
    pub start_limit: u64,
    /// Sweep a parameter: NAME=VALUES (repeat the flag for every combination)
    ///
    /// VALUES: V1,V2,... or A..B:+STEP, A..B:*FACTOR, A..B:log10, A..B:log2. NAME: units, busy,
    /// sleep (the schedule's D), modulo (its M), duration, warmup, policy (policy=other,fifo:99),
    /// timer-slack, cpu-dma-latency. Several --sweep flags: every combination is a point.
    #[arg(display_order = 170, long = "sweep", value_name = "NAME=VALUES", value_parser = Sweep::parse, help_heading = heading::SWEEP)]
    pub sweeps: Vec<Sweep>,
    /// The order of the (runtime, point) workers
    ///
    /// shuffled: interleaved, so a drift of the machine favours no runtime; given: point by
    /// point, runtimes in --runtimes order
    #[arg(display_order = 180, long, value_enum, default_value = "shuffled", hide_short_help = true, help_heading = heading::SWEEP)]
    pub order: OrderArg,
    /// Seed of the shuffled order, to repeat a run's order exactly [default: random, recorded in run.json]
    #[arg(display_order = 190, long, value_name = "N", hide_short_help = true, help_heading = heading::SWEEP)]
    pub seed: Option<u64>,
    /// Workers' policy: other, batch, idle, fifo:PRIO or rr:PRIO
    ///
    /// The scheduling policy of every worker (PRIO 1-99), set before exec; sweep it with --sweep
    /// policy=other,fifo:99,...
    #[arg(display_order = 200, long, value_parser = Policy::parse, help_heading = heading::SCHED)]
    pub policy: Option<Policy>,
    /// Timer slack of every worker, in ns (or a duration such as 50us)
    ///
    /// Linux's default is 50 us; 1 is the smallest (Linux reads 0 as "the default")
    #[arg(display_order = 210, long, value_name = "NS", value_parser = taskmeter_machine::sched::parse_timer_slack, allow_hyphen_values = true, help_heading = heading::SCHED)]
    pub timer_slack: Option<u64>,
    /// Lock every worker's memory (mlockall)
    ///
    /// Preloaded into the worker; not possible for static binaries such as Go's, which the run
    /// records
    #[arg(display_order = 240, long, hide_short_help = true, help_heading = heading::SCHED)]
    pub mlock: bool,
    /// Allow a real-time policy with busy work on every core (it can starve the machine)
    #[arg(display_order = 250, long, hide_short_help = true, help_heading = heading::SCHED)]
    pub allow_rt_spin: bool,
    /// The console's layout
    ///
    /// ranked: one table per point, best first; study: every runtime and point in one table;
    /// volume: units, delay, iterations, memory; why: the kernel's counters per wake-up
    /// [default: ranked; volume for volume, atomic-sum and --sleep none]
    #[arg(display_order = 270, long, value_name = "LAYOUT", value_enum, help_heading = heading::OUTPUT)]
    pub table: Option<crate::report::tables::Layout>,
    /// The metric the table shows and ranks by
    #[arg(display_order = 280, long, value_parser = metric_parser(), default_value = "lateness", hide_short_help = true, help_heading = heading::OUTPUT)]
    pub metric: Metric,
    /// Also write every sample, as it arrives, to samples.csv.gz
    #[arg(display_order = 300, long, hide_short_help = true, help_heading = heading::OUTPUT)]
    pub raw: bool,
    /// Percentiles are exact up to this many measured samples per row
    ///
    /// Shared by the rows of --together; beyond, they come from HdrHistograms with 5 significant
    /// digits, and the table and run.json say so. A sample kept costs up to 16 bytes, 4 for each of
    /// its metrics (values from 0 to 262 µs are counted, not kept; those of 4.3 s or more take 8):
    /// up to 64 MiB a row at the default, written before the first worker starts as far as the
    /// rows' plans can fill it (run.json's taskmeter_prepared). A value kept costs taskmeter less
    /// CPU than one counted at 5 digits
    #[arg(display_order = 310, long, value_name = "N", default_value_t = DEFAULT_EXACT_SAMPLES, hide_short_help = true, help_heading = heading::OUTPUT)]
    pub exact_samples: u64,
    /// The most of a worker's samples that may wait for taskmeter's reader, e.g. 512MiB
    ///
    /// A worker whose samples come faster than taskmeter reads them queues them in memory (32
    /// bytes each); past this bound it is asked to stop, every sample it wrote is still read and
    /// counted, and its row is partial, with the figures [default: a quarter of the memory
    /// available as each worker starts (MemAvailable, or the room under a memory cgroup's
    /// limit), at least 64MiB]
    #[arg(display_order = 320, long, value_name = "SIZE", value_parser = byte_size, hide_short_help = true, help_heading = heading::OUTPUT)]
    pub max_backlog: Option<u64>,
}

impl LoopArgs {
    /// Its flags from `run`'s matches, with whether --busy was typed.
    pub fn parse(matches: &ArgMatches) -> Result<LoopArgs, clap::Error> {
        let mut args = LoopArgs::from_arg_matches(matches)?;
        args.busy_given = matches.value_source("busy") == Some(clap::parser::ValueSource::CommandLine);
        Ok(args)
    }
}

#[derive(Copy, Clone, ValueEnum)]
pub enum ModeArg {
    Relative,
    Absolute,
}

#[derive(Copy, Clone, ValueEnum, PartialEq)]
pub enum OrderArg {
    Shuffled,
    Given,
}

/// `--busy`: a count of iterations, or a time for each runtime to calibrate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum BusyArg {
    Iterations(u64),
    Time(u64),
}

pub fn busy_value(text: &str) -> Result<BusyArg, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map(BusyArg::Iterations).map_err(|_| "number too large to fit in 64 bits".into());
    }
    match parse_duration_ns(text)? {
        0 => Err("a busy time must be longer than 0 (--busy 0 is no busy work)".into()),
        ns => Ok(BusyArg::Time(ns)),
    }
}

/// `--units`: one count, or values to sweep.
pub fn units_arg(text: &str) -> Result<Result<u32, Sweep>, String> {
    if text.contains(',') || text.contains("..") {
        return Sweep::parse(&format!("units={text}")).map(Err);
    }
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(Ok(n)),
        _ => Err(format!("invalid value '{text}' for '--units': expected a number from 1 to 1000000, a list (1,10,100) or a range (1..100000:log10)")),
    }
}

/// `--metric`: one of the metrics, each with its definition in `--help`.
fn metric_parser() -> impl clap::builder::TypedValueParser<Value = Metric> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = taskmeter_model::run::METRICS.map(|m| PossibleValue::new(m.name()).help(m.about()));
    PossibleValuesParser::new(values).map(|name| name.parse::<Metric>().expect("one of the possible values"))
}

/// What `run` of the work loop (sleep, volume, atomic-sum, recipes) runs with.
pub fn options(every: &EveryArgs, workers: &WorkerArgs, args: &LoopArgs) -> Result<RunOptions, String> {
    let (settings, sweeps) = settings(every, workers, args)?;
    Ok(RunOptions {
        settings,
        experiment: every.experiment.name,
        sweeps,
        shuffle: args.order == OrderArg::Shuffled,
        seed: args.seed,
        metric: args.metric,
        layout: args.table,
        raw: args.raw,
        output: output(&every.output, &every.exports, every.format)?,
    })
}

/// Turns the flags into settings and sweeps; each point's settings are checked by the
/// experiment before anything runs.
fn settings(every: &EveryArgs, workers: &WorkerArgs, args: &LoopArgs) -> Result<(Settings, Vec<Sweep>), String> {
    let experiment = every.experiment;
    let defaults = experiment.defaults.as_ref().ok_or_else(|| format!("`run {}` has no work loop", experiment.name))?;
    let mut sweeps = args.sweeps.clone();
    if let Some(periods) = defaults.sleep_sweep {
        if args.sleep.is_none() && !args.sweeps.iter().any(|s| s.param == Param::Sleep) {
            sweeps.push(Sweep::parse(workers.by_quick(periods))?);
        }
    }
    let units = match units_arg(args.units.as_deref().unwrap_or(workers.by_quick(defaults.units)))? {
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
    let mut runtimes = workers.runtime_list()?;
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
        repeat: every.repeat.unwrap_or(1),
        together: args.together,
        duration_ns: workers.duration.unwrap_or(workers.by_quick(defaults.duration_ns)),
        warmup_ns: workers.warmup.unwrap_or(workers.by_quick(defaults.warmup_ns)),
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
        grace_ns: every.grace,
        sched: SchedSettings {
            policy: args.policy,
            timer_slack_ns: args.timer_slack,
            cpus: workers.cpus.clone().map(|c| c.0),
            mlock: args.mlock,
        },
        allow_rt_spin: args.allow_rt_spin,
        cpu_dma_latency_us: every.cpu_dma_latency,
        max_backlog_bytes: args.max_backlog,
        exact_samples: Some(args.exact_samples),
    };
    Ok((settings, sweeps))
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
