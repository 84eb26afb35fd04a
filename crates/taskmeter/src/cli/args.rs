//! The flags of every command (clap) and the parsers of their values; a bad value is one line.

use crate::experiments::catalog::{self, ExperimentInfo, EXPERIMENTS};
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use taskmeter_machine::sched::{CpuList, Policy};
use taskmeter_measure::runtimes;
use taskmeter_model::run::Metric;
use taskmeter_model::sweep::Sweep;
use taskmeter_protocol::{parse_duration_ns, Schedule};

#[derive(Parser)]
#[command(
    name = "taskmeter",
    version,
    about = "Measure how faithfully concurrency runtimes keep time and deliver work",
    long_about = "Measure how faithfully concurrency runtimes keep time and deliver work, side by side \
                  in one run. Every runtime runs in its own worker process; statistics are computed \
                  in one place from the raw timestamps."
)]
pub(super) struct Cli {
    #[command(subcommand)]
    pub(super) command: Command,
    /// No progress on stderr
    ///
    /// The live line and the line per finished row or point are not printed; warnings, errors and
    /// results are, as always.
    #[arg(short, long, global = true)]
    pub(super) quiet: bool,
    /// Colour the output: auto (default), always or never
    ///
    /// auto colours a stream that is a terminal, unless NO_COLOR is set to anything but empty;
    /// CLICOLOR_FORCE (set, and not 0) colours one that is not. Colour marks a table's header, the best row, warnings
    /// and errors.
    #[arg(
        long,
        value_name = "WHEN",
        value_enum,
        default_value = "auto",
        global = true,
        hide_default_value = true,
        hide_possible_values = true
    )]
    pub(super) color: ColorArg,
    /// Check the command line (flags, values, a preset, the settings of every point) and stop:
    /// nothing is measured or written. Used by the test that runs every command of the docs
    #[arg(long, global = true, hide = true)]
    pub(super) dry_run: bool,
}

/// `--color`.
#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum ColorArg {
    Auto,
    Always,
    Never,
}

impl ColorArg {
    /// The last `--color WHEN` or `--color=WHEN` among `args`, read before they are parsed so that
    /// clap's own help and errors follow it too; a value clap will refuse counts as `auto`.
    pub(super) fn scan(args: &[String]) -> ColorArg {
        let mut choice = ColorArg::Auto;
        let mut words = args.iter().skip(1);
        while let Some(word) = words.next() {
            if word == "--" {
                break;
            }
            let value = match word.strip_prefix("--color") {
                Some("") => words.next().map(String::as_str),
                Some(rest) => rest.strip_prefix('='),
                None => None,
            };
            if let Some(found) = value.and_then(|v| ColorArg::from_str(v, false).ok()) {
                choice = found;
            }
        }
        choice
    }

    pub(super) fn choice(self) -> anstream::ColorChoice {
        match self {
            ColorArg::Auto => anstream::ColorChoice::Auto,
            ColorArg::Always => anstream::ColorChoice::Always,
            ColorArg::Never => anstream::ColorChoice::Never,
        }
    }
}

