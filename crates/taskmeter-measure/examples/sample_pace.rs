//! The pace one worker's sample path keeps (issue 58, point 2): a synthetic worker offers samples
//! at a set rate, and taskmeter's own worker supervisor (`run_worker`) takes them as in a run:
//! the real sample file, reader, checker, fold (on a thread of its own once the reader falls
//! 64 MiB behind, where taskmeter may use three CPUs or more) and backlog bound. The worker is
//! this program run again: it speaks the worker protocol with 15 `thread/spin` units that make
//! their samples without sleeping (as `sample_cost`'s producer, waking 20-90 ns late, relative
//! mode) and appends every unit's samples to its sample file every `flush_ns` (10 ms), as a
//! worker's writer does, for 3 s.
//! What it costs is a memory copy a sample, so two cores offer rates no real worker reaches
//! on them (one `thread/spin` unit makes at most about 8 M samples a second here).
//!
//! Per rate: the samples, the rate they came at, the most the sample file held unread (the
//! reader's backlog), how long after the worker's exit the reader had read and folded the rest,
//! and taskmeter's CPU per sample. A rate is kept pace with when the rest is read within a
//! flush period or two of the worker's exit; beyond it, the backlog grows with the run.
//!
//!     cargo run --release -p taskmeter-measure --example sample_pace [RATE_M_PER_S ...]
//!
//! Defaults: 5 10 20 30 40 (millions of samples a second). `DURATION_S=N`: seconds a rate.

use std::io::{BufRead, Write};
use std::os::fd::FromRawFd;
use std::process::Command;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use taskmeter_analysis::accumulate::RowStats;
use taskmeter_machine::sched::SchedSettings;
use taskmeter_measure::process::own_cpu_ns;
use taskmeter_measure::process::worker::{run_worker, Outcome, SampleSink};
use taskmeter_protocol::frames::{put_json, put_samples, put_unit, ChunkHead, SAMPLE_FD};
use taskmeter_protocol::{busy::busy_reference, Done, Plan, UnitEnd};

mod common {
    #[path = "random.rs"]
    pub mod random;
    #[path = "synthetic.rs"]
    #[allow(dead_code)] // what sample_cost alone uses
    pub mod synthetic;
}
use common::random::Random;
use common::synthetic::{opening, plan, Lateness, SyntheticUnit};

/// Set in the environment of this program run as the synthetic worker.
const AS_WORKER: &str = "TASKMETER_SYNTHETIC_WORKER";
const UNITS: u64 = 15;
const FLUSH_NS: u64 = 10_000_000;
/// The mean lateness of `Lateness::Spin`, ns: a unit's period is its sleep and this.
const MEAN_LATE_NS: f64 = 54.5;

fn main() {
    if std::env::var_os(AS_WORKER).is_some() {
        if let Err(e) = synthetic_worker() {
            eprintln!("synthetic worker: {e}");
            std::process::exit(1);
        }
        return;
    }
    let rates: Vec<f64> = match std::env::args().skip(1).map(|a| a.parse::<f64>()).collect::<Result<Vec<_>, _>>() {
        Ok(rates) if rates.iter().all(|r| *r > 0.0) => rates,
        _ => {
            eprintln!("usage: sample_pace [RATE_M_PER_S ...] (positive numbers: millions of samples a second)");
            std::process::exit(2);
        }
    };
    let rates = if rates.is_empty() { vec![5.0, 10.0, 20.0, 30.0, 40.0] } else { rates };
    let duration_s: u64 = std::env::var("DURATION_S").ok().and_then(|d| d.parse().ok()).unwrap_or(3);
    println!(
        "sample pace: a synthetic worker of {UNITS} units appending every {} ms for {duration_s} s, on {} CPUs",
        FLUSH_NS / 1_000_000,
        std::thread::available_parallelism().map_or(1, |n| n.get())
    );
    for rate in rates {
        offer(rate, duration_s);
    }
}

