//! What folding one sample into a row's statistics costs taskmeter (the fold that every `S`
//! frame goes through while a worker runs): 3 million samples of 20 units with a lateness
//! like c-thread's at `fixed:100us` (60-70 µs, a tail to milliseconds), folded in frames of
//! 2,000 as they arrive, under an exact budget of 1 million (the default until issue 58's
//! fourteenth session, kept so that figures compare: the row turns to histograms a third of the
//! way) and then ended. Prints ns per sample, best of 5.
//! `CLASSES=2`: odd and even units in two priority classes (as the volume preset has them).
//! `WIDE=1`: lateness spread evenly over 0-20 ms, as 10,000 starved units have it (about 200,000
//! distinct buckets in each histogram): what ending such a row costs is printed apart.
//! `SPREAD=1`: lateness spread evenly over 0-262 µs, the range counted value by value, as a
//! thread row's at 10,000 units (its median 129 µs): each value reaches its counter at random.
//! `BUDGET=N`: an exact budget of N samples instead (4000000: every sample kept exact).
//! `SHORT=1`: the rows of a default run instead, 9,000 samples each at `fixed:1ms` (actual and
//! full above the exactly counted range, so kept), 300 of them, each folded and ended.
//!
//!     cargo run --release -p taskmeter-measure --example fold_cost

use std::time::Instant;
use taskmeter_analysis::accumulate::RowStats;
use taskmeter_protocol::{Sample, SampleView};

#[path = "common/random.rs"]
mod random;
use random::Random;

/// How late the samples wake.
#[derive(Clone, Copy, PartialEq)]
enum Late {
    Narrow,
    Wide,
    Spread,
}

fn samples(count: usize, classes: u32, late: Late, expected: u64) -> Vec<SampleView> {
    let (mut random, mut wake) = (Random(0x9E37_79B9_7F4A_7C15), vec![1_000_000u64; 20]);
    (0..count)
        .map(|i| {
            let unit = i % 20;
            let start = wake[unit];
            let busy_end = start + 700 + random.next() % 50;
            let intended = busy_end + expected;
            let r = random.next() % 1000;
            let late = match late {
                Late::Wide => random.next() % 20_000_000,
                Late::Spread => random.next() % 262_144,
                Late::Narrow => 60_000 + random.next() % 10_000 + if r == 0 { random.next() % 4_000_000 } else { 0 },
            };
            let sample = Sample {
                period: i as u64 / 20,
                start_ns: start,
                busy_end_ns: busy_end,
                intended_ns: intended,
                wake_ns: intended + late,
                missed: 0,
            };
            wake[unit] = sample.wake_ns;
            SampleView::new(unit as u32 + 1, unit as u32 % classes, sample, expected, Some(start), true)
        })
        .collect()
}

fn main() {
    const COUNT: usize = 3_000_000;
    let classes: u32 = std::env::var("CLASSES").ok().and_then(|c| c.parse().ok()).unwrap_or(1);
    let late = match (std::env::var("WIDE").is_ok_and(|w| w == "1"), std::env::var("SPREAD").is_ok_and(|s| s == "1")) {
        (true, _) => Late::Wide,
        (false, true) => Late::Spread,
        (false, false) => Late::Narrow,
    };
    if std::env::var("SHORT").is_ok_and(|s| s == "1") {
        return short_rows(classes);
    }
    let views = samples(COUNT, classes, late, 100_000);
    let budget: u64 = std::env::var("BUDGET").ok().and_then(|b| b.parse().ok()).unwrap_or(1_000_000);
    let (mut best, mut best_end) = (f64::MAX, f64::MAX);
    for _ in 0..5 {
        let started = Instant::now();
        let mut stats = RowStats::new(classes, budget, false);
        for frame in views.chunks(2000) {
            stats.add(frame);
        }
        let ending = Instant::now();
        std::hint::black_box(stats.finish());
        best = best.min(started.elapsed().as_nanos() as f64 / COUNT as f64);
        best_end = best_end.min(ending.elapsed().as_secs_f64() * 1e3);
    }
    println!(
        "fold: {best:.1} ns per sample, of which ending the row {best_end:.1} ms (best of 5; {COUNT} samples, {classes} class(es), {} lateness, exact budget {budget}, then histograms)",
        match late {
            Late::Wide => "wide (0-20 ms)",
            Late::Spread => "spread (0-262 µs)",
            Late::Narrow => "narrow (60-70 µs)",
        }
    );
}

/// 300 rows of 9,000 samples at `fixed:1ms`, each folded and ended: the rows of a default run.
fn short_rows(classes: u32) {
    const ROWS: usize = 300;
    let views = samples(9_000, classes, Late::Narrow, 1_000_000);
    let mut best = f64::MAX;
    for _ in 0..5 {
        let started = Instant::now();
        for _ in 0..ROWS {
            let mut stats = RowStats::new(classes, 1_000_000, false);
            for frame in views.chunks(200) {
                stats.add(frame);
            }
            std::hint::black_box(stats.finish());
        }
        best = best.min(started.elapsed().as_secs_f64() * 1e6 / ROWS as f64);
    }
    println!(
        "a short row (9,000 samples at fixed:1ms, {classes} class(es)), folded and ended: {best:.0} µs (best of 5)"
    );
}
