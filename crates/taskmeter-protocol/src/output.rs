//! Worker output lines and the validator every run applies to them.
//! The rules are those of `protocol/README.md`, section "What the orchestrator checks".

use crate::plan::{Experiment, Mode, Plan, PROTOCOL};
use crate::busy::busy_reference;
use serde::{Deserialize, Serialize};

pub const CLOCK: &str = "CLOCK_MONOTONIC";

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Hello {
    pub protocol: u32,
    pub runtime: String,
    pub runtime_version: String,
    pub clock: String,
    pub pid: u32,
    /// How priority classes are applied: a mechanism, optionally `": "` and a detail.
    pub priority: String,
}

/// The mechanisms a worker may name in `hello.priority`.
pub const PRIORITY_MECHANISMS: &[&str] = &["none", "nice", "rt-priority", "embassy", "java"];

impl Hello {
    /// The mechanism word of `priority`.
    pub fn priority_mechanism(&self) -> &str {
        self.priority.split(": ").next().unwrap_or("")
    }
}

/// One unit's samples, columnar: entry `i` of every array belongs to sample `i`.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
#[serde(deny_unknown_fields)]
pub struct UnitSamples {
    /// The line's `type` when read by [`parse_line`]; `Line` writes and consumes it otherwise.
    #[serde(rename = "type", default, skip_serializing)]
    pub tag: Option<UnitTag>,
    pub unit: u32,
    /// Priority class, 0 the highest.
    pub class: u32,
    pub origin_ns: u64,
    /// Iterations of the loop, sampled or not (the schedule `none` records no samples).
    pub iterations: u64,
    /// Iterations that started at or after `measure_start`.
    pub measured_iterations: u64,
    pub expected_ns: Vec<u64>,
    pub start_ns: Vec<u64>,
    pub busy_end_ns: Vec<u64>,
    pub intended_ns: Vec<u64>,
    pub wake_ns: Vec<u64>,
    pub missed: Vec<u64>,
}

impl UnitSamples {
    pub fn len(&self) -> usize {
        self.start_ns.len()
    }

    pub fn is_empty(&self) -> bool {
        self.start_ns.is_empty()
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct Done {
    /// When the worker began creating its units; `run_start_ns` is when the last was parked
    /// at the start gate and the gate opened.
    pub create_start_ns: u64,
    pub run_start_ns: u64,
    pub measure_start_ns: u64,
    pub end_ns: u64,
    pub units: u32,
    pub samples: u64,
    pub missed: u64,
    /// Times a unit's sample storage grew beyond its reserve while it ran (each growth copies it).
    pub storage_grown: u64,
    pub interrupted: bool,
    pub busy_result: String,
    /// Why the units after `units` were not started (a partial start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_error: Option<String>,
    /// The shared counter's final value (`atomic-sum` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub atomic_sum: Option<u64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(deny_unknown_fields)]
pub struct ErrorLine {
    pub message: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "lowercase")]
pub enum Line {
    Hello(Hello),
    Unit(UnitSamples),
    Done(Done),
    Error(ErrorLine),
}

/// Everything a worker reported, checked against its plan.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkerReport {
    pub hello: Hello,
    /// Sorted by unit id.
    pub units: Vec<UnitSamples>,
    pub done: Done,
}

/// Why a worker's output was not accepted.
#[derive(Clone, Debug, PartialEq)]
pub enum OutputError {
    /// The worker refused the plan with an `error` line.
    Refused(String),
    /// The output breaks the protocol.
    Invalid(String),
}

impl std::fmt::Display for OutputError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            OutputError::Refused(m) => write!(f, "worker error: {m}"),
            OutputError::Invalid(m) => write!(f, "protocol violation: {m}"),
        }
    }
}

fn invalid<T>(message: String) -> Result<T, OutputError> {
    Err(OutputError::Invalid(message))
}

/// `type` of a `unit` line read as `UnitSamples` directly (see [`parse_line`]).
#[derive(Deserialize, Clone, Debug, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum UnitTag {
    Unit,
}

/// A unit line is read straight into `UnitSamples`: the internally tagged `Line` would first
/// buffer the whole object (hundreds of megabytes at 100,000 units) to find its tag.
fn parse_line(raw: &str) -> serde_json::Result<Line> {
    if raw.contains("\"unit\"") {
        if let Ok(unit @ UnitSamples { tag: Some(_), .. }) = serde_json::from_str(raw) {
            return Ok(Line::Unit(unit));
        }
    }
    // Any other line, or an invalid unit line: the general parse reads it or says why.
    serde_json::from_str(raw)
}