#[derive(Subcommand)]
pub(super) enum Command {
    /// List every runtime and receiver, and whether it is available here
    ///
    /// Every runtime and receiver, what its unit is, whether it is available here, and why not
    List {
        /// `recipes`: every runtime's ways to wait besides its own sleep (`run recipes` measures them)
        #[arg(value_enum)]
        what: Option<ListWhat>,
        /// `table` (default) or `json`: {"runtimes": [{id, unit, available, reason, version, timer,
        /// default_run, description, priority, other_versions}], "receivers": [{id, available,
        /// reason, description}]}; with `recipes`:
        /// {"recipes": [{id, runtime, recipe, about, available, reason}]}
        #[arg(long, value_enum, default_value = "table")]
        format: TextFormat,
    },
    /// Run an experiment and write a results folder (default: sleep, all runtimes)
    #[command(after_long_help = PRESET_HELP, args_override_self = true,
              mut_arg("messages", |a| a.hide_short_help(true)),
              mut_arg("message_size", |a| a.hide_short_help(true)))]
    Run(Box<RunArgs>),
    /// Benchmark your own asynchronous work
    ///
    /// Each scenario is a command whose processes call record() when a unit of work completes
    /// (clients in clients/)
    #[command(after_long_help = BENCH_HELP)]
    Bench(Box<BenchArgs>),
    /// TCP throughput across two machines, like iperf3
    ///
    /// `net serve` on one, `net send` on the other, with the same --senders (`taskmeter run net`
    /// does both on loopback)
    Net {
        #[command(subcommand)]
        action: NetAction,
    },
    /// Serve one built-in receiver (net protocol 2); used by `run net`
    #[command(hide = true)]
    NetReceiver { runtime: String },
    /// Check a runtime's worker against the protocol vectors
    #[command(after_help = super::check_driver::HELP)]
    CheckDriver {
        /// Runtime id (see `taskmeter list`)
        runtime: String,
    },
    /// Compare two sets of runs: a verdict from the variation between runs
    ///
    /// Per runtime (receiver, scenario), point and metric; exit status 1 when something regressed
    /// beyond the threshold
    #[command(after_long_help = COMPARE_HELP)]
    Compare {
        /// The baseline: a results folder (its repetitions are its runs), its record file, or a
        /// folder of results folders
        old: PathBuf,
        /// The runs to judge, the same way
        new: PathBuf,
        /// The metric to compare: lateness, actual, full, busy, or all [default: the old run's metric]
        #[arg(long, value_parser = metric_or_all)]
        metric: Option<MetricChoice>,
        /// Noise threshold in percent: smaller changes are never a verdict
        #[arg(long, value_name = "PERCENT", default_value = "5%", value_parser = percent)]
        threshold: f64,
        /// The chance, for the whole comparison, of a verdict where nothing changed (Holm's
        /// adjustment over its lines)
        #[arg(long, default_value_t = 0.05, value_parser = probability)]
        alpha: f64,
        /// Compare even when the two measured different things (another busy work, sleep,
        /// duration, units...)
        #[arg(long)]
        force: bool,
        /// Judge interrupted runs and repetitions that are not whole (partial, interrupted,
        /// failed) too; by default they are left out and counted
        #[arg(long)]
        include_incomplete: bool,
        /// `table` (default) or `json` (schema taskmeter.compare, see docs/statistics.md)
        #[arg(long, value_enum, default_value = "table")]
        format: TextFormat,
    },
    /// The recorded runs: list, show, import, trend, compare, check (docs/history.md)
    History {
        /// The history to read: a SQLite file or a postgres:// URL [default: $TASKMETER_HISTORY,
        /// else $XDG_DATA_HOME/taskmeter/history.sqlite]
        #[arg(long, global = true, value_name = "PATH|URL")]
        history: Option<String>,
        #[command(subcommand)]
        action: HistoryAction,
    },
    /// Rebuild the charts and report.html of a results folder
    ///
    /// From its record alone: run.json, granularity.json, net.json or bench.json
    Report {
        /// A results folder (or its run.json)
        results: PathBuf,
        /// Also write the run's samples (kept with --raw, as samples.csv.gz) as plain CSV to FILE
        #[arg(long, value_name = "FILE")]
        samples_csv: Option<PathBuf>,
        /// Also print a run's console report in this layout (e.g. `why`)
        #[arg(long, value_enum, value_name = "LAYOUT")]
        table: Option<crate::report::tables::Layout>,
        /// Also write every figure to FOLDER, ready for a paper: SVG, and PNG at 300 dpi (8.5 cm
        /// wide) when built with the feature `print`
        #[arg(long, value_name = "FOLDER")]
        figures: Option<PathBuf>,
    },
    /// Benchmark the harness itself
    ///
    /// The work loop's cost per sample in each Rust runtime
    Selftest {
        /// How long each measurement runs
        #[arg(long, value_name = "DURATION", default_value = "500ms", value_parser = duration)]
        duration: u64,
        /// How many times each measurement is repeated
        #[arg(long, value_name = "N", default_value_t = 5, value_parser = clap::value_parser!(u32).range(1..))]
        repeat: u32,
        /// `table` (default) or `json` (schema taskmeter.selftest: each figure's median, min and
        /// max over the repetitions)
        #[arg(long, value_enum, default_value = "table")]
        format: TextFormat,
    },
    /// Print a shell completion script
    ///
    /// For example `taskmeter completions bash > /etc/bash_completion.d/taskmeter`, `taskmeter
    /// completions zsh > ~/.zfunc/_taskmeter`, `taskmeter completions fish >
    /// ~/.config/fish/completions/taskmeter.fish`
    Completions {
        #[arg(value_enum)]
        shell: clap_complete::Shell,
    },
    /// Print the man page of taskmeter or of one command, or write every page
    ///
    /// In roff: `taskmeter man run | man -l -`; for packagers, `taskmeter man --dir
    /// /usr/local/share/man/man1` writes taskmeter.1, taskmeter-run.1 and one page per command.
    Man {
        /// The command whose page to print (`run`, `history check`) [default: taskmeter's own]
        command: Vec<String>,
        /// Write every command's page into this folder instead
        #[arg(long, value_name = "DIR", conflicts_with = "command")]
        dir: Option<PathBuf>,
    },
    /// Run one plan read from stdin (the worker protocol); used by the orchestrator
    #[command(hide = true)]
    Worker,
    /// Kill, when taskmeter is gone, the process groups it was running; used by the orchestrator
    #[command(hide = true)]
    Guard,
}

pub(super) const COMPARE_HELP: &str = "A verdict needs two or more runs on each side: run both with --repeat 3 (or
more), or give folders that each hold several results folders. With one run a side every line
is `inconclusive`: nothing then says how much two runs differ when nothing changed. The two
sides' settings and environments are compared first: a different workload is refused unless
--force; other differences (timer slack, policy, kernel, versions) are printed above the table.";

#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub(super) enum TextFormat {
    Table,
    Json,
}

pub(super) const BENCH_HELP: &str = "Example:
  taskmeter bench --scenario fast='python3 clients/python/examples/sleeper.py 100' \\
                  --scenario slow='python3 clients/python/examples/sleeper.py 1000'

Each command runs with `sh -c`, again and again until the measurement ends (a body that runs
longer loops `while running()`). Its processes find the collector in TASKMETER_RECORD and
TASKMETER_RECORD_STREAM; TASKMETER_RECORD_UNTIL, TASKMETER_SCENARIO, TASKMETER_INPUT_NAME and
TASKMETER_INPUT are set too. Without TASKMETER_RECORD the clients do nothing.";

