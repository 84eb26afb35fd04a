//! A synthetic `thread/spin` worker's pieces, shared by the sample-path examples: its plan, its
//! opening frames, and each unit's samples as a unit spinning to its deadlines makes them (no
//! busy work; the same samples every run).

use super::random::Random;
use taskmeter_protocol::frames::put_json;
use taskmeter_protocol::{Gate, Hello, Plan, Sample, CLOCK, PROTOCOL};

/// The plan: `units` units of `thread/spin` sleeping `sleep_ns` (fixed), in `classes` classes,
/// writing their samples every `flush_ns`.
pub fn plan(units: u64, classes: u64, absolute: bool, (sleep_ns, duration_ns, flush_ns): (u64, u64, u64)) -> Plan {
    plan_of(units, classes, absolute, ("fixed", sleep_ns, 1, 0), (duration_ns, flush_ns))
}

/// The plan of the volume preset (`experiments/volume-study.toml`): `units` units in 2 classes,
/// relative mode, `modulo:20:1ms`, busy work of 1,000 iterations (see [`SyntheticUnit::next_volume`]).
pub fn volume_plan(units: u64) -> Plan {
    plan_of(units, 2, false, ("modulo", 1_000_000, 20, 1_000), (100_000_000_000, 10_000_000))
}

fn plan_of(
    units: u64,
    classes: u64,
    absolute: bool,
    (schedule, sleep_ns, modulo, busy_iters): (&str, u64, u64, u64),
    (duration_ns, flush_ns): (u64, u64),
) -> Plan {
    Plan::from_json(&format!(
        r#"{{"protocol": {PROTOCOL}, "runtime": "thread/spin", "experiment": "sleep", "units": {units}, "classes": {classes},
            "start_limit_ns": 10000000000, "warmup_ns": 1000000, "duration_ns": {duration_ns},
            "mode": "{}", "schedule": "{schedule}", "sleep_ns": {sleep_ns}, "modulo": {modulo}, "busy_iters": {busy_iters},
            "busy_yield": false, "ring": 65536, "flush_ns": {flush_ns}, "room_threads": 30000,
            "room_threads_why": "-", "room_memory_bytes": 4294967296, "room_memory_why": "-", "max_map_count": 65530}}"#,
        if absolute { "absolute" } else { "relative" }
    ))
    .expect("a valid plan")
}

/// The frames that open a worker's stdout: `H`, then `G` with the gate opened at `run_start_ns`.
pub fn opening(units: u64, pid: u32, (create_start_ns, run_start_ns): (u64, u64)) -> Vec<u8> {
    let mut bytes = Vec::new();
    let hello = Hello {
        protocol: PROTOCOL,
        runtime: "thread/spin".into(),
        runtime_version: "synthetic".into(),
        clock: CLOCK.into(),
        pid,
        priority: "none".into(),
        wait: None,
    };
    put_json(&mut bytes, b'H', &hello);
    let gate = Gate { create_start_ns, run_start_ns, units: units as u32, start_error: None };
    put_json(&mut bytes, b'G', &gate);
    bytes
}

/// How late a synthetic unit wakes.
#[derive(Clone, Copy, PartialEq)]
pub enum Lateness {
    /// 20-90 ns: a unit spinning to its deadline.
    Spin,
    /// 60-70 µs, one in a thousand up to 4 ms later: a unit sleeping in the kernel.
    Narrow,
}

/// One unit's loop: the next sample's period and where the unit woke last.
pub struct SyntheticUnit {
    pub origin_ns: u64,
    pub period: u64,
    pub wake_ns: u64,
}

impl SyntheticUnit {
    pub fn new(origin_ns: u64) -> SyntheticUnit {
        SyntheticUnit { origin_ns, period: 0, wake_ns: origin_ns }
    }

    /// The unit's next sample, sleeping `sleep_ns` a period (absolute mode: to the deadlines
    /// `origin + (period + 1) * sleep_ns`, waking less than a period late).
    pub fn next(&mut self, random: &mut Random, sleep_ns: u64, late: Lateness, absolute: bool) -> Sample {
        let (period, previous_wake) = (self.period, self.wake_ns);
        let intended = match absolute {
            true => self.origin_ns + (period + 1) * sleep_ns,
            false => previous_wake + sleep_ns,
        };
        let late = match late {
            Lateness::Narrow => {
                60_000 + random.next() % 10_000 + if random.next() % 1000 == 0 { random.next() % 4_000_000 } else { 0 }
            }
            Lateness::Spin => 20 + random.next() % 70,
        };
        let late = if absolute { late % sleep_ns } else { late };
        let start = previous_wake.max(intended - sleep_ns);
        let sample = Sample {
            period,
            start_ns: start,
            busy_end_ns: start,
            intended_ns: intended,
            wake_ns: intended + late,
            missed: 0,
        };
        self.period += 1;
        self.wake_ns = sample.wake_ns;
        sample
    }

    /// The unit's next sample in the volume preset as 100,000 units of tokio-mt make it on 2
    /// cores: about 1 us of busy work, a sleep of `(period % 20 + 1)` ms after it, waking
    /// 30 us to 180 ms late (so that lateness, sleep and period are all past 262 us).
    pub fn next_volume(&mut self, random: &mut Random) -> Sample {
        let (period, start) = (self.period, self.wake_ns);
        let busy_end = start + 900 + random.next() % 200;
        let intended = busy_end + (period % 20 + 1) * 1_000_000;
        let sample = Sample {
            period,
            start_ns: start,
            busy_end_ns: busy_end,
            intended_ns: intended,
            wake_ns: intended + 30_000 + random.next() % 180_000_000,
            missed: 0,
        };
        self.period += 1;
        self.wake_ns = sample.wake_ns;
        sample
    }
}
