//! The plan: the complete description of one worker's job; `run.json` keeps it in a nested
//! form, and workers receive it in its flat wire form (protocol/README.md, "The plan").

use serde::{Deserialize, Serialize};
use std::fmt;

pub const PROTOCOL: u32 = 6;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Experiment {
    /// The work loop: busy work, then a sleep, timed.
    Sleep,
    /// The same loop, plus one increment of a counter shared by all units per iteration.
    AtomicSum,
    /// Tasks of a swept size in a pattern, timed per size (protocol: "The granularity experiment").
    Granularity,
}

impl Experiment {
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Sleep => "sleep",
            Experiment::AtomicSum => "atomic-sum",
            Experiment::Granularity => "granularity",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    Relative,
    Absolute,
}

/// How long each iteration sleeps.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(tag = "kind", rename_all = "kebab-case")]
pub enum Schedule {
    /// Every iteration sleeps `ns`.
    Fixed { ns: u64 },
    /// Unit `u` sleeps `u * ns` (the v1 study).
    ByUnit { ns: u64 },
    /// Period `k` sleeps `(k % m + 1) * ns` (the v2 study).
    Modulo { m: u64, ns: u64 },
    /// No sleep: the unit yields once per iteration and records no samples, only counts.
    None,
}

impl Schedule {
    /// Expected sleep of unit `unit` (1-based) in period `k` (0-based).
    pub fn expected(&self, unit: u32, k: u64) -> u64 {
        match *self {
            Schedule::Fixed { ns } => ns,
            Schedule::ByUnit { ns } => ns.saturating_mul(unit as u64),
            Schedule::Modulo { m, ns } => ns.saturating_mul(k % m.max(1) + 1),
            Schedule::None => 0,
        }
    }

    /// Unit `unit`'s expected sleep when every period has the same one (all but `modulo`).
    pub fn same_every_period(&self, unit: u32) -> Option<u64> {
        match self {
            Schedule::Modulo { .. } => None,
            _ => Some(self.expected(unit, 0)),
        }
    }

    /// [`Schedule::expected`] as [`Schedule::total_through`] counts it: exact, never saturated,
    /// so that a deadline plus the next sleep is the next deadline.
    pub fn expected_exact(&self, unit: u32, k: u64) -> u128 {
        match *self {
            Schedule::Fixed { ns } => ns as u128,
            Schedule::ByUnit { ns } => ns as u128 * unit as u128,
            Schedule::Modulo { m, ns } => ns as u128 * (k % m.max(1) + 1) as u128,
            Schedule::None => 0,
        }
    }

    /// The sum of the expected sleeps of periods `0..=period` of unit `unit`: in absolute mode,
    /// the deadline of that period is `origin` plus this. Exact (u128) for any period.
    pub fn total_through(&self, unit: u32, period: u64) -> u128 {
        let periods = period as u128 + 1;
        match *self {
            Schedule::Fixed { ns } => periods * ns as u128,
            Schedule::ByUnit { ns } => periods * ns as u128 * unit as u128,
            Schedule::Modulo { m, ns } => {
                let m = m.max(1) as u128;
                let (cycles, rest) = (periods / m, periods % m);
                ns as u128 * (cycles * (m * (m + 1) / 2) + rest * (rest + 1) / 2)
            }
            Schedule::None => 0,
        }
    }

    /// The first period from `from` on whose total ([`Schedule::total_through`]) reaches
    /// `total`: in absolute mode, the first deadline at or after `origin + total`. Totals rise
    /// by at least 1 ns a period with a sleeping schedule (absolute mode's by 1 µs), so the
    /// search doubles its step and then halves it: about 2 log2(distance) totals. None when no
    /// period below 2^63 reaches it.
    pub fn first_period_reaching(&self, unit: u32, from: u64, total: u128) -> Option<u64> {
        const LAST: u64 = 1 << 63;
        let reaches = |k: u64| self.total_through(unit, k) >= total;
        if reaches(from) {
            return Some(from);
        }
        let (mut short, mut step) = (from, 1u64);
        let mut reached = loop {
            let k = from.saturating_add(step).min(LAST);
            if reaches(k) {
                break k;
            }
            if k == LAST {
                return None;
            }
            (short, step) = (k, step.saturating_mul(2));
        };
        while reached - short > 1 {
            let middle = short + (reached - short) / 2;
            match reaches(middle) {
                true => reached = middle,
                false => short = middle,
            }
        }
        Some(reached)
    }

    /// Periods of unit `unit` that start in `from_ns..to_ns` after its origin when each lasts its
    /// expected sleep (absolute mode's deadlines; a relative period lasts longer, a missed one is
    /// skipped): the samples a unit that wakes on time takes there. u64::MAX when the sleeps never
    /// reach `to_ns`.
    pub fn periods_starting_within(&self, unit: u32, from_ns: u64, to_ns: u64) -> u64 {
        // Periods 0..=k start before `t` when k is the first whose total reaches it.
        let starting_before = |t: u64| match t {
            0 => Some(0),
            _ => self.first_period_reaching(unit, 0, u128::from(t)).map(|k| k + 1),
        };
        match (starting_before(from_ns), starting_before(to_ns)) {
            (Some(before), Some(by_end)) => by_end - before,
            _ => u64::MAX,
        }
    }

    pub fn sleeps(&self) -> bool {
        !matches!(self, Schedule::None)
    }

    /// The longest sleep any unit of `units` can be asked for.
    pub fn max_expected(&self, units: u32) -> u64 {
        match *self {
            Schedule::Fixed { ns } => ns,
            Schedule::ByUnit { ns } => ns.saturating_mul(units as u64),
            Schedule::Modulo { m, ns } => ns.saturating_mul(m),
            Schedule::None => 0,
        }
    }

