//! The one clock every process shares: CLOCK_MONOTONIC in nanoseconds, and OS sleeps on it.

pub use taskmeter_clock::now_ns;

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
