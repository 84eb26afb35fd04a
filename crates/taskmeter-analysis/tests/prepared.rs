//! The memory a row keeps its values in, written before its worker starts
//! (`prepare_kept_values`), is the memory the row fills: folding it then takes next to no page
//! fault, even after a fork, where a row that found nothing prepared takes one for each 4 KiB of
//! values it keeps.
//! A file of its own, one test: the vectors held for rows are the process's, and the faults
//! counted are the thread's.

use taskmeter_analysis::accumulate::{prepare_kept_values, RowStats, RowToCome};
use taskmeter_protocol::{Sample, SampleView};

/// Minor page faults of the calling thread so far.
fn faults() -> u64 {
    // SAFETY: getrusage writes the struct it is given.
    let mut usage: libc::rusage = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::getrusage(libc::RUSAGE_THREAD, &mut usage) }, 0);
    usage.ru_minflt as u64
}

/// `count` measured samples of 1,000 units in two classes, sleeping 1 ms and waking 300 to
/// 1,300 µs late: lateness, actual and full past 262 µs, kept; busy (1 µs) counted.
fn views(count: u64) -> Vec<SampleView> {
    let mut wakes = vec![0u64; 1000];
    (0..count)
        .map(|i| {
            let unit = (i % 1000) as u32 + 1;
            let start = wakes[unit as usize - 1] + 1_000;
            let intended = start + 1_000 + 1_000_000;
            let wake = intended + 300_000 + (i * 7919) % 1_000_000;
            let previous = wakes[unit as usize - 1];
            wakes[unit as usize - 1] = wake;
            let sample = Sample {
                period: 0,
                start_ns: start,
                busy_end_ns: start + 1_000,
                intended_ns: intended,
                wake_ns: wake,
                missed: 0,
            };
            SampleView::new(unit, (unit - 1) % 2, sample, 1_000_000, (previous > 0).then_some(previous), true)
        })
        .collect()
}

/// The faults folding `views` takes (the row is not ended, and never drops: its vectors are
/// not held for the next).
fn faults_folding(views: &[SampleView]) -> u64 {
    let before = faults();
    let mut row = RowStats::new(2, 4_000_000, false);
    for batch in views.chunks(1024) {
        row.add(batch);
    }
    let taken = faults() - before;
    std::mem::forget(row);
    taken
}

#[test]
fn a_row_fills_the_memory_prepared_for_it_without_faulting_it_in() {
    const SAMPLES: u64 = 1_000_000;
    let views = views(SAMPLES);
    // 3 metrics kept, 4 bytes a value: 12 MB, 2,930 pages.
    let pages = SAMPLES * 3 * 4 / 4096;
    let unprepared = faults_folding(&views);
    let row = RowToCome { classes: 2, measured_on_time: SAMPLES, shortest_sleep_ns: 1_000_000 };
    let written = prepare_kept_values([vec![row]], 4_000_000);
    // 3 lists a class, of half the samples each (in whole pages of 1,024 values).
    assert_eq!(written as u64, 6 * (SAMPLES / 2).next_multiple_of(1024) * 4);
    // taskmeter forks to start each worker: a fork write-protects what the parent wrote, but
    // not lists a child does not inherit.
    // SAFETY: the child calls nothing but _exit.
    match unsafe { libc::fork() } {
        0 => unsafe { libc::_exit(0) },
        child => assert!(child > 0 && unsafe { libc::waitpid(child, std::ptr::null_mut(), 0) } == child),
    }
    let prepared = faults_folding(&views);
    // Huge pages (`transparent_hugepage=always`) would make both few: a fault for each 2 MiB.
    if unprepared >= pages {
        assert!(prepared * 10 < pages, "{prepared} faults folding into prepared memory, {unprepared} without");
    } else {
        assert!(unprepared < pages / 64, "{unprepared} faults without preparing: neither 4 KiB pages nor huge ones");
    }
}
