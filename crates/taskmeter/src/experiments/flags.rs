//! The flags of `taskmeter run` that are no one family's: those every experiment takes
//! ([`EveryArgs`]: the experiment, repetitions, outputs), those of the experiments whose rows are
//! runtimes' workers ([`WorkerArgs`]), the exports, and the value parsers the families' flags
//! share. Each family's own flags are its folder's `flags.rs`; the registry (`cli::families`)
//! puts them together into `run`, each flag where its `display_order` says in `run --help`.

use crate::experiments::catalog::{self, ExperimentInfo, EXPERIMENTS};
use crate::report::export::{Export, ExportFormat};
use crate::session::Output;
use clap::{Args, ValueEnum};
use std::path::PathBuf;
use taskmeter_machine::sched::CpuList;
use taskmeter_measure::runtimes;
use taskmeter_protocol::parse_duration_ns;

/// The headings of `run --help`, in the order they are shown.
pub mod heading {
    pub const MEASURE: &str = "What to measure";
    pub const TIME: &str = "How long";
    pub const SWEEP: &str = "Sweeps and order";
    pub const SCHED: &str = "Scheduling and the machine";
    pub const OUTPUT: &str = "Outputs";
    pub const NET: &str = "run net";
    pub const GRAIN: &str = "run granularity";
}

#[derive(Copy, Clone, ValueEnum)]
pub enum Format {
    Table,
    Json,
}

/// The dashboards' files (docs/outputs.md), for `run`, `bench`, `compare` and `history
/// compare` alike: the figures the tables show, each with taskmeter's own 95 % range where it
/// has one.
#[derive(Args)]
pub struct DashboardArgs {
    /// Also write the figures where lower is better to FILE for github-action-benchmark (tool:
    /// customSmallerIsBetter)
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub export_github_benchmark_smaller: Option<PathBuf>,
    /// Also write the figures where higher is better to FILE for github-action-benchmark (tool:
    /// customBiggerIsBetter)
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub export_github_benchmark_bigger: Option<PathBuf>,
    /// Also write the figures to FILE as Bencher Metric Format (for bencher run's json adapter)
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub export_bmf: Option<PathBuf>,
    /// Also write the figures (and each row's distribution) to FILE in the OpenMetrics text
    /// format, for a Pushgateway or node_exporter's textfile collector
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub export_openmetrics: Option<PathBuf>,
}

impl DashboardArgs {
    /// The dashboards' files asked for, in the order of their flags.
    pub fn exports(&self) -> Vec<Export> {
        [
            (ExportFormat::GithubBenchmarkSmaller, &self.export_github_benchmark_smaller),
            (ExportFormat::GithubBenchmarkBigger, &self.export_github_benchmark_bigger),
            (ExportFormat::Bmf, &self.export_bmf),
            (ExportFormat::OpenMetrics, &self.export_openmetrics),
        ]
        .into_iter()
        .filter_map(|(format, path)| Some(Export { format, path: path.clone()? }))
        .collect()
    }
}

/// Files to write besides the results folder, as hyperfine does; each record kind has them all.
#[derive(Args)]
pub struct ExportArgs {
    /// Also write the record (run.json, net.json, bench.json) to FILE
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub export_json: Option<PathBuf>,
    /// Also write the summary as CSV (summary.csv; one line per scenario and input for bench) to FILE
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub export_csv: Option<PathBuf>,
    /// Also write the result tables as Markdown to FILE, ready to paste into an issue or a paper
    #[arg(long, value_name = "FILE", hide_short_help = true)]
    pub export_markdown: Option<PathBuf>,
    #[command(flatten)]
    pub dashboards: DashboardArgs,
    /// Record the run in this history: a SQLite file or a postgres:// URL [default:
    /// $TASKMETER_HISTORY, else $XDG_DATA_HOME/taskmeter/history.sqlite] (docs/history.md)
    #[arg(long, value_name = "PATH|URL", conflicts_with = "no_history", hide_short_help = true)]
    pub history: Option<String>,
    /// Do not record the run in the history
    #[arg(long, hide_short_help = true)]
    pub no_history: bool,
    /// A label kept with the run (in its record and the history), e.g. a git commit
    #[arg(long, value_name = "TEXT")]
    pub label: Option<String>,
}

