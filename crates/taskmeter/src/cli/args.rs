//! The flags of every command (clap) and the parsers of their values; a bad value is one line.

use crate::experiments::bench::flags::BenchArgs;
use crate::experiments::flags::{duration, EveryArgs};
use crate::experiments::net::flags::NetLoad;
use clap::{Args, FromArgMatches, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;
use taskmeter_model::run::Metric;

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
        /// Each line's new / old with its 95 % range and verdict, for a dashboard (docs/outputs.md)
        #[command(flatten)]
        dashboards: Box<crate::experiments::flags::DashboardArgs>,
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

/// The flags of `taskmeter run`: every experiment's ([`EveryArgs`]), then each registered
/// family's groups (`families::run_flags`); the family whose experiment runs reads its own from
/// the matches.
pub(super) struct RunArgs {
    pub(super) every: EveryArgs,
    pub(super) matches: clap::ArgMatches,
}

impl FromArgMatches for RunArgs {
    fn from_arg_matches(matches: &clap::ArgMatches) -> Result<RunArgs, clap::Error> {
        Ok(RunArgs { every: EveryArgs::from_arg_matches(matches)?, matches: matches.clone() })
    }
    fn update_from_arg_matches(&mut self, matches: &clap::ArgMatches) -> Result<(), clap::Error> {
        *self = RunArgs::from_arg_matches(matches)?;
        Ok(())
    }
}

impl Args for RunArgs {
    fn augment_args(run: clap::Command) -> clap::Command {
        super::families::run_flags(run)
    }
    fn augment_args_for_update(run: clap::Command) -> clap::Command {
        super::families::run_flags(run)
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

#[derive(Copy, Clone, ValueEnum, PartialEq)]
pub(super) enum ListWhat {
    /// Every runtime and receiver (the default)
    Runtimes,
    /// Every runtime's wait recipes
    Recipes,
}

#[derive(Clone, Copy)]
pub(super) enum MetricChoice {
    One(Metric),
    All,
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

// `taskmeter history` (cli/history.rs runs it).

pub(super) const HISTORY_STATS: [&str; 12] =
    ["count", "mean", "std", "min", "p50", "p90", "p99", "p99.9", "p99.99", "max", "mad", "value"];

/// A metric some family keeps in the history (see docs/history.md).
fn history_metric(text: &str) -> Result<String, String> {
    match super::families::metric(text) {
        Some(metric) => Ok(metric.name.to_string()),
        None => {
            let known: Vec<&str> = super::families::metrics().map(|m| m.name).collect();
            Err(format!("unknown metric '{text}' (known: {})", known.join(", ")))
        }
    }
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
        /// Each line's new / old with its 95 % range and verdict, for a dashboard (docs/outputs.md)
        #[command(flatten)]
        dashboards: Box<crate::experiments::flags::DashboardArgs>,
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
    #[arg(long, default_value = "lateness", value_parser = history_metric, help = super::families::metric_help())]
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
