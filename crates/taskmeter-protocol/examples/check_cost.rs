//! What checking one sample costs taskmeter (every `S` frame goes through the checker as it
//! arrives): 10,000 units in two priority classes, relative mode, `modulo:20:1ms`, frames of 9
//! samples each as a writer flushing five times a second sends them at 10,000 units, 3 million
//! samples in all. Prints ns per sample, best of 5; then what reading a unit's end costs (the
//! `U` frames that end a row, one a unit), binary as protocol 6 sends it and as protocol 5's JSON.
//!
//!     cargo run --release -p taskmeter-protocol --example check_cost

use std::time::Instant;
use taskmeter_protocol::frames::{
    decode, kind, put_header, put_json, put_samples, put_unit, ChunkHead, Frame, FrameReader,
};
use taskmeter_protocol::{Checker, Gate, Hello, Plan, Sample, SampleView, UnitEnd, CLOCK, PROTOCOL};

const UNITS: u32 = 10_000;
const PER_FRAME: u64 = 9;
const ROUNDS: u64 = 33;

fn main() {
    let plan = Plan::from_json(&format!(
        r#"{{"protocol": {PROTOCOL}, "runtime": "c-thread", "experiment": "sleep", "units": {UNITS}, "classes": 2,
            "start_limit_ns": 10000000000, "warmup_ns": 1000000, "duration_ns": 100000000000,
            "mode": "relative", "schedule": "modulo", "sleep_ns": 1000000, "modulo": 20, "busy_iters": 10,
            "busy_yield": false, "ring": 64, "flush_ns": 200000000, "room_threads": 30000,
            "room_threads_why": "-", "room_memory_bytes": 4294967296, "room_memory_why": "-", "max_map_count": 65530}}"#
    ))
    .expect("a valid plan");
    let mut stream = Vec::new();
    let hello = Hello {
        protocol: PROTOCOL,
        runtime: "c-thread".into(),
        runtime_version: "check_cost".into(),
        clock: CLOCK.into(),
        pid: 1,
        priority: "none".into(),
        wait: None,
    };
    put_json(&mut stream, b'H', &hello);
    put_json(&mut stream, b'G', &Gate { create_start_ns: 10, run_start_ns: 100, units: UNITS, start_error: None });
    // Each unit's periods one after the other: busy 700 ns, then its expected sleep and 50 us late.
    let mut wake = vec![1_000u64; UNITS as usize];
    for round in 0..ROUNDS {
        for unit in 1..=UNITS {
            let samples = (round * PER_FRAME..(round + 1) * PER_FRAME).map(|period| {
                let start = wake[unit as usize - 1];
                let busy_end = start + 700;
                let intended = busy_end + plan.sleep.schedule.expected(unit, period);
                let sample = Sample {
                    period,
                    start_ns: start,
                    busy_end_ns: busy_end,
                    intended_ns: intended,
                    wake_ns: intended + 50_000,
                    missed: 0,
                };
                wake[unit as usize - 1] = sample.wake_ns;
                sample
            });
            let head = ChunkHead { unit, origin_ns: 1_000, first: round * PER_FRAME, by_unit: false };
            put_samples(&mut stream, head, samples.collect::<Vec<_>>().into_iter());
        }
    }
    let total = u64::from(UNITS) * ROUNDS * PER_FRAME;
    let mut best = f64::MAX;
    for _ in 0..5 {
        let mut checker = Checker::new(plan.clone());
        let mut reader = FrameReader::new(stream.as_slice());
        let mut views: Vec<SampleView> = Vec::new();
        let started = Instant::now();
        while let Some((kind, payload)) = reader.next_raw().expect("well formed") {
            let frame = decode(kind, payload).expect("well formed");
            views.clear();
            checker.accept(&frame, &mut views).expect("valid");
            std::hint::black_box(&views);
        }
        best = best.min(started.elapsed().as_nanos() as f64 / total as f64);
    }
    println!("check: {best:.1} ns per sample (best of 5; {total} samples of {UNITS} units, {PER_FRAME} a frame)");
    unit_ends();
}

/// Reading 100,000 units' `U` frames from a stream: each decoded to its five numbers, best of 5.
/// The checker's work on each is the same whichever way it came, so it is left out.
fn unit_ends() {
    const ENDS: u32 = 100_000;
    let end = |unit| UnitEnd { unit, origin_ns: 1_733_000_000_000, iterations: 36, measured_iterations: 30, lost: 0 };
    let read = |stream: &[u8], each: &dyn Fn(&[u8]) -> UnitEnd| {
        let mut best = f64::MAX;
        for _ in 0..5 {
            let mut reader = FrameReader::new(stream);
            let started = Instant::now();
            while let Some((_, payload)) = reader.next_raw().expect("well formed") {
                std::hint::black_box(each(payload));
            }
            best = best.min(started.elapsed().as_nanos() as f64 / f64::from(ENDS));
        }
        best
    };
    let (mut binary, mut json) = (Vec::new(), Vec::new());
    for unit in 1..=ENDS {
        put_unit(&mut binary, &end(unit));
        let text = serde_json::to_vec(&end(unit)).expect("five numbers");
        put_header(&mut json, kind::UNIT, text.len());
        json.extend_from_slice(&text);
    }
    let now = read(&binary, &|payload| match decode(kind::UNIT, payload) {
        Ok(Frame::Unit(end)) => end,
        other => panic!("{other:?}"),
    });
    // As protocol 5 read it: the text checked as UTF-8 once, then serde_json.
    let before = read(&json, &|payload| {
        serde_json::from_str(std::str::from_utf8(payload).expect("UTF-8")).expect("a unit's end")
    });
    println!("a unit's end (U): {now:.1} ns read as protocol 6's 36 bytes, {before:.1} ns as protocol 5's JSON (best of 5; {ENDS} frames)");
}