#[derive(Subcommand)]
pub(super) enum NetAction {
    /// Run a receiver for the senders of `net send`, one sender count after another
    Serve {
        /// The receiver (one of `run net --receivers`, see `taskmeter run net --help`;
        /// `--runtime` still works)
        #[arg(long = "receiver", alias = "runtime", value_name = "RECEIVER", default_value = "thread", value_parser = crate::experiments::net::registry::check_id)]
        runtime: String,
        /// Address and port to listen on (every interface by default, as iperf3: only senders
        /// with the session cookie it prints, or the key, can join)
        #[arg(long, value_name = "ADDR", default_value = "0.0.0.0:7878")]
        listen: String,
        /// Admit only senders holding this key (a file of at least 16 bytes, the same on both
        /// sides) instead of the session cookie
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
        #[command(flatten)]
        load: NetLoad,
    },
    /// Send to a `net serve` elsewhere, one sender count after another
    Send {
        /// The receiver's address and port
        #[arg(long, value_name = "ADDR")]
        to: std::net::SocketAddr,
        /// The session cookie `net serve` printed, from a file: its first line (make it
        /// readable by you alone: `umask 077; echo COOKIE > FILE`)
        ///
        /// Or in the environment variable TASKMETER_NET_COOKIE, or `--cookie -`. Never on the
        /// command line, where `ps` shows it to every user.
        #[arg(long, value_name = "FILE", conflicts_with_all = ["key_file", "cookie"])]
        cookie_file: Option<PathBuf>,
        /// `-`: read the session cookie from standard input (one line); a cookie given here is
        /// refused, as `ps` would show it
        #[arg(long, value_name = "-", conflicts_with = "key_file")]
        cookie: Option<String>,
        /// The key file `net serve` was given (instead of a session cookie)
        #[arg(long, value_name = "FILE")]
        key_file: Option<PathBuf>,
        #[command(flatten)]
        load: NetLoad,
    },
}

/// The load of the net experiment, shared by `run net`, `net serve` and `net send`.
#[derive(Args, Clone)]
pub(super) struct NetLoad {
    /// Sender counts: N, a list or a range
    ///
    /// One point each; lists and ranges mix: 1..4,8,16
    #[arg(long, value_name = "VALUES", value_parser = sender_counts, default_value = "1,2,4,8,16,24,32,40")]
    pub(super) senders: SenderCounts,
    /// Messages per point, split across the senders as in the study (see --per-sender)
    #[arg(long, value_name = "N", default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..=100_000_000))]
    pub(super) messages: u64,
    /// --messages is per sender instead of per point
    #[arg(long, hide_short_help = true)]
    pub(super) per_sender: bool,
    /// Bytes per message (and per ack)
    #[arg(long, value_name = "BYTES", default_value_t = 1024, value_parser = clap::value_parser!(u64).range(1..=16 << 20))]
    pub(super) message_size: u64,
}

#[derive(Clone)]
pub(super) struct SenderCounts(pub(super) Vec<u32>);

/// `N`, `A,B,C` or `A..B` (every count from A to B), mixed: `1..4,8,16`.
pub(super) fn sender_counts(text: &str) -> Result<SenderCounts, String> {
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
    pub(super) fn settings(&self, receivers: Vec<String>, repeat: u32) -> taskmeter_model::net::NetSettings {
        taskmeter_model::net::NetSettings {
            receivers,
            senders: self.senders.0.clone(),
            messages: self.messages,
            per_sender: self.per_sender,
            message_size: self.message_size as usize,
            repeat,
        }
    }
}

/// Files to write besides the results folder, as hyperfine does; each record kind has all three.
#[derive(Args)]
pub(super) struct ExportArgs {
    /// Also write the record (run.json, net.json, bench.json) to FILE
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub(super) export_json: Option<PathBuf>,
    /// Also write the summary as CSV (summary.csv; one line per scenario and input for bench) to FILE
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub(super) export_csv: Option<PathBuf>,
    /// Also write the result tables as Markdown to FILE, ready to paste into an issue or a paper
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub(super) export_markdown: Option<PathBuf>,
    /// Record the run in this history: a SQLite file or a postgres:// URL [default:
    /// $TASKMETER_HISTORY, else $XDG_DATA_HOME/taskmeter/history.sqlite] (docs/history.md)
    #[arg(long, value_name = "PATH|URL", conflicts_with = "no_history", hide_short_help = true)]
    pub(super) history: Option<String>,
    /// Do not record the run in the history
    #[arg(long, hide_short_help = true)]
    pub(super) no_history: bool,
    /// A label kept with the run (in its record and the history), e.g. a git commit
    #[arg(long, value_name = "TEXT")]
    pub(super) label: Option<String>,
}

#[derive(Args)]
pub(super) struct BenchArgs {
    /// A scenario: NAME=COMMAND (repeat for more)
    #[arg(long = "scenario", value_name = "NAME=COMMAND", required = true, value_parser = name_value)]
    pub(super) scenarios: Vec<(String, String)>,
    /// An input: NAME=VALUE, passed to each command as TASKMETER_INPUT (repeat for more; every
    /// scenario runs once per input)
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = name_value)]
    pub(super) inputs: Vec<(String, String)>,
    /// Time each scenario runs before it is measured (its units are counted apart)
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration)]
    pub(super) warmup: u64,
    /// Time each scenario is measured (as `run --duration`; `--time` still works)
    #[arg(long = "duration", alias = "time", value_name = "DURATION", default_value = "5s", value_parser = positive_duration)]
    pub(super) time: u64,
    /// The longest wait after the measurement for the body's last run to end
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    pub(super) drain: u64,
    /// Also show minimum, maximum, sample size and mode
    #[arg(long)]
    pub(super) extended_statistics: bool,
    /// Let the commands' stdout and stderr through (default: discarded; stderr kept for errors)
    #[arg(long)]
    pub(super) show_output: bool,
    /// The results folder to write [default: results/<UTC timestamp>-bench]
    #[arg(long, short = 'o', value_name = "DIR")]
    pub(super) output: Option<PathBuf>,
    #[command(flatten)]
    pub(super) exports: ExportArgs,
    /// table: the report; json: bench.json on stdout
    #[arg(long, value_enum, default_value = "table")]
    pub(super) format: Format,
}

