//! The plan: the complete, serialisable description of one worker's job.

use serde::{Deserialize, Serialize};
use std::fmt;

pub const PROTOCOL: u32 = 2;

#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Experiment {
    /// The work loop: busy work, then a sleep, timed.
    Sleep,
    /// The same loop, plus one increment of a counter shared by all units per iteration.
    AtomicSum,
}

impl Experiment {
    pub fn name(self) -> &'static str {
        match self {
            Experiment::Sleep => "sleep",
            Experiment::AtomicSum => "atomic-sum",
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
                let m: u64 = m
                    .parse()
                    .map_err(|_| format!("modulo M must be a whole number >= 1, got '{m}'"))?;
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
}

/// Why a plan cannot be run: the sentence a worker puts in its `error` line.
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
    /// Parses and checks a plan as a worker receives it; the error is the worker's `error` line.
    pub fn from_json(line: &str) -> Result<Plan, PlanError> {
        let value: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("the plan is not valid JSON: {e}"))?;
        match value.get("protocol").and_then(|p| p.as_u64()) {
            Some(p) if p == PROTOCOL as u64 => {}
            Some(p) => return Err(format!("unsupported protocol version {p} (this worker speaks {PROTOCOL})").into()),
            None => return Err("the plan has no integer field 'protocol'".into()),
        }
        // Parsed again from the text: a map value would silently keep the last of duplicate keys.
        let plan: Plan = serde_json::from_str(line).map_err(|e| format!("invalid plan: {e}"))?;
        plan.check()?;
        Ok(plan)
    }

    /// The rules every plan obeys, whoever made it.
    pub fn check(&self) -> Result<(), PlanError> {
        if self.units == 0 {
            return Err("units must be >= 1".into());
        }
        if !(1..=2).contains(&self.priority_classes) {
            return Err(format!("priority_classes must be 1 or 2, got {}", self.priority_classes).into());
        }
        if self.start_limit_ns == 0 {
            return Err("start_limit_ns must be > 0".into());
        }
        if self.duration_ns == 0 {
            return Err("duration must be > 0".into());
        }
        if let Schedule::Modulo { m: 0, .. } = self.sleep.schedule {
            return Err("modulo M must be >= 1".into());
        }
        const LIMIT: u64 = 1 << 63;
        if self.warmup_ns.checked_add(self.duration_ns).is_none_or(|total| total >= LIMIT) {
            return Err("warmup_ns + duration_ns must be below 2^63".into());
        }
        let longest = match self.sleep.schedule {
            Schedule::Fixed { ns } => Some(ns),
            Schedule::ByUnit { ns } => ns.checked_mul(self.units as u64),
            Schedule::Modulo { m, ns } => ns.checked_mul(m),
            Schedule::None => Some(0),
        };
        if longest.is_none_or(|l| l >= LIMIT) {
            return Err("the longest sleep of the schedule must be below 2^63 ns".into());
        }
        if self.sleep.mode == Mode::Absolute && self.sleep.schedule.sleeps() && self.sleep.schedule.expected(1, 0) == 0 {
            return Err("absolute mode needs a sleep longer than 0: a period of 0 never ends".into());
        }
        Ok(())
    }

    pub fn max_expected_ns(&self) -> u64 {
        self.sleep.schedule.max_expected(self.units)
    }

    /// The priority class of unit `unit` (1-based): classes alternate so a partial start keeps
    /// them balanced.
    pub fn class_of(&self, unit: u32) -> u32 {
        (unit - 1) % self.priority_classes.max(1)
    }

    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("a plan always serialises")
    }
}

/// Parses a human duration (`250us`, `1.5ms`, `15s`, `2m`, `0`); integers alone are refused
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
        .ok_or_else(|| format!("invalid duration '{text}': add a unit (ns, us, ms, s, m)"))?;
    let (number, unit) = t.split_at(split);
    let scale: f64 = match unit.trim() {
        "ns" => 1.0,
        "us" | "µs" => 1e3,
        "ms" => 1e6,
        "s" => 1e9,
        "m" | "min" => 60e9,
        other => return Err(format!("invalid duration '{text}': unknown unit '{other}' (use ns, us, ms, s or m)")),
    };
    let value: f64 = number
        .parse()
        .map_err(|_| format!("invalid duration '{text}': '{number}' is not a number"))?;
    let ns = (value * scale).round();
    if !ns.is_finite() || ns >= u64::MAX as f64 {
        return Err(format!("invalid duration '{text}': too long"));
    }
    Ok(ns as u64)
}

