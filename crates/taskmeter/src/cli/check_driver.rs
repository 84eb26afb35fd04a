//! `taskmeter check-driver RUNTIME`: runs a runtime's worker on the protocol vectors and checks
//! every frame it sends, then how it starts, stops, streams, loses and refuses (protocol/README.md,
//! "What the orchestrator checks"). The vectors are compiled in, so an installed binary can
//! check too.

use crate::process::worker::{self, classify, Outcome, SampleSink, StopPolicy};
use crate::runtimes;
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use taskmeter_protocol::vectors::PLANS;
use taskmeter_protocol::{Delivered, Ending, Plan};

const GRACE: Duration = Duration::from_secs(10);
const NO_ITERATION: &str = "made no iteration in a plan every unit has time for";

pub fn check_driver(id: &str) -> Result<ExitCode, String> {
    let info = runtimes::find(id).ok_or_else(|| format!("unknown runtime '{id}' (known: {})", runtimes::ids().join(", ")))?;
    if let Err(reason) = runtimes::availability(info) {
        println!("FAIL {id} is unavailable: {reason}");
        return Ok(ExitCode::FAILURE);
    }
    let mut failures = 0;
    let mut total = 0;
    let mut report = |ok: bool, line: String| {
        println!("{} {line}", if ok { "ok  " } else { "FAIL" });
        failures += usize::from(!ok);
        total += 1;
    };
    let vector = |name: &str| -> Plan {
        let text = PLANS.iter().find(|(n, _)| *n == name).expect("a vector plan").1;
        Plan::from_json(&text.replace("RUNTIME", id)).expect("the vector plans are valid")
    };
    for (name, _) in PLANS {
        let mut plan = vector(name);
        let mut run = run_plan(info, &plan, None);
        if !run.0 && run.1.contains(NO_ITERATION) {
            // A loaded machine may keep a unit off the CPU for a whole short plan: ten times
            // as long tells that from a unit that never runs.
            plan.duration_ns *= 10;
            run = run_plan(info, &plan, None);
            run.1 = format!("{} (run again 10 times as long)", run.1);
        }
        report(run.0, format!("{name}: {}", run.1));
    }
    // The granularity experiment stops after the round it is in.
    let mut plan = vector("granularity-stencil");
    plan.duration_ns = 30_000_000_000;
    let (ok, line) = run_plan(info, &plan, Some(Duration::from_millis(300)));
    report(ok, format!("stops a granularity plan early when stdin closes: {line}"));
    // Stopping early: end of file on stdin ends a long plan within about one iteration.
    let mut plan = vector("relative-fixed");
    plan.duration_ns = 30_000_000_000;
    let (ok, line) = run_plan(info, &plan, Some(Duration::from_millis(300)));
    report(ok, format!("stops early when stdin closes: {line}"));
    // A start limit already passed: unit 1 starts, no other does, and the worker says why.
    let mut plan = vector("relative-fixed");
    (plan.units, plan.start_limit_ns, plan.priority_classes) = (40, 1, 2);
    let (ok, line) = run_plan(info, &plan, None);
    report(ok, format!("starts one unit when the start limit has passed: {line}"));
    // Samples stream while the worker measures.
    let mut plan = vector("relative-fixed");
    (plan.duration_ns, plan.flush_ns) = (3_000_000_000, 100_000_000);
    let (ok, line) = run_plan(info, &plan, None);
    report(ok, format!("sends samples while it measures: {line}"));
    for (name, input) in [
        ("a plan of protocol 2", vector("relative-fixed").to_json().replacen("\"protocol\":3", "\"protocol\":2", 1)),
        ("a runtime it does not serve", vector("relative-fixed").to_json().replacen(&format!("\"runtime\":\"{id}\""), "\"runtime\":\"no-such-runtime\"", 1)),
    ] {
        let (ok, line) = refuse(info, &vector("relative-fixed"), &input);
        report(ok, format!("refuses {name}: {line}"));
    }
    println!("{id}: {} of {total} checks passed", total - failures);
    Ok(if failures == 0 { ExitCode::SUCCESS } else { ExitCode::FAILURE })
}

/// Samples and missed periods, counted as they arrive.
#[derive(Default)]
struct Tally {
    samples: u64,
    missed: u64,
}