pub(super) fn name_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() && !value.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("'{text}' is not NAME=VALUE")),
    }
}

pub(super) fn positive_duration(text: &str) -> Result<u64, String> {
    match parse_duration_ns(text)? {
        0 => Err(format!("'{text}' must be longer than 0")),
        ns => Ok(ns),
    }
}

pub(super) const PRESET_HELP: &str = "Presets:
  taskmeter run PRESET.toml [FLAGS]
  A preset is a TOML file whose keys are the flags above, e.g.

      runtimes = [\"c-thread\", \"python-thread\"]
      sleep = \"fixed:250us\"
      sweep = [\"policy=other,fifo:99,rr:99,batch,idle\"]
      yield = true

  Flags typed on the command line override the preset's. The presets in experiments/
  reproduce the seed studies: copy one and edit it.";

#[derive(Copy, Clone, ValueEnum)]
pub(super) enum Format {
    Table,
    Json,
}

/// The headings of `run --help`, in the order they are shown.
pub(super) mod heading {
    pub const MEASURE: &str = "What to measure";
    pub const TIME: &str = "How long";
    pub const SWEEP: &str = "Sweeps and order";
    pub const SCHED: &str = "Scheduling and the machine";
    pub const OUTPUT: &str = "Outputs";
    pub const NET: &str = "run net";
    pub const GRAIN: &str = "run granularity";
}

#[derive(Args)]
pub(super) struct RunArgs {
    #[arg(
        value_parser = experiment_arg(),
        help = experiment_help(false),
        default_value = "sleep",
        long_help = experiment_help(true),
        hide_default_value = true,
        hide_possible_values = true,
        display_order = 0,
        help_heading = heading::MEASURE
    )]
    pub(super) experiment: &'static ExperimentInfo,
    /// Runtime ids, comma-separated, or `all`
    ///
    /// `all` is every runtime available here; without the flag, every one but the variants
    /// (one thread, a pool, a thread per unit: `taskmeter list` marks them), so the default run
    /// stays within a minute; `taskmeter list` shows them all and why one is not available
    /// [default: every runtime but the variants]
    #[arg(long, value_name = "IDS", value_delimiter = ',', value_parser = runtime_id, action = clap::ArgAction::Set, help_heading = heading::MEASURE)]
    pub(super) runtimes: Vec<String>,
    /// Units (threads, tasks) per runtime: N, or a list or range to sweep
    ///
    /// A list (1,10,100) or a range (1..100000:log10) sweeps them, as --sweep units=... does
    /// [default: 5; volume and atomic-sum: 1..10000:log10]
    #[arg(long, value_name = "N|VALUES", allow_hyphen_values = true, help_heading = heading::MEASURE)]
    pub(super) units: Option<String>,
    /// Sleep per iteration: fixed:D, by-unit:D, modulo:M:D or none
    ///
    /// fixed:D; by-unit:D (unit u sleeps u x D); modulo:M:D (iteration i sleeps (i % M + 1) x D);
    /// none (no sleep: each iteration yields instead and is counted, not timed). D is a duration:
    /// 250us, 1.5ms, 15s, 2m, 24h [default: fixed:1ms; volume and atomic-sum: modulo:20:1ms]
    #[arg(long, value_name = "SCHEDULE", value_parser = Schedule::parse, help_heading = heading::MEASURE)]
    pub(super) sleep: Option<Schedule>,
    /// absolute (until periodic deadlines) or relative (for a time)
    ///
    /// absolute: sleep until a fixed periodic deadline, the busy work included in the period, as
    /// cyclictest; relative: sleep(expected) after the busy work, as the seed studies [default:
    /// absolute; volume and atomic-sum: relative, as the v2 study slept]
    #[arg(long, value_enum, hide_possible_values = true, help_heading = heading::MEASURE)]
    pub(super) mode: Option<ModeArg>,
    /// Busy work before each sleep: iterations or a time (2us)
    ///
    /// N iterations of the same arithmetic in every runtime, or a time (2us), which each
    /// runtime's worker turns into its own iteration count first, as granularity sizes its tasks
    /// (the same arithmetic takes 0.7 µs in C and 120 µs in Python)
    #[arg(long, value_name = "N|TIME", default_value = "1000", value_parser = busy_value, allow_negative_numbers = true, help_heading = heading::MEASURE)]
    pub(super) busy: BusyArg,
    /// Whether --busy was typed (the recipes experiment times the wait alone unless it was).
    #[arg(skip)]
    pub(super) busy_given: bool,
    /// Yield to the runtime's scheduler after every busy-work step
    #[arg(long = "yield", hide_short_help = true, help_heading = heading::MEASURE)]
    pub(super) yield_each_step: bool,
    /// Split the units into this many priority classes
    ///
    /// 1 or 2: 2 gives odd units a high and even units a low priority, with what each runtime
    /// really offers (see `taskmeter list`)
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..=2), hide_short_help = true, help_heading = heading::MEASURE)]
    pub(super) priority_classes: u32,
    /// Run the runtimes' workers of each point at the same time, side by side
    ///
    /// Instead of one after another, to see how each fares beside the others.
    #[arg(long, hide_short_help = true, help_heading = heading::MEASURE)]
    pub(super) together: bool,
    /// Measured time per runtime, after the warm-up
    ///
    /// [default: 1.5s; 300ms with --quick; granularity: per task size, 100ms; 40ms with --quick]
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true, help_heading = heading::TIME)]
    pub(super) duration: Option<u64>,
    /// Time before the measurement, excluded from statistics
    ///
    /// Its samples are reported but not counted [default: 500ms; 100ms with --quick; granularity:
    /// rounds before each task size's measurement, 20ms; 10ms with --quick]
    #[arg(long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true, help_heading = heading::TIME)]
    pub(super) warmup: Option<u64>,
    /// A first look: 300 ms per runtime after 100 ms of warm-up
    ///
    /// granularity: 40 ms per task size after 10 ms of warm-up rounds
    #[arg(long, help_heading = heading::TIME)]
    pub(super) quick: bool,
    /// Workers per runtime and point; 2 or more give 95 % ranges
    ///
    /// net: per receiver and sender count. Each is its own process, all interleaved; with 2 or
    /// more, every range comes from the variation between them (the 95 % range for the mean
    /// another invocation would give; ratios and METG on a log scale) [default: 1; net and
    /// granularity: 3]
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000), help_heading = heading::TIME)]
    pub(super) repeat: Option<u32>,
    /// Time a worker may spend starting its units; those not started by then make the row partial
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration, allow_hyphen_values = true, hide_short_help = true, help_heading = heading::TIME)]
    pub(super) start_limit: u64,
    /// Extra time a worker gets beyond its plan before it is killed
    ///
    /// And its row failed. net: the longest wait for a receiver to start, to acknowledge a
    /// message, and to report
    #[arg(long, value_name = "DURATION", default_value = "10s", value_parser = duration, allow_hyphen_values = true, hide_short_help = true, help_heading = heading::TIME)]
    pub(super) grace: u64,
    /// Sweep a parameter: NAME=VALUES (repeat the flag for every combination)
    ///
    /// VALUES: V1,V2,... or A..B:+STEP, A..B:*FACTOR, A..B:log10, A..B:log2. NAME: units, busy,
    /// sleep (the schedule's D), modulo (its M), duration, warmup, policy (policy=other,fifo:99),
    /// timer-slack, cpu-dma-latency. Several --sweep flags: every combination is a point.
    #[arg(long = "sweep", value_name = "NAME=VALUES", value_parser = Sweep::parse, help_heading = heading::SWEEP)]
    pub(super) sweeps: Vec<Sweep>,
    /// The order of the (runtime, point) workers
    ///
    /// shuffled: interleaved, so a drift of the machine favours no runtime; given: point by
    /// point, runtimes in --runtimes order
    #[arg(long, value_enum, default_value = "shuffled", hide_short_help = true, help_heading = heading::SWEEP)]
    pub(super) order: OrderArg,
    /// Seed of the shuffled order, to repeat a run's order exactly [default: random, recorded in run.json]
    #[arg(long, value_name = "N", hide_short_help = true, help_heading = heading::SWEEP)]
    pub(super) seed: Option<u64>,
    /// Workers' policy: other, batch, idle, fifo:PRIO or rr:PRIO
    ///
    /// The scheduling policy of every worker (PRIO 1-99), set before exec; sweep it with --sweep
    /// policy=other,fifo:99,...
    #[arg(long, value_parser = Policy::parse, help_heading = heading::SCHED)]
    pub(super) policy: Option<Policy>,
    /// Timer slack of every worker, in ns (or a duration such as 50us)
    ///
    /// Linux's default is 50 us; 1 is the smallest (Linux reads 0 as "the default")
    #[arg(long, value_name = "NS", value_parser = taskmeter_machine::sched::parse_timer_slack, allow_hyphen_values = true, help_heading = heading::SCHED)]
    pub(super) timer_slack: Option<u64>,
    /// CPUs the workers may run on, e.g. 1 or 0-1 (sched_setaffinity)
    #[arg(long, value_name = "LIST", value_parser = taskmeter_machine::sched::parse_cpus, help_heading = heading::SCHED)]
    pub(super) cpus: Option<CpuList>,
    /// Hold a PM QoS CPU latency request of US µs (root)
    ///
    /// /dev/cpu_dma_latency is held while the workers run, as cyclictest does with 0: idle CPUs
    /// then stay in states that wake within it. Sweep it with --sweep cpu-dma-latency=0,none
    #[arg(long, value_name = "US", value_parser = taskmeter_model::sweep::parse_latency_us, help_heading = heading::SCHED)]
    pub(super) cpu_dma_latency: Option<u32>,
    /// Lock every worker's memory (mlockall)
    ///
    /// Preloaded into the worker; not possible for static binaries such as Go's, which the run
    /// records
    #[arg(long, hide_short_help = true, help_heading = heading::SCHED)]
    pub(super) mlock: bool,
    /// Allow a real-time policy with busy work on every core (it can starve the machine)
    #[arg(long, hide_short_help = true, help_heading = heading::SCHED)]
    pub(super) allow_rt_spin: bool,
    /// The results folder to write [default: results/<UTC timestamp>-EXPERIMENT]
    #[arg(long, short = 'o', value_name = "DIR", help_heading = heading::OUTPUT)]
    pub(super) output: Option<PathBuf>,
    /// The console's layout
    ///
    /// ranked: one table per point, best first; study: every runtime and point in one table;
    /// volume: units, delay, iterations, memory; why: the kernel's counters per wake-up
    /// [default: ranked; volume for volume, atomic-sum and --sleep none]
    #[arg(long, value_name = "LAYOUT", value_enum, help_heading = heading::OUTPUT)]
    pub(super) table: Option<crate::report::tables::Layout>,
    /// The metric the table shows and ranks by
    #[arg(long, value_parser = metric_parser(), default_value = "lateness", hide_short_help = true, help_heading = heading::OUTPUT)]
    pub(super) metric: Metric,
    /// table (default: the report) or json (the record on stdout)
    ///
    /// json prints the record (run.json, net.json or granularity.json) on stdout instead of the
    /// report
    #[arg(long, value_enum, default_value = "table", hide_default_value = true, hide_possible_values = true, help_heading = heading::OUTPUT)]
    pub(super) format: Format,
    /// Also write every sample, as it arrives, to samples.csv.gz
    #[arg(long, hide_short_help = true, help_heading = heading::OUTPUT)]
    pub(super) raw: bool,
    /// Percentiles are exact up to this many measured samples per row
    ///
    /// Shared by the rows of --together; beyond, they come from HdrHistograms with 5 significant
    /// digits, and the table and run.json say so. Each sample kept costs up to about 32 bytes (values
    /// from 0 to 262 µs are counted, not kept; those of 4.3 s or more take twice the room)
    #[arg(long, value_name = "N", default_value_t = 1_000_000, hide_short_help = true, help_heading = heading::OUTPUT)]
    pub(super) exact_samples: u64,
    #[command(flatten, next_help_heading = heading::OUTPUT)]
    pub(super) exports: ExportArgs,
    /// The receivers, comma-separated [default: thread,tokio-mt,c-thread,go]
    #[arg(long, value_name = "IDS", value_delimiter = ',', value_parser = crate::experiments::net::registry::check_id, help_heading = heading::NET)]
    pub(super) receivers: Vec<String>,
    #[command(flatten, next_help_heading = heading::NET)]
    pub(super) net: NetLoad,
    /// How tasks depend on each other: trivial (default), chain, stencil
    ///
    /// trivial: all independent; chain: each started by the previous one, with its result;
    /// stencil: steps of --width tasks, each step awaited
    #[arg(long, value_enum, default_value = "trivial", hide_default_value = true, hide_possible_values = true, help_heading = heading::GRAIN)]
    pub(super) pattern: PatternArg,
    /// Task sizes, largest first: a list or a range
    ///
    /// The busy work of one task: a list (1ms,100us,10us) or a range A..B with K sizes per decade
    /// (A..B:K, default 2)
    #[arg(long, value_name = "SIZES", value_parser = task_sizes, default_value = "1ms..10ns", help_heading = heading::GRAIN)]
    pub(super) task_busy: TaskSizes,
    /// Tasks per step (W) [default: the CPUs the workers may run on]
    #[arg(long, value_name = "W", value_parser = clap::value_parser!(u32).range(1..=4096), hide_short_help = true, help_heading = heading::GRAIN)]
    pub(super) width: Option<u32>,
    /// Steps per round (S); a round is W x S tasks
    #[arg(long, value_name = "S", default_value_t = 50, value_parser = clap::value_parser!(u32).range(1..=100_000), hide_short_help = true, help_heading = heading::GRAIN)]
    pub(super) steps: u32,
    /// How long each serial measurement of a task's useful work runs
    #[arg(long, value_name = "DURATION", default_value = "10ms", value_parser = duration, hide_short_help = true, help_heading = heading::GRAIN)]
    pub(super) calibrate: u64,
}

