//! `taskmeter check-driver RUNTIME`: runs a runtime's worker on the protocol vectors and checks
//! every frame it sends, then how it starts, stops, streams, writes its full rings and refuses (protocol/README.md,
//! "What the orchestrator checks"). The vectors are compiled in, so an installed binary can
//! check too. Every check is bounded ([`HELP`]): a worker that breaks the protocol is
//! stopped at once, one that hangs or stays silent at its deadline, and after a check that hung
//! the others are not run, so an abusive driver gets its verdict within a minute.

use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;
use taskmeter_measure::process::child::Stop;
use taskmeter_measure::process::signals;
use taskmeter_measure::process::worker::{self, classify, Outcome, RawRun, SampleSink, StopPolicy};
use taskmeter_measure::runtimes;
use taskmeter_protocol::plan::DEFAULT_WAIT;
use taskmeter_protocol::vectors::PLANS;
use taskmeter_protocol::{Delivered, Ending, Mode, Plan, SleepPlan, PROTOCOL};

const GRACE: Duration = Duration::from_secs(10);

/// What `check-driver --help` says of its bounds. 35 s is the longest a check can take: a
/// vector plan's deadline (twice its 10 s start limit, at most 3.1 s of plan, [`GRACE`]) and
/// 1.5 s for a pipe held after the worker exits.
pub const HELP: &str = "Every check ends within 35 s. A worker that breaks the protocol (a flood, garbage) is \
stopped at once; one that stays silent or hangs is killed at its deadline, and the checks after it \
are not run (each would wait as long); one that leaves a process holding its stdout or stderr fails \
its check. A runtime, or a recipe, that this host cannot run (its toolchain, an optional package or a \
privilege missing) is skipped with the reason and what would install or grant it. Exit status: 0 when \
every check run passed, 1 otherwise.";

/// A check's verdict; `hung` when the worker had to be killed at its deadline (the checks after
/// it are not run: each would wait as long).
struct Verdict {
    ok: bool,
    line: String,
    hung: bool,
    /// Not run: what it needs is missing here (the line says what and how to get it).
    skipped: bool,
}

impl Verdict {
    fn new(ok: bool, line: String) -> Verdict {
        Verdict { ok, line, hung: false, skipped: false }
    }

    fn skip(why: String) -> Verdict {
        Verdict { ok: true, line: why, hung: false, skipped: true }
    }
}

impl From<(bool, String)> for Verdict {
    fn from((ok, line): (bool, String)) -> Verdict {
        Verdict::new(ok, line)
    }
}
const NO_ITERATION: &str = "made no iteration in a plan every unit has time for";

pub fn check_driver(id: &str) -> Result<ExitCode, String> {
    signals::install();
    let info = runtimes::find(id)
        .ok_or_else(|| taskmeter_console::names::unknown("runtime", &super::shorten(id), &runtimes::ids()))?;
    // A runtime, on its default toolchain or another (`java-thread@17`); its recipes come with it.
    if info.recipe != DEFAULT_WAIT || info.knob.is_some() {
        let at = info.toolchain.map_or(String::new(), |v| format!("@{v}"));
        return Err(format!(
            "check-driver checks a runtime, and every recipe of it: try check-driver {}{at}",
            info.base
        ));
    }
    if let Err(reason) = runtimes::availability(info) {
        // Nothing of it can be checked here, and nothing failed.
        taskmeter_console::textln!("skip {id}: {reason}");
        return Ok(ExitCode::SUCCESS);
    }
    let checks = checks(info);
    Ok(run_checks(id, &checks))
}

/// A check: its name, and what runs it.
type Check = (String, Box<dyn Fn() -> Verdict>);

