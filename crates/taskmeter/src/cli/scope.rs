//! Which experiments each flag of `taskmeter run` applies to: those of every experiment
//! (`EveryArgs`) and those of the groups its family takes (`Family::flags`). A flag given (or set
//! by a preset) for an experiment that does not use it is refused, never ignored.

use super::args::Cli;
use super::families;
use crate::experiments::catalog::{self, ExperimentInfo, EXPERIMENTS};
use crate::experiments::flags::EveryArgs;
use clap::parser::ValueSource;
use clap::{ArgMatches, Args, CommandFactory};

/// Whether the flag `id` applies to `experiment` (false when its family is not registered).
fn applies(id: &str, experiment: &ExperimentInfo) -> bool {
    let every = families::ids_of(EveryArgs::augment_args);
    let in_group = |group| families::ids_of(group).iter().any(|flag| flag == id);
    every.iter().any(|flag| flag == id)
        || families::of(experiment).is_ok_and(|family| family.flags().iter().copied().any(in_group))
}

/// Refuses a `run` flag given for an experiment it does not apply to, naming the ones it does.
pub fn check_flag_scope(matches: &ArgMatches) -> Result<(), String> {
    let Some(run) = matches.subcommand_matches("run") else { return Ok(()) };
    let experiment = run
        .get_one::<&'static ExperimentInfo>("experiment")
        .copied()
        .unwrap_or_else(|| catalog::find("sleep").expect("sleep is an experiment"));
    families::of(experiment).map_err(|e| e.to_string())?;
    let command = Cli::command();
    let arguments = command.find_subcommand("run").expect("run is a subcommand");
    for argument in arguments.get_arguments() {
        let id = argument.get_id().as_str();
        if run.value_source(id) != Some(ValueSource::CommandLine) {
            continue;
        }
        if !applies(id, experiment) {
            let flag = argument.get_long().map_or_else(|| id.to_string(), |long| format!("--{long}"));
            let names: Vec<&str> = EXPERIMENTS.iter().filter(|e| applies(id, e)).map(|e| e.name).collect();
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
            assert!(EXPERIMENTS.iter().any(|e| applies(id, e)), "--{id} applies to no experiment");
        }
        let groups = EXPERIMENTS.iter().flat_map(|e| families::of(e).unwrap().flags());
        let named = groups.flat_map(|group| families::ids_of(*group));
        for name in families::ids_of(EveryArgs::augment_args).into_iter().chain(named) {
            assert!(run.get_arguments().any(|a| *a.get_id() == name), "{name} is not a flag of run");
        }
    }
}