fn run_plan(info: &runtimes::RuntimeInfo, plan: &Plan, stop_after: Option<Duration>) -> (bool, String) {
    let command = match runtimes::worker_command(info) {
        Ok(command) => command,
        Err(reason) => return (false, reason),
    };
    let limit = worker::deadline(plan, GRACE);
    let stop = StopPolicy { after: stop_after, grace: Duration::from_secs(5) };
    let tally = Arc::new(Mutex::new(Tally::default()));
    let counted = tally.clone();
    let sink: SampleSink = Box::new(move |views| {
        let mut t = counted.lock().unwrap_or_else(|e| e.into_inner());
        t.samples += views.len() as u64;
        t.missed += views.iter().map(|v| v.sample.missed).sum::<u64>();
    });
    let raw = match worker::spawn_and_wait(command, plan, &plan.to_json(), &Default::default(), limit, stop, sink, || {}) {
        Ok(raw) => raw,
        Err(failure) => return (false, failure.to_string()),
    };
    let wall = raw.wall_ns as f64 / 1e9;
    let tally = tally.lock().unwrap_or_else(|e| e.into_inner());
    match (classify(&raw, limit), stop_after) {
        (Outcome::Completed(d), None) => judge(plan, &d, &tally, raw.stream.first_samples_ns),
        (Outcome::Interrupted(d), Some(_)) if plan.grain.is_some() => (true, format!("stopped after {wall:.2} s with {} of {} grains", d.points.len(), plan.grain.as_ref().map_or(0, |g| g.grains_ns.len()))),
        (Outcome::Interrupted(_), Some(_)) => (true, format!("stopped after {wall:.2} s with {} samples", tally.samples)),
        (Outcome::Completed(_), Some(_)) => (false, "ran to its end although stdin was closed".into()),
        (Outcome::Interrupted(_), None) => (false, "reported interrupted although stdin stayed open".into()),
        (Outcome::Cut(_, why), _) => (false, format!("the stream was cut: {why}")),
        (Outcome::Failed(failure), _) => (false, failure.to_string()),
    }
}

/// What a complete run must show beyond the frames' own rules.
fn judge(plan: &Plan, d: &Delivered, tally: &Tally, first_samples_ns: Option<u64>) -> (bool, String) {
    if plan.grain.is_some() {
        // The checker has held every P frame to its plan; say what each grain found.
        let efficiency = |p: &taskmeter_protocol::Point| crate::analysis::granularity::derive(p.clone()).efficiency;
        let grains: Vec<String> = d.points.iter().map(|p| format!("{} ns: {} tasks, {:.0} %", p.grain_ns, p.tasks, 100.0 * efficiency(p))).collect();
        return (true, format!("{} grains on {} cores ({})", d.points.len(), d.points.first().map_or(0, |p| p.cores), grains.join("; ")));
    }
    let iterations: u64 = d.units.iter().map(|u| u.iterations).sum();
    let summary = format!(
        "{} units, {iterations} iterations, {} samples, {} lost, {} missed periods{}",
        d.units.len(),
        tally.samples,
        d.lost(),
        tally.missed,
        d.done.as_ref().and_then(|d| d.atomic_sum).map(|s| format!(", atomic_sum {s}")).unwrap_or_default()
    );
    if plan.start_limit_ns == 1 {
        return match &d.gate.start_error {
            Some(e) if d.gate.units == 1 => (true, format!("1 of {} units, start_error \"{e}\"", plan.units)),
            _ => (false, format!("started {} units (expected exactly 1, with a start_error)", d.gate.units)),
        };
    }
    // Sleeping units leave each other time; with the schedule none a cooperative scheduler
    // may let one unit starve another (embassy's priority queue does), which is a result.
    if let Some(idle) = d.units.iter().find(|u| u.iterations == 0).filter(|_| plan.sleep.schedule.sleeps()) {
        return (false, format!("unit {} {NO_ITERATION}", idle.unit));
    }
    if plan.flush_ns > plan.warmup_ns + plan.duration_ns {
        // The writer never woke before the units ended: each ring kept its first `ring` samples.
        if let Some(u) = d.units.iter().find(|u| u.iterations - u.lost != u.iterations.min(plan.ring as u64)) {
            return (false, format!("unit {} kept {} of {} samples in a ring of {}", u.unit, u.iterations - u.lost, u.iterations, plan.ring));
        }
        if d.lost() == 0 {
            return (false, format!("no sample lost in rings of {} although no flush came before the end ({summary})", plan.ring));
        }
    }
    if plan.duration_ns >= 3_000_000_000 {
        // The first S frame within the first two seconds of a three-second plan.
        let bound = d.window.run_start_ns + 2_000_000_000;
        match first_samples_ns {
            Some(at) if at < bound => {
                let after = at.saturating_sub(d.window.run_start_ns) as f64 / 1e6;
                return (true, format!("first samples {after:.0} ms after the gate opened; {summary}"));
            }
            _ => return (false, format!("no samples in the first two seconds of a three-second plan ({summary})")),
        }
    }
    (true, summary)
}

/// A plan the worker must refuse with an `E` frame and exit status 2.
fn refuse(info: &runtimes::RuntimeInfo, plan: &Plan, input: &str) -> (bool, String) {
    let command = match runtimes::worker_command(info) {
        Ok(command) => command,
        Err(reason) => return (false, reason),
    };
    let stop = StopPolicy { after: None, grace: GRACE };
    let raw = match worker::spawn_and_wait(command, plan, input, &Default::default(), GRACE, stop, Box::new(|_| {}), || {}) {
        Ok(raw) => raw,
        Err(failure) => return (false, failure.to_string()),
    };
    if raw.timed_out {
        return (false, "hung instead of refusing the plan".into());
    }
    let exit = raw.status.as_ref().ok().and_then(|s| s.code());
    match (&raw.stream.ending, exit) {
        (Ok(Ending::Refused(message)), Some(2)) => (true, message.clone()),
        (Ok(Ending::Refused(_)), code) => (false, format!("sent an E frame but exited with {code:?} (expected 2)")),
        (_, code) => (false, format!("no E frame (exit status {code:?})")),
    }
}
