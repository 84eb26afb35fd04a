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
//! `PACE=1` or `PACE=0`: keeping pace only, or behind only. `UPTO=read`: reading alone.
//! `SHAPE=volume`: `run volume --units 100000`'s samples as tokio-mt makes them on 2 cores
//! (2 classes, relative mode, `modulo:20:1ms`, 1 us of busy work, 30 us to 180 ms late: every
//! value but the busy time past 262 us), 100,000 units, 2 a frame (`PER_FRAME` still applies).
//! Every shape folds under an exact budget of 1 million samples (the default until issue 58's
//! fourteenth session, kept so that figures compare); `EXACT=N` sets it (4000000: today's default).
//!
//!     cargo run --release -p taskmeter-measure --example sample_cost

use std::io::Write;
use std::os::fd::FromRawFd;
use std::time::Instant;
use taskmeter_analysis::accumulate::RowStats;
use taskmeter_measure::process::fold::BATCH;
use taskmeter_measure::process::samples::{SampleFile, SampleReader};
use taskmeter_protocol::frames::{decode, decode_samples, put_samples, ChunkHead};
use taskmeter_protocol::{Checker, Plan, Sample, SampleView};

const COUNT: u64 = 6_000_000;
const PERIOD_NS: u64 = 1_000;
const ORIGIN_NS: u64 = 1_000;

mod common {
    #[path = "random.rs"]
    pub mod random;
    #[path = "synthetic.rs"]
    pub mod synthetic;
}
use common::random::Random;
use common::synthetic::{opening, plan, volume_plan, Lateness, SyntheticUnit};

/// A count from the environment, `default` when unset; one that is not a whole number from 1
/// ends the example with a one-line error.
fn env(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Err(_) => default,
        Ok(text) => text
            .parse()
            .ok()
            .filter(|n| *n >= 1)
            .unwrap_or_else(|| refuse(&format!("{name}={text} is not a whole number from 1"))),
    }
}

/// The frames' shape, `UNITS` and `PER_FRAME`: a round of one frame a unit must fit the samples
/// a pass writes.
fn shape(default_units: u64, default_per_frame: u64) -> (u64, u64) {
    let (units, per_frame) = (env("UNITS", default_units), env("PER_FRAME", default_per_frame));
    if units.saturating_mul(per_frame) > COUNT {
        refuse(&format!("UNITS x PER_FRAME ({units} x {per_frame}) is above the {COUNT} samples a pass writes"));
    }
    (units, per_frame)
}

fn refuse(why: &str) -> ! {
    eprintln!("sample_cost: {why}");
    std::process::exit(2)
}

/// Every unit's samples, a frame at a time, round after round, in blocks of about 4 MiB (as a
/// worker's writer appends them).
fn produce(units: u64, per_frame: u64, next: impl Fn(&mut SyntheticUnit, &mut Random) -> Sample) -> Vec<Vec<u8>> {
    let mut random = Random(0x9E37_79B9_7F4A_7C15);
    let mut loops: Vec<SyntheticUnit> = (0..units).map(|_| SyntheticUnit::new(ORIGIN_NS)).collect();
    let (mut blocks, mut bytes) = (Vec::new(), Vec::new());
    for round in 0..COUNT / units / per_frame {
        for (unit, synthetic) in (1..=units).zip(loops.iter_mut()) {
            let samples: Vec<Sample> = (0..per_frame).map(|_| next(synthetic, &mut random)).collect();
            let head = ChunkHead { unit: unit as u32, origin_ns: ORIGIN_NS, first: round * per_frame, by_unit: false };
            put_samples(&mut bytes, head, samples.into_iter());
        }
        if bytes.len() >= 4 << 20 {
            blocks.push(std::mem::take(&mut bytes));
        }
    }
    blocks.push(bytes);
    blocks
}

/// How far along the path each sample goes.
#[derive(Clone, Copy, PartialEq, PartialOrd)]
enum Upto {
    Read,
    Checked,
    Folded,
}

/// The reader's place in the sample file, and what it has checked and folded.
struct Path {
    reader: SampleReader,
    checker: Checker,
    views: Vec<SampleView>,
    stats: RowStats,
    samples: u64,
    sum: u64,
}

impl Path {
    fn new(file: SampleFile, plan: &Plan, classes: u32) -> Path {
        let mut checker = Checker::new(plan.clone());
        let mut views = Vec::with_capacity(BATCH);
        let opening = opening(u64::from(plan.units), 1, (10, 100));
        let mut control = taskmeter_protocol::frames::FrameReader::new(opening.as_slice());
        while let Some((kind, payload)) = control.next_raw().expect("well formed") {
            checker.accept(&decode(kind, payload).expect("well formed"), &mut views).expect("valid");
        }
        let (reader, stats) = (file.reader().expect("mapped"), RowStats::new(classes, env("EXACT", 1_000_000), false));
        Path { reader, checker, views, stats, samples: 0, sum: 0 }
    }

    /// Reads every whole frame written so far, as far along the path as `upto`.
    fn read(&mut self, upto: Upto) {
        self.reader.fill().expect("the file's size");
        while let Some((kind, payload)) = self.reader.next_frame().expect("whole frames") {
            let chunk = decode_samples(kind, payload).expect("well formed");
            if upto == Upto::Read {
                chunk.samples().for_each(|s| self.sum = self.sum.wrapping_add(s.wake_ns));
                self.samples += chunk.len() as u64;
                continue;
            }
            let accepted = chunk.try_for_each_piece(BATCH, |piece| {
                if self.views.len() >= BATCH {
                    hand_on(&mut self.stats, &mut self.views, &mut self.samples, upto);
                }
                self.checker.accept_samples(piece, &mut self.views)
            });
            accepted.expect("valid");
        }
    }