    /// Parses the command-line form: `fixed:250us`, `by-unit:1s`, `modulo:20:1ms`, `none`.
    pub fn parse(spec: &str) -> Result<Schedule, String> {
        let usage = "expected fixed:DURATION, by-unit:DURATION, modulo:M:DURATION or none";
        let parts: Vec<&str> = spec.split(':').collect();
        let schedule = match parts.as_slice() {
            ["none"] => Schedule::None,
            ["fixed", d] => Schedule::Fixed { ns: parse_duration_ns(d)? },
            ["by-unit", d] => Schedule::ByUnit { ns: parse_duration_ns(d)? },
            ["modulo", m, d] => {
                let m: u64 = m.parse().map_err(|_| format!("modulo M must be a whole number >= 1, got '{m}'"))?;
                if m == 0 {
                    return Err("modulo M must be >= 1".into());
                }
                Schedule::Modulo { m, ns: parse_duration_ns(d)? }
            }
            _ => return Err(format!("invalid sleep schedule '{spec}': {usage}")),
        };
        Ok(schedule)
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Schedule::Fixed { ns } => write!(f, "fixed:{}", format_duration_spec(ns)),
            Schedule::ByUnit { ns } => write!(f, "by-unit:{}", format_duration_spec(ns)),
            Schedule::Modulo { m, ns } => write!(f, "modulo:{m}:{}", format_duration_spec(ns)),
            Schedule::None => write!(f, "none"),
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct SleepPlan {
    pub mode: Mode,
    pub schedule: Schedule,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
pub struct BusyPlan {
    pub iters: u64,
    #[serde(rename = "yield")]
    pub yield_each_step: bool,
}

/// How the tasks of one round depend on each other (protocol: "The patterns").
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Pattern {
    /// `width x steps` independent tasks, all started, then all awaited.
    Trivial,
    /// `width` chains of `steps` tasks, each started by its predecessor with its result.
    Chain,
    /// `steps` steps of `width` tasks, each step awaited before the next.
    Stencil,
}

impl Pattern {
    pub fn name(self) -> &'static str {
        match self {
            Pattern::Trivial => "trivial",
            Pattern::Chain => "chain",
            Pattern::Stencil => "stencil",
        }
    }
}

/// The granularity experiment's part of a plan.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct GrainPlan {
    pub pattern: Pattern,
    pub width: u32,
    pub steps: u32,
    /// The task sizes (busy work per task, ns), strictly decreasing.
    pub grains_ns: Vec<u64>,
    /// How long each serial measurement (the rate, a grain's useful work) runs.
    pub calibrate_ns: u64,
}

pub const MAX_WIDTH: u32 = 4096;
pub const MAX_STEPS: u32 = 100_000;
pub const MAX_GRAINS: usize = 64;
pub const MIN_CALIBRATE_NS: u64 = 1_000_000;

impl GrainPlan {
    pub fn tasks_per_round(&self) -> u64 {
        self.width as u64 * self.steps as u64
    }

    /// The wire form of `grains_ns`: decimal integers, comma-separated.
    pub fn grains_text(&self) -> String {
        self.grains_ns.iter().map(u64::to_string).collect::<Vec<_>>().join(",")
    }

    fn parse_grains(text: &str) -> Result<Vec<u64>, PlanError> {
        text.split(',')
            .map(|g| match g.parse::<u64>() {
                Ok(ns) if !g.starts_with('+') => Ok(ns),
                _ => Err(PlanError(format!("grains_ns: '{g}' is not a decimal integer"))),
            })
            .collect()
    }

    fn check(&self) -> Result<(), PlanError> {
        if !(1..=MAX_WIDTH).contains(&self.width) {
            return Err(format!("width must be 1 to {MAX_WIDTH}, got {}", self.width).into());
        }
        if !(1..=MAX_STEPS).contains(&self.steps) {
            return Err(format!("steps must be 1 to {MAX_STEPS}, got {}", self.steps).into());
        }
        if self.grains_ns.is_empty() || self.grains_ns.len() > MAX_GRAINS {
            return Err(format!("grains_ns must hold 1 to {MAX_GRAINS} grains").into());
        }
        if self.grains_ns.iter().any(|g| *g == 0 || *g >= MAX_INTEGER) {
            return Err("every grain must be at least 1 ns and below 2^53".into());
        }
        if self.grains_ns.windows(2).any(|w| w[1] >= w[0]) {
            return Err("grains_ns must be strictly decreasing".into());
        }
        if !(MIN_CALIBRATE_NS..MAX_INTEGER).contains(&self.calibrate_ns) {
            return Err("calibrate_ns must be at least 1 ms and below 2^53".into());
        }
        Ok(())
    }
}

/// The machine's room for units at the moment the worker is started, measured once by the
/// orchestrator (protocol: "The plan", "Starting units") so that no driver probes the kernel
/// itself; a driver adds only what it alone knows (its own memory maps, its runtime's threads).
/// `None` where no limit could be read.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq, Default)]
pub struct Room {
    /// Threads this user may still create, 1/32 of the room already kept for other processes.
    pub threads: Option<u64>,
    /// The binding limit and its figures, for a worker's `start_error`.
    pub threads_why: String,
    /// Bytes of memory available: MemAvailable, or the room under a memory cgroup's limit.
    pub memory_bytes: Option<u64>,
    pub memory_why: String,
    /// `vm.max_map_count`: the memory maps one process may have.
    pub max_map_count: Option<u64>,
}

/// The longest a [`Room`] reason may be: the plan stays one line a fixed buffer holds (C).
pub const MAX_WHY: usize = 500;

impl Room {
    /// A reason as the plan carries it: plain text (no `"`, `\` or control characters, which
    /// the flat readers of C and Java do not unescape), at most [`MAX_WHY`] bytes.
    pub fn plain(text: &str) -> String {
        let mut plain: String =
            text.chars().map(|c| if c == '"' || c == '\\' || c.is_control() { '?' } else { c }).collect();
        if plain.len() > MAX_WHY {
            let mut cut = MAX_WHY - 3;
            while !plain.is_char_boundary(cut) {
                cut -= 1;
            }
            plain.truncate(cut);
            plain.push_str("...");
        }
        plain
    }

