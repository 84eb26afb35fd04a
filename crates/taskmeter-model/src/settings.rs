//! The settings of a `taskmeter run`: what every point starts from (a sweep changes some of them
//! per point).

use serde::{Deserialize, Serialize};

fn one() -> u32 {
    1
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Settings {
    pub runtimes: Vec<String>,
    /// What the workers run: the sleep loop, or the sleep loop with a shared counter.
    pub experiment: taskmeter_protocol::Experiment,
    pub units: u32,
    /// 1, or 2: odd units high, even units low priority (protocol "Priority classes").
    pub priority_classes: u32,
    /// Time each worker may spend starting its units.
    pub start_limit_ns: u64,
    /// Workers per runtime and point (`--repeat`), each its own process; intervals come from
    /// the variation between them when there are two or more.
    #[serde(default = "one")]
    pub repeat: u32,
    /// The runtimes of a point ran side by side (`--together`), not one after another.
    pub together: bool,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub sleep: taskmeter_protocol::SleepPlan,
    pub sleep_spec: String,
    pub busy: taskmeter_protocol::BusyPlan,
    /// `--busy` as a time: each runtime's busy iterations were calibrated to it (its rows' plans
    /// hold the counts), and `busy.iters` is 0 here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub busy_ns: Option<u64>,
    pub grace_ns: u64,
    /// Scheduling settings applied to every worker before exec.
    #[serde(default)]
    pub sched: taskmeter_machine::sched::SchedSettings,
    /// A real-time policy may spin every core (`--allow-rt-spin`).
    #[serde(default)]
    pub allow_rt_spin: bool,
    /// The PM QoS CPU latency (µs) taskmeter held while the workers ran (`--cpu-dma-latency`);
    /// None: it held none (the environment says what was in force).
    #[serde(default)]
    pub cpu_dma_latency_us: Option<u32>,
    /// The most bytes of a worker's samples that may wait for taskmeter's reader
    /// (`--max-backlog`); None: a quarter of the machine's room for memory as each worker starts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_backlog_bytes: Option<u64>,
    /// The measured samples the run kept for exact percentiles (`--exact-samples`, shared by the
    /// rows of `--together`): past it, a row's percentiles came from HdrHistograms (its `basis`).
    /// None in records made before it was recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exact_samples: Option<u64>,
}
