//! What the kernel counted for a worker over its measured window: CPU time, context switches,
//! migrations, run-queue wait, threads and page faults. taskmeter reads them at the window's
//! start and end, on a thread of its own; the worker's loop does nothing for them.
//!
//! Sources (Linux): the kernel's taskstats (netlink, [`super::taskstats`]: time on a CPU, time
//! runnable but waiting, voluntary and involuntary switches), per thread for workers of at most
//! [`MIGRATIONS_UP_TO_THREADS`] threads, with `se.nr_migrations` from
//! `/proc/PID/task/TID/sched` (a scheduler debug file, absent without `CONFIG_SCHED_DEBUG`), and
//! as the process's sums for larger ones (one query); per process, `/proc/PID/stat`
//! (utime, stime in clock ticks; minor and major faults, exited threads included). Where
//! taskstats cannot be asked (it needs CAP_NET_ADMIN and `CONFIG_TASKSTATS`), every thread's
//! `/proc/PID/task/TID/schedstat` (`CONFIG_SCHED_INFO`) and `sched` (or `status`, which has the
//! switches but no migrations) give the same figures, at ten times the cost (`man 5 proc`).

use super::taskstats::{Exits, Taskstats, ThreadCounts};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::time::Duration;

/// The counters of one window, whole worker process.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, Default)]
pub struct Counters {
    /// CLOCK_MONOTONIC: the first read began at `start_ns`, the last ended at `end_ns`.
    pub start_ns: u64,
    pub end_ns: u64,
    /// The longer of the two reads (taskmeter's time, while the worker ran).
    pub read_ns: u64,
    /// Wake-ups in the window: measured samples whose wake fell between the two reads' starts
    /// (the denominator of every "per wake-up" figure).
    pub wakeups: u64,
    /// Threads of the worker at the window's end.
    pub threads: u32,
    /// Threads that ended in the window: what they did in it is missing from the per-thread
    /// figures (CPU, switches, migrations, run-queue wait), and for a worker read as a whole
    /// (more than [`MIGRATIONS_UP_TO_THREADS`] threads), CPU and run-queue wait include it but
    /// there are no switches. Every thread whose exit the kernel notified between the two
    /// readings, those born in the window too (through taskstats); without it, the threads
    /// listed at the first reading and gone at the last.
    pub threads_exited: u32,
    /// Time on a CPU, every thread (schedstat's first field, ns; from the clock ticks of
    /// utime + stime when schedstat is unavailable).
    pub cpu_ns: u64,
    /// The same time split by mode, from /proc/PID/stat (clock ticks, 10 ms each at 100 Hz).
    pub user_ns: u64,
    pub system_ns: u64,
    /// None when threads ended in the window of a worker read as a whole (more than
    /// [`MIGRATIONS_UP_TO_THREADS`] threads): the kernel's process sums lose their switches.
    pub voluntary_switches: Option<u64>,
    pub involuntary_switches: Option<u64>,
    pub migrations: Option<u64>,
    /// Time runnable but not running, every thread (schedstat's second field, ns).
    pub runqueue_wait_ns: Option<u64>,
    pub minor_faults: u64,
    pub major_faults: u64,
    /// Why a figure is None.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unavailable: Vec<String>,
}

#[derive(Clone, Copy, Default)]
struct Thread {
    on_cpu_ns: Option<u64>,
    wait_ns: Option<u64>,
    voluntary: u64,
    involuntary: u64,
    migrations: Option<u64>,
}

/// One reading of a process.
pub struct Snapshot {
    start_ns: u64,
    end_ns: u64,
    /// Per thread; read as a whole, only which threads there were, or nothing when the
    /// kernel's exit notices count the threads that end ([`Snapshot::ended`]).
    threads: HashMap<u32, Thread>,
    thread_count: u32,
    /// The threads that ended since the first reading, and whether notices were lost
    /// (the count is then a lower bound), from its exit notices: in the last reading of a
    /// process read as a whole through taskstats.
    ended: Option<(u32, bool)>,
    /// Read as a whole (more threads than [`MIGRATIONS_UP_TO_THREADS`]): the process's sums
    /// from taskstats, and `threads` only says which threads there were.
    process: Option<ThreadCounts>,
    /// Migrations were not read: more threads than [`MIGRATIONS_UP_TO_THREADS`].
    migrations_skipped: bool,
    utime_ticks: u64,
    stime_ticks: u64,
    minor_faults: u64,
    major_faults: u64,
}