    fn check(&self) -> Result<(), PlanError> {
        let figures = [self.threads, self.memory_bytes, self.max_map_count];
        if figures.iter().flatten().any(|v| *v >= MAX_INTEGER) {
            return Err("every integer of a plan must be below 2^53".into());
        }
        for (key, why) in [("room_threads_why", &self.threads_why), ("room_memory_why", &self.memory_why)] {
            if *why != Room::plain(why) {
                return Err(format!(
                    "{key} must be plain text of at most {MAX_WHY} bytes, without '\"', '\\' or control characters"
                )
                .into());
            }
        }
        Ok(())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub protocol: u32,
    pub experiment: Experiment,
    pub runtime: String,
    pub units: u32,
    /// 1, or 2: unit `u` is in class `(u - 1) % 2`, 0 being the high class.
    pub priority_classes: u32,
    /// Time allowed to start the units, from when the worker read the plan.
    pub start_limit_ns: u64,
    pub duration_ns: u64,
    pub warmup_ns: u64,
    pub sleep: SleepPlan,
    pub busy: BusyPlan,
    /// Samples each unit's ring holds (protocol: "Storage: the ring").
    #[serde(default = "default_ring")]
    pub ring: u32,
    /// How often the worker's writer sends what the rings hold.
    #[serde(default = "default_flush_ns")]
    pub flush_ns: u64,
    /// The machine's room when the worker was started (plans recorded before it: unknown).
    #[serde(default)]
    pub room: Room,
    /// Present exactly in the granularity experiment.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grain: Option<GrainPlan>,
    /// How a unit waits for its intended time: one of the recipes its runtime declares
    /// (protocol: "Wait recipes"); [`DEFAULT_WAIT`], the runtime's own sleep, unless asked.
    #[serde(default = "default_wait")]
    pub wait: String,
}

/// The recipe every runtime has: its own sleep, as the work loop describes it.
pub const DEFAULT_WAIT: &str = "sleep";

fn default_wait() -> String {
    DEFAULT_WAIT.to_string()
}

/// Whether `name` can name a recipe: lowercase letters, digits and '-', at most 40 bytes.
pub fn is_recipe_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= 40
        && name.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !name.starts_with('-')
}

fn default_ring() -> u32 {
    MIN_RING
}

fn default_flush_ns() -> u64 {
    FLUSH_NS
}

/// The writer's period the orchestrator asks for: five writes a second.
pub const FLUSH_NS: u64 = 200_000_000;
/// How long a ring holds the samples of its unit's fastest schedule: a writer can be kept off
/// the CPU for seconds by many busy units (1,000 C threads on 2 cores kept it waiting 3 s).
pub const RING_SECONDS: u64 = 2;
/// The smallest ring the orchestrator gives a unit (1.5 MiB per 1,000 units), and the budget of
/// all units' rings together above that minimum (32 bytes a sample: 128 MiB).
pub const MIN_RING: u32 = 32;
pub const RING_BUDGET: u64 = 1 << 22;
/// A flush period below this would make the writer a busy loop.
pub const MIN_FLUSH_NS: u64 = 1_000_000;
/// Every integer of a plan is below 2^53, so languages whose numbers are doubles read it exactly.
pub const MAX_INTEGER: u64 = 1 << 53;

/// The plan on the wire (protocol/README.md, "The plan"): flat, every key, in this order.
#[derive(Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
struct WirePlan {
    protocol: u32,
    runtime: String,
    experiment: Experiment,
    units: u32,
    classes: u32,
    start_limit_ns: u64,
    warmup_ns: u64,
    duration_ns: u64,
    mode: Mode,
    schedule: ScheduleKind,
    sleep_ns: u64,
    modulo: u64,
    busy_iters: u64,
    busy_yield: bool,
    ring: u32,
    flush_ns: u64,
    // Always written, `null` when unknown: a missing key is refused like any other.
    #[serde(deserialize_with = "nullable")]
    room_threads: Option<u64>,
    room_threads_why: String,
    #[serde(deserialize_with = "nullable")]
    room_memory_bytes: Option<u64>,
    room_memory_why: String,
    #[serde(deserialize_with = "nullable")]
    max_map_count: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pattern: Option<Pattern>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    width: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    steps: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    grains_ns: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    calibrate_ns: Option<u64>,
    /// Written only when it is not the runtime's own sleep, so that plans without it are those
    /// of protocol 3 before recipes existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    wait: Option<String>,
}

/// An integer or `null`, with the key required (serde would take a missing `Option` as `None`).
fn nullable<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Option<u64>, D::Error> {
    Option::<u64>::deserialize(deserializer)
}

#[derive(Serialize, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
enum ScheduleKind {
    Fixed,
    ByUnit,
    Modulo,
    None,
}

/// Why a plan cannot be run: the orchestrator's own validator, or a worker's `E` frame.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PlanError(pub String);

impl fmt::Display for PlanError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for PlanError {}

impl From<String> for PlanError {
    fn from(message: String) -> PlanError {
        PlanError(message)
    }
}

impl From<&str> for PlanError {
    fn from(message: &str) -> PlanError {
        PlanError(message.to_string())
    }
}

impl Plan {
    /// Reads and checks a plan in its wire form; the error says what is wrong.
    pub fn from_json(line: &str) -> Result<Plan, PlanError> {
        let wire: WirePlan = serde_json::from_str(line.trim_end()).map_err(|e| format!("invalid plan: {e}"))?;
        if wire.protocol != PROTOCOL {
            return Err(format!("unsupported protocol version {} (this is protocol {PROTOCOL})", wire.protocol).into());
        }
        let schedule = match wire.schedule {
            ScheduleKind::Fixed => Schedule::Fixed { ns: wire.sleep_ns },
            ScheduleKind::ByUnit => Schedule::ByUnit { ns: wire.sleep_ns },
            ScheduleKind::Modulo => Schedule::Modulo { m: wire.modulo, ns: wire.sleep_ns },
            ScheduleKind::None => Schedule::None,
        };
        if wire.schedule == ScheduleKind::None && wire.sleep_ns != 0 {
            return Err("sleep_ns must be 0 with the schedule none".into());
        }
        if wire.schedule != ScheduleKind::Modulo && wire.modulo != 1 {
            return Err("modulo must be 1 unless the schedule is modulo".into());
        }
        let grain = match (wire.pattern, wire.width, wire.steps, &wire.grains_ns, wire.calibrate_ns) {
            (None, None, None, None, None) => None,
            (Some(pattern), Some(width), Some(steps), Some(grains), Some(calibrate_ns)) => {
                Some(GrainPlan { pattern, width, steps, grains_ns: GrainPlan::parse_grains(grains)?, calibrate_ns })
            }
            _ => return Err("pattern, width, steps, grains_ns and calibrate_ns come together".into()),
        };
        let plan = Plan {
            protocol: wire.protocol,
            experiment: wire.experiment,
            runtime: wire.runtime,
            units: wire.units,
            priority_classes: wire.classes,
            start_limit_ns: wire.start_limit_ns,
            duration_ns: wire.duration_ns,
            warmup_ns: wire.warmup_ns,
            sleep: SleepPlan { mode: wire.mode, schedule },
            busy: BusyPlan { iters: wire.busy_iters, yield_each_step: wire.busy_yield },
            ring: wire.ring,
            flush_ns: wire.flush_ns,
            room: Room {
                threads: wire.room_threads,
                threads_why: wire.room_threads_why,
                memory_bytes: wire.room_memory_bytes,
                memory_why: wire.room_memory_why,
                max_map_count: wire.max_map_count,
            },
            grain,
            wait: wire.wait.unwrap_or_else(default_wait),
        };
        plan.check()?;
        Ok(plan)
    }