/// Runs the synthetic worker at `rate` million samples a second through `run_worker`, and
/// prints how the reader kept up.
fn offer(rate: f64, duration_s: u64) {
    let sleep_ns = (UNITS as f64 * 1e3 / rate - MEAN_LATE_NS).round().max(1.0) as u64;
    let mut plan = plan(UNITS, 1, false, (sleep_ns, duration_s * 1_000_000_000, FLUSH_NS));
    plan.room = taskmeter_machine::room::now();
    let stats = Arc::new(Mutex::new(RowStats::new(1, 1_000_000, false)));
    let into = stats.clone();
    let sink: SampleSink = Box::new(move |views| into.lock().unwrap_or_else(|e| e.into_inner()).add(views));
    let mut command = Command::new(std::env::current_exe().expect("this program's path"));
    command.env(AS_WORKER, "1");
    let cpu_before = own_cpu_ns();
    let run = run_worker(command, &plan, &SchedSettings::default(), (Duration::from_secs(2), None), sink, || {});
    let taskmeter_ns = own_cpu_ns() - cpu_before;
    let folded = std::mem::replace(&mut *stats.lock().unwrap_or_else(|e| e.into_inner()), RowStats::new(1, 0, false))
        .finish()
        .counts;
    let (how, delivered) = match &run.outcome {
        Outcome::Completed(d) => ("ok", d),
        Outcome::Bounded(d, _) => ("bounded", d),
        Outcome::Interrupted(d, _) => ("interrupted", d),
        Outcome::Cut(d, failure) => {
            println!("  {rate:5.1} M/s asked: cut ({failure:?})");
            ("cut", d)
        }
        Outcome::Failed(failure) => {
            println!("  {rate:5.1} M/s asked: failed ({failure:?}): {}", run.stderr.trim());
            return;
        }
    };
    let span_ns = delivered.last_wake_ns.unwrap_or(0).saturating_sub(delivered.window.run_start_ns).max(1);
    let samples = delivered.samples;
    let drained_ms = run.drained_after_exit_ns.unwrap_or(0) as f64 / 1e6;
    println!(
        "  {rate:5.1} M/s asked: {how}, {samples:>11} samples at {:5.1} M/s, {}; reader behind at most {:7.1} MiB, \
         done {drained_ms:6.1} ms after the worker's exit ({}); taskmeter {:5.1} ns a sample",
        samples as f64 * 1e3 / span_ns as f64,
        if folded.measured + folded.warmup == samples { "all folded" } else { "NOT ALL FOLDED" },
        run.backlog_peak_bytes.unwrap_or(0) as f64 / f64::from(1 << 20),
        if drained_ms <= 2.0 * FLUSH_NS as f64 / 1e6 { "kept pace" } else { "fell behind" },
        taskmeter_ns as f64 / samples.max(1) as f64,
    );
}

/// The synthetic worker: its plan from stdin, `H` and `G` on stdout, then every unit's samples
/// up to now appended to the sample file every `flush_ns`, one write each time, until the
/// window ends or stdin closes (asked to stop); then a `U` frame a unit and `D`.
fn synthetic_worker() -> Result<(), String> {
    let mut line = String::new();
    std::io::stdin().lock().read_line(&mut line).map_err(|e| format!("reading the plan: {e}"))?;
    let plan = Plan::from_json(line.trim_end()).map_err(|e| format!("the plan: {e}"))?;
    let asked_to_stop = Arc::new(AtomicBool::new(false));
    let asked = asked_to_stop.clone();
    std::thread::spawn(move || {
        let _ = std::io::copy(&mut std::io::stdin(), &mut std::io::sink());
        asked.store(true, Ordering::Release);
    });
    let (units, sleep_ns) = (u64::from(plan.units), plan.sleep.schedule.expected(1, 0));
    let run_start_ns = taskmeter_clock::now_ns();
    let measure_start_ns = run_start_ns + plan.warmup_ns;
    let end_ns = measure_start_ns + plan.duration_ns;
    let mut stdout = std::io::stdout().lock();
    let fail = |e: std::io::Error| format!("writing: {e}");
    stdout.write_all(&opening(units, std::process::id(), (run_start_ns, run_start_ns))).map_err(fail)?;
    stdout.flush().map_err(fail)?;
    // SAFETY: fd 3 is the sample file taskmeter gave this process, owned here alone.
    let mut sample_file = unsafe { std::fs::File::from_raw_fd(SAMPLE_FD) };
    let mut loops: Vec<SyntheticUnit> = (0..units).map(|_| SyntheticUnit::new(run_start_ns)).collect();
    let mut measured = vec![0u64; units as usize];
    let (mut random, mut bytes, mut samples) = (Random(0x9E37_79B9_7F4A_7C15), Vec::new(), Vec::new());
    let mut flush_at = run_start_ns;
    loop {
        flush_at += plan.flush_ns;
        let now = taskmeter_clock::now_ns();
        if flush_at > now {
            std::thread::sleep(Duration::from_nanos(flush_at - now));
        }
        let upto = taskmeter_clock::now_ns().min(end_ns);
        bytes.clear();
        for (unit, synthetic) in (1..=units as u32).zip(loops.iter_mut()) {
            let first = synthetic.period;
            samples.clear();
            while synthetic.wake_ns + sleep_ns < upto {
                samples.push(synthetic.next(&mut random, sleep_ns, Lateness::Spin, false));
            }
            measured[unit as usize - 1] += samples.iter().filter(|s| s.start_ns >= measure_start_ns).count() as u64;
            if !samples.is_empty() {
                let head = ChunkHead { unit, origin_ns: run_start_ns, first, by_unit: false };
                put_samples(&mut bytes, head, samples.iter().copied());
            }
        }
        sample_file.write_all(&bytes).map_err(|e| format!("writing the sample file: {e}"))?;
        let asked = asked_to_stop.load(Ordering::Acquire);
        if upto >= end_ns || asked {
            let mut tail = Vec::new();
            for (unit, synthetic) in (1..=units as u32).zip(&loops) {
                let end = UnitEnd {
                    unit,
                    origin_ns: run_start_ns,
                    iterations: synthetic.period,
                    measured_iterations: measured[unit as usize - 1],
                    lost: 0,
                };
                put_unit(&mut tail, &end);
            }
            let done = Done { interrupted: asked, busy_result: busy_reference(0).to_string(), atomic_sum: None };
            put_json(&mut tail, b'D', &done);
            stdout.write_all(&tail).map_err(fail)?;
            return stdout.flush().map_err(fail);
        }
    }
}
