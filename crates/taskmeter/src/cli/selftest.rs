//! `taskmeter selftest`: what the harness itself costs per sample in each in-process runtime.
//!
//! For each runtime, one unit runs the real work loop, with no busy work, on the runtime's
//! executor, with the sleep call removed: its time per sample is the loop's own overhead beyond
//! the sleep call (clock reads, bookkeeping, putting the sample in its ring, taken by a writer
//! as in a real run), compared with the cost of a bare pair of clock reads. For information,
//! the same loop with the runtime's real zero-length sleep shows what that call costs (tokio
//! rounds it up to its 1 ms tick). Measured in this process, on purpose: it benchmarks the
//! harness code, not a runtime under comparison.

use super::CliError;
use serde::Serialize;
use taskmeter_clock::now_ns;
use taskmeter_measure::runtimes;
use taskmeter_protocol::{BusyPlan, Experiment, Mode, Plan, Room, Schedule, SleepPlan, PROTOCOL};
use taskmeter_stats::median_f64 as median;

use std::hint::black_box;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use taskmeter_worker::workload::LoopContext;

static NEVER: AtomicBool = AtomicBool::new(false);

/// The target: the loop's overhead is at most this many times two clock reads.
pub const TARGET_RATIO: f64 = 2.0;

/// A figure measured `repeat` times: its median and range.
#[derive(Serialize)]
struct Spread {
    median: f64,
    min: f64,
    max: f64,
}

impl Spread {
    fn of(values: &[f64]) -> Spread {
        Spread { median: median(values), min: min(values), max: max(values) }
    }
}

/// One runtime's loop.
#[derive(Serialize)]
struct RuntimeCost {
    runtime: &'static str,
    /// The loop's cost per sample beyond the sleep call, ns.
    loop_overhead_ns: Spread,
    /// That cost over two clock reads.
    ratio: Spread,
    /// The loop with the runtime's real zero-length sleep, ns per sample.
    with_zero_sleep_ns: Spread,
}

/// What `selftest --format json` prints (schema `taskmeter.selftest`).
#[derive(Serialize)]
struct SelfTest {
    schema: &'static str,
    duration_ns: u64,
    repeat: u32,
    /// Two `clock_gettime(CLOCK_MONOTONIC)` calls, ns.
    clock_pair_ns: Spread,
    runtimes: Vec<RuntimeCost>,
    target_ratio: f64,
    target_met: bool,
}

/// A duration of 0 is the user's error; a loop that cannot be measured is not
/// ([`CliError::Failed`]).
pub fn run(duration_ns: u64, repeat: u32, json: bool) -> Result<ExitCode, CliError> {
    if duration_ns == 0 {
        return Err(CliError::Usage("--duration must be longer than 0".into()));
    }
    let measured = measure(duration_ns, repeat).map_err(CliError::Failed)?;
    if json {
        taskmeter_console::outln!("{}", serde_json::to_string_pretty(&measured).expect("plain numbers and strings"));
    } else {
        print_table(&measured);
    }
    Ok(ExitCode::SUCCESS)
}

fn measure(duration_ns: u64, repeat: u32) -> Result<SelfTest, String> {
    let pairs: Vec<f64> = (0..repeat).map(|_| clock_pair_ns(duration_ns)).collect();
    let mut runtimes = Vec::new();
    for info in runtimes::all().iter().filter(|r| r.launch.in_process()) {
        let (mut overheads, mut ratios, mut with_sleep) = (Vec::new(), Vec::new(), Vec::new());
        for pair in &pairs {
            let overhead = loop_ns_per_sample(info.id, duration_ns, false)?;
            ratios.push(overhead / pair);
            overheads.push(overhead);
            with_sleep.push(loop_ns_per_sample(info.id, duration_ns, true)?);
        }
        runtimes.push(RuntimeCost {
            runtime: info.id,
            loop_overhead_ns: Spread::of(&overheads),
            ratio: Spread::of(&ratios),
            with_zero_sleep_ns: Spread::of(&with_sleep),
        });
    }
    let target_met = runtimes.iter().all(|r| r.ratio.median <= TARGET_RATIO);
    Ok(SelfTest {
        schema: "taskmeter.selftest",
        duration_ns,
        repeat,
        clock_pair_ns: Spread::of(&pairs),
        runtimes,
        target_ratio: TARGET_RATIO,
        target_met,
    })
}