/// Parses and validates a worker's whole stdout against the plan it was given.
pub fn parse_output(plan: &Plan, stdout: &[u8]) -> Result<WorkerReport, OutputError> {
    let text = std::str::from_utf8(stdout).map_err(|_| OutputError::Invalid("output is not UTF-8".into()))?;
    let mut hello = None;
    let mut done: Option<Done> = None;
    let mut units: Vec<UnitSamples> = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let number = index + 1;
        if raw.trim().is_empty() {
            continue;
        }
        let line = parse_line(raw)
            .map_err(|e| OutputError::Invalid(format!("line {number} does not match the schema: {e}")))?;
        if done.is_some() {
            return invalid(format!("line {number} comes after the done line"));
        }
        match (line, hello.is_some()) {
            (Line::Error(e), _) => return Err(OutputError::Refused(e.message)),
            (Line::Hello(h), false) => hello = Some(h),
            (Line::Hello(_), true) => return invalid(format!("line {number} is a second hello")),
            (_, false) => return invalid(format!("line {number} comes before the hello line")),
            (Line::Unit(u), true) => units.push(u),
            (Line::Done(d), true) => done = Some(d),
        }
    }
    let Some(hello) = hello else { return invalid("the worker printed nothing".into()) };
    let Some(done) = done else { return invalid("the output ends without a done line".into()) };
    check_hello(plan, &hello)?;
    units.sort_by_key(|u| u.unit);
    check_units(plan, &done, &units)?;
    check_done(plan, &done, &units)?;
    Ok(WorkerReport { hello, units, done })
}

fn check_hello(plan: &Plan, hello: &Hello) -> Result<(), OutputError> {
    if hello.protocol != PROTOCOL {
        return invalid(format!("hello says protocol {} (expected {PROTOCOL})", hello.protocol));
    }
    if hello.runtime != plan.runtime {
        return invalid(format!("hello names runtime '{}' but the plan asked for '{}'", hello.runtime, plan.runtime));
    }
    if hello.clock != CLOCK {
        return invalid(format!("hello names clock '{}' (expected {CLOCK})", hello.clock));
    }
    let mechanism = hello.priority_mechanism();
    if !PRIORITY_MECHANISMS.contains(&mechanism) {
        return invalid(format!(
            "hello names priority mechanism '{mechanism}' (expected one of {})",
            PRIORITY_MECHANISMS.join(", ")
        ));
    }
    if plan.priority_classes == 1 && mechanism != "none" {
        return invalid(format!("hello names priority '{}' for a plan of one class", hello.priority));
    }
    Ok(())
}

fn check_units(plan: &Plan, done: &Done, units: &[UnitSamples]) -> Result<(), OutputError> {
    if done.units == 0 || done.units > plan.units {
        return invalid(format!("done reports {} units started for a plan of {}", done.units, plan.units));
    }
    let mut next_id = 1;
    for u in units {
        if u.unit == 0 || u.unit > done.units {
            return invalid(format!("unit {} is not in 1..={}", u.unit, done.units));
        }
        if u.unit < next_id {
            return invalid(format!("unit {} appears twice", u.unit));
        }
        if u.unit > next_id {
            return invalid(format!("unit {next_id} is missing"));
        }
        next_id += 1;
    }
    if next_id <= done.units {
        return invalid(format!("unit {next_id} is missing"));
    }
    for u in units {
        check_unit(plan, done, u).map_err(|m| OutputError::Invalid(format!("unit {}: {m}", u.unit)))?;
    }
    Ok(())
}