/// A worker with more threads than this has no migrations figure: the only source is each
/// thread's scheduler debug file, which costs about 15 µs of taskmeter's CPU a thread and a
/// reading (0.3 s for 10,000 threads), ten times the rest of its counters.
pub const MIGRATIONS_UP_TO_THREADS: usize = 1_000;

/// How a reading gets each thread's counters.
enum Source {
    Taskstats(Taskstats),
    Proc,
}

impl Source {
    fn open() -> Source {
        Taskstats::open().map_or(Source::Proc, Source::Taskstats)
    }
}

/// Whether taskstats answers this process (asked once).
fn taskstats_answers() -> bool {
    static ANSWERS: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *ANSWERS.get_or_init(|| Taskstats::open().is_ok())
}

/// How much a reading says: per thread, or the process's sums (decided by the first reading's
/// threads, and kept for the second so that the two can be subtracted).
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Detail {
    PerThread,
    Process,
}

impl Detail {
    /// As a process's number of threads asks.
    fn of(threads: u64) -> Detail {
        match threads as usize <= MIGRATIONS_UP_TO_THREADS {
            true => Detail::PerThread,
            false => Detail::Process,
        }
    }
}

/// Reads every counter of process `pid` now, in `detail`; `list` says whether to list its
/// threads when it is read as a whole (not when the kernel's exit notices count those that end).
fn snapshot(pid: i32, source: &mut Source, detail: Detail, list: bool) -> Result<Snapshot, String> {
    let start_ns = taskmeter_clock::now_ns();
    let gone = |e: std::io::Error| format!("could not read /proc/{pid}: {e}");
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).map_err(gone)?;
    let fields = stat_fields(&stat);
    let field = |n: usize| {
        fields
            .get(n - 3)
            .and_then(|v| v.parse::<u64>().ok())
            .ok_or_else(|| format!("/proc/{pid}/stat has no field {n}"))
    };
    let (minor_faults, major_faults, utime_ticks, stime_ticks) = (field(10)?, field(12)?, field(14)?, field(15)?);
    let tasks = format!("/proc/{pid}/task");
    let by_taskstats = matches!(source, Source::Taskstats(_));
    let tids: Vec<u32> = match list || detail == Detail::PerThread || !by_taskstats {
        true => std::fs::read_dir(&tasks)
            .map_err(gone)?
            .flatten()
            .filter_map(|entry| entry.file_name().to_str()?.parse().ok())
            .collect(),
        false => Vec::new(),
    };
    let thread_count = match tids.is_empty() {
        true => threads_of(pid) as u32,
        false => tids.len() as u32,
    };
    let few = thread_count as usize <= MIGRATIONS_UP_TO_THREADS;
    let mut threads = HashMap::with_capacity(tids.len());
    let mut process = None;
    match (source, detail) {
        (Source::Taskstats(stats), Detail::Process) => {
            process = Some(stats.process(pid as u32).map_err(|e| format!("taskstats of process {pid}: {e}"))?);
            threads.extend(tids.iter().map(|tid| (*tid, Thread::default())));
        }
        (source, _) => {
            for tid in tids {
                let dir = std::path::Path::new(&tasks).join(tid.to_string());
                // A thread that ends while it is read is left out, as one that ended before.
                let thread = match source {
                    Source::Taskstats(stats) => stats.thread(tid).ok().map(|counts| Thread {
                        on_cpu_ns: Some(counts.on_cpu_ns),
                        wait_ns: Some(counts.wait_ns),
                        voluntary: counts.voluntary,
                        involuntary: counts.involuntary,
                        migrations: few.then(|| migrations_of(&dir)).flatten(),
                    }),
                    Source::Proc => read_thread(&dir),
                };
                if let Some(thread) = thread {
                    threads.insert(tid, thread);
                }
            }
        }
    }
    Ok(Snapshot {
        start_ns,
        end_ns: taskmeter_clock::now_ns(),
        threads,
        thread_count,
        ended: None,
        process,
        migrations_skipped: by_taskstats && (process.is_some() || !few),
        utime_ticks,
        stime_ticks,
        minor_faults,
        major_faults,
    })
}

