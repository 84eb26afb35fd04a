//! `taskmeter check-driver RUNTIME`: runs a runtime's worker on the protocol vectors and checks
//! everything it prints. The vectors are compiled in, so an installed binary can check too.

use crate::process::worker::{self, classify, Outcome, StopPolicy};
use taskmeter_protocol::vectors::{INVALID_PLANS, PLANS};
use taskmeter_protocol::Plan;
use taskmeter_protocol::{parse_output, OutputError};
use crate::runtimes;
use std::process::ExitCode;
use std::time::Duration;

const GRACE: Duration = Duration::from_secs(10);
const NO_ITERATION: &str = "made no iteration in a plan every unit has time for";

pub fn check_driver(id: &str) -> Result<ExitCode, String> {
    let info = runtimes::find(id)
        .ok_or_else(|| format!("unknown runtime '{id}' (known: {})", runtimes::ids().join(", ")))?;
    if let Err(reason) = runtimes::availability(info) {
        println!("FAIL {id} is unavailable: {reason}");
        return Ok(ExitCode::FAILURE);
    }
    let mut failures = 0;
    let mut report = |ok: bool, line: String| {
        println!("{} {line}", if ok { "ok  " } else { "FAIL" });
        failures += usize::from(!ok);
    };
    for (name, text) in PLANS {
        let mut plan = Plan::from_json(&text.replace("RUNTIME", id)).expect("the vector plans are valid");
        let (mut ok, mut line) = run_plan(info, &plan, None);
        if !ok && line.contains(NO_ITERATION) {
            // A loaded machine may keep a unit off the CPU for a whole short plan: ten times
            // as long tells that from a unit that never runs.
            plan.duration_ns *= 10;
            (ok, line) = run_plan(info, &plan, None);
            line = format!("{line} (run again 10 times as long)");
        }
        report(ok, format!("{name}: {line}"));
    }
    // Stopping early: end of file on stdin ends a long plan within about one iteration.
    let (_, long) = PLANS[0];
    let mut plan = Plan::from_json(&long.replace("RUNTIME", id)).expect("valid");
    plan.duration_ns = 30_000_000_000;
    let (ok, line) = run_plan(info, &plan, Some(Duration::from_millis(300)));
    report(ok, format!("stops early when stdin closes: {line}"));
    // A start limit already passed: unit 1 starts, no other does, and the worker says why.
    let mut plan = Plan::from_json(&long.replace("RUNTIME", id)).expect("valid");
    (plan.units, plan.start_limit_ns, plan.priority_classes) = (40, 1, 2);
    let (ok, line) = run_plan(info, &plan, None);
    report(ok, format!("starts one unit when the start limit has passed: {line}"));
    for (name, text) in INVALID_PLANS {
        let input = if *name == "unknown-runtime" { text.to_string() } else { text.replace("RUNTIME", id) };
        let (ok, line) = refuse(info, &input);
        report(ok, format!("refuses {name}: {line}"));
    }
    let total = PLANS.len() + 2 + INVALID_PLANS.len();
    println!("{id}: {} of {total} checks passed", total - failures);
    Ok(if failures == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

fn run_plan(info: &runtimes::RuntimeInfo, plan: &Plan, stop_after: Option<Duration>) -> (bool, String) {
    let command = match runtimes::worker_command(info) {
        Ok(command) => command,
        Err(reason) => return (false, reason),
    };
    let limit = worker::deadline(plan, GRACE);
    let stop = StopPolicy { after: stop_after, grace: Duration::from_secs(5) };
    let raw = match worker::spawn_and_wait(command, &plan.to_json(), &Default::default(), limit, stop, || {}) {
        Ok(raw) => raw,
        Err(failure) => return (false, failure.to_string()),
    };
    let wall = raw.wall_ns as f64 / 1e9;
    match (classify(plan, &raw, limit), stop_after) {
        (Outcome::Completed(r), None) if plan.start_limit_ns == 1 => match (&r.done.start_error, r.done.units) {
            (Some(e), 1) => (true, format!("1 of {} units, start_error \"{e}\"", plan.units)),
            (_, units) => (false, format!("started {units} units (expected exactly 1, with a start_error)")),
        },
        // Sleeping units leave each other time; with the schedule none a cooperative scheduler
        // may let one unit starve another (embassy's priority queue does), which is a result.
        (Outcome::Completed(r), None) if plan.sleep.schedule.sleeps() && r.units.iter().any(|u| u.iterations == 0) => {
            let idle = r.units.iter().find(|u| u.iterations == 0).map_or(0, |u| u.unit);
            (false, format!("unit {idle} {NO_ITERATION}"))
        }
        (Outcome::Completed(r), None) => (true, format!(
            "{} units, {} iterations, {} samples, {} missed periods{}",
            r.units.len(),
            r.units.iter().map(|u| u.iterations).sum::<u64>(),
            r.done.samples,
            r.done.missed,
            r.done.atomic_sum.map(|s| format!(", atomic_sum {s}")).unwrap_or_default()
        )),
        (Outcome::Interrupted(r), Some(_)) => (true, format!("stopped after {wall:.2} s with {} samples", r.done.samples)),
        (Outcome::Completed(_), Some(_)) => (false, "ran to its end although stdin was closed".into()),
        (Outcome::Interrupted(_), None) => (false, "reported interrupted although stdin stayed open".into()),
        (Outcome::Failed(failure), _) => (false, failure.to_string()),
    }
}

fn refuse(info: &runtimes::RuntimeInfo, input: &str) -> (bool, String) {
    let command = match runtimes::worker_command(info) {
        Ok(command) => command,
        Err(reason) => return (false, reason),
    };
    let stop = StopPolicy { after: None, grace: GRACE };
    let raw = match worker::spawn_and_wait(command, input, &Default::default(), GRACE, stop, || {}) {
        Ok(raw) => raw,
        Err(failure) => return (false, failure.to_string()),
    };
    if raw.timed_out {
        return (false, "hung instead of refusing the plan".into());
    }
    let exit = raw.status.as_ref().ok().and_then(|s| s.code());
    // Any plan parses for this purpose: an error line must come before anything it would check.
    let probe = Plan::from_json(&PLANS[0].1.replace("RUNTIME", info.id)).expect("valid");
    match (parse_output(&probe, &raw.stdout), exit) {
        (Err(OutputError::Refused(message)), Some(code)) if code != 0 => (true, message),
        (Err(OutputError::Refused(_)), code) => (false, format!("printed an error line but exited with {code:?}")),
        (_, code) => (false, format!("no error line (exit status {code:?})")),
    }
}
