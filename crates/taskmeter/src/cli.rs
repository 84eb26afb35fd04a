//! The command line: parsing, checking, and dispatch. Bad input is one line on stderr and exit 2.

use crate::plan::{parse_duration_ns, BusyPlan, Experiment, Mode, Schedule, SleepPlan};
use crate::results::{Metric, Settings};
use crate::run::{run, Exports, RunOptions};
use crate::sched::{CpuList, Policy, SchedSettings};
use crate::sweep::{Param, Sweep};
use crate::runtime;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use std::process::ExitCode;

#[derive(Parser)]
#[command(
    name = "taskmeter",
    version,
    about = "Measure how faithfully concurrency runtimes keep time and deliver work",
    long_about = "Measure how faithfully concurrency runtimes keep time and deliver work, side by side \
                  in one run. Every runtime runs in its own worker process; statistics are computed \
                  in one place from the raw timestamps."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// List every runtime, whether it is available here, and why not
    List,
    /// Run an experiment and write a results folder (default: sleep, all runtimes)
    #[command(after_long_help = PRESET_HELP, args_override_self = true)]
    Run(Box<RunArgs>),
    /// Benchmark your own asynchronous work: each scenario is a command whose processes call
    /// record() when a unit of work completes (clients in clients/)
    #[command(after_long_help = BENCH_HELP)]
    Bench(Box<BenchArgs>),
    /// TCP throughput across two machines, like iperf3: `net serve` on one, `net send` on the
    /// other, with the same --senders (`taskmeter run net` does both on loopback)
    Net {
        #[command(subcommand)]
        action: NetAction,
    },
    /// Serve one built-in receiver (net protocol 1); used by `run net`
    #[command(hide = true)]
    NetReceiver { runtime: String },
    /// Check a runtime's worker against the protocol v1 vectors
    CheckDriver {
        /// Runtime id (see `taskmeter list`)
        runtime: String,
    },
    /// Compare two runs: per runtime, point and metric, the change of median and p99 with a
    /// verdict (exit status 1 when something regressed beyond the threshold)
    Compare {
        /// The baseline: a results folder or its run.json
        old: PathBuf,
        /// The run to judge: a results folder or its run.json
        new: PathBuf,
        /// The metric to compare, or `all` [default: the old run's metric]
        #[arg(long, value_parser = metric_or_all)]
        metric: Option<MetricChoice>,
        /// Noise threshold in percent: smaller changes are never a verdict
        #[arg(long, default_value = "5%", value_parser = percent)]
        threshold: f64,
        /// Significance level of the Mann-Whitney U test
        #[arg(long, default_value_t = 0.05, value_parser = probability)]
        alpha: f64,
    },
    /// Rebuild the charts and report.html of a results folder from its run.json (or bench.json, net.json)
    Report {
        /// A results folder (or its run.json)
        results: PathBuf,
    },
    /// Benchmark the harness itself: the work loop's cost per sample in each Rust runtime
    Selftest {
        /// How long each measurement runs
        #[arg(long, default_value = "500ms", value_parser = duration)]
        duration: u64,
        /// How many times each measurement is repeated
        #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
    },
    /// Run one plan read from stdin (protocol v1); used by the orchestrator
    #[command(hide = true)]
    Worker,
}

const BENCH_HELP: &str = "Example:
  taskmeter bench --scenario fast='python3 clients/python/examples/sleeper.py 100' \\
                  --scenario slow='python3 clients/python/examples/sleeper.py 1000'

Each command runs with `sh -c`, again and again until the measurement ends (a body that runs
longer loops `while running()`). Its processes find the collector in TASKMETER_RECORD and
TASKMETER_RECORD_STREAM; TASKMETER_RECORD_UNTIL, TASKMETER_SCENARIO, TASKMETER_INPUT_NAME and
TASKMETER_INPUT are set too. Without TASKMETER_RECORD the clients do nothing.";

