//! The registry of experiment families: one line each in [`FAMILIES`]. Everything the core does
//! with a family goes through it: `run` and `--dry-run` (which code measures an experiment of the
//! catalog, and which flags apply to it: `scope`), and reading a results folder back for
//! `report`, `compare` and `history import` (which kind of record a schema names). A family's
//! record implements what `experiments::family` asks of it, and its `impl Family` here turns the
//! flags of `run` into its options (`options`). A family or schema the registry does not know is
//! an error, never another family's.

use super::args::RunArgs;
use super::{options, CliError};
use crate::experiments::catalog::ExperimentInfo;
use crate::experiments::family::{Kind, Loaded, RecordKind};
use crate::experiments::{bench, granularity, net, sleep};
use crate::history::entry::Recorded;
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use taskmeter_model::bench::BenchRecord;
use taskmeter_model::granularity::GrainRecord;
use taskmeter_model::header::{schema_of, LoadError};
use taskmeter_model::net::NetRecord;
use taskmeter_model::run::RunRecord;

/// Every family, in the order their record files are looked for in a results folder.
const FAMILIES: &[&dyn Family] = &[&Loop, &Net, &Bench, &Granularity];

/// What the core asks of an experiment family beside its record's traits
/// (`experiments::family::Loaded`).
pub(super) trait Family: Sync {
    /// Its name, as the catalog's experiments name their family.
    fn name(&self) -> &'static str;
    /// The kind of record it writes.
    fn kind(&self) -> &'static dyn RecordKind;
    /// The flags of `run` that apply to its experiments besides those of every experiment
    /// (`scope::EVERY`), by clap id.
    fn flags(&self) -> &'static [&'static str] {
        &[]
    }
    /// `run --dry-run`: its options built and its plan checked, nothing started.
    fn check(&self, args: &RunArgs) -> Result<(), CliError> {
        Err(not_run(self.name(), args))
    }
    /// `run`: measures, writes the results folder, and says the exit status.
    fn run(&self, args: &RunArgs) -> Result<ExitCode, CliError> {
        Err(not_run(self.name(), args))
    }
}

/// A family whose experiments `run` does not measure (bench has a command of its own).
fn not_run(family: &str, args: &RunArgs) -> CliError {
    CliError::Usage(format!("`run {}`: the {family} family is not measured by `run`", args.experiment.name))
}

/// The family of `experiment`; one the registry does not know is an error.
pub(super) fn of(experiment: &ExperimentInfo) -> Result<&'static dyn Family, CliError> {
    FAMILIES.iter().copied().find(|f| f.name() == experiment.family).ok_or_else(|| {
        CliError::Usage(format!(
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

/// The work loop: sleep, volume, atomic-sum and recipes (`experiments::sleep`).
struct Loop;

impl Family for Loop {
    fn name(&self) -> &'static str {
        sleep::FAMILY
    }
    fn kind(&self) -> &'static dyn RecordKind {
        &Kind::<RunRecord>::KIND
    }
    fn flags(&self) -> &'static [&'static str] {
        &[
            "runtimes",
            "units",
            "sleep",
            "priority_classes",
            "start_limit",
            "together",
            "mode",
            "busy",
            "yield_each_step",
            "duration",
            "warmup",
            "quick",
            "sweeps",
            "order",
            "seed",
            "metric",
            "table",
            "policy",
            "timer_slack",
            "cpus",
            "mlock",
            "allow_rt_spin",
            "raw",
            "exact_samples",
        ]
    }
    fn check(&self, args: &RunArgs) -> Result<(), CliError> {
        sleep::checked_points(&options::run_options(args)?)?;
        Ok(())
    }
    fn run(&self, args: &RunArgs) -> Result<ExitCode, CliError> {
        Ok(sleep::run(options::run_options(args)?)?)
    }
}

/// TCP senders against receivers (`experiments::net`).
struct Net;

impl Family for Net {
    fn name(&self) -> &'static str {
        net::FAMILY
    }
    fn kind(&self) -> &'static dyn RecordKind {
        &Kind::<NetRecord>::KIND
    }
    fn flags(&self) -> &'static [&'static str] {
        &["receivers", "senders", "messages", "per_sender", "message_size"]
    }
    fn check(&self, args: &RunArgs) -> Result<(), CliError> {
        options::net_options(args)?;
        Ok(())
    }
    fn run(&self, args: &RunArgs) -> Result<ExitCode, CliError> {
        Ok(net::run(options::net_options(args)?)?)
    }
}

/// Tasks of a swept size in every runtime's worker (`experiments::granularity`).
struct Granularity;

impl Family for Granularity {
    fn name(&self) -> &'static str {
        granularity::FAMILY
    }
    fn kind(&self) -> &'static dyn RecordKind {
        &Kind::<GrainRecord>::KIND
    }
    fn flags(&self) -> &'static [&'static str] {
        &["pattern", "task_busy", "width", "steps", "calibrate", "runtimes", "duration", "warmup", "quick", "cpus"]
    }
    fn check(&self, args: &RunArgs) -> Result<(), CliError> {
        Ok(granularity::check(&options::granularity_options(args)?.settings)?)
    }
    fn run(&self, args: &RunArgs) -> Result<ExitCode, CliError> {
        Ok(granularity::run(options::granularity_options(args)?)?)
    }
}

/// Your own asynchronous work, measured by `taskmeter bench` (its own command and flags, not
/// `run`'s): registered for its record.
struct Bench;

impl Family for Bench {
    fn name(&self) -> &'static str {
        bench::FAMILY
    }
    fn kind(&self) -> &'static dyn RecordKind {
        &Kind::<BenchRecord>::KIND
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
    fn a_family_not_registered_is_an_error_never_another_family() {
        let stray = ExperimentInfo { name: "stray", about: "", family: "stray", defaults: None };
        let error = of(&stray).err().map(|e| e.to_string());
        assert_eq!(
            error.as_deref(),
            Some("`run stray` belongs to the family 'stray', which is not registered (cli/families.rs)")
        );
    }
}
