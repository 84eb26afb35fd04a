//! The record of `taskmeter run granularity` (`granularity.json`): what each worker measured
//! per grain, and per runtime the efficiency curve and METG over the repetitions.

use super::header::{Header, Record};
use serde::{Deserialize, Serialize};
use taskmeter_protocol::{Pattern, Point};
use taskmeter_stats::Interval;

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GrainSettings {
    pub runtimes: Vec<String>,
    pub pattern: Pattern,
    /// W: tasks per step (trivial: `width x steps` tasks in flight; chain: W chains).
    pub width: u32,
    /// S: steps per round.
    pub steps: u32,
    /// The busy work asked of one task, ns, largest first.
    pub grains_ns: Vec<u64>,
    /// Per grain: rounds before the measurement, and the measured time.
    pub warmup_ns: u64,
    pub duration_ns: u64,
    /// How long each serial measurement (the rate, a grain's useful work) runs.
    pub calibrate_ns: u64,
    /// Workers per runtime (`--repeat`).
    pub repeat: u32,
}

/// One grain as a worker measured it, with what taskmeter derives from it.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GrainPoint {
    /// The worker's `P` frame.
    #[serde(flatten)]
    pub measured: Point,
    /// The useful work of one task, measured alone: `serial_ns / serial_tasks`.
    pub task_ns: f64,
    /// Task Bench's task granularity: `wall_ns x cores / tasks`.
    pub granularity_ns: f64,
    /// `task_ns / granularity_ns`: useful work over the capacity the runtime had.
    pub efficiency: f64,
    /// `granularity_ns - task_ns`: what starting and awaiting one task cost beyond its work.
    pub overhead_ns: f64,
    /// Why the point is not used (an efficiency no runtime can reach: its serial baseline was
    /// disturbed); absent when it is valid.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub invalid: Option<String>,
    /// The cores the runtime reported when taskmeter counted others (its `cores` above are
    /// taskmeter's: the worker's affinity capped by a cgroup quota).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cores_reported: Option<u32>,
}

/// METG(50 %) of one repetition: interpolated between the two grains around 50 %, or a bound
/// when no grain (or every grain) reached it.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Metg {
    /// Between two measured grains.
    Interpolated { ns: f64 },
    /// Every grain reached 50 %: METG is below the smallest granularity measured.
    Below { ns: f64 },
    /// No grain reached 50 %: METG is above the largest granularity measured.
    Above { ns: f64 },
}

/// One worker: a runtime's repetition.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GrainRun {
    pub runtime: String,
    pub repetition: u32,
    pub runtime_version: Option<String>,
    pub points: Vec<GrainPoint>,
    pub metg: Option<Metg>,
    /// Why the worker failed or stopped short (the grains it sent are kept).
    pub error: Option<String>,
    pub interrupted: bool,
    pub wall_ns: u64,
}

/// A runtime over its repetitions.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct GrainSummary {
    pub runtime: String,
    /// Repetitions that measured every grain.
    pub repetitions: u32,
    pub cores: Option<u32>,
    /// The geometric mean METG with the 95 % range, on a log scale, for the one another
    /// invocation with as many repetitions would give (none with one), when every repetition
    /// with a METG interpolated it. Records before version 2 ([`RANGES_SINCE`]) hold the
    /// arithmetic mean with a Student-t confidence interval, and so do their other intervals.
    pub metg_ns: Option<Interval>,
    /// Otherwise the bound every repetition agrees on (none when some repetitions found no
    /// grain at 50 % and others did).
    pub metg_bound: Option<Metg>,
    /// Per grain of the plan: the mean efficiency, with its range for another invocation.
    pub efficiency: Vec<Option<Interval>>,
    /// Per grain of the plan: the mean task granularity (wall x cores / tasks), ns.
    #[serde(default)]
    pub granularity_ns: Vec<Option<Interval>>,
    /// Per grain of the plan: the mean overhead per task, ns.
    pub overhead_ns: Vec<Option<Interval>>,
}

/// The first version of `granularity.json` whose intervals are ranges for another invocation.
pub const RANGES_SINCE: u32 = 2;

/// `granularity.json`.
#[derive(Serialize, Deserialize, Clone, Debug)]
pub struct GrainRecord {
    #[serde(flatten)]
    pub header: Header,
    pub settings: GrainSettings,
    /// One per runtime and repetition, in the order they ran.
    pub runs: Vec<GrainRun>,
    /// One per runtime, best METG first.
    pub summaries: Vec<GrainSummary>,
    /// Runtimes not run here, and why.
    pub skipped: Vec<SkippedRuntime>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct SkippedRuntime {
    pub runtime: String,
    pub reason: String,
}

impl Record for GrainRecord {
    const SCHEMA: &'static str = "taskmeter.granularity";
    const FILE: &'static str = "granularity.json";
    const VERSIONS: std::ops::RangeInclusive<u32> = 1..=RANGES_SINCE;
    crate::record_json!();

    fn header(&self) -> &Header {
        &self.header
    }
    fn header_mut(&mut self) -> &mut Header {
        &mut self.header
    }
}