#[derive(Subcommand)]
enum NetAction {
    /// Run a receiver for the senders of `net send`, one sender count after another
    Serve {
        /// The receiver (see `taskmeter run net --help`)
        #[arg(long, default_value = "thread", value_parser = crate::net::receivers::check_id)]
        runtime: String,
        /// Address and port to listen on
        #[arg(long, default_value = "0.0.0.0:7878")]
        listen: String,
        #[command(flatten)]
        load: NetLoad,
    },
    /// Send to a `net serve` elsewhere, one sender count after another
    Send {
        /// The receiver's address and port
        #[arg(long)]
        to: std::net::SocketAddr,
        #[command(flatten)]
        load: NetLoad,
    },
}

/// The load of the net experiment, shared by `run net`, `net serve` and `net send`.
#[derive(Args, Clone)]
struct NetLoad {
    /// Sender counts, one point each: a number, a list (1,2,4) or a range (1..40)
    #[arg(long, value_parser = sender_counts, default_value = "1,2,4,8,16,24,32,40")]
    senders: SenderCounts,
    /// Messages per point, split across the senders as in the study (see --per-sender)
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    messages: u64,
    /// --messages is per sender instead of per point
    #[arg(long)]
    per_sender: bool,
    /// Bytes per message (and per ack)
    #[arg(long, default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=16 << 20))]
    message_size: u64,
}

#[derive(Clone)]
struct SenderCounts(Vec<u32>);

/// `N`, `A,B,C` or `A..B` (every count from A to B), mixed: `1..4,8,16`.
fn sender_counts(text: &str) -> Result<SenderCounts, String> {
    let mut counts = Vec::new();
    for part in text.split(',').map(str::trim) {
        let number = |t: &str| match t.trim().parse::<u32>() {
            Ok(n) if (1..=1000).contains(&n) => Ok(n),
            _ => Err(format!("invalid sender count '{t}' in '{text}': expected 1 to 1000")),
        };
        match part.split_once("..") {
            Some((a, b)) => {
                let (a, b) = (number(a)?, number(b)?);
                if a > b {
                    return Err(format!("the range '{part}' starts above its end"));
                }
                counts.extend(a..=b);
            }
            None => counts.push(number(part)?),
        }
    }
    Ok(SenderCounts(counts))
}

impl NetLoad {
    fn settings(&self, receivers: Vec<String>, repeat: u32) -> crate::net::NetSettings {
        crate::net::NetSettings {
            receivers,
            senders: self.senders.0.clone(),
            messages: self.messages,
            per_sender: self.per_sender,
            message_size: self.message_size as usize,
            repeat,
        }
    }
}

#[derive(Args)]
struct BenchArgs {
    /// A scenario: NAME=COMMAND (repeat for more)
    #[arg(long = "scenario", value_name = "NAME=COMMAND", required = true, value_parser = name_value)]
    scenarios: Vec<(String, String)>,
    /// An input: NAME=VALUE, passed to each command as TASKMETER_INPUT (repeat for more; every
    /// scenario runs once per input)
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = name_value)]
    inputs: Vec<(String, String)>,
    /// Time each scenario runs before it is measured (its units are counted apart)
    #[arg(long, default_value = "2s", value_parser = duration)]
    warmup: u64,
    /// Time each scenario is measured
    #[arg(long, default_value = "5s", value_parser = positive_duration)]
    time: u64,
    /// The longest wait after the measurement for the body's last run to end
    #[arg(long, default_value = "1s", value_parser = duration)]
    drain: u64,
    /// Also show minimum, maximum, sample size and mode
    #[arg(long)]
    extended_statistics: bool,
    /// Let the commands' stdout and stderr through (default: discarded; stderr kept for errors)
    #[arg(long)]
    show_output: bool,
    /// The results folder to write [default: results/<UTC timestamp>-bench]
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Also write bench.json to FILE
    #[arg(long, value_name = "FILE")]
    export_json: Option<PathBuf>,
    /// table: the report; json: bench.json on stdout
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

