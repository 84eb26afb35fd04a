//! What one sample costs taskmeter on its whole path (issue 58): a synthetic producer writes `S`
//! frames into a real sample file (the memfd a worker appends to), then taskmeter's own pieces
//! read it in place ([`SampleReader`]), decode each frame, check every sample ([`Checker`]) and
//! fold the checked samples into a row's statistics ([`RowStats`]) in batches of
//! `fold::BATCH`, as a worker's reader does. Prints ns per sample (best of 5), split into
//! reading, checking and folding by timing the path cut after each, and the pace one core keeps.
//!
//! The default is what `benchmarks/sample-path.sh` runs: 15 units of `thread/spin` at
//! `fixed:1us`, relative mode, no busy work, waking 20-90 ns late, 512 samples a frame.
//! `LATE=narrow`: lateness of 60-70 µs with a tail to 4 ms (as `fold_cost`'s).
//! `MODE=absolute`: absolute deadlines. `CLASSES=2`: two priority classes.
//! `UNITS=N`, `PER_FRAME=N`: the frames' shape (10000 and 9: a 10,000-unit run's).
//!
//!     cargo run --release -p taskmeter-measure --example sample_cost

use std::io::Write;
use std::os::fd::{FromRawFd, IntoRawFd};
use std::time::Instant;
use taskmeter_analysis::accumulate::RowStats;
use taskmeter_measure::process::fold::BATCH;
use taskmeter_measure::process::samples::{SampleFile, SampleReader};
use taskmeter_protocol::frames::{decode, put_json, put_samples, ChunkHead, Frame};
use taskmeter_protocol::{Checker, Gate, Hello, Plan, Sample, SampleView, CLOCK, PROTOCOL};

const COUNT: u64 = 6_000_000;
const PERIOD_NS: u64 = 1_000;

/// A small xorshift generator: the same samples every run.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

fn env(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}

fn plan(units: u64, classes: u64, absolute: bool) -> Plan {
    Plan::from_json(&format!(
        r#"{{"protocol": {PROTOCOL}, "runtime": "thread/spin", "experiment": "sleep", "units": {units}, "classes": {classes},
            "start_limit_ns": 10000000000, "warmup_ns": 1000000, "duration_ns": 100000000000,
            "mode": "{}", "schedule": "fixed", "sleep_ns": {PERIOD_NS}, "modulo": 1, "busy_iters": 0,
            "busy_yield": false, "ring": 65536, "flush_ns": 10000000, "room_threads": 30000,
            "room_threads_why": "-", "room_memory_bytes": 4294967296, "room_memory_why": "-", "max_map_count": 65530}}"#,
        if absolute { "absolute" } else { "relative" }
    ))
    .expect("a valid plan")
}

/// The control frames before the samples (they go to stdout in a real run; here to the checker).
fn opening(units: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    let hello = Hello {
        protocol: PROTOCOL,
        runtime: "thread/spin".into(),
        runtime_version: "sample_cost".into(),
        clock: CLOCK.into(),
        pid: 1,
        priority: "none".into(),
        wait: None,
    };
    put_json(&mut bytes, b'H', &hello);
    put_json(
        &mut bytes,
        b'G',
        &Gate { create_start_ns: 10, run_start_ns: 100, units: units as u32, start_error: None },
    );
    bytes
}

/// Every unit's samples, a frame at a time, round after round, written to a new sample file.
fn produce(units: u64, per_frame: u64, narrow: bool, absolute: bool) -> SampleFile {
    let file = SampleFile::create().expect("a memfd");
    // SAFETY: a new descriptor of the same file, owned by the File below.
    let mut out = unsafe { std::fs::File::from_raw_fd(libc::dup(file.raw_fd())) };
    let (origin, mut random) = (1_000u64, Random(0x9E37_79B9_7F4A_7C15));
    let mut wake = vec![origin; units as usize];
    let mut bytes = Vec::new();
    for round in 0..COUNT / units / per_frame {
        for unit in 1..=units {
            let first = round * per_frame;
            let samples: Vec<Sample> = (first..first + per_frame)
                .map(|period| {
                    let start = wake[unit as usize - 1];
                    let intended = if absolute { origin + (period + 1) * PERIOD_NS } else { start + PERIOD_NS };
                    let late = match narrow {
                        true => {
                            60_000
                                + random.next() % 10_000
                                + if random.next() % 1000 == 0 { random.next() % 4_000_000 } else { 0 }
                        }
                        false => 20 + random.next() % 70,
                    };
                    // Absolute mode: a unit past its deadlines wakes late by less than a period.
                    let late = if absolute { late % PERIOD_NS } else { late };
                    let sample = Sample {
                        period,
                        start_ns: start.max(intended - PERIOD_NS),
                        busy_end_ns: 0,
                        intended_ns: intended,
                        wake_ns: intended + late,
                        missed: 0,
                    };
                    wake[unit as usize - 1] = sample.wake_ns;
                    Sample { busy_end_ns: sample.start_ns, ..sample }
                })
                .collect();
            put_samples(
                &mut bytes,
                ChunkHead { unit: unit as u32, origin_ns: origin, first, by_unit: false },
                samples.into_iter(),
            );
        }
        if bytes.len() > 8 << 20 {
            out.write_all(&bytes).expect("the memfd takes it");
            bytes.clear();
        }
    }
    out.write_all(&bytes).expect("the memfd takes it");
    let _ = out.into_raw_fd();
    file
}

