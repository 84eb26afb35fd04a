//! The one clock every process shares: CLOCK_MONOTONIC in nanoseconds, and OS sleeps on it.

/// Nanoseconds on CLOCK_MONOTONIC (the clock of `std::time::Instant` on Linux, read directly so
/// the value can be compared across processes and languages).
#[inline]
pub fn now_ns() -> u64 {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a valid out-pointer; CLOCK_MONOTONIC always exists on Linux.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// Sleeps the calling thread until `deadline_ns` on CLOCK_MONOTONIC (an absolute deadline, so
/// the time spent before the call does not add to the wake-up time).
pub fn sleep_until_ns(deadline_ns: u64) {
    let ts = libc::timespec {
        tv_sec: (deadline_ns / 1_000_000_000) as libc::time_t,
        tv_nsec: (deadline_ns % 1_000_000_000) as libc::c_long,
    };
    // SAFETY: plain syscall with a valid timespec; restarted when a signal interrupts it.
    while unsafe { libc::clock_nanosleep(libc::CLOCK_MONOTONIC, libc::TIMER_ABSTIME, &ts, std::ptr::null_mut()) }
        == libc::EINTR
    {}
}

/// The `std::time::Instant` of a CLOCK_MONOTONIC timestamp, for runtimes whose timers take an
/// Instant. Reading our clock before `Instant::now()` makes any error a few ns *late*, never early.
pub fn instant_at(deadline_ns: u64) -> std::time::Instant {
    let now_ns = now_ns();
    let now = std::time::Instant::now();
    now + std::time::Duration::from_nanos(deadline_ns.saturating_sub(now_ns))
}