fn name_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() && !value.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("'{text}' is not NAME=VALUE")),
    }
}

fn positive_duration(text: &str) -> Result<u64, String> {
    match parse_duration_ns(text)? {
        0 => Err(format!("'{text}' must be longer than 0")),
        ns => Ok(ns),
    }
}

const PRESET_HELP: &str = "Presets:
  taskmeter run PRESET.toml [FLAGS]
  A preset is a TOML file whose keys are the flags above, e.g.

      runtimes = [\"c-thread\", \"python-thread\"]
      sleep = \"fixed:250us\"
      sweep = [\"policy=other,fifo:99,rr:99,batch,idle\"]
      yield = true

  Flags typed on the command line override the preset's. The presets in experiments/
  reproduce the seed studies: copy one and edit it.";

#[derive(Copy, Clone, ValueEnum)]
enum Format {
    Table,
    Json,
}

#[derive(Args)]
struct RunArgs {
    /// The experiment to run
    #[arg(value_enum, default_value = "sleep")]
    experiment: ExperimentArg,
    /// net: the receivers, comma-separated [default: thread,tokio-mt,c-thread,go]
    #[arg(long, value_delimiter = ',', value_parser = crate::net::receivers::check_id)]
    receivers: Vec<String>,
    #[command(flatten)]
    net: NetLoad,
    /// Comma-separated runtime ids, or `all` [default: all: every runtime available here]
    #[arg(long, value_delimiter = ',', value_parser = runtime_id, action = clap::ArgAction::Set)]
    runtimes: Vec<String>,
    /// Units (threads, tasks, ...) per runtime: a number, or a list or range to sweep (as
    /// --sweep units=...) [default: 5; volume and atomic-sum: 1..10000:log10]
    #[arg(long, value_name = "N|VALUES", allow_hyphen_values = true)]
    units: Option<String>,
    /// Sleep per iteration: fixed:D, by-unit:D (unit id x D), modulo:M:D ((i % M + 1) x D), or
    /// none (a yield instead, counted not timed) [default: fixed:1ms; volume and atomic-sum: modulo:20:1ms]
    #[arg(long, value_parser = Schedule::parse)]
    sleep: Option<Schedule>,
    /// Split the units into this many priority classes: 2 gives odd units a high and even units
    /// a low priority, with what each runtime really offers (see `taskmeter list`)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=2))]
    priority_classes: u32,
    /// Time a worker may spend starting its units; those not started by then make the row partial
    #[arg(long, default_value = "10s", value_parser = duration, allow_hyphen_values = true)]
    start_limit: u64,
    /// Run the runtimes' workers of each point at the same time, side by side, instead of one
    /// after another (to see how each fares beside the others)
    #[arg(long)]
    together: bool,
    /// relative: sleep(expected) after the busy work; absolute: sleep until a fixed periodic
    /// deadline [default: absolute; volume and atomic-sum: relative, as the v2 study slept]
    #[arg(long, value_enum)]
    mode: Option<ModeArg>,
    /// Busy-work iterations before each sleep
    #[arg(long, default_value_t = 1000, allow_negative_numbers = true)]
    busy: u64,
    /// Yield to the runtime's scheduler after every busy-work step
    #[arg(long = "yield")]
    yield_each_step: bool,
    /// Measured time per runtime, after the warm-up [default: 1.5s; 300ms with --quick]
    #[arg(long, value_parser = duration, allow_hyphen_values = true)]
    duration: Option<u64>,
    /// Time before the measurement; its samples are excluded from statistics [default: 500ms; 100ms with --quick]
    #[arg(long, value_parser = duration, allow_hyphen_values = true)]
    warmup: Option<u64>,
    /// Extra time a worker gets beyond its plan before it is killed
    #[arg(long, default_value = "10s", value_parser = duration, allow_hyphen_values = true)]
    grace: u64,
    /// A first look in about 10 seconds: 300 ms per runtime after 100 ms of warm-up
    #[arg(long)]
    quick: bool,
    /// Workers per runtime and point (net: per receiver and sender count), each its own
    /// process, all interleaved; with 2 or more, every interval comes from the variation
    /// between them (a 95 % Student-t interval)
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=1000))]
    repeat: u32,
    /// Sweep a parameter: NAME=V1,V2,... or NAME=A..B:+STEP, A..B:*FACTOR, A..B:log10, A..B:log2.
    /// NAME: units, busy, sleep (the schedule's D), modulo (its M), duration, warmup. Repeat the
    /// flag to sweep several: every combination is a point.
    #[arg(long = "sweep", value_name = "NAME=VALUES", value_parser = Sweep::parse)]
    sweeps: Vec<Sweep>,
    /// The order of the (runtime, point) workers: shuffled (interleaved, so drift of the machine
    /// favours no runtime) or given (runtimes in --runtimes order within each point)
    #[arg(long, value_enum, default_value = "shuffled")]
    order: OrderArg,
    /// Seed of the shuffled order, to repeat a run's order exactly [default: random, recorded in run.json]
    #[arg(long)]
    seed: Option<u64>,
    /// The metric the table shows and ranks by
    #[arg(long, value_enum, default_value = "lateness")]
    metric: Metric,
    /// How the console shows the results [default: ranked; volume for volume, atomic-sum and --sleep none]
    #[arg(long, value_enum)]
    table: Option<crate::output::Layout>,
    /// Scheduling policy of every worker: other, batch, idle, fifo:PRIO or rr:PRIO (1-99), set
    /// before exec; sweep it with --sweep policy=other,fifo:99,...
    #[arg(long, value_parser = Policy::parse)]
    policy: Option<Policy>,
    /// Timer slack of every worker, in ns (or a duration such as 50us); Linux's default is 50 us
    #[arg(long, value_name = "NS", value_parser = crate::sched::parse_timer_slack, allow_hyphen_values = true)]
    timer_slack: Option<u64>,
    /// CPUs the workers may run on, e.g. 1 or 0-1 (sched_setaffinity)
    #[arg(long, value_name = "LIST", value_parser = crate::sched::parse_cpus)]
    cpus: Option<CpuList>,
    /// Lock every worker's memory (mlockall, preloaded into the worker; not possible for static
    /// binaries such as Go's, which the run records)
    #[arg(long)]
    mlock: bool,
    /// Allow a real-time policy with busy work on every core (it can starve the machine)
    #[arg(long)]
    allow_rt_spin: bool,
    /// Hold a PM QoS CPU latency request of US microseconds (/dev/cpu_dma_latency, root) while
    /// the workers run, as cyclictest does with 0: idle CPUs then stay in states that wake
    /// within it. Sweep it with --sweep cpu-dma-latency=0,none
    #[arg(long, value_name = "US", value_parser = crate::sweep::parse_latency_us)]
    cpu_dma_latency: Option<u32>,
    /// Also write the run record (run.json) to FILE
    #[arg(long, value_name = "FILE")]
    export_json: Option<PathBuf>,
    /// Also write summary.csv to FILE
    #[arg(long, value_name = "FILE")]
    export_csv: Option<PathBuf>,
    /// Also write the result tables as Markdown to FILE, ready to paste into an issue or a paper
    #[arg(long, value_name = "FILE")]
    export_markdown: Option<PathBuf>,
    /// The results folder to write [default: results/<UTC timestamp>-sleep]
    #[arg(long, short = 'o')]
    output: Option<PathBuf>,
    /// Also write every sample to samples.csv
    #[arg(long)]
    raw: bool,
    /// table: the human report; json: run.json on stdout
    #[arg(long, value_enum, default_value = "table")]
    format: Format,
}