/// The shortest exact spelling of a duration in the form [`parse_duration_ns`] reads.
pub fn format_duration_spec(ns: u64) -> String {
    for (unit, scale) in [("s", 1_000_000_000u64), ("ms", 1_000_000), ("us", 1_000)] {
        if ns != 0 && ns % scale == 0 {
            return format!("{}{unit}", ns / scale);
        }
    }
    if ns == 0 { "0".into() } else { format!("{ns}ns") }
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
        for ns in [0, 7, 250_000, 1_000_000, 1_500_000, 15_000_000_000] {
            assert_eq!(parse_duration_ns(&format_duration_spec(ns)), Ok(ns));
        }
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
        assert_eq!(modulo.to_string(), "modulo:20:1ms");
        assert!(Schedule::parse("modulo:0:1ms").is_err());
        assert!(Schedule::parse("sometimes").is_err());
        assert!(Schedule::parse("fixed").is_err());
        assert_eq!(Schedule::parse("none"), Ok(Schedule::None));
        assert_eq!(Schedule::None.to_string(), "none");
    }

    #[test]
    fn plans_refuse_other_versions_and_bad_values() {
        let good = r#"{"protocol":2,"experiment":"sleep","runtime":"thread","units":2,"priority_classes":2,"start_limit_ns":7,"duration_ns":5,"warmup_ns":0,"sleep":{"mode":"absolute","schedule":{"kind":"modulo","m":3,"ns":10}},"busy":{"iters":4,"yield":true},"extra":1}"#;
        let plan = Plan::from_json(good).unwrap();
        assert_eq!(plan.sleep.schedule, Schedule::Modulo { m: 3, ns: 10 });
        assert!(plan.busy.yield_each_step);
        assert_eq!(Plan::from_json(&plan.to_json()).unwrap(), plan);
        let v1 = good.replace("\"protocol\":2", "\"protocol\":1");
        assert!(Plan::from_json(&v1).unwrap_err().0.contains("unsupported protocol version 1"));
        assert_eq!((plan.class_of(1), plan.class_of(2), plan.class_of(3)), (0, 1, 0));
        let three = good.replace("\"priority_classes\":2", "\"priority_classes\":3");
        assert!(Plan::from_json(&three).unwrap_err().0.contains("priority_classes must be 1 or 2"));
        let no_limit = good.replace("\"start_limit_ns\":7,", "");
        assert!(Plan::from_json(&no_limit).unwrap_err().0.contains("start_limit_ns"));
        let none = good.replace("{\"kind\":\"modulo\",\"m\":3,\"ns\":10}", "{\"kind\":\"none\"}");
        assert_eq!(Plan::from_json(&none).unwrap().sleep.schedule, Schedule::None);
        let zero = good.replace("\"units\":2", "\"units\":0");
        assert_eq!(Plan::from_json(&zero).unwrap_err().0, "units must be >= 1");
        assert!(Plan::from_json("nope").unwrap_err().0.contains("not valid JSON"));
        let twice = good.replace("\"units\":2,", "\"units\":2,\"units\":3,");
        assert!(Plan::from_json(&twice).unwrap_err().0.contains("duplicate field"));
        let fraction = good.replace("\"units\":2", "\"units\":2.0");
        assert!(Plan::from_json(&fraction).is_err());
        let long = good.replace("\"duration_ns\":5", "\"duration_ns\":9223372036854775808");
        assert!(Plan::from_json(&long).unwrap_err().0.contains("below 2^63"));
        let huge_sleep = good.replace("\"m\":3,\"ns\":10", "\"m\":3,\"ns\":4611686018427387904");
        assert!(Plan::from_json(&huge_sleep).unwrap_err().0.contains("longest sleep"));
        let absolute_zero = good.replace("\"m\":3,\"ns\":10", "\"m\":3,\"ns\":0");
        assert!(Plan::from_json(&absolute_zero).unwrap_err().0.contains("absolute mode"));
    }
}