/// Every check of a runtime, in order: each vector plan, stopping early, the start limit,
/// streaming, each wait recipe, and the refusals.
fn checks(info: &'static runtimes::RuntimeInfo) -> Vec<Check> {
    let runtime = info.base;
    // Sent as written, their room (room_threads, max_map_count, ...) included: the protocol's
    // figures, the same on every machine; sleep-yield and granularity-trivial have every limit
    // unknown (null).
    let vector = |name: &str| -> Plan {
        let text = PLANS.iter().find(|(n, _)| *n == name).expect("a vector plan").1;
        Plan::from_json(&text.replace("RUNTIME", runtime)).expect("the vector plans are valid")
    };
    let mut checks: Vec<Check> = Vec::new();
    for (name, _) in PLANS {
        checks.push((
            name.to_string(),
            Box::new(move || {
                let mut plan = vector(name);
                let mut run = run_plan(info, &plan, None);
                if !run.ok && run.line.contains(NO_ITERATION) {
                    // A loaded machine may keep a unit off the CPU for a whole short plan: ten times
                    // as long tells that from a unit that never runs.
                    plan.duration_ns *= 10;
                    run = run_plan(info, &plan, None);
                    run.line = format!("{} (run again 10 times as long)", run.line);
                }
                run
            }),
        ));
    }
    // The granularity experiment stops after the round it is in.
    checks.push((
        "stops a granularity plan early when stdin closes".into(),
        Box::new(move || {
            let mut plan = vector("granularity-stencil");
            plan.duration_ns = 60_000_000_000;
            run_plan(info, &plan, Some(Duration::from_millis(300)))
        }),
    ));
    // Stopping early: end of file on stdin ends a long plan within about one iteration.
    checks.push((
        "stops early when stdin closes".into(),
        Box::new(move || {
            let mut plan = vector("relative-fixed");
            plan.duration_ns = 60_000_000_000;
            run_plan(info, &plan, Some(Duration::from_millis(300)))
        }),
    ));
    // A start limit already passed: unit 1 starts, no other does, and the worker says why.
    checks.push((
        "starts one unit when the start limit has passed".into(),
        Box::new(move || {
            let mut plan = vector("relative-fixed");
            (plan.units, plan.start_limit_ns, plan.priority_classes) = (40, 1, 2);
            run_plan(info, &plan, None)
        }),
    ));
    // Samples stream while the worker measures.
    checks.push((
        "sends samples while it measures".into(),
        Box::new(move || {
            let mut plan = vector("relative-fixed");
            (plan.duration_ns, plan.flush_ns) = (3_000_000_000, 100_000_000);
            run_plan(info, &plan, None)
        }),
    ));
    // Each wait recipe runs the absolute loop, and its H frame names it (the checker compares).
    // One unit: a spinning unit may keep another off the CPU (Python's GIL, a virtual thread's
    // carrier), which is what a recipe costs, not a fault of the driver.
    for (recipe, _) in &info.recipes {
        checks.push((
            format!("waits with its recipe {recipe}"),
            Box::new(move || {
                let row = runtimes::find(&format!("{}/{recipe}", info.id)).map(runtimes::availability);
                if let Some(Err(why)) = row {
                    return Verdict::skip(why);
                }
                let mut plan = vector("relative-fixed");
                (plan.sleep.mode, plan.wait, plan.units) = (Mode::Absolute, recipe.to_string(), 1);
                run_plan(info, &plan, None)
            }),
        ));
    }
    let refusals = [
        (
            "a plan of the previous protocol",
            vector("relative-fixed").to_json().replacen(
                &format!("\"protocol\":{PROTOCOL}"),
                &format!("\"protocol\":{}", PROTOCOL - 1),
                1,
            ),
        ),
        (
            "a runtime it does not serve",
            vector("relative-fixed").to_json().replacen(
                &format!("\"runtime\":\"{runtime}\""),
                "\"runtime\":\"no-such-runtime\"",
                1,
            ),
        ),
        (
            "a wait recipe it does not have",
            Plan {
                sleep: SleepPlan { mode: Mode::Absolute, ..vector("relative-fixed").sleep },
                ..vector("relative-fixed")
            }
            .to_json()
            .replacen('}', ",\"wait\":\"no-such-recipe\"}", 1),
        ),
    ];
    for (name, input) in refusals {
        checks.push((format!("refuses {name}"), Box::new(move || refuse(info, &vector("relative-fixed"), &input))));
    }
    checks
}