#[derive(Copy, Clone, ValueEnum, PartialEq)]
enum OrderArg {
    Shuffled,
    Given,
}

#[derive(Copy, Clone, ValueEnum, PartialEq)]
enum ExperimentArg {
    /// How late units wake up: the work loop at one point, or swept
    Sleep,
    /// The sleep loop over a growing number of units (the v2 study): delay, iterations and memory per unit
    Volume,
    /// Every iteration increments one shared atomic counter: increments per second vs units
    AtomicSum,
    /// TCP message throughput with 1..N senders against each receiver (the TCP study)
    Net,
}

impl ExperimentArg {
    fn name(self) -> &'static str {
        match self {
            ExperimentArg::Sleep => "sleep",
            ExperimentArg::Volume => "volume",
            ExperimentArg::AtomicSum => "atomic-sum",
            ExperimentArg::Net => "net",
        }
    }
}

/// The experiments each flag of `taskmeter run` applies to, by clap argument id. A flag typed
/// (or set by a preset) for an experiment that does not use it is refused, never ignored.
const FLAG_SCOPE: &[(&str, &[ExperimentArg])] = {
    use ExperimentArg::*;
    const EVERY: &[ExperimentArg] = &[Sleep, Volume, AtomicSum, Net];
    const LOOP: &[ExperimentArg] = &[Sleep, Volume, AtomicSum];
    const NET: &[ExperimentArg] = &[Net];
    &[
        ("experiment", EVERY), ("repeat", EVERY), ("cpu_dma_latency", EVERY), ("grace", EVERY), ("output", EVERY), ("format", EVERY), ("export_json", EVERY),
        ("receivers", NET), ("senders", NET), ("messages", NET), ("per_sender", NET), ("message_size", NET),
        ("runtimes", LOOP), ("units", LOOP), ("sleep", LOOP), ("priority_classes", LOOP), ("start_limit", LOOP),
        ("together", LOOP), ("mode", LOOP), ("busy", LOOP), ("yield_each_step", LOOP), ("duration", LOOP),
        ("warmup", LOOP), ("quick", LOOP), ("sweeps", LOOP), ("order", LOOP), ("seed", LOOP), ("metric", LOOP),
        ("table", LOOP), ("policy", LOOP), ("timer_slack", LOOP), ("cpus", LOOP), ("mlock", LOOP),
        ("allow_rt_spin", LOOP), ("export_csv", LOOP), ("export_markdown", LOOP), ("raw", LOOP),
    ]
};