/// `key: value` or `key value` in a /proc text file.
fn value(text: &str, key: &str) -> Option<u64> {
    let line = text.lines().find(|l| l.starts_with(key))?;
    line[key.len()..].trim_start_matches([' ', '\t', ':']).trim().parse().ok()
}

fn migrations_of(dir: &std::path::Path) -> Option<u64> {
    value(&std::fs::read_to_string(dir.join("sched")).ok()?, "se.nr_migrations")
}

fn read_thread(dir: &std::path::Path) -> Option<Thread> {
    let mut thread = Thread::default();
    if let Ok(schedstat) = std::fs::read_to_string(dir.join("schedstat")) {
        let mut fields = schedstat.split_whitespace().map(|v| v.parse::<u64>().ok());
        (thread.on_cpu_ns, thread.wait_ns) = (fields.next().flatten(), fields.next().flatten());
    }
    if let Ok(sched) = std::fs::read_to_string(dir.join("sched")) {
        thread.voluntary = value(&sched, "nr_voluntary_switches")?;
        thread.involuntary = value(&sched, "nr_involuntary_switches")?;
        thread.migrations = value(&sched, "se.nr_migrations");
    } else {
        let status = std::fs::read_to_string(dir.join("status")).ok()?;
        thread.voluntary = value(&status, "voluntary_ctxt_switches")?;
        thread.involuntary = value(&status, "nonvoluntary_ctxt_switches")?;
    }
    Some(thread)
}

