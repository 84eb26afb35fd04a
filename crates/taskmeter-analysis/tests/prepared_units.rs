//! The tables of one entry per unit that checking a worker and folding its row fill (the units'
//! states, their `U` frames, the per-unit sums), written before the first worker starts in
//! `taskmeter_memory::UNIT_TABLES`, are the memory a row of that many units fills: even after a
//! fork, it takes next to no page fault for them, where a row that found none prepared takes one
//! for each 4 KiB (about 3,300 at 100,000 units), and each table comes back for the next row.
//! A file of its own, one test: the pool is the process's, and the faults counted are the
//! thread's.

use taskmeter_analysis::accumulate::{unit_table_bytes, RowStats};
use taskmeter_protocol::frames::{decode, put_unit, FrameReader, UnitEnd};
use taskmeter_protocol::{vectors, Checker, Ending, Plan, Sample, SampleView};

const UNITS: u32 = 100_000;

/// Minor page faults of the calling thread so far.
fn faults() -> u64 {
    // SAFETY: getrusage writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
    usage.ru_minflt as u64
}

/// The `relative` stream vector's plan and first two frames (`H`, `G`), for `UNITS` units, and
/// a `U` frame for each unit (none with samples: each iterated 0 times).
fn stream() -> (Plan, Vec<u8>) {
    let vector = vectors::STREAMS.iter().find(|(name, _)| *name == "relative").expect("the relative vector").1;
    let mut vector: serde_json::Value = serde_json::from_str(vector).expect("JSON");
    vector["plan"]["units"] = UNITS.into();
    let plan = Plan::from_json(&vector["plan"].to_string()).expect("a valid plan");
    vector["frames"][1][1]["units"] = UNITS.into();
    let opening = vector["frames"].as_array().expect("frames")[..2].to_vec();
    let mut bytes = vectors::encode_stream(&serde_json::Value::Array(opening));
    for unit in 1..=UNITS {
        let end = UnitEnd { unit, origin_ns: 110, iterations: 0, measured_iterations: 0, lost: 0 };
        put_unit(&mut bytes, &end);
    }
    (plan, bytes)
}

/// The faults that checking the stream and folding one sample of each unit take, and the
/// units whose `U` frame was delivered.
fn faults_of_a_row(plan: &Plan, stream: &[u8]) -> (u64, usize) {
    let views: Vec<SampleView> = (1..=UNITS)
        .map(|unit| {
            let sample =
                Sample { period: 0, start_ns: 120, busy_end_ns: 120, intended_ns: 1120, wake_ns: 1150, missed: 0 };
            SampleView::new(unit, 0, sample, 1000, None, true)
        })
        .collect();
    let (mut checker, mut none) = (Checker::new(plan.clone()), Vec::new());
    let before = faults();
    let mut row = RowStats::new(1, 4_000_000, false).for_units(UNITS);
    row.add(&views);
    let mut reader = FrameReader::new(stream);
    while let Some((kind, payload)) = reader.next_raw().expect("whole frames") {
        checker.accept(&decode(kind, payload).expect("a frame"), &mut none).expect("valid");
    }
    let Ending::Cut(delivered) = checker.finish() else { panic!("a stream cut before D") };
    let taken = faults() - before;
    let _ = row.finish();
    (taken, delivered.units.len())
}

#[test]
fn a_row_fills_the_unit_tables_prepared_for_it_without_faulting_them_in() {
    let (plan, stream) = stream();
    let [states, ends] = taskmeter_protocol::check::unit_table_bytes(UNITS);
    let sums = unit_table_bytes(UNITS);
    assert_eq!((states, ends, sums), (6_400_000, 4_000_000, 3_200_000), "64, 40 and 32 bytes a unit");
    let pages = ((states + ends + sums) / 4096) as u64;
    let (unprepared, delivered) = faults_of_a_row(&plan, &stream);
    assert_eq!(delivered, UNITS as usize);
    // What the row left (its tables, given back) is taken away, then prepared anew.
    while taskmeter_memory::UNIT_TABLES.largest::<u8>().capacity() > 0 {}
    let written = taskmeter_memory::UNIT_TABLES.prepare(vec![states, ends, sums]);
    assert_eq!(written, states.next_multiple_of(4096) + ends.next_multiple_of(4096) + sums.next_multiple_of(4096));
    // taskmeter forks to start each worker: a fork write-protects what the parent wrote, but
    // not memory a child does not inherit.
    // SAFETY: the child calls nothing but _exit.
    match unsafe { libc::fork() } {
        0 => unsafe { libc::_exit(0) },
        child => assert!(child > 0 && unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) } == child),
    }
    let (prepared, _) = faults_of_a_row(&plan, &stream);
    // Huge pages (`transparent_hugepage=always`) would make both few: a fault for each 2 MiB.
    if unprepared >= pages * 9 / 10 {
        assert!(prepared * 10 < pages, "{prepared} faults filling prepared tables, {unprepared} without");
    } else {
        assert!(unprepared < pages / 64, "{unprepared} faults without preparing: neither 4 KiB pages nor huge ones");
    }
    // The three tables came back when the row's checker, delivery and statistics ended.
    let mut held = taskmeter_memory::UNIT_TABLES.held();
    held.sort();
    assert_eq!(held, [sums, ends, states].map(|bytes| bytes.next_multiple_of(4096)));
}