/// Refuses a `run` flag given for an experiment it does not apply to, naming the ones it does.
fn check_flag_scope(matches: &ArgMatches) -> Result<(), String> {
    let Some(run) = matches.subcommand_matches("run") else { return Ok(()) };
    let experiment = run.get_one::<ExperimentArg>("experiment").copied().unwrap_or(ExperimentArg::Sleep);
    let command = Cli::command();
    let arguments = command.find_subcommand("run").expect("run is a subcommand");
    for argument in arguments.get_arguments() {
        let id = argument.get_id().as_str();
        if run.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let scope = FLAG_SCOPE.iter().find(|(name, _)| *name == id).map_or(&[][..], |(_, scope)| *scope);
        if !scope.contains(&experiment) {
            let flag = argument.get_long().map_or_else(|| id.to_string(), |long| format!("--{long}"));
            let names: Vec<&str> = scope.iter().map(|e| e.name()).collect();
            let belongs = match names.as_slice() {
                [] => "no experiment".to_string(),
                [one] => one.to_string(),
                [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
            };
            let hint = if id == "runtimes" { "; `run net` takes --receivers" } else { "" };
            return Err(format!("{flag} does not apply to `run {}` (it applies to {belongs}){hint}", experiment.name()));
        }
    }
    Ok(())
}

/// `--units`: one count, or values to sweep.
fn units_arg(text: &str) -> Result<Result<u32, Sweep>, String> {
    if text.contains(',') || text.contains("..") {
        return Sweep::parse(&format!("units={text}")).map(Err);
    }
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(Ok(n)),
        _ => Err(format!("invalid value '{text}' for '--units': expected a number from 1 to 1000000, a list (1,10,100) or a range (1..100000:log10)")),
    }
}