#[derive(Copy, Clone, ValueEnum, PartialEq)]
pub(super) enum PatternArg {
    Trivial,
    Chain,
    Stencil,
}

/// Task sizes (ns), strictly decreasing.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TaskSizes(pub(super) Vec<u64>);

/// `--task-busy`: `1ms,100us,10us`, or `A..B[:K]`: from A down to B, K sizes per decade
/// (A / 10^(i/K), rounded to whole ns), B included when it falls on that grid.
pub(super) fn task_sizes(text: &str) -> Result<TaskSizes, String> {
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

#[derive(Copy, Clone, ValueEnum, PartialEq)]
pub(super) enum OrderArg {
    Shuffled,
    Given,
}

#[derive(Copy, Clone, ValueEnum, PartialEq)]
pub(super) enum ListWhat {
    /// Every runtime and receiver (the default)
    Runtimes,
    /// Every runtime's wait recipes
    Recipes,
}

/// The experiment argument: a name of the catalog (`experiments/catalog.rs`).
fn experiment_arg() -> impl clap::builder::TypedValueParser<Value = &'static ExperimentInfo> {
    let names = EXPERIMENTS.iter().map(|e| clap::builder::PossibleValue::new(e.name).help(e.about));
    let parser = clap::builder::PossibleValuesParser::new(names);
    clap::builder::TypedValueParser::map(parser, |name: String| {
        catalog::find(&name).expect("one of the possible values")
    })
}