    /// The plan in its wire form: one line of flat JSON, keys in the protocol's order.
    pub fn to_json(&self) -> String {
        let (schedule, sleep_ns, modulo) = match self.sleep.schedule {
            Schedule::Fixed { ns } => (ScheduleKind::Fixed, ns, 1),
            Schedule::ByUnit { ns } => (ScheduleKind::ByUnit, ns, 1),
            Schedule::Modulo { m, ns } => (ScheduleKind::Modulo, ns, m),
            Schedule::None => (ScheduleKind::None, 0, 1),
        };
        let wire = WirePlan {
            protocol: self.protocol,
            runtime: self.runtime.clone(),
            experiment: self.experiment,
            units: self.units,
            classes: self.priority_classes,
            start_limit_ns: self.start_limit_ns,
            warmup_ns: self.warmup_ns,
            duration_ns: self.duration_ns,
            mode: if self.sleep.schedule.sleeps() { self.sleep.mode } else { Mode::Relative },
            schedule,
            sleep_ns,
            modulo,
            busy_iters: self.busy.iters,
            busy_yield: self.busy.yield_each_step,
            ring: self.ring,
            flush_ns: self.flush_ns,
            room_threads: self.room.threads,
            room_threads_why: self.room.threads_why.clone(),
            room_memory_bytes: self.room.memory_bytes,
            room_memory_why: self.room.memory_why.clone(),
            max_map_count: self.room.max_map_count,
            pattern: self.grain.as_ref().map(|g| g.pattern),
            width: self.grain.as_ref().map(|g| g.width),
            steps: self.grain.as_ref().map(|g| g.steps),
            grains_ns: self.grain.as_ref().map(GrainPlan::grains_text),
            calibrate_ns: self.grain.as_ref().map(|g| g.calibrate_ns),
            wait: Some(self.wait.clone()).filter(|w| w != DEFAULT_WAIT),
        };
        serde_json::to_string(&wire).expect("a plan always serialises")
    }

    /// The rules every plan obeys (protocol: "The orchestrator has checked the plan").
    pub fn check(&self) -> Result<(), PlanError> {
        if self.runtime.is_empty() {
            return Err("runtime must not be empty".into());
        }
        if self.units == 0 {
            return Err("units must be >= 1".into());
        }
        if !(1..=2).contains(&self.priority_classes) {
            return Err(format!("classes must be 1 or 2, got {}", self.priority_classes).into());
        }
        if self.start_limit_ns == 0 {
            return Err("start_limit_ns must be > 0".into());
        }
        if self.duration_ns == 0 {
            return Err("duration must be > 0".into());
        }
        if self.ring == 0 {
            return Err("ring must be >= 1".into());
        }
        if self.flush_ns < MIN_FLUSH_NS {
            return Err("flush_ns must be at least 1 ms".into());
        }
        if let Schedule::Modulo { m: 0, .. } = self.sleep.schedule {
            return Err("modulo M must be >= 1".into());
        }
        let (sleep_ns, modulo) = match self.sleep.schedule {
            Schedule::Fixed { ns } | Schedule::ByUnit { ns } => (ns, 1),
            Schedule::Modulo { m, ns } => (ns, m),
            Schedule::None => (0, 1),
        };
        let integers =
            [self.start_limit_ns, self.warmup_ns, self.duration_ns, sleep_ns, modulo, self.busy.iters, self.flush_ns];
        if integers.iter().any(|v| *v >= MAX_INTEGER) {
            return Err("every integer of a plan must be below 2^53".into());
        }
        self.room.check()?;
        let longest = self.sleep.schedule.max_expected(self.units) as u128;
        if (self.warmup_ns as u128 + self.duration_ns as u128 + longest) >= MAX_INTEGER as u128 {
            return Err("warmup_ns + duration_ns + the longest sleep must be below 2^53 ns".into());
        }
        if !is_recipe_name(&self.wait) {
            return Err("wait must name a recipe: lowercase letters, digits and '-', at most 40 bytes".into());
        }
        if self.wait != DEFAULT_WAIT && !(self.experiment == Experiment::Sleep && self.sleep.schedule.sleeps()) {
            return Err(format!("wait '{}' needs the sleep experiment with a sleeping schedule", self.wait).into());
        }
        if self.sleep.mode == Mode::Absolute && self.sleep.schedule.sleeps() && sleep_ns < 1_000 {
            return Err("absolute mode needs a sleep of at least 1 us".into());
        }
        match (&self.grain, self.experiment) {
            (Some(grain), Experiment::Granularity) => {
                grain.check()?;
                let plain = self.units == 1
                    && self.priority_classes == 1
                    && self.sleep.schedule == Schedule::None
                    && self.busy == BusyPlan { iters: 0, yield_each_step: false };
                if !plain {
                    return Err("a granularity plan has units 1, classes 1, the schedule none and no busy work".into());
                }
                let per_grain = grain.calibrate_ns as u128 + self.warmup_ns as u128 + self.duration_ns as u128;
                if per_grain * grain.grains_ns.len() as u128 + grain.calibrate_ns as u128 >= MAX_INTEGER as u128 {
                    return Err("the grains' total time must be below 2^53 ns".into());
                }
            }
            (None, Experiment::Granularity) => {
                return Err("a granularity plan needs pattern, width, steps, grains_ns and calibrate_ns".into())
            }
            (Some(_), _) => {
                return Err(
                    "pattern, width, steps, grains_ns and calibrate_ns belong to the granularity experiment".into()
                )
            }
            (None, _) => {}
        }
        Ok(())
    }