/// What happened between two readings of the same process. A thread born in the window counts
/// from zero.
pub fn between(start: &Snapshot, end: &Snapshot) -> Counters {
    let tick_ns = 1_000_000_000 / clock_ticks_per_second();
    let mut c = Counters {
        start_ns: start.start_ns,
        end_ns: end.end_ns,
        read_ns: (start.end_ns - start.start_ns).max(end.end_ns - end.start_ns),
        threads: end.thread_count,
        threads_exited: match end.ended {
            Some((ended, _)) => ended,
            None => start.threads.keys().filter(|tid| !end.threads.contains_key(tid)).count() as u32,
        },
        user_ns: end.utime_ticks.saturating_sub(start.utime_ticks) * tick_ns,
        system_ns: end.stime_ticks.saturating_sub(start.stime_ticks) * tick_ns,
        minor_faults: end.minor_faults.saturating_sub(start.minor_faults),
        major_faults: end.major_faults.saturating_sub(start.major_faults),
        ..Counters::default()
    };
    let (mut on_cpu, mut wait, mut migrations) = (Some(0u64), Some(0u64), Some(0u64));
    let (mut voluntary, mut involuntary) = (0u64, 0u64);
    if let (Some(before), Some(now)) = (start.process, end.process) {
        // The process's sums: time includes the threads that ended, switches do not.
        (on_cpu, wait) =
            (Some(now.on_cpu_ns.saturating_sub(before.on_cpu_ns)), Some(now.wait_ns.saturating_sub(before.wait_ns)));
        (voluntary, involuntary) =
            (now.voluntary.saturating_sub(before.voluntary), now.involuntary.saturating_sub(before.involuntary));
        migrations = None;
    } else {
        let add = |sum: &mut Option<u64>, now: Option<u64>, before: Option<u64>| {
            *sum = match (*sum, now) {
                (Some(s), Some(n)) => Some(s + n.saturating_sub(before.unwrap_or(0))),
                _ => None,
            }
        };
        for (tid, now) in &end.threads {
            let before = start.threads.get(tid).copied().unwrap_or_default();
            voluntary += now.voluntary.saturating_sub(before.voluntary);
            involuntary += now.involuntary.saturating_sub(before.involuntary);
            add(&mut on_cpu, now.on_cpu_ns, before.on_cpu_ns);
            add(&mut wait, now.wait_ns, before.wait_ns);
            add(&mut migrations, now.migrations, before.migrations);
        }
    }
    let notices_dropped = matches!(end.ended, Some((_, true)));
    let switches_lost = start.process.is_some() && (c.threads_exited > 0 || notices_dropped);
    if switches_lost {
        let at_least = if notices_dropped { "at least " } else { "" };
        c.unavailable.push(format!(
            "context switches: {at_least}{} threads ended in the window, and the kernel's sums for a worker of more than {MIGRATIONS_UP_TO_THREADS} threads keep no switches of ended threads",
            c.threads_exited
        ));
    } else {
        (c.voluntary_switches, c.involuntary_switches) = (Some(voluntary), Some(involuntary));
    }
    if notices_dropped && !switches_lost {
        c.unavailable.push(format!("threads ended: at least {}: notices of ended threads were lost", c.threads_exited));
    }
    c.cpu_ns = on_cpu.unwrap_or(c.user_ns + c.system_ns);
    c.runqueue_wait_ns = wait;
    c.migrations = migrations;
    if wait.is_none() {
        c.unavailable.push(
            "cpu and run-queue wait: no /proc/PID/task/TID/schedstat (CONFIG_SCHED_INFO); cpu from clock ticks".into(),
        );
    }
    if start.migrations_skipped || end.migrations_skipped {
        c.unavailable.push(format!(
            "migrations: not read for {} threads (each thread's scheduler file costs about 15 µs a reading; read up to {MIGRATIONS_UP_TO_THREADS})",
            start.thread_count.max(end.thread_count)
        ));
    } else if migrations.is_none() {
        c.unavailable.push("migrations: no se.nr_migrations in /proc/PID/task/TID/sched (CONFIG_SCHED_DEBUG)".into());
    }
    c
}

fn clock_ticks_per_second() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let ticks = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if ticks > 0 {
        ticks as u64
    } else {
        100
    }
}

/// What a reading costs here per thread, about (measured on 500 and 3,000 threads, 2026-11-26):
/// through taskstats 22 µs with each thread's migrations; for a process read as a whole, 2 µs
/// where its threads are listed (without exit notices; with them a reading takes about 0.4 ms,
/// and the estimate only starts it early); through /proc 30 µs (two files).
fn read_ns_per_thread(threads: u64) -> u64 {
    match (taskstats_answers(), threads as usize <= MIGRATIONS_UP_TO_THREADS) {
        (true, true) => 25_000,
        (true, false) => 2_000,
        (false, _) => 30_000,
    }
}

/// When to read the counters of a worker whose gate opened at `run_start_ns`, for the measured
/// window `[measure_start_ns, end_ns]`, given its `threads`. A reading takes time (about 20 ms
/// at 10,000 threads through taskstats) and a CPU, so the first one is timed to end as the window begins (in the
/// warm-up, as far as it reaches), and the last to end 20 ms (a 20th of a short window) before
/// the window's end, so that it finds every unit still there (units end as soon as they wake
/// after the window). Wake-ups are counted between the same two instants.
pub fn reading_times(run_start_ns: u64, measure_start_ns: u64, end_ns: u64, threads: u64) -> (u64, u64) {
    let reading_ns = threads * read_ns_per_thread(threads);
    let margin = ((end_ns - measure_start_ns) / 20).min(20_000_000);
    let first = measure_start_ns.saturating_sub(reading_ns).max(run_start_ns);
    let last = (end_ns - margin).saturating_sub(reading_ns).max(measure_start_ns + (end_ns - measure_start_ns) / 2);
    (first, last)
}