/// The help on the experiment, from the catalog: its names (`-h`), or each with what it measures.
fn experiment_help(long: bool) -> String {
    let names: Vec<&str> = EXPERIMENTS.iter().map(|e| e.name).collect();
    let (last, others) = names.split_last().expect("experiments exist");
    let short = format!("{} or {last}; or a preset file, PRESET.toml [default: sleep]", others.join(", "));
    if !long {
        return short;
    }
    let each: Vec<String> = EXPERIMENTS.iter().map(|e| format!("{}: {}", e.name, e.about)).collect();
    format!("{short}\n\n{}.", each.join(";\n"))
}

/// `--units`: one count, or values to sweep.
pub(super) fn units_arg(text: &str) -> Result<Result<u32, Sweep>, String> {
    if text.contains(',') || text.contains("..") {
        return Sweep::parse(&format!("units={text}")).map(Err);
    }
    match text.trim().parse::<u32>() {
        Ok(n) if (1..=1_000_000).contains(&n) => Ok(Ok(n)),
        _ => Err(format!("invalid value '{text}' for '--units': expected a number from 1 to 1000000, a list (1,10,100) or a range (1..100000:log10)")),
    }
}

#[derive(Copy, Clone, ValueEnum)]
pub(super) enum ModeArg {
    Relative,
    Absolute,
}