    pub fn max_expected_ns(&self) -> u64 {
        self.sleep.schedule.max_expected(self.units)
    }

    /// How long the worker's measurements last at most after its start: the window (with the
    /// longest sleep) or, in the granularity experiment, the rate and every grain's three phases
    /// run on one core (a bound: see [`Plan::planned_ns_on`]).
    pub fn planned_ns(&self) -> u64 {
        self.planned_ns_on(1)
    }

    /// [`Plan::planned_ns`] when `cores` tasks run at once. A grain's serial phase lasts at
    /// least one task, and its warm-up and measurement at least one round (`W x S` tasks),
    /// however long their planned time: a task of 1 s in 100 rounds of 50 takes minutes.
    pub fn planned_ns_on(&self, cores: u32) -> u64 {
        match &self.grain {
            Some(g) => {
                let per_grain = |grain: u64| {
                    let tasks = (g.width as u64 * g.steps as u64).div_ceil(cores.clamp(1, g.width.max(1)) as u64);
                    let round = grain.saturating_mul(tasks);
                    g.calibrate_ns
                        .max(grain)
                        .saturating_add(self.warmup_ns.max(round))
                        .saturating_add(self.duration_ns.max(round))
                };
                g.grains_ns.iter().fold(g.calibrate_ns, |total, grain| total.saturating_add(per_grain(*grain)))
            }
            None => self.warmup_ns + self.duration_ns + self.max_expected_ns(),
        }
    }

    /// The samples its units measure if every one wakes on time, from `warmup_ns` for
    /// `duration_ns` after its origin ([`Schedule::periods_starting_within`]): what a row may
    /// have to keep. Late, busy or relative periods make fewer; saturates at u64::MAX.
    pub fn measured_on_time(&self) -> u64 {
        let (from, to) = (self.warmup_ns, self.warmup_ns.saturating_add(self.duration_ns));
        let schedule = self.sleep.schedule;
        match schedule {
            Schedule::None => 0,
            Schedule::ByUnit { .. } => (1..=self.units)
                .fold(0u64, |sum, unit| sum.saturating_add(schedule.periods_starting_within(unit, from, to))),
            _ => schedule.periods_starting_within(1, from, to).saturating_mul(u64::from(self.units)),
        }
    }

    /// The priority class of unit `unit` (1-based): classes alternate so a partial start keeps
    /// them balanced.
    pub fn class_of(&self, unit: u32) -> u32 {
        (unit - 1) % self.priority_classes.max(1)
    }

    /// Sizes the rings (protocol: "Storage: the ring"): [`RING_SECONDS`] of the fastest
    /// schedule (a sleep counted as at least 1 us), within [`RING_BUDGET`] for all units and
    /// never below [`MIN_RING`].
    pub fn size_rings(&mut self) {
        let fastest = match self.sleep.schedule {
            Schedule::None => {
                self.ring = 1;
                return;
            }
            Schedule::Fixed { ns } | Schedule::ByUnit { ns } | Schedule::Modulo { ns, .. } => ns.max(1_000),
        };
        let wanted = (RING_SECONDS * 1_000_000_000).div_ceil(fastest);
        let share = RING_BUDGET / self.units as u64;
        self.ring = wanted.min(share).max(MIN_RING as u64) as u32;
    }
}

/// Parses a human duration (`250us`, `1.5ms`, `15s`, `2m`, `24h`, `0`); integers alone are refused
/// because their unit would be a guess.
pub fn parse_duration_ns(text: &str) -> Result<u64, String> {
    let t = text.trim();
    if t == "0" {
        return Ok(0);
    }
    if t.starts_with('-') {
        return Err(format!("invalid duration '{text}': durations cannot be negative"));
    }
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .ok_or_else(|| format!("invalid duration '{text}': add a unit (ns, us, ms, s, m, h)"))?;
    let (number, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        "h" => 3600e9,
        other => return Err(format!("invalid duration '{text}': unknown unit '{other}' (use ns, us, ms, s, m or h)")),
    };
    let value: f64 = number.parse().map_err(|_| format!("invalid duration '{text}': '{number}' is not a number"))?;
    let ns = (value * scale).round();
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(format!("invalid duration '{text}': too long"));
    }
    Ok(ns as u64)
}