/// The fields of a /proc/PID/stat line after the command name, which may hold spaces and
/// parentheses: field `n` of proc(5) is at `n - 3`.
fn stat_fields(stat: &str) -> Vec<&str> {
    stat.rsplit_once(')').map(|(_, rest)| rest.split_whitespace().collect()).unwrap_or_default()
}

/// Threads of `pid` now, 0 if it is gone: `Threads:` of /proc/PID/status, one read where listing
/// /proc/PID/task took 10-20 ms of kernel time at 10,000 threads (and /proc/PID/stat, which has
/// the count too, sums the CPU time of every thread to write its line).
pub fn threads_of(pid: i32) -> u64 {
    super::status::Status::open(&pid.to_string()).and_then(|mut status| status.field("Threads:")).unwrap_or(0)
}

/// When the two readings of a worker's counters begin (CLOCK_MONOTONIC ns): first as planned
/// ([`reading_times`]), then as they really begin, so that the wake-ups counted between them
/// are those of the window the counters cover, even when a reading starts late.
pub type ReadingTimes = std::sync::Arc<[AtomicU64; 2]>;

pub fn planned(times: (u64, u64)) -> ReadingTimes {
    std::sync::Arc::new([AtomicU64::new(times.0), AtomicU64::new(times.1)])
}

