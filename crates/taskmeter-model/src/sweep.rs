//! Parameter sweeps: `--sweep busy=0,1000,1000000`, `--sweep units=1..1000:*10`.
//! Each combination of swept values is a *point*; the first `--sweep` varies slowest.

use super::settings::Settings;
use serde::{Deserialize, Serialize};
use taskmeter_machine::sched::Policy;
use taskmeter_protocol::{format_duration_spec, parse_duration_ns, Schedule};

/// A plan parameter that can be swept, and how its values are written.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Param {
    /// Units per runtime (a count).
    Units,
    /// Busy-work iterations (a count).
    Busy,
    /// The schedule's base sleep D (a duration).
    Sleep,
    /// The modulo schedule's M (a count).
    Modulo,
    /// Measured time (a duration).
    Duration,
    /// Warm-up time (a duration).
    Warmup,
    /// Scheduling policy of the workers (`other`, `fifo:99`, ...).
    Policy,
    /// Timer slack of the workers (ns, or a duration).
    TimerSlack,
    /// The PM QoS CPU latency taskmeter holds (µs; `none`: no request).
    CpuDmaLatency,
}

/// The value of `--sweep cpu-dma-latency=none`: taskmeter holds no request.
pub const NO_LATENCY_REQUEST: u64 = u64::MAX;

pub const PARAMS: [(&str, Param); 9] = [
    ("units", Param::Units),
    ("busy", Param::Busy),
    ("sleep", Param::Sleep),
    ("modulo", Param::Modulo),
    ("duration", Param::Duration),
    ("warmup", Param::Warmup),
    ("policy", Param::Policy),
    ("timer-slack", Param::TimerSlack),
    ("cpu-dma-latency", Param::CpuDmaLatency),
];

/// Policies are swept like numbers: each has a code (other 0, batch 1, idle 2, fifo:P 1000+P,
/// rr:P 2000+P) that only `parse_value` and `format_value` know.
fn policy_code(p: Policy) -> u64 {
    match p {
        Policy::Other => 0,
        Policy::Batch => 1,
        Policy::Idle => 2,
        Policy::Fifo(n) => 1000 + n as u64,
        Policy::Rr(n) => 2000 + n as u64,
    }
}

pub fn policy_of(code: u64) -> Policy {
    match code {
        1 => Policy::Batch,
        2 => Policy::Idle,
        1001..=1099 => Policy::Fifo((code - 1000) as u8),
        2001..=2099 => Policy::Rr((code - 2000) as u8),
        _ => Policy::Other,
    }
}