/// The flags of `taskmeter run` every experiment takes.
#[derive(Args)]
pub struct EveryArgs {
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
    pub experiment: &'static ExperimentInfo,
    /// Workers per runtime and point; 2 or more give 95 % ranges
    ///
    /// net: per receiver and sender count. Each is its own process, all interleaved; with 2 or
    /// more, every range comes from the variation between them (the 95 % range for the mean
    /// another invocation would give; ratios and METG on a log scale) [default: 1; net and
    /// granularity: 3]
    #[arg(display_order = 140, long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=1000), help_heading = heading::TIME)]
    pub repeat: Option<u32>,
    /// Extra time a worker gets beyond its plan before it is killed
    ///
    /// And its row failed. net: the longest wait for a receiver to start, to acknowledge a
    /// message, and to report
    #[arg(display_order = 160, long, value_name = "DURATION", default_value = "10s", value_parser = duration, allow_hyphen_values = true, hide_short_help = true, help_heading = heading::TIME)]
    pub grace: u64,
    /// Hold a PM QoS CPU latency request of US µs (root)
    ///
    /// /dev/cpu_dma_latency is held while the workers run, as cyclictest does with 0: idle CPUs
    /// then stay in states that wake within it. Sweep it with --sweep cpu-dma-latency=0,none
    #[arg(display_order = 230, long, value_name = "US", value_parser = taskmeter_model::sweep::parse_latency_us, help_heading = heading::SCHED)]
    pub cpu_dma_latency: Option<u32>,
    /// The results folder to write [default: results/<UTC timestamp>-EXPERIMENT]
    #[arg(display_order = 260, long, short = 'o', value_name = "DIR", help_heading = heading::OUTPUT)]
    pub output: Option<PathBuf>,
    /// table (default: the report) or json (the record on stdout)
    ///
    /// json prints the record (run.json, net.json or granularity.json) on stdout instead of the
    /// report
    #[arg(display_order = 290, long, value_enum, default_value = "table", hide_default_value = true, hide_possible_values = true, help_heading = heading::OUTPUT)]
    pub format: Format,
    #[command(flatten, next_help_heading = heading::OUTPUT, next_display_order = 321)]
    pub exports: ExportArgs,
}

/// The flags of the experiments whose rows are runtimes' workers (the work loop, granularity).
#[derive(Args)]
pub struct WorkerArgs {
    /// Runtime ids, comma-separated, or `all`
    ///
    /// `all` is every runtime available here; without the flag, every one but the variants
    /// (one thread, a pool, a thread per unit: `taskmeter list` marks them), so the default run
    /// stays within a minute; `taskmeter list` shows them all and why one is not available
    /// [default: every runtime but the variants]
    #[arg(display_order = 20, long, value_name = "IDS", value_delimiter = ',', value_parser = runtime_id, action = clap::ArgAction::Set, help_heading = heading::MEASURE)]
    pub runtimes: Vec<String>,
    /// Measured time per runtime, after the warm-up
    ///
    /// [default: 1.5s; 300ms with --quick; granularity: per task size, 100ms; 40ms with --quick]
    #[arg(display_order = 110, long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true, help_heading = heading::TIME)]
    pub duration: Option<u64>,
    /// Time before the measurement, excluded from statistics
    ///
    /// Its samples are reported but not counted [default: 500ms; 100ms with --quick; granularity:
    /// rounds before each task size's measurement, 20ms; 10ms with --quick]
    #[arg(display_order = 120, long, value_name = "DURATION", value_parser = duration, allow_hyphen_values = true, help_heading = heading::TIME)]
    pub warmup: Option<u64>,
    /// A first look: 300 ms per runtime after 100 ms of warm-up
    ///
    /// granularity: 40 ms per task size after 10 ms of warm-up rounds
    #[arg(display_order = 130, long, help_heading = heading::TIME)]
    pub quick: bool,
    /// CPUs the workers may run on, e.g. 1 or 0-1 (sched_setaffinity)
    #[arg(display_order = 220, long, value_name = "LIST", value_parser = taskmeter_machine::sched::parse_cpus, help_heading = heading::SCHED)]
    pub cpus: Option<CpuList>,
}