fn check_unit(plan: &Plan, done: &Done, u: &UnitSamples) -> Result<(), String> {
    let n = u.start_ns.len();
    let lengths = [u.expected_ns.len(), u.busy_end_ns.len(), u.intended_ns.len(), u.wake_ns.len(), u.missed.len()];
    if lengths.iter().any(|l| *l != n) {
        return Err(format!("arrays of unequal length (start_ns has {n}, others {lengths:?})"));
    }
    if u.class != plan.class_of(u.unit) {
        return Err(format!("class {} but (unit - 1) % {} = {}", u.class, plan.priority_classes, plan.class_of(u.unit)));
    }
    if u.origin_ns < done.run_start_ns {
        return Err(format!("origin_ns {} is before run_start_ns {}", u.origin_ns, done.run_start_ns));
    }
    if !plan.sleep.schedule.sleeps() {
        if n != 0 {
            return Err(format!("{n} samples with the schedule none, which records none"));
        }
        if u.measured_iterations > u.iterations {
            return Err(format!("measured_iterations {} exceeds iterations {}", u.measured_iterations, u.iterations));
        }
        return Ok(());
    }
    if u.iterations != n as u64 {
        return Err(format!("iterations {} but {n} samples", u.iterations));
    }
    let measured = u.start_ns.iter().filter(|s| **s >= done.measure_start_ns).count() as u64;
    if u.measured_iterations != measured {
        return Err(format!("measured_iterations {} but {measured} samples start at or after measure_start", u.measured_iterations));
    }
    let schedule = plan.sleep.schedule;
    let mut k: u64 = 0;
    let mut next = u.origin_ns + schedule.expected(u.unit, 0);
    let mut previous_wake = u.origin_ns;
    for i in 0..n {
        let at = |what: String| format!("sample {i}: {what}");
        let (start, busy_end, intended, wake) = (u.start_ns[i], u.busy_end_ns[i], u.intended_ns[i], u.wake_ns[i]);
        if start < previous_wake {
            return Err(at(format!("start_ns {start} is before the previous wake (or origin) {previous_wake}")));
        }
        if !(start <= busy_end && busy_end <= wake) {
            return Err(at(format!("timestamps out of order: start {start}, busy_end {busy_end}, wake {wake}")));
        }
        if start >= done.end_ns {
            return Err(at(format!("started at {start}, at or after the end {}", done.end_ns)));
        }
        if plan.busy.iters == 0 && busy_end != start {
            return Err(at("busy_end_ns differs from start_ns with no busy work".into()));
        }
        let expected = schedule.expected(u.unit, k);
        if u.expected_ns[i] != expected {
            return Err(at(format!("expected_ns {} but the schedule gives {expected}", u.expected_ns[i])));
        }
        k += 1;
        match plan.sleep.mode {
            Mode::Relative => {
                if intended != busy_end + expected {
                    return Err(at(format!("intended_ns {intended} but busy_end + expected = {}", busy_end + expected)));
                }
                if u.missed[i] != 0 {
                    return Err(at("missed periods reported in relative mode".into()));
                }
            }
            Mode::Absolute => {
                if intended != next {
                    return Err(at(format!("intended_ns {intended} but the absolute schedule gives {next}")));
                }
                next += schedule.expected(u.unit, k);
                let mut missed = 0;
                while wake > next {
                    missed += 1;
                    k += 1;
                    next += schedule.expected(u.unit, k);
                }
                if u.missed[i] != missed {
                    return Err(at(format!("missed {} but waking at {wake} skips {missed} periods", u.missed[i])));
                }
            }
        }
        previous_wake = wake;
    }
    Ok(())
}