impl Param {
    pub fn name(self) -> &'static str {
        PARAMS.iter().find(|(_, p)| *p == self).map(|(n, _)| *n).expect("every param is listed")
    }

    pub fn is_duration(self) -> bool {
        matches!(self, Param::Sleep | Param::Duration | Param::Warmup)
    }

    /// Values without an order or a distance: charts place them side by side.
    pub fn is_categorical(self) -> bool {
        matches!(self, Param::Policy | Param::CpuDmaLatency)
    }

    fn parse_value(self, text: &str) -> Result<u64, String> {
        if self == Param::Policy {
            return Policy::parse(text.trim()).map(policy_code);
        }
        if self == Param::TimerSlack {
            return taskmeter_machine::sched::parse_timer_slack(text);
        }
        if self == Param::CpuDmaLatency {
            return match text.trim() {
                "none" => Ok(NO_LATENCY_REQUEST),
                us => parse_latency_us(us).map(u64::from),
            };
        }
        if self.is_duration() {
            return parse_duration_ns(text);
        }
        let t = text.trim();
        let value: f64 = t.parse().map_err(|_| format!("'{t}' is not a number"))?;
        if value < 0.0 || value.fract() != 0.0 || value >= u64::MAX as f64 {
            return Err(format!("'{t}' is not a whole number >= 0"));
        }
        Ok(value as u64)
    }

    /// A value as a person writes it: `1ms` for durations, `1000000` for counts.
    pub fn format_value(self, value: u64) -> String {
        match self {
            Param::Policy => policy_of(value).to_string(),
            Param::CpuDmaLatency if value == NO_LATENCY_REQUEST => "none".into(),
            _ if self.is_duration() => format_duration_spec(value),
            _ => value.to_string(),
        }
    }

    /// The title of the axis in charts (a duration's ticks name their unit).
    pub fn axis_label(self) -> &'static str {
        match self {
            Param::Units => "units",
            Param::Busy => "busy-work iterations",
            Param::Sleep => "sleep",
            Param::Modulo => "modulo M",
            Param::Duration => "duration",
            Param::Warmup => "warm-up",
            Param::Policy => "scheduling policy",
            Param::TimerSlack => "timer slack",
            Param::CpuDmaLatency => "cpu_dma_latency held (µs)",
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Sweep {
    pub param: Param,
    pub values: Vec<u64>,
}

/// One combination of swept values.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
pub struct Point {
    pub index: usize,
    /// (parameter, value) for every swept parameter, in `--sweep` order.
    pub values: Vec<(Param, u64)>,
}

impl Point {
    /// "busy=1000 units=5", or "-" when nothing is swept.
    pub fn label(&self) -> String {
        if self.values.is_empty() {
            return "-".into();
        }
        self.values.iter().map(|(p, v)| format!("{}={}", p.name(), p.format_value(*v))).collect::<Vec<_>>().join(" ")
    }

    pub fn value(&self, param: Param) -> Option<u64> {
        self.values.iter().find(|(p, _)| *p == param).map(|(_, v)| *v)
    }
}

impl Sweep {
    /// Parses `NAME=V1,V2,...` or `NAME=A..B:+STEP` / `NAME=A..B:*FACTOR` (`log10` = `*10`,
    /// `log2` = `*2`); the range includes B when a step lands on it.
    pub fn parse(spec: &str) -> Result<Sweep, String> {
        let (name, list) = spec
            .split_once('=')
            .ok_or_else(|| format!("invalid sweep '{spec}': expected NAME=VALUES, e.g. busy=0,1000,1000000"))?;
        let param = PARAMS.iter().find(|(n, _)| *n == name.trim()).map(|(_, p)| *p).ok_or_else(|| {
            let names: Vec<&str> = PARAMS.iter().map(|(n, _)| *n).collect();
            taskmeter_console::names::unknown("sweep parameter", name.trim(), &names)
        })?;
        let at = |e: String| format!("invalid sweep '{spec}': {e}");
        let values = if let Some((range, step)) =
            list.split_once(':').filter(|(r, _)| r.contains("..") && !param.is_categorical())
        {
            let (from, to) = range.split_once("..").expect("checked");
            let (from, to) = (param.parse_value(from).map_err(at)?, param.parse_value(to).map_err(at)?);
            expand_range(from, to, step.trim()).map_err(at)?
        } else {
            list.split(',')
                .filter(|v| !v.trim().is_empty())
                .map(|v| param.parse_value(v).map_err(at))
                .collect::<Result<Vec<_>, _>>()?
        };
        if values.is_empty() {
            return Err(format!("sweep '{spec}' has no values"));
        }
        Ok(Sweep { param, values })
    }
}

const MAX_VALUES: usize = 10_000;

fn expand_range(from: u64, to: u64, step: &str) -> Result<Vec<u64>, String> {
    if from > to {
        return Err(format!("the range starts above its end ({from} > {to})"));
    }
    let mut values = Vec::new();
    let mut v = from;
    if let Some(add) = step.strip_prefix('+') {
        let add: u64 = add.parse().map_err(|_| format!("step '{step}' is not +N"))?;
        if add == 0 {
            return Err("a step of +0 never ends".into());
        }
        while v <= to && values.len() <= MAX_VALUES {
            values.push(v);
            v = v.saturating_add(add);
            if v == u64::MAX {
                break;
            }
        }
    } else {
        let factor: u64 = match step {
            "log10" => 10,
            "log2" => 2,
            s => s
                .strip_prefix('*')
                .and_then(|f| f.parse().ok())
                .ok_or_else(|| format!("step '{s}' is not +N, *N, log10 or log2"))?,
        };
        if factor < 2 {
            return Err("a factor below 2 never grows".into());
        }
        if from == 0 {
            return Err("a geometric range cannot start at 0".into());
        }
        while v <= to && values.len() <= MAX_VALUES {
            values.push(v);
            v = match v.checked_mul(factor) {
                Some(next) => next,
                None => break,
            };
        }
    }
    if values.len() > MAX_VALUES {
        return Err(format!("more than {MAX_VALUES} values"));
    }
    Ok(values)
}

/// Every combination, the first sweep varying slowest.
pub fn points(sweeps: &[Sweep]) -> Vec<Point> {
    let mut combos: Vec<Vec<(Param, u64)>> = vec![vec![]];
    for sweep in sweeps {
        combos = combos
            .into_iter()
            .flat_map(|prefix| {
                sweep.values.iter().map(move |v| {
                    let mut c = prefix.clone();
                    c.push((sweep.param, *v));
                    c
                })
            })
            .collect();
    }
    combos.into_iter().enumerate().map(|(index, values)| Point { index, values }).collect()
}

/// `--cpu-dma-latency`: a PM QoS CPU latency in µs, 0 to 2,000,000,000 (Linux's "no request").
pub fn parse_latency_us(text: &str) -> Result<u32, String> {
    match text.trim().trim_end_matches("us").parse::<u32>() {
        Ok(us) if us <= 2_000_000_000 => Ok(us),
        _ => Err(format!("invalid cpu_dma_latency '{text}': expected microseconds from 0 to 2000000000")),
    }
}

/// The settings of one point: the base settings with the point's values applied.
pub fn apply(base: &Settings, point: &Point) -> Settings {
    let mut s = base.clone();
    for (param, value) in &point.values {
        let v = *value;
        match param {
            Param::Units => s.units = v.min(u32::MAX as u64) as u32,
            Param::Busy => s.busy.iters = v,
            Param::Duration => s.duration_ns = v,
            Param::Warmup => s.warmup_ns = v,
            Param::Sleep => {
                s.sleep.schedule = match s.sleep.schedule {
                    Schedule::Fixed { .. } => Schedule::Fixed { ns: v },
                    Schedule::ByUnit { .. } => Schedule::ByUnit { ns: v },
                    Schedule::Modulo { m, .. } => Schedule::Modulo { m, ns: v },
                    Schedule::None => Schedule::None,
                }
            }
            Param::Modulo => {
                if let Schedule::Modulo { ns, .. } = s.sleep.schedule {
                    s.sleep.schedule = Schedule::Modulo { m: v, ns };
                }
            }
            Param::Policy => s.sched.policy = Some(policy_of(v)),
            Param::TimerSlack => s.sched.timer_slack_ns = Some(v),
            Param::CpuDmaLatency => s.cpu_dma_latency_us = (v != NO_LATENCY_REQUEST).then_some(v as u32),
        }
    }
    s.sleep_spec = s.sleep.schedule.to_string();
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lists_and_ranges() {
        assert_eq!(Sweep::parse("busy=0,1000,1000000").unwrap().values, vec![0, 1000, 1_000_000]);
        assert_eq!(Sweep::parse("busy=0,1e3,1e6").unwrap().values, vec![0, 1000, 1_000_000]);
        assert_eq!(Sweep::parse("units=1..1000:log10").unwrap().values, vec![1, 10, 100, 1000]);
        assert_eq!(Sweep::parse("units=1..20:*2").unwrap().values, vec![1, 2, 4, 8, 16]);
        assert_eq!(Sweep::parse("units=1..10:log2").unwrap().values, vec![1, 2, 4, 8]);
        assert_eq!(Sweep::parse("busy=0..1000:+250").unwrap().values, vec![0, 250, 500, 750, 1000]);
        let sleep = Sweep::parse("sleep=250us,1ms").unwrap();
        assert_eq!((sleep.param, sleep.values), (Param::Sleep, vec![250_000, 1_000_000]));
        assert_eq!(Sweep::parse("sleep=100us..10ms:*10").unwrap().values, vec![100_000, 1_000_000, 10_000_000]);
        let policies = Sweep::parse("policy=other,fifo:99,rr:99,batch,idle").unwrap();
        let names: Vec<String> = policies.values.iter().map(|v| Param::Policy.format_value(*v)).collect();
        assert_eq!(names, ["other", "fifo:99", "rr:99", "batch", "idle"]);
        assert!(Sweep::parse("policy=other,deadline").unwrap_err().contains("unknown policy"));
        assert_eq!(Sweep::parse("timer-slack=1,50us").unwrap().values, vec![1, 50_000]);
    }

    #[test]
    fn bad_sweeps_say_why() {
        assert!(Sweep::parse("busy=").unwrap_err().contains("has no values"));
        assert!(Sweep::parse("busy=,").unwrap_err().contains("has no values"));
        assert!(Sweep::parse("colour=1,2").unwrap_err().contains("unknown sweep parameter 'colour'"));
        assert!(Sweep::parse("busy").unwrap_err().contains("expected NAME=VALUES"));
        assert!(Sweep::parse("busy=1.5").unwrap_err().contains("whole number"));
        assert!(Sweep::parse("busy=-1").unwrap_err().contains("whole number"));
        assert!(Sweep::parse("units=10..1:log10").unwrap_err().contains("starts above"));
        assert!(Sweep::parse("units=0..10:log10").unwrap_err().contains("cannot start at 0"));
        assert!(Sweep::parse("units=1..10:+0").unwrap_err().contains("never ends"));
        assert!(Sweep::parse("units=1..10:*1").unwrap_err().contains("never grows"));
        assert!(Sweep::parse("units=1..10:sideways").is_err());
        assert!(Sweep::parse("sleep=1ms,fast").is_err());
        assert!(Sweep::parse("busy=0..100000000:+1").unwrap_err().contains("more than"));
    }

    #[test]
    fn points_are_the_cartesian_product_first_sweep_slowest() {
        let sweeps = [Sweep::parse("busy=0,1000").unwrap(), Sweep::parse("units=1,2,3").unwrap()];
        let points = points(&sweeps);
        assert_eq!(points.len(), 6);
        assert_eq!(points[0].label(), "busy=0 units=1");
        assert_eq!(points[2].label(), "busy=0 units=3");
        assert_eq!(points[3].label(), "busy=1000 units=1");
        assert_eq!(points[5].index, 5);
        assert_eq!(super::points(&[]), vec![Point { index: 0, values: vec![] }]);
        assert_eq!(super::points(&[]).first().unwrap().label(), "-");
    }
}