#[derive(Clone, Copy)]
pub(super) enum MetricChoice {
    One(Metric),
    All,
}

/// `--metric`: one of the metrics, each with its definition in `--help`.
fn metric_parser() -> impl clap::builder::TypedValueParser<Value = Metric> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    let values = taskmeter_model::run::METRICS.map(|m| PossibleValue::new(m.name()).help(m.about()));
    PossibleValuesParser::new(values).map(|name| name.parse::<Metric>().expect("one of the possible values"))
}

pub(super) fn metric_or_all(text: &str) -> Result<MetricChoice, String> {
    if text == "all" {
        return Ok(MetricChoice::All);
    }
    text.parse::<Metric>()
        .map(MetricChoice::One)
        .map_err(|_| format!("unknown metric '{text}' (use lateness, actual, full, busy or all)"))
}

pub(super) fn percent(text: &str) -> Result<f64, String> {
    let number = text.trim().trim_end_matches('%');
    match number.parse::<f64>() {
        Ok(p) if (0.0..=1e6).contains(&p) => Ok(p / 100.0),
        _ => Err(format!("'{text}' is not a percentage (e.g. 5%)")),
    }
}

pub(super) fn probability(text: &str) -> Result<f64, String> {
    match text.parse::<f64>() {
        Ok(p) if p > 0.0 && p < 1.0 => Ok(p),
        _ => Err(format!("'{text}' is not a probability between 0 and 1")),
    }
}

pub(super) fn duration(text: &str) -> Result<u64, String> {
    parse_duration_ns(text)
}

/// `--busy`: a count of iterations, or a time for each runtime to calibrate.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum BusyArg {
    Iterations(u64),
    Time(u64),
}

pub(super) fn busy_value(text: &str) -> Result<BusyArg, String> {
    if !text.is_empty() && text.bytes().all(|b| b.is_ascii_digit()) {
        return text.parse().map(BusyArg::Iterations).map_err(|_| "number too large to fit in 64 bits".into());
    }
    match parse_duration_ns(text)? {
        0 => Err("a busy time must be longer than 0 (--busy 0 is no busy work)".into()),
        ns => Ok(BusyArg::Time(ns)),
    }
}

pub(super) fn runtime_id(text: &str) -> Result<String, String> {
    if text == "all" {
        return Ok(text.into());
    }
    match runtimes::find(text) {
        Some(info) => Ok(info.id.to_string()),
        None => Err(taskmeter_console::names::unknown_listed(
            "runtime",
            text,
            &runtimes::names(),
            "`taskmeter list` and `list recipes`",
        )),
    }
}

// `taskmeter history` (cli/history.rs runs it).

/// The metrics the history holds (see docs/history.md).
pub(super) const HISTORY_METRICS: [&str; 11] =
    ["lateness", "actual", "full", "busy", "throughput", "ratio", "round_trip", "metg", "ips", "gap", "latency"];