/// Runs the checks in order, a line each, and the total: after a check that hung, or a signal,
/// the rest are not run.
fn run_checks(id: &str, checks: &[Check]) -> ExitCode {
    let total = checks.len();
    let (mut failures, mut skipped) = (0, 0);
    let mut hung: Option<String> = None;
    for (name, check) in checks {
        let verdict = match (signals::reason(), &hung) {
            (Some(reason), _) => Verdict::new(false, format!("not run: {reason}")),
            (None, Some(earlier)) => {
                Verdict::new(false, format!("not run: the worker hung in an earlier check ({earlier})"))
            }
            (None, None) => check(),
        };
        if verdict.hung && hung.is_none() {
            hung = Some(name.clone());
        }
        let mark = match (verdict.skipped, verdict.ok) {
            (true, _) => "skip",
            (false, true) => "ok  ",
            (false, false) => "FAIL",
        };
        taskmeter_console::textln!("{mark} {name}: {}", verdict.line);
        failures += usize::from(!verdict.ok);
        skipped += usize::from(verdict.skipped);
    }
    match skipped {
        0 => taskmeter_console::textln!("{id}: {} of {total} checks passed", total - failures),
        _ => taskmeter_console::textln!(
            "{id}: {} of {} checks passed, {skipped} skipped (what they need is missing here)",
            total - failures - skipped,
            total - skipped
        ),
    }
    match signals::exit_status() {
        Some(status) => ExitCode::from(status),
        None if failures == 0 => ExitCode::SUCCESS,
        None => ExitCode::FAILURE,
    }
}

/// Whether a signal stopped the worker, it had to be killed at its deadline, or it left
/// something holding its pipes: the verdict then says so, whatever its output was.
fn misbehaved(raw: &RawRun) -> Option<Verdict> {
    if let Some(Stop::Signal(signal)) = raw.ended.stopped {
        return Some(Verdict::new(false, format!("interrupted by {}", signals::name(signal))));
    }
    if raw.ended.stopped == Some(Stop::Deadline) {
        let after = raw.ended.limit.as_secs_f64();
        return Some(Verdict {
            ok: false,
            line: format!("hung: did not finish within {after:.1} s and was killed"),
            hung: true,
            skipped: false,
        });
    }
    raw.ended.pipes_held.then(|| {
        Verdict::new(
            false,
            "the worker exited, but a process it started kept its stdout or stderr open (and was killed)".into(),
        )
    })
}

/// Samples and missed periods, counted as they arrive.
#[derive(Default)]
struct Tally {
    samples: u64,
    missed: u64,
}

/// How long a worker asked to stop early may take to end (see `run_plan`).
const STOP_GRACE: Duration = Duration::from_secs(15);

fn run_plan(info: &runtimes::RuntimeInfo, plan: &Plan, stop_after: Option<Duration>) -> Verdict {
    let command = match runtimes::worker_command(info) {
        Ok(command) => command,
        Err(reason) => return Verdict::new(false, reason),
    };
    // A worker asked to stop 300 ms after its start may still be starting: the BEAM has taken
    // over 5 s to boot beside the suite's other lanes. 15 s is a quarter of the stop checks'
    // 60 s plans, so a worker that ends within it stopped early.
    let stop = StopPolicy {
        after: stop_after,
        grace: STOP_GRACE,
        limit: worker::deadline(plan, GRACE),
        backlog_bytes: worker::default_backlog_bytes(&plan.room),
    };
    let tally = Arc::new(Mutex::new(Tally::default()));
    let counted = tally.clone();
    let sink: SampleSink = Box::new(move |views| {
        let mut t = counted.lock().unwrap_or_else(|e| e.into_inner());
        t.samples += views.len() as u64;
        t.missed += views.iter().map(|v| v.sample.missed).sum::<u64>();
    });
    let mut raw = match worker::spawn_and_wait(command, plan, &plan.to_json(), &Default::default(), stop, sink, || {}) {
        Ok(raw) => raw,
        Err(failure) => return Verdict::new(false, failure.to_string()),
    };
    if let Some(verdict) = misbehaved(&raw) {
        return verdict;
    }
    if raw.harness.contains(worker::WRITER_ON_MAIN) {
        let why = "its writer runs on the main thread, whose scheduling taskmeter records as the worker's";
        return Verdict::new(false, why.into());
    }
    let wall = raw.ended.wall.as_secs_f64();
    let tally = tally.lock().unwrap_or_else(|e| e.into_inner());
    Verdict::from(match (classify(&mut raw), stop_after) {
        (Outcome::Completed(d), None) => judge(plan, &d, &tally, raw.stream.first_samples_ns),
        (Outcome::Interrupted(d, _), Some(_)) if plan.grain.is_some() => (
            true,
            format!(
                "stopped after {wall:.2} s with {} of {} grains",
                d.points.len(),
                plan.grain.as_ref().map_or(0, |g| g.grains_ns.len())
            ),
        ),
        (Outcome::Interrupted(..), Some(_)) => {
            (true, format!("stopped after {wall:.2} s with {} samples", tally.samples))
        }
        (Outcome::Completed(_), Some(_)) => (false, "ran to its end although stdin was closed".into()),
        (Outcome::Interrupted(_, why), None) => {
            (false, format!("reported interrupted although stdin stayed open ({why})"))
        }
        (Outcome::Cut(_, why), _) => (false, format!("the stream was cut before its D frame: {why}")),
        // Not the driver's doing, but the check cannot judge what it did not let it finish.
        (Outcome::Bounded(_, why), _) => (false, format!("not judged: {why}")),
        (Outcome::Failed(failure), _) => (false, failure.to_string()),
    })
}

