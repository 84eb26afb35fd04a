//! The flags of `taskmeter bench` ([`BenchArgs`], a command of its own, not `run`'s) and the
//! options they make ([`options`]).

use super::BenchOptions;
use crate::experiments::flags::{duration, output, positive_duration, ExportArgs, Format};
use clap::Args;
use std::path::PathBuf;

/// The flags of `taskmeter bench`.
#[derive(Args)]
pub struct BenchArgs {
    /// A scenario: NAME=COMMAND (repeat for more)
    #[arg(long = "scenario", value_name = "NAME=COMMAND", required = true, value_parser = name_value)]
    pub scenarios: Vec<(String, String)>,
    /// An input: NAME=VALUE, passed to each command as TASKMETER_INPUT (repeat for more; every
    /// scenario runs once per input)
    #[arg(long = "input", value_name = "NAME=VALUE", value_parser = name_value)]
    pub inputs: Vec<(String, String)>,
    /// Time each scenario runs before it is measured (its units are counted apart)
    #[arg(long, value_name = "DURATION", default_value = "2s", value_parser = duration)]
    pub warmup: u64,
    /// Time each scenario is measured (as `run --duration`; `--time` still works)
    #[arg(long = "duration", alias = "time", value_name = "DURATION", default_value = "5s", value_parser = positive_duration)]
    pub time: u64,
    /// The longest wait after the measurement for the body's last run to end
    #[arg(long, value_name = "DURATION", default_value = "1s", value_parser = duration)]
    pub drain: u64,
    /// Also show minimum, maximum, sample size and mode
    #[arg(long)]
    pub extended_statistics: bool,
    /// Let the commands' stdout and stderr through (default: discarded; stderr kept for errors)
    #[arg(long)]
    pub show_output: bool,
    /// The results folder to write [default: results/<UTC timestamp>-bench]
    #[arg(long, short = 'o', value_name = "DIR")]
    pub output: Option<PathBuf>,
    #[command(flatten)]
    pub exports: ExportArgs,
    /// table: the report; json: bench.json on stdout
    #[arg(long, value_enum, default_value = "table")]
    pub format: Format,
}

pub fn name_value(text: &str) -> Result<(String, String), String> {
    match text.split_once('=') {
        Some((name, value)) if !name.trim().is_empty() && !value.trim().is_empty() => {
            Ok((name.trim().to_string(), value.to_string()))
        }
        _ => Err(format!("'{text}' is not NAME=VALUE")),
    }
}

/// What `taskmeter bench` runs with.
pub fn options(args: BenchArgs) -> Result<BenchOptions, String> {
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