/// The shortest exact spelling of a duration in the form [`parse_duration_ns`] reads.
pub fn format_duration_spec(ns: u64) -> String {
    for (unit, scale) in
        [("h", 3_600_000_000_000u64), ("m", 60_000_000_000), ("s", 1_000_000_000), ("ms", 1_000_000), ("us", 1_000)]
    {
        if ns != 0 && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    if ns == 0 {
        "0".into()
    } else {
        format!("{ns}ns")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations_parse_with_units() {
        assert_eq!(parse_duration_ns("250us"), Ok(250_000));
        assert_eq!(parse_duration_ns("1.5ms"), Ok(1_500_000));
        assert_eq!(parse_duration_ns("15s"), Ok(15_000_000_000));
        assert_eq!(parse_duration_ns("2m"), Ok(120_000_000_000));
        assert_eq!(parse_duration_ns("24h"), Ok(86_400_000_000_000));
        assert_eq!(parse_duration_ns("1.5h"), Ok(5_400_000_000_000));
        assert_eq!(parse_duration_ns("7ns"), Ok(7));
        assert_eq!(parse_duration_ns("0"), Ok(0));
        assert!(parse_duration_ns("-1s").unwrap_err().contains("negative"));
        assert!(parse_duration_ns("15").unwrap_err().contains("add a unit"));
        assert!(parse_duration_ns("abc").is_err());
        assert!(parse_duration_ns("3 parsecs").is_err());
        assert!(parse_duration_ns("99999999999999999999s").is_err());
    }

    #[test]
    fn duration_specs_round_trip() {
        assert_eq!(format_duration_spec(600_000_000_000), "10m");
        assert_eq!(format_duration_spec(86_400_000_000_000), "24h");
        for ns in [0, 7, 250_000, 1_000_000, 1_500_000, 15_000_000_000, 90_000_000_000] {
            assert_eq!(parse_duration_ns(&format_duration_spec(ns)), Ok(ns));
        }
    }

    /// A deadline plus the next period's exact sleep is the next deadline, even where the
    /// sleep itself passes 64 bits (a unit's number times a long by-unit sleep), and the exact
    /// sleep is the sleep wherever that fits.
    #[test]
    fn the_next_deadline_is_this_one_plus_the_next_sleep() {
        let schedules = [
            Schedule::Fixed { ns: 250_000 },
            Schedule::ByUnit { ns: 1 << 52 },
            Schedule::Modulo { m: 7, ns: 3_000 },
            Schedule::None,
        ];
        for schedule in schedules {
            for (unit, period) in [(1, 0), (3, 5), (4_000, 6), (4_000, 1 << 40), (u32::MAX, 1 << 20)] {
                let next = schedule.expected_exact(unit, period + 1);
                assert_eq!(schedule.total_through(unit, period) + next, schedule.total_through(unit, period + 1));
                if next <= u64::MAX as u128 {
                    assert_eq!(next, schedule.expected(unit, period + 1) as u128, "{schedule:?}");
                }
            }
        }
        assert!(Schedule::ByUnit { ns: 1 << 52 }.expected_exact(u32::MAX, 0) > u64::MAX as u128);
    }

    #[test]
    fn the_first_period_reaching_a_total_is_found_as_a_scan_finds_it() {
        for schedule in
            [Schedule::Fixed { ns: 1_000 }, Schedule::ByUnit { ns: 1_000 }, Schedule::Modulo { m: 5, ns: 1_000 }]
        {
            for unit in [1, 3] {
                for from in [0, 1, 7] {
                    for total in (0..60_000u128).step_by(250) {
                        let scanned = (from..).find(|k| schedule.total_through(unit, *k) >= total);
                        assert_eq!(
                            schedule.first_period_reaching(unit, from, total),
                            scanned,
                            "{schedule:?} {unit} {from} {total}"
                        );
                    }
                }
            }
        }
        let fixed = Schedule::Fixed { ns: 1_000 };
        // Far away: a wake 2^60 ns after the origin passed about 2^60 / 1,000 deadlines.
        let far = fixed.first_period_reaching(1, 0, 1 << 60).unwrap();
        assert!(fixed.total_through(1, far) >= 1 << 60 && fixed.total_through(1, far - 1) < 1 << 60);
        assert_eq!(fixed.first_period_reaching(1, 0, u128::MAX), None, "no period below 2^63 reaches it");
    }

    /// Periods starting in a window, by hand and as a walk over the periods' starts finds them.
    #[test]
    fn the_periods_starting_in_a_window_are_counted_as_a_walk_counts_them() {
        let ms = 1_000_000;
        let fixed = Schedule::Fixed { ns: ms };
        // Starts at 0, 1, 2 ... ms: 500 ms up to 3.5 s holds 3,000 of them.
        assert_eq!(fixed.periods_starting_within(1, 500 * ms, 3_500 * ms), 3_000);
        let modulo = Schedule::Modulo { m: 20, ns: ms };
        // A cycle of sleeps of 1 to 20 ms lasts 210 ms: 20 starts. In 3 s, 14 cycles (2,940 ms)
        // and 11 more starts, at 0, 1, 3, 6, 10, 15, 21, 28, 36, 45 and 55 ms after them.
        assert_eq!(modulo.periods_starting_within(1, 0, 210 * ms), 20);
        assert_eq!(modulo.periods_starting_within(1, 0, 3_000 * ms), 14 * 20 + 11);
        // Unit 1 starts every 1 ms, 2 every 2, 3 every 3: 6, 3 and 2 starts in 6 ms.
        let by_unit = Schedule::ByUnit { ns: ms };
        let starts: Vec<u64> = (1..=3).map(|unit| by_unit.periods_starting_within(unit, 0, 6 * ms)).collect();
        assert_eq!(starts, [6, 3, 2]);
        assert_eq!(Schedule::None.periods_starting_within(1, 0, 6 * ms), u64::MAX, "no sleep ends no period");
        for schedule in [fixed, modulo, by_unit, Schedule::Modulo { m: 3, ns: 7 * ms }] {
            for unit in [1, 2, 5] {
                for (from, to) in [(0, 1), (0, 100 * ms), (3 * ms, 250 * ms), (37 * ms, 38 * ms), (50 * ms, 50 * ms)] {
                    let mut start = 0u128;
                    let walked = (0u64..)
                        .map(|k| {
                            let begins = start;
                            start += schedule.expected_exact(unit, k);
                            begins
                        })
                        .take_while(|begins| *begins < u128::from(to))
                        .filter(|begins| *begins >= u128::from(from))
                        .count() as u64;
                    assert_eq!(
                        schedule.periods_starting_within(unit, from, to),
                        walked,
                        "{schedule:?} {unit} {from}..{to}"
                    );
                }
            }
        }
    }

    /// A plan's samples on time: every unit's periods in its measured window.
    #[test]
    fn a_plan_measures_on_time_what_its_units_periods_hold() {
        let mut plan = Plan::from_json(wire_plan()).unwrap();
        (plan.units, plan.warmup_ns, plan.duration_ns) = (10, 500_000_000, 3_000_000_000);
        plan.sleep.schedule = Schedule::Fixed { ns: 1_000_000 };
        assert_eq!(plan.measured_on_time(), 30_000, "10 units, 3,000 periods each");
        (plan.units, plan.warmup_ns, plan.duration_ns) = (3, 0, 6_000_000);
        plan.sleep.schedule = Schedule::ByUnit { ns: 1_000_000 };
        assert_eq!(plan.measured_on_time(), 6 + 3 + 2);
        plan.sleep.schedule = Schedule::None;
        assert_eq!(plan.measured_on_time(), 0, "no samples without a sleep");
        // The `lost` run's rows: cycles of 210 ms; 337 periods start before 3.5 s (16 cycles and
        // 17, the 17th at 136 ms), 53 before 0.5 s (2 cycles and 13, at 78 ms).
        (plan.units, plan.warmup_ns, plan.duration_ns) = (100_000, 500_000_000, 3_000_000_000);
        plan.sleep.schedule = Schedule::Modulo { m: 20, ns: 1_000_000 };
        assert_eq!(plan.measured_on_time(), 100_000 * (337 - 53));
    }

    #[test]
    fn schedules_follow_the_studies() {
        let fixed = Schedule::parse("fixed:250us").unwrap();
        assert_eq!(fixed.expected(3, 99), 250_000);
        let by_unit = Schedule::parse("by-unit:1s").unwrap();
        assert_eq!(by_unit.expected(1, 0), 1_000_000_000);
        assert_eq!(by_unit.expected(5, 7), 5_000_000_000);
        assert_eq!(by_unit.max_expected(5), 5_000_000_000);
        let modulo = Schedule::parse("modulo:20:1ms").unwrap();
        assert_eq!(modulo.expected(1, 0), 1_000_000);
        assert_eq!(modulo.expected(1, 19), 20_000_000);
        assert_eq!(modulo.expected(1, 20), 1_000_000);
        assert_eq!(modulo.max_expected(9), 20_000_000);
        // Deadlines: the sum of the periods so far, checked against a plain sum.
        let three = Schedule::parse("modulo:3:10ns").unwrap();
        for period in 0..20u64 {
            let sum: u128 = (0..=period).map(|k| three.expected(1, k) as u128).sum();
            assert_eq!(three.total_through(1, period), sum);
        }
        assert_eq!(by_unit.total_through(5, 1), 10_000_000_000);
        assert_eq!(fixed.total_through(1, u64::MAX), (1u128 << 64) * 250_000);
        assert_eq!(modulo.to_string(), "modulo:20:1ms");
        assert!(Schedule::parse("modulo:0:1ms").is_err());
        assert!(Schedule::parse("sometimes").is_err());
        assert!(Schedule::parse("fixed").is_err());
        assert_eq!(Schedule::parse("none"), Ok(Schedule::None));
        assert_eq!(Schedule::None.to_string(), "none");
    }

    fn wire_plan() -> &'static str {
        r#"{"protocol":6,"runtime":"thread","experiment":"sleep","units":2,"classes":2,"start_limit_ns":7,"warmup_ns":0,"duration_ns":5,"mode":"absolute","schedule":"modulo","sleep_ns":1000,"modulo":3,"busy_iters":4,"busy_yield":true,"ring":16,"flush_ns":1000000,"room_threads":41,"room_threads_why":"RLIMIT_NPROC (ulimit -u) 60 with 18 threads of uid 1000: 42 threads left, of which 1 (1/32) are kept for other processes","room_memory_bytes":null,"room_memory_why":"neither MemAvailable nor a memory cgroup limit could be read","max_map_count":65530}"#
    }

    #[test]
    fn plans_round_trip_in_the_wire_form_and_its_key_order() {
        let plan = Plan::from_json(wire_plan()).unwrap();
        assert_eq!(plan.sleep.schedule, Schedule::Modulo { m: 3, ns: 1000 });
        assert!(plan.busy.yield_each_step);
        assert_eq!((plan.ring, plan.flush_ns), (16, 1_000_000));
        assert_eq!(
            (plan.room.threads, plan.room.memory_bytes, plan.room.max_map_count),
            (Some(41), None, Some(65_530))
        );
        assert_eq!(plan.to_json(), wire_plan(), "null is written for an unknown limit");
        assert_eq!((plan.class_of(1), plan.class_of(2), plan.class_of(3)), (0, 1, 0));
        // run.json keeps the nested form, and reads plans written before rings existed.
        let nested = serde_json::to_value(&plan).unwrap();
        assert_eq!(nested["sleep"]["schedule"]["kind"], "modulo");
        let mut old = nested.clone();
        old.as_object_mut().unwrap().remove("ring");
        old.as_object_mut().unwrap().remove("flush_ns");
        old.as_object_mut().unwrap().remove("room");
        let back: Plan = serde_json::from_value(old).unwrap();
        assert_eq!((back.ring, back.flush_ns, back.room), (MIN_RING, FLUSH_NS, Room::default()));
        for (name, text) in crate::vectors::PLANS {
            let text = text.trim_end().replace("RUNTIME", "thread");
            assert_eq!(Plan::from_json(&text).unwrap().to_json(), text, "{name}");
        }
    }

    /// protocol/vectors/invalid-plans: the orchestrator's validator refuses each, with a reason.
    #[test]
    fn the_validator_refuses_every_invalid_plan_vector() {
        let expected = [
            ("not-json", "invalid plan"),
            ("protocol-3", "unsupported protocol version 3"),
            ("protocol-4", "unsupported protocol version 4"),
            ("protocol-5", "unsupported protocol version 5"),
            ("protocol-7", "unsupported protocol version 7"),
            ("zero-units", "units must be >= 1"),
            ("unknown-mode", "unknown variant `sometimes`"),
            ("unknown-schedule", "unknown variant `random`"),
            ("unknown-experiment", "unknown variant `juggle`"),
            ("missing-busy-iters", "missing field `busy_iters`"),
            ("missing-start-limit", "missing field `start_limit_ns`"),
            ("modulo-zero", "modulo M must be >= 1"),
            ("negative-duration", "invalid plan"),
            ("absolute-zero-period", "at least 1 us"),
            ("absolute-sub-microsecond", "at least 1 us"),
            ("three-classes", "classes must be 1 or 2"),
            ("zero-start-limit", "start_limit_ns must be > 0"),
            ("zero-ring", "ring must be >= 1"),
            ("short-flush", "at least 1 ms"),
            ("unknown-key", "unknown field `future_field`"),
            ("repeated-key", "duplicate field `units`"),
            ("float-integer", "invalid plan"),
            ("above-2-pow-53", "below 2^53"),
            ("overflowing-end", "below 2^53"),
            ("string-boolean", "invalid plan"),
            ("empty-runtime", "runtime must not be empty"),
            ("none-with-sleep", "sleep_ns must be 0"),
            ("fixed-with-modulo", "modulo must be 1"),
            ("granularity-rising-grains", "strictly decreasing"),
            ("granularity-two-units", "units 1, classes 1"),
            ("granularity-missing-pattern", "come together"),
            ("granularity-zero-width", "width must be 1 to 4096"),
            ("granularity-short-calibration", "calibrate_ns must be at least 1 ms"),
            ("grain-keys-in-sleep", "belong to the granularity experiment"),
            ("granularity-unknown-pattern", "unknown variant `tree`"),
            ("granularity-hex-grain", "'0x20' is not a decimal integer"),
            ("room-above-2-pow-53", "below 2^53"),
            ("missing-max-map-count", "missing field `max_map_count`"),
            ("quoted-why", "room_memory_why must be plain text"),
            ("wait-bad-name", "wait must name a recipe"),
            ("wait-with-none", "needs the sleep experiment with a sleeping schedule"),
        ];
        assert_eq!(expected.len(), crate::vectors::INVALID_PLANS.len(), "one expectation per vector");
        for (name, text) in crate::vectors::INVALID_PLANS {
            let (_, why) =
                expected.iter().find(|(n, _)| n == name).unwrap_or_else(|| panic!("no expectation for {name}"));
            let error = Plan::from_json(&text.replace("RUNTIME", "thread")).expect_err(name).0;
            assert!(error.contains(why), "{name}: '{error}' does not say '{why}'");
        }
        for (name, text) in crate::vectors::PLANS {
            Plan::from_json(&text.replace("RUNTIME", "thread")).unwrap_or_else(|e| panic!("{name}: {e}"));
        }
    }

    #[test]
    fn room_reasons_are_plain_and_short() {
        assert_eq!(Room::plain("a \"b\" c\\d\te"), "a ?b? c?d?e");
        let long = Room::plain(&"é".repeat(MAX_WHY));
        assert!(long.len() <= MAX_WHY && long.ends_with("..."), "{}", long.len());
        assert_eq!(Room::plain(&long), long, "plain text stays as it is");
        let mut plan = Plan::from_json(wire_plan()).unwrap();
        plan.room.threads_why = "x".repeat(MAX_WHY + 1);
        assert!(plan.check().unwrap_err().0.contains("room_threads_why must be plain text"));
    }

    #[test]
    fn rings_hold_two_seconds_of_the_fastest_schedule_within_the_budget() {
        let mut plan = Plan::from_json(wire_plan()).unwrap();
        plan.sleep.schedule = Schedule::Fixed { ns: 1_000_000 };
        plan.size_rings();
        assert_eq!(plan.ring, 2_000, "2 s of 1 ms sleeps");
        plan.sleep.schedule = Schedule::Modulo { m: 3, ns: 100_000 };
        plan.size_rings();
        assert_eq!(plan.ring, 20_000, "the shortest period of the modulo cycle");
        plan.sleep.schedule = Schedule::Fixed { ns: 0 };
        plan.size_rings();
        assert_eq!(plan.ring, 2_000_000, "0 counts as 1 us: 2 s of it, below the 2^21 each of 2 units may have");
        plan.units = 100_000;
        plan.size_rings();
        assert_eq!(plan.ring, 41, "2^22 / 100,000 units");
        plan.units = 1_000_000;
        plan.size_rings();
        assert_eq!(plan.ring, MIN_RING, "never below the minimum");
        plan.sleep.schedule = Schedule::None;
        plan.size_rings();
        assert_eq!(plan.ring, 1);
    }
}