/// What a complete run must show beyond the frames' own rules.
fn judge(plan: &Plan, d: &Delivered, tally: &Tally, first_samples_ns: Option<u64>) -> (bool, String) {
    if plan.grain.is_some() {
        if let Some(p) = d.points.iter().find(|p| p.serial_after_tasks.is_none()) {
            return (false, format!("the P frame of {} ns has no serial_after_tasks and serial_after_ns (protocol, \"Per grain, exactly\", step 5)", p.grain_ns));
        }
        // The checker has held every P frame to its plan; say what each grain found.
        let efficiency = |p: &taskmeter_protocol::Point| taskmeter_analysis::granularity::derive(p.clone()).efficiency;
        let grains: Vec<String> = d
            .points
            .iter()
            .map(|p| format!("{} ns: {} tasks, {:.0} %", p.grain_ns, p.tasks, 100.0 * efficiency(p)))
            .collect();
        return (
            true,
            format!(
                "{} grains on {} cores ({})",
                d.points.len(),
                d.points.first().map_or(0, |p| p.cores),
                grains.join("; ")
            ),
        );
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
        // The writer never woke before the units ended: each unit found its ring full at every
        // `ring + 1`-th sample and wrote the `ring` samples it held itself (an F frame).
        let ring = plan.ring as u64;
        let writes: u64 = d.units.iter().map(|u| u.iterations.saturating_sub(1) / ring).sum();
        if d.lost() > 0 || (d.flushes, d.flushed) != (writes, writes * ring) {
            return (
                false,
                format!(
                    "units with full rings of {ring} and no flush before the end made {} writes of {} samples \
                     themselves (expected {writes} of {}; {summary})",
                    d.flushes,
                    d.flushed,
                    writes * ring
                ),
            );
        }
        return (true, format!("{} own writes of full rings, {} samples; {summary}", d.flushes, d.flushed));
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
fn refuse(info: &runtimes::RuntimeInfo, plan: &Plan, input: &str) -> Verdict {
    let command = match runtimes::worker_command(info) {
        Ok(command) => command,
        Err(reason) => return Verdict::new(false, reason),
    };
    let stop = StopPolicy {
        after: None,
        grace: GRACE,
        limit: GRACE,
        backlog_bytes: worker::default_backlog_bytes(&plan.room),
    };
    let raw = match worker::spawn_and_wait(command, plan, input, &Default::default(), stop, Box::new(|_| {}), || {}) {
        Ok(raw) => raw,
        Err(failure) => return Verdict::new(false, failure.to_string()),
    };
    if let Some(verdict) = misbehaved(&raw) {
        return Verdict { line: format!("{} instead of refusing the plan", verdict.line), ..verdict };
    }
    let exit = raw.ended.status().and_then(|s| s.code());
    Verdict::from(match (&raw.stream.ending, exit) {
        (Ok(Ending::Refused(message)), Some(2)) => (true, message.clone()),
        (Ok(Ending::Refused(_)), code) => (false, format!("sent an E frame but exited with {code:?} (expected 2)")),
        (_, code) => (false, format!("no E frame (exit status {code:?})")),
    })
}