/// Reads the counters of `pid` at `times` (recording when each reading really begins); the
/// last reading comes early when `stop` says the worker was asked to stop (or, disconnected,
/// that it exited). `wakeups` is left for the caller to count.
pub fn over_window(pid: i32, times: &ReadingTimes, stop: &Receiver<()>) -> Result<Counters, String> {
    let until = |at_ns: u64| Duration::from_nanos(at_ns.saturating_sub(taskmeter_clock::now_ns()));
    match stop.recv_timeout(until(times[0].load(Ordering::Acquire))) {
        Err(RecvTimeoutError::Timeout) => {}
        Ok(()) => return Err("the worker was asked to stop before its measured window began".into()),
        Err(RecvTimeoutError::Disconnected) => return Err("the worker ended before its measured window began".into()),
    }
    let mut source = Source::open();
    let detail = Detail::of(threads_of(pid));
    // Through taskstats, the threads that end are counted from the kernel's notices: those born
    // in the window too, and a worker read as a whole need not be listed at each reading.
    let mut exits = match &source {
        Source::Taskstats(_) => Exits::watch(pid as u32).ok(),
        Source::Proc => None,
    };
    let list = exits.is_none();
    let mut reading = |which: usize| {
        times[which].store(taskmeter_clock::now_ns(), Ordering::Release);
        snapshot(pid, &mut source, detail, list)
    };
    let first = reading(0)?;
    let _ = stop.recv_timeout(until(times[1].load(Ordering::Acquire)));
    let mut last = reading(1).map_err(|_| "the worker ended before its measured window closed".to_string())?;
    if let Some(exits) = exits.as_mut() {
        last.ended = Some(exits.ended());
    }
    Ok(between(&first, &last))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A note under the row starts with `start`.
    fn assert_noted(c: &Counters, start: &str) {
        assert!(c.unavailable.iter().any(|u| u.starts_with(start)), "{start}: {:?}", c.unavailable);
    }

    fn thread(on_cpu: u64, wait: u64, voluntary: u64, migrations: u64) -> Thread {
        Thread { on_cpu_ns: Some(on_cpu), wait_ns: Some(wait), voluntary, involuntary: 1, migrations: Some(migrations) }
    }

    fn snap(at: u64, threads: &[(u32, Thread)], ticks: (u64, u64), faults: u64) -> Snapshot {
        Snapshot {
            start_ns: at,
            end_ns: at + 10,
            threads: threads.iter().copied().collect(),
            thread_count: threads.len() as u32,
            ended: None,
            process: None,
            migrations_skipped: false,
            utime_ticks: ticks.0,
            stime_ticks: ticks.1,
            minor_faults: faults,
            major_faults: 0,
        }
    }

    #[test]
    fn deltas_per_thread_with_born_and_exited_threads() {
        let start = snap(1_000, &[(1, thread(100, 10, 5, 1)), (2, thread(50, 5, 2, 0))], (3, 1), 40);
        // Thread 2 exited; thread 3 was born in the window.
        let end = snap(9_000, &[(1, thread(400, 30, 15, 3)), (3, thread(70, 7, 4, 1))], (5, 2), 55);
        let c = between(&start, &end);
        assert_eq!((c.start_ns, c.end_ns, c.read_ns, c.wakeups), (1_000, 9_010, 10, 0));
        assert_eq!((c.threads, c.threads_exited), (2, 1));
        assert_eq!(c.cpu_ns, 300 + 70);
        assert_eq!(c.runqueue_wait_ns, Some(20 + 7));
        assert_eq!(c.voluntary_switches, Some(10 + 4));
        assert_eq!(c.involuntary_switches, Some(1), "thread 1 gained none; the born thread 3 brought its 1");
        assert_eq!(c.migrations, Some(2 + 1));
        let tick = 1_000_000_000 / clock_ticks_per_second();
        assert_eq!((c.user_ns, c.system_ns), (2 * tick, tick));
        assert_eq!(c.minor_faults, 15);
        assert!(c.unavailable.is_empty());
    }

    #[test]
    fn a_missing_source_is_named_not_guessed() {
        let blind = Thread { on_cpu_ns: None, wait_ns: None, voluntary: 3, involuntary: 0, migrations: None };
        let c = between(
            &snap(0, &[(1, blind)], (10, 0), 0),
            &snap(5, &[(1, Thread { voluntary: 7, ..blind })], (12, 1), 0),
        );
        assert_eq!((c.runqueue_wait_ns, c.migrations), (None, None));
        let tick = 1_000_000_000 / clock_ticks_per_second();
        assert_eq!(c.cpu_ns, 3 * tick, "from the clock ticks");
        assert_eq!(c.voluntary_switches, Some(4));
        assert_eq!(c.unavailable.len(), 2);
    }

    #[test]
    fn readings_end_as_the_window_begins_and_before_the_units_end() {
        let ms = 1_000_000;
        // A few threads: the readings are short.
        let few = 4 * read_ns_per_thread(4);
        assert!(few < ms);
        assert_eq!(reading_times(500 * ms, 1000 * ms, 3000 * ms, 4), (1000 * ms - few, 2980 * ms - few));
        // 10,000 threads: 20 ms each through taskstats (300 through /proc), the first in the warm-up.
        let many = 10_000 * read_ns_per_thread(10_000);
        assert!((20 * ms..=300 * ms).contains(&many), "{many}");
        assert_eq!(reading_times(500 * ms, 1000 * ms, 3000 * ms, 10_000), (1000 * ms - many, 2980 * ms - many));
        // No warm-up to read in: the first starts at the gate; a short window keeps its second half.
        assert_eq!(reading_times(1000 * ms, 1000 * ms, 1100 * ms, 100_000), (1000 * ms, 1050 * ms));
    }

    #[test]
    fn stat_fields_skip_the_command_name() {
        let fields = stat_fields("42 (a) (b c) S 1 42 42 0 -1 4194560 1 2 3 4 5 6 7 8 20 0 7 0 99");
        assert_eq!((fields[0], fields[20 - 3]), ("S", "7"), "the command name may hold ') ('");
    }

    #[test]
    fn threads_are_counted() {
        let mut child = std::process::Command::new("sleep").arg("30").spawn().unwrap();
        let threads = threads_of(child.id() as i32);
        child.kill().unwrap();
        child.wait().unwrap();
        assert_eq!(threads, 1, "sleep runs on one thread");
        assert_eq!(threads_of(i32::MAX), 0, "no such process");
        assert!(threads_of(std::process::id() as i32) >= 1);
    }

    #[test]
    fn reads_this_process_from_either_source() {
        let this = std::process::id() as i32;
        for mut source in [Source::open(), Source::Proc] {
            let detail = Detail::of(threads_of(this));
            assert_eq!(detail, Detail::PerThread);
            let first = snapshot(this, &mut source, detail, false).unwrap();
            let mut x = 0u64;
            for i in 0..2_000_000u64 {
                x = std::hint::black_box(x.wrapping_add(i));
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
            let c = between(&first, &snapshot(this, &mut source, detail, false).unwrap());
            assert!(c.threads >= 1);
            assert!(c.voluntary_switches >= Some(1), "the sleep switched out: {c:?}");
            if std::path::Path::new("/proc/self/schedstat").exists() {
                assert!(c.cpu_ns > 0 && c.runqueue_wait_ns.is_some(), "{c:?}");
            }
        }
    }

    /// Read as a whole, a process's time includes its ended threads; its switches are given only
    /// when no thread ended; there are no migrations, and the row says why.
    #[test]
    fn a_process_read_as_a_whole() {
        let sums =
            |cpu, switches| ThreadCounts { on_cpu_ns: cpu, wait_ns: cpu / 10, voluntary: switches, involuntary: 1 };
        let whole = |at, tids: &[u32], counts| Snapshot {
            process: Some(counts),
            migrations_skipped: true,
            threads: tids.iter().map(|t| (*t, Thread::default())).collect(),
            thread_count: tids.len() as u32,
            ..snap(at, &[], (0, 0), 0)
        };
        let c = between(&whole(0, &[1, 2], sums(100, 7)), &whole(9, &[1, 2, 3], sums(400, 10)));
        assert_eq!(
            (c.cpu_ns, c.runqueue_wait_ns, c.voluntary_switches, c.involuntary_switches),
            (300, Some(30), Some(3), Some(0))
        );
        assert_eq!(c.migrations, None);
        assert!(c.unavailable.iter().any(|u| u.starts_with("migrations: not read for")), "{:?}", c.unavailable);
        // Thread 2 ended: the time stays right, the switches are not given.
        let c = between(&whole(0, &[1, 2], sums(100, 7)), &whole(9, &[1], sums(400, 5)));
        assert_eq!((c.cpu_ns, c.voluntary_switches, c.threads_exited), (300, None, 1));
        assert_noted(&c, "context switches: 1 threads ended");
    }

    /// With the kernel's exit notices, the count comes from them (threads born in the window and
    /// ended in it too), and a process read as a whole is not listed; dropped notices make its
    /// switches unknown even when none was counted, and a count read per thread a lower bound,
    /// each said.
    #[test]
    fn a_process_read_as_a_whole_with_exit_notices() {
        let sums = |cpu, switches| ThreadCounts { on_cpu_ns: cpu, wait_ns: 0, voluntary: switches, involuntary: 0 };
        let whole = |at, threads, counts, ended| Snapshot {
            process: Some(counts),
            migrations_skipped: true,
            thread_count: threads,
            ended,
            ..snap(at, &[], (0, 0), 0)
        };
        let start = whole(0, 5_000, sums(100, 7), None);
        let c = between(&start, &whole(9, 5_000, sums(400, 10), Some((0, false))));
        assert_eq!((c.threads, c.threads_exited, c.voluntary_switches), (5_000, 0, Some(3)));
        // As many threads as before, but one was born and one ended: the switches are not given.
        let c = between(&start, &whole(9, 5_000, sums(400, 10), Some((1, false))));
        assert_eq!((c.threads, c.threads_exited, c.voluntary_switches), (5_000, 1, None));
        assert_noted(&c, "context switches: 1 threads ended");
        let c = between(&start, &whole(9, 5_000, sums(400, 10), Some((0, true))));
        assert_eq!((c.threads_exited, c.voluntary_switches), (0, None));
        assert_noted(&c, "context switches: at least 0 threads");
        assert_noted(&c, "migrations: not read for 5000 threads");
        // Read per thread, dropped notices make the count a lower bound, said so.
        let one = [(1, thread(1, 1, 1, 0))];
        let per_thread = Snapshot { ended: Some((2, true)), ..snap(9, &one, (0, 0), 0) };
        let c = between(&snap(0, &one, (0, 0), 0), &per_thread);
        assert_eq!((c.threads_exited, c.voluntary_switches), (2, Some(0)));
        assert_noted(&c, "threads ended: at least 2");
    }

    /// A worker's threads that end in the window are counted, per thread (20) and read as a
    /// whole (1,100, not listed): 7 of those there at the first reading, and, from the kernel's
    /// exit notices, 3 born after it and ended before the last, which no listing sees.
    #[test]
    fn the_threads_that_end_in_the_window_are_counted() {
        for threads in [20, 1_100] {
            let c = window_of_a_process_whose_threads_end(threads);
            let born_and_ended = if taskstats_answers() { 3 } else { 0 };
            assert_eq!(c.threads_exited, 7 + born_and_ended, "{threads}: {c:?}");
            assert_eq!(c.threads as usize, threads + 1 - 7, "{threads}: {c:?}");
            if taskstats_answers() && threads > MIGRATIONS_UP_TO_THREADS {
                // Read as a whole: the switches of ended threads are gone, and the row says so.
                assert_eq!(c.voluntary_switches, None, "{c:?}");
            }
        }
    }

    /// The counters of a Python process of `threads` waiting threads over a window in which 3
    /// threads are born and end, then 7 of the waiting ones end (a joined Python thread may still
    /// be ending in the kernel: the script waits until its thread count says they are gone).
    fn window_of_a_process_whose_threads_end(threads: usize) -> Counters {
        use std::io::{BufRead, Write};
        let script = format!(
            "import threading, time\n\
             stop, rest = threading.Event(), threading.Event()\n\
             ts = [threading.Thread(target=(stop if i < 7 else rest).wait) for i in range({threads})]\n\
             [t.start() for t in ts]\n\
             print('ready', flush=True)\n\
             input()\n\
             born = [threading.Thread(target=lambda: None) for _ in range(3)]\n\
             [t.start() for t in born]\n\
             [t.join() for t in born]\n\
             stop.set()\n\
             [t.join() for t in ts[:7]]\n\
             left = lambda: int(next(l for l in open('/proc/self/status') if l.startswith('Threads:')).split()[1])\n\
             while left() > {threads} + 1 - 7: time.sleep(0.01)\n\
             print('ended', flush=True)\n\
             input()\n\
             rest.set()\n"
        );
        let mut child = std::process::Command::new("python3")
            .args(["-c", &script])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3");
        let pid = child.id() as i32;
        let (mut stdin, mut stdout) =
            (child.stdin.take().unwrap(), std::io::BufReader::new(child.stdout.take().unwrap()));
        let mut line = String::new();
        stdout.read_line(&mut line).unwrap();
        assert_eq!(line, "ready\n");
        // The first reading at once (its start is written when it begins), the second when told.
        let times = planned((0, taskmeter_clock::now_ns() + 60_000_000_000));
        let (tell, stop) = std::sync::mpsc::channel();
        let reader = {
            let times = times.clone();
            std::thread::spawn(move || over_window(pid, &times, &stop))
        };
        while times[0].load(Ordering::Acquire) == 0 {
            std::thread::sleep(Duration::from_millis(10));
        }
        // Time for the first reading to end (it lists the threads, or reads each of them).
        std::thread::sleep(Duration::from_millis(300));
        writeln!(stdin).unwrap();
        stdout.read_line(&mut line).unwrap();
        tell.send(()).unwrap();
        let counters = reader.join().unwrap().unwrap();
        writeln!(stdin).unwrap();
        child.wait().unwrap();
        counters
    }

    /// Past the thread limit, migrations are not read, and the row says why.
    #[test]
    fn many_threads_have_no_migrations_and_say_why() {
        let no_migrations = Thread { migrations: None, ..thread(1, 1, 1, 0) };
        let many = |at| Snapshot { migrations_skipped: true, ..snap(at, &[(1, no_migrations)], (0, 0), 0) };
        let c = between(&many(0), &many(5));
        assert_eq!(c.migrations, None);
        assert!(c.unavailable.iter().any(|u| u.starts_with("migrations: not read for")), "{:?}", c.unavailable);
    }
}
