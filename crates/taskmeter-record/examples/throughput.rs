//! The in-process cost of `record()`: events per second on 1 thread and on every core.
//! `cargo run --release -p taskmeter-record --example throughput [SECONDS] [REPEATS]`
use std::time::Duration;
use taskmeter_record::{Bench, Recorder};

fn flood(rec: &Recorder, threads: usize) {
    std::thread::scope(|s| {
        for _ in 0..threads {
            s.spawn(|| {
                while rec.running() {
                    for _ in 0..1000 {
                        rec.record();
                    }
                }
            });
        }
    });
}

fn main() {
    let arg = |i: usize, default: f64| std::env::args().nth(i).and_then(|a| a.parse().ok()).unwrap_or(default);
    let (seconds, repeats) = (arg(1, 1.0), arg(2, 3.0) as usize);
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    let mut counts = vec![1];
    if cores > 1 {
        counts.push(cores);
    }
    println!("threads  run  events/s (measured units / window)  ns per record() per thread");
    for &threads in &counts {
        for run in 1..=repeats {
            let report = Bench::new()
                .warmup(Duration::from_millis(200))
                .time(Duration::from_secs_f64(seconds))
                .quiet()
                .scenario("flood", move |rec, _| flood(rec, threads))
                .run();
            let r = &report.results[0];
            let window_s = (r.window.end_ns - r.window.warmup_end_ns) as f64 / 1e9;
            let rate = r.measured.units as f64 / window_s;
            println!("{threads:>7}  {run:>3}  {rate:>14.0}  {:>40.1}", threads as f64 * 1e9 / rate);
        }
    }
}