impl WorkerArgs {
    /// A default of the catalog: the first without `--quick`, the second with it.
    pub fn by_quick<T>(&self, (full, quick): (T, T)) -> T {
        if self.quick {
            quick
        } else {
            full
        }
    }

    /// `--runtimes`: the ones listed, once each, every runtime (`all`), or without the flag the
    /// default set (every runtime but the variants).
    pub fn runtime_list(&self) -> Result<Vec<String>, String> {
        Ok(if self.runtimes.is_empty() {
            runtimes::default_ids().into_iter().map(str::to_string).collect()
        } else if self.runtimes == ["all"] {
            runtimes::ids().into_iter().map(str::to_string).collect()
        } else {
            let mut seen = Vec::new();
            for id in &self.runtimes {
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
}

/// Where a command's results go: its folder, the export files, JSON or the console.
pub fn output(folder: &Option<PathBuf>, exports: &ExportArgs, format: Format) -> Result<Output, String> {
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
    let mut files: Vec<Export> =
        files.into_iter().filter_map(|(format, path)| Some(Export { format, path: path.clone()? })).collect();
    files.extend(exports.dashboards.exports());
    Ok(Output {
        folder: folder.clone(),
        exports: files,
        json: matches!(format, Format::Json),
        command_line: std::env::args().collect(),
        history: crate::history::Target::choose(exports.history.as_deref(), exports.no_history)?,
        label: exports.label.clone(),
    })
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

/// A duration (`250us`, `1.5ms`, `2m`) in ns, the protocol's way of writing one.
pub fn duration(text: &str) -> Result<u64, String> {
    parse_duration_ns(text)
}

/// A duration longer than 0.
pub fn positive_duration(text: &str) -> Result<u64, String> {
    match parse_duration_ns(text)? {
        0 => Err(format!("'{text}' must be longer than 0")),
        ns => Ok(ns),
    }
}

/// A size in bytes: a whole number, with a binary unit or none (B): 512MiB, 2GiB, 65536.
pub fn byte_size(text: &str) -> Result<u64, String> {
    let digits = text.find(|c: char| !c.is_ascii_digit()).unwrap_or(text.len());
    let (number, unit) = text.split_at(digits);
    let shift = match unit.trim() {
        "" | "B" => 0,
        "KiB" => 10,
        "MiB" => 20,
        "GiB" => 30,
        "TiB" => 40,
        _ => return Err(format!("'{text}' is not a size (a whole number and B, KiB, MiB, GiB or TiB: 512MiB)")),
    };
    let bytes = number.parse::<u64>().ok().and_then(|n| n.checked_mul(1 << shift));
    match bytes {
        Some(0) => Err(format!("'{text}' must be at least 1 byte")),
        Some(bytes) => Ok(bytes),
        None => Err(format!("'{text}' is not a size (a whole number and B, KiB, MiB, GiB or TiB: 512MiB)")),
    }
}

/// A runtime's id (or `all`), its nearest namesakes said when it is not one.
pub fn runtime_id(text: &str) -> Result<String, String> {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_size_takes_a_binary_unit_or_none_and_refuses_the_rest() {
        assert_eq!(byte_size("65536"), Ok(65_536));
        assert_eq!(byte_size("1B"), Ok(1));
        assert_eq!(byte_size("512MiB"), Ok(512 << 20));
        assert_eq!(byte_size("2GiB"), Ok(2 << 30));
        assert_eq!(byte_size("1TiB"), Ok(1 << 40));
        for bad in ["0", "0MiB", "", "MiB", "1.5GiB", "2GB", "-1", "99999999999TiB"] {
            assert!(byte_size(bad).is_err(), "{bad}");
        }
    }
}