    fn hand_on(&mut self, upto: Upto) {
        hand_on(&mut self.stats, &mut self.views, &mut self.samples, upto);
    }
}

/// Folds the checked samples (as far as `upto` goes), as a reader hands them on.
fn hand_on(stats: &mut RowStats, views: &mut Vec<SampleView>, samples: &mut u64, upto: Upto) {
    if upto == Upto::Folded {
        stats.add(views);
    }
    *samples += views.len() as u64;
    views.clear();
}

/// Writes the blocks to a new sample file and reads them as far along the path as `upto`:
/// each block as soon as it is written (`pace`: the reader keeps pace, and reads what was
/// just written, from the caches) or all of them after (the reader far behind: from memory).
/// The samples, and the reader's ns per sample (the writing not counted).
fn pass(blocks: &[Vec<u8>], plan: &Plan, classes: u32, upto: Upto, pace: bool) -> (u64, f64) {
    let file = SampleFile::create().expect("a memfd");
    // SAFETY: a new descriptor of the same file, owned by the File below.
    let mut out = unsafe { std::fs::File::from_raw_fd(libc::dup(file.raw_fd())) };
    let mut path = Path::new(file, plan, classes);
    let mut reading = std::time::Duration::ZERO;
    for block in blocks {
        out.write_all(block).expect("the memfd takes it");
        if pace {
            let started = Instant::now();
            path.read(upto);
            reading += started.elapsed();
        }
    }
    let started = Instant::now();
    path.read(upto);
    path.hand_on(upto);
    if upto == Upto::Folded {
        std::hint::black_box(std::mem::replace(&mut path.stats, RowStats::new(1, 0, false)).finish());
    }
    reading += started.elapsed();
    std::hint::black_box(path.sum);
    (path.samples, reading.as_nanos() as f64 / path.samples as f64)
}

fn main() {
    if std::env::var("SHAPE").is_ok_and(|s| s == "volume") {
        let (units, per_frame) = shape(100_000, 2);
        let mut plan = volume_plan(units);
        // The preset's warm-up: about a tenth of each unit's samples here.
        plan.warmup_ns = 500_000_000;
        let blocks = produce(units, per_frame, |unit, random| unit.next_volume(random));
        println!(
            "sample path, best of 5: {} samples of {units} units, {per_frame} a frame, the volume preset's (2 classes, modulo:20:1ms, 30 us to 180 ms late)",
            COUNT / units / per_frame * units * per_frame,
        );
        return measure(&blocks, &plan, 2);
    }
    let ((units, per_frame), classes) = (shape(15, 512), env("CLASSES", 1));
    if classes > 2 {
        refuse(&format!("CLASSES={classes}: a plan has 1 or 2 priority classes"));
    }
    let late = if std::env::var("LATE").is_ok_and(|l| l == "narrow") { Lateness::Narrow } else { Lateness::Spin };
    let absolute = std::env::var("MODE").is_ok_and(|m| m == "absolute");
    let mut plan = plan(units, classes, absolute, (PERIOD_NS, 100_000_000_000, 10_000_000));
    // At most a fifth of each unit's samples are its warm-up, as in a run: the plan's 1 ms held
    // every sample of 10,000 units or more (600 samples of about 1 us each), and their fold then
    // counted warm-up samples only. 15 units keep the 1 ms (0.25 % of their 0.4 s).
    plan.warmup_ns = plan.warmup_ns.min(PERIOD_NS * (COUNT / units) / 5);
    let blocks = produce(units, per_frame, |unit, random| unit.next(random, PERIOD_NS, late, absolute));
    println!(
        "sample path, best of 5: {} samples of {units} units, {per_frame} a frame, {} mode, {} lateness, {classes} class(es)",
        COUNT / units / per_frame * units * per_frame,
        if absolute { "absolute" } else { "relative" },
        if late == Lateness::Narrow { "narrow (60-70 µs)" } else { "spin (20-90 ns)" },
    );
    measure(&blocks, &plan, classes as u32);
}

/// Reads, checks and folds the blocks, keeping pace and behind (`PACE`), as far as `UPTO`.
fn measure(blocks: &[Vec<u8>], plan: &Plan, classes: u32) {
    let paces: Vec<bool> = match std::env::var("PACE").as_deref() {
        Ok("1") => vec![true],
        Ok("0") => vec![false],
        _ => vec![true, false],
    };
    let steps: Vec<Upto> = match std::env::var("UPTO").as_deref() {
        Ok("read") => vec![Upto::Read],
        _ => vec![Upto::Read, Upto::Checked, Upto::Folded],
    };
    for pace in paces {
        let mut best = [f64::MAX; 3];
        for _ in 0..5 {
            for (i, upto) in steps.iter().copied().enumerate() {
                best[i] = best[i].min(pass(blocks, plan, classes, upto, pace).1);
            }
        }
        let [read, checked, folded] = best;
        let reader = if pace {
            "reader keeping pace (each 4 MiB read as written)"
        } else {
            "reader behind (the whole file read after)"
        };
        if steps.len() == 1 {
            println!("  {reader}: {read:.1} ns per sample read");
            continue;
        }
        println!(
            "  {}: {folded:.1} ns per sample read, checked and folded = {:.1} M samples/s on one core (read {read:.1}, check {:.1}, fold {:.1})",
            reader,
            1e3 / folded,
            checked - read,
            folded - checked,
        );
    }
}
