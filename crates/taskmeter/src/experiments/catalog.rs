//! Every experiment of `taskmeter run`, in one table: its name, what it measures, its family
//! (which code measures it: the registry, `cli::families`, knows each by name) and, for the
//! experiments of the work loop, their defaults. An experiment that reuses the loop is one entry
//! here (CONTRIBUTING.md, "Adding an experiment"): the command line, its help, which flags apply
//! to it and its defaults all come from this table and its family.

use taskmeter_protocol::{Experiment, Mode, Schedule};

/// The defaults of an experiment of the work loop: what a run gets for each flag not given.
#[derive(Debug)]
pub struct LoopDefaults {
    /// The loop the workers run: the plan's `experiment` (the sleep loop, or with the shared
    /// counter).
    pub workers_run: Experiment,
    /// `--units`, and with `--quick`.
    pub units: (&'static str, &'static str),
    pub sleep: Schedule,
    pub mode: Mode,
    /// A sweep of the sleep, and with `--quick`, when neither `--sleep` nor a sweep of it is given.
    pub sleep_sweep: Option<(&'static str, &'static str)>,
    /// `--duration` and `--warmup`, each without and with `--quick`.
    pub duration_ns: (u64, u64),
    pub warmup_ns: (u64, u64),
    /// Busy work only when `--busy` is given (the recipes time the wait alone).
    pub busy_only_when_given: bool,
    /// Each runtime is measured with each of its wait recipes and machine knobs beside it.
    pub with_recipes: bool,
}

/// An experiment of `taskmeter run`.
#[derive(Debug)]
pub struct ExperimentInfo {
    pub name: &'static str,
    /// One line for `run --help`.
    pub about: &'static str,
    /// The family that measures it, by its name in the registry (`cli::families`): the work
    /// loop in every runtime's worker ([`LOOP`]), TCP senders against receivers (`net`), tasks
    /// of a swept size in every runtime's worker (`granularity`).
    pub family: &'static str,
    /// For the work loop's experiments (family [`LOOP`]).
    pub defaults: Option<LoopDefaults>,
}

/// The work loop's family: `experiments::sleep` runs its experiments.
pub const LOOP: &str = super::sleep::FAMILY;

/// The sleep loop's defaults (the `sleep` experiment's).
const SLEEP: LoopDefaults = LoopDefaults {
    workers_run: Experiment::Sleep,
    units: ("5", "5"),
    sleep: Schedule::Fixed { ns: 1_000_000 },
    mode: Mode::Absolute,
    sleep_sweep: None,
    duration_ns: (1_500_000_000, 300_000_000),
    warmup_ns: (500_000_000, 100_000_000),
    busy_only_when_given: false,
    with_recipes: false,
};

/// The v2 study's loop (seeds/002): units 1 to 10,000, each sleeping its period modulo 20 ms
/// after its busy work.
const STUDY: LoopDefaults = LoopDefaults {
    units: ("1..10000:log10", "1..10000:log10"),
    sleep: Schedule::Modulo { m: 20, ns: 1_000_000 },
    mode: Mode::Relative,
    ..SLEEP
};

pub const EXPERIMENTS: &[ExperimentInfo] = &[
    ExperimentInfo {
        name: "sleep",
        about: "How late units wake up: the work loop at one point, or swept",
        family: LOOP,
        defaults: Some(SLEEP),
    },
    ExperimentInfo {
        name: "volume",
        about: "The sleep loop over a growing number of units (the v2 study): delay, iterations and memory per unit",
        family: LOOP,
        defaults: Some(STUDY),
    },
    ExperimentInfo {
        name: "atomic-sum",
        about: "Every iteration increments one shared atomic counter: increments per second vs units",
        family: LOOP,
        defaults: Some(LoopDefaults { workers_run: Experiment::AtomicSum, ..STUDY }),
    },
    ExperimentInfo {
        name: "net",
        about: "TCP message throughput with 1..N senders against each receiver (the TCP study)",
        family: super::net::FAMILY,
        defaults: None,
    },
    ExperimentInfo {
        name: "granularity",
        about: "The smallest task each runtime runs efficiently: efficiency against task size, and METG(50 %) as \
                Task Bench defines it",
        family: super::granularity::FAMILY,
        defaults: None,
    },
    ExperimentInfo {
        name: "recipes",
        about: "Every way to wait each runtime has (RUNTIME/RECIPE: spin, timerfd, hybrid, ...) beside its own \
                sleep, at 50 µs to 10 ms and 1 and 100 units: lateness, CPU per unit, and which to use",
        family: LOOP,
        // The periods the upstream threads ask about: below, at and above a 1 ms timer wheel; about
        // 90 ways to wait at 8 points take about 9 minutes (2 points with --quick).
        defaults: Some(LoopDefaults {
            units: ("1,100", "1"),
            sleep_sweep: Some(("sleep=50us,250us,1ms,10ms", "sleep=250us,1ms")),
            duration_ns: (500_000_000, 200_000_000),
            warmup_ns: (100_000_000, 50_000_000),
            busy_only_when_given: true,
            with_recipes: true,
            ..SLEEP
        }),
    },
];

/// The experiment named `name`.
pub fn find(name: &str) -> Option<&'static ExperimentInfo> {
    EXPERIMENTS.iter().find(|e| e.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_each_loop_experiment_has_its_defaults() {
        for (i, e) in EXPERIMENTS.iter().enumerate() {
            assert!(EXPERIMENTS[..i].iter().all(|other| other.name != e.name), "{} twice", e.name);
            assert_eq!(e.defaults.is_some(), e.family == LOOP, "{}", e.name);
            assert!(!e.about.is_empty() && !e.about.ends_with('.'), "{}: one line, no full stop", e.name);
        }
        assert_eq!(
            find("atomic-sum").and_then(|e| e.defaults.as_ref()).map(|d| d.workers_run),
            Some(Experiment::AtomicSum)
        );
    }
}
