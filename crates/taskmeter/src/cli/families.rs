//! The registry of experiment families: one line each in [`FAMILIES`], each a family's own
//! `experiments/FAMILY/family.rs`. Everything the core does with a family goes through it: the
//! flags of `run` (every family's groups, [`run_flags`]), `run` and `--dry-run` (which code
//! measures an experiment of the catalog, and which flags apply to it: `scope`), and reading a
//! results folder back for `report`, `compare` and `history import` (which kind of record a
//! schema names). A family or schema the registry does not know is an error, never another
//! family's.

use super::CliError;
use crate::experiments::catalog::ExperimentInfo;
use crate::experiments::family::{Family, Flags, Loaded};
use crate::experiments::flags::EveryArgs;
use crate::experiments::{bench, granularity, net, sleep};
use crate::history::entry::{Metric, Recorded};
use clap::{Args, Command, Id};
use std::path::{Path, PathBuf};
use taskmeter_model::header::{schema_of, LoadError};

/// Every family, in the order their record files are looked for in a results folder.
const FAMILIES: &[&dyn Family] =
    &[&sleep::family::Loop, &net::family::Net, &bench::family::Bench, &granularity::family::Granularity];

/// The flags of `run`: every experiment's, then each family's groups, each group once however
/// many families take it; in `run --help` each where its `display_order` puts it, under its
/// heading.
pub(super) fn run_flags(run: Command) -> Command {
    let mut all = EveryArgs::augment_args(Command::new("run"));
    for group in FAMILIES.iter().flat_map(|family| family.flags()) {
        let ids = ids_of(*group);
        if !all.get_arguments().any(|arg| ids.contains(arg.get_id())) {
            all = group(all);
        }
    }
    let mut flags: Vec<clap::Arg> = all.get_arguments().cloned().collect();
    flags.sort_by_key(clap::Arg::get_display_order);
    run.args(flags)
}

/// Every metric the history keeps, family by family, in the registry's order.
pub(super) fn metrics() -> impl Iterator<Item = Metric> {
    FAMILIES.iter().flat_map(|family| family.metrics().iter().copied())
}

/// The metric of the history named `name`, if a family keeps one.
pub(super) fn metric(name: &str) -> Option<Metric> {
    metrics().find(|metric| metric.name == name)
}

/// `--metric`'s help in the history commands: each family's metrics.
pub(super) fn metric_help() -> String {
    let each: Vec<String> = FAMILIES
        .iter()
        .filter(|family| !family.metrics().is_empty())
        .map(|family| {
            let names: Vec<&str> = family.metrics().iter().map(|m| m.name).collect();
            format!("{} ({})", names.join(", "), family.name())
        })
        .collect();
    format!("The metric: {}", each.join("; "))
}

/// The ids of a group's flags.
pub(super) fn ids_of(group: Flags) -> Vec<Id> {
    group(Command::new("group")).get_arguments().map(|arg| arg.get_id().clone()).collect()
}

/// The family of `experiment`; one the registry does not know is an error, and taskmeter's own
/// (the catalog names a family this file does not register), not the user's.
pub(super) fn of(experiment: &ExperimentInfo) -> Result<&'static dyn Family, CliError> {
    FAMILIES.iter().copied().find(|f| f.name() == experiment.family).ok_or_else(|| {
        CliError::Failed(format!(
            "`run {}` belongs to the family '{}', which is not registered (cli/families.rs)",
            experiment.name, experiment.family
        ))
    })
}

/// The record file of every kind, in the order they are looked for in a results folder.
pub(super) fn files() -> Vec<&'static str> {
    FAMILIES.iter().map(|f| f.kind().file()).collect()
}

/// Reads whichever record `path` (a results folder or a record file) holds, by the schema its
/// header names; a schema no family registers is not a taskmeter record.
pub(super) fn load(path: &Path) -> Result<(PathBuf, Box<dyn Loaded>), LoadError> {
    let (file, schema, value) = schema_of(path, &files())?;
    let Some(kind) = FAMILIES.iter().map(|f| f.kind()).find(|k| k.schema() == schema) else {
        return Err(LoadError::NotARecord(file));
    };
    Ok((file.clone(), kind.read(file, &schema, value)?))
}

/// [`load`], as the history takes a record (`history import`).
pub(super) fn load_recorded(path: &Path) -> Result<Box<dyn Recorded>, LoadError> {
    load(path).map(|(_, record)| record as Box<dyn Recorded>)
}

/// Reads whichever record `path` holds, as [`load`] does, and refuses it when it does not hold
/// together (`LoadError::Inconsistent`, with every problem).
pub(super) fn load_checked(path: &Path) -> Result<(PathBuf, Box<dyn Loaded>), LoadError> {
    let (file, record) = load(path)?;
    match record.problems() {
        problems if problems.is_empty() => Ok((file, record)),
        problems => Err(LoadError::Inconsistent { path: file, problems }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::experiments::catalog::EXPERIMENTS;

    #[test]
    fn every_experiment_has_its_family_and_every_kind_its_own_schema_and_file() {
        for e in EXPERIMENTS {
            assert!(of(e).is_ok(), "{}: its family '{}' is not registered", e.name, e.family);
        }
        for (i, f) in FAMILIES.iter().enumerate() {
            for other in &FAMILIES[..i] {
                assert_ne!(f.name(), other.name());
                assert_ne!(f.kind().schema(), other.kind().schema(), "{}", f.name());
                assert_ne!(f.kind().file(), other.kind().file(), "{}", f.name());
            }
        }
        // The order taskmeter always looked in; a new family's file comes after.
        assert_eq!(files()[..4], ["run.json", "net.json", "bench.json", "granularity.json"]);
    }

    #[test]
    fn every_metric_of_the_history_is_one_family_s_and_judged_by_a_stat_it_keeps() {
        let mut names: Vec<&str> = metrics().map(|m| m.name).collect();
        names.sort_unstable();
        // The metrics the history always had, each once.
        let mut known = [
            "lateness",
            "actual",
            "full",
            "busy",
            "throughput",
            "ratio",
            "round_trip",
            "metg",
            "ips",
            "gap",
            "latency",
        ];
        known.sort_unstable();
        assert_eq!(names, known);
        let stats = ["p50", "mad", "mean", "value"];
        assert!(metrics().all(|m| stats.contains(&m.score)), "{:?}", metrics().collect::<Vec<_>>());
        let better: Vec<&str> = metrics().filter(|m| m.higher_is_better).map(|m| m.name).collect();
        assert_eq!(better, ["throughput", "ips"]);
        assert_eq!(metric("throughput").and_then(|m| m.unit), Some("throughput (msg/s)"));
        assert_eq!(metric("lateness").and_then(|m| m.unit), None);
        assert!(metric("nosuch").is_none());
    }

    #[test]
    fn a_family_not_registered_is_an_error_never_another_family() {
        let stray = ExperimentInfo { name: "stray", about: "", family: "stray", defaults: None };
        let error = of(&stray).err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("`run stray` belongs to the family 'stray', which is not registered (cli/families.rs)")
        );
    }
}