fn print_table(m: &SelfTest) {
    taskmeter_console::textln!(
        "taskmeter selftest: the work loop's cost per sample beyond the sleep call (1 unit, no busy work); median of {} runs of {}",
        m.repeat,
        crate::report::format::format_ns(m.duration_ns as f64)
    );
    let pair = &m.clock_pair_ns;
    taskmeter_console::textln!(
        "two clock reads (clock_gettime CLOCK_MONOTONIC): {:.1} ns (range {:.1}..{:.1})",
        pair.median,
        pair.min,
        pair.max
    );
    taskmeter_console::textln!();
    taskmeter_console::textln!(
        "{:<10} {:>16} {:>26} {:>18}",
        "runtime",
        "loop overhead",
        "overhead / 2 clock reads",
        "with a zero sleep"
    );
    for r in &m.runtimes {
        taskmeter_console::textln!(
            "{:<10} {:>13.1} ns {:>14.2} ({:.2}..{:.2}) {:>18}",
            r.runtime,
            r.loop_overhead_ns.median,
            r.ratio.median,
            r.ratio.min,
            r.ratio.max,
            crate::report::format::format_ns(r.with_zero_sleep_ns.median)
        );
    }
    taskmeter_console::textln!();
    taskmeter_console::textln!(
        "target: loop overhead <= {TARGET_RATIO:.1} x two clock reads: {}",
        if m.target_met { "met by every runtime" } else { "NOT met by every runtime" }
    );
}

fn clock_pair_ns(duration_ns: u64) -> f64 {
    let n = 1_000_000u64;
    let deadline = now_ns() + duration_ns;
    let mut best = f64::INFINITY;
    while now_ns() < deadline {
        let t0 = now_ns();
        for _ in 0..n / 10 {
            black_box(now_ns());
            black_box(now_ns());
        }
        best = best.min((now_ns() - t0) as f64 / (n / 10) as f64);
    }
    best
}

/// The longest window [`loop_ns_per_sample`] widens to.
const LONGEST_WINDOW_NS: u64 = 1_000_000_000;

/// Time per sample of one unit's loop, with the runtime's zero sleep or with no sleep call,
/// its samples stored in its ring and taken by a writer as in a real run (only not written). A
/// unit that recorded nothing in its window (on a loaded machine, 20 ms can pass before its
/// thread runs: `selftest --duration 20ms` failed so, now and then, beside two builds) gets the
/// window doubled, up to a second, before that is an error.
fn loop_ns_per_sample(runtime: &str, duration_ns: u64, sleeping: bool) -> Result<f64, String> {
    let mut window = duration_ns;
    loop {
        if let Some(ns) = one_window(runtime, window, sleeping)? {
            return Ok(ns);
        }
        if window >= LONGEST_WINDOW_NS {
            let how = if sleeping { "with its zero sleep" } else { "without a sleep call" };
            return Err(format!("{runtime}: the loop recorded no sample in 1 s, {how}"));
        }
        window = (window * 2).min(LONGEST_WINDOW_NS);
    }
}

/// [`loop_ns_per_sample`] in one window of `duration_ns`; None when no sample was recorded.
fn one_window(runtime: &str, duration_ns: u64, sleeping: bool) -> Result<Option<f64>, String> {
    let plan = Plan {
        protocol: PROTOCOL,
        experiment: Experiment::Sleep,
        runtime: runtime.into(),
        units: 1,
        priority_classes: 1,
        start_limit_ns: u64::MAX >> 1,
        duration_ns,
        warmup_ns: 0,
        sleep: SleepPlan { mode: Mode::Relative, schedule: Schedule::Fixed { ns: 0 } },
        busy: BusyPlan { iters: 0, yield_each_step: false },
        // Tens of millions of samples a second: a large ring, taken often.
        ring: 1 << 18,
        flush_ns: 1_000_000,
        // In process, with one unit: no limit to keep below.
        room: Room::default(),
        grain: None,
        wait: taskmeter_protocol::plan::DEFAULT_WAIT.to_string(),
    };
    let discard: taskmeter_worker::workload::SampleSink = Box::new(|bytes| {
        black_box(bytes);
        Ok(())
    });
    let ctx: &'static LoopContext = Box::leak(Box::new(LoopContext::new(plan, now_ns(), &NEVER, discard)));
    let (units_ended, ended) = std::sync::mpsc::channel::<()>();
    let writer = std::thread::spawn(move || taskmeter_worker::worker::pump(ctx, ended, |_| Ok(())));
    let served =
        taskmeter_worker::runtime::find(runtime).ok_or_else(|| format!("{runtime} does not run in process"))?;
    let runs = (served.run)(ctx, sleeping);
    ctx.gate.abandon();
    drop(units_ended);
    let _ = writer.join();
    let run = runs.map_err(|e| e.to_string())?.outputs.into_iter().next().ok_or("no unit ran")?;
    if run.end.iterations == 0 {
        return Ok(None);
    }
    Ok(Some((run.last_wake_ns - run.end.origin_ns) as f64 / run.end.iterations as f64))
}

fn min(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::INFINITY, f64::min)
}

fn max(values: &[f64]) -> f64 {
    values.iter().copied().fold(f64::NEG_INFINITY, f64::max)
}
