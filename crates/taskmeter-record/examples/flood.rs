//! `flood EVENTS [THREADS]`: the cross-process throughput of the Rust client (clients/README.md).
use std::time::Instant;
use taskmeter_record::Recorder;

fn main() {
    let args: Vec<String> = std::env::args().collect();
    let parse = |i: usize, default: u64| {
        args.get(i).map_or(Ok(default), |a| a.parse::<u64>()).unwrap_or_else(|_| {
            eprintln!("usage: flood EVENTS [THREADS]");
            std::process::exit(2)
        })
    };
    let (events, threads) = (parse(1, 1_000_000), parse(2, 1).max(1));
    let started = Instant::now();
    std::thread::scope(|s| {
        for t in 0..threads {
            s.spawn(move || {
                let rec = Recorder::global();
                for _ in 0..events / threads + u64::from(t < events % threads) {
                    rec.record();
                }
                rec.flush();
            });
        }
    });
    let seconds = started.elapsed().as_secs_f64();
    eprintln!("flood: {events} events in {seconds:.3} s = {:.0} events/s", events as f64 / seconds);
}