pub(super) const HISTORY_STATS: [&str; 12] =
    ["count", "mean", "std", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max", "mad", "value"];

fn history_metric(text: &str) -> Result<String, String> {
    HISTORY_METRICS
        .contains(&text)
        .then(|| text.to_string())
        .ok_or_else(|| format!("unknown metric '{text}' (known: {})", HISTORY_METRICS.join(", ")))
}

fn history_stat(text: &str) -> Result<String, String> {
    HISTORY_STATS
        .contains(&text)
        .then(|| text.to_string())
        .ok_or_else(|| format!("unknown stat '{text}' (known: {})", HISTORY_STATS.join(", ")))
}

#[derive(Subcommand)]
pub(super) enum HistoryAction {
    /// List the recorded runs, oldest first
    List {
        #[command(flatten)]
        filter: FilterArgs,
        /// Only the newest N runs
        #[arg(long, value_name = "N")]
        limit: Option<usize>,
        /// `table` (default) or `json`
        #[arg(long, value_enum, default_value = "table")]
        format: TextFormat,
    },
    /// Show one run: its settings, environment and statistics
    Show {
        /// The run's id (see `history list`)
        id: i64,
        /// `table` (default) or `json`
        #[arg(long, value_enum, default_value = "table")]
        format: TextFormat,
    },
    /// Load results folders (or folders of them) into the history; runs already there are
    /// counted, not added again
    Import {
        #[arg(required = true, value_name = "DIR")]
        folders: Vec<PathBuf>,
    },
    /// Chart a metric over runs (SVG and HTML), one line per machine or runtime
    Trend {
        #[command(flatten)]
        of: Selection,
        /// One line per machine or per runtime
        #[arg(long, value_enum, default_value = "machine")]
        by: ByArg,
        /// The folder to write trend.svg and trend.html to
        #[arg(long, short = 'o', default_value = "history-trend")]
        output: PathBuf,
        /// `table` (default) or `json` (the chart's values)
        #[arg(long, value_enum, default_value = "table")]
        format: TextFormat,
    },
    /// Compare two runs, or two groups of runs (by label, by machine), as `taskmeter compare`
    /// does; exit status 1 when something regressed
    Compare {
        /// The baseline: a run id (--by run), a label or a machine [--by machine: the first
        /// machine by name]
        old: Option<String>,
        /// The runs to judge, the same way [--by machine: every other machine]
        new: Option<String>,
        /// What OLD and NEW name
        #[arg(long, value_enum, default_value = "run")]
        by: GroupBy,
        #[command(flatten)]
        of: Selection,
        #[command(flatten)]
        rule: RuleArgs,
        /// Compare even when the runs measured different things (another busy work, sleep,
        /// duration, units...)
        #[arg(long)]
        force: bool,
        /// `table` (default) or `json`
        #[arg(long, value_enum, default_value = "table")]
        format: TextFormat,
    },
    /// Find the newest change point of every series (E-Divisive means with a permutation test);
    /// exit status 1 when one is a regression beyond the threshold. A series with no change says
    /// the smallest step it could have seen; one too short to see any says "cannot detect" and
    /// how many runs it needs (not judged: exit status 0)
    Check {
        #[command(flatten)]
        of: Selection,
        #[command(flatten)]
        rule: RuleArgs,
        /// Shuffles of each permutation test at most (a test stops early once 20 shuffles
        /// reached its statistic)
        #[arg(long, default_value_t = 999, value_parser = clap::value_parser!(u32).range(19..=100_000))]
        permutations: u32,
        /// The fewest runs on each side of a change
        #[arg(long, default_value_t = 3, value_parser = clap::value_parser!(u32).range(2..=1000))]
        min_runs: u32,
        /// A regression fails the check when its change starts among the newest N runs (an
        /// older one is reported as an earlier regression)
        #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u32).range(1..))]
        recent: u32,
        /// `table` (default) or `json`
        #[arg(long, value_enum, default_value = "table")]
        format: TextFormat,
    },
}

/// Which runs a command reads.
#[derive(Args)]
pub(super) struct FilterArgs {
    /// Only runs of this experiment (sleep, volume, atomic-sum, recipes, net, granularity, bench)
    #[arg(long)]
    pub(super) experiment: Option<String>,
    /// Only runs that measured this runtime (receiver, scenario); a list: any of them
    #[arg(long)]
    pub(super) runtime: Option<String>,
    /// Only runs on this machine (its hostname)
    #[arg(long)]
    pub(super) machine: Option<String>,
    /// Only runs with this label
    #[arg(long)]
    pub(super) label: Option<String>,
    /// Only runs started on or after this date (2026-11, 2026-11-26, 2026-11-26T10:00)
    #[arg(long, value_name = "DATE")]
    pub(super) since: Option<String>,
    /// Only runs started on or before this date (the same forms)
    #[arg(long, value_name = "DATE")]
    pub(super) until: Option<String>,
}

/// The runs, metric and stat a command reads.
#[derive(Args)]
pub(super) struct Selection {
    #[command(flatten)]
    pub(super) filter: FilterArgs,
    #[command(flatten)]
    pub(super) what: What,
    /// Use interrupted runs and repetitions that are not ok (partial, interrupted, failed) too;
    /// by default they are left out and counted
    #[arg(long)]
    pub(super) include_incomplete: bool,
}

/// When a change is a verdict (`history compare` and `check`).
#[derive(Args)]
pub(super) struct RuleArgs {
    /// Noise threshold in percent: a smaller change is never a verdict
    #[arg(long, default_value = "5%", value_parser = percent)]
    pub(super) threshold: f64,
    /// The chance, for the whole comparison or check, of a verdict where nothing changed
    /// (Holm's adjustment over its lines or series)
    #[arg(long, default_value_t = 0.05, value_parser = probability)]
    pub(super) alpha: f64,
}

/// The metric and stat a command reads.
#[derive(Args)]
pub(super) struct What {
    /// The metric: lateness, actual, full, busy (run); throughput, ratio, round_trip (net);
    /// metg (granularity); ips, gap, latency (bench)
    #[arg(long, default_value = "lateness", value_parser = history_metric)]
    pub(super) metric: String,
    /// The statistic of each repetition: count, mean, std, min, p50, p90, p99, p99.9, p99.99,
    /// max, mad, value [default: the one `compare` judges: p50 for lateness and busy, mad for
    /// actual and full, mean for gap, latency and round_trip, else value]
    #[arg(long, value_parser = history_stat)]
    pub(super) stat: Option<String>,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum ByArg {
    Machine,
    Runtime,
}

#[derive(Clone, Copy, PartialEq, Eq, ValueEnum)]
pub(super) enum GroupBy {
    Run,
    Label,
    Machine,
}