#[derive(Copy, Clone, ValueEnum)]
enum ModeArg {
    Relative,
    Absolute,
}

#[derive(Clone, Copy)]
enum MetricChoice {
    One(Metric),
    All,
}

fn metric_or_all(text: &str) -> Result<MetricChoice, String> {
    if text == "all" {
        return Ok(MetricChoice::All);
    }
    Metric::from_str(text, false).map(MetricChoice::One).map_err(|_| {
        format!("unknown metric '{text}' (use lateness, actual, full, busy or all)")
    })
}

fn percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<f64>() {
        Ok(p) if (0.0..=1e6).contains(&p) => Ok(p / 100.0),
        _ => Err(format!("'{text}' is not a percentage (e.g. 5%)")),
    }
}

fn probability(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!("'{text}' is not a probability between 0 and 1")),
    }
}

fn duration(text: &str) -> Result<u64, String> {
    parse_duration_ns(text)
}

fn runtime_id(text: &str) -> Result<String, String> {
    if text == "all" {
        return Ok(text.into());
    }
    match runtime::find(text) {
        Some(info) => Ok(info.id.to_string()),
        None => Err(format!("unknown runtime '{text}' (known: {})", runtime::ids().join(", "))),
    }
}

pub fn main() -> ExitCode {
    let args = match crate::preset::expand(std::env::args().collect()) {
        Ok(args) => args,
        Err(message) => {
            eprintln!("taskmeter: {message}");
            return ExitCode::from(2);
        }
    };
    let parsed = Cli::command().try_get_matches_from(args).and_then(|matches| {
        let cli = Cli::from_arg_matches(&matches)?;
        Ok((cli, matches))
    });
    let cli = match parsed {
        Ok((cli, matches)) => {
            if let Err(message) = check_flag_scope(&matches) {
                eprintln!("taskmeter: {message}");
                return ExitCode::from(2);
            }
            cli
        }
        Err(e) if !e.use_stderr() => {
            // --help and --version
            let _ = e.print();
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            let rendered = e.render().to_string();
            let mut lines = rendered.lines().map(str::trim).filter(|l| !l.is_empty());
            let mut first = lines.next().unwrap_or("error: invalid arguments").trim_start_matches("error: ").to_string();
            // "the following required arguments were not provided:" names them on the next line.
            if first.ends_with(':') {
                first = format!("{first} {}", lines.next().unwrap_or_default());
            }
            eprintln!("taskmeter: {first}");
            return ExitCode::from(2);
        }
    };
    if matches!(cli.command, Command::List | Command::Report { .. } | Command::Compare { .. } | Command::Selftest { .. }) {
        crate::output::quiet_on_closed_stdout();
    }
    let result = match cli.command {
        Command::List => {
            crate::list::print();
            Ok(ExitCode::SUCCESS)
        }
        Command::Run(args) if args.experiment == ExperimentArg::Net => net_options(&args).and_then(crate::net::run),
        Command::Run(args) => settings(&args).and_then(|(settings, sweeps)| {
            run(RunOptions {
                settings,
                experiment: args.experiment.name(),
                sweeps,
                shuffle: args.order == OrderArg::Shuffled,
                seed: args.seed,
                exports: Exports {
                    json: args.export_json.clone(),
                    csv: args.export_csv.clone(),
                    markdown: args.export_markdown.clone(),
                },
                metric: args.metric,
                layout: args.table,
                output: args.output,
                raw: args.raw,
                json: matches!(args.format, Format::Json),
                command_line: std::env::args().collect(),
            })
        }),
        Command::Net { action: NetAction::Serve { runtime, listen, load } } => crate::net::serve_only(&runtime, &listen, &load.settings(vec![runtime.clone()], 1)),
        Command::Net { action: NetAction::Send { to, load } } => crate::net::send_only(to, &load.settings(Vec::new(), 1)),
        Command::NetReceiver { runtime } => Ok(ExitCode::from(crate::net::receiver::main(&runtime))),
        Command::Bench(args) => bench_options(*args).and_then(crate::bench::run),
        Command::CheckDriver { runtime } => crate::check::check_driver(&runtime),
        Command::Report { results } => crate::export::rebuild_report(&results),
        Command::Compare { old, new, metric, threshold, alpha } => {
            let metric = match metric {
                Some(MetricChoice::All) => Ok(None),
                Some(MetricChoice::One(m)) => Ok(Some(m)),
                None if crate::compare::is_bench(&old) => Ok(None),
                None => crate::compare::load_run(&old).map(|r| Some(r.metric)),
            };
            metric.and_then(|metric| {
                crate::compare::run(crate::compare::CompareOptions { old, new, metric, threshold, alpha })
            })
        }
        Command::Selftest { duration, repeat } => crate::selftest::run(duration, repeat),
        Command::Worker => return crate::worker::main(),
    };
    result.unwrap_or_else(|message| {
        eprintln!("taskmeter: {message}");
        ExitCode::from(2)
    })
}

