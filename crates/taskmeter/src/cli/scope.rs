//! Which experiments each flag of `taskmeter run` applies to: a flag given (or set by a
//! preset) for an experiment that does not use it is refused, never ignored.

use super::args::Cli;
use crate::experiments::catalog::{self, ExperimentInfo, Family};
use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory};

/// The experiments each flag of `taskmeter run` applies to, by clap argument id and family of
/// experiment (`experiments/catalog.rs`). A flag typed (or set by a preset) for an experiment
/// that does not use it is refused, never ignored.
pub(super) const FLAG_SCOPE: &[(&str, &[Family])] = {
    use Family::*;
    const EVERY: &[Family] = &[Loop, Net, Granularity];
    const LOOP: &[Family] = &[Loop];
    const WORKERS: &[Family] = &[Loop, Granularity];
    const NET: &[Family] = &[Net];
    const GRAIN: &[Family] = &[Granularity];
    &[
        ("experiment", EVERY),
        ("repeat", EVERY),
        ("cpu_dma_latency", EVERY),
        ("grace", EVERY),
        ("output", EVERY),
        ("format", EVERY),
        ("export_json", EVERY),
        ("export_csv", EVERY),
        ("export_markdown", EVERY),
        ("history", EVERY),
        ("no_history", EVERY),
        ("label", EVERY),
        ("receivers", NET),
        ("senders", NET),
        ("messages", NET),
        ("per_sender", NET),
        ("message_size", NET),
        ("pattern", GRAIN),
        ("task_busy", GRAIN),
        ("width", GRAIN),
        ("steps", GRAIN),
        ("calibrate", GRAIN),
        ("runtimes", WORKERS),
        ("units", LOOP),
        ("sleep", LOOP),
        ("priority_classes", LOOP),
        ("start_limit", LOOP),
        ("together", LOOP),
        ("mode", LOOP),
        ("busy", LOOP),
        ("yield_each_step", LOOP),
        ("duration", WORKERS),
        ("warmup", WORKERS),
        ("quick", WORKERS),
        ("sweeps", LOOP),
        ("order", LOOP),
        ("seed", LOOP),
        ("metric", LOOP),
        ("table", LOOP),
        ("policy", LOOP),
        ("timer_slack", LOOP),
        ("cpus", WORKERS),
        ("mlock", LOOP),
        ("allow_rt_spin", LOOP),
        ("raw", LOOP),
        ("exact_samples", LOOP),
    ]
};

/// Refuses a `run` flag given for an experiment it does not apply to, naming the ones it does.
pub fn check_flag_scope(matches: &ArgMatches) -> Result<(), String> {
    let Some(run) = matches.subcommand_matches("run") else { return Ok(()) };
    let experiment = run
        .get_one::<&'static ExperimentInfo>("experiment")
        .copied()
        .unwrap_or_else(|| catalog::find("sleep").expect("sleep is an experiment"));
    let command = Cli::command();
    let arguments = command.find_subcommand("run").expect("run is a subcommand");
    for argument in arguments.get_arguments() {
        let id = argument.get_id().as_str();
        if run.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        let scope = FLAG_SCOPE.iter().find(|(name, _)| *name == id).map_or(&[][..], |(_, scope)| *scope);
        if !scope.contains(&experiment.family) {
            let flag = argument.get_long().map_or_else(|| id.to_string(), |long| format!("--{long}"));
            let names = catalog::names_of(scope);
            let belongs = match names.as_slice() {
                [] => "no experiment".to_string(),
                [one] => one.to_string(),
                [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
            };
            let hint = if id == "runtimes" { "; `run net` takes --receivers" } else { "" };
            return Err(format!("{flag} does not apply to `run {}` (it applies to {belongs}){hint}", experiment.name));
        }
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