fn check_done(plan: &Plan, done: &Done, units: &[UnitSamples]) -> Result<(), OutputError> {
    let samples: u64 = units.iter().map(|u| u.len() as u64).sum();
    let missed: u64 = units.iter().flat_map(|u| &u.missed).sum();
    match (&done.start_error, done.units < plan.units) {
        (None, true) => {
            return invalid(format!("done reports {} of {} units started but no start_error", done.units, plan.units))
        }
        (Some(_), false) => return invalid("done has a start_error although every unit started".into()),
        _ => {}
    }
    let iterations: u64 = units.iter().map(|u| u.iterations).sum();
    match (done.atomic_sum, plan.experiment) {
        (Some(sum), Experiment::AtomicSum) if sum != iterations => {
            return invalid(format!("atomic_sum {sum} but the units made {iterations} iterations: increments were lost"))
        }
        (None, Experiment::AtomicSum) => return invalid("done has no atomic_sum in an atomic-sum run".into()),
        (Some(_), Experiment::Sleep) => return invalid("done has an atomic_sum in a sleep run".into()),
        _ => {}
    }
    if done.samples != samples {
        return invalid(format!("done reports {} samples but the unit lines hold {samples}", done.samples));
    }
    if done.missed != missed {
        return invalid(format!("done reports {} missed periods but the unit lines hold {missed}", done.missed));
    }
    if done.create_start_ns > done.run_start_ns {
        return invalid(format!("create_start_ns {} is after run_start_ns {}", done.create_start_ns, done.run_start_ns));
    }
    if done.measure_start_ns != done.run_start_ns + plan.warmup_ns {
        return invalid("measure_start_ns is not run_start_ns + warmup_ns".into());
    }
    if done.end_ns != done.measure_start_ns + plan.duration_ns {
        return invalid("end_ns is not measure_start_ns + duration_ns".into());
    }
    let reference = busy_reference(plan.busy.iters).to_string();
    if done.busy_result != reference {
        return invalid(format!(
            "busy_result {} but busy({}) = {reference}: the busy work is not the protocol's arithmetic",
            done.busy_result, plan.busy.iters
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const VECTORS: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../../protocol/vectors/outputs/");

    fn vector(name: &str) -> (Plan, String) {
        let plan = std::fs::read_to_string(format!("{VECTORS}{name}.plan.json")).unwrap();
        let output = std::fs::read_to_string(format!("{VECTORS}{name}.ndjson")).unwrap();
        (Plan::from_json(&plan).unwrap(), output)
    }

    fn rejection(plan: &Plan, output: &str) -> String {
        match parse_output(plan, output.as_bytes()) {
            Ok(_) => panic!("accepted an invalid output:\n{output}"),
            Err(e) => e.to_string(),
        }
    }

    #[test]
    fn valid_vectors_are_accepted() {
        for name in ["relative", "absolute", "atomic-partial"] {
            let (plan, output) = vector(name);
            let report = parse_output(&plan, output.as_bytes()).unwrap_or_else(|e| panic!("{name}: {e}"));
            assert_eq!(report.units.len(), report.done.units as usize);
            assert_eq!(report.units.iter().map(|u| u.unit).collect::<Vec<_>>(), (1..=report.done.units).collect::<Vec<_>>());
        }
    }

    #[test]
    fn each_single_mutation_is_rejected_with_its_reason() {
        let (plan, output) = vector("absolute");
        let cases: &[(&str, &str, &str)] = &[
            ("\"missed\":[0,2,0]", "\"missed\":[0,1,0]", "skips 2 periods"),
            ("\"intended_ns\":[1100,2100,5100]", "\"intended_ns\":[1100,2100,5000]", "absolute schedule gives 5100"),
            ("\"expected_ns\":[2000,2000]", "\"expected_ns\":[2000,1000]", "schedule gives 2000"),
            ("\"busy_result\":\"138\"", "\"busy_result\":\"137\"", "busy(10) = 138"),
            ("\"samples\":5", "\"samples\":4", "unit lines hold 5"),
            ("\"missed\":2,", "\"missed\":0,", "missed periods but the unit lines hold 2"),
            ("\"runtime\":\"c-thread\"", "\"runtime\":\"thread\"", "plan asked for 'c-thread'"),
            ("\"clock\":\"CLOCK_MONOTONIC\"", "\"clock\":\"CLOCK_REALTIME\"", "CLOCK_REALTIME"),
            ("\"wake_ns\":[2100,4100]", "\"wake_ns\":[2100]", "unequal length"),
            ("\"start_ns\":[96,2100]", "\"start_ns\":[96,2099]", "before the previous wake"),
            ("\"busy_end_ns\":[99,2200]", "\"busy_end_ns\":[99,4200]", "out of order"),
            ("\"pid\":4243,", "\"pid\":4243,\"extra\":1,", "unknown field"),
            ("\"unit\":2,", "\"unit\":1,", "appears twice"),
            ("\"unit\":2,", "\"unit\":3,", "not in 1..=2"),
            ("\"end_ns\":11090", "\"end_ns\":11091", "end_ns is not"),
            ("\"measure_start_ns\":1090", "\"measure_start_ns\":1091", "measure_start_ns is not"),
            ("\"create_start_ns\":60", "\"create_start_ns\":91", "create_start_ns 91 is after run_start_ns 90"),
            (",\"storage_grown\":1", "", "missing field `storage_grown`"),
        ];
        for (from, to, reason) in cases {
            assert!(output.contains(from), "the vector holds {from}");
            let message = rejection(&plan, &output.replacen(from, to, 1));
            assert!(message.contains(reason), "{from} -> {to}: got '{message}', wanted '{reason}'");
        }
        let lines: Vec<&str> = output.lines().collect();
        assert!(rejection(&plan, &lines[..3].join("\n")).contains("without a done line"));
        assert!(rejection(&plan, &[lines[1], lines[0], lines[2], lines[3]].join("\n")).contains("before the hello"));
        assert!(rejection(&plan, &format!("{output}{}\n", lines[1])).contains("after the done line"));
        assert!(rejection(&plan, &[lines[0], lines[1], lines[3]].join("\n")).contains("unit 1 is missing"));
        assert!(rejection(&plan, "").contains("printed nothing"));
        assert!(rejection(&plan, "not json\n").contains("does not match the schema"));
        let refused = parse_output(&plan, b"{\"type\":\"error\",\"message\":\"units must be >= 1\"}\n");
        assert_eq!(refused, Err(OutputError::Refused("units must be >= 1".into())));
    }

    #[test]
    fn partial_atomic_sum_runs_are_checked_field_by_field() {
        let (plan, output) = vector("atomic-partial");
        let report = parse_output(&plan, output.as_bytes()).unwrap();
        assert_eq!(report.done.units, 2);
        assert_eq!(report.done.atomic_sum, Some(9));
        let cases: &[(&str, &str, &str)] = &[
            ("\"atomic_sum\":9", "\"atomic_sum\":8", "increments were lost"),
            ("\"class\":1,", "\"class\":0,", "class 0 but (unit - 1) % 2 = 1"),
            ("\"iterations\":4,\"measured_iterations\":2", "\"iterations\":4,\"measured_iterations\":5", "exceeds iterations"),
            (",\"start_error\":\"could not start unit 3: resource temporarily unavailable\"", "", "no start_error"),
            ("\"units\":2,\"samples\"", "\"units\":3,\"samples\"", "unit 3 is missing"),
            ("\"priority\":\"none: goroutines have no priority\"", "\"priority\":\"magic\"", "priority mechanism 'magic'"),
            ("\"expected_ns\":[],\"start_ns\":[],\"busy_end_ns\":[],\"intended_ns\":[],\"wake_ns\":[],\"missed\":[]", "\"expected_ns\":[0],\"start_ns\":[120],\"busy_end_ns\":[120],\"intended_ns\":[120],\"wake_ns\":[120],\"missed\":[0]", "samples with the schedule none"),
        ];
        for (from, to, reason) in cases {
            assert!(output.contains(from), "the vector holds {from}");
            let message = rejection(&plan, &output.replacen(from, to, 1));
            assert!(message.contains(reason), "{from} -> {to}: got '{message}', wanted '{reason}'");
        }
        let without_sum = output.replace(",\"atomic_sum\":9", "");
        assert!(rejection(&plan, &without_sum).contains("no atomic_sum"));
        let (sleep_plan, sleep_output) = vector("relative");
        let with_sum = sleep_output.replace("\"busy_result\":\"0\"", "\"busy_result\":\"0\",\"atomic_sum\":3");
        assert!(rejection(&sleep_plan, &with_sum).contains("atomic_sum in a sleep run"));
        let mislabelled = sleep_output.replace("\"iterations\":3,\"measured_iterations\":3", "\"iterations\":3,\"measured_iterations\":2");
        assert!(rejection(&sleep_plan, &mislabelled).contains("3 samples start at or after measure_start"));
        let classed = sleep_output.replace("\"priority\":\"none\"", "\"priority\":\"nice: high 0, low 10\"");
        assert!(rejection(&sleep_plan, &classed).contains("for a plan of one class"));
    }

    #[test]
    fn interrupted_runs_may_have_empty_units() {
        let (plan, output) = vector("relative");
        let empty = output
            .replace("[1000,1000,1000]", "[]")
            .replace("[120,1160,2210]", "[]")
            .replace("[1120,2160,3210]", "[]")
            .replace("[1150,2200,3300]", "[]")
            .replace("[0,0,0]", "[]")
            .replace("\"iterations\":3,\"measured_iterations\":3", "\"iterations\":0,\"measured_iterations\":0")
            .replace("\"samples\":3", "\"samples\":0");
        // A unit may start too late, or get no CPU before the end: it is counted, not refused.
        assert!(parse_output(&plan, empty.as_bytes()).is_ok());
        let interrupted = empty.replace("\"interrupted\":false", "\"interrupted\":true");
        assert!(parse_output(&plan, interrupted.as_bytes()).is_ok());
    }
}