/// Turns the flags into settings and sweeps; each point's settings are checked by
/// [`check_settings`].
fn settings(args: &RunArgs) -> Result<(Settings, Vec<Sweep>), String> {
    let study = args.experiment != ExperimentArg::Sleep;
    let mut sweeps = args.sweeps.clone();
    let default_units = if study { "1..10000:log10" } else { "5" };
    let units = match units_arg(args.units.as_deref().unwrap_or(default_units))? {
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
    let schedule = args.sleep.unwrap_or(if study { Schedule::Modulo { m: 20, ns: 1_000_000 } } else { Schedule::Fixed { ns: 1_000_000 } });
    let mode = match args.mode {
        Some(ModeArg::Relative) => Mode::Relative,
        Some(ModeArg::Absolute) => Mode::Absolute,
        None if study => Mode::Relative,
        None => Mode::Absolute,
    };
    let runtimes = if args.runtimes.is_empty() || args.runtimes == ["all"] {
        runtime::ids().into_iter().map(str::to_string).collect()
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
    };
    let mut swept = Vec::new();
    for sweep in &sweeps {
        if swept.contains(&sweep.param) {
            return Err(format!("'{}' is swept twice", sweep.param.name()));
        }
        if sweep.param == Param::Modulo && !matches!(schedule, Schedule::Modulo { .. }) {
            return Err("sweeping modulo needs a modulo schedule (--sleep modulo:M:D)".into());
        }
        swept.push(sweep.param);
    }
    if args.seed.is_some() && args.order == OrderArg::Given {
        return Err("--seed only applies to --order shuffled".into());
    }
    let experiment = if args.experiment == ExperimentArg::AtomicSum { Experiment::AtomicSum } else { Experiment::Sleep };
    let settings = Settings {
        runtimes,
        experiment,
        units,
        priority_classes: args.priority_classes,
        start_limit_ns: args.start_limit,
        repeat: args.repeat,
        together: args.together,
        duration_ns: args.duration.unwrap_or(if args.quick { 300_000_000 } else { 1_500_000_000 }),
        warmup_ns: args.warmup.unwrap_or(if args.quick { 100_000_000 } else { 500_000_000 }),
        sleep: SleepPlan { mode, schedule },
        sleep_spec: schedule.to_string(),
        busy: BusyPlan { iters: args.busy, yield_each_step: args.yield_each_step },
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

/// The rules a point's settings obey; every refusal is one clear sentence.
fn net_options(args: &RunArgs) -> Result<crate::net::NetOptions, String> {
    let receivers = if args.receivers.is_empty() {
        ["thread", "tokio-mt", "c-thread", "go"].map(str::to_string).to_vec()
    } else {
        args.receivers.clone()
    };
    Ok(crate::net::NetOptions {
        settings: args.net.settings(receivers, args.repeat),
        grace: std::time::Duration::from_nanos(args.grace),
        output: args.output.clone(),
        export_json: args.export_json.clone(),
        cpu_dma_latency_us: args.cpu_dma_latency,
        json: matches!(args.format, Format::Json),
        command_line: std::env::args().collect(),
    })
}

fn bench_options(args: BenchArgs) -> Result<crate::bench::BenchOptions, String> {
    for (what, list) in [("scenario", &args.scenarios), ("input", &args.inputs)] {
        let mut names: Vec<&str> = list.iter().map(|(name, _)| name.as_str()).collect();
        names.sort_unstable();
        if let Some(twice) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(format!("the {what} name '{}' is given twice", twice[0]));
        }
    }
    Ok(crate::bench::BenchOptions {
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
        output: args.output,
        export_json: args.export_json,
        json: matches!(args.format, Format::Json),
        command_line: std::env::args().collect(),
    })
}

pub fn check_settings(settings: &Settings) -> Result<(), String> {
    if settings.duration_ns == 0 {
        return Err("--duration must be longer than 0".into());
    }
    if settings.units == 0 {
        return Err("units must be >= 1".into());
    }
    if settings.start_limit_ns == 0 {
        return Err("--start-limit must be longer than 0".into());
    }
    let schedule = settings.sleep.schedule;
    let longest = schedule.max_expected(settings.units);
    if longest > settings.duration_ns {
        return Err(format!(
            "the longest sleep ({}, with --sleep {} and {} units) is longer than --duration ({}): no iteration could be measured",
            crate::output::format_ns(longest as f64),
            schedule,
            settings.units,
            crate::output::format_ns(settings.duration_ns as f64)
        ));
    }
    let shortest = schedule.expected(1, 0);
    if settings.sleep.mode == Mode::Absolute && shortest > 0 && shortest < 1_000 {
        return Err("absolute mode needs a period of at least 1us (a shorter one only counts missed periods)".into());
    }
    check_real_time(settings)?;
    crate::run::plan_for(settings, "thread").check()
}

/// A real-time worker that busy-works on every core can starve the machine (RT throttling
/// leaves others 5 % of each second), so it needs an explicit yes.
fn check_real_time(settings: &Settings) -> Result<(), String> {
    let Some(policy) = settings.sched.policy.filter(|p| p.is_real_time()) else { return Ok(()) };
    let online = crate::sched::online_cpus().len();
    let usable = settings.sched.cpus.as_ref().map_or(online, |c| c.len());
    let works = settings.busy.iters > 0 || !settings.sleep.schedule.sleeps();
    let spins = works && settings.units as usize >= usable && usable >= online;
    if spins && !settings.allow_rt_spin {
        return Err(format!(
            "policy {policy} with busy work (or --sleep none) on {} units can keep all {online} cores busy at real-time priority and starve the machine; \
             pin the workers to fewer cores with --cpus, use --busy 0, or pass --allow-rt-spin",
            settings.units
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_run_flag_names_the_experiments_it_applies_to() {
        let command = Cli::command();
        let run = command.find_subcommand("run").unwrap();
        for argument in run.get_arguments().filter(|a| !matches!(a.get_id().as_str(), "help")) {
            let id = argument.get_id().as_str();
            assert!(FLAG_SCOPE.iter().any(|(name, scope)| *name == id && !scope.is_empty()), "--{id} has no scope");
        }
        for (name, _) in FLAG_SCOPE {
            assert!(run.get_arguments().any(|a| a.get_id() == *name), "{name} is not a flag of run");
        }
    }
}