/// How far along the path each sample goes.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Upto {
    Read,
    Checked,
    Folded,
}

/// Reads the whole file (checking and folding, as far as `upto`): the samples and ns per sample.
fn pass(file: SampleFile, plan: &Plan, classes: u32, upto: Upto) -> (u64, f64) {
    let mut reader: SampleReader = file.reader().expect("mapped");
    let mut checker = Checker::new(plan.clone());
    let (mut views, mut stats) = (Vec::<SampleView>::with_capacity(BATCH), RowStats::new(classes, 1_000_000, false));
    let opening = opening(u64::from(plan.units));
    let mut control = taskmeter_protocol::frames::FrameReader::new(opening.as_slice());
    while let Some((kind, payload)) = control.next_raw().expect("well formed") {
        checker.accept(&decode(kind, payload).expect("well formed"), &mut views).expect("valid");
    }
    let (started, mut samples, mut sum) = (Instant::now(), 0u64, 0u64);
    reader.fill().expect("the file's size");
    while let Some((kind, payload)) = reader.next_frame().expect("whole frames") {
        let frame = decode(kind, payload).expect("well formed");
        let Frame::Samples(chunk) = &frame else { unreachable!("sample frames only") };
        if upto == Upto::Read {
            chunk.samples().for_each(|s| sum = sum.wrapping_add(s.wake_ns));
            samples += chunk.len() as u64;
            continue;
        }
        for piece in chunk.pieces(BATCH) {
            if views.len() >= BATCH {
                if upto == Upto::Folded {
                    stats.add(&views);
                }
                samples += views.len() as u64;
                views.clear();
            }
            checker.accept(&Frame::Samples(piece), &mut views).expect("valid");
        }
    }
    if upto == Upto::Folded {
        stats.add(&views);
        std::hint::black_box(stats.finish());
    }
    samples += views.len() as u64;
    std::hint::black_box(sum);
    (samples, started.elapsed().as_nanos() as f64 / samples as f64)
}

fn main() {
    let (units, per_frame, classes) = (env("UNITS", 15), env("PER_FRAME", 512), env("CLASSES", 1));
    let narrow = std::env::var("LATE").is_ok_and(|l| l == "narrow");
    let absolute = std::env::var("MODE").is_ok_and(|m| m == "absolute");
    let plan = plan(units, classes, absolute);
    let mut best = [f64::MAX; 3];
    let mut count = 0;
    for _ in 0..5 {
        for (i, upto) in [Upto::Read, Upto::Checked, Upto::Folded].into_iter().enumerate() {
            let file = produce(units, per_frame, narrow, absolute);
            let (samples, ns) = pass(file, &plan, classes as u32, upto);
            (best[i], count) = (best[i].min(ns), samples);
        }
    }
    let [read, checked, folded] = best;
    println!(
        "sample path: {folded:.1} ns per sample read, checked and folded = {:.1} M samples/s on one core \
         (read {read:.1}, check {:.1}, fold {:.1}; best of 5; {count} samples of {units} units, {per_frame} a frame, \
         {} mode, {} lateness, {classes} class(es))",
        1e3 / folded,
        checked - read,
        folded - checked,
        if absolute { "absolute" } else { "relative" },
        if narrow { "narrow (60-70 µs)" } else { "spin (20-90 ns)" },
    );
}
